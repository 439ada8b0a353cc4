//! shim: the per-container monitor process, forked by the runtime's spawner (or podvisor's
//! own binary re-executed as the hidden subcommand `podvisor shim run <container-dir>`; it
//! shows that command line either way), like containerd-shim or conmon.
//!
//! Why a process per container (see docs/design.md): libcontainer creates containers by
//! cloning the calling process without exec, which is unsafe from the multi-threaded daemon;
//! and a container, its log stream and its exit status must survive the daemon being killed.
//! The monitor is single-threaded for its whole life. It:
//! 1. records its own identity in `state.json` (the daemon holds nothing it needs),
//! 2. mounts the overlay rootfs, resolves the image user against it,
//! 3. creates and starts the container through libcontainer, so it is the init's parent,
//! 4. reports "started" (or the error) on fd 3 to whoever spawned it, then makes the
//!    container's identity (`meta.json`) durable, off the spawner's start path,
//! 5. copies the container's stdout/stderr into the CRI log until the init exits (SIGCHLD via
//!    signalfd: the exit is seen within microseconds, never polled),
//! 6. writes `exit.json` atomically and durably (exit code, signal, OOM kill, times),
//! 7. deletes the container (cgroup, state), unmounts the rootfs, removes the writable layer,
//!    writes `cleaned`, removes its runtime directory, exits.
//!
//! A container has two directories ([`ContainerPaths`]): its runtime directory
//! (`<runtime-dir>/containers/<id>`: bundle, libcontainer state, rootfs mount point, monitor
//! state and lock), which exists only while something of the container lives and is gone with
//! the boot; and its record directory (`<root-dir>/containers/<id>`: identity, exit record,
//! the writable layer), which outlives a reboot so restart counts and `logs --previous` do.
//!
//! The monitor holds an exclusive flock on `shim.lock` (fd 4, taken by the spawner before the
//! exec) for its whole life: a free lock means the monitor is gone. `podvisor shim cleanup`
//! finishes the job of a monitor that died (SIGKILL): it kills what is left of the container
//! and records its status as unknown.

use std::fs;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

pub mod attach;
mod create;
mod supervise;
use create::create_and_start;
use supervise::supervise;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

use super::oom_watch::OomWatch;
use super::procfs::ProcessId;
use super::rootfs::{self, RootfsPaths};
use super::spec::UserRequest;
use super::ExitRecord;
use crate::cgroups::CgroupRoot;
use crate::fsutil;
use crate::logs::{CriLogWriter, LogOptions, Stream};
use crate::reason::TerminatedReason;

/// The fd on which a monitor reports the start result.
pub const READY_FD: i32 = 3;
/// The fd of the monitor's lock file (already flock'ed by the spawner).
pub const LOCK_FD: i32 = 4;

/// Errors of the monitor and of reading its files.
#[derive(Debug, thiserror::Error)]
pub enum ShimError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("failed to parse {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("rootfs: {0}")]
    Rootfs(#[from] rootfs::RootfsError),
    #[error("user: {0}")]
    User(#[from] super::user::UserError),
    #[error("log: {0}")]
    Log(#[from] crate::logs::LogError),
    #[error("libcontainer")]
    Container(#[from] libcontainer::error::LibcontainerError),
    #[error("{what}: {source}")]
    Sys {
        what: &'static str,
        source: nix::Error,
    },
    #[error("process: {0}")]
    Proc(#[from] super::procfs::ProcError),
    #[error("tty: {message}")]
    Terminal { message: String },
    #[error("device filter on {path}: {message}")]
    Devices { path: PathBuf, message: String },
    /// A staged monitor's runtime closed its end before the go: nothing is started.
    #[error("the start was called off before the container was created")]
    CalledOff,
    #[error("a staged container cannot join a user namespace: its rootfs is mounted without an idmapping")]
    StagedUserNamespace,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ShimError + '_ {
    move |source| ShimError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What the spawner tells the monitor (`shim.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShimConfig {
    pub id: String,
    /// The container's record directory under the root dir (identity, exit record, writable
    /// layer). Empty in containers of podvisor's earlier single-directory layout, which keep
    /// everything in one directory.
    #[serde(default)]
    pub record_dir: PathBuf,
    /// Directory that holds libcontainer's state for this container.
    pub youki_root: PathBuf,
    /// The image layers directory; `lower_layers` are relative to it, topmost first.
    pub layers_dir: PathBuf,
    pub lower_layers: Vec<String>,
    pub log_path: PathBuf,
    pub log_max_size: u64,
    pub log_max_files: u32,
    pub user: UserRequest,
    pub cgroup_root: PathBuf,
    /// The container's cgroup path relative to the cgroup root.
    pub cgroup_path: String,
    /// The container is a systemd scope (`cgroupDriver: systemd`): libcontainer's systemd
    /// manager starts and stops it. Absent in records of earlier versions: cgroupfs.
    #[serde(default)]
    pub systemd_cgroup: bool,
    /// `stdin: true`: the container's stdin stays open for attach sessions.
    #[serde(default)]
    pub stdin: bool,
    /// `stdinOnce: true`: closed when the first attach session ends.
    #[serde(default)]
    pub stdin_once: bool,
    /// Forked while its pod's sandbox is still being made (the pod's first container): the
    /// monitor mounts the rootfs, then waits for the runtime's go on fd 3, a socket ([`GO`];
    /// `shim.json` is then complete and the spec written), and reads this file again. The
    /// runtime's end closing instead means the sandbox failed or the daemon died: the monitor
    /// takes the rootfs apart and exits without a report.
    #[serde(default)]
    pub staged: bool,
}

/// The byte a staged monitor waits for ([`ShimConfig::staged`]).
pub const GO: u8 = b'g';

/// What the monitor records about itself and the container (`state.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShimState {
    pub shim: Option<ProcessId>,
    pub init: Option<ProcessId>,
    pub started_at: Option<String>,
}

/// The start report sent on [`READY_FD`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartReport {
    Started { pid: i32, started_at: String },
    Failed { message: String },
}

/// The name of a container's exit record in its record directory ([`ContainerPaths::exit`]).
pub const EXIT_RECORD: &str = "exit.json";

/// Files of one container: its runtime directory (`dir`) and its record directory (`record`).
#[derive(Debug, Clone)]
pub struct ContainerPaths {
    /// `<runtime-dir>/containers/<id>`: gone with the boot.
    pub dir: PathBuf,
    /// `<root-dir>/containers/<id>`: kept across reboots.
    pub record: PathBuf,
}

impl ContainerPaths {
    pub fn new(dir: impl Into<PathBuf>, record: impl Into<PathBuf>) -> ContainerPaths {
        ContainerPaths {
            dir: dir.into(),
            record: record.into(),
        }
    }
    /// The paths of a container a helper was given the runtime directory of (the record
    /// directory comes from its `shim.json`).
    pub fn open(dir: &Path) -> Result<(ContainerPaths, ShimConfig), ShimError> {
        let cfg: ShimConfig = read_json(&dir.join("shim.json"))?;
        let record = if cfg.record_dir.as_os_str().is_empty() {
            dir.to_path_buf()
        } else {
            cfg.record_dir.clone()
        };
        Ok((ContainerPaths::new(dir, record), cfg))
    }
    /// Identity ([`super::ContainerMeta`]); written last at creation, so its presence marks a
    /// complete container.
    pub fn meta(&self) -> PathBuf {
        self.record.join("meta.json")
    }
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.json")
    }
    pub fn shim_config(&self) -> PathBuf {
        self.dir.join("shim.json")
    }
    pub fn state(&self) -> PathBuf {
        self.dir.join("state.json")
    }
    pub fn exit(&self) -> PathBuf {
        self.record.join(EXIT_RECORD)
    }
    /// Blocks reserved for the exit record at creation ([`reserve_exit_record`]), renamed to
    /// `exit.json` once written.
    pub fn exit_reserve(&self) -> PathBuf {
        self.record.join("exit.reserve")
    }
    /// Nothing of the container remains but its records.
    pub fn cleaned(&self) -> PathBuf {
        self.record.join("cleaned")
    }
    pub fn lock(&self) -> PathBuf {
        self.dir.join("shim.lock")
    }
    /// The monitor's own stderr (warnings): kept with the records for a post-mortem.
    pub fn shim_log(&self) -> PathBuf {
        self.record.join("shim.log")
    }
    /// Mount point in the runtime dir; writable layer in the record dir (on disk, not in the
    /// runtime dir's memory, as containerd's snapshots live under /var/lib).
    pub fn rootfs(&self) -> RootfsPaths {
        RootfsPaths {
            rootfs: self.dir.join("rootfs"),
            upper: self.record.join("upper"),
            work: self.record.join("work"),
            empty: self.dir.join("empty"),
            sub_paths: self.dir.join("subpaths"),
            idmapped: self.dir.join("idmapped"),
        }
    }
}

/// Makes a just-started container's identity durable: `meta.json`, its directory and that
/// directory's entry in the records directory; and the blocks reserved for its exit record.
pub fn sync_identity(paths: &ContainerPaths) -> io::Result<()> {
    match fs::File::open(paths.exit_reserve()) {
        Ok(f) => f.sync_all()?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let parent = paths.record.parent().unwrap_or(Path::new("/"));
    fsutil::sync_file_and_dirs(&paths.meta(), &[&paths.record, parent])
}

/// Size of the space reserved for a container's exit record (an exit record is ~300 bytes;
/// one with a long start error that does not fit is written the ordinary way).
pub const EXIT_RESERVE_BYTES: usize = 4096;

/// Reserves the blocks of a container's exit record before it starts (spaces, which JSON
/// ignores after the record): on a filesystem that fills up while the container runs, its
/// monitor still records how it ended, overwriting blocks that are already allocated instead
/// of needing new ones (true of ext4 and xfs; a copy-on-write filesystem may still refuse).
pub fn reserve_exit_record(paths: &ContainerPaths) -> io::Result<()> {
    fsutil::write_atomic_volatile(&paths.exit_reserve(), &[b' '; EXIT_RESERVE_BYTES])
}

/// Writes a container's exit record atomically and durably: into the reserved blocks when
/// they exist (padded to their size, fsynced, renamed to `exit.json`), else through a new
/// temporary file.
pub fn write_exit_record(paths: &ContainerPaths, exit: &ExitRecord) -> io::Result<()> {
    use std::io::Write;
    let mut data = serde_json::to_vec(exit).map_err(io::Error::other)?;
    if data.len() <= EXIT_RESERVE_BYTES {
        match fs::OpenOptions::new()
            .write(true)
            .open(paths.exit_reserve())
        {
            Ok(mut f) => {
                data.resize(EXIT_RESERVE_BYTES, b' ');
                f.write_all(&data)?;
                f.sync_all()?;
                fs::rename(paths.exit_reserve(), paths.exit())?;
                return fs::File::open(&paths.record)?.sync_all();
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    fsutil::write_json_atomic(&paths.exit(), exit)
}

/// Removes a container's runtime directory once nothing of the container lives (the rootfs
/// is unmounted); never descends into a mount point.
pub fn remove_runtime_dir(paths: &ContainerPaths) -> io::Result<()> {
    fsutil::remove_tree_no_mounts(&paths.dir)
}

pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, ShimError> {
    let data = fs::read(path).map_err(io_err(path))?;
    serde_json::from_slice(&data).map_err(|source| ShimError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a JSON file that may not exist yet.
pub fn read_json_opt<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, ShimError> {
    match fs::read(path) {
        Ok(data) => serde_json::from_slice(&data)
            .map(Some)
            .map_err(|source| ShimError::Parse {
                path: path.to_path_buf(),
                source,
            }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ShimError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// True if the monitor of this container still holds its lock.
pub fn monitor_alive(paths: &ContainerPaths) -> bool {
    let Ok(f) = fs::OpenOptions::new().read(true).open(paths.lock()) else {
        return false;
    };
    // Held by the monitor exactly when a shared lock cannot be had; an error (not expected
    // on a file we could open) counts as held, as before: never declare a live monitor dead.
    !crate::sys::lock::try_lock_shared(&f).unwrap_or(false)
}

/// Renders an error with all its sources, `outer: inner: innermost`.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let text = s.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = s.source();
    }
    out
}

/// Entry point of `podvisor shim run <dir>`. Returns the process exit code.
pub fn run(dir: &Path) -> i32 {
    // Name the process so `ps` (and a reaper looking at zombies) can tell monitors apart.
    let _ = crate::sys::prctl::set_name(c"podvisor-shim");
    crate::tp!("mon.run");
    // SAFETY: fd 3 was set up by the spawner as the write end of the ready pipe; we own it.
    let ready = unsafe { fs::File::from_raw_fd(READY_FD) };
    match run_inner(dir, ready) {
        Ok(()) => 0,
        Err(e) => {
            log::error!("container {}: {e}", dir.display());
            1
        }
    }
}

fn send_report(ready: &mut Option<fs::File>, report: &StartReport) {
    // SIGPIPE's default action was restored for the container's sake; the container is cloned
    // by now. A spawner killed before reading the report (daemon SIGKILLed mid-start) makes
    // this write fail with EPIPE, and the default action would kill the monitor, leaving its
    // container unwatched until the next daemon's cleanup kills it (ContainerStatusUnknown).
    // SAFETY: setting a signal disposition in a single-threaded process.
    unsafe {
        let _ = signal::signal(Signal::SIGPIPE, signal::SigHandler::SigIgn);
    }
    if let Some(mut f) = ready.take() {
        if let Ok(mut line) = serde_json::to_vec(report) {
            line.push(b'\n');
            // The spawner may be gone (daemon killed): nothing to do about it.
            let _ = f.write_all(&line);
        }
    }
}

fn run_inner(dir: &Path, ready: fs::File) -> Result<(), ShimError> {
    let mut ready = Some(ready);
    // A spawner that blocks signals (play, the daemon) passes its mask on through exec; the
    // container must start with none blocked.
    let _ = signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    let (paths, mut cfg) = ContainerPaths::open(dir)?;
    let paths = &paths;
    let me = ProcessId::current()?;
    let mut state = ShimState {
        shim: Some(me),
        ..Default::default()
    };
    fsutil::write_json_atomic_volatile(&paths.state(), &state).map_err(io_err(&paths.state()))?;
    crate::tp!("mon.state");
    // Rust ignores SIGPIPE at startup; ignored dispositions survive exec, so restore the
    // default before the container process is cloned from us.
    // SAFETY: setting a signal disposition to SIG_DFL in a single-threaded process.
    unsafe {
        let _ = signal::signal(Signal::SIGPIPE, signal::SigHandler::SigDfl);
    }

    // libcontainer's account of a failed setup (the mount, path or syscall), see libct_trace.
    let trace = paths.dir.join("libcontainer-errors.log");
    if let Err(e) = super::libct_trace::install(&trace) {
        log::warn!("container {}: {}: {e}", cfg.id, trace.display());
    }
    let started = match create_and_start(paths, &mut cfg, &mut state, ready.as_ref()) {
        Ok(started) => started,
        Err(ShimError::CalledOff) => {
            // Nobody waits for a report: the runtime removes the directories.
            cleanup_container(paths, &cfg);
            return finish(paths);
        }
        Err(e) => {
            let mut message = error_chain(&e);
            let detail = super::libct_trace::detail(&trace);
            if !detail.is_empty() && matches!(e, ShimError::Container(_)) {
                message.push_str(": ");
                message.push_str(&detail);
            }
            send_report(
                &mut ready,
                &StartReport::Failed {
                    message: message.clone(),
                },
            );
            let exit = ExitRecord {
                exit_code: 128,
                signal: None,
                oom_killed: false,
                started_at: String::new(),
                finished_at: super::now_rfc3339(),
                reason: TerminatedReason::StartError.into(),
                message: Some(message),
            };
            write_exit_record(paths, &exit).map_err(io_err(&paths.exit()))?;
            cleanup_container(paths, &cfg);
            finish(paths)?;
            return Err(e);
        }
    };
    crate::tp!("mon.started");
    send_report(
        &mut ready,
        &StartReport::Started {
            pid: started.init.as_raw(),
            started_at: started.started_at.clone(),
        },
    );
    // Durable identity, now that the spawner has its answer: a power cut before this point
    // loses the record of a container that ran for milliseconds (its log file still counts
    // for the next restart count); after it, the container is reported lost with its node.
    if let Err(e) = sync_identity(paths) {
        log::warn!("container {}: sync {}: {e}", cfg.id, paths.meta().display());
    }
    // From here on the monitor must not be stopped by signals meant for the daemon or a
    // terminal (Ctrl-C, hangup); only SIGKILL ends it early.
    // SAFETY: ignoring signals in a single-threaded process; the container is already exec'd.
    unsafe {
        for s in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            let _ = signal::signal(s, signal::SigHandler::SigIgn);
        }
    }
    // A systemd scope's cgroup goes as soon as it is empty: count OOM kills while it exists.
    let mut oom_watch = if cfg.systemd_cgroup {
        OomWatch::new(&cfg.cgroup_root, &cfg.cgroup_path).unwrap_or_else(|e| {
            log::warn!("container {}: watch memory.events: {e}", cfg.id);
            None
        })
    } else {
        None
    };
    let (status, mut log) = supervise(
        &cfg,
        started.init,
        started.stdout,
        started.stderr,
        started.io,
        oom_watch.as_mut(),
    )?;
    let oom = match oom_watch.as_mut() {
        Some(w) => w.count() > 0,
        None => CgroupRoot::new(&cfg.cgroup_root)
            .oom_kill_count(&cfg.cgroup_path)
            .map(|n| n > 0)
            .unwrap_or_else(|e| {
                log::warn!("container {}: {e}", cfg.id);
                false
            }),
    };
    crate::tp!("mon.exit_seen");
    let exit = exit_record(status, oom, started.started_at);
    // The exit record's rename is what the runtime waits for (an inotify watch on the record
    // directory): from here on the container may be restarted, while this monitor syncs the
    // log and takes the old container apart.
    write_exit_record(paths, &exit).map_err(io_err(&paths.exit()))?;
    crate::tp!("mon.exit_recorded");
    if let Err(e) = log.sync() {
        log::warn!("container {}: {}", cfg.id, error_chain(&e));
    }
    drop(log);
    cleanup_container(paths, &cfg);
    finish(paths)
}

/// Plans giving the pages of the container's creation back once the monitor settles into its
/// copy loop (applied by the loop right before it first waits): the heap it freed (the spec, libcontainer's state, the rootfs set-up), the code and
/// read-only data it ran (most of libcontainer and serde, mapped from the binary) and the
/// stack its deep calls used. The monitor then lives on in the few pages the loop touches;
/// what it runs again later (the exit record, the container's deletion) is mapped back from
/// the page cache by minor faults.
fn release_idle_memory(id: &str) -> Option<crate::sys::pages::Release> {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of this process's heap to the kernel; the
    // monitor is single-threaded.
    unsafe {
        libc::malloc_trim(0);
    }
    crate::sys::pages::Release::plan(true)
        .map_err(|e| log::warn!("container {id}: release idle pages: {e}"))
        .ok()
}

/// Marks the container cleaned (nothing but its records remain) and removes its runtime
/// directory. `cleaned` needs no fsync: lost in a power cut, the container is simply found
/// unfinished by the next boot and finished again.
fn finish(paths: &ContainerPaths) -> Result<(), ShimError> {
    fs::write(paths.cleaned(), b"").map_err(io_err(&paths.cleaned()))?;
    // A container of the earlier single-directory layout has its records there too.
    if paths.dir == paths.record {
        return Ok(());
    }
    remove_runtime_dir(paths).map_err(io_err(&paths.dir))
}

fn try_reap(init: Pid) -> Result<Option<WaitStatus>, ShimError> {
    super::procfs::try_reap(init).map_err(|source| ShimError::Sys {
        what: "waitpid",
        source,
    })
}

fn set_nonblocking(fd: &OwnedFd) -> Result<(), ShimError> {
    super::procfs::set_nonblocking(fd.as_fd()).map_err(|source| ShimError::Sys {
        what: "fcntl",
        source,
    })
}

/// The kubelet's view of an exit.
pub fn exit_record(status: WaitStatus, oom: bool, started_at: String) -> ExitRecord {
    let (exit_code, signal) = match status {
        WaitStatus::Exited(_, code) => (code, None),
        WaitStatus::Signaled(_, sig, _) => (128 + sig as i32, Some(sig as i32)),
        _ => (255, None),
    };
    let reason = if oom {
        TerminatedReason::OomKilled
    } else if exit_code == 0 {
        TerminatedReason::Completed
    } else {
        TerminatedReason::Error
    };
    ExitRecord {
        exit_code,
        signal,
        oom_killed: oom,
        started_at,
        finished_at: super::now_rfc3339(),
        reason: reason.into(),
        message: None,
    }
}

/// Deletes the libcontainer container (killing anything left in its cgroup), unmounts and
/// removes the rootfs. Best effort: every step is attempted and failures are logged.
fn cleanup_container(paths: &ContainerPaths, cfg: &ShimConfig) {
    let state_dir = cfg.youki_root.join(&cfg.id);
    if state_dir.exists() {
        match libcontainer::container::Container::load(state_dir.clone()) {
            Ok(mut c) => {
                if let Err(e) = c.delete(true) {
                    log::warn!("container {}: delete: {e}", cfg.id);
                }
            }
            Err(e) => log::warn!("container {}: load {}: {e}", cfg.id, state_dir.display()),
        }
    }
    // The container's cgroup may survive a failed create (libcontainer creates it early).
    if let Err(e) = CgroupRoot::new(&cfg.cgroup_root).remove(&cfg.cgroup_path) {
        log::warn!("container {}: {e}", cfg.id);
    }
    if let Err(e) = rootfs::remove_rootfs(&paths.rootfs()) {
        log::warn!("container {}: {e}", cfg.id);
    }
    let _ = fs::remove_dir_all(&cfg.youki_root);
}

/// Entry point of `podvisor shim cleanup <dir>`: finishes the work of a monitor that died.
/// Kills the container's processes if any survive, records an unknown exit if none was
/// recorded, and removes the container's cgroup, state and rootfs.
pub fn cleanup(dir: &Path) -> Result<(), ShimError> {
    let (paths, cfg) = ContainerPaths::open(dir)?;
    if monitor_alive(&paths) {
        return Err(ShimError::Io {
            path: paths.lock(),
            source: io::Error::other("the container's monitor is still running"),
        });
    }
    let state: ShimState = read_json_opt(&paths.state())?.unwrap_or_default();
    let mut killed = false;
    if let Some(init) = state.init {
        if init.is_alive() {
            killed = init.signal(libc::SIGKILL).unwrap_or(false);
        }
    }
    let oom = CgroupRoot::new(&cfg.cgroup_root)
        .oom_kill_count(&cfg.cgroup_path)
        .map(|n| n > 0)
        .unwrap_or(false);
    // A torn exit record (power cut) counts as none.
    let recorded = matches!(
        fsutil::load_json::<ExitRecord>(&paths.exit()).map_err(io_err(&paths.exit()))?,
        fsutil::Loaded::Ok(_)
    );
    if !recorded {
        let exit = ExitRecord {
            exit_code: if killed || state.started_at.is_some() {
                137
            } else {
                128
            },
            signal: None,
            oom_killed: oom,
            started_at: state.started_at.clone().unwrap_or_default(),
            finished_at: super::now_rfc3339(),
            reason: if oom {
                TerminatedReason::OomKilled
            } else {
                TerminatedReason::ContainerStatusUnknown
            }
            .into(),
            message: Some(
                "the container's monitor died; the container was stopped and its exit status is unknown"
                    .into(),
            ),
        };
        write_exit_record(&paths, &exit).map_err(io_err(&paths.exit()))?;
    }
    cleanup_container(&paths, &cfg);
    finish(&paths)
}

/// Entry point of `podvisor shim sandbox <pod-dir>`.
pub fn sandbox(
    pod_dir: &Path,
    hostname: &str,
    host_network: bool,
    share_pid: bool,
    user_ns_base: Option<u32>,
) -> i32 {
    match super::sandbox::pin_namespaces(pod_dir, hostname, host_network, share_pid, user_ns_base) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_records_follow_kubelet_reasons() {
        let p = Pid::from_raw(1);
        let r = exit_record(WaitStatus::Exited(p, 0), false, "t".into());
        assert_eq!((r.exit_code, r.reason.as_str()), (0, "Completed"));
        let r = exit_record(WaitStatus::Exited(p, 3), false, "t".into());
        assert_eq!((r.exit_code, r.reason.as_str()), (3, "Error"));
        let r = exit_record(
            WaitStatus::Signaled(p, Signal::SIGKILL, false),
            true,
            "t".into(),
        );
        assert_eq!(
            (r.exit_code, r.signal, r.reason.as_str()),
            (137, Some(9), "OOMKilled")
        );
        let r = exit_record(
            WaitStatus::Signaled(p, Signal::SIGTERM, false),
            false,
            "t".into(),
        );
        assert_eq!((r.exit_code, r.reason.as_str()), (143, "Error"));
    }

    #[test]
    fn report_to_a_spawner_that_is_gone_does_not_kill_the_monitor() {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        drop(r);
        // SAFETY: the child only restores SIGPIPE, writes to the pipe and _exits; glibc's
        // fork keeps malloc usable in the child.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            nix::unistd::ForkResult::Child => {
                // SAFETY: as in the monitor, before its container is cloned.
                unsafe {
                    let _ = signal::signal(Signal::SIGPIPE, signal::SigHandler::SigDfl);
                }
                let mut ready = Some(fs::File::from(w));
                send_report(
                    &mut ready,
                    &StartReport::Started {
                        pid: 1,
                        started_at: String::new(),
                    },
                );
                // SAFETY: leaving the forked child without running the test harness.
                unsafe { libc::_exit(7) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(w);
                let st = nix::sys::wait::waitpid(child, None).expect("wait");
                assert_eq!(st, nix::sys::wait::WaitStatus::Exited(child, 7));
            }
        }
    }

    #[test]
    fn monitor_alive_follows_the_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = ContainerPaths::new(dir.path(), dir.path());
        assert!(!monitor_alive(&paths), "no lock file");
        let f = fs::File::create(paths.lock()).expect("create");
        assert!(!monitor_alive(&paths), "unlocked");
        crate::sys::lock::lock_exclusive(&f).expect("lock");
        assert!(monitor_alive(&paths), "locked");
        drop(f);
        assert!(!monitor_alive(&paths), "released");
    }
}
