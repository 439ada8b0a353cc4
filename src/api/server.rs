//! api::server: the HTTP/1.1 server on podvisor's unix socket — socket file setup (0600 in a
//! 0700 directory, stale sockets replaced, a live one refused), one thread accepting, one
//! thread per connection, one response per connection (`Connection: close`), and log
//! following with chunked transfer that ends when the client hangs up.
//!
//! The HTTP itself (heads, limits, deadlines, responses, chunked streams flushed line by line,
//! noticing a client that hung up while the log is quiet) is [`crate::httpserver`]'s, shared
//! with the node API; it says why both are hand-written rather than tiny_http. What stays here
//! is the socket file, the accept loop that can cut every connection on stop, the API's JSON
//! error replies (every bad request is a 400 with `{"error": ...}`) and the follow source.
//! No auth hook: the socket's permissions decide who may ask.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::handlers::{container_running, error_reply, handle, log_text, FollowPlan, Reply};
use super::stats::StatsSource;
use super::{parse_request, ApiError, ApiRequest};
use crate::httpserver::{
    read_head, write_response, DeadlineStream, Exchange, Followed, HeadError, Pace, RequestHead,
    Response, Service, Slot,
};
use crate::logs::LogFollower;
use crate::status::SnapshotCell;
use crate::sys::stop::{wait_readable, StopSignal};

/// How long a connection may take to send its request head, then to take a whole answer or
/// one write of a followed log.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a log follower looks at the stop flag, the log and the client (the accept loop
/// blocks on the socket and the stop signal together: an idle server is never woken).
const TICK: Duration = Duration::from_millis(100);
/// One request per connection: the head within [`IO_TIMEOUT`], then the answer within as much.
const EXCHANGE: Exchange = Exchange {
    name: "api",
    response: Some(IO_TIMEOUT),
};

/// Limits of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Concurrent log followers; more get 503.
    pub max_followers: usize,
    /// Concurrent connections (followers included); more get 503.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_followers: 32,
            max_connections: 128,
        }
    }
}

struct Conn {
    /// A clone of the connection's socket, to shut it down when the server stops.
    stream: UnixStream,
    handle: JoinHandle<()>,
}

struct Shared {
    stop: StopSignal,
    snapshots: SnapshotCell,
    limits: Limits,
    stats: Option<StatsSource>,
    followers: AtomicUsize,
    conns: Mutex<HashMap<u64, Conn>>,
    next_id: AtomicU64,
}

impl Shared {
    fn conns(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Conn>> {
        // Threads holding this lock only insert, remove or count: a panic there leaves the
        // map consistent, so a poisoned lock is still usable.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Joins the threads of finished connections and returns how many are still running.
    fn reap(&self) -> usize {
        let mut conns = self.conns();
        let done: Vec<u64> = conns
            .iter()
            .filter(|(_, c)| c.handle.is_finished())
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            if let Some(c) = conns.remove(&id) {
                if c.handle.join().is_err() {
                    log::error!("api connection thread panicked");
                }
            }
        }
        conns.len()
    }
}

/// A running API server. Dropping it (or [`ApiServer::stop`]) stops every thread and removes
/// the socket file (if it is still the one this server created).
pub struct ApiServer {
    socket: PathBuf,
    /// Device and inode of the socket file this server created.
    identity: (u64, u64),
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// Starts serving `snapshots` on the unix socket `socket` with default [`Limits`].
pub fn serve(socket: &Path, snapshots: SnapshotCell) -> Result<ApiServer, ApiError> {
    serve_with(socket, snapshots, Limits::default())
}

/// Starts serving `snapshots` on the unix socket `socket`. Missing parent directories are
/// created with mode 0700; the socket gets mode 0600 before it appears under its name (it is
/// bound under a temporary name and renamed), replacing a stale socket file. A socket another
/// process still listens on, or a path that is not a socket, is an error.
pub fn serve_with(
    socket: &Path,
    snapshots: SnapshotCell,
    limits: Limits,
) -> Result<ApiServer, ApiError> {
    serve_with_stats(socket, snapshots, limits, None)
}

/// [`serve_with`], also answering `/stats` from the cgroups of `stats` (without it, `/stats`
/// is not found).
pub fn serve_with_stats(
    socket: &Path,
    snapshots: SnapshotCell,
    limits: Limits,
    stats: Option<StatsSource>,
) -> Result<ApiServer, ApiError> {
    // Before the bind: nothing to undo when it fails.
    let stop = StopSignal::new().map_err(|source| ApiError::Spawn { source })?;
    let listener = bind_socket(socket)?;
    let meta = fs::symlink_metadata(socket).map_err(|source| ApiError::Bind {
        path: socket.to_owned(),
        source,
    })?;
    let identity = (meta.dev(), meta.ino());
    let shared = Arc::new(Shared {
        stop,
        snapshots,
        limits,
        stats,
        followers: AtomicUsize::new(0),
        conns: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(0),
    });
    let accept_shared = Arc::clone(&shared);
    let accept = std::thread::Builder::new()
        .name("podvisor-api".into())
        .spawn(move || accept_loop(listener, accept_shared));
    let accept = match accept {
        Ok(h) => h,
        Err(source) => {
            remove_if_ours(socket, identity);
            return Err(ApiError::Spawn { source });
        }
    };
    Ok(ApiServer {
        socket: socket.to_owned(),
        identity,
        shared,
        accept: Some(accept),
    })
}

impl ApiServer {
    /// The socket path served.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Connections being served right now (followers included).
    pub fn active_connections(&self) -> usize {
        self.shared.reap()
    }

    /// Log followers streaming right now.
    pub fn active_followers(&self) -> usize {
        self.shared.followers.load(Ordering::SeqCst)
    }

    /// Stops accepting, ends every connection (followers included), joins all threads and
    /// removes the socket file.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let Some(accept) = self.accept.take() else {
            return;
        };
        self.shared.stop.stop();
        if accept.join().is_err() {
            log::error!("api accept thread panicked");
        }
        // Followers see the stop flag within a tick and end their streams properly; give
        // them that long before cutting every remaining connection.
        let deadline = std::time::Instant::now() + 5 * TICK;
        while self.shared.reap() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let conns: Vec<Conn> = self.shared.conns().drain().map(|(_, c)| c).collect();
        for c in &conns {
            // Unblocks reads and writes; the thread then ends. Failure means it is gone.
            let _ = c.stream.shutdown(std::net::Shutdown::Both);
        }
        for c in conns {
            if c.handle.join().is_err() {
                log::error!("api connection thread panicked");
            }
        }
        remove_if_ours(&self.socket, self.identity);
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Removes the socket file unless another server replaced it meanwhile.
fn remove_if_ours(socket: &Path, identity: (u64, u64)) {
    match fs::symlink_metadata(socket) {
        Ok(m) if (m.dev(), m.ino()) == identity => {
            if let Err(e) = fs::remove_file(socket) {
                log::warn!("cannot remove api socket {}: {e}", socket.display());
            }
        }
        _ => {}
    }
}

fn bind_socket(socket: &Path) -> Result<UnixListener, ApiError> {
    let dir = socket
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .ok_or_else(|| ApiError::NoSocketDir {
            path: socket.to_owned(),
        })?;
    let file_name = socket
        .file_name()
        .ok_or_else(|| ApiError::NoSocketDir {
            path: socket.to_owned(),
        })?
        .to_string_lossy()
        .into_owned();
    if !dir.is_dir() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| ApiError::CreateDir {
                path: dir.to_owned(),
                source,
            })?;
    }
    let bind_err = |source| ApiError::Bind {
        path: socket.to_owned(),
        source,
    };
    match fs::symlink_metadata(socket) {
        Ok(m) if m.file_type().is_socket() => {
            if UnixStream::connect(socket).is_ok() {
                return Err(ApiError::SocketInUse {
                    path: socket.to_owned(),
                });
            }
            // Nobody listens: a stale socket of an earlier run, replaced by the rename below.
        }
        Ok(_) => {
            return Err(ApiError::NotASocket {
                path: socket.to_owned(),
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e)),
    }
    let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(bind_err(e)),
    }
    let listener = UnixListener::bind(&tmp).map_err(bind_err)?;
    let finish = fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))
        .and_then(|()| fs::rename(&tmp, socket));
    if let Err(e) = finish {
        // Best effort: the listener is dropped and the temporary name is useless.
        let _ = fs::remove_file(&tmp);
        return Err(bind_err(e));
    }
    Ok(listener)
}

fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    while !shared.stop.is_stopped() {
        match wait_readable(listener.as_fd(), &shared.stop) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                log::error!("api: cannot poll the listening socket: {e}");
                shared.stop.wait(TICK);
                continue;
            }
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) => {
                log::warn!("api: cannot accept a connection: {e}");
                continue;
            }
        };
        if shared.reap() >= shared.limits.max_connections {
            let err = ApiError::TooManyConnections {
                limit: shared.limits.max_connections,
            };
            let mut stream = DeadlineStream::new(stream, Instant::now() + Duration::from_secs(1));
            // A client that does not read its 503 only loses it.
            let _ = write_response(&mut stream, &response(error_reply(&err)), false);
            continue;
        }
        let clone = match stream.try_clone() {
            Ok(c) => c,
            Err(e) => {
                log::warn!("api: cannot clone a connection socket: {e}");
                continue;
            }
        };
        let conn_shared = Arc::clone(&shared);
        let spawned = std::thread::Builder::new()
            .name("podvisor-api-conn".into())
            .spawn(move || serve_connection(stream, &conn_shared));
        match spawned {
            Ok(handle) => {
                let id = shared.next_id.fetch_add(1, Ordering::SeqCst);
                shared.conns().insert(
                    id,
                    Conn {
                        stream: clone,
                        handle,
                    },
                );
            }
            Err(e) => log::warn!("api: cannot start a connection thread: {e}"),
        }
    }
}

/// Reads a request head (at most 16 KiB, up to the blank line) from `stream`; `Ok(None)` if
/// the client closed without sending anything. The server reads it on each connection under
/// the connection's deadline; the fuzz target calls it on raw bytes.
pub fn read_request_head<R: Read>(stream: &mut R) -> Result<Option<RequestHead>, ApiError> {
    read_head(stream).map_err(|e| bad_request(&e))
}

/// A request head that could not be read, as the API reports it (always 400).
fn bad_request(err: &HeadError) -> ApiError {
    let (what, reason) = match err {
        HeadError::RequestLine { reason } => ("request line", reason.to_string()),
        HeadError::Header { line } => ("header", format!("line {line}")),
        HeadError::TooLarge { max } => ("head", format!("larger than {max} bytes")),
        HeadError::TooManyHeaders { max } => ("head", format!("more than {max} headers")),
        HeadError::Truncated => (
            "head",
            "connection closed before the end of the headers".to_string(),
        ),
        HeadError::Read { reason } => ("head", format!("cannot read it: {reason}")),
    };
    ApiError::BadRequest {
        what: what.into(),
        reason,
    }
}

/// A whole reply as the response sent: JSON or text, 405s with `Allow: GET`.
fn response(reply: Reply) -> Response {
    let (status, content_type, body) = match reply {
        Reply::Json { status, body } => (status, "application/json", body),
        Reply::Text { body } => (200, "text/plain; charset=utf-8", body),
        // Never sent: the server streams a follow reply.
        Reply::Follow(_) => (
            500,
            "text/plain; charset=utf-8",
            b"a follow reply is streamed, not written whole".to_vec(),
        ),
    };
    let headers = if status == 405 {
        vec![("Allow", "GET".to_string())]
    } else {
        Vec::new()
    };
    Response {
        status,
        content_type,
        headers,
        body,
    }
}

/// A connection of the unix socket.
type Stream = DeadlineStream<UnixStream>;

fn serve_connection(stream: UnixStream, shared: &Shared) {
    let mut conn = Stream::new(stream, Instant::now() + IO_TIMEOUT);
    // The server keeps a clone of the socket (to cut it on stop): the exchange ends by
    // shutting it down, so the client sees the end of the response now.
    EXCHANGE.serve(&mut conn, None, shared);
}

impl Service<Stream> for Shared {
    fn bad_head(&self, err: &HeadError) -> Response {
        response(error_reply(&bad_request(err)))
    }

    fn respond(&self, conn: &mut Stream, head: &RequestHead) -> io::Result<()> {
        match self.reply(head) {
            Reply::Follow(plan) => follow(conn, &plan, self, head.http10),
            reply => write_response(conn, &response(reply), false),
        }
    }
}

impl Shared {
    /// The reply to `head`, from one snapshot; errors become their JSON error replies.
    fn reply(&self, head: &RequestHead) -> Reply {
        let snap = self.snapshots.get();
        parse_request(&head.method, &head.target)
            .and_then(|req| match (&req, &self.stats) {
                (ApiRequest::Stats { pod }, Some(src)) => {
                    let stats = super::stats::collect(&snap, pod.as_deref(), src)?;
                    let body =
                        serde_json::to_vec(&stats).map_err(|source| ApiError::Encode { source })?;
                    Ok(Reply::Json { status: 200, body })
                }
                (ApiRequest::GetPod(pod), Some(src)) => match src.node.api_server.get() {
                    Some(api) => {
                        let mut view = snap
                            .find_pod(&pod.query())
                            .cloned()
                            .ok_or_else(|| ApiError::PodNotFound { query: pod.query() })?;
                        view.mirror = Some(api.mirror_for(&crate::status::full_name(&view.pod)));
                        let body = serde_json::to_vec(&view)
                            .map_err(|source| ApiError::Encode { source })?;
                        Ok(Reply::Json { status: 200, body })
                    }
                    None => handle(&req, &snap),
                },
                (ApiRequest::Node, Some(src)) => {
                    let body = serde_json::to_vec(&super::node::node_json(&snap, &src.node))
                        .map_err(|source| ApiError::Encode { source })?;
                    Ok(Reply::Json { status: 200, body })
                }
                _ => handle(&req, &snap),
            })
            .unwrap_or_else(|e| {
                log::debug!("api: {} {}: {e}", head.method, head.target);
                error_reply(&e)
            })
    }
}

/// Whether the snapshot still shows the followed container running with the followed log.
fn still_following(shared: &Shared, plan: &FollowPlan) -> bool {
    let snap = shared.snapshots.get();
    let Some(view) = snap.find_pod(&plan.pod) else {
        return false;
    };
    view.log_paths.get(&plan.container) == Some(&plan.path)
        && container_running(&view.pod, &plan.container)
}

/// A followed container log, as plain lines.
struct Source<'a> {
    follower: LogFollower,
    plan: &'a FollowPlan,
    shared: &'a Shared,
}

impl Followed for Source<'_> {
    fn poll(&mut self) -> Option<(Vec<u8>, bool)> {
        match self.follower.poll() {
            Ok(lines) => Some((log_text(&lines), false)),
            Err(e) => {
                log::warn!(
                    "api: following the log of container {} in pod {}: {}",
                    self.plan.container,
                    self.plan.pod,
                    super::error_chain(&e)
                );
                None
            }
        }
    }

    fn goes_on(&mut self) -> bool {
        still_following(self.shared, self.plan)
    }

    fn stopping(&self) -> bool {
        self.shared.stop.is_stopped()
    }
}

/// Streams the log of `plan` until the client hangs up, the container stops running (or
/// restarts into a new log file), or the server stops. A read error after the head was sent
/// ends the stream without its final chunk, so the client sees it was cut short.
fn follow(conn: &mut Stream, plan: &FollowPlan, shared: &Shared, http10: bool) -> io::Result<()> {
    let limit = shared.limits.max_followers;
    let Some(_slot) = Slot::acquire(&shared.followers, limit) else {
        let err = ApiError::TooManyFollowers { limit };
        return write_response(conn, &response(error_reply(&err)), false);
    };
    let follower = match LogFollower::new(&plan.path, plan.start) {
        Ok(f) => f,
        Err(source) => {
            let err = ApiError::ReadLog {
                pod: plan.pod.clone(),
                container: plan.container.clone(),
                source,
            };
            return write_response(conn, &response(error_reply(&err)), false);
        }
    };
    let mut source = Source {
        follower,
        plan,
        shared,
    };
    let head = response(Reply::Text { body: Vec::new() });
    let pace = Pace {
        tick: TICK,
        write: IO_TIMEOUT,
    };
    crate::httpserver::follow(conn, &head, !http10, &mut source, pace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_request_line(head: &[u8]) -> Result<(String, String, bool), ApiError> {
        let head = crate::httpserver::parse_head(head).map_err(|e| bad_request(&e))?;
        Ok((head.method, head.target, head.http10))
    }

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request_line(b"GET /pods?x=1 HTTP/1.1\r\nHost: x").expect("ok"),
            ("GET".into(), "/pods?x=1".into(), false)
        );
        assert!(parse_request_line(b"GET / HTTP/1.0").expect("1.0").2);
        for bad in [
            &b"GET /pods"[..],
            b"GET /a b HTTP/1.1",
            b"GET /pods SPDY/3",
            b" /pods HTTP/1.1",
            b"\xff /pods HTTP/1.1",
        ] {
            let err = parse_request_line(bad).expect_err("bad line");
            assert_eq!(err.status(), 400, "{err}");
            assert!(err
                .to_string()
                .starts_with("malformed request request line"));
        }
    }

    #[test]
    fn heads_too_large_or_cut_are_bad_requests() {
        let mut big = b"GET / HTTP/1.1\r\nx: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', 20 * 1024));
        let err = read_request_head(&mut &big[..]).expect_err("too large");
        assert_eq!(err.status(), 400);
        assert_eq!(
            err.to_string(),
            "malformed request head: larger than 16384 bytes"
        );
        let err = read_request_head(&mut &b"GET / HTTP/1.1\r\nHost"[..]).expect_err("cut");
        assert_eq!(err.status(), 400);
        assert!(read_request_head(&mut &b""[..]).expect("empty").is_none());
    }
}
