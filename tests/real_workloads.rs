//! Root integration test of real workloads (tests/real-workloads/, sources in its SOURCES
//! file; docs/real-workloads.md): real static-pod manifests run with the real programs
//! (etcd, haproxy, nginx, mosquitto, node-exporter from Debian 12's packages, built into
//! images by tests/images/build-deb-image.sh and imported under the references the manifests
//! name), their own command lines and args, and their own liveness, readiness and startup
//! probes, on test nodes whose host files are written as each project's installer writes them.
//! Every pod must become Ready (condition Ready=True, every container ready); a workload
//! killed from the host must come back (its restart count goes up, it is Ready again).
//!
//! The nodes: `a` and `b` are network namespaces of their own (the pods there use the host
//! network, with the ports their manifests name: two etcds, two haproxies and an nginx cannot
//! share one), each with the node address 10.0.0.10 on its loopback and a stand-in for the
//! kube-apiserver that the load balancers forward to; `c` runs in the host's network
//! namespace (its pods are in network namespaces of their own) and pulls `nginx` (`:latest`,
//! pull policy Always) from a loopback registry configured as docker.io's mirror.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::{Daemon, KeepLogOnPanic};
use common::netns::TestNetns;
use common::registry::{registries_yaml, Registry};
use common::TestEnv;
use podvisor::images::{ImageStore, ImportOptions};
use podvisor::status::PodView;
use serde_json::{json, Value};

/// How long the pods may take to become Ready, all nodes together (kubeadm's etcd waits
/// 10 s before its first startup probe; a loaded 2-core machine starts 11 pods).
const READY: Duration = Duration::from_secs(150);
/// How long a killed workload may take to be Ready again (its restart, at most the kubelet's
/// 10 s first back-off, then etcd's startup probe waits 10 s; measured: 10 s in all).
const BACK: Duration = Duration::from_secs(90);
/// Longer than the longest probe period of the corpus (10 s): every probe runs again.
const PERIOD: Duration = Duration::from_secs(12);
/// How long the pods may take to go once their manifests are removed.
const GONE: Duration = Duration::from_secs(90);

/// The node address of the manifests and host files (kubeadm's advertise address).
const NODE_IP: &str = "10.0.0.10";

/// The images: a build-deb-image.sh profile and the references the manifests name.
const IMAGES: &[(&str, &[&str])] = &[
    (
        "etcd",
        &["k8s.gcr.io/etcd:3.4.13-0", "k8s.gcr.io/etcd:3.5.3-0"],
    ),
    (
        "haproxy",
        &["haproxy:2.1.4", "docker.io/library/haproxy:2.8.2-alpine"],
    ),
    (
        "nginx",
        &["docker.io/library/nginx:1.25.2-alpine", "nginx:1.14.2"],
    ),
    ("mosquitto", &["eclipse-mosquitto:1.5.8"]),
    ("node-exporter", &["prom/node-exporter:v1.2.2"]),
];

/// One test node: its manifests (files of tests/real-workloads/) and whether it has a
/// network namespace of its own.
struct NodeSpec {
    name: &'static str,
    netns: bool,
    files: &'static [&'static str],
}

const NODES: &[NodeSpec] = &[
    NodeSpec {
        name: "a",
        netns: true,
        files: &[
            "kubeadm-etcd-v1.20.yaml",
            "kubeadm-ha-haproxy.yaml",
            "kubespray-nginx-proxy.yaml",
            "grafana-node-exporter-v1.2.2.yaml",
            "smartcity-mqtt.yaml",
        ],
    },
    NodeSpec {
        name: "b",
        netns: true,
        files: &[
            "gce-etcd.manifest.json",
            "gce-etcd-events.manifest.json",
            "kubespray-haproxy.yaml",
        ],
    },
    NodeSpec {
        name: "c",
        netns: false,
        files: &[
            "docs-static-web.yaml",
            "docs-lifecycle-events.yaml",
            "docs-simple-pod.yaml",
        ],
    },
];

/// The pod whose main process the test kills: kubeadm's etcd on node `a` (its startup probe
/// keeps it not Ready for at least 10 s after the restart, so the test sees it go and come
/// back).
const KILLED: (&str, &str) = ("a", "kubeadm-etcd-v1.20.yaml");

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real-workloads")
}

/// Runs `cmd`; its stdout, or a panic naming the command and what it printed.
fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The OCI archives of [`IMAGES`], built by tests/images/build-deb-image.sh into the target
/// directory; an archive is rebuilt only when the script changed (its hash names the file),
/// and the .debs are downloaded once (`DEB_CACHE`).
fn build_images() -> Vec<(&'static str, PathBuf)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/images/build-deb-image.sh");
    let key =
        &common::image::sha256_hex(&fs::read(&script).expect("read build-deb-image.sh"))[..16];
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("deb-images");
    fs::create_dir_all(&dir).expect("deb-images dir");
    IMAGES
        .iter()
        .map(|(profile, _)| {
            let out = dir.join(format!("{profile}-{key}.tar"));
            // Archives of an earlier script are stale: removed, not kept alongside.
            for old in fs::read_dir(&dir).expect("deb-images dir").flatten() {
                let name = old.file_name().to_string_lossy().into_owned();
                if name.starts_with(&format!("{profile}-"))
                    && name.ends_with(".tar")
                    && old.path() != out
                {
                    fs::remove_file(old.path()).expect("remove a stale image archive");
                }
            }
            if !out.exists() {
                run(Command::new(&script)
                    .arg(profile)
                    .arg(&out)
                    .env("DEB_CACHE", dir.join("debs")));
            }
            (*profile, out)
        })
        .collect()
}

/// Makes `scratch` the part of a freshly installed Debian node that the pods' hostPaths
/// name (as tests/real_manifests.rs does): what debootstrap makes, nothing an installer writes.
fn fresh_node(scratch: &Path) {
    for d in ["etc", "var/lib", "var/log", "run", "tmp", "mnt"] {
        fs::create_dir_all(scratch.join(d)).expect("fresh node dir");
    }
    fs::copy("/etc/localtime", scratch.join("etc/localtime")).expect("copy /etc/localtime");
}

/// Writes `text` to `path` below `scratch`, making its directory.
fn install(scratch: &Path, path: &str, text: &[u8]) {
    let p = scratch.join(path);
    fs::create_dir_all(p.parent().expect("parent")).expect("installer dir");
    fs::write(&p, text).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
}

/// A key and a certificate signed by `ca` (a self-signed CA when None) with `openssl`, as
/// kubeadm's certs phase makes them: RSA 2048, the CA for 10 years, the others for one.
fn openssl_cert(dir: &Path, name: &str, subject: &str, ca: Option<&str>, extensions: &str) {
    let key = dir.join(format!("{name}.key"));
    let crt = dir.join(format!("{name}.crt"));
    let ext = dir.join(format!("{name}.ext"));
    fs::write(&ext, extensions).expect("write extensions");
    match ca {
        None => {
            run(Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650",
                ])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&crt)
                .args(["-subj", subject, "-extensions", "v3", "-config"])
                .arg(&ext));
        }
        Some(ca) => {
            let csr = dir.join(format!("{name}.csr"));
            run(Command::new("openssl")
                .args(["req", "-new", "-newkey", "rsa:2048", "-nodes"])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&csr)
                .args(["-subj", subject]));
            run(Command::new("openssl")
                .args(["x509", "-req", "-days", "365", "-set_serial"])
                .arg(format!(
                    "0x{}",
                    &common::image::sha256_hex(name.as_bytes())[..16]
                ))
                .arg("-in")
                .arg(&csr)
                .arg("-CA")
                .arg(dir.join(format!("{ca}.crt")))
                .arg("-CAkey")
                .arg(dir.join(format!("{ca}.key")))
                .arg("-out")
                .arg(&crt)
                .args(["-extensions", "v3", "-extfile"])
                .arg(&ext));
            fs::remove_file(&csr).expect("remove csr");
        }
    }
    fs::remove_file(&ext).expect("remove extensions");
}

/// kubeadm's PKI of a control-plane node `cp-0` at [`NODE_IP`] (`kubeadm init phase certs`):
/// the cluster CA and the API server's serving certificate in /etc/kubernetes/pki, etcd's
/// CA, server, peer and healthcheck-client certificates in /etc/kubernetes/pki/etcd, with
/// kubeadm's subjects, key usages and SANs.
fn kubeadm_pki(scratch: &Path) {
    const CA: &str = "[req]\ndistinguished_name=dn\n[dn]\n[v3]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,digitalSignature,keyEncipherment,keyCertSign\nsubjectKeyIdentifier=hash\n";
    let pki = scratch.join("etc/kubernetes/pki");
    let etcd = pki.join("etcd");
    fs::create_dir_all(&etcd).expect("pki dir");
    let serving = |sans: &str, usages: &str| {
        format!(
            "[v3]\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage={usages}\nbasicConstraints=critical,CA:FALSE\nauthorityKeyIdentifier=keyid\n{sans}"
        )
    };
    let node_sans = format!(
        "subjectAltName=DNS:cp-0,DNS:localhost,IP:{NODE_IP},IP:127.0.0.1,IP:0:0:0:0:0:0:0:1\n"
    );
    openssl_cert(&pki, "ca", "/CN=kubernetes", None, CA);
    openssl_cert(
        &pki,
        "apiserver",
        "/CN=kube-apiserver",
        Some("ca"),
        &serving(
            &format!("subjectAltName=DNS:cp-0,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.96.0.1,IP:{NODE_IP}\n"),
            "serverAuth",
        ),
    );
    openssl_cert(&etcd, "ca", "/CN=etcd-ca", None, CA);
    for name in ["server", "peer"] {
        openssl_cert(
            &etcd,
            name,
            "/CN=cp-0",
            Some("ca"),
            &serving(&node_sans, "serverAuth,clientAuth"),
        );
    }
    openssl_cert(
        &etcd,
        "healthcheck-client",
        "/CN=kube-etcd-healthcheck-client",
        Some("ca"),
        &serving("", "clientAuth"),
    );
}

/// What each project's installer writes on node `node` before its manifests are placed.
fn install_host_files(node: &str, scratch: &Path) {
    let files = corpus_dir().join("files");
    let file = |name: &str| fs::read(files.join(name)).expect("tests/real-workloads/files");
    match node {
        "a" => {
            // kubeadm init: the PKI, then the manifests; ha-considerations.md: haproxy.cfg.
            kubeadm_pki(scratch);
            install(
                scratch,
                "etc/haproxy/haproxy.cfg",
                &file("kubeadm-ha-haproxy.cfg"),
            );
            // kubespray's kubernetes/node role: /etc/nginx/nginx.conf (nginx_config_dir).
            install(
                scratch,
                "etc/nginx/nginx.conf",
                &file("kubespray-nginx.conf"),
            );
        }
        "b" => {
            // configure-helper.sh: the master PD mounted on /mnt/master-pd with var/etcd on
            // it, /etc/srv/kubernetes (the credentials dir).
            for d in ["mnt/master-pd/var/etcd", "etc/srv/kubernetes"] {
                fs::create_dir_all(scratch.join(d)).expect("configure-helper dir");
            }
            // Its prepare-log-file: the etcd logs the manifests mount (FileOrCreate).
            for log in ["var/log/etcd.log", "var/log/etcd-events.log"] {
                install(scratch, log, b"");
            }
            // The apiserver stand-in's certificate (a kubeadm-style PKI).
            kubeadm_pki(scratch);
            // kubespray's kubernetes/node role: /etc/haproxy/haproxy.cfg (haproxy_config_dir).
            install(
                scratch,
                "etc/haproxy/haproxy.cfg",
                &file("kubespray-haproxy.cfg"),
            );
        }
        _ => {}
    }
}

/// The hostPaths a pod names, moved below the node's scratch directory, except /proc and
/// /sys (node-exporter reads the host's, as on a real node; it writes nothing).
fn adapt_host_paths(pod: &mut Value, scratch: &Path) {
    for v in pod["spec"]["volumes"].as_array_mut().into_iter().flatten() {
        if let Some(hp) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
            let path = hp["path"].as_str().expect("hostPath.path").to_string();
            if path != "/proc" && path != "/sys" {
                let moved = scratch.join(path.trim_start_matches('/'));
                hp.insert("path".into(), json!(moved.display().to_string()));
            }
        }
    }
}

/// How long after its container starts every liveness probe of `pod` has run at least once
/// (and its startup probe, which the liveness probe waits for): the sums of
/// initialDelaySeconds and periodSeconds (the API's defaults: 0 and 10), plus 5 s; zero
/// without a liveness probe.
fn liveness_window(pod: &Value) -> Duration {
    let mut secs = 0;
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        if c.get("livenessProbe").is_none() {
            continue;
        }
        let mut s = 5;
        for probe in ["startupProbe", "livenessProbe"] {
            if let Some(p) = c.get(probe) {
                s += p["initialDelaySeconds"].as_u64().unwrap_or(0);
                s += p["periodSeconds"].as_u64().unwrap_or(10);
            }
        }
        secs = secs.max(s);
    }
    Duration::from_secs(secs)
}

/// One pod of the test.
struct Workload {
    file: &'static str,
    namespace: String,
    name: String,
    containers: usize,
    pod: Value,
}

fn load(file: &'static str, scratch: &Path) -> Workload {
    let text = fs::read_to_string(corpus_dir().join(file)).expect("read manifest");
    let mut pod: Value = if file.ends_with(".json") {
        serde_json::from_str(&text).expect("json manifest")
    } else {
        serde_saphyr::from_str(&text).expect("yaml manifest")
    };
    adapt_host_paths(&mut pod, scratch);
    let meta = &pod["metadata"];
    Workload {
        file,
        namespace: meta["namespace"].as_str().unwrap_or("default").to_string(),
        name: meta["name"].as_str().expect("metadata.name").to_string(),
        containers: pod["spec"]["containers"].as_array().map_or(0, Vec::len),
        pod,
    }
}

/// A test node: its environment (state root, cgroup parent), network namespace, scratch
/// root of its hostPaths, manifest directory, daemon and apiserver stand-in.
struct Node {
    spec: &'static NodeSpec,
    workloads: Vec<Workload>,
    scratch: PathBuf,
    manifests: PathBuf,
    apiserver: Option<Child>,
    daemon: Option<Daemon>,
    _log: KeepLogOnPanic,
    ns: Option<TestNetns>,
    env: TestEnv,
}

impl Node {
    fn new(spec: &'static NodeSpec, images: &[(&str, PathBuf)]) -> Node {
        let env = TestEnv::new(&format!("realwl-{}", spec.name));
        let scratch = env.dir.path().join("node");
        fresh_node(&scratch);
        install_host_files(spec.name, &scratch);
        let workloads: Vec<Workload> = spec.files.iter().map(|f| load(f, &scratch)).collect();
        // The images the node's manifests name (the others are not on this node).
        let named = |r: &str| {
            workloads.iter().any(|w| {
                w.pod["spec"]["containers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["image"] == r)
            })
        };
        let store = ImageStore::open(&env.root.join("images")).expect("image store");
        for (profile, refs) in IMAGES {
            let archive = &images.iter().find(|(p, _)| p == profile).expect("built").1;
            for r in refs.iter().filter(|r| named(r)) {
                store
                    .import_archive(
                        archive,
                        &ImportOptions {
                            reference: Some(r.to_string()),
                            pinned: false,
                        },
                    )
                    .unwrap_or_else(|e| panic!("import {} as {r}: {e}", archive.display()));
            }
        }
        let ns = spec.netns.then(|| {
            let ns = TestNetns::new(&format!("rw{}", spec.name));
            ns.run(
                "ip",
                &["addr", "add", &format!("{NODE_IP}/32"), "dev", "lo"],
            );
            ns
        });
        let manifests = env.dir.path().join("manifests");
        fs::create_dir_all(&manifests).expect("manifest dir");
        Node {
            spec,
            workloads,
            manifests,
            apiserver: None,
            daemon: None,
            _log: KeepLogOnPanic(env.dir.path().join("daemon.log")),
            ns,
            scratch,
            env,
        }
    }

    fn daemon(&self) -> &Daemon {
        self.daemon.as_ref().expect("daemon started")
    }

    /// The kube-apiserver the load balancers forward to (kubeadm's cp-0 at
    /// [`NODE_IP`]:6443): `openssl s_server` with the API server's kubeadm certificate,
    /// answering every GET with 200 (`-www`), as /healthz does. A stand-in: the test runs no
    /// kube-apiserver; the load balancers, their health checks and probes are real.
    fn start_apiserver(&mut self) {
        let ns = self.ns.as_ref().expect("netns");
        let pki = self.scratch.join("etc/kubernetes/pki");
        let log = fs::File::create(self.env.dir.path().join("apiserver.log")).expect("log");
        let child = ns
            .cmd("openssl")
            .args(["s_server", "-quiet", "-www", "-accept"])
            .arg(format!("{NODE_IP}:6443"))
            .arg("-cert")
            .arg(pki.join("apiserver.crt"))
            .arg("-key")
            .arg(pki.join("apiserver.key"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("openssl s_server");
        self.apiserver = Some(child);
        common::wait_until("the apiserver stand-in listening", READY, || {
            ns.cmd("curl")
                .args(["-sk", "-m", "2", "-o", "/dev/null"])
                .arg(format!("https://{NODE_IP}:6443/healthz"))
                .status()
                .is_ok_and(|s| s.success())
        });
    }

    fn start(&mut self, extra: &[&str]) {
        let d = match &self.ns {
            Some(ns) => Daemon::start_in(&self.env, &self.manifests, extra, ns),
            None => Daemon::start_with(&self.env, &self.manifests, extra),
        };
        self.daemon = Some(d);
    }

    fn manifest_path(&self, w: &Workload) -> PathBuf {
        self.manifests
            .join(format!("{}.json", w.file.replace('.', "-")))
    }

    fn place_manifests(&self) {
        for w in &self.workloads {
            fs::write(
                self.manifest_path(w),
                serde_json::to_vec_pretty(&w.pod).expect("json"),
            )
            .expect("write manifest");
        }
    }

    fn view(&self, w: &Workload) -> Option<PodView> {
        self.daemon().pods()?.into_iter().find(|v| {
            v.pod.metadata.name.as_deref() == Some(&format!("{}-testnode", w.name))
                && v.pod.metadata.namespace.as_deref() == Some(&w.namespace)
        })
    }

    /// `None` when `w` is Ready (condition Ready=True, every container ready), else what
    /// it shows instead: phase, conditions, each container's state, restarts and the pod's
    /// last events.
    fn not_ready(&self, w: &Workload) -> Option<String> {
        let Some(v) = self.view(w) else {
            return Some("not listed by the daemon".into());
        };
        let st = v.pod.status.clone().unwrap_or_default();
        let statuses = st.container_statuses.clone().unwrap_or_default();
        let ready = statuses.iter().filter(|s| s.ready).count();
        let condition = st
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.clone());
        if condition.as_deref() == Some("True") && ready == w.containers {
            return None;
        }
        let mut why = format!(
            "phase {:?}, Ready={}, {ready}/{} containers ready",
            st.phase.as_deref().unwrap_or(""),
            condition.as_deref().unwrap_or("?"),
            w.containers
        );
        for s in statuses
            .iter()
            .chain(st.init_container_statuses.iter().flatten())
        {
            let state = s.state.as_ref();
            if let Some(wt) = state.and_then(|s| s.waiting.as_ref()) {
                why.push_str(&format!(
                    "; {}: waiting {} {}",
                    s.name,
                    wt.reason.as_deref().unwrap_or(""),
                    wt.message.as_deref().unwrap_or("")
                ));
            } else if state.is_some_and(|s| s.running.is_some()) {
                why.push_str(&format!("; {}: running", s.name));
            }
            if let Some(t) = s.last_state.as_ref().and_then(|s| s.terminated.as_ref()) {
                why.push_str(&format!(
                    " (last exit {} {})",
                    t.exit_code,
                    t.reason.as_deref().unwrap_or("")
                ));
            }
            why.push_str(&format!(", {} restarts", s.restart_count));
        }
        if let Some(e) = &v.source_error {
            why.push_str(&format!("; source error: {}", e.message));
        }
        let key = format!("{}/{}-testnode", w.namespace, w.name);
        let events: Vec<String> = self
            .daemon()
            .events()
            .into_iter()
            .filter(|e| e.pod == key)
            .map(|e| format!("{} {}", e.reason, e.message))
            .collect();
        let last = &events[events.len().saturating_sub(6)..];
        why.push_str(&format!("; events: {last:?}"));
        Some(why)
    }

    /// How many times `w`'s liveness and startup probes failed so far (its Unhealthy events).
    fn probe_failures(&self, w: &Workload) -> u32 {
        let key = format!("{}/{}-testnode", w.namespace, w.name);
        self.daemon()
            .events()
            .iter()
            .filter(|e| {
                e.pod == key && e.reason == "Unhealthy" && !e.message.starts_with("Readiness")
            })
            .map(|e| e.count)
            .sum()
    }

    fn restart_count(&self, w: &Workload) -> i32 {
        self.view(w)
            .and_then(|v| v.pod.status?.container_statuses?.first().cloned())
            .map_or(0, |c| c.restart_count)
    }

    fn workload(&self, file: &str) -> &Workload {
        self.workloads
            .iter()
            .find(|w| w.file == file)
            .expect("workload of the node")
    }

    /// `curl` in the node's network namespace (`args` then `url`): the body; panics with
    /// curl's error.
    fn curl(&self, args: &[&str], url: &str) -> String {
        let ns = self.ns.as_ref().expect("netns");
        run(ns.cmd("curl").args(["-sS", "-m", "5"]).args(args).arg(url))
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut c) = self.apiserver.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if std::thread::panicking() {
            // TestEnv's drop SIGKILLs the containers and removes their cgroups at once; a
            // cgroup whose processes have not exited yet stays behind (EBUSY). With a dozen
            // containers that happens: stop the daemon (it would restart them), kill them
            // and wait for them to go first.
            drop(self.daemon.take());
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let procs = common::processes_in_cgroup(&self.env.cgroup_parent);
                if procs.is_empty() || Instant::now() > deadline {
                    break;
                }
                for (pid, _) in procs {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(pid),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                common::reap_zombies();
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[test]
#[ignore = "needs root: real etcd, haproxy, nginx, mosquitto and node-exporter containers in network namespaces (scripts/test runs it)"]
fn real_workloads_become_ready_and_come_back() {
    let started = Instant::now();
    let images = build_images();
    let built = started.elapsed();
    // The nodes are prepared in parallel (image imports and openssl take seconds each).
    let mut nodes: Vec<Node> = std::thread::scope(|scope| {
        let handles: Vec<_> = NODES
            .iter()
            .map(|spec| scope.spawn(|| Node::new(spec, &images)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a node's preparation panicked"))
            .collect()
    });
    let prepared = started.elapsed();

    // Node c pulls `nginx` (`:latest`: pull policy Always) from a loopback registry, as
    // docker.io's mirror.
    let registry = Registry::start(false);
    let layout = tempfile::tempdir().expect("layout dir");
    let nginx = &images.iter().find(|(p, _)| *p == "nginx").expect("nginx").1;
    run(Command::new("tar")
        .arg("-C")
        .arg(layout.path())
        .arg("-xf")
        .arg(nginx));
    registry.push(layout.path(), "latest", "library/nginx:latest", false);
    let registries = registries_yaml(nodes[2].env.dir.path(), "docker.io", &registry.addr, false);

    for n in nodes.iter_mut() {
        if n.spec.netns {
            n.start_apiserver();
            n.start(&[]);
        } else {
            let flag = format!("--registry-config={}", registries.display());
            n.start(&[&flag]);
        }
    }
    let up = started.elapsed();
    let placed = Instant::now();
    for n in &nodes {
        n.place_manifests();
    }
    let total: usize = nodes.iter().map(|n| n.workloads.len()).sum();
    assert!(total >= 10, "{total} real pods");
    let all_ready = || {
        nodes
            .iter()
            .all(|n| n.workloads.iter().all(|w| n.not_ready(w).is_none()))
    };
    let deadline = Instant::now() + READY;
    while !all_ready() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
    }
    let mut failures = Vec::new();
    for n in &nodes {
        for w in &n.workloads {
            if let Some(why) = n.not_ready(w) {
                failures.push(format!("  node {}: {}: {why}", n.spec.name, w.file));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {total} real pods not Ready after {READY:?}:\n{}",
        failures.len(),
        failures.join("\n")
    );
    let ready_after = placed.elapsed();
    // The liveness and startup probe failures so far: a probe may fail while its server
    // starts (podvisor probes at initialDelaySeconds, 0 by default, as documented); once the
    // pods are Ready, none may fail again.
    let snapshot = Instant::now();
    let failed_before: Vec<Vec<u32>> = nodes
        .iter()
        .map(|n| n.workloads.iter().map(|w| n.probe_failures(w)).collect())
        .collect();

    // The workloads do their jobs, seen by real clients on the node.
    let (a, b) = (&nodes[0], &nodes[1]);
    let etcd_pki = a.scratch.join("etc/kubernetes/pki/etcd");
    let pki = |f: &str| etcd_pki.join(f).display().to_string();
    // kubeadm's etcd serves its clients over TLS with client certificates (as the
    // apiserver and `kubeadm` reach it): the healthcheck-client certificate is accepted.
    let health = a.curl(
        &[
            "--cacert",
            &pki("ca.crt"),
            "--cert",
            &pki("healthcheck-client.crt"),
            "--key",
            &pki("healthcheck-client.key"),
        ],
        &format!("https://{NODE_IP}:2379/health"),
    );
    assert!(health.contains(r#""health":"true""#), "etcd: {health}");
    // The load balancers forward TLS to the apiserver: kubespray's nginx on 127.0.0.1:6443,
    // kubeadm's haproxy on :8443 (node a), kubespray's haproxy on 127.0.0.1:6443 (node b).
    for (n, url) in [
        (a, "https://127.0.0.1:6443/healthz"),
        (a, "https://127.0.0.1:8443/healthz"),
        (b, "https://127.0.0.1:6443/healthz"),
    ] {
        let body = n.curl(&["-k"], url);
        assert!(
            body.contains("s_server"),
            "{url} on node {}: {body}",
            n.spec.name
        );
    }
    // The GCE etcds answer on their client ports; node-exporter exports the host's CPUs.
    for port in [2379, 4002] {
        let h = b.curl(&[], &format!("http://127.0.0.1:{port}/health"));
        assert!(h.contains(r#""health":"true""#), "GCE etcd :{port}: {h}");
    }
    let metrics = a.curl(&[], "http://127.0.0.1:9100/metrics");
    assert!(
        metrics.contains("node_cpu_seconds_total{"),
        "node-exporter /metrics has no node_cpu_seconds_total"
    );

    // A workload killed from the host comes back: kubeadm's etcd, SIGKILLed.
    let killed_at = Instant::now();
    let n = nodes
        .iter()
        .find(|n| n.spec.name == KILLED.0)
        .expect("node");
    let w = n.workload(KILLED.1);
    let before = n.restart_count(w);
    let id = n
        .view(w)
        .and_then(|v| {
            v.pod
                .status?
                .container_statuses?
                .first()?
                .container_id
                .clone()
        })
        .expect("etcd container id");
    let pid = common::init_pid(&n.env, &id);
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    assert_eq!(comm.trim(), "etcd", "the container's main process is etcd");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL etcd");
    let mut seen_not_ready = false;
    common::wait_until_else(
        "etcd restarted and Ready again",
        BACK,
        || {
            if n.not_ready(w).is_some() {
                seen_not_ready = true;
            }
            seen_not_ready && n.restart_count(w) > before && n.not_ready(w).is_none()
        },
        || format!("{:?}", n.not_ready(w)),
    );
    let back_after = killed_at.elapsed();
    let checked = Instant::now();
    let health = a.curl(
        &[
            "--cacert",
            &pki("ca.crt"),
            "--cert",
            &pki("healthcheck-client.crt"),
            "--key",
            &pki("healthcheck-client.key"),
        ],
        &format!("https://{NODE_IP}:2379/health"),
    );
    assert!(
        health.contains(r#""health":"true""#),
        "etcd after restart: {health}"
    );

    // Every liveness probe has run again since (the killed etcd's after its restart): none
    // failed, no other container restarted, every pod is still Ready.
    let mut failures = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        for (j, w) in n.workloads.iter().enumerate() {
            let killed = (n.spec.name, w.file) == KILLED;
            let since = if killed { killed_at } else { placed };
            let until = (since + liveness_window(&w.pod)).max(snapshot + PERIOD);
            std::thread::sleep(until.saturating_duration_since(Instant::now()));
            let failed = n.probe_failures(w);
            if failed != failed_before[i][j] {
                let key = format!("{}/{}-testnode", w.namespace, w.name);
                let events: Vec<String> = n
                    .daemon()
                    .events()
                    .into_iter()
                    .filter(|e| e.pod == key && e.reason == "Unhealthy")
                    .map(|e| format!("{} (x{})", e.message, e.count))
                    .collect();
                failures.push(format!(
                    "  node {}: {}: {} liveness/startup probe failures once Ready: {events:?}",
                    n.spec.name,
                    w.file,
                    failed - failed_before[i][j]
                ));
            }
            let restarts = n.restart_count(w);
            let want = if killed { before + 1 } else { 0 };
            if restarts != want {
                failures.push(format!(
                    "  node {}: {}: {restarts} restarts, want {want}",
                    n.spec.name, w.file
                ));
            }
            if let Some(why) = n.not_ready(w) {
                failures.push(format!("  node {}: {}: {why}", n.spec.name, w.file));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "after their liveness probes ran:\n{}",
        failures.join("\n")
    );

    // Every pod goes when its manifest does; nothing is left behind.
    let removing = Instant::now();
    for n in &nodes {
        for w in &n.workloads {
            fs::remove_file(n.manifest_path(w)).expect("remove manifest");
        }
    }
    for n in &nodes {
        n.daemon().wait_all_gone(&n.env, GONE);
    }
    for n in nodes.iter_mut() {
        n.daemon.take().expect("daemon").stop();
        if let Some(mut c) = n.apiserver.take() {
            c.kill().expect("kill the apiserver stand-in");
            c.wait().expect("reap the apiserver stand-in");
        }
        n.env.assert_clean();
    }
    eprintln!(
        "real workloads: {total} pods on {} nodes Ready {:.1}s after their manifests were placed; \
         etcd back {:.1}s after SIGKILL; images built {:.1}s, nodes prepared {:.1}s, daemons up \
         {:.1}s, liveness checks {:.1}s, removal {:.1}s; whole test {:.1}s",
        nodes.len(),
        ready_after.as_secs_f64(),
        back_after.as_secs_f64(),
        built.as_secs_f64(),
        prepared.as_secs_f64(),
        up.as_secs_f64(),
        (removing - checked).as_secs_f64(),
        removing.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}
