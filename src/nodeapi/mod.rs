//! nodeapi: the kubelet's TCP ports — the plain healthz port (`healthzBindAddress:healthzPort`,
//! 127.0.0.1:10248) and the authenticated HTTPS server (`address:port`, 10250).
//!
//! Like the unix-socket API (`api`), it owns no pod state: it reads the published
//! [`Snapshot`](crate::status::Snapshot), the sync loop's
//! [`SyncLoopMonitor`](crate::health::SyncLoopMonitor), the counters the owning threads record
//! ([`crate::metrics`]) and, read-only, the cgroup and log files. Pushed pods
//! ([`push`]) go to the sync loop as typed requests. Each port is one accept thread and at
//! most a bounded number of connection threads ([`listener`]), each connection one request
//! under a whole-exchange deadline ([`crate::httpserver`]).

pub mod auth;
pub mod cadvisor;
pub mod collect;
pub mod containerlogs;
pub mod context;
pub mod healthz;
pub mod listener;
pub mod metrics;
pub mod push;
pub mod routes;
pub mod secure;
pub mod summary;
pub mod syslogs;
pub mod tls;

use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use healthz::HealthChecks;
use listener::Listener;

use std::path::PathBuf;

use crate::httpserver::{
    write_response, DeadlineStream, Exchange, HeadError, RequestHead, Response, Service,
};
use crate::status::SnapshotCell;
use tls::MinVersion;

/// The kubelet's `/logs` directory.
pub const SYSTEM_LOG_DIR: &str = "/var/log";

/// The kubelet's default `healthzPort`.
pub const DEFAULT_HEALTHZ_PORT: u16 = 10248;
/// The kubelet's default `healthzBindAddress`.
pub const DEFAULT_HEALTHZ_BIND_ADDRESS: &str = "127.0.0.1";
/// Connections served at once on the healthz port; more are refused with 503.
pub const HEALTHZ_MAX_CONNECTIONS: usize = 16;
/// How long one healthz exchange may take, request and answer together.
pub const HEALTHZ_DEADLINE: Duration = Duration::from_secs(5);

/// `authorization.mode` as podvisor applies it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed.
    AlwaysAllow,
    /// The rule file decides (`--authorization-rules-file`).
    Rules(PathBuf),
    /// `Webhook` without a rule file: every request is refused.
    DenyAll,
}

/// The secure port's settings, resolved from the KubeletConfiguration and flags (`config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeServerConfig {
    pub addr: SocketAddr,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_private_key_file: Option<PathBuf>,
    pub tls_min_version: MinVersion,
    pub tls_cipher_suites: Vec<String>,
    pub client_ca_file: Option<PathBuf>,
    pub token_auth_file: Option<PathBuf>,
    pub anonymous: bool,
    pub authorization: AuthorizationMode,
    /// `enableDebuggingHandlers` (default true): `/containerLogs` and `/logs`.
    pub debugging_handlers: bool,
    /// `enableSystemLogHandler` (default true): `/logs`.
    pub system_log_handler: bool,
}

/// What the secure port reads and where pushed pods go.
pub struct NodeSources {
    pub snapshots: SnapshotCell,
    pub health: HealthChecks,
    pub stats: crate::api::stats::StatsSource,
    pub metrics: crate::metrics::KubeletMetrics,
    pub push: Option<crate::sources::api::PushSink>,
}

/// Errors of the node API's setup.
#[derive(Debug, thiserror::Error)]
pub enum NodeApiError {
    #[error("tls: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("authentication or authorization file: {0}")]
    AuthFile(#[from] auth::AuthFileError),
    #[error("cannot start the {what} thread")]
    Spawn {
        what: &'static str,
        source: std::io::Error,
    },
}

/// The running healthz port; dropping it stops the server.
#[derive(Debug)]
pub struct HealthzServer {
    listener: Listener,
}

impl HealthzServer {
    /// The address bound (port 0 resolved), once bound.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr()
    }
}

/// Serves `checks` on the plain healthz port `addr`. A port that cannot be bound is logged
/// and retried (see [`listener`]); only failing to start the thread is an error.
pub fn serve_healthz(
    addr: SocketAddr,
    checks: HealthChecks,
) -> Result<HealthzServer, NodeApiError> {
    let checks = Arc::new(checks);
    let handler: listener::Handler = Arc::new(move |tcp| healthz_connection(tcp, &checks));
    let refuse: listener::Refuse = Arc::new(|tcp: TcpStream| {
        let mut s = DeadlineStream::new(tcp, Instant::now() + Duration::from_secs(1));
        // A client that does not read its 503 only loses it.
        let _ = write_response(
            &mut s,
            &Response::text(503, "too many connections, try again later"),
            false,
        );
    });
    let (listener, first_err) =
        Listener::start("healthz", addr, HEALTHZ_MAX_CONNECTIONS, handler, refuse).map_err(
            |source| NodeApiError::Spawn {
                what: "healthz",
                source,
            },
        )?;
    match first_err {
        None => log::info!("healthz on http://{addr}/healthz"),
        Some(e) => log::error!("healthz: cannot listen on {addr}: {e}; retrying every 5 s"),
    }
    Ok(HealthzServer { listener })
}

/// Starts the secure port from its configuration: loads the token and rule files, builds the
/// TLS configuration (generating the self-signed pair in `<root_dir>/pki` when no
/// certificate is configured). Bad files are errors naming them.
pub fn serve_node_server(
    cfg: &NodeServerConfig,
    root_dir: &std::path::Path,
    node_name: &str,
    sources: NodeSources,
) -> Result<secure::SecureServer, NodeApiError> {
    let tls = tls::server_config(&tls::TlsSettings {
        cert_file: cfg.tls_cert_file.clone(),
        key_file: cfg.tls_private_key_file.clone(),
        generated_dir: root_dir.join("pki"),
        node_name: node_name.to_string(),
        min_version: cfg.tls_min_version,
        cipher_suites: cfg.tls_cipher_suites.clone(),
        client_ca_file: cfg.client_ca_file.clone(),
    })?;
    let tokens = match &cfg.token_auth_file {
        Some(f) => Some(auth::TokenFile::load(f)?),
        None => None,
    };
    let authorizer = match &cfg.authorization {
        AuthorizationMode::AlwaysAllow => auth::Authorizer::AlwaysAllow,
        AuthorizationMode::Rules(f) => auth::Authorizer::Rules(auth::Rules::load(f)?),
        AuthorizationMode::DenyAll => {
            log::warn!(
                "node API: authorization.mode is Webhook, which needs an API server: every \
                 request is refused; set --authorization-rules-file or mode AlwaysAllow"
            );
            auth::Authorizer::Rules(auth::Rules { rules: Vec::new() })
        }
    };
    if tokens.is_none() && cfg.client_ca_file.is_none() && !cfg.anonymous {
        log::info!(
            "node API: no clientCAFile, no --token-auth-file and anonymous access off: \
             every request is refused with 401"
        );
    }
    secure::serve_secure(
        secure::SecureSettings {
            addr: cfg.addr,
            tls,
            authenticator: auth::Authenticator {
                x509: cfg.client_ca_file.is_some(),
                tokens,
                anonymous: cfg.anonymous,
            },
            authorizer,
            max_connections: secure::DEFAULT_MAX_CONNECTIONS,
        },
        context::Context {
            snapshots: sources.snapshots,
            health: sources.health,
            stats: sources.stats,
            metrics: sources.metrics,
            root_dir: root_dir.to_path_buf(),
            system_logs: cfg
                .system_log_handler
                .then(|| PathBuf::from(SYSTEM_LOG_DIR)),
            debugging_handlers: cfg.debugging_handlers,
            push: sources.push,
            cpu: Default::default(),
            followers: Default::default(),
            max_followers: secure::DEFAULT_MAX_FOLLOWERS,
            stop: Default::default(),
        },
    )
}

fn healthz_connection(tcp: TcpStream, checks: &HealthChecks) {
    // The whole exchange, request and answer, within HEALTHZ_DEADLINE.
    const EXCHANGE: Exchange = Exchange {
        name: "healthz",
        response: None,
    };
    let mut s = DeadlineStream::new(tcp, Instant::now() + HEALTHZ_DEADLINE);
    EXCHANGE.serve(&mut s, None, checks);
}

impl Service<DeadlineStream> for HealthChecks {
    fn bad_head(&self, err: &HeadError) -> Response {
        Response::text(err.status(), &err.to_string())
    }

    fn respond(&self, s: &mut DeadlineStream, head: &RequestHead) -> std::io::Result<()> {
        let resp = if head.method != "GET" && head.method != "HEAD" {
            let mut r = Response::text(405, "Method Not Allowed");
            r.headers.push(("Allow", "GET, HEAD".into()));
            r
        } else {
            self.answer(head.path(), head.query(), Instant::now())
                .unwrap_or_else(Response::not_found)
        };
        write_response(s, &resp, head.method == "HEAD")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut c = TcpStream::connect(addr).expect("connect");
        c.write_all(request).expect("send");
        let mut out = String::new();
        c.read_to_string(&mut out).expect("read");
        out
    }

    #[test]
    fn healthz_port_answers_and_bounds_bad_requests() {
        let monitor = crate::health::SyncLoopMonitor::new(Instant::now());
        monitor.record(Instant::now());
        let server = serve_healthz(
            "127.0.0.1:0".parse().expect("addr"),
            HealthChecks {
                monitor,
                deadline: Duration::from_secs(60),
            },
        )
        .expect("serve");
        let addr = server.local_addr().expect("bound");
        let ok = exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nok"), "{ok}");
        let nf = exchange(addr, b"GET /pods HTTP/1.1\r\n\r\n");
        assert!(nf.starts_with("HTTP/1.1 404 "), "{nf}");
        let bad = exchange(addr, b"GARBAGE\r\n\r\n");
        assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
        let post = exchange(addr, b"POST /healthz HTTP/1.1\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    }
}
