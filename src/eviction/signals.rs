//! eviction::signals: measuring the eviction signals on this node, behind [`SignalSource`]
//! (tests use a fake), the way the kubelet (through cadvisor) measures them:
//!
//! | signal | available | capacity |
//! |---|---|---|
//! | memory.available | capacity − working set; working set = usage − inactive_file of the root memory cgroup (v1: `memory.usage_in_bytes`, `total_inactive_file`; v2: MemTotal − MemFree, the root `memory.stat` `inactive_file`) | MemTotal |
//! | nodefs.available / inodesFree | statvfs of the root dir and the log dir (the fuller one) | the same filesystem |
//! | imagefs.available / inodesFree | statvfs of the image store (equal to nodefs on one device) | the same filesystem |
//! | pid.available | limit − tasks (the total of /proc/loadavg) | min(`pid_max`, `threads-max`) |
//!
//! For a disk signal no eviction can relieve, it also says what uses the filesystem
//! ([`SignalSource::top_dirs`], the walk of [`super::topdirs`]).

use std::fs;
use std::path::{Path, PathBuf};

use super::decisions::{Observation, Observations};
use super::threshold::Signal;
use crate::cgroups::allocatable::parse_mem_total;

/// Where the manager reads the signals (a seam for tests).
pub trait SignalSource: Send {
    fn observe(&self) -> Observations;

    /// What uses the filesystem of a disk `signal` outside podvisor's dirs, walked at a
    /// bounded cost; `None` for other signals or where the source cannot tell.
    fn top_dirs(&self, _signal: Signal) -> Option<super::topdirs::TopDirs> {
        None
    }
}

/// Entries the walk behind [`SignalSource::top_dirs`] visits at most.
const TOP_DIRS_ENTRIES: usize = 100_000;
/// How long that walk may take.
const TOP_DIRS_TIME: std::time::Duration = std::time::Duration::from_secs(2);
/// How many entries it names.
const TOP_DIRS_COUNT: usize = 5;

/// The node's own signals.
#[derive(Debug, Clone)]
pub struct NodeSignals {
    /// Usually /proc.
    pub proc_dir: PathBuf,
    /// The cgroup mount (/sys/fs/cgroup).
    pub cgroup_dir: PathBuf,
    /// The root dir and the log dir.
    pub nodefs: Vec<PathBuf>,
    /// The image store.
    pub imagefs: PathBuf,
}

fn meminfo_value(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

fn flat_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// memory.available from the files' contents: `meminfo`, the root memory cgroup's
/// `memory.stat` and, on v1, its `memory.usage_in_bytes`.
pub fn memory_available(
    meminfo: &str,
    memory_stat: &str,
    v1_usage: Option<u64>,
) -> Option<Observation> {
    let capacity = parse_mem_total(meminfo)?;
    let (usage, inactive) = match v1_usage {
        Some(u) => (
            u,
            flat_keyed(memory_stat, "total_inactive_file").unwrap_or(0),
        ),
        None => (
            capacity.saturating_sub(meminfo_value(meminfo, "MemFree:")?),
            flat_keyed(memory_stat, "inactive_file").unwrap_or(0),
        ),
    };
    let working_set = usage.saturating_sub(inactive);
    Some(Observation {
        available: capacity.saturating_sub(working_set),
        capacity,
    })
}

/// pid.available from `pid_max`, `threads-max` and /proc/loadavg ("0.00 0.01 0.05 1/123 456").
pub fn pid_available(pid_max: &str, threads_max: &str, loadavg: &str) -> Option<Observation> {
    let max: u64 = pid_max.trim().parse().ok()?;
    let limit = threads_max
        .trim()
        .parse::<u64>()
        .map_or(max, |t| t.min(max));
    let tasks: u64 = loadavg
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()?;
    Some(Observation {
        available: limit.saturating_sub(tasks),
        capacity: limit,
    })
}

/// (space, inodes) of the filesystem holding `path`.
// The block and inode counts are 32 bits wide on 32-bit ARM: the casts widen there.
#[allow(clippy::unnecessary_cast)]
pub fn fs_observations(path: &Path) -> Option<(Observation, Observation)> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = st.fragment_size() as u64;
    Some((
        Observation {
            available: (st.blocks_available() as u64).saturating_mul(frag),
            capacity: (st.blocks() as u64).saturating_mul(frag),
        },
        Observation {
            available: st.files_available() as u64,
            capacity: st.files() as u64,
        },
    ))
}

/// The fuller of two observations (lower share available).
fn fuller(a: Observation, b: Observation) -> Observation {
    let share = |o: Observation| {
        if o.capacity == 0 {
            u128::MAX
        } else {
            u128::from(o.available) * 1_000_000 / u128::from(o.capacity)
        }
    };
    if share(b) < share(a) {
        b
    } else {
        a
    }
}

impl SignalSource for NodeSignals {
    fn top_dirs(&self, signal: Signal) -> Option<super::topdirs::TopDirs> {
        let by_inodes = matches!(signal, Signal::NodeFsInodesFree | Signal::ImageFsInodesFree);
        let of = match signal {
            // The filesystem the signal was read from: the fuller of the root and log dirs'.
            Signal::NodeFsAvailable | Signal::NodeFsInodesFree => {
                self.nodefs
                    .iter()
                    .filter_map(|p| {
                        let (space, inodes) = fs_observations(p)?;
                        Some((p, if by_inodes { inodes } else { space }))
                    })
                    .reduce(|a, b| if fuller(a.1, b.1) == b.1 { b } else { a })?
                    .0
            }
            Signal::ImageFsAvailable | Signal::ImageFsInodesFree => &self.imagefs,
            Signal::MemoryAvailable | Signal::PidAvailable => return None,
        };
        let root = super::topdirs::mount_root(of)?;
        let skip: Vec<PathBuf> = self
            .nodefs
            .iter()
            .chain(std::iter::once(&self.imagefs))
            .filter_map(|p| fs::canonicalize(p).ok())
            .collect();
        Some(super::topdirs::top_dirs(
            &root,
            &skip,
            TOP_DIRS_COUNT,
            by_inodes,
            TOP_DIRS_ENTRIES,
            std::time::Instant::now() + TOP_DIRS_TIME,
        ))
    }

    fn observe(&self) -> Observations {
        let mut obs = Observations::new();
        let read = |p: PathBuf| fs::read_to_string(p).ok();
        if let Some(meminfo) = read(self.proc_dir.join("meminfo")) {
            let v1 = self.cgroup_dir.join("memory");
            let (stat, usage) = if v1.join("memory.usage_in_bytes").exists() {
                (
                    read(v1.join("memory.stat")),
                    read(v1.join("memory.usage_in_bytes")).and_then(|t| t.trim().parse().ok()),
                )
            } else {
                (read(self.cgroup_dir.join("memory.stat")), None)
            };
            if let Some(o) = memory_available(&meminfo, stat.as_deref().unwrap_or(""), usage) {
                obs.insert(Signal::MemoryAvailable, o);
            }
        }
        let mut node: Option<(Observation, Observation)> = None;
        for p in &self.nodefs {
            if let Some((space, inodes)) = fs_observations(p) {
                node = Some(match node {
                    None => (space, inodes),
                    Some((s, i)) => (fuller(s, space), fuller(i, inodes)),
                });
            }
        }
        if let Some((space, inodes)) = node {
            obs.insert(Signal::NodeFsAvailable, space);
            // A filesystem without inode accounting (capacity 0) is not an inode signal.
            if inodes.capacity > 0 {
                obs.insert(Signal::NodeFsInodesFree, inodes);
            }
        }
        if let Some((space, inodes)) = fs_observations(&self.imagefs) {
            obs.insert(Signal::ImageFsAvailable, space);
            if inodes.capacity > 0 {
                obs.insert(Signal::ImageFsInodesFree, inodes);
            }
        }
        let sys = self.proc_dir.join("sys/kernel");
        if let (Some(pm), Some(la)) = (
            read(sys.join("pid_max")),
            read(self.proc_dir.join("loadavg")),
        ) {
            let tm = read(sys.join("threads-max")).unwrap_or_default();
            if let Some(o) = pid_available(&pm, &tm, &la) {
                obs.insert(Signal::PidAvailable, o);
            }
        }
        obs
    }
}
