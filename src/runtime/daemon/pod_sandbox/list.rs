//! Listing pod sandboxes, in the daemon: the runtime dir's sandboxes sorted into live,
//! partial and dead ones, and the pods with data under the root dir.

use std::fs;
use std::io;

use crate::runtime::sandbox::{
    check_live, load, validate_uid, NotLive, SandboxDirs, SandboxError, SandboxPaths,
};
use crate::runtime::SandboxInfo;

/// What [`scan`] found in the runtime dir.
#[derive(Debug, Default)]
pub struct SandboxScan {
    /// Complete and live sandboxes, by uid.
    pub live: Vec<SandboxInfo>,
    /// Pod directories without a record (a creation or removal interrupted by a crash), with
    /// their namespaces, /dev/shm and memory volumes possibly still mounted.
    pub partial: Vec<String>,
    /// Complete sandboxes that are not live: (uid, why).
    pub dead: Vec<(String, NotLive)>,
}

/// Sorts the sandboxes of the runtime dir into live, partial and dead ones.
pub fn scan(dirs: &SandboxDirs) -> Result<SandboxScan, SandboxError> {
    let mut out = SandboxScan::default();
    let entries = match fs::read_dir(&dirs.run) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(SandboxError::Io {
                path: dirs.run.clone(),
                source,
            })
        }
    };
    for entry in entries.flatten() {
        let uid = entry.file_name().to_string_lossy().into_owned();
        let Ok(paths) = SandboxPaths::new(dirs, &uid) else {
            continue;
        };
        if !paths.dir.is_dir() {
            continue;
        }
        match load(&paths)? {
            None => out.partial.push(uid),
            Some(info) => match check_live(&paths, info.host_network) {
                Ok(()) => out.live.push(info),
                Err(why) => out.dead.push((uid, why)),
            },
        }
    }
    out.live.sort_by(|a, b| a.pod_uid.cmp(&b.pod_uid));
    out.partial.sort();
    out.dead.sort();
    Ok(out)
}

/// Pods with data under the root dir (emptyDir volumes), live sandbox or not: after a reboot
/// these are the pods that ran before it.
pub fn list_data(dirs: &SandboxDirs) -> Result<Vec<String>, SandboxError> {
    let entries = match fs::read_dir(&dirs.data) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(SandboxError::Io {
                path: dirs.data.clone(),
                source,
            })
        }
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|u| validate_uid(u).is_ok())
        .collect();
    out.sort();
    Ok(out)
}
