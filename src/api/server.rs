//! api::server: the HTTP/1.1 server on podvisor's unix socket — socket file setup (0600 in a
//! 0700 directory, stale sockets replaced, a live one refused), one thread accepting, one
//! thread per connection, one response per connection (`Connection: close`), and log
//! following with chunked transfer that ends when the client hangs up.
//!
//! The server is a small hand-written one rather than tiny_http: following a log needs every
//! line flushed as it arrives (tiny_http's chunked encoder buffers 8 KiB and `io::copy` never
//! flushes it) and needs the connection's socket to notice a client that hung up while the
//! log is quiet (tiny_http keeps the socket to itself), or idle followers would pile up.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, MsgFlags};

use super::handlers::{container_running, error_reply, handle, log_text, FollowPlan, Reply};
use super::stats::StatsSource;
use super::{parse_request, ApiError, ApiRequest};
use crate::logs::LogFollower;
use crate::status::SnapshotCell;
use crate::sys::stop::{wait_readable, StopSignal};

/// How long a connection may take to send its request, and a write may block.
const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a log follower looks at the stop flag, the log and the client (the accept loop
/// blocks on the socket and the stop signal together: an idle server is never woken).
const TICK: Duration = Duration::from_millis(100);
/// The largest request head (request line and headers) accepted.
const MAX_HEAD: usize = 16 * 1024;

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

fn poll_timeout(d: Duration) -> PollTimeout {
    // TICK is 100 ms, well within PollTimeout's i32 milliseconds.
    PollTimeout::try_from(d).unwrap_or(PollTimeout::MAX)
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
            let mut stream = stream;
            // A client that does not read its 503 only loses it.
            let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_reply(&mut stream, &error_reply(&err));
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

/// The request line of a request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLine {
    pub method: String,
    /// The request target as sent (path and query, percent-encoded).
    pub target: String,
    /// HTTP/1.0 clients get no chunked encoding.
    pub http10: bool,
}

/// Reads a request head (at most 16 KiB, up to the blank line) from `stream` and parses its
/// request line; `Ok(None)` if the client closed without sending anything. Headers are read
/// and ignored. The server calls it on each connection (with a read timeout on the socket).
pub fn read_request_head<R: Read>(stream: &mut R) -> Result<Option<RequestLine>, ApiError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let end = loop {
        if let Some(p) = find_head_end(&buf) {
            break p;
        }
        if buf.len() > MAX_HEAD {
            return Err(ApiError::BadRequest {
                what: "head".into(),
                reason: format!("larger than {MAX_HEAD} bytes"),
            });
        }
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(ApiError::BadRequest {
                    what: "head".into(),
                    reason: format!("cannot read it: {e}"),
                })
            }
        };
        if n == 0 {
            if buf.is_empty() {
                return Ok(None);
            }
            return Err(ApiError::BadRequest {
                what: "head".into(),
                reason: "connection closed before the end of the headers".into(),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    parse_request_line(&buf[..end]).map(Some)
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .or_else(|| buf.windows(2).position(|w| w == b"\n\n"))
}

fn parse_request_line(head: &[u8]) -> Result<RequestLine, ApiError> {
    let bad = |reason: &str| ApiError::BadRequest {
        what: "request line".into(),
        reason: reason.into(),
    };
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = std::str::from_utf8(&head[..line_end]).map_err(|_| bad("not UTF-8"))?;
    let line = line.trim_end_matches('\r');
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad("expected METHOD TARGET VERSION"));
    };
    if !version.starts_with("HTTP/1.") || method.is_empty() || target.is_empty() {
        return Err(bad("expected METHOD TARGET HTTP/1.x"));
    }
    Ok(RequestLine {
        method: method.to_string(),
        target: target.to_string(),
        http10: version == "HTTP/1.0",
    })
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    }
}

fn write_reply(stream: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    let (status, content_type, body) = match reply {
        Reply::Json { status, body } => (*status, "application/json", body),
        Reply::Text { body } => (200, "text/plain; charset=utf-8", body),
        Reply::Follow(_) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a follow reply is streamed, not written whole",
            ))
        }
    };
    let allow = if status == 405 { "Allow: GET\r\n" } else { "" };
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{allow}Connection: close\r\n\r\n",
        reason_phrase(status),
        body.len()
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    stream.write_all(&out)?;
    stream.flush()
}

fn serve_connection(mut stream: UnixStream, shared: &Shared) {
    serve_request(&mut stream, shared);
    // The server keeps a clone of the socket (to cut it on stop): shut it down explicitly so
    // the client sees the end of the response now. Failure means the client already left.
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn serve_request(stream: &mut UnixStream, shared: &Shared) {
    let setup = stream
        .set_read_timeout(Some(IO_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)));
    if let Err(e) = setup {
        log::warn!("api: cannot set socket timeouts: {e}");
        return;
    }
    let line = match read_request_head(stream) {
        Ok(Some(line)) => line,
        Ok(None) => return,
        Err(e) => {
            let _ = write_reply(stream, &error_reply(&e));
            return;
        }
    };
    let snap = shared.snapshots.get();
    let reply = parse_request(&line.method, &line.target)
        .and_then(|req| match (&req, &shared.stats) {
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
                    let body =
                        serde_json::to_vec(&view).map_err(|source| ApiError::Encode { source })?;
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
            log::debug!("api: {} {}: {e}", line.method, line.target);
            error_reply(&e)
        });
    drop(snap);
    let result = match reply {
        Reply::Follow(plan) => follow(stream, &plan, shared, line.http10),
        reply => write_reply(stream, &reply),
    };
    if let Err(e) = result {
        log::debug!(
            "api: {} {}: client went away: {e}",
            line.method,
            line.target
        );
    }
}

/// Holds one of the limited follower slots.
struct FollowerSlot<'a>(&'a AtomicUsize);

impl<'a> FollowerSlot<'a> {
    fn acquire(count: &'a AtomicUsize, limit: usize) -> Option<FollowerSlot<'a>> {
        count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| FollowerSlot(count))
    }
}

impl Drop for FollowerSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits up to `timeout` for the client to hang up; true if it did.
fn client_gone(stream: &UnixStream, timeout: Duration) -> bool {
    // A hang-up shows as POLLHUP, or as POLLIN with end of stream (nix 0.29 has no POLLRDHUP).
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    match nix::poll::poll(&mut fds, poll_timeout(timeout)) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => false,
        Err(_) => true,
        Ok(_) => {
            let revents = fds[0].revents().unwrap_or(PollFlags::empty());
            if revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
                return true;
            }
            // Bytes after the request: read and ignore them; 0 means end of stream.
            let mut scratch = [0u8; 512];
            match recv(stream.as_raw_fd(), &mut scratch, MsgFlags::MSG_DONTWAIT) {
                Ok(0) => true,
                Ok(_) | Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => false,
                Err(_) => true,
            }
        }
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

fn write_chunk(stream: &mut UnixStream, data: &[u8], chunked: bool) -> io::Result<()> {
    if chunked {
        let mut out = format!("{:x}\r\n", data.len()).into_bytes();
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
        stream.write_all(&out)?;
    } else {
        stream.write_all(data)?;
    }
    stream.flush()
}

/// Streams the log of `plan` until the client hangs up, the container stops running (or
/// restarts into a new log file), or the server stops. A read error after the head was sent
/// ends the stream without its final chunk, so the client sees it was cut short.
fn follow(
    stream: &mut UnixStream,
    plan: &FollowPlan,
    shared: &Shared,
    http10: bool,
) -> io::Result<()> {
    let limit = shared.limits.max_followers;
    let Some(_slot) = FollowerSlot::acquire(&shared.followers, limit) else {
        return write_reply(stream, &error_reply(&ApiError::TooManyFollowers { limit }));
    };
    let mut follower = match LogFollower::new(&plan.path, plan.start) {
        Ok(f) => f,
        Err(source) => {
            let err = ApiError::ReadLog {
                pod: plan.pod.clone(),
                container: plan.container.clone(),
                source,
            };
            return write_reply(stream, &error_reply(&err));
        }
    };
    let chunked = !http10;
    let encoding = if chunked {
        "Transfer-Encoding: chunked\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n{encoding}Connection: close\r\n\r\n"
    );
    stream.write_all(head.as_bytes())?;
    stream.flush()?;
    let mut last_round = false;
    loop {
        let lines = match follower.poll() {
            Ok(lines) => lines,
            Err(e) => {
                log::warn!(
                    "api: following the log of container {} in pod {}: {}",
                    plan.container,
                    plan.pod,
                    super::error_chain(&e)
                );
                return Ok(());
            }
        };
        if !lines.is_empty() {
            write_chunk(stream, &log_text(&lines), chunked)?;
        }
        if last_round || shared.stop.is_stopped() {
            break;
        }
        if client_gone(stream, TICK) {
            return Ok(());
        }
        last_round = !still_following(shared, plan);
    }
    if chunked {
        stream.write_all(b"0\r\n\r\n")?;
        stream.flush()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        assert_eq!(
            parse_request_line(b"GET /pods?x=1 HTTP/1.1\r\nHost: x").expect("ok"),
            RequestLine {
                method: "GET".into(),
                target: "/pods?x=1".into(),
                http10: false
            }
        );
        assert!(parse_request_line(b"GET / HTTP/1.0").expect("1.0").http10);
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
    fn follower_slots_are_capped_and_released() {
        let count = AtomicUsize::new(0);
        let a = FollowerSlot::acquire(&count, 2).expect("first");
        let b = FollowerSlot::acquire(&count, 2).expect("second");
        assert!(FollowerSlot::acquire(&count, 2).is_none());
        drop(a);
        let c = FollowerSlot::acquire(&count, 2).expect("after release");
        drop((b, c));
        assert_eq!(count.load(Ordering::SeqCst), 0);
    }
}
