//! nodeapi::secure: the kubelet's authenticated HTTPS port (`address:port`, 0.0.0.0:10250).
//!
//! One accept thread ([`super::listener`]), at most [`SecureSettings::max_connections`]
//! connection threads. Each connection: the TLS handshake and the request head within
//! [`HANDSHAKE_AND_HEAD`] (a slowloris client is cut there), then authentication and
//! authorization ([`super::auth`]: 401 `Unauthorized`, 403 `Forbidden (...)` as the kubelet
//! answers), then a body where the method has one (a pushed pod: `Content-Length`, at most
//! 1 MiB) and the answer from [`super::routes`], both within [`RESPONSE`]; one request per
//! connection. Streamed answers (a followed container log, a file under /var/log) give each
//! write its own deadline instead, and followers end when the client hangs up (TCP keepalive
//! finds a client that vanished). A connection over the bound is closed at once (a TLS client
//! sees the connection reset; nothing is read from it).
//!
//! The exchange itself is [`crate::httpserver`]'s over its rustls stream: this module plugs
//! in the auth hook (the client certificate's subject or the bearer token, then the rules) and
//! the answers.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::{ServerConfig, ServerConnection};

use super::auth::{attributes, forbidden_message, Authenticator, Authorizer, Credentials};
use super::context::{Context, Request};
use super::listener::{self, Listener};
use super::routes::Answer;
use super::tls::subject_cn_and_orgs;
use super::NodeApiError;
use crate::httpserver::tls::handshake;
use crate::httpserver::{
    read_body, write_response, Authorize, DeadlineStream, Exchange, HeadError, RequestHead,
    Response, Service, TlsConn,
};
use crate::sources::api::MAX_PUSH_BYTES;

/// How long a client has for the TLS handshake and its request head together.
pub const HANDSHAKE_AND_HEAD: Duration = Duration::from_secs(10);
/// How long reading a request body and writing one whole answer may take.
pub const RESPONSE: Duration = Duration::from_secs(30);

/// One request per connection, the answer within [`RESPONSE`] of the end of the head.
const EXCHANGE: Exchange = Exchange {
    name: "node API",
    response: Some(RESPONSE),
};

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
/// Log followers streaming at once (each also holds a connection).
pub const DEFAULT_MAX_FOLLOWERS: usize = 16;

struct Shared {
    tls: Arc<ServerConfig>,
    authenticator: Authenticator,
    authorizer: Authorizer,
    ctx: Context,
}

/// The running secure port; dropping it stops accepting and ends the followers.
#[derive(Debug)]
pub struct SecureServer {
    listener: Listener,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl SecureServer {
    /// The address bound (port 0 resolved), once bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr()
    }
}

impl Drop for SecureServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Serves the secure port. A port that cannot be bound is logged and retried.
pub fn serve_secure(settings: SecureSettings, ctx: Context) -> Result<SecureServer, NodeApiError> {
    let addr = settings.addr;
    let stop = Arc::clone(&ctx.stop);
    let shared = Arc::new(Shared {
        tls: settings.tls,
        authenticator: settings.authenticator,
        authorizer: settings.authorizer,
        ctx,
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
    Ok(SecureServer { listener, stop })
}

/// TCP keepalive on a follower's socket: a client that vanished (no FIN) is found within
/// about two minutes and its follower slot freed.
fn keepalive(tcp: &TcpStream) {
    use nix::sys::socket::{setsockopt, sockopt};
    let fd = tcp.as_fd();
    let _ = setsockopt(&fd, sockopt::KeepAlive, &true);
    let _ = setsockopt(&fd, sockopt::TcpKeepIdle, &60);
    let _ = setsockopt(&fd, sockopt::TcpKeepInterval, &15);
    let _ = setsockopt(&fd, sockopt::TcpKeepCount, &4);
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
    let mut tls = TlsConn::new(conn, sock);
    if let Err(e) = handshake(&mut tls) {
        log::debug!("node API: TLS handshake with {peer:?} failed: {e}");
        return;
    }
    EXCHANGE.serve(&mut tls, Some(shared), shared);
}

/// The auth hook: the client certificate's subject or the bearer token, then the rules.
impl Authorize<TlsConn> for Shared {
    fn authorize(&self, tls: &TlsConn, head: &RequestHead) -> Result<(), Response> {
        let cert_subject = tls
            .conn
            .peer_certificates()
            .and_then(|certs| certs.first())
            .and_then(|leaf| subject_cn_and_orgs(leaf));
        let creds = Credentials {
            cert_subject,
            authorization: head.header("authorization"),
        };
        let Some(user) = self.authenticator.authenticate(&creds) else {
            return Err(Response::text(401, "Unauthorized"));
        };
        let attrs = attributes(&head.method, head.path());
        if !self.authorizer.allows(&user, &attrs) {
            return Err(Response::text(403, &forbidden_message(&user, &attrs)));
        }
        Ok(())
    }
}

impl Service<TlsConn> for Shared {
    fn bad_head(&self, err: &HeadError) -> Response {
        Response::text(err.status(), &err.to_string())
    }

    fn respond(&self, tls: &mut TlsConn, head: &RequestHead) -> io::Result<()> {
        let head_only = head.method == "HEAD";
        let body = if matches!(head.method.as_str(), "PUT" | "POST" | "PATCH") {
            match read_body(tls, head, MAX_PUSH_BYTES) {
                Ok(b) => b,
                Err(e) => {
                    return write_response(tls, &Response::text(e.status(), &e.to_string()), false)
                }
            }
        } else {
            Vec::new()
        };
        let req = Request {
            method: &head.method,
            path: head.path(),
            query: head.query(),
            headers: &head.headers,
            body: &body,
        };
        match super::routes::answer(&req, &self.ctx) {
            Answer::Whole(resp) => write_response(tls, &resp, head_only),
            Answer::Follow(plan) => {
                keepalive(tls.sock.socket());
                super::containerlogs::follow(tls, &plan, &self.ctx)
            }
            Answer::File(mut plan) => super::syslogs::send(tls, &mut plan, head_only),
        }
    }
}

#[cfg(test)]
mod tests;
