//! Launching a container's monitor: forked by the spawner (or its own fork+exec of
//! `shim run`) with its lock, `shim.log` and ready pipe, watched from the fork on, and its
//! start report read; a failed start discarded, and `shim cleanup` run for a monitor that
//! died.

use super::spawner::SpawnerError;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::list::remove_container_dirs;
use super::{HelperMode, LinuxRuntime};
use crate::runtime::container::{self, ContainerPaths};
use crate::runtime::procfs::{self, ProcessId};
use crate::runtime::protocol::{self, ShimState, StartReport};
use crate::runtime::{ContainerInfo, ContainerMeta, ContainerState, RuntimeError};
use crate::sys::fdpass::move_fd;

/// A monitor just forked: its pid and pidfd, `None` when the spawner's answer was lost.
pub(super) struct Monitor {
    pub(super) pid: Option<i32>,
    pub(super) pidfd: Option<OwnedFd>,
}

impl LinuxRuntime {
    /// Spawns the monitor and waits for its start report.
    pub(super) fn spawn_monitor(
        &self,
        meta: &ContainerMeta,
        paths: &ContainerPaths,
    ) -> Result<ContainerInfo, RuntimeError> {
        let (ready_r, ready_w) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| RuntimeError::Io {
                what: "create pipe for",
                path: paths.dir.clone(),
                source: e.into(),
            })?;
        let monitor = self.launch_monitor(&meta.id, paths, ready_w)?;
        self.await_report(meta, paths, monitor, &ready_r)
    }

    /// Forks the monitor (through the spawner, or as its own exec) with its lock and `ready`
    /// as fd 3, where it reports its start. Ours of both go: EOF and the lock follow the
    /// monitor's life.
    pub(super) fn launch_monitor(
        &self,
        id: &str,
        paths: &ContainerPaths,
        ready: OwnedFd,
    ) -> Result<Monitor, RuntimeError> {
        let io = |what: &'static str, path: PathBuf| {
            move |source: io::Error| RuntimeError::Io { what, path, source }
        };
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(paths.lock())
            .map_err(io("create", paths.lock()))?;
        if !crate::sys::lock::try_lock_exclusive(&lock).map_err(io("lock", paths.lock()))? {
            return Err(io("lock", paths.lock())(io::Error::from(
                io::ErrorKind::WouldBlock,
            )));
        }
        let shim_log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(paths.shim_log())
            .map_err(io("create", paths.shim_log()))?;
        match self.cfg.helpers {
            HelperMode::Spawner => {
                match self
                    .spawner
                    .spawn_monitor(&paths.dir, &ready, &lock, &shim_log)
                {
                    Ok(m) => Ok(Monitor {
                        pid: Some(m.pid),
                        pidfd: Some(m.pidfd),
                    }),
                    // Sent, but the answer was lost (the spawner died): the monitor may run.
                    // Its ready pipe says; its identity is in state.json then.
                    Err(e @ SpawnerError::NoReply { .. }) => {
                        log::warn!("container {id}: {e}");
                        Ok(Monitor {
                            pid: None,
                            pidfd: None,
                        })
                    }
                    Err(e) => Err(RuntimeError::Start {
                        id: id.to_string(),
                        message: e.to_string(),
                    }),
                }
            }
            HelperMode::Exec => {
                let (pid, fd) = self.exec_monitor(paths, &ready, &lock, shim_log)?;
                Ok(Monitor {
                    pid: Some(pid),
                    pidfd: Some(fd),
                })
            }
        }
    }

    /// Watches a launched monitor and waits for its start report on `ready` (ours of the
    /// monitor's fd 3). A failed start leaves nothing behind.
    pub(super) fn await_report(
        &self,
        meta: &ContainerMeta,
        paths: &ContainerPaths,
        monitor: Monitor,
        ready: &OwnedFd,
    ) -> Result<ContainerInfo, RuntimeError> {
        let id = meta.id.clone();
        let watched = monitor.pidfd.is_some();
        if let Some(pidfd) = monitor.pidfd {
            self.watcher.watch(meta, paths.clone(), pidfd)?;
        }
        crate::tp!("st.spawned");
        let report = read_report(ready, self.cfg.start_timeout);
        // Without the spawner's answer, the monitor (if it was forked) recorded itself before
        // reporting.
        let recorded = || -> Option<ProcessId> {
            container::read_json_opt::<ShimState>(&paths.state())
                .ok()
                .flatten()
                .and_then(|s| s.shim)
        };
        if !watched {
            if let Some(fd) = recorded().and_then(|p| p.open_pidfd().ok().flatten()) {
                self.watcher.watch(meta, paths.clone(), fd)?;
            }
        }
        let shim_pid = monitor.pid.or_else(|| recorded().map(|p| p.pid));
        match report {
            Ok(StartReport::Started { pid, started_at }) => Ok(ContainerInfo {
                meta: meta.clone(),
                state: ContainerState::Running { pid, started_at },
            }),
            Ok(StartReport::Failed { message }) => {
                self.discard_failed(&id, paths);
                Err(RuntimeError::Start { id, message })
            }
            Err(why) => {
                if let Some(p) = shim_pid.and_then(|pid| ProcessId::of(pid).ok()) {
                    let _ = p.signal(libc::SIGKILL);
                }
                self.discard_failed(&id, paths);
                Err(RuntimeError::Start {
                    id,
                    message: why.to_string(),
                })
            }
        }
    }

    /// The monitor as its own fork+exec of `shim run` (the earlier way, [`HelperMode::Exec`]).
    fn exec_monitor(
        &self,
        paths: &ContainerPaths,
        ready_w: &OwnedFd,
        lock: &fs::File,
        shim_log: fs::File,
    ) -> Result<(i32, OwnedFd), RuntimeError> {
        let io = |what: &'static str, path: PathBuf| {
            move |source: io::Error| RuntimeError::Io { what, path, source }
        };
        let mut cmd = Command::new(&self.cfg.shim_binary);
        cmd.arg("shim")
            .arg("run")
            .arg(&paths.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(shim_log))
            .env("RUST_LOG", "warn");
        let ready_fd = ready_w.as_raw_fd();
        let lock_fd = lock.as_raw_fd();
        // SAFETY: the closure only calls async-signal-safe functions (setsid, dup2, fcntl).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                // Park both above the targets first so neither dup2 clobbers the other.
                let r = libc::fcntl(ready_fd, libc::F_DUPFD_CLOEXEC, 10);
                let l = libc::fcntl(lock_fd, libc::F_DUPFD_CLOEXEC, 10);
                if r < 0 || l < 0 {
                    return Err(io::Error::last_os_error());
                }
                move_fd(r, protocol::READY_FD)?;
                move_fd(l, protocol::LOCK_FD)?;
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| RuntimeError::Spawn {
            binary: self.cfg.shim_binary.clone(),
            source,
        })?;
        let shim_pid = child.id() as i32;
        // `child` is not waited on through std: the watcher reaps it via its pidfd.
        drop(child);
        let pidfd = procfs::pidfd_open(shim_pid).map_err(io("pidfd_open", paths.dir.clone()))?;
        Ok((shim_pid, pidfd))
    }

    /// A start failed: stop watching the monitor, let it finish its cleanup (or finish it),
    /// and remove the container's directories.
    pub(super) fn discard_failed(&self, id: &str, paths: &ContainerPaths) {
        if let Some(fd) = self.watcher.forget(id) {
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, PollTimeout::from(10_000u16));
            procfs::reap_pidfd(&fd);
        }
        if !paths.cleaned().exists() && paths.shim_config().exists() {
            if let Err(e) = self.run_cleanup(paths) {
                log::warn!("container {id}: {e}");
            }
        }
        if let Err(e) = self.images.remove_lease(id) {
            log::warn!("container {id}: {e}");
        }
        if let Err(e) = remove_container_dirs(paths) {
            log::warn!("container {id}: {e}");
        }
    }

    pub(super) fn run_cleanup(&self, paths: &ContainerPaths) -> Result<(), RuntimeError> {
        run_cleanup(&self.cfg.shim_binary, paths)
    }
}

/// Why the monitor's start report could not be read (the start then fails).
#[derive(Debug, thiserror::Error)]
pub(super) enum ReportError {
    #[error("cannot read the monitor's ready pipe: {source}")]
    Pipe { source: io::Error },
    #[error("monitor did not report a start within {}s", .timeout.as_secs())]
    Timeout { timeout: Duration },
    #[error("waiting for the monitor: {source}")]
    Poll { source: nix::Error },
    #[error("reading the monitor's report: {source}")]
    Read { source: io::Error },
    #[error("monitor exited without reporting (see shim.log in the container directory)")]
    NoReport,
    #[error("malformed start report: {source}")]
    Malformed { source: serde_json::Error },
}

pub(super) fn read_report(fd: &OwnedFd, timeout: Duration) -> Result<StartReport, ReportError> {
    let deadline = Instant::now() + timeout;
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let mut file = fs::File::from(
        fd.try_clone()
            .map_err(|source| ReportError::Pipe { source })?,
    );
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReportError::Timeout { timeout });
        }
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::Error::EINTR) => continue,
            Err(source) => return Err(ReportError::Poll { source }),
        }
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if data.contains(&b'\n') {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(ReportError::Read { source }),
        }
    }
    let line = data.split(|b| *b == b'\n').next().unwrap_or_default();
    if line.is_empty() {
        return Err(ReportError::NoReport);
    }
    serde_json::from_slice(line).map_err(|source| ReportError::Malformed { source })
}

pub(super) fn run_cleanup(binary: &Path, paths: &ContainerPaths) -> Result<(), RuntimeError> {
    let out = Command::new(binary)
        .arg("shim")
        .arg("cleanup")
        .arg(&paths.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("RUST_LOG", "warn")
        .output()
        .map_err(|source| RuntimeError::Spawn {
            binary: binary.to_path_buf(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(RuntimeError::Start {
            id: paths
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            message: format!(
                "cleanup failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}
