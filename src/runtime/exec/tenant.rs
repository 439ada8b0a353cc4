//! Joining the container: libcontainer's tenant builder run from the single-threaded `shim exec`
//! process, with the container's own process section, its seccomp profile installed again
//! right before the exec, and nothing left behind in the container's state directory.

use super::super::container;
use super::super::container::ContainerPaths;
use super::super::protocol::ShimState;
use super::descendants;
use super::io_err;
use super::ExecError;
use crate::fsutil;
use crate::sys::{prctl, tty};
use libcontainer::workload::default::DefaultExecutor;
use libcontainer::workload::Executor;
use libcontainer::workload::ExecutorError;
use libcontainer::workload::ExecutorValidationError;
use nix::sys::signal;
use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::sys::wait::WaitPidFlag;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;
use oci_spec::runtime::LinuxSeccomp;
use oci_spec::runtime::Process;
use oci_spec::runtime::Spec;
use std::collections::HashSet;
use std::fs;
use std::io;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

/// Where the command's stdio goes.
pub(super) enum TenantIo {
    Fds {
        stdin: OwnedFd,
        stdout: OwnedFd,
        stderr: OwnedFd,
    },
    /// Path of a listening unix socket that receives the pty master, and the window size
    /// (rows, columns) the pty starts with.
    Console(PathBuf, Option<(u16, u16)>),
}

/// Checks that the container's init is the process its monitor started and still runs;
/// returns its pid.
pub(super) fn check_running(paths: &ContainerPaths, id: &str) -> Result<i32, ExecError> {
    let not_running = || ExecError::NotRunning { id: id.to_string() };
    if paths.exit().exists() || !container::monitor_alive(paths) {
        return Err(not_running());
    }
    let state: ShimState = container::read_json_opt(&paths.state())?.unwrap_or_default();
    match (state.init, state.started_at) {
        (Some(init), Some(_)) if init.is_alive() => Ok(init.pid),
        _ => Err(not_running()),
    }
}

/// How long an exec waits for a container that was just started to run its command.
const EXEC_WAIT: Duration = Duration::from_secs(2);

/// Waits (at most [`EXEC_WAIT`]) until the container's init runs the container's command.
/// Its start is reported once libcontainer told it to exec; until the exec it is
/// libcontainer's init, a non-dumpable clone of the monitor whose memory still belongs to the
/// host's user namespace, so a tenant that joined a `hostUsers: false` pod's user namespace
/// cannot open its namespace files (EACCES, seen once in a CI run when an exec followed the
/// start at once). The init is still the monitor's image while it has the same executable
/// as this process (both are this binary).
fn wait_for_command(init: i32) {
    use std::os::unix::fs::MetadataExt;
    let id = |path: String| fs::metadata(path).map(|m| (m.dev(), m.ino())).ok();
    let Some(own) = id("/proc/self/exe".into()) else {
        return;
    };
    let deadline = Instant::now() + EXEC_WAIT;
    while id(format!("/proc/{init}/exe")) == Some(own) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The container's process section with `cmd` as its arguments: same environment, user,
/// cwd, capabilities, no_new_privileges, rlimits and AppArmor profile; no SELinux label.
pub(super) fn tenant_process(spec: &Spec, cmd: &[String], terminal: bool) -> Option<Process> {
    let mut p = spec.process().clone()?;
    p.set_args(Some(cmd.to_vec()));
    p.set_terminal(Some(terminal));
    p.set_console_size(None);
    p.set_selinux_label(None);
    Some(p)
}

pub(super) fn dir_names(dir: &Path) -> HashSet<std::ffi::OsString> {
    fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// Creates the command inside the container; returns its pid (our child).
pub(super) fn spawn_tenant(dir: &Path, cmd: &[String], tio: TenantIo) -> Result<Pid, ExecError> {
    let (paths, cfg) = ContainerPaths::open(dir)?;
    wait_for_command(check_running(&paths, &cfg.id)?);
    let spec: Spec = container::read_json(&paths.config())?;
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
    // Blocks until the other exec is created.
    crate::sys::lock::lock_exclusive(&lock).map_err(io_err(&state_dir))?;
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
pub(super) fn reap_children(deadline: Instant) {
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

pub(super) fn kill_tree_of_children(me: i32) {
    for pid in descendants(me) {
        let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// The default executor, with the container's seccomp profile installed first (see the module
/// documentation: the tenant builder drops it) and the terminal's window size set.
#[derive(Clone)]
pub(super) struct TenantExecutor {
    seccomp: Option<LinuxSeccomp>,
    /// (rows, columns) for the pty on the standard fds, when the command has a terminal.
    winsize: Option<(u16, u16)>,
}

impl Executor for TenantExecutor {
    fn exec(&self, spec: &Spec) -> Result<(), ExecutorError> {
        if let Some((rows, cols)) = self.winsize {
            let ws = tty::Winsize {
                ws_row: rows,
                ws_col: cols,
                ws_xpixel: 0,
                ws_ypixel: 0,
            };
            // Stdin is the pty slave here. A failure only leaves the size unset, which the
            // copy loop corrects right after.
            let _ = tty::set_window_size(io::stdin(), ws);
        }
        if let Some(profile) = &self.seccomp {
            // libcontainer's executor error carries text only.
            install_seccomp(profile).map_err(|e| ExecutorError::Other(e.to_string()))?;
        }
        DefaultExecutor {}.exec(spec)
    }

    fn validate(&self, spec: &Spec) -> Result<(), ExecutorValidationError> {
        DefaultExecutor {}.validate(spec)
    }
}

/// Why the exec'd command's seccomp filter could not be installed.
#[derive(Debug, thiserror::Error)]
pub(super) enum SeccompInstallError {
    #[error("cannot set no_new_privs for seccomp: {source}")]
    NoNewPrivs { source: io::Error },
    #[error("seccomp notify actions are not supported for exec")]
    Notify,
    #[error("seccomp: {0}")]
    Filter(libcontainer::seccomp::SeccompError),
}

/// Runs in the command's process, after its user and capabilities are set, before exec.
pub(super) fn install_seccomp(profile: &LinuxSeccomp) -> Result<(), SeccompInstallError> {
    let nnp = prctl::no_new_privs().unwrap_or(false);
    if !nnp && !super::super::procfs::has_effective_cap(CAP_SYS_ADMIN) {
        prctl::set_no_new_privs().map_err(|source| SeccompInstallError::NoNewPrivs { source })?;
    }
    match libcontainer::seccomp::initialize_seccomp(profile) {
        Ok(None) => Ok(()),
        Ok(Some(fd)) => {
            // Rejected before the build; never reached with a checked profile.
            // SAFETY: the notify fd was just returned to us and is owned by nobody else.
            drop(unsafe { OwnedFd::from_raw_fd(fd) });
            Err(SeccompInstallError::Notify)
        }
        Err(e) => Err(SeccompInstallError::Filter(e)),
    }
}

/// Capability number of CAP_SYS_ADMIN (linux/capability.h).
pub(super) const CAP_SYS_ADMIN: u32 = 21;

#[cfg(test)]
mod tests {
    use super::*;

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
}
