//! exec: commands run inside a running container, the way `runc exec` runs them — the hidden
//! subcommand `podvisor shim exec <container-dir> [options] -- CMD...` and the daemon-side
//! caller of its capture mode ([`exec_capture`], behind `Runtime::exec_sync`).
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
//!   descendants are SIGKILLed; a JSON report is written on stdout for [`exec_capture`].
//! - interactive: stdio passed through (stdin only with `--stdin`), or with `--tty` a
//!   pseudo-terminal opened inside the container (libcontainer's console socket) whose master
//!   is copied to and from this process's stdio, the local terminal in raw mode, window size
//!   kept in sync on SIGWINCH. The exit code is the command's (128+signal when killed).
//!
//! Nothing is left behind: the process file and libcontainer's `tenant-*` sockets are removed
//! from the container's state directory (creations are serialised by a flock on that directory),
//! the command is reaped by the helper, and the helper by its spawner.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use libcontainer::workload::default::DefaultExecutor;
use libcontainer::workload::{Executor, ExecutorError, ExecutorValidationError};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use oci_spec::runtime::{LinuxSeccomp, Process, Spec};
use serde::{Deserialize, Serialize};

use super::shim::{self, ContainerPaths, ShimError, ShimState};
use super::ExecOutput;
use crate::fsutil;

/// The most bytes kept of each of stdout and stderr in capture mode.
pub const OUTPUT_CAP: usize = 16 * 1024;
/// Exit code of `shim exec` (and so of `podvisor exec`) when the command could not be started.
pub const EXIT_CANNOT_RUN: i32 = 126;
/// How long output is still read after the command exited (children holding the pipes).
const DRAIN: Duration = Duration::from_secs(1);
/// How much longer than the command's timeout the spawner waits for the helper.
const HELPER_GRACE: Duration = Duration::from_secs(10);
/// The largest helper stderr kept for an error message.
const HELPER_STDERR_CAP: usize = 8 * 1024;

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

/// The capture-mode report, one JSON document on the helper's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "result")]
enum CaptureReport {
    Finished {
        exit_code: i32,
        /// Hex of the kept stdout bytes.
        stdout: String,
        stderr: String,
        timed_out: bool,
    },
    Failed {
        message: String,
        #[serde(default)]
        not_running: bool,
    },
}

/// Entry point of `podvisor shim exec`. Returns the process exit code.
pub fn shim_exec(opts: &ExecOptions) -> i32 {
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe {
        libc::prctl(libc::PR_SET_NAME, c"podvisor-exec".as_ptr(), 0, 0, 0);
    }
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
                    message: shim::error_chain(&e),
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
                    eprintln!("error: {}", shim::error_chain(&e));
                    EXIT_CANNOT_RUN
                }
            }
        }
    }
}

/// Where the command's stdio goes.
enum TenantIo {
    Fds {
        stdin: OwnedFd,
        stdout: OwnedFd,
        stderr: OwnedFd,
    },
    /// Path of a listening unix socket that receives the pty master, and the window size
    /// (rows, columns) the pty starts with.
    Console(PathBuf, Option<(u16, u16)>),
}

/// Checks that the container's init is the process its monitor started and still runs.
fn check_running(paths: &ContainerPaths, id: &str) -> Result<(), ExecError> {
    let not_running = || ExecError::NotRunning { id: id.to_string() };
    if paths.exit().exists() || !shim::monitor_alive(paths) {
        return Err(not_running());
    }
    let state: ShimState = shim::read_json_opt(&paths.state())?.unwrap_or_default();
    match (state.init, state.started_at) {
        (Some(init), Some(_)) if init.is_alive() => Ok(()),
        _ => Err(not_running()),
    }
}

/// The container's process section with `cmd` as its arguments: same environment, user,
/// cwd, capabilities, no_new_privileges, rlimits and AppArmor profile; no SELinux label.
fn tenant_process(spec: &Spec, cmd: &[String], terminal: bool) -> Option<Process> {
    let mut p = spec.process().clone()?;
    p.set_args(Some(cmd.to_vec()));
    p.set_terminal(Some(terminal));
    p.set_console_size(None);
    p.set_selinux_label(None);
    Some(p)
}

fn dir_names(dir: &Path) -> HashSet<std::ffi::OsString> {
    fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// Creates the command inside the container; returns its pid (our child).
fn spawn_tenant(dir: &Path, cmd: &[String], tio: TenantIo) -> Result<Pid, ExecError> {
    let (paths, cfg) = ContainerPaths::open(dir)?;
    check_running(&paths, &cfg.id)?;
    let spec: Spec = shim::read_json(&paths.config())?;
    let terminal = matches!(tio, TenantIo::Console(..));
    let winsize = match &tio {
        TenantIo::Console(_, size) => *size,
        TenantIo::Fds { .. } => None,
    };
    let process = tenant_process(&spec, cmd, terminal).ok_or_else(|| ExecError::NoProcess {
        path: paths.config(),
    })?;
    let seccomp = spec.linux().as_ref().and_then(|l| l.seccomp().clone());
    if seccomp
        .as_ref()
        .is_some_and(libcontainer::seccomp::is_notify)
    {
        return Err(ExecError::SeccompNotify);
    }
    let state_dir = cfg.youki_root.join(&cfg.id);
    // One tenant creation at a time per container: the state directory's new entries after
    // build() are then ours to remove.
    let lock = fs::File::open(&state_dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ExecError::NotRunning { id: cfg.id.clone() },
        _ => ExecError::Io {
            path: state_dir.clone(),
            source: e,
        },
    })?;
    // SAFETY: flock on a directory fd we own; blocking until the other exec is created.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(io_err(&state_dir)(io::Error::last_os_error()));
    }
    let before = dir_names(&state_dir);
    let process_path = state_dir.join(format!("podvisor-exec-{}.json", std::process::id()));
    fsutil::write_json_atomic_volatile(&process_path, &process).map_err(io_err(&process_path))?;
    let own_oom = fs::read_to_string("/proc/self/oom_score_adj").ok();

    let built = (|| {
        let mut b = libcontainer::container::builder::ContainerBuilder::new(
            cfg.id.clone(),
            libcontainer::syscall::syscall::SyscallType::default(),
        )
        .with_root_path(&cfg.youki_root)?
        .with_executor(TenantExecutor { seccomp, winsize });
        match tio {
            TenantIo::Fds {
                stdin,
                stdout,
                stderr,
            } => {
                b = b.with_stdin(stdin).with_stdout(stdout).with_stderr(stderr);
            }
            TenantIo::Console(ref path, _) => b = b.with_console_socket(Some(path)),
        }
        b.validate_id()?
            .as_tenant()
            .with_process(Some(&process_path))
            .with_detach(terminal)
            .as_sibling(false)
            .build()
    })();
    // build() copies the process's oom_score_adj into ours; keep our own for the copy loop.
    if let Some(v) = own_oom {
        let _ = fs::write("/proc/self/oom_score_adj", v.trim());
    }
    let _ = fs::remove_file(&process_path);
    for name in dir_names(&state_dir) {
        if !before.contains(&name) && name.to_string_lossy().starts_with("tenant-") {
            let _ = fs::remove_file(state_dir.join(&name));
        }
    }
    drop(lock);
    match built {
        Ok(pid) => Ok(pid),
        Err(e) => {
            // A failed build leaves its intermediate and init processes unreaped (the init
            // may still be exiting); as zombies inside the container's pid namespace they
            // would keep it from ever ending.
            reap_children(Instant::now() + Duration::from_secs(2));
            Err(e.into())
        }
    }
}

/// Reaps every child of this process; kills those still there at `deadline`.
fn reap_children(deadline: Instant) {
    let me = std::process::id() as i32;
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() >= deadline {
                    kill_tree_of_children(me);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(_) => {}
            Err(nix::Error::EINTR) => {}
            Err(_) => return,
        }
    }
}

fn kill_tree_of_children(me: i32) {
    for pid in descendants(me) {
        let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// The default executor, with the container's seccomp profile installed first (see the module
/// documentation: the tenant builder drops it) and the terminal's window size set.
#[derive(Clone)]
struct TenantExecutor {
    seccomp: Option<LinuxSeccomp>,
    /// (rows, columns) for the pty on the standard fds, when the command has a terminal.
    winsize: Option<(u16, u16)>,
}

impl Executor for TenantExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        if let Some((rows, cols)) = self.winsize {
            let ws = libc::winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            // SAFETY: TIOCSWINSZ reads a winsize we own; fd 0 is the pty slave here. A failure
            // only leaves the size unset, which the copy loop corrects right after.
            unsafe {
                libc::ioctl(0, libc::TIOCSWINSZ, &ws);
            }
        }
        if let Some(profile) = &self.seccomp {
            install_seccomp(profile).map_err(ExecutorError::Other)?;
        }
        DefaultExecutor {}.exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        DefaultExecutor {}.validate(spec)
    }
}

/// Runs in the command's process, after its user and capabilities are set, before exec.
fn install_seccomp(profile: &LinuxSeccomp) -> Result<(), String> {
    // SAFETY: prctl with integer arguments.
    let nnp = unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) } == 1;
    if !nnp && !super::procfs::has_effective_cap(CAP_SYS_ADMIN) {
        // SAFETY: prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(format!(
                "cannot set no_new_privs for seccomp: {}",
                io::Error::last_os_error()
            ));
        }
    }
    match libcontainer::seccomp::initialize_seccomp(profile) {
        Ok(None) => Ok(()),
        Ok(Some(fd)) => {
            // Rejected before the build; never reached with a checked profile.
            // SAFETY: the notify fd was just returned to us and is owned by nobody else.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
            Err("seccomp notify actions are not supported for exec".into())
        }
        Err(e) => Err(format!("seccomp: {e}")),
    }
}

/// Capability number of CAP_SYS_ADMIN (linux/capability.h).
const CAP_SYS_ADMIN: u32 = 21;

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

fn poll_ready(pfd: &PollFd) -> bool {
    pfd.revents().is_some_and(|r| !r.is_empty())
}

fn poll_timeout(until: Option<Instant>) -> PollTimeout {
    match until {
        Some(d) => PollTimeout::try_from(d.saturating_duration_since(Instant::now()))
            .unwrap_or(PollTimeout::MAX),
        None => PollTimeout::NONE,
    }
}

/// A pipe read into a capped buffer.
struct Captured {
    pipe: Option<fs::File>,
    kept: Vec<u8>,
}

impl Captured {
    fn new(fd: OwnedFd) -> Result<Captured, ExecError> {
        set_nonblocking(fd.as_fd())?;
        Ok(Captured {
            pipe: Some(fs::File::from(fd)),
            kept: Vec::new(),
        })
    }

    /// Reads what is there; keeps up to the cap and drops the rest.
    fn pump(&mut self, buf: &mut [u8], cap: usize) {
        let Some(f) = self.pipe.as_mut() else {
            return;
        };
        loop {
            match f.read(buf) {
                Ok(0) => {
                    self.pipe = None;
                    return;
                }
                Ok(n) => {
                    let room = cap.saturating_sub(self.kept.len());
                    self.kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.pipe = None;
                    return;
                }
            }
        }
    }
}

fn capture(dir: &Path, cmd: &[String], timeout: Duration) -> Result<CaptureReport, ExecError> {
    let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("pipe"))?;
    let (err_r, err_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("pipe"))?;
    let null = Path::new("/dev/null");
    let devnull = fs::File::open(null).map_err(io_err(null))?;
    let deadline = Instant::now() + timeout;
    let pid = spawn_tenant(
        dir,
        cmd,
        TenantIo::Fds {
            stdin: devnull.into(),
            stdout: out_w,
            stderr: err_w,
        },
    )?;
    let forwarded = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];
    let sigfd = match signal_fd(&forwarded) {
        Ok(fd) => fd,
        Err(e) => {
            kill_tree(pid);
            let _ = waitpid(pid, None);
            return Err(e);
        }
    };
    let mut out = Captured::new(out_r)?;
    let mut err = Captured::new(err_r)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut status = try_reap(pid)?;
    let mut timed_out = false;
    let mut drain_until: Option<Instant> = None;
    loop {
        if status.is_some() && out.pipe.is_none() && err.pipe.is_none() {
            break;
        }
        let now = Instant::now();
        if status.is_none() && !timed_out && now >= deadline {
            kill_tree(pid);
            timed_out = true;
        }
        if drain_until.is_some_and(|d| now >= d) {
            break;
        }
        let wake = match (status, timed_out) {
            (Some(_), _) => drain_until,
            (None, false) => Some(deadline),
            (None, true) => None,
        };
        let (sig_ev, out_ev, err_ev) = {
            let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
            let mut idx = [None, None];
            for (i, c) in [&out, &err].into_iter().enumerate() {
                if let Some(f) = &c.pipe {
                    idx[i] = Some(fds.len());
                    fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
                }
            }
            match poll(&mut fds, poll_timeout(wake)) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(source) => {
                    kill_tree(pid);
                    let _ = waitpid(pid, None);
                    return Err(ExecError::Sys {
                        what: "poll",
                        source,
                    });
                }
            }
            let at = |i: Option<usize>| i.is_some_and(|i| poll_ready(&fds[i]));
            (poll_ready(&fds[0]), at(idx[0]), at(idx[1]))
        };
        if out_ev {
            out.pump(&mut buf, OUTPUT_CAP);
        }
        if err_ev {
            err.pump(&mut buf, OUTPUT_CAP);
        }
        if sig_ev {
            while let Ok(Some(info)) = sigfd.read_signal() {
                let signo = info.ssi_signo as i32;
                if signo != libc::SIGCHLD && status.is_none() {
                    // The spawner gives up on us: the command must not outlive the helper.
                    kill_tree(pid);
                }
            }
            if status.is_none() {
                status = try_reap(pid)?;
            }
        }
        if status.is_some() && drain_until.is_none() {
            drain_until = Some(Instant::now() + DRAIN);
        }
    }
    let status = match status {
        Some(s) => s,
        None => waitpid(pid, None).map_err(sys("waitpid"))?,
    };
    Ok(CaptureReport::Finished {
        exit_code: exit_code(status),
        stdout: hex::encode(&out.kept),
        stderr: hex::encode(&err.kept),
        timed_out,
    })
}

/// Signals forwarded to the command in interactive mode.
const FORWARDED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

fn dup_fd(fd: RawFd, what: &'static str) -> Result<OwnedFd, ExecError> {
    // SAFETY: fcntl F_DUPFD_CLOEXEC on one of our standard fds; the result is a new fd we own.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(ExecError::Sys {
            what,
            source: nix::Error::last(),
        });
    }
    // SAFETY: `new` was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

fn interactive(dir: &Path, cmd: &[String], tty: bool, stdin: bool) -> Result<i32, ExecError> {
    if tty {
        return interactive_tty(dir, cmd, stdin);
    }
    let input = if stdin {
        dup_fd(0, "dup stdin")?
    } else {
        let null = Path::new("/dev/null");
        fs::File::open(null).map_err(io_err(null))?.into()
    };
    let tio = TenantIo::Fds {
        stdin: input,
        stdout: dup_fd(1, "dup stdout")?,
        stderr: dup_fd(2, "dup stderr")?,
    };
    let pid = spawn_tenant(dir, cmd, tio)?;
    let sigfd = signal_fd(&FORWARDED)?;
    loop {
        if let Some(s) = try_reap(pid)? {
            return Ok(exit_code(s));
        }
        let mut fds = [PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(source) => {
                return Err(ExecError::Sys {
                    what: "poll",
                    source,
                })
            }
        }
        while let Ok(Some(info)) = sigfd.read_signal() {
            forward(pid, info.ssi_signo as i32);
        }
    }
}

fn forward(pid: Pid, signo: i32) {
    if signo == libc::SIGCHLD || signo == libc::SIGWINCH {
        return;
    }
    if let Ok(sig) = Signal::try_from(signo) {
        let _ = signal::kill(pid, sig);
    }
}

/// The local terminal in raw mode for as long as this lives.
struct RawMode {
    fd: RawFd,
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    fn enter(fd: RawFd) -> Option<RawMode> {
        use nix::sys::termios;
        // SAFETY: fd 0 stays open for the whole life of this process.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let saved = termios::tcgetattr(borrowed).ok()?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(borrowed, termios::SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode { fd, saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: see enter.
        let borrowed = unsafe { BorrowedFd::borrow_raw(self.fd) };
        let _ = nix::sys::termios::tcsetattr(
            borrowed,
            nix::sys::termios::SetArg::TCSAFLUSH,
            &self.saved,
        );
    }
}

/// The window size of our terminal (stdin, else stdout), if we have one.
fn local_window_size() -> Option<libc::winsize> {
    for fd in [0, 1] {
        // SAFETY: TIOCGWINSZ fills a zeroed winsize we own.
        unsafe {
            let mut ws: libc::winsize = std::mem::zeroed();
            if libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) == 0 && ws.ws_row > 0 {
                return Some(ws);
            }
        }
    }
    None
}

/// Copies the window size of our terminal onto the pty.
fn sync_window_size(master: &OwnedFd) {
    if let Some(ws) = local_window_size() {
        // SAFETY: TIOCSWINSZ reads a winsize we own from a valid pty master.
        unsafe {
            libc::ioctl(master.as_raw_fd(), libc::TIOCSWINSZ, &ws);
        }
    }
}

/// Receives the pty master libcontainer sends over the console socket.
fn receive_master(listener: &UnixListener) -> Result<OwnedFd, ExecError> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let term = |reason: String| ExecError::Terminal { reason };
    listener
        .set_nonblocking(true)
        .map_err(|e| term(e.to_string()))?;
    let (conn, _) = listener
        .accept()
        .map_err(|e| term(format!("no console connection from the container: {e}")))?;
    conn.set_nonblocking(false)
        .map_err(|e| term(e.to_string()))?;
    let mut name = [0u8; 256];
    let mut iov = [IoSliceMut::new(&mut name)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        conn.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|e| term(format!("receiving the pty master: {e}")))?;
    let cmsgs = msg
        .cmsgs()
        .map_err(|e| term(format!("receiving the pty master: {e}")))?;
    for c in cmsgs {
        if let ControlMessageOwned::ScmRights(fds) = c {
            if let Some(fd) = fds.first() {
                // SAFETY: the kernel installed this fd in our table for us.
                return Ok(unsafe { OwnedFd::from_raw_fd(*fd) });
            }
        }
    }
    Err(term("the console message carried no fd".into()))
}

fn interactive_tty(dir: &Path, cmd: &[String], stdin: bool) -> Result<i32, ExecError> {
    let (_, cfg) = ContainerPaths::open(dir)?;
    let state_dir = cfg.youki_root.join(&cfg.id);
    // Unix socket paths are limited to 108 bytes: bind by a name relative to the state
    // directory; libcontainer reaches it through a symlink it makes there.
    let name = format!("podvisor-console-{}.sock", std::process::id());
    let sock_path = state_dir.join(&name);
    std::env::set_current_dir(&state_dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ExecError::NotRunning { id: cfg.id.clone() },
        _ => ExecError::Io {
            path: state_dir.clone(),
            source: e,
        },
    })?;
    let bound = UnixListener::bind(&name);
    let _ = std::env::set_current_dir("/");
    let listener = bound.map_err(io_err(&sock_path))?;
    let size = local_window_size().map(|ws| (ws.ws_row, ws.ws_col));
    let spawned = spawn_tenant(dir, cmd, TenantIo::Console(sock_path.clone(), size));
    let master = spawned.and_then(|pid| match receive_master(&listener) {
        Ok(m) => Ok((pid, m)),
        Err(e) => {
            kill_tree(pid);
            let _ = waitpid(pid, None);
            Err(e)
        }
    });
    drop(listener);
    let _ = fs::remove_file(&sock_path);
    let (pid, master) = master?;
    sync_window_size(&master);
    let raw = RawMode::enter(0);
    let result = copy_tty(pid, &master, stdin);
    drop(raw);
    result
}

fn write_all_fd(fd: RawFd, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: write from a valid buffer to an fd that stays open during the call.
        let n = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if e.kind() == io::ErrorKind::WouldBlock {
                let mut fds = [PollFd::new(
                    // SAFETY: fd stays open during the call.
                    unsafe { BorrowedFd::borrow_raw(fd) },
                    PollFlags::POLLOUT,
                )];
                let _ = poll(&mut fds, PollTimeout::from(100u8));
                continue;
            }
            return Err(e);
        }
        data = &data[n as usize..];
    }
    Ok(())
}

fn read_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: read into a valid buffer from an fd that stays open during the call.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Copies stdin to the pty and the pty to stdout until the command exits and the pty drains.
fn copy_tty(pid: Pid, master: &OwnedFd, mut stdin: bool) -> Result<i32, ExecError> {
    let mut extra = FORWARDED.to_vec();
    extra.push(Signal::SIGWINCH);
    let sigfd = signal_fd(&extra)?;
    set_nonblocking(master.as_fd())?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut status = try_reap(pid)?;
    let mut master_open = true;
    let mut drain_until: Option<Instant> = None;
    // Input read but not yet taken by the pty: stdin is only read again once it is empty, so
    // a command that does not read never makes this loop stop copying its output.
    let mut pending: Vec<u8> = Vec::new();
    loop {
        if status.is_some() && !master_open {
            break;
        }
        if drain_until.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        // SAFETY: fd 0 stays open for the whole life of this process.
        let fd0 = unsafe { BorrowedFd::borrow_raw(0) };
        let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        let master_flags = if pending.is_empty() {
            PollFlags::POLLIN
        } else {
            PollFlags::POLLIN | PollFlags::POLLOUT
        };
        let master_idx = master_open.then(|| {
            fds.push(PollFd::new(master.as_fd(), master_flags));
            fds.len() - 1
        });
        let stdin_idx = (stdin && pending.is_empty() && status.is_none()).then(|| {
            fds.push(PollFd::new(fd0, PollFlags::POLLIN));
            fds.len() - 1
        });
        match poll(&mut fds, poll_timeout(drain_until)) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(source) => {
                return Err(ExecError::Sys {
                    what: "poll",
                    source,
                })
            }
        }
        let sig_ev = poll_ready(&fds[0]);
        let master_ev = master_idx.is_some_and(|i| poll_ready(&fds[i]));
        let stdin_ev = stdin_idx.is_some_and(|i| poll_ready(&fds[i]));
        if master_ev && !pending.is_empty() {
            // SAFETY: write from a valid buffer to the pty master, non-blocking.
            let n =
                unsafe { libc::write(master.as_raw_fd(), pending.as_ptr().cast(), pending.len()) };
            if n > 0 {
                pending.drain(..n as usize);
            }
        }
        if master_ev {
            match read_fd(master.as_raw_fd(), &mut buf) {
                // EIO: every slave fd is closed (the command and its children are gone).
                Ok(0) => master_open = false,
                Ok(n) => {
                    if write_all_fd(1, &buf[..n]).is_err() {
                        master_open = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => master_open = false,
            }
        }
        if stdin_ev {
            match read_fd(0, &mut buf) {
                Ok(0) | Err(_) => {
                    // End of input: the terminal's end-of-file character, as a terminal would.
                    pending.push(4);
                    stdin = false;
                }
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            }
        }
        if sig_ev {
            while let Ok(Some(info)) = sigfd.read_signal() {
                let signo = info.ssi_signo as i32;
                if signo == libc::SIGWINCH {
                    sync_window_size(master);
                } else {
                    forward(pid, signo);
                }
            }
            if status.is_none() {
                status = try_reap(pid)?;
            }
        }
        if status.is_some() && drain_until.is_none() {
            drain_until = Some(Instant::now() + DRAIN);
        }
    }
    let status = match status {
        Some(s) => s,
        None => waitpid(pid, None).map_err(sys("waitpid"))?,
    };
    Ok(exit_code(status))
}

/// Runs `cmd` in the container of `dir` through a `shim exec` helper spawned from `binary`,
/// capturing its output (see [`OUTPUT_CAP`]) and killing it after `timeout`. Safe to call from
/// a multi-threaded process: libcontainer only runs in the helper.
pub fn exec_capture(
    binary: &Path,
    dir: &Path,
    cmd: &[String],
    timeout: Duration,
) -> Result<ExecOutput, ExecError> {
    use std::os::unix::process::CommandExt;
    if cmd.is_empty() {
        return Err(ExecError::EmptyCommand);
    }
    let mut child = Command::new(binary)
        .arg("shim")
        .arg("exec")
        .arg(dir)
        .arg("--timeout-ms")
        .arg(timeout.as_millis().max(1).to_string())
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RUST_LOG", "warn")
        // Its own process group: a Ctrl-C meant for the caller's terminal is not for it.
        .process_group(0)
        .spawn()
        .map_err(|source| ExecError::Spawn {
            binary: binary.to_path_buf(),
            source,
        })?;
    let deadline = Instant::now() + timeout + HELPER_GRACE;
    let outputs = read_helper(&mut child, deadline);
    if outputs.is_err() {
        // Ask first, so that the helper kills the command it runs; then make sure.
        let _ = signal::kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        std::thread::sleep(Duration::from_millis(200));
        let _ = child.kill();
    }
    let status = child.wait().map_err(|source| ExecError::Spawn {
        binary: binary.to_path_buf(),
        source,
    })?;
    let (stdout, stderr) = outputs?;
    match serde_json::from_slice::<CaptureReport>(&stdout) {
        Ok(CaptureReport::Finished {
            exit_code,
            stdout,
            stderr,
            timed_out,
        }) => Ok(ExecOutput {
            exit_code,
            stdout: hex::decode(stdout).map_err(|e| ExecError::Helper {
                message: format!("malformed stdout in report: {e}"),
            })?,
            stderr: hex::decode(stderr).map_err(|e| ExecError::Helper {
                message: format!("malformed stderr in report: {e}"),
            })?,
            timed_out,
        }),
        Ok(CaptureReport::Failed {
            not_running: true, ..
        }) => Err(ExecError::NotRunning {
            id: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }),
        Ok(CaptureReport::Failed { message, .. }) => Err(ExecError::Helper { message }),
        Err(_) => Err(ExecError::Helper {
            message: format!(
                "exited with {status} without a report: {}",
                String::from_utf8_lossy(&stderr).trim()
            ),
        }),
    }
}

/// Reads the helper's stdout (whole) and stderr (capped) until both close or `deadline`.
fn read_helper(
    child: &mut std::process::Child,
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<u8>), ExecError> {
    let helper = |message: &str| ExecError::Helper {
        message: message.to_string(),
    };
    let out = child
        .stdout
        .take()
        .ok_or_else(|| helper("stdout not captured"))?;
    let err = child
        .stderr
        .take()
        .ok_or_else(|| helper("stderr not captured"))?;
    let mut out = Captured::new(OwnedFd::from(out))?;
    let mut err = Captured::new(OwnedFd::from(err))?;
    // The report holds at most two hex-encoded outputs and a little JSON.
    let report_cap = 4 * OUTPUT_CAP + 64 * 1024;
    let mut buf = vec![0u8; 64 * 1024];
    while out.pipe.is_some() || err.pipe.is_some() {
        if Instant::now() >= deadline {
            return Err(helper("did not finish in time"));
        }
        let mut fds = Vec::new();
        let mut idx = [None, None];
        for (i, c) in [&out, &err].into_iter().enumerate() {
            if let Some(f) = &c.pipe {
                idx[i] = Some(fds.len());
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
            }
        }
        match poll(&mut fds, poll_timeout(Some(deadline))) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(source) => {
                return Err(ExecError::Sys {
                    what: "poll",
                    source,
                })
            }
        }
        let at = |i: Option<usize>| i.is_some_and(|i| poll_ready(&fds[i]));
        let (o, e) = (at(idx[0]), at(idx[1]));
        if o {
            out.pump(&mut buf, report_cap);
        }
        if e {
            err.pump(&mut buf, HELPER_STDERR_CAP);
        }
    }
    Ok((out.kept, err.kept))
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
    fn tenant_process_keeps_the_container_identity_and_replaces_args() {
        let mut spec = Spec::default();
        let mut p = spec.process().clone().expect("default process");
        p.set_env(Some(vec!["PATH=/bin".into(), "A=1".into()]));
        p.set_apparmor_profile(Some("docker-default".into()));
        p.set_no_new_privileges(Some(true));
        p.set_cwd("/work".into());
        spec.set_process(Some(p.clone()));
        let cmd = vec!["cat".to_string(), "/etc/hostname".to_string()];
        let t = tenant_process(&spec, &cmd, true).expect("process");
        assert_eq!(t.args().as_deref(), Some(&cmd[..]));
        assert_eq!(t.env(), p.env());
        assert_eq!(t.cwd(), p.cwd());
        assert_eq!(t.user(), p.user());
        assert_eq!(t.capabilities(), p.capabilities());
        assert_eq!(t.no_new_privileges(), Some(true));
        assert_eq!(t.apparmor_profile().as_deref(), Some("docker-default"));
        assert_eq!(t.terminal(), Some(true));
        spec.set_process(None);
        assert!(tenant_process(&spec, &cmd, false).is_none());
    }

    #[test]
    fn captured_output_is_capped_and_the_rest_drained() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let mut c = Captured::new(r).expect("captured");
        let mut wf = fs::File::from(w);
        let mut buf = vec![0u8; 1000];
        wf.write_all(&[b'x'; 3000]).expect("write");
        c.pump(&mut buf, 2500);
        assert_eq!(c.kept.len(), 2500);
        wf.write_all(b"more").expect("write");
        drop(wf);
        c.pump(&mut buf, 2500);
        assert_eq!(c.kept.len(), 2500);
        assert!(c.pipe.is_none(), "EOF closes the pipe");
    }

    #[test]
    fn descendants_of_a_process_tree_are_found() {
        let mut child = Command::new("sh")
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

    #[test]
    fn capture_reports_round_trip() {
        let r = CaptureReport::Finished {
            exit_code: 3,
            stdout: hex::encode(b"out"),
            stderr: String::new(),
            timed_out: false,
        };
        let doc = serde_json::to_string(&r).expect("json");
        assert!(doc.contains("\"result\":\"finished\""), "{doc}");
        assert_eq!(
            serde_json::from_str::<CaptureReport>(&doc).expect("parse"),
            r
        );
    }
}
