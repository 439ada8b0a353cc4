//! Tearing a pod's sandbox down, in the daemon: its network detached, the pod init stopped,
//! the namespaces, /dev/shm and memory volumes unmounted, then its files; for good (the pod
//! is removed) or its runtime part only (an interrupted or dead sandbox, made again).

use std::fs;
use std::io;

use crate::fsutil;
use crate::network::PodNetwork;
use crate::runtime::rootfs::unmount_if_mounted;
use crate::runtime::sandbox::{io_err, stop_pod_init_at, SandboxDirs, SandboxError, SandboxPaths};

/// Tears a sandbox down for good (the pod is removed): unmounts the pinned namespaces,
/// /dev/shm and memory volumes, then removes both parts. Never recurses into a directory that
/// is still a mount point.
pub fn remove(dirs: &SandboxDirs, uid: &str, net: Option<&PodNetwork>) -> Result<(), SandboxError> {
    let paths = SandboxPaths::new(dirs, uid)?;
    remove_runtime_part(&paths, net)?;
    if !paths.data.exists() {
        return Ok(());
    }
    if let Ok(entries) = fs::read_dir(paths.volumes()) {
        for entry in entries.flatten() {
            unmount_if_mounted(&entry.path())?;
        }
    }
    fsutil::remove_tree_no_mounts(&paths.data).map_err(io_err(&paths.data))
}

/// Tears down the runtime part of a sandbox (namespaces, /dev/shm, /etc files), keeping the
/// pod's data: an interrupted or dead sandbox is made again with the same emptyDir volumes.
pub fn remove_runtime(
    dirs: &SandboxDirs,
    uid: &str,
    net: Option<&PodNetwork>,
) -> Result<(), SandboxError> {
    let paths = SandboxPaths::new(dirs, uid)?;
    remove_runtime_part(&paths, net)
}

/// Detaches the pod's network (DEL of every recorded attachment of the pod; nothing without
/// a record), then tears the runtime part down. A failed DEL leaves everything in place.
pub(super) fn remove_runtime_part(
    paths: &SandboxPaths,
    net: Option<&PodNetwork>,
) -> Result<(), SandboxError> {
    if let (Some(net), Some(uid)) = (net, paths.dir.file_name().and_then(|n| n.to_str())) {
        net.teardown_pod(uid, &paths.network_result())?;
    }
    if !paths.dir.exists() {
        return Ok(());
    }
    // Remove the completion marker first: a crash below leaves a partial sandbox, which the
    // next create or remove, or the next daemon's listing, finishes tearing down.
    match fs::remove_file(paths.info()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(SandboxError::Io {
                path: paths.info(),
                source,
            })
        }
    }
    stop_pod_init_at(paths)?;
    for kind in ["net", "ipc", "uts", "pid", "user"] {
        unmount_if_mounted(&paths.ns(kind))?;
    }
    unmount_if_mounted(&paths.shm())?;
    fsutil::remove_tree_no_mounts(&paths.dir).map_err(io_err(&paths.dir))
}
