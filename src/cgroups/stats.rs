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
//!
//! A value whose file is absent (controller not enabled there) is `None`.

use serde::{Deserialize, Serialize};

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
}

fn number(path: &std::path::Path, text: &str) -> Result<u64, CgroupError> {
    text.trim().parse().map_err(|_| CgroupError::Malformed {
        path: path.to_path_buf(),
        value: text.trim().to_string(),
    })
}

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
        if !self.exists(relative) {
            return Ok(None);
        }
        let mode = self.mode();
        let (cpu, usage, inactive_key, rss_key) = match mode {
            CgroupMode::Unified => (
                self.read_keyed("cpu", relative, "cpu.stat", "usage_usec")?,
                self.read_number("memory", relative, "memory.current")?,
                "inactive_file",
                "anon",
            ),
            CgroupMode::Legacy => (
                self.read_number("cpuacct", relative, "cpuacct.usage")?
                    .map(|ns| ns / 1000),
                self.read_number("memory", relative, "memory.usage_in_bytes")?,
                "total_inactive_file",
                "total_rss",
            ),
        };
        // Both memory.stat keys from one read.
        let stat_path = self.dir("memory", relative).join("memory.stat");
        let (inactive, rss) = match read_optional(&stat_path)? {
            None => (None, None),
            Some(t) => {
                let key = |key: &'static str| {
                    parse_flat_keyed(&t, key).ok_or_else(|| CgroupError::MissingKey {
                        path: stat_path.clone(),
                        key,
                    })
                };
                (Some(key(inactive_key)?), Some(key(rss_key)?))
            }
        };
        let oom_file = super::oom_events_file(mode);
        Ok(Some(CgroupStats {
            cpu_usage_usec: cpu,
            memory_usage_bytes: usage,
            memory_working_set_bytes: usage.map(|u| u.saturating_sub(inactive.unwrap_or(0))),
            memory_rss_bytes: rss,
            pids_current: self.read_number("pids", relative, "pids.current")?,
            oom_kills: self.read_keyed("memory", relative, oom_file, "oom_kill")?,
        }))
    }
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
            "usage_usec 1500000\nuser_usec 1000000\n",
        )
        .expect("w");
        fs::write(c.join("memory.current"), "10485760\n").expect("w");
        fs::write(
            c.join("memory.stat"),
            "anon 4194304\nfile 6291456\ninactive_file 2097152\nactive_file 4194304\n",
        )
        .expect("w");
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
            }
        );
        // inactive_file above usage (racy reads): floored at 0.
        fs::write(c.join("memory.stat"), "anon 0\ninactive_file 20971520\n").expect("w");
        let s = root.stats("/pv/podu/c1").expect("stats").expect("exists");
        assert_eq!(s.memory_working_set_bytes, Some(0));
        assert_eq!(root.stats("/pv/podu/gone").expect("stats"), None);
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
