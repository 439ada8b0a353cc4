//! cgroups: where podvisor's pods and containers live in the cgroup tree, the values podvisor
//! writes there itself, and the cgroup files it reads (OOM kills, stats).
//!
//! libcontainer creates and deletes each container's own cgroup (from `linux.cgroupsPath`);
//! this module owns everything around it, in the kubelet's cgroupfs shape:
//! - the layout ([`layout`]): `/<parent>` with the QoS tiers `/<parent>/burstable` and
//!   `/<parent>/besteffort`; Guaranteed pods at `/<parent>/pod<uid>`, the others at
//!   `/<parent>/<tier>/pod<uid>`; each container at `<pod cgroup>/<container-id>` (the same
//!   relative path in every v1 hierarchy, or once in the unified v2 tree),
//! - creating the tiers and the pod cgroup with the pod-level limits, enabling controllers
//!   top-down on v2, and removing the pod cgroup when the pod goes (the tiers stay for the
//!   node's life, as the kubelet's QoS cgroups do) ([`hierarchy`]),
//! - the kubelet's conversions and pod-level resource arithmetic ([`resources`]),
//! - the OOM-kill counter and usage statistics of a cgroup ([`stats`]),
//! - node allocatable and pod admission ([`allocatable`]),
//! - starting the kernel's cgroup attach lock's grace period ahead of a container placement
//!   ([`warm`]),
//! - the same tree as systemd slices and scopes with `cgroupDriver: systemd` ([`systemd`],
//!   [`dbus`] for the D-Bus calls).
//!
//! The cgroup filesystem root is always a parameter ([`CgroupRoot`]) so tests can point it at a
//! fixture directory.

pub mod allocatable;
pub mod hierarchy;
pub mod layout;
pub mod resources;
pub mod stats;
pub mod systemd;
pub mod warm;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

pub use layout::{container_cgroup, pod_cgroup, pod_cgroup_candidates, qos_cgroup, CgroupDriver};

/// Errors of the cgroups module.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("failed to read cgroup file {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("failed to write {value:?} to cgroup file {path}: {source}")]
    Write {
        path: PathBuf,
        value: String,
        source: io::Error,
    },
    #[error("failed to create cgroup {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("failed to remove cgroup {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },
    #[error("cgroup file {path} has no {key} entry")]
    MissingKey { path: PathBuf, key: &'static str },
    #[error("cgroup file {path}: {value:?} is not a number")]
    Malformed { path: PathBuf, value: String },
    #[error("invalid cgroup name {name:?}: must be a single path component")]
    InvalidName { name: String },
    #[error(transparent)]
    Systemd(Box<systemd::SystemdError>),
}

/// Which cgroup hierarchy layout the host uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupMode {
    /// Pure cgroup v2: one unified tree with `cgroup.controllers` at its root.
    Unified,
    /// cgroup v1 controllers (with or without a v2 mount under `unified`).
    Legacy,
}

/// A cgroup filesystem root (normally `/sys/fs/cgroup`).
#[derive(Debug, Clone)]
pub struct CgroupRoot {
    root: PathBuf,
    /// The layout, found on first use: it is fixed at boot, and every path below the root
    /// depends on it (one `statx` fewer per cgroup file podvisor touches).
    mode: std::sync::OnceLock<CgroupMode>,
    /// v1: which of the hierarchies pod cgroups are made in are mounted, found on first use
    /// (as fixed as the layout; [`hierarchy`]).
    v1_mounted: std::sync::OnceLock<Vec<&'static str>>,
}

impl Default for CgroupRoot {
    fn default() -> Self {
        CgroupRoot::new("/sys/fs/cgroup")
    }
}

impl CgroupRoot {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        CgroupRoot {
            root: root.into(),
            mode: std::sync::OnceLock::new(),
            v1_mounted: std::sync::OnceLock::new(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Detects the layout: a `cgroup.controllers` file at the root means cgroup v2. Asked
    /// once per `CgroupRoot`.
    pub fn mode(&self) -> CgroupMode {
        *self.mode.get_or_init(|| {
            if self.root.join("cgroup.controllers").exists() {
                CgroupMode::Unified
            } else {
                CgroupMode::Legacy
            }
        })
    }

    /// The directory of `relative` in the unified tree (v2) or in the v1 hierarchy named
    /// `controller` (`cpu`, `memory`, `pids`, `cpuacct`).
    pub fn dir(&self, controller: &str, relative: &str) -> PathBuf {
        let rel = relative.trim_start_matches('/');
        match self.mode() {
            CgroupMode::Unified => self.root.join(rel),
            CgroupMode::Legacy => self.root.join(controller).join(rel),
        }
    }

    /// The directories a relative cgroup path maps to: one on v2, one per v1 hierarchy.
    pub fn dirs_for(&self, relative: &str) -> Vec<PathBuf> {
        let rel = relative.trim_start_matches('/');
        match self.mode() {
            CgroupMode::Unified => vec![self.root.join(rel)],
            CgroupMode::Legacy => {
                let mut dirs = Vec::new();
                if let Ok(entries) = fs::read_dir(&self.root) {
                    for entry in entries.flatten() {
                        let name = entry.file_name();
                        // The v2 mount of a hybrid host holds no podvisor cgroups.
                        if name == "unified" {
                            continue;
                        }
                        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                        if is_dir {
                            dirs.push(entry.path().join(rel));
                        }
                    }
                }
                dirs.sort();
                dirs
            }
        }
    }

    /// Number of OOM kills recorded for the cgroup at `relative` (0 when the file is absent,
    /// e.g. when the memory controller is not enabled for it).
    pub fn oom_kill_count(&self, relative: &str) -> Result<u64, CgroupError> {
        let path = self
            .dir("memory", relative)
            .join(oom_events_file(self.mode()));
        let Some(text) = read_optional(&path)? else {
            return Ok(0);
        };
        parse_flat_keyed(&text, "oom_kill").ok_or(CgroupError::MissingKey {
            path,
            key: "oom_kill",
        })
    }

    /// Removes the cgroup directories of `relative` in every hierarchy, deepest first.
    /// Missing directories are fine; a directory that still holds processes is an error.
    pub fn remove(&self, relative: &str) -> Result<(), CgroupError> {
        for dir in self.dirs_for(relative) {
            remove_tree(&dir)?;
        }
        Ok(())
    }
}

/// Reads a cgroup file; `None` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, CgroupError> {
    match fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(CgroupError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Checks that a cgroup parent name is usable (no `..`, not empty).
pub fn validate_parent(parent: &str) -> Result<(), CgroupError> {
    let trimmed = parent.trim_matches('/');
    if trimmed.is_empty()
        || trimmed
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return Err(CgroupError::InvalidName {
            name: parent.to_string(),
        });
    }
    Ok(())
}

fn remove_tree(dir: &Path) -> Result<(), CgroupError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(CgroupError::Remove {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    for entry in entries.flatten() {
        if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_tree(&entry.path())?;
        }
    }
    match fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(CgroupError::Remove {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Reads `key value` lines (memory.events, memory.oom_control, cpu.stat, memory.stat).
pub(crate) fn parse_flat_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some(k), Some(v)) if k == key => v.parse().ok(),
            _ => None,
        }
    })
}

/// The path (`/system.slice/podvisor.service`) that `proc_cgroup`, the contents of a
/// `/proc/<pid>/cgroup` file, gives for `controller`'s v1 hierarchy, or with `""` for the
/// unified one (the `0::` line). `None` when the process is in no such hierarchy.
pub fn process_cgroup_path<'a>(proc_cgroup: &'a str, controller: &str) -> Option<&'a str> {
    proc_cgroup.lines().find_map(|l| {
        let mut f = l.splitn(3, ':');
        let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
        let found = if controller.is_empty() {
            controllers.is_empty()
        } else {
            controllers.split(',').any(|c| c == controller)
        };
        found.then_some(path)
    })
}

/// The file holding a cgroup's `oom_kill` counter.
pub(crate) fn oom_events_file(mode: CgroupMode) -> &'static str {
    match mode {
        CgroupMode::Unified => "memory.events",
        CgroupMode::Legacy => "memory.oom_control",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pod::qos::QosClass;

    #[test]
    fn a_process_cgroup_path_is_read_per_hierarchy() {
        let hybrid = "12:pids:/system.slice/podvisor.service\n11:cpu,cpuacct:/x\n1:name=systemd:/y\n0::/system.slice/podvisor.service\n";
        assert_eq!(
            process_cgroup_path(hybrid, "pids"),
            Some("/system.slice/podvisor.service")
        );
        assert_eq!(process_cgroup_path(hybrid, "cpuacct"), Some("/x"));
        assert_eq!(
            process_cgroup_path(hybrid, ""),
            Some("/system.slice/podvisor.service")
        );
        assert_eq!(process_cgroup_path(hybrid, "memory"), None);
        assert_eq!(process_cgroup_path("3:pids:/a\n", ""), None);
    }

    #[test]
    fn oom_kill_count_v2_reads_memory_events() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("cgroup.controllers"), "cpu memory pids\n").expect("write");
        let c = dir.path().join("podvisor/podabc/c1");
        fs::create_dir_all(&c).expect("mkdir");
        fs::write(
            c.join("memory.events"),
            "low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\noom_group_kill 0\n",
        )
        .expect("write");
        let root = CgroupRoot::new(dir.path());
        assert_eq!(root.mode(), CgroupMode::Unified);
        assert_eq!(
            root.oom_kill_count(&container_cgroup(
                "podvisor",
                QosClass::Guaranteed,
                "abc",
                "c1"
            ))
            .expect("count"),
            1
        );
        assert_eq!(root.oom_kill_count("/podvisor/missing").expect("count"), 0);
    }

    #[test]
    fn oom_kill_count_v1_reads_oom_control() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = dir.path().join("memory/podvisor/podabc/c1");
        fs::create_dir_all(&c).expect("mkdir");
        fs::write(
            c.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .expect("write");
        let root = CgroupRoot::new(dir.path());
        assert_eq!(root.mode(), CgroupMode::Legacy);
        assert_eq!(
            root.oom_kill_count("/podvisor/podabc/c1").expect("count"),
            2
        );
    }

    #[test]
    fn oom_control_without_counter_is_an_error_naming_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let c = dir.path().join("memory/p");
        fs::create_dir_all(&c).expect("mkdir");
        fs::write(c.join("memory.oom_control"), "oom_kill_disable 0\n").expect("write");
        let err = CgroupRoot::new(dir.path())
            .oom_kill_count("/p")
            .expect_err("must fail");
        assert!(err.to_string().contains("memory.oom_control"), "{err}");
    }

    #[test]
    fn remove_deletes_pod_dirs_in_every_v1_hierarchy_but_not_unified() {
        let dir = tempfile::tempdir().expect("tempdir");
        for h in ["cpu", "memory", "pids", "unified"] {
            fs::create_dir_all(dir.path().join(h).join("podvisor/podu1/c1")).expect("mkdir");
        }
        let root = CgroupRoot::new(dir.path());
        root.remove(&pod_cgroup("podvisor", QosClass::Guaranteed, "u1"))
            .expect("remove");
        for h in ["cpu", "memory", "pids"] {
            assert!(!dir.path().join(h).join("podvisor/podu1").exists(), "{h}");
            assert!(dir.path().join(h).join("podvisor").exists(), "{h}");
        }
        assert!(dir.path().join("unified/podvisor/podu1").exists());
    }

    #[test]
    fn parent_names_are_validated() {
        assert!(validate_parent("podvisor").is_ok());
        assert!(validate_parent("/a/b/").is_ok());
        assert!(validate_parent("a/../b").is_err());
        assert!(validate_parent("").is_err());
    }
}
