//! A Kubernetes API server for the tests (there is no kube-apiserver package to test against):
//! HTTPS on 127.0.0.1 with client-certificate and bearer-token authentication like a real
//! one, serving nodes, pods (and `pods/status`), leases, namespaces, events and the
//! discovery documents kubectl asks for. It is faithful where podvisor depends on it, each
//! rule written from the API server's behaviour, not from podvisor's code:
//!
//! - resourceVersion: one counter, every write bumps it; an update or patch naming a
//!   resourceVersion that is not the object's is `409 Conflict`; a lease update without one
//!   is `422` (leases refuse unconditional updates);
//! - create of a taken name: `409 AlreadyExists`; missing objects and namespaces: `404`;
//! - delete: `preconditions.uid` not the object's uid is `409 Conflict`; a graceful delete of
//!   a pod bound to a node only sets `deletionTimestamp` (the node deletes it with
//!   `gracePeriodSeconds: 0`);
//! - `pods/{name}/status` and `nodes/{name}/status`: spec changes ignored (and for pods
//!   deletionTimestamp and ownerReferences), a `metadata.uid` in the patch that is not the
//!   object's is `409 Conflict` (the kubelet's uid precondition);
//! - `application/merge-patch+json` applied as RFC 7386 (other patch types: `415`);
//! - strict field validation of every body and patch result: decoded into k8s-openapi's
//!   type (generated from the API's OpenAPI schema) and refused with `400` when a field is
//!   unknown or has the wrong type;
//! - NodeRestriction ([`admission`]) for `system:node:*` users;
//! - watches of pods (`watch=1`, `fieldSelector`, `resourceVersion`, bookmarks,
//!   `timeoutSeconds`), chunked, as newline-separated JSON events; a resourceVersion older
//!   than the history kept is `410 Gone`.
//!
//! Faults ([`Faults`]): down (connections refused, open ones cut), slow answers, every
//! answer a 500 or a 429 with `Retry-After`, conflicts injected into writes, and a serving
//! certificate from another CA.

pub mod admission;
pub mod http;
pub mod store;
pub mod validate;

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use store::Store;

/// Faults the server is told to show.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Every answer is delayed this long.
    pub delay: Duration,
    /// Every API answer (not discovery) is this status (500, 503, 429...).
    pub status: Option<u16>,
    /// `Retry-After` seconds sent with `status`.
    pub retry_after: Option<u64>,
    /// The next N writes (POST, PUT, PATCH, DELETE) are `409 Conflict`.
    pub conflicts: u32,
}

/// A certificate and key (PEM) signed by the test CA.
pub struct Credentials {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The test CA.
pub struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    pub ca_pem: String,
}

impl Pki {
    pub fn new(dir: &Path, name: &str) -> Pki {
        let key = KeyPair::generate().expect("ca key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("ca");
        let ca_pem = cert.pem();
        std::fs::create_dir_all(dir).expect("pki dir");
        std::fs::write(dir.join(format!("{name}.crt")), &ca_pem).expect("write ca");
        Pki {
            dir: dir.to_path_buf(),
            issuer: Issuer::new(params, key),
            ca_pem,
        }
    }

    pub fn ca_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.crt"))
    }

    /// A certificate for `cn` in groups `orgs` (client) or for 127.0.0.1 (server), written
    /// as `<file>.crt` and `<file>.key`.
    pub fn issue(&self, file: &str, cn: &str, orgs: &[&str], server: bool) -> Credentials {
        let key = KeyPair::generate().expect("key");
        let sans = if server {
            vec!["127.0.0.1".to_string(), "localhost".to_string()]
        } else {
            vec![]
        };
        let mut params = CertificateParams::new(sans).expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        let cert = params.signed_by(&key, &self.issuer).expect("sign");
        let c = Credentials {
            cert: self.dir.join(format!("{file}.crt")),
            key: self.dir.join(format!("{file}.key")),
        };
        std::fs::write(&c.cert, cert.pem()).expect("write cert");
        std::fs::write(&c.key, key.serialize_pem()).expect("write key");
        c
    }
}

/// What a connection handler needs.
pub struct Shared {
    pub store: Mutex<Store>,
    pub faults: Mutex<Faults>,
    /// Requests seen: (method, path without query).
    pub requests: Mutex<Vec<(String, String, std::time::Instant)>>,
    /// Bearer tokens: token -> (user, groups).
    pub tokens: Mutex<Vec<(String, String, Vec<String>)>>,
    pub store_changed: std::sync::Condvar,
    up: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
}

/// The running server.
pub struct ApiServer {
    pub addr: SocketAddr,
    pub shared: Arc<Shared>,
    pub pki: Pki,
    tls: Mutex<Arc<ServerConfig>>,
    accept: Mutex<Option<std::thread::JoinHandle<()>>>,
    dir: PathBuf,
}

fn server_config(pki: &Pki, serving: &Credentials) -> Arc<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
        roots.add(c.expect("ca pem")).expect("root");
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .expect("verifier");
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&serving.cert)
        .expect("cert")
        .map(|c| c.expect("cert"))
        .collect();
    let key = PrivateKeyDer::from_pem_file(&serving.key).expect("key");
    Arc::new(
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)
            .expect("server config"),
    )
}

impl ApiServer {
    /// Starts on a free 127.0.0.1 port with its PKI in `dir`.
    pub fn start(dir: &Path) -> Arc<ApiServer> {
        let pki = Pki::new(dir, "ca");
        let serving = pki.issue("server", "kube-apiserver", &[], true);
        let tls = server_config(&pki, &serving);
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            faults: Mutex::new(Faults::default()),
            requests: Mutex::new(Vec::new()),
            tokens: Mutex::new(Vec::new()),
            store_changed: std::sync::Condvar::new(),
            up: AtomicBool::new(true),
            conns: Mutex::new(Vec::new()),
        });
        let s = Arc::new(ApiServer {
            addr,
            shared,
            pki,
            tls: Mutex::new(tls),
            accept: Mutex::new(None),
            dir: dir.to_path_buf(),
        });
        s.spawn_accept(listener);
        s
    }

    fn spawn_accept(self: &Arc<Self>, listener: TcpListener) {
        let me = Arc::clone(self);
        let h = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if !me.shared.up.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                if let Ok(c) = conn.try_clone() {
                    me.shared.conns.lock().expect("conns").push(c);
                }
                let tls = Arc::clone(&me.tls.lock().expect("tls"));
                let shared = Arc::clone(&me.shared);
                std::thread::spawn(move || http::serve_connection(conn, tls, &shared));
            }
        });
        *self.accept.lock().expect("accept") = Some(h);
    }

    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Down: the port refuses connections and every open one is cut.
    pub fn stop(&self) {
        self.shared.up.store(false, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag and drops the listener.
        let _ = TcpStream::connect(self.addr);
        if let Some(h) = self.accept.lock().expect("accept").take() {
            let _ = h.join();
        }
        for c in self.shared.conns.lock().expect("conns").drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        self.shared.store_changed.notify_all();
    }

    /// Up again on the same port.
    pub fn restart(self: &Arc<Self>) {
        let listener = (0..100)
            .find_map(|_| {
                TcpListener::bind(self.addr).ok().or_else(|| {
                    std::thread::sleep(Duration::from_millis(50));
                    None
                })
            })
            .expect("rebind the same port");
        self.shared.up.store(true, Ordering::SeqCst);
        self.spawn_accept(listener);
    }

    /// Serves with a certificate from another CA (the client's CA no longer matches).
    pub fn use_foreign_certificate(&self) {
        let other = Pki::new(&self.dir.join("other"), "other-ca");
        let serving = other.issue("server", "impostor", &[], true);
        *self.tls.lock().expect("tls") = server_config(&self.pki, &serving);
    }

    /// Serves with its own certificate again.
    pub fn use_own_certificate(&self) {
        let serving = Credentials {
            cert: self.dir.join("server.crt"),
            key: self.dir.join("server.key"),
        };
        *self.tls.lock().expect("tls") = server_config(&self.pki, &serving);
    }

    pub fn set_faults(&self, f: Faults) {
        *self.shared.faults.lock().expect("faults") = f;
    }

    /// A kubeconfig for `user` (client certificate) in `dir`.
    pub fn kubeconfig(&self, path: &Path, creds: &Credentials) {
        let text = format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
             clusters:\n- name: fake\n  cluster:\n    server: {}\n    certificate-authority: {}\n\
             users:\n- name: node\n  user:\n    client-certificate: {}\n    client-key: {}\n\
             contexts:\n- name: other\n  context: {{cluster: nowhere, user: nobody}}\n\
             - name: test\n  context: {{cluster: fake, user: node}}\n",
            self.url(),
            self.pki.ca_path("ca").display(),
            creds.cert.display(),
            creds.key.display()
        );
        std::fs::write(path, text).expect("kubeconfig");
    }

    /// An object (`pods/ns/name`, `nodes//name`, `leases/ns/name`).
    pub fn get(&self, key: &str) -> Option<serde_json::Value> {
        self.shared
            .store
            .lock()
            .expect("store")
            .objects
            .get(key)
            .cloned()
    }

    /// Every object of `kind` (`pods`, `nodes`, `leases`).
    pub fn list(&self, kind: &str) -> Vec<serde_json::Value> {
        let prefix = format!("{kind}/");
        self.shared
            .store
            .lock()
            .expect("store")
            .objects
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Requests since `since` (method, path).
    pub fn requests_since(&self, since: std::time::Instant) -> Vec<(String, String)> {
        self.shared
            .requests
            .lock()
            .expect("requests")
            .iter()
            .filter(|(_, _, t)| *t >= since)
            .map(|(m, p, _)| (m.clone(), p.clone()))
            .collect()
    }

    /// As an administrator (kubectl would): delete an object, graceful unless `grace0`.
    pub fn admin_delete(&self, key: &str, grace0: bool) {
        let mut st = self.shared.store.lock().expect("store");
        st.delete_as_admin(key, grace0);
        drop(st);
        self.shared.store_changed.notify_all();
    }
}
