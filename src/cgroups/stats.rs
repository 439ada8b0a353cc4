//! stats: usage counters of one cgroup, read the way the kubelet (through cadvisor) reads them.
//!
//! | value | cgroup v2 | cgroup v1 |
//! |---|---|---|
//! | CPU time | `cpu.stat` `usage_usec` | `cpuacct/…/cpuacct.usage` (ns / 1000) |
//! | memory usage | `memory.current` | `memory/…/memory.usage_in_bytes` |
//! | working set | usage − `memory.stat` `inactive_file`, floored at 0 | usage − `total_inactive_file` |
//! | RSS | `memory.stat` `anon` | `memory.stat` `total_rss` |
//! | pids | `pids.current` | `pids/…/pids.current` |
//! | OOM kills | `memory.events` `oom_kill` | `memory.oom_control` `oom_kill` |
//! | user/system CPU | `cpu.stat` `user_usec`, `system_usec` | `cpuacct.stat` (USER_HZ ticks) |
//! | CFS throttling | `cpu.stat` `nr_periods`, `nr_throttled`, `throttled_usec` | `cpu/…/cpu.stat` |
//! | cache, page faults | `memory.stat` `file`, `pgfault`, `pgmajfault` | `total_cache`, `total_pgfault`, `total_pgmajfault` |
//! | memory limit | `memory.max` | `memory.limit_in_bytes` |
//!
//! The root cgroup ([`CgroupRoot::node_stats`]) has no `memory.current` on v2: its usage is
//! MemTotal − MemFree from /proc/meminfo, as cadvisor computes the node's.
//!
//! A value whose file is absent (controller not enabled there) is `None`.

use serde::{Deserialize, Serialize};

use std::path::PathBuf;

use super::{parse_flat_keyed, read_optional, CgroupError, CgroupMode, CgroupRoot};

/// Usage of one cgroup at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupStats {
    /// Cumulative CPU time in microseconds.
    pub cpu_usage_usec: Option<u64>,
    /// Memory charged to the cgroup, page cache included.
    pub memory_usage_bytes: Option<u64>,
    /// Usage minus inactive file pages: what the kubelet shows and evicts on.
    pub memory_working_set_bytes: Option<u64>,
    /// Anonymous memory.
    pub memory_rss_bytes: Option<u64>,
    pub pids_current: Option<u64>,
    pub oom_kills: Option<u64>,
    /// User and system CPU time in microseconds (v2 `cpu.stat`; v1 `cpuacct.stat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_usec: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_system_usec: Option<u64>,
    /// CFS bandwidth: enforcement periods, throttled periods, throttled time (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_periods: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_throttled_periods: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_throttled_usec: Option<u64>,
    /// Page cache (`file`; v1 `total_cache`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_cache_bytes: Option<u64>,
    /// Cumulative minor and major page faults (`memory.stat` `pgfault`, `pgmajfault`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
    /// The memory limit (`memory.max`; v1 `memory.limit_in_bytes`); `None` when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
}

fn number(path: &std::path::Path, text: &str) -> Result<u64, CgroupError> {
    text.trim().parse().map_err(|_| CgroupError::Malformed {
        path: path.to_path_buf(),
        value: text.trim().to_string(),
    })
}

/// A v1 "no limit" (`memory.limit_in_bytes` is a page-rounded `LONG_MAX` then).
const V1_UNLIMITED: u64 = 1 << 62;

/// `USER_HZ`: the unit of v1's `cpuacct.stat` (100 on every Linux architecture podvisor
/// builds for).
const USER_HZ: u64 = 100;

impl CgroupRoot {
    fn read_number(
        &self,
        controller: &str,
        relative: &str,
        file: &str,
    ) -> Result<Option<u64>, CgroupError> {
        let path = self.dir(controller, relative).join(file);
        read_optional(&path)?.map(|t| number(&path, &t)).transpose()
    }

    fn read_keyed(
        &self,
        controller: &str,
        relative: &str,
        file: &str,
        key: &'static str,
    ) -> Result<Option<u64>, CgroupError> {
        let path = self.dir(controller, relative).join(file);
        match read_optional(&path)? {
            None => Ok(None),
            Some(t) => parse_flat_keyed(&t, key)
                .map(Some)
                .ok_or(CgroupError::MissingKey { path, key }),
        }
    }

    /// Whether the cgroup at `relative` exists (in the memory hierarchy on v1).
    pub fn exists(&self, relative: &str) -> bool {
        self.dir("memory", relative).is_dir()
    }

    /// Reads the usage of the cgroup at `relative`; `None` when the cgroup does not exist.
    pub fn stats(&self, relative: &str) -> Result<Option<CgroupStats>, CgroupError> {
        self.stats_with(relative, None)
    }

    /// The node's usage: the root cgroup, with memory usage from `meminfo` (the text of
    /// /proc/meminfo) where the root has no usage file (v2: MemTotal − MemFree, as cadvisor
    /// and the eviction manager compute it).
    pub fn node_stats(&self, meminfo: &str) -> Result<CgroupStats, CgroupError> {
        Ok(self.stats_with("", Some(meminfo))?.unwrap_or_default())
    }

    fn stats_with(
        &self,
        relative: &str,
        meminfo: Option<&str>,
    ) -> Result<Option<CgroupStats>, CgroupError> {
        if !self.exists(relative) {
            return Ok(None);
        }
        let mode = self.mode();
        let mut s = CgroupStats::default();
        let keyed = |path: PathBuf| -> Result<Option<(String, PathBuf)>, CgroupError> {
            Ok(read_optional(&path)?.map(|t| (t, path)))
        };
        let (stat_keys, usage, limit) = match mode {
            CgroupMode::Unified => {
                if let Some((t, _)) = keyed(self.dir("cpu", relative).join("cpu.stat"))? {
                    let k = |key| parse_flat_keyed(&t, key);
                    s.cpu_usage_usec = k("usage_usec");
                    s.cpu_user_usec = k("user_usec");
                    s.cpu_system_usec = k("system_usec");
                    s.cpu_periods = k("nr_periods");
                    s.cpu_throttled_periods = k("nr_throttled");
                    s.cpu_throttled_usec = k("throttled_usec");
                }
                let limit = read_optional(&self.dir("memory", relative).join("memory.max"))?
                    .and_then(|t| t.trim().parse::<u64>().ok());
                (
                    ["inactive_file", "anon", "file", "pgfault", "pgmajfault"],
                    self.read_number("memory", relative, "memory.current")?,
                    limit,
                )
            }
            CgroupMode::Legacy => {
                s.cpu_usage_usec = self
                    .read_number("cpuacct", relative, "cpuacct.usage")?
                    .map(|ns| ns / 1000);
                if let Some((t, _)) = keyed(self.dir("cpuacct", relative).join("cpuacct.stat"))? {
                    let ticks = |key| parse_flat_keyed(&t, key).map(|v| v * 1_000_000 / USER_HZ);
                    s.cpu_user_usec = ticks("user");
                    s.cpu_system_usec = ticks("system");
                }
                if let Some((t, _)) = keyed(self.dir("cpu", relative).join("cpu.stat"))? {
                    s.cpu_periods = parse_flat_keyed(&t, "nr_periods");
                    s.cpu_throttled_periods = parse_flat_keyed(&t, "nr_throttled");
                    s.cpu_throttled_usec =
                        parse_flat_keyed(&t, "throttled_time").map(|ns| ns / 1000);
                }
                let limit = self
                    .read_number("memory", relative, "memory.limit_in_bytes")?
                    .filter(|l| *l < V1_UNLIMITED);
                (
                    [
                        "total_inactive_file",
                        "total_rss",
                        "total_cache",
                        "total_pgfault",
                        "total_pgmajfault",
                    ],
                    self.read_number("memory", relative, "memory.usage_in_bytes")?,
                    limit,
                )
            }
        };
        s.memory_limit_bytes = limit;
        // Every memory.stat key from one read.
        let mut inactive = None;
        if let Some((t, path)) = keyed(self.dir("memory", relative).join("memory.stat"))? {
            let key = |key: &'static str| {
                parse_flat_keyed(&t, key).ok_or_else(|| CgroupError::MissingKey {
                    path: path.clone(),
                    key,
                })
            };
            inactive = Some(key(stat_keys[0])?);
            s.memory_rss_bytes = Some(key(stat_keys[1])?);
            s.memory_cache_bytes = parse_flat_keyed(&t, stat_keys[2]);
            s.page_faults = parse_flat_keyed(&t, stat_keys[3]);
            s.major_page_faults = parse_flat_keyed(&t, stat_keys[4]);
        }
        s.memory_usage_bytes = usage.or_else(|| {
            let m = meminfo?;
            let total = meminfo_bytes(m, "MemTotal:")?;
            Some(total.saturating_sub(meminfo_bytes(m, "MemFree:")?))
        });
        s.memory_working_set_bytes = s
            .memory_usage_bytes
            .map(|u| u.saturating_sub(inactive.unwrap_or(0)));
        s.pids_current = self.read_number("pids", relative, "pids.current")?;
        s.oom_kills =
            self.read_keyed("memory", relative, super::oom_events_file(mode), "oom_kill")?;
        Ok(Some(s))
    }
}

/// A `/proc/meminfo` value in bytes (`MemFree:     123 kB`).
fn meminfo_bytes(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?
        .checked_mul(1024)
}

/// CPU use in millicores between two samples of cumulative CPU time `elapsed_usec` apart
/// (what `kubectl top` shows).
pub fn millicores(before_usec: u64, after_usec: u64, elapsed_usec: u64) -> u64 {
    if elapsed_usec == 0 {
        return 0;
    }
    after_usec.saturating_sub(before_usec).saturating_mul(1000) / elapsed_usec
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn v2_stats_with_working_set_floored_at_zero() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        fs::write(r.join("cgroup.controllers"), "cpu memory pids\n").expect("write");
        let c = r.join("pv/podu/c1");
        fs::create_dir_all(&c).expect("mkdir");
        fs::write(
            c.join("cpu.stat"),
            "usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\nnr_periods 10\nnr_throttled 2\nthrottled_usec 7000\n",
        )
        .expect("w");
        fs::write(c.join("memory.current"), "10485760\n").expect("w");
        fs::write(
            c.join("memory.stat"),
            "anon 4194304\nfile 6291456\ninactive_file 2097152\nactive_file 4194304\npgfault 99\npgmajfault 2\n",
        )
        .expect("w");
        fs::write(c.join("memory.max"), "67108864\n").expect("w");
        fs::write(c.join("pids.current"), "3\n").expect("w");
        fs::write(c.join("memory.events"), "low 0\noom 1\noom_kill 1\n").expect("w");
        let root = CgroupRoot::new(r);
        let s = root.stats("/pv/podu/c1").expect("stats").expect("exists");
        assert_eq!(
            s,
            CgroupStats {
                cpu_usage_usec: Some(1_500_000),
                memory_usage_bytes: Some(10 << 20),
                memory_working_set_bytes: Some(8 << 20),
                memory_rss_bytes: Some(4 << 20),
                pids_current: Some(3),
                oom_kills: Some(1),
                cpu_user_usec: Some(1_000_000),
                cpu_system_usec: Some(500_000),
                cpu_periods: Some(10),
                cpu_throttled_periods: Some(2),
                cpu_throttled_usec: Some(7000),
                memory_cache_bytes: Some(6 << 20),
                page_faults: Some(99),
                major_page_faults: Some(2),
                memory_limit_bytes: Some(64 << 20),
            }
        );
        fs::write(c.join("memory.max"), "max\n").expect("w");
        let s = root.stats("/pv/podu/c1").expect("stats").expect("exists");
        assert_eq!(s.memory_limit_bytes, None);
        // inactive_file above usage (racy reads): floored at 0.
        fs::write(c.join("memory.stat"), "anon 0\ninactive_file 20971520\n").expect("w");
        let s = root.stats("/pv/podu/c1").expect("stats").expect("exists");
        assert_eq!(s.memory_working_set_bytes, Some(0));
        assert_eq!(root.stats("/pv/podu/gone").expect("stats"), None);
    }

    #[test]
    fn node_memory_from_meminfo_where_the_v2_root_has_no_usage_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        fs::write(r.join("cgroup.controllers"), "cpu memory pids\n").expect("write");
        fs::write(r.join("cpu.stat"), "usage_usec 9000000\n").expect("w");
        fs::write(
            r.join("memory.stat"),
            "anon 1048576\ninactive_file 1048576\n",
        )
        .expect("w");
        let meminfo = "MemTotal:       8192 kB\nMemFree:        2048 kB\nMemAvailable:   4096 kB\n";
        let s = CgroupRoot::new(r).node_stats(meminfo).expect("node");
        assert_eq!(s.cpu_usage_usec, Some(9_000_000));
        assert_eq!(s.memory_usage_bytes, Some(6 << 20));
        assert_eq!(s.memory_working_set_bytes, Some(5 << 20));
        assert_eq!(s.memory_rss_bytes, Some(1 << 20));
    }

    #[test]
    fn v1_stats_from_each_hierarchy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        let rel = "pv/burstable/podu";
        for h in ["cpuacct", "memory", "pids"] {
            fs::create_dir_all(r.join(h).join(rel)).expect("mkdir");
        }
        fs::write(
            r.join("cpuacct").join(rel).join("cpuacct.usage"),
            "2000000000\n",
        )
        .expect("w");
        let m = r.join("memory").join(rel);
        fs::write(m.join("memory.usage_in_bytes"), "1048576\n").expect("w");
        fs::write(
            m.join("memory.stat"),
            "cache 0\nrss 1\ntotal_rss 524288\ntotal_inactive_file 262144\n",
        )
        .expect("w");
        fs::write(
            m.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .expect("w");
        let root = CgroupRoot::new(r);
        let s = root.stats(rel).expect("stats").expect("exists");
        assert_eq!(s.cpu_usage_usec, Some(2_000_000));
        assert_eq!(s.memory_working_set_bytes, Some(786_432));
        assert_eq!(s.memory_rss_bytes, Some(524_288));
        assert_eq!(s.pids_current, None, "no pids.current file");
        assert_eq!(s.oom_kills, Some(0));
    }

    #[test]
    fn malformed_number_names_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        fs::write(r.join("cgroup.controllers"), "memory\n").expect("write");
        fs::create_dir_all(r.join("x")).expect("mkdir");
        fs::write(r.join("x/memory.current"), "lots\n").expect("w");
        let err = CgroupRoot::new(r).stats("x").expect_err("bad");
        assert!(err.to_string().contains("memory.current"), "{err}");
    }

    #[test]
    fn millicores_from_two_samples() {
        // 0.25 s of CPU in 1 s: 250m.
        assert_eq!(millicores(1_000_000, 1_250_000, 1_000_000), 250);
        assert_eq!(millicores(5, 3, 1_000_000), 0);
        assert_eq!(millicores(0, 10, 0), 0);
    }
}
