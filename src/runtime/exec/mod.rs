//! exec: commands run inside a running container, the way `runc exec` runs them — the hidden
//! subcommand `podvisor shim exec <container-dir> [options] -- CMD...` and the daemon-side
//! caller of its capture mode (in [`crate::runtime::daemon`], behind `Runtime::exec_sync`).
//!
//! The command joins the container through libcontainer's tenant builder: the namespaces of the
//! container's init (checked by pid and start time first, so a recycled pid is never joined),
//! its cgroup, and the process section of the container's own `config.json` (environment,
//! resolved user and groups, cwd, capabilities, no_new_privileges, rlimits, OOM score and
//! AppArmor profile, as `runc exec` keeps them) with `args` replaced. libcontainer clones the calling process without
//! exec, so this only ever runs in the fresh, single-threaded `shim exec` process, never in the
//! daemon or the CLI.
//!
//! libcontainer's tenant builder rebuilds the spec's `linux` section from namespaces and the
//! cgroup path only, which drops the container's seccomp profile. [`TenantExecutor`] installs
//! it again right before the exec (and, with a terminal, sets the pty's window size there:
//! libcontainer ignores `process.consoleSize`, and a command that reads its size once at start
//! must not see 0x0); when the process may neither use CAP_SYS_ADMIN nor already
//! has no_new_privs, it sets no_new_privs first (the kernel's condition for installing a filter),
//! so a seccomp-confined container never gets an unconfined exec.
//!
//! Modes:
//! - capture (`--timeout-ms`): stdout/stderr through pipes, each kept up to [`OUTPUT_CAP`]
//!   bytes (the rest drained and dropped); on timeout the command, its process group and its
//!   descendants are SIGKILLed; a JSON report is written on stdout for the daemon.
//! - interactive: stdio passed through (stdin only with `--stdin`), or with `--tty` a
//!   pseudo-terminal opened inside the container (libcontainer's console socket) whose master
//!   is copied to and from this process's stdio, the local terminal in raw mode, window size
//!   kept in sync on SIGWINCH. The exit code is the command's (128+signal when killed).
//!
//! Nothing is left behind: the process file and libcontainer's `tenant-*` sockets are removed
//! from the container's state directory (creations are serialised by a flock on that directory),
//! the command is reaped by the helper, and the helper by its spawner.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Write};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollTimeout};
use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use super::container::{self, ShimError};
use super::protocol::CaptureReport;

mod capture;
mod tenant;
mod tty;

use capture::capture;
pub(crate) use capture::Captured;
use tty::interactive;
pub use tty::{local_window_size, RawMode};

/// The most bytes kept of each of stdout and stderr in capture mode.
pub const OUTPUT_CAP: usize = 16 * 1024;
/// Exit code of `shim exec` (and so of `podvisor exec`) when the command could not be started.
pub const EXIT_CANNOT_RUN: i32 = 126;
/// How long output is still read after the command exited (children holding the pipes).
const DRAIN: Duration = Duration::from_secs(1);
/// How much longer than the command's timeout the spawner waits for the helper.
pub(crate) const HELPER_GRACE: Duration = Duration::from_secs(10);
/// The largest helper stderr kept for an error message.
pub(crate) const HELPER_STDERR_CAP: usize = 8 * 1024;

/// Errors of running a command in a container.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("container {id} is not running")]
    NotRunning { id: String },
    #[error("no command given")]
    EmptyCommand,
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{what}: {source}")]
    Sys {
        what: &'static str,
        source: nix::Error,
    },
    #[error(transparent)]
    Shim(#[from] ShimError),
    #[error("{path} has no process section")]
    NoProcess { path: PathBuf },
    #[error("the container's seccomp profile uses notify actions, which exec cannot serve")]
    SeccompNotify,
    #[error("libcontainer")]
    Container(#[from] libcontainer::error::LibcontainerError),
    #[error("terminal: {reason}")]
    Terminal { reason: String },
    #[error("failed to spawn exec helper {binary}: {source}")]
    Spawn { binary: PathBuf, source: io::Error },
    #[error("exec helper: {message}")]
    Helper { message: String },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ExecError + '_ {
    move |source| ExecError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn sys(what: &'static str) -> impl FnOnce(nix::Error) -> ExecError {
    move |source| ExecError::Sys { what, source }
}

/// How `shim exec` runs the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecMode {
    /// Output captured (capped) and reported as JSON on stdout; killed after `timeout`.
    Capture { timeout: Duration },
    /// Stdio passed through; with `tty` through a pseudo-terminal; stdin only with `stdin`.
    Interactive { tty: bool, stdin: bool },
}

/// What `podvisor shim exec` is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOptions {
    /// The container directory (`<root>/containers/<id>`).
    pub dir: PathBuf,
    pub cmd: Vec<String>,
    pub mode: ExecMode,
}

/// Entry point of `podvisor shim exec`. Returns the process exit code.
pub fn shim_exec(opts: &ExecOptions) -> i32 {
    let _ = crate::sys::prctl::set_name(c"podvisor-exec");
    // The command is cloned from us: it must start with no signal blocked and SIGPIPE at its
    // default (Rust ignores it; ignored dispositions survive exec).
    let _ = signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    // SAFETY: setting signal dispositions to SIG_DFL in a single-threaded process.
    unsafe {
        for s in [
            Signal::SIGPIPE,
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            let _ = signal::signal(s, signal::SigHandler::SigDfl);
        }
    }
    match opts.mode {
        ExecMode::Capture { timeout } => {
            let report = match capture(&opts.dir, &opts.cmd, timeout) {
                Ok(r) => r,
                Err(e) => CaptureReport::Failed {
                    not_running: matches!(e, ExecError::NotRunning { .. }),
                    message: container::error_chain(&e),
                },
            };
            let failed = matches!(report, CaptureReport::Failed { .. });
            match serde_json::to_vec(&report) {
                Ok(doc) => {
                    let mut out = io::stdout().lock();
                    if out.write_all(&doc).and_then(|()| out.flush()).is_err() {
                        return 1;
                    }
                }
                Err(e) => {
                    eprintln!("exec report: {e}");
                    return 1;
                }
            }
            i32::from(failed)
        }
        ExecMode::Interactive { tty, stdin } => {
            match interactive(&opts.dir, &opts.cmd, tty, stdin) {
                Ok(code) => code,
                Err(e) => {
                    eprintln!("error: {}", container::error_chain(&e));
                    EXIT_CANNOT_RUN
                }
            }
        }
    }
}

/// SIGCHLD plus the signals forwarded to the command, blocked and read through a signalfd.
fn signal_fd(extra: &[Signal]) -> Result<SignalFd, ExecError> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    for s in extra {
        mask.add(*s);
    }
    signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None).map_err(sys("sigprocmask"))?;
    SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(sys("signalfd"))
}

fn try_reap(pid: Pid) -> Result<Option<WaitStatus>, ExecError> {
    super::procfs::try_reap(pid).map_err(sys("waitpid"))
}

/// The kubelet's exit code: the code, or 128+signal.
pub fn exit_code(status: WaitStatus) -> i32 {
    match status {
        WaitStatus::Exited(_, code) => code,
        WaitStatus::Signaled(_, sig, _) => 128 + sig as i32,
        _ => 255,
    }
}

/// Every descendant of `pid`, from a scan of /proc (children before grandchildren).
fn descendants(pid: i32) -> Vec<i32> {
    let mut parent: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(entries) = fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(stat) = fs::read_to_string(format!("/proc/{child}/stat")) else {
                continue;
            };
            let ppid = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .and_then(|p| p.parse::<i32>().ok());
            if let Some(ppid) = ppid {
                parent.entry(ppid).or_default().push(child);
            }
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        for c in parent.get(&p).into_iter().flatten() {
            out.push(*c);
            queue.push(*c);
        }
    }
    out
}

/// SIGKILLs the command, its process group (it leads its own session) and its descendants,
/// collected before the kill so that none is re-parented out of reach first.
fn kill_tree(pid: Pid) {
    for _ in 0..3 {
        let kids = descendants(pid.as_raw());
        let _ = signal::kill(Pid::from_raw(-pid.as_raw()), Signal::SIGKILL);
        let _ = signal::kill(pid, Signal::SIGKILL);
        for k in &kids {
            let _ = signal::kill(Pid::from_raw(*k), Signal::SIGKILL);
        }
        if kids.is_empty() {
            break;
        }
    }
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> Result<(), ExecError> {
    super::procfs::set_nonblocking(fd).map_err(sys("fcntl"))
}

pub(crate) fn poll_ready(pfd: &PollFd) -> bool {
    pfd.revents().is_some_and(|r| !r.is_empty())
}

pub(crate) fn poll_timeout(until: Option<Instant>) -> PollTimeout {
    match until {
        Some(d) => PollTimeout::try_from(d.saturating_duration_since(Instant::now()))
            .unwrap_or(PollTimeout::MAX),
        None => PollTimeout::NONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_kubelet() {
        let p = Pid::from_raw(1);
        assert_eq!(exit_code(WaitStatus::Exited(p, 0)), 0);
        assert_eq!(exit_code(WaitStatus::Exited(p, 3)), 3);
        assert_eq!(
            exit_code(WaitStatus::Signaled(p, Signal::SIGKILL, false)),
            137
        );
        assert_eq!(
            exit_code(WaitStatus::Signaled(p, Signal::SIGTERM, true)),
            143
        );
    }

    #[test]
    fn descendants_of_a_process_tree_are_found() {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("sleep 30 & sleep 30 & wait")
            .spawn()
            .expect("spawn");
        let pid = Pid::from_raw(child.id() as i32);
        let t0 = Instant::now();
        while descendants(pid.as_raw()).len() < 2 && t0.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let kids = descendants(pid.as_raw());
        assert_eq!(kids.len(), 2, "{kids:?}");
        kill_tree(pid);
        let status = child.wait().expect("wait");
        assert!(!status.success());
        for k in kids {
            let t0 = Instant::now();
            while Path::new(&format!("/proc/{k}")).exists()
                && fs::read_to_string(format!("/proc/{k}/stat"))
                    .map(|s| !s.contains(") Z"))
                    .unwrap_or(false)
                && t0.elapsed() < Duration::from_secs(5)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
            let alive = fs::read_to_string(format!("/proc/{k}/stat"))
                .map(|s| !s.contains(") Z"))
                .unwrap_or(false);
            assert!(!alive, "descendant {k} survived");
        }
    }
}
