//! The pod's namespaces from the inside: what the short-lived single-threaded helper
//! (`podvisor shim sandbox`) does for one pod ([`pin_namespaces`]: unshare, hostname, loopback,
//! the nsfs pins, /dev/shm), and the pod init of a shared PID namespace ([`pod_init`], started
//! by the helper; [`load_pod_init`] and [`stop_pod_init`] for the daemon side of its record).
//! The rest of the sandbox (its paths, creation, liveness, removal) is in [`super`].

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::mount::{mount, MsFlags};
use nix::sched::{unshare, CloneFlags};

use super::in_userns;
use super::steps::{loopback_up, pin, spawn_pod_init_process};
use super::{io_err, SandboxDirs, SandboxError, SandboxPaths};
use crate::fsutil::{self, Loaded};
use crate::runtime::procfs::ProcessId;

/// The recorded pod init, `None` when there is none (or the record is unreadable).
pub fn load_pod_init(paths: &SandboxPaths) -> Option<ProcessId> {
    match fsutil::load_json(&paths.pod_init()) {
        Ok(Loaded::Ok(id)) => Some(id),
        _ => None,
    }
}

/// Stops the pod init of `uid`'s sandbox, if it has one: SIGKILL (which kills every process
/// left in the shared PID namespace) and a wait until it is gone, so the pod cgroup it lives in
/// can be removed. Called before the pod's cgroups are removed.
pub fn stop_pod_init(dirs: &SandboxDirs, uid: &str) -> Result<(), SandboxError> {
    stop_pod_init_at(&SandboxPaths::new(dirs, uid)?)
}

pub(crate) fn stop_pod_init_at(paths: &SandboxPaths) -> Result<(), SandboxError> {
    let Some(id) = load_pod_init(paths) else {
        return Ok(());
    };
    let path = paths.pod_init();
    id.signal(libc::SIGKILL).map_err(io_err(&path))?;
    // Not our child (it was the sandbox helper's): PID 1 or a subreaper reaps it; a zombie
    // counts as gone. The kernel first kills and waits for the rest of its namespace.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while id.is_alive() {
        if std::time::Instant::now() > deadline {
            return Err(SandboxError::Io {
                path,
                source: io::Error::new(io::ErrorKind::TimedOut, "pod init survived SIGKILL"),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(SandboxError::Io { path, source }),
    }
}

/// Runs in the single-threaded helper process (`podvisor shim sandbox`): creates the pod's
/// namespaces, sets the hostname, brings loopback up, pins the namespaces and mounts /dev/shm.
/// With `share_pid`, also starts the pod init as PID 1 of a new PID namespace, records it and
/// pins that namespace.
///
/// With `user_ns_base` (`hostUsers: false`) every namespace is created inside a new user
/// namespace mapping `0..65536` to `base..base+65536` (see [`in_userns`]).
pub fn pin_namespaces(
    pod_dir: &Path,
    hostname: &str,
    host_net: bool,
    share_pid: bool,
    user_ns_base: Option<u32>,
) -> Result<(), SandboxError> {
    if let Some(base) = user_ns_base {
        let paths = runtime_paths(pod_dir);
        in_userns::pin_in_user_namespace(&paths, hostname, share_pid, base)?;
        return mount_shm(&paths);
    }
    unshare_pod_namespaces(pod_dir, host_net)?;
    pin_unshared(pod_dir, hostname, host_net, share_pid)
}

/// The first half of [`pin_namespaces`], which needs no pod: a new IPC namespace and, unless
/// `host_net`, new network and UTS namespaces with loopback up. The runtime's spawner also has
/// a short-lived child do this ahead of time and keeps the namespaces (spare ones), so that a
/// pod's start does not wait for the kernel to make a network namespace. `for_dir` names what
/// they are for in errors.
pub fn unshare_pod_namespaces(for_dir: &Path, host_net: bool) -> Result<(), SandboxError> {
    let mut flags = CloneFlags::CLONE_NEWIPC;
    if !host_net {
        flags |= CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWUTS;
    }
    unshare(flags).map_err(|source| SandboxError::Sys {
        what: "unshare namespaces for",
        path: for_dir.to_path_buf(),
        source,
    })?;
    if !host_net {
        loopback_up().map_err(|source| SandboxError::Io {
            path: PathBuf::from("lo"),
            source,
        })?;
    }
    Ok(())
}

/// The second half of [`pin_namespaces`], in a process that has made the pod's namespaces
/// with [`unshare_pod_namespaces`]: the hostname, the pins, the pod init of a shared PID
/// namespace, /dev/shm.
pub fn pin_unshared(
    pod_dir: &Path,
    hostname: &str,
    host_net: bool,
    share_pid: bool,
) -> Result<(), SandboxError> {
    let paths = runtime_paths(pod_dir);
    if share_pid {
        // Only this process's children enter it: the pod init, spawned below.
        unshare(CloneFlags::CLONE_NEWPID).map_err(|source| SandboxError::Sys {
            what: "unshare the PID namespace for",
            path: pod_dir.to_path_buf(),
            source,
        })?;
    }
    let mut kinds = vec!["ipc"];
    if !host_net {
        nix::unistd::sethostname(hostname).map_err(|source| SandboxError::Sys {
            what: "sethostname in",
            path: pod_dir.to_path_buf(),
            source,
        })?;
        kinds.push("net");
        kinds.push("uts");
    }
    for kind in kinds {
        pin(Path::new(&format!("/proc/self/ns/{kind}")), &paths.ns(kind))?;
    }
    if share_pid {
        spawn_pod_init(&paths)?;
    }
    mount_shm(&paths)
}

/// The kinds of a spare set of pod namespaces (made ahead by the runtime's spawner), in the
/// order their files travel.
pub const SPARE_KINDS: [&str; 3] = ["ipc", "net", "uts"];

/// Makes spare namespaces (their files in the order of [`SPARE_KINDS`], the pod's hostname
/// already set by the spawner) the pod's: pins them and mounts /dev/shm, as [`pin_unshared`]
/// does for a helper's own. Runs in the daemon, whose namespaces it never changes: the pins
/// are bind mounts of the files.
pub fn pin_spare(pod_dir: &Path, files: &[OwnedFd]) -> Result<(), SandboxError> {
    crate::tp!("spare.start");
    let paths = runtime_paths(pod_dir);
    if files.len() != SPARE_KINDS.len() {
        return Err(SandboxError::Helper {
            message: format!("{} spare namespace files, 3 expected", files.len()),
        });
    }
    for (kind, file) in SPARE_KINDS.iter().zip(files) {
        let source = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        pin(&source, &paths.ns(kind))?;
    }
    mount_shm(&paths)
}

/// The paths of a sandbox's runtime part (the helper never touches its data).
fn runtime_paths(pod_dir: &Path) -> SandboxPaths {
    SandboxPaths {
        dir: pod_dir.to_path_buf(),
        data: PathBuf::new(),
    }
}

/// The pod's /dev/shm: a tmpfs every container bind-mounts.
fn mount_shm(paths: &SandboxPaths) -> Result<(), SandboxError> {
    let shm = paths.shm();
    mount(
        Some("shm"),
        &shm,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        Some("mode=1777,size=65536k"),
    )
    .map_err(|source| SandboxError::Sys {
        what: "mount tmpfs on",
        path: shm,
        source,
    })?;
    Ok(())
}

/// Starts `podvisor shim pod-init` as PID 1 of the PID namespace this process unshared (it
/// inherits the pod's other namespaces), records its identity and pins its namespace.
fn spawn_pod_init(paths: &SandboxPaths) -> Result<(), SandboxError> {
    let pid = spawn_pod_init_process(&paths.dir)?;
    let id = ProcessId::of(pid).map_err(|e| SandboxError::Helper {
        message: format!("pod init {pid}: {e}"),
    })?;
    fsutil::write_json_atomic_volatile(&paths.pod_init(), &id)
        .map_err(io_err(&paths.pod_init()))?;
    pin(Path::new(&format!("/proc/{pid}/ns/pid")), &paths.ns("pid"))
}

/// Entry point of `podvisor shim sandbox <pod-dir>`.
pub fn helper_main(
    pod_dir: &Path,
    hostname: &str,
    host_network: bool,
    share_pid: bool,
    user_ns_base: Option<u32>,
) -> i32 {
    match pin_namespaces(pod_dir, hostname, host_network, share_pid, user_ns_base) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

/// The pod init (`podvisor shim pod-init`): PID 1 of a pod's shared PID namespace. It reaps
/// the orphans the kernel re-parents to it and does nothing else; every signal is blocked, so
/// processes of the pod cannot signal it (the kernel drops their signals to a namespace init
/// without a handler), and only SIGKILL from the host ends it. Single-threaded, no allocation
/// in the loop.
pub fn pod_init() -> ! {
    // SAFETY: sigset_t is plain data, initialised by sigfillset before use; sigprocmask and
    // sigwait only read and write the sets passed; waitpid with a null status pointer is valid.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
        let mut chld: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut chld);
        libc::sigaddset(&mut chld, libc::SIGCHLD);
        loop {
            while libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
            let mut sig = 0;
            libc::sigwait(&chld, &mut sig);
        }
    }
}
