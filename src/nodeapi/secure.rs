//! nodeapi::secure: the kubelet's authenticated HTTPS port (`address:port`, 0.0.0.0:10250).
//!
//! One accept thread ([`super::listener`]), at most [`SecureSettings::max_connections`]
//! connection threads. Each connection: the TLS handshake and the request head within
//! [`HANDSHAKE_AND_HEAD`] (a slowloris client is cut there), then authentication and
//! authorization ([`super::auth`]: 401 `Unauthorized`, 403 `Forbidden (...)` as the kubelet
//! answers), then the answer from [`super::routes`] within [`RESPONSE`]; one request per
//! connection. A connection over the bound is closed at once (a TLS client sees the
//! connection reset; nothing is read from it).

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::{ServerConfig, ServerConnection, StreamOwned};

use super::auth::{attributes, forbidden_message, Authenticator, Authorizer, Credentials};
use super::healthz::HealthChecks;
use super::http::{read_head, write_response, DeadlineStream, Response};
use super::listener::{self, Listener};
use super::tls::subject_cn_and_orgs;
use super::NodeApiError;
use crate::status::SnapshotCell;

/// How long a client has for the TLS handshake and its request head together.
pub const HANDSHAKE_AND_HEAD: Duration = Duration::from_secs(10);
/// How long writing one answer may take.
pub const RESPONSE: Duration = Duration::from_secs(30);

/// What the secure port serves with.
pub struct SecureSettings {
    pub addr: SocketAddr,
    pub tls: Arc<ServerConfig>,
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
    pub max_connections: usize,
}

/// The kubelet's default `port`.
pub const DEFAULT_PORT: u16 = 10250;
/// Connections served at once on the secure port.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

struct Shared {
    tls: Arc<ServerConfig>,
    authenticator: Authenticator,
    authorizer: Authorizer,
    snapshots: SnapshotCell,
    health: HealthChecks,
}

/// The running secure port; dropping it stops accepting.
#[derive(Debug)]
pub struct SecureServer {
    listener: Listener,
}

impl SecureServer {
    /// The address bound (port 0 resolved), once bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr()
    }
}

/// Serves the secure port. A port that cannot be bound is logged and retried.
pub fn serve_secure(
    settings: SecureSettings,
    snapshots: SnapshotCell,
    health: HealthChecks,
) -> Result<SecureServer, NodeApiError> {
    let addr = settings.addr;
    let shared = Arc::new(Shared {
        tls: settings.tls,
        authenticator: settings.authenticator,
        authorizer: settings.authorizer,
        snapshots,
        health,
    });
    let handler: listener::Handler = Arc::new(move |tcp| connection(tcp, &shared));
    // Dropping the socket closes it: nothing to say in plain text to a TLS client.
    let refuse: listener::Refuse = Arc::new(drop);
    let (listener, first_err) =
        Listener::start("node-api", addr, settings.max_connections, handler, refuse).map_err(
            |source| NodeApiError::Spawn {
                what: "node-api",
                source,
            },
        )?;
    match first_err {
        None => log::info!("node API on https://{addr}"),
        Some(e) => log::error!("node API: cannot listen on {addr}: {e}; retrying every 5 s"),
    }
    Ok(SecureServer { listener })
}

fn connection(tcp: TcpStream, shared: &Shared) {
    let peer = tcp.peer_addr().ok();
    let sock = DeadlineStream::new(tcp, Instant::now() + HANDSHAKE_AND_HEAD);
    let conn = match ServerConnection::new(Arc::clone(&shared.tls)) {
        Ok(c) => c,
        Err(e) => {
            log::warn!("node API: cannot start a TLS session: {e}");
            return;
        }
    };
    let mut tls = StreamOwned::new(conn, sock);
    while tls.conn.is_handshaking() {
        if let Err(e) = tls.conn.complete_io(&mut tls.sock) {
            log::debug!("node API: TLS handshake with {peer:?} failed: {e}");
            return;
        }
    }
    let head = match read_head(&mut tls) {
        Ok(Some(h)) => h,
        Ok(None) => return,
        Err(e) => {
            tls.sock.set_deadline(Instant::now() + RESPONSE);
            let _ = write_response(&mut tls, &Response::text(e.status(), &e.to_string()), false);
            finish(tls);
            return;
        }
    };
    tls.sock.set_deadline(Instant::now() + RESPONSE);
    let cert_subject = tls
        .conn
        .peer_certificates()
        .and_then(|certs| certs.first())
        .and_then(|leaf| subject_cn_and_orgs(leaf));
    let creds = Credentials {
        cert_subject,
        authorization: head.header("authorization"),
    };
    let resp = match shared.authenticator.authenticate(&creds) {
        None => Response::text(401, "Unauthorized"),
        Some(user) => {
            let attrs = attributes(&head.method, head.path());
            if shared.authorizer.allows(&user, &attrs) {
                let snap = shared.snapshots.get();
                super::routes::answer(
                    &head.method,
                    head.path(),
                    head.query(),
                    &snap,
                    &shared.health,
                )
            } else {
                Response::text(403, &forbidden_message(&user, &attrs))
            }
        }
    };
    if let Err(e) = write_response(&mut tls, &resp, head.method == "HEAD") {
        log::debug!(
            "node API: {} {}: client went away: {e}",
            head.method,
            head.target
        );
        return;
    }
    finish(tls);
}

/// Ends the TLS session properly (close_notify) and the connection.
fn finish(mut tls: StreamOwned<ServerConnection, DeadlineStream>) {
    tls.conn.send_close_notify();
    // The client may already be gone: nothing to do about it.
    let _ = tls.conn.complete_io(&mut tls.sock);
    let _ = tls.sock.tcp().shutdown(std::net::Shutdown::Both);
}
