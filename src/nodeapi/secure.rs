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

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use super::auth::{attributes, forbidden_message, Authenticator, Authorizer, Credentials};
use super::context::{Context, Request};
use super::http::{read_body, read_head, write_response, DeadlineStream, Response, Streaming};
use super::listener::{self, Listener};
use super::routes::Answer;
use super::tls::subject_cn_and_orgs;
use super::NodeApiError;
use crate::sources::api::MAX_PUSH_BYTES;

/// How long a client has for the TLS handshake and its request head together.
pub const HANDSHAKE_AND_HEAD: Duration = Duration::from_secs(10);
/// How long reading a request body and writing one whole answer may take.
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

type Tls = StreamOwned<ServerConnection, DeadlineStream>;

/// The TLS stream as a [`Streaming`] response.
struct TlsOut<'a>(&'a mut Tls);

impl Write for TlsOut<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl Streaming for TlsOut<'_> {
    fn extend_deadline(&mut self, limit: Duration) {
        self.0.sock.set_deadline(Instant::now() + limit);
    }

    fn client_gone(&mut self, timeout: Duration) -> bool {
        let ms = u16::try_from(timeout.as_millis()).unwrap_or(u16::MAX);
        let revents = {
            let mut fds = [PollFd::new(self.0.sock.tcp().as_fd(), PollFlags::POLLIN)];
            match nix::poll::poll(&mut fds, PollTimeout::from(ms)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => return false,
                Err(_) => return true,
                Ok(_) => fds[0].revents().unwrap_or(PollFlags::empty()),
            }
        };
        if revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
            return true;
        }
        // Bytes from the client: a close_notify, an end of stream, or something to ignore.
        self.0
            .sock
            .set_deadline(Instant::now() + Duration::from_secs(1));
        match self.0.conn.read_tls(&mut self.0.sock) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
        match self.0.conn.process_new_packets() {
            Err(_) => true,
            Ok(state) => {
                if state.peer_has_closed() {
                    return true;
                }
                let mut scratch = vec![0u8; state.plaintext_bytes_to_read()];
                let _ = self.0.conn.reader().read(&mut scratch);
                false
            }
        }
    }
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
    let head_only = head.method == "HEAD";
    let refused = match shared.authenticator.authenticate(&creds) {
        None => Some(Response::text(401, "Unauthorized")),
        Some(user) => {
            let attrs = attributes(&head.method, head.path());
            (!shared.authorizer.allows(&user, &attrs))
                .then(|| Response::text(403, &forbidden_message(&user, &attrs)))
        }
    };
    if let Some(resp) = refused {
        let _ = write_response(&mut tls, &resp, head_only);
        finish(tls);
        return;
    }
    let body = if matches!(head.method.as_str(), "PUT" | "POST" | "PATCH") {
        match read_body(&mut tls, &head, MAX_PUSH_BYTES) {
            Ok(b) => b,
            Err(e) => {
                let _ =
                    write_response(&mut tls, &Response::text(e.status(), &e.to_string()), false);
                finish(tls);
                return;
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
    let sent = match super::routes::answer(&req, &shared.ctx) {
        Answer::Whole(resp) => write_response(&mut tls, &resp, head_only),
        Answer::Follow(plan) => {
            keepalive(tls.sock.tcp());
            super::containerlogs::follow(&mut TlsOut(&mut tls), &plan, &shared.ctx)
        }
        Answer::File(mut plan) => super::syslogs::send(&mut TlsOut(&mut tls), &mut plan, head_only),
    };
    if let Err(e) = sent {
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
fn finish(mut tls: Tls) {
    tls.sock
        .set_deadline(Instant::now() + Duration::from_secs(1));
    tls.conn.send_close_notify();
    // The client may already be gone: nothing to do about it.
    let _ = tls.conn.complete_io(&mut tls.sock);
    let _ = tls.sock.tcp().shutdown(std::net::Shutdown::Both);
}
