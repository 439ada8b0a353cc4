//! records: a container's two directories and what a listing finds in them. The record
//! directory (`<root-dir>/containers/<id>`: identity, exit record, writable layer) is kept
//! across reboots; the runtime directory (`<runtime-dir>/containers/<id>`) exists while
//! something of the container lives. A listing finds complete containers (running under their
//! monitor, or exited), interrupted creations (no identity, or one a power cut tore: removed),
//! containers whose monitor died (finished by `shim cleanup`) and containers lost with an
//! earlier boot (reported exited with containerd's unknown status, 255/`Unknown`).

use std::fs;
use std::io;
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use super::super::container::{self, ContainerPaths};
use super::super::protocol::ShimState;
use super::super::{ContainerInfo, ContainerMeta, ContainerState, ExitRecord, RuntimeError};
use super::{LinuxRuntime, RuntimeConfig};
use crate::fsutil::{self, Loaded};
use crate::reason::TerminatedReason;

impl LinuxRuntime {
    /// [`crate::runtime::Runtime::list_containers`]: every container on disk, oldest first.
    pub(super) fn list(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let dir = self.cfg.records_dir();
        let entries = fs::read_dir(&dir).map_err(|source| RuntimeError::Io {
            what: "read",
            path: dir.clone(),
            source,
        })?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if self.busy_containers.contains(&id) {
                continue;
            }
            let Ok(paths) = self.container_paths(&id) else {
                continue;
            };
            match self.container_info(&paths) {
                Ok(Some(info)) => out.push(info),
                Ok(None) => {}
                // Removed meanwhile (by another process sharing the root): gone, not broken.
                Err(_) if !paths.meta().exists() => {}
                // One broken directory must not hide the others.
                Err(e) => log::warn!("{}: {e}", paths.record.display()),
            }
        }
        out.sort_by(|a, b| a.meta.created_at.cmp(&b.meta.created_at));
        Ok(out)
    }

    /// Whether a monitor of pod `uid` still runs (read from the container records).
    pub(super) fn pod_has_live_container(&self, uid: &str) -> bool {
        let Ok(entries) = fs::read_dir(self.cfg.records_dir()) else {
            return false;
        };
        entries.flatten().any(|e| {
            let Ok(paths) = self.container_paths(&e.file_name().to_string_lossy()) else {
                return false;
            };
            matches!(fsutil::load_json::<ContainerMeta>(&paths.meta()),
                Ok(Loaded::Ok(m)) if m.pod_uid == uid)
                && container::monitor_alive(&paths)
        })
    }

    pub(super) fn container_paths(&self, id: &str) -> Result<ContainerPaths, RuntimeError> {
        if id.is_empty() || id.contains('/') || id == "." || id == ".." {
            return Err(RuntimeError::NotFound { id: id.to_string() });
        }
        let (run, record) = (
            self.cfg.containers_dir().join(id),
            self.cfg.records_dir().join(id),
        );
        // A container of podvisor's earlier single-directory layout (all files in the record
        // directory) is handled in place: its monitor, of the earlier version, may still run.
        if !run.exists() && record.join("shim.json").exists() {
            return Ok(ContainerPaths::new(record.clone(), record));
        }
        Ok(ContainerPaths::new(run, record))
    }

    /// Removes what is left of a container whose creation never completed (no identity, or a
    /// torn one: a power cut before the monitor made it durable).
    fn remove_incomplete(&self, paths: &ContainerPaths, name: &str) {
        if let Err(e) = remove_container_dirs(paths) {
            log::warn!("container dir {}: {e}", paths.record.display());
        }
        let _ = self.images.remove_lease(name);
    }

    /// Finishes a container whose monitor is gone without having cleaned up, when nothing of
    /// it can live any more: one of an earlier boot (lost with its node), or one whose runtime
    /// directory vanished. Keeps its own exit record if it has one, else records containerd's
    /// status for a container whose task is gone (exit code 255, reason `Unknown`); removes
    /// the runtime directory and the writable layer; marks it cleaned. Its identity, exit
    /// record and logs stay: restart counts and `logs --previous` follow it.
    fn finish_lost(
        &self,
        paths: &ContainerPaths,
        meta: &ContainerMeta,
        why: &str,
    ) -> Result<ExitRecord, RuntimeError> {
        let io = |what: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| RuntimeError::Io { what, path, source }
        };
        let exit = match fsutil::load_json::<ExitRecord>(&paths.exit())
            .map_err(io("read", &paths.exit()))?
        {
            Loaded::Ok(exit) => exit,
            Loaded::Missing | Loaded::Torn(_) => {
                let exit = ExitRecord {
                    exit_code: UNKNOWN_EXIT_CODE,
                    signal: None,
                    oom_killed: false,
                    started_at: meta.created_at.clone(),
                    finished_at: crate::runtime::now_rfc3339(),
                    reason: TerminatedReason::Unknown.into(),
                    message: Some(why.to_string()),
                };
                container::write_exit_record(paths, &exit).map_err(io("write", &paths.exit()))?;
                exit
            }
        };
        // (A container of the earlier single-directory layout keeps its runtime files with its
        // records; only the writable layer goes below.)
        if paths.dir != paths.record && paths.dir.exists() {
            let rootfs = paths.rootfs();
            crate::runtime::rootfs::unmount_if_mounted(&rootfs.rootfs).map_err(|source| {
                RuntimeError::Rootfs {
                    id: meta.id.clone(),
                    source,
                }
            })?;
            container::remove_runtime_dir(paths).map_err(io("remove", &paths.dir))?;
        }
        crate::runtime::rootfs::remove_rootfs(&paths.rootfs()).map_err(|source| {
            RuntimeError::Rootfs {
                id: meta.id.clone(),
                source,
            }
        })?;
        fs::write(paths.cleaned(), b"").map_err(io("write", &paths.cleaned()))?;
        log::info!(
            "pod {}/{} container {} ({}, restart {}): {why}: reported exited with {} ({}); \
             its log is kept",
            meta.pod_namespace,
            meta.pod_name,
            meta.container_name,
            meta.id,
            meta.restart_count,
            exit.exit_code,
            exit.reason
        );
        Ok(exit)
    }

    /// Watches the monitor recorded in `state.json` (a re-adopted one) unless it is watched.
    fn watch_live_monitor(
        &self,
        paths: &ContainerPaths,
        meta: &ContainerMeta,
    ) -> Result<(), RuntimeError> {
        if self.watcher.is_watched(&meta.id) {
            return Ok(());
        }
        let state: Option<ShimState> = container::read_json_opt(&paths.state()).ok().flatten();
        if let Some(shim_id) = state.and_then(|s| s.shim) {
            if let Ok(Some(fd)) = shim_id.open_pidfd() {
                self.watcher.watch(meta, paths.clone(), fd)?;
            }
        }
        Ok(())
    }

    /// Waits until the monitor of an exited container has taken it apart (it recorded the
    /// exit and is unmounting and removing; normally milliseconds): `Ok(false)` if it is still
    /// at it after `timeout`.
    pub(super) fn wait_monitor_done(&self, paths: &ContainerPaths, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while container::monitor_alive(paths) {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(2));
        }
        true
    }

    pub(super) fn container_info(
        &self,
        paths: &ContainerPaths,
    ) -> Result<Option<ContainerInfo>, RuntimeError> {
        let shim_err = |id: &str| {
            let id = id.to_string();
            move |source| RuntimeError::Shim {
                id,
                source: Box::new(source),
            }
        };
        let name = paths
            .record
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A monitor that wrote `cleaned` is done (it is removing its runtime directory, state
        // and lock included, and exits): not waited for as one that is starting.
        let alive = !paths.cleaned().exists() && container::monitor_alive(paths);
        let meta = match fsutil::load_json::<ContainerMeta>(&paths.meta()) {
            Ok(Loaded::Ok(m)) => m,
            // Crashed while being created: nothing was started from it.
            Ok(Loaded::Missing) if !alive => {
                self.remove_incomplete(paths, &name);
                return Ok(None);
            }
            // A torn identity: a power cut before the monitor made it durable. The container
            // ran for milliseconds at most; its log file still counts for restart counts.
            Ok(Loaded::Torn(why)) if !alive => {
                log::warn!(
                    "{}: torn identity record ({why}): an interrupted creation, removing it",
                    paths.meta().display()
                );
                self.remove_incomplete(paths, &name);
                return Ok(None);
            }
            Ok(Loaded::Missing) => return Ok(None),
            Ok(Loaded::Torn(why)) => {
                return Err(RuntimeError::Start {
                    id: name,
                    message: format!("{} is torn ({why})", paths.meta().display()),
                })
            }
            Err(source) => {
                return Err(RuntimeError::Io {
                    what: "read",
                    path: paths.meta(),
                    source,
                })
            }
        };
        if alive {
            // A monitor that recorded the exit is taking the container apart: the container
            // has exited (the watcher reported it when the record appeared).
            if let Ok(Loaded::Ok(exit)) = fsutil::load_json::<ExitRecord>(&paths.exit()) {
                self.watch_live_monitor(paths, &meta)?;
                return Ok(Some(ContainerInfo {
                    meta,
                    state: ContainerState::Exited(exit),
                }));
            }
            // Give a monitor that is just starting a moment to record itself.
            let deadline = Instant::now() + Duration::from_secs(2);
            let state = loop {
                let st: ShimState = container::read_json_opt(&paths.state())
                    .map_err(shim_err(&meta.id))?
                    .unwrap_or_default();
                if st.shim.is_some() || Instant::now() >= deadline {
                    break st;
                }
                thread::sleep(Duration::from_millis(10));
            };
            if state.shim.is_some() {
                self.watch_live_monitor(paths, &meta)?;
            }
            let st = match (state.init, state.started_at) {
                (Some(init), Some(started_at)) => ContainerState::Running {
                    pid: init.pid,
                    started_at,
                },
                _ => ContainerState::Created,
            };
            return Ok(Some(ContainerInfo { meta, state: st }));
        }
        if self.watcher.is_watched(&meta.id) {
            // The monitor just exited; the watcher reports it as an event.
            if let Ok(Loaded::Ok(exit)) = fsutil::load_json::<ExitRecord>(&paths.exit()) {
                return Ok(Some(ContainerInfo {
                    meta,
                    state: ContainerState::Exited(exit),
                }));
            }
        }
        let exit = if paths.cleaned().exists() {
            match fsutil::load_json::<ExitRecord>(&paths.exit()) {
                Ok(Loaded::Ok(exit)) => exit,
                // `cleaned` is written after the (durable) exit record: only a removal
                // interrupted half-way by an older version, or damage, leaves one without the
                // other.
                other => {
                    log::warn!(
                        "{}: cleaned container without a readable exit record ({}): removing it",
                        paths.record.display(),
                        match other {
                            Ok(Loaded::Torn(why)) => why,
                            Err(e) => e.to_string(),
                            _ => "missing".to_string(),
                        }
                    );
                    self.remove_incomplete(paths, &name);
                    return Ok(None);
                }
            }
        } else if paths.shim_config().exists()
            && (meta.boot_id == self.boot_id || meta.boot_id.is_empty())
        {
            // This boot (or an earlier layout's record, whose boot is unknown): its monitor
            // died; the helper kills what is left of the container.
            self.run_cleanup(paths)?;
            container::read_json::<ExitRecord>(&paths.exit()).map_err(shim_err(&meta.id))?
        } else if meta.boot_id != self.boot_id {
            self.finish_lost(
                paths,
                &meta,
                "the node rebooted or lost power while the container ran (it belongs to an \
                 earlier boot)",
            )?
        } else {
            self.finish_lost(
                paths,
                &meta,
                "its runtime state was removed while its monitor was gone",
            )?
        };
        Ok(Some(ContainerInfo {
            meta,
            state: ContainerState::Exited(exit),
        }))
    }
}

/// containerd's exit code for a container whose task is gone (node reboot): `unknownExitCode`.
pub const UNKNOWN_EXIT_CODE: i32 = 255;

/// Removes runtime directories of containers that have no record (a removal interrupted
/// between the two), unless a monitor still holds them. Runs at start, before any worker.
pub(super) fn remove_orphan_runtime_dirs(cfg: &RuntimeConfig) {
    let Ok(entries) = fs::read_dir(cfg.containers_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        let paths = ContainerPaths::new(e.path(), cfg.records_dir().join(&id));
        if paths.record.exists() || container::monitor_alive(&paths) {
            continue;
        }
        let rootfs = paths.rootfs().rootfs;
        let r = crate::runtime::rootfs::unmount_if_mounted(&rootfs)
            .map_err(io::Error::other)
            .and_then(|()| container::remove_runtime_dir(&paths));
        match r {
            Ok(()) => log::info!(
                "container {id}: removed runtime state without a record (interrupted removal)"
            ),
            Err(e) => log::warn!("container {id}: runtime state without a record: {e}"),
        }
    }
}

/// Removes a container's two directories without descending into mount points.
pub(super) fn remove_container_dirs(paths: &ContainerPaths) -> io::Result<()> {
    // pinned subPaths are unmounted first
    crate::runtime::rootfs::unpin_sub_paths(&paths.rootfs().sub_paths).map_err(io::Error::other)?;
    let rootfs = paths.rootfs().rootfs;
    if crate::runtime::rootfs::is_mounted(&rootfs) {
        return Err(io::Error::other(format!(
            "{} is still mounted",
            rootfs.display()
        )));
    }
    // meta.json first: a removal interrupted below (daemon killed) then looks like an
    // interrupted creation, which the next listing removes. Deleted in directory order, a
    // half-removed directory could keep meta.json but lose exit.json, and stay forever as an
    // unreadable container.
    match fs::remove_file(paths.meta()) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fsutil::remove_tree_no_mounts(&paths.dir)?;
    fsutil::remove_tree_no_mounts(&paths.record)
}
