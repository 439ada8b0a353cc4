//! api: podvisor's local HTTP API on a unix socket — the request model, the error type, and
//! the URL grammar shared by the server and the client.
//!
//! The daemon publishes [`Snapshot`](crate::status::Snapshot)s; the API only reads them.
//! Requests are parsed into [`ApiRequest`] by the pure [`parse_request`], answered by the pure
//! [`handlers::handle`] (plus log file reads), and carried over HTTP/1.1 by [`server`]. The CLI
//! talks to it through [`client`].
//!
//! Routes (all `GET`, JSON unless noted):
//! - `/healthz` -> `ok` (text)
//! - `/pods` -> `[PodView]`
//! - `/pods/{name}` (short lookup via `Snapshot::find_pod`) and `/pods/{namespace}/{name}`
//!   -> `PodView`
//! - `/pods/{namespace}/{name}/log?container=C&previous=true&tail=N&follow=true` -> log
//!   lines as text, streamed with chunked encoding when following
//! - `/events?pod=<query>` -> `[EventRecord]`
//! - `/source-errors` -> `[SourceErrorView]` (manifest errors not tied to a pod)
//! - `/stats?pod=<query>` -> `[PodStats]` (cgroup usage of pods and running containers,
//!   see [`stats`])
//!
//! Errors are `{"error": "<message>"}` with 400, 404, 405, 500 or 503.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::logs::LogError;

pub mod client;
pub mod handlers;
pub mod node;
pub mod server;
pub mod stats;

pub use handlers::{handle, FollowPlan, Reply};
pub use server::{serve, ApiServer};

/// Where `podvisor run` listens and the CLI connects by default.
pub const DEFAULT_SOCKET: &str = "/run/podvisor/podvisor.sock";

/// Errors of the API: request errors (each with its HTTP status), server setup, and client.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("method {method} is not allowed, only GET")]
    MethodNotAllowed { method: String },
    #[error("no such resource {path}")]
    NoRoute { path: String },
    #[error("malformed request {what}: {reason}")]
    BadRequest { what: String, reason: String },
    #[error("pod \"{query}\" not found")]
    PodNotFound { query: String },
    #[error("a container name must be specified for pod {pod}, choose one of: [{choices}]")]
    ContainerRequired { pod: String, choices: String },
    #[error("container {container} is not valid for pod {pod}, choose one of: [{choices}]")]
    ContainerNotFound {
        pod: String,
        container: String,
        choices: String,
    },
    #[error("previous terminated container {container} in pod {pod} not found")]
    NoPreviousLog { pod: String, container: String },
    #[error("container {container} in pod {pod} has no log yet: {state}")]
    NoLog {
        pod: String,
        container: String,
        state: String,
    },
    #[error("cannot read the log of container {container} in pod {pod}")]
    ReadLog {
        pod: String,
        container: String,
        source: LogError,
    },
    #[error("too many log followers (limit {limit}), try again later")]
    TooManyFollowers { limit: usize },
    #[error("too many connections (limit {limit}), try again later")]
    TooManyConnections { limit: usize },
    #[error("cannot encode the response")]
    Encode { source: serde_json::Error },

    #[error("cannot create socket directory {path}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("socket path {path} has no parent directory")]
    NoSocketDir { path: PathBuf },
    #[error("another process is already serving on {path}")]
    SocketInUse { path: PathBuf },
    #[error("{path} exists and is not a socket, refusing to replace it")]
    NotASocket { path: PathBuf },
    #[error("cannot listen on {path}")]
    Bind { path: PathBuf, source: io::Error },
    #[error("cannot start the api thread")]
    Spawn { source: io::Error },

    #[error("cannot connect to podvisor at {socket}: is `podvisor run` running?")]
    NotRunning { socket: PathBuf, source: io::Error },
    #[error("cannot connect to podvisor at {socket}")]
    Connect { socket: PathBuf, source: io::Error },
    #[error("connection to podvisor at {socket} failed")]
    Io { socket: PathBuf, source: io::Error },
    #[error("malformed response from podvisor at {socket}: {reason}")]
    MalformedResponse { socket: PathBuf, reason: String },
    #[error("{message}")]
    Status { status: u16, message: String },
    #[error("cannot decode the response to {path}")]
    Decode {
        path: String,
        source: serde_json::Error,
    },
    #[error("cannot decode the response to {path}: {error}")]
    DecodeField {
        path: String,
        error: crate::pod::manifest::FieldError,
    },
    #[error("cannot write the output")]
    Output { source: io::Error },
}

impl ApiError {
    /// The HTTP status the server answers this error with.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::MethodNotAllowed { .. } => 405,
            ApiError::NoRoute { .. } | ApiError::PodNotFound { .. } => 404,
            ApiError::BadRequest { .. }
            | ApiError::ContainerRequired { .. }
            | ApiError::ContainerNotFound { .. }
            | ApiError::NoPreviousLog { .. }
            | ApiError::NoLog { .. } => 400,
            ApiError::ReadLog {
                source: LogError::Open { source, .. },
                ..
            } if source.kind() == io::ErrorKind::NotFound => 404,
            ApiError::TooManyFollowers { .. } | ApiError::TooManyConnections { .. } => 503,
            ApiError::Status { status, .. } => *status,
            _ => 500,
        }
    }

    fn bad(what: impl Into<String>, reason: impl Into<String>) -> ApiError {
        ApiError::BadRequest {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

/// The message of `err` followed by those of its sources, `: `-separated.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut s = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        s.push_str(": ");
        s.push_str(&e.to_string());
        cur = e.source();
    }
    s
}

/// A pod as named in a URL: `/pods/{name}` or `/pods/{namespace}/{name}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: Option<String>,
    pub name: String,
}

impl PodRef {
    /// The query for [`Snapshot::find_pod`](crate::status::Snapshot::find_pod).
    pub fn query(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.query())
    }
}

/// What `/pods/{ns}/{name}/log` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRequest {
    pub pod: PodRef,
    pub container: Option<String>,
    /// The previous instance's log (`kubectl logs -p`).
    pub previous: bool,
    /// Only the last N lines (`tail=-1` means all, as in kubectl).
    pub tail: Option<usize>,
    /// Stream new lines until the client disconnects or the container stops running.
    pub follow: bool,
}

/// A parsed API request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiRequest {
    Healthz,
    ListPods,
    GetPod(PodRef),
    Events {
        pod: Option<String>,
    },
    SourceErrors,
    Logs(LogRequest),
    /// Cgroup usage of every pod, or of the one the query names.
    Stats {
        pod: Option<String>,
    },
    /// The node as a v1 Node: capacity, allocatable, conditions, images, pods.
    Node,
}

/// Parses a request line's method and URL (path and query, percent-encoded) into an
/// [`ApiRequest`]. Pure: no I/O.
pub fn parse_request(method: &str, url: &str) -> Result<ApiRequest, ApiError> {
    if method != "GET" {
        return Err(ApiError::MethodNotAllowed {
            method: method.to_string(),
        });
    }
    let (path, query) = match url.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (url, None),
    };
    let no_route = || ApiError::NoRoute {
        path: path.to_string(),
    };
    let raw_segments = path.strip_prefix('/').ok_or_else(no_route)?;
    let mut segments = Vec::new();
    for raw in raw_segments.split('/') {
        if raw.is_empty() {
            return Err(no_route());
        }
        segments.push(
            percent_decode(raw, false)
                .map_err(|e| ApiError::bad(format!("path segment {raw:?}"), e.to_string()))?,
        );
    }
    let mut params = parse_query(query.unwrap_or(""))?;
    let seg: Vec<&str> = segments.iter().map(String::as_str).collect();
    let req = match seg.as_slice() {
        ["healthz"] => ApiRequest::Healthz,
        ["pods"] => ApiRequest::ListPods,
        ["pods", name] => ApiRequest::GetPod(PodRef {
            namespace: None,
            name: name.to_string(),
        }),
        ["pods", ns, name] => ApiRequest::GetPod(PodRef {
            namespace: Some(ns.to_string()),
            name: name.to_string(),
        }),
        ["pods", ns, name, "log"] => {
            let container = params.take("container");
            if container.as_deref() == Some("") {
                return Err(ApiError::bad("query parameter container", "empty name"));
            }
            let previous = params.take_bool("previous")?;
            let follow = params.take_bool("follow")?;
            let tail = match params.take("tail") {
                None => None,
                Some(v) => parse_tail(&v)?,
            };
            if previous && follow {
                return Err(ApiError::bad(
                    "query",
                    "only one of follow and previous is allowed",
                ));
            }
            ApiRequest::Logs(LogRequest {
                pod: PodRef {
                    namespace: Some(ns.to_string()),
                    name: name.to_string(),
                },
                container,
                previous,
                tail,
                follow,
            })
        }
        ["events"] => ApiRequest::Events {
            pod: params.take("pod").filter(|p| !p.is_empty()),
        },
        ["source-errors"] => ApiRequest::SourceErrors,
        ["node"] => ApiRequest::Node,
        ["stats"] => ApiRequest::Stats {
            pod: params.take("pod").filter(|p| !p.is_empty()),
        },
        _ => return Err(no_route()),
    };
    params.finish()?;
    Ok(req)
}

fn parse_tail(v: &str) -> Result<Option<usize>, ApiError> {
    if v == "-1" {
        return Ok(None);
    }
    v.parse::<usize>().map(Some).map_err(|_| {
        ApiError::bad(
            "query parameter tail",
            format!("{v:?} is not a number of lines (or -1 for all)"),
        )
    })
}

/// Decoded query parameters; each must be consumed by the route.
struct Params(Vec<(String, String)>);

impl Params {
    fn take(&mut self, key: &str) -> Option<String> {
        let i = self.0.iter().position(|(k, _)| k == key)?;
        Some(self.0.remove(i).1)
    }

    fn take_bool(&mut self, key: &str) -> Result<bool, ApiError> {
        match self.take(key).as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(v) => Err(ApiError::bad(
                format!("query parameter {key}"),
                format!("{v:?} is not true or false"),
            )),
        }
    }

    fn finish(self) -> Result<(), ApiError> {
        match self.0.first() {
            None => Ok(()),
            Some((k, _)) => Err(ApiError::bad("query", format!("unknown parameter {k:?}"))),
        }
    }
}

fn parse_query(query: &str) -> Result<Params, ApiError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(k, true)
            .map_err(|e| ApiError::bad(format!("query parameter {k:?}"), e.to_string()))?;
        let value = percent_decode(v, true)
            .map_err(|e| ApiError::bad(format!("query parameter {key}"), e.to_string()))?;
        if out.iter().any(|(seen, _)| *seen == key) {
            return Err(ApiError::bad(
                "query",
                format!("parameter {key:?} repeated"),
            ));
        }
        out.push((key, value));
    }
    Ok(Params(out))
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// A path segment or query component that does not percent-decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PercentDecodeError {
    #[error("invalid percent escape {escape:?}")]
    Escape { escape: String },
    #[error("percent escapes do not decode to UTF-8")]
    NotUtf8,
}

/// Decodes `%XX` escapes (and `+` as a space in query components) into UTF-8 text.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Result<String, PercentDecodeError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hi = b.get(i + 1).copied().and_then(hex_val);
                let lo = b.get(i + 2).copied().and_then(hex_val);
                match (hi, lo) {
                    (Some(hi), Some(lo)) => out.push(hi << 4 | lo),
                    _ => {
                        let end = (i + 3).min(b.len());
                        return Err(PercentDecodeError::Escape {
                            escape: String::from_utf8_lossy(&b[i..end]).into_owned(),
                        });
                    }
                }
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| PercentDecodeError::NotUtf8)
}

/// Percent-encodes `s` for use as one path segment or query value: every byte except
/// RFC 3986 unreserved characters is escaped.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
