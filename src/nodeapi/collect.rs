//! nodeapi::collect: what `/stats/summary`, `/metrics/cadvisor` and `/metrics/resource` read,
//! at request time and read-only: each pod's and running container's cgroup usage through
//! [`crate::api::stats::collect`] (the reads of `podvisor top` and the socket's `/stats`), the
//! node's root cgroup ([`crate::cgroups::CgroupRoot::node_stats`]), podvisor's own cgroups
//! (the pods' parent, the daemon's), the root dir's and image store's filesystems, and the
//! ephemeral storage the eviction manager last measured. CPU usage rates come from the
//! previous sample of the same cgroup ([`CpuRates`]), as the kubelet's CRI stats provider
//! keeps one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::api::stats::{collect as collect_pods, PodStats, StatsSource};
use crate::cgroups::stats::CgroupStats;
use crate::status::{PodView, Snapshot};

/// Samples older than this are forgotten (a cgroup gone, or nobody scraping).
const SAMPLE_MAX_AGE: Duration = Duration::from_secs(600);

/// The previous CPU sample of each cgroup: (when, cumulative µs, when last used).
#[derive(Debug, Default)]
pub struct CpuRates {
    prev: Mutex<HashMap<String, (u64, u64, Instant)>>,
}

impl CpuRates {
    /// CPU use in nanocores (core-nanoseconds per second) of cgroup `key` since its previous
    /// sample; `None` for the first sample. `at_usec` is the sample's wall time.
    pub fn nano_cores(&self, key: &str, at_usec: u64, cpu_usec: u64) -> Option<u64> {
        let now = Instant::now();
        let mut prev = self.prev.lock().unwrap_or_else(|p| p.into_inner());
        if prev.len() > 64 {
            prev.retain(|_, (_, _, seen)| now.saturating_duration_since(*seen) < SAMPLE_MAX_AGE);
        }
        let before = prev.insert(key.to_string(), (at_usec, cpu_usec, now));
        let (t0, c0, _) = before?;
        let dt = at_usec.checked_sub(t0).filter(|d| *d > 0)?;
        let dc = cpu_usec.checked_sub(c0)?;
        Some((u128::from(dc) * 1_000_000_000 / u128::from(dt)) as u64)
    }
}

/// A filesystem's numbers (statvfs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsNumbers {
    pub capacity: u64,
    pub available: u64,
    /// Blocks in use (total minus free), as the kubelet's `usedBytes` of a filesystem.
    pub used: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}

/// statvfs of the filesystem holding `path`.
// The block and inode counts are 32 bits wide on 32-bit ARM: the casts widen there.
#[allow(clippy::unnecessary_cast)]
pub fn fs_numbers(path: &Path) -> Option<FsNumbers> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = st.fragment_size() as u64;
    let blocks = st.blocks() as u64;
    Some(FsNumbers {
        capacity: blocks.saturating_mul(frag),
        available: (st.blocks_available() as u64).saturating_mul(frag),
        used: blocks
            .saturating_sub(st.blocks_free() as u64)
            .saturating_mul(frag),
        inodes: st.files() as u64,
        inodes_free: st.files_free() as u64,
    })
}

/// One of podvisor's own cgroups (the Summary's `systemContainers`).
#[derive(Debug, Clone)]
pub struct SystemCgroup {
    /// `pods` (every pod's cgroup parent) or `kubelet` (the daemon's own cgroup).
    pub name: &'static str,
    pub cgroup: String,
    pub stats: CgroupStats,
}

/// One collection.
#[derive(Debug, Clone)]
pub struct Collected {
    pub at: SystemTime,
    /// `at` in RFC 3339.
    pub time: String,
    pub node: CgroupStats,
    /// The machine's memory (MemTotal), for the node's `availableBytes`.
    pub machine_memory: Option<u64>,
    /// When the node booted (RFC 3339).
    pub boot_time: Option<String>,
    pub system: Vec<SystemCgroup>,
    pub pods: Vec<PodStats>,
    /// The root dir's filesystem (nodefs) and the image store's (imagefs).
    pub nodefs: Option<FsNumbers>,
    pub imagefs: Option<FsNumbers>,
    /// Bytes of the images in the store.
    pub images_bytes: Option<u64>,
    /// Something could not be read (the metrics' `scrape_error`).
    pub error: bool,
}

impl Collected {
    /// The wall time in microseconds since the epoch.
    pub fn at_usec(&self) -> u64 {
        self.at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    /// The snapshot's view of a collected pod.
    pub fn view<'a>(snap: &'a Snapshot, p: &PodStats) -> Option<&'a PodView> {
        snap.pods
            .iter()
            .find(|v| v.pod.metadata.uid.as_deref() == Some(p.uid.as_str()))
    }
}

/// The daemon's own cgroup (`0::/system.slice/podvisor.service` in /proc/self/cgroup; the
/// memory hierarchy's on v1).
fn own_cgroup() -> Option<String> {
    let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    crate::cgroups::process_cgroup_path(&text, "")
        .or_else(|| crate::cgroups::process_cgroup_path(&text, "memory"))
        .map(str::to_string)
}

/// The boot time from /proc/stat's `btime`.
fn boot_time() -> Option<SystemTime> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs))
}

/// Collects everything, now.
pub fn collect(snap: &Snapshot, src: &StatsSource, root_dir: &Path) -> Collected {
    let at = SystemTime::now();
    let mut error = false;
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let node = match src.root.node_stats(&meminfo) {
        Ok(s) => s,
        Err(e) => {
            log::debug!("node api: node stats: {e}");
            error = true;
            CgroupStats::default()
        }
    };
    let mut system = Vec::new();
    let parent = format!("/{}", src.parent.trim_start_matches('/'));
    let mut own = |name: &'static str, cgroup: String| match src.root.stats(&cgroup) {
        Ok(Some(stats)) => system.push(SystemCgroup {
            name,
            cgroup,
            stats,
        }),
        Ok(None) => {}
        Err(e) => log::debug!("node api: stats of {cgroup}: {e}"),
    };
    own("pods", parent);
    if let Some(c) = own_cgroup() {
        own("kubelet", c);
    }
    let pods = match collect_pods(snap, None, src) {
        Ok(p) => p,
        Err(e) => {
            log::debug!("node api: pod stats: {e}");
            error = true;
            Vec::new()
        }
    };
    let images_dir = src
        .node
        .images_dir
        .clone()
        .unwrap_or_else(|| root_dir.join("images"));
    let images_bytes = crate::images::ImageStore::open_as_is(&images_dir)
        .ok()
        .and_then(|s| s.list().ok())
        .map(|refs| {
            let mut by_digest: HashMap<String, u64> = HashMap::new();
            for r in refs {
                by_digest.insert(r.digest, r.size);
            }
            by_digest.values().sum()
        });
    Collected {
        at,
        time: crate::logs::timestamp::format_timestamp(at),
        node,
        machine_memory: crate::cgroups::allocatable::parse_mem_total(&meminfo),
        boot_time: boot_time().map(crate::logs::timestamp::format_timestamp),
        system,
        pods,
        nodefs: fs_numbers(root_dir),
        imagefs: fs_numbers(&images_dir).or_else(|| fs_numbers(root_dir)),
        images_bytes,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_rates_from_the_previous_sample() {
        let r = CpuRates::default();
        assert_eq!(r.nano_cores("/a", 1_000_000, 500_000), None);
        // 0.25 s of CPU in 1 s: a quarter of a core.
        assert_eq!(r.nano_cores("/a", 2_000_000, 750_000), Some(250_000_000));
        // A counter that went backwards (a new cgroup of the same name): no rate.
        assert_eq!(r.nano_cores("/a", 3_000_000, 10), None);
        assert_eq!(r.nano_cores("/a", 3_000_000, 20), None, "no time passed");
        assert_eq!(r.nano_cores("/b", 3_000_000, 20), None);
    }

    #[test]
    fn filesystems_and_own_cgroup() {
        let fs = fs_numbers(Path::new("/")).expect("statvfs /");
        assert!(fs.capacity >= fs.available && fs.capacity >= fs.used);
        assert!(own_cgroup().is_some_and(|c| c.starts_with('/')));
        assert!(boot_time().is_some());
    }
}
