//! container: a container's files, which the daemon, the monitor and the exec helper all read:
//! its two directories ([`ContainerPaths`]), the JSON files in them, the durable identity and
//! exit record, the monitor's lock, and the errors of reading them ([`ShimError`], which are
//! also the monitor's own).
//!
//! A container has two directories: its runtime directory (`<runtime-dir>/containers/<id>`:
//! bundle, libcontainer state, rootfs mount point, monitor state and lock), which exists only
//! while something of the container lives and is gone with the boot; and its record directory
//! (`<root-dir>/containers/<id>`: identity, exit record, the writable layer), which outlives a
//! reboot so restart counts and `logs --previous` do.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::protocol::ShimConfig;
use super::rootfs::{self, RootfsPaths};
use super::ExitRecord;
use crate::fsutil;

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

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ShimError + '_ {
    move |source| ShimError::Io {
        path: path.to_path_buf(),
        source,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
