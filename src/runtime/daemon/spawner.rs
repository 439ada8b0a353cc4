//! The daemon's handle on its spawner ([`Spawner`]): exec'd from podvisor's binary when
//! first needed (and again when found dead), asked over the socket pair to fork monitors and
//! sandbox helpers or to hand over spare namespaces (messages in
//! [`crate::runtime::protocol`]). The spawner process itself is [`crate::runtime::spawner`].

use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use crate::runtime::protocol::{self, Reply, Request, MAX_MESSAGE, SOCKET_FD};
use crate::runtime::sandbox::{self, HelperRequest, NamespaceHelper, SandboxError};
use crate::sys::fdpass;

/// How long the runtime waits for the spawner's reply (a fork and a pidfd: microseconds,
/// unless the machine is swamped).
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a sandbox helper may take (namespaces, mounts, the pod init).
const HELPER_TIMEOUT: Duration = Duration::from_secs(60);

/// Errors of talking to the spawner.
#[derive(Debug, thiserror::Error)]
pub enum SpawnerError {
    #[error("cannot start the spawner {binary}: {source}")]
    Start { binary: PathBuf, source: io::Error },
    /// The request never reached a spawner (it was gone, and so was the one started for the
    /// retry): nothing was forked.
    #[error("spawner unreachable: {source}")]
    Send { source: io::Error },
    /// The request was sent but no answer came (the spawner died or hung): whether the child
    /// was forked is unknown; the caller's pipe tells.
    #[error("no answer from the spawner: {message}")]
    NoReply { message: String },
    /// The spawner answered that it could not fork.
    #[error("spawner: {message}")]
    Refused { message: String },
}

/// A monitor the spawner forked.
#[derive(Debug)]
pub struct SpawnedMonitor {
    pub pid: i32,
    /// Opened by the spawner before it could reap the monitor: always the right process.
    pub pidfd: OwnedFd,
}

struct Running {
    sock: OwnedFd,
    child: Child,
}

/// The runtime's handle on its spawner process, started on first use and again whenever it
/// is found dead. Requests are serialized (one fork at a time, microseconds each).
pub struct Spawner {
    binary: PathBuf,
    /// Bytes of command-line room the spawner is exec'd with (its children's
    /// `podvisor shim run <dir>` must fit).
    room: usize,
    running: Mutex<Option<Running>>,
}

impl Spawner {
    /// A spawner of `binary` (podvisor itself) whose children's command lines name paths up
    /// to `longest_path` bytes. Nothing runs until the first request.
    pub fn new(binary: PathBuf, longest_path: usize) -> Spawner {
        Spawner {
            binary,
            room: longest_path + 64,
            running: Mutex::new(None),
        }
    }

    fn start(&self) -> Result<Running, SpawnerError> {
        let start_err = |source| SpawnerError::Start {
            binary: self.binary.clone(),
            source,
        };
        let (ours, theirs) = fdpass::seqpacket_pair().map_err(start_err)?;
        let mut cmd = Command::new(&self.binary);
        cmd.arg("shim")
            .arg("spawner")
            .arg(crate::sys::proctitle::room_argument(self.room))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .env_remove("RUST_LOG");
        let fd = theirs.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec (fcntl, dup2).
        unsafe {
            cmd.pre_exec(move || fdpass::move_fd(fd, SOCKET_FD));
        }
        let child = cmd.spawn().map_err(start_err)?;
        drop(theirs);
        Ok(Running { sock: ours, child })
    }

    /// Sends `req` with `fds` and waits for the reply. A spawner found dead at the send is
    /// replaced (and reaped) and the request sent once more; a request that was sent is
    /// never repeated.
    fn call(&self, req: &Request, fds: &[RawFd]) -> Result<(Reply, Vec<OwnedFd>), SpawnerError> {
        let data = serde_json::to_vec(req).map_err(|e| SpawnerError::Send {
            source: io::Error::other(e),
        })?;
        let mut guard = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let mut attempt = 0;
        loop {
            if guard.is_none() {
                *guard = Some(self.start()?);
            }
            let running = guard.as_mut().ok_or_else(|| SpawnerError::Send {
                source: io::Error::other("no spawner"),
            })?;
            match fdpass::send(&running.sock, &data, fds) {
                Ok(()) => break,
                Err(source) => {
                    // Gone (EPIPE, ECONNRESET): reap it and start another, once.
                    if let Some(old) = guard.take() {
                        retire(old);
                    }
                    attempt += 1;
                    if attempt > 1 {
                        return Err(SpawnerError::Send { source });
                    }
                    log::warn!("spawner gone ({source}): starting a new one");
                }
            }
        }
        let running = guard.as_mut().ok_or_else(|| SpawnerError::NoReply {
            message: "no spawner".into(),
        })?;
        match read_reply(&running.sock) {
            Ok(r) => Ok(r),
            Err(message) => {
                // Dead or wedged: the next request gets a new spawner.
                if let Some(old) = guard.take() {
                    retire(old);
                }
                Err(SpawnerError::NoReply { message })
            }
        }
    }

    /// Forks a monitor for `dir` (`monitor::run` with `ready` as fd 3, `lock` as fd 4 and `log`
    /// as its stderr).
    pub fn spawn_monitor(
        &self,
        dir: &Path,
        ready: &OwnedFd,
        lock: &fs::File,
        log: &fs::File,
    ) -> Result<SpawnedMonitor, SpawnerError> {
        let req = Request::Monitor {
            dir: dir.to_path_buf(),
        };
        let fds = [ready.as_raw_fd(), lock.as_raw_fd(), log.as_raw_fd()];
        match self.call(&req, &fds)? {
            (Reply::Forked { pid }, fds) => match fds.into_iter().next() {
                Some(pidfd) => Ok(SpawnedMonitor { pid, pidfd }),
                None => Err(SpawnerError::NoReply {
                    message: format!("monitor {pid} forked, but no pidfd came with the answer"),
                }),
            },
            (Reply::Failed { message }, _) => Err(SpawnerError::Refused { message }),
            (other, _) => Err(SpawnerError::Refused {
                message: format!("unexpected answer to a monitor request: {other:?}"),
            }),
        }
    }

    /// Starts the spawner now rather than at the first request (so the first pod does not
    /// wait for its start-up); a failure is only logged, the first request tries again.
    pub fn prestart(&self) {
        let mut guard = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            match self.start() {
                Ok(r) => *guard = Some(r),
                Err(e) => log::warn!("{e} (tried again at the first container start)"),
            }
        }
    }

    /// The pid of the running spawner, if one runs (tests and benches).
    pub fn pid(&self) -> Option<i32> {
        let guard = self.running.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref().map(|r| r.child.id() as i32)
    }
}

impl Spawner {
    /// The spare pod namespaces with `hostname` set, if the spawner holds them: their files
    /// in the order of `sandbox::SPARE_KINDS`. `None` when it has none (or cannot be asked).
    fn take_spare(&self, hostname: &str) -> Option<Vec<OwnedFd>> {
        let req = Request::TakeSpare {
            hostname: hostname.to_string(),
        };
        match self.call(&req, &[]) {
            Ok((Reply::Spare, files)) if files.len() == sandbox::SPARE_KINDS.len() => Some(files),
            _ => None,
        }
    }
}

impl NamespaceHelper for Spawner {
    fn pin_namespaces(&self, req: &HelperRequest<'_>) -> Result<(), SandboxError> {
        // A pod that needs nothing but its own IPC, network and UTS namespaces takes the
        // spare ones and pins them from here: no helper process (`sandbox::pin_spare`).
        if !req.host_network && !req.share_pid && req.user_ns_base.is_none() {
            if let Some(files) = self.take_spare(req.hostname) {
                return sandbox::pin_spare(req.dir, &files);
            }
        }
        let helper_err = |message: String| SandboxError::Helper { message };
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|source| {
            SandboxError::Sys {
                what: "pipe for the namespace helper of",
                path: req.dir.to_path_buf(),
                source,
            }
        })?;
        let sent = self.call(
            &Request::Sandbox {
                dir: req.dir.to_path_buf(),
                hostname: req.hostname.to_string(),
                host_network: req.host_network,
                share_pid: req.share_pid,
                user_ns_base: req.user_ns_base,
            },
            &[w.as_raw_fd()],
        );
        // The helper holds the write end now (or nobody does): EOF follows its end.
        drop(w);
        match sent {
            Ok((Reply::Forked { .. }, _)) | Err(SpawnerError::NoReply { .. }) => {}
            Ok((Reply::Failed { message }, _)) => return Err(helper_err(message)),
            Ok((other, _)) => {
                return Err(helper_err(format!(
                    "unexpected answer to a sandbox request: {other:?}"
                )))
            }
            Err(e) => return Err(helper_err(e.to_string())),
        }
        match read_to_eof(&r, HELPER_TIMEOUT)
            .map_err(|e| helper_err(format!("reading its result: {e}")))?
        {
            out if out == protocol::HELPER_OK => Ok(()),
            out if out.is_empty() => Err(helper_err(
                "the helper ended without a result (killed, or the spawner died before forking it)"
                    .into(),
            )),
            out => Err(helper_err(String::from_utf8_lossy(&out).trim().to_string())),
        }
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        let running = self.running.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = running.take() {
            retire(r);
        }
    }
}

/// Closes our end (a live spawner exits on the EOF) and reaps the spawner: it is our child.
fn retire(r: Running) {
    let Running { sock, mut child } = r;
    drop(sock);
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return,
            Ok(None) if Instant::now() >= deadline => {
                // Wedged: it holds nothing a container needs.
                let _ = child.kill();
                let _ = child.wait();
                return;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

fn read_reply(sock: &OwnedFd) -> Result<(Reply, Vec<OwnedFd>), String> {
    let mut fds = [PollFd::new(sock.as_fd(), PollFlags::POLLIN)];
    let deadline = Instant::now() + REPLY_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("none within {}s", REPLY_TIMEOUT.as_secs()));
        }
        match poll(
            &mut fds,
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(nix::Error::EINTR) => continue,
            Ok(_) => break,
            Err(e) => return Err(format!("poll: {e}")),
        }
    }
    let mut buf = vec![0u8; MAX_MESSAGE];
    let (n, fds) = fdpass::recv(sock, &mut buf).map_err(|e| e.to_string())?;
    if n == 0 {
        return Err("the spawner exited".into());
    }
    let reply: Reply =
        serde_json::from_slice(&buf[..n]).map_err(|e| format!("malformed answer: {e}"))?;
    Ok((reply, fds))
}

/// Everything `fd` yields until EOF, within `timeout`.
fn read_to_eof(fd: &OwnedFd, timeout: Duration) -> io::Result<Vec<u8>> {
    let deadline = Instant::now() + timeout;
    let mut out = Vec::new();
    let mut file = fs::File::from(fd.try_clone()?);
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no result within {}s", timeout.as_secs()),
            ));
        }
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) | Err(nix::Error::EINTR) => continue,
            Ok(_) => {}
            Err(e) => return Err(e.into()),
        }
        match file.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}
