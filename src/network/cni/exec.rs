//! exec: one plugin invocation as the spec defines it ("Section 3: Execution protocol"): the
//! plugin binary found in the plugin directories, the runtime's environment with the `CNI_*`
//! variables of this call, the configuration on stdin, the result or error on stdout.
//!
//! Bounded: the plugin runs in a process group of its own and the whole group gets SIGKILL
//! when the call outlives its timeout (plugins run iptables and ipam children). It may be run
//! from any thread of the multi-threaded daemon (a fork+exec; nothing else runs in the child
//! before the exec but `setpgid` and clearing close-on-exec of one lock descriptor, both
//! async-signal-safe).

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

/// Most of a plugin's stdout or stderr kept (results are a few KB).
const MAX_OUTPUT: usize = 1024 * 1024;

/// What a finished plugin process left.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a plugin process gave no output.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("cannot run {path}: {source}")]
    Spawn { path: PathBuf, source: io::Error },
    #[error("no answer within {timeout:?}: killed{stderr}")]
    Timeout { timeout: Duration, stderr: String },
    #[error("reading its output: {0}")]
    Io(#[from] io::Error),
}

/// The first `name` found in `dirs` that is an executable file.
pub fn find_plugin(dirs: &[PathBuf], name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    dirs.iter().map(|d| d.join(name)).find(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// The environment a plugin gets: the daemon's own, without `CNI_*` variables (libcni's
/// `Args.AsEnv`), with a PATH that finds iptables even when the daemon's has no sbin
/// directory, and the call's variables.
fn environment(vars: &[(&str, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| !k.starts_with("CNI_"))
        .collect();
    let path = env.iter_mut().find(|(k, _)| k == "PATH");
    const STANDARD: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    match path {
        Some((_, p)) if p.split(':').any(|d| d == "/usr/sbin" || d == "/sbin") => {}
        Some((_, p)) => *p = format!("{p}:{STANDARD}"),
        None => env.push(("PATH".into(), STANDARD.into())),
    }
    env.extend(vars.iter().map(|(k, v)| (k.to_string(), v.clone())));
    env
}

/// Runs `path` with `vars` and `stdin`, at most `timeout`. `inherit_fd`, when given, stays
/// open in the plugin (and its children): a lock held as long as any of them lives.
pub fn run(
    path: &Path,
    vars: &[(&str, String)],
    stdin: &[u8],
    timeout: Duration,
    inherit_fd: Option<RawFd>,
) -> Result<Output, ExecError> {
    let mut cmd = Command::new(path);
    cmd.env_clear()
        .envs(environment(vars))
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(fd) = inherit_fd {
        // SAFETY: fcntl(F_SETFD) is async-signal-safe and touches only the child's copy of
        // the descriptor table.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().map_err(|source| ExecError::Spawn {
        path: path.to_path_buf(),
        source,
    })?;
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + timeout;
    let pidfd = pidfd_open(pid)?;
    let file = |fd: OwnedFd| std::fs::File::from(fd);
    let mut input = child.stdin.take().map(|p| file(p.into()));
    let mut stdout = child.stdout.take().map(|p| file(p.into()));
    let mut stderr = child.stderr.take().map(|p| file(p.into()));
    for fd in [
        input.as_ref().map(|f| f.as_raw_fd()),
        stdout.as_ref().map(|f| f.as_raw_fd()),
        stderr.as_ref().map(|f| f.as_raw_fd()),
    ]
    .into_iter()
    .flatten()
    {
        set_nonblocking(fd)?;
    }
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut written = 0usize;
    if stdin.is_empty() {
        input = None;
    }
    let mut exited_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        if now >= deadline {
            // SAFETY: kill(2) of the plugin's own process group (it leads it).
            unsafe { libc::kill(-pid, libc::SIGKILL) };
            let _ = child.wait();
            return Err(ExecError::Timeout {
                timeout,
                stderr: tail(&err),
            });
        }
        // After the plugin exited, a child it left running may hold the pipes open: read
        // what is buffered, for a moment, then stop.
        if let Some(t) = exited_at {
            if now >= t + Duration::from_millis(100) || (stdout.is_none() && stderr.is_none()) {
                break;
            }
        }
        let wait = if exited_at.is_some() {
            Duration::from_millis(10)
        } else {
            deadline - now
        };
        let mut fds = Vec::with_capacity(4);
        let slots: [(Option<std::os::fd::BorrowedFd<'_>>, PollFlags); 3] = [
            (input.as_ref().map(|f| f.as_fd()), PollFlags::POLLOUT),
            (stdout.as_ref().map(|f| f.as_fd()), PollFlags::POLLIN),
            (stderr.as_ref().map(|f| f.as_fd()), PollFlags::POLLIN),
        ];
        let mut which = Vec::with_capacity(4);
        for (i, (fd, flags)) in slots.iter().enumerate() {
            if let Some(fd) = fd {
                fds.push(PollFd::new(*fd, *flags));
                which.push(i);
            }
        }
        if exited_at.is_none() {
            fds.push(PollFd::new(pidfd.as_fd(), PollFlags::POLLIN));
            which.push(3);
        }
        let ms = u16::try_from(wait.as_millis().min(60_000)).unwrap_or(u16::MAX);
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(ExecError::Io(e.into())),
        }
        let ready: Vec<(usize, PollFlags)> = fds
            .iter()
            .zip(&which)
            .map(|(f, i)| (*i, f.revents().unwrap_or(PollFlags::empty())))
            .filter(|(_, r)| !r.is_empty())
            .collect();
        drop(fds);
        for (i, revents) in ready {
            match i {
                0 => {
                    let Some(w) = input.as_mut() else { continue };
                    if revents.intersects(PollFlags::POLLERR | PollFlags::POLLHUP) {
                        input = None;
                        continue;
                    }
                    match w.write(&stdin[written..]) {
                        Ok(n) => {
                            written += n;
                            if written >= stdin.len() {
                                input = None;
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        // The plugin closed its stdin early (EPIPE): it reads no more.
                        Err(_) => input = None,
                    }
                }
                1 | 2 => {
                    let (pipe, buf) = if i == 1 {
                        (&mut stdout, &mut out)
                    } else {
                        (&mut stderr, &mut err)
                    };
                    if let Some(r) = pipe.as_mut() {
                        if !drain(r, buf)? {
                            *pipe = None;
                        }
                    }
                }
                _ => exited_at = Some(Instant::now()),
            }
        }
    }
    let status = child.wait()?;
    Ok(Output {
        status,
        stdout: out,
        stderr: err,
    })
}

/// Reads what is available; false at end of file.
fn drain(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut chunk = [0u8; 8192];
    loop {
        match r.read(&mut chunk) {
            Ok(0) => return Ok(false),
            Ok(n) => {
                if buf.len() < MAX_OUTPUT {
                    let keep = n.min(MAX_OUTPUT - buf.len());
                    buf.extend_from_slice(&chunk[..keep]);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor this process owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(2) with a pid of our own unreaped child; the fd is owned below.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The last line(s) of a plugin's stderr for an error message ("" when empty).
pub fn tail(stderr: &[u8]) -> String {
    let s = String::from_utf8_lossy(stderr);
    let s = s.trim();
    if s.is_empty() {
        return String::new();
    }
    let start = s.len().saturating_sub(500);
    let start = (start..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0);
    format!(" (stderr: {})", &s[start..])
}

/// How the process ended, for an error message.
pub fn describe_status(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => status.to_string(),
    }
}
