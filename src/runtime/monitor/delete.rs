//! The monitor's last verb, delete: the kubelet's view of an exit ([`exit_record`]), the
//! container taken apart once its exit is recorded (libcontainer's delete, the cgroup, the
//! rootfs), `cleaned` and the runtime directory's removal; and `podvisor shim cleanup`
//! ([`cleanup`]), the same job finished for a monitor that died.

use std::fs;
use std::io;
use std::path::Path;

use nix::sys::wait::WaitStatus;

use crate::cgroups::CgroupRoot;
use crate::fsutil;
use crate::reason::TerminatedReason;
use crate::runtime::container::{
    io_err, monitor_alive, read_json_opt, remove_runtime_dir, write_exit_record, ContainerPaths,
    ShimError,
};
use crate::runtime::protocol::{ShimConfig, ShimState};
use crate::runtime::rootfs;
use crate::runtime::ExitRecord;

/// Marks the container cleaned (nothing but its records remain) and removes its runtime
/// directory. `cleaned` needs no fsync: lost in a power cut, the container is simply found
/// unfinished by the next boot and finished again.
pub(super) fn finish(paths: &ContainerPaths) -> Result<(), ShimError> {
    fs::write(paths.cleaned(), b"").map_err(io_err(&paths.cleaned()))?;
    // A container of the earlier single-directory layout has its records there too.
    if paths.dir == paths.record {
        return Ok(());
    }
    remove_runtime_dir(paths).map_err(io_err(&paths.dir))
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
        finished_at: crate::runtime::now_rfc3339(),
        reason: reason.into(),
        message: None,
    }
}

/// Deletes the libcontainer container (killing anything left in its cgroup), unmounts and
/// removes the rootfs. Best effort: every step is attempted and failures are logged.
pub(super) fn cleanup_container(paths: &ContainerPaths, cfg: &ShimConfig) {
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
            finished_at: crate::runtime::now_rfc3339(),
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

#[cfg(test)]
mod tests {
    use nix::sys::signal::Signal;
    use nix::unistd::Pid;

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
}
