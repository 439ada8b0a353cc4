//! nodeapi::summary: `/stats/summary`, the kubelet's Summary API (`stats/v1alpha1`): the node
//! (CPU, memory, its filesystems, the image filesystem, rlimit, and podvisor's own cgroups as
//! `systemContainers` `pods` and `kubelet`), then every pod with a cgroup: its CPU, memory,
//! process count, ephemeral storage and emptyDir volumes, and its running containers' CPU,
//! memory, writable layer (`rootfs`) and log (`logs`) usage. Field names and units are the
//! kubelet's (`usageNanoCores`, `usageCoreNanoSeconds`, `workingSetBytes`, ...); a value
//! podvisor cannot read is left out, as the kubelet leaves out what cadvisor lacks.
//!
//! `usageNanoCores` is the rate since the previous request's sample of the same cgroup
//! ([`super::collect::CpuRates`]): absent on the first request. Network stats are not
//! reported (no per-pod network accounting yet). Volume stats cover emptyDir volumes on disk
//! (their usage as last measured by the eviction manager, and their filesystem) and
//! `medium: Memory` ones (their tmpfs).

use serde::Serialize;

use super::collect::{collect, Collected, FsNumbers};
use super::context::Context;
use crate::cgroups::stats::CgroupStats;
use crate::httpserver::Response;
use crate::status::Snapshot;

#[derive(Debug, Serialize)]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    pub image_fs: FsStats,
}

#[derive(Debug, Serialize)]
pub struct RlimitStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxpid: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curproc: Option<i64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    pub start_time: Option<String>,
    pub containers: Vec<ContainerStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(rename = "volume", skip_serializing_if = "Vec::is_empty")]
    pub volume: Vec<VolumeStats>,
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    #[serde(rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
}

#[derive(Debug, Serialize)]
pub struct ProcessStats {
    pub process_count: u64,
}

#[derive(Debug, Serialize)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
}

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    pub time: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

#[derive(Debug, Serialize)]
pub struct VolumeStats {
    #[serde(flatten)]
    pub fs: FsStats,
    pub name: String,
}

/// A filesystem's stats with `used` bytes of it (`None`: the filesystem's own used blocks).
fn fs_stats(time: &str, fs: Option<FsNumbers>, used: Option<u64>) -> FsStats {
    FsStats {
        time: time.to_string(),
        available_bytes: fs.map(|f| f.available),
        capacity_bytes: fs.map(|f| f.capacity),
        used_bytes: used.or(fs.map(|f| f.used)),
        inodes_free: fs.map(|f| f.inodes_free),
        inodes: fs.map(|f| f.inodes),
        inodes_used: if used.is_some() {
            None
        } else {
            fs.map(|f| f.inodes.saturating_sub(f.inodes_free))
        },
    }
}

fn cpu_stats(c: &Collected, ctx: &Context, key: &str, s: &CgroupStats) -> Option<CpuStats> {
    let usec = s.cpu_usage_usec?;
    Some(CpuStats {
        time: c.time.clone(),
        usage_nano_cores: ctx.cpu.nano_cores(key, c.at_usec(), usec),
        usage_core_nano_seconds: Some(usec.saturating_mul(1000)),
    })
}

fn memory_stats(time: &str, s: &CgroupStats, limit: Option<u64>) -> Option<MemoryStats> {
    s.memory_usage_bytes?;
    Some(MemoryStats {
        time: time.to_string(),
        available_bytes: limit
            .zip(s.memory_working_set_bytes)
            .map(|(l, ws)| l.saturating_sub(ws)),
        usage_bytes: s.memory_usage_bytes,
        working_set_bytes: s.memory_working_set_bytes,
        rss_bytes: s.memory_rss_bytes,
        page_faults: s.page_faults,
        major_page_faults: s.major_page_faults,
    })
}

fn read_i64(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The number of processes (threads) on the node: /proc/loadavg's total.
fn processes() -> Option<i64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

/// The Summary of `c`.
pub fn summary(snap: &Snapshot, ctx: &Context, c: &Collected) -> Summary {
    let t = c.time.as_str();
    let system_containers = c
        .system
        .iter()
        .map(|s| ContainerStats {
            name: s.name.to_string(),
            start_time: c.boot_time.clone(),
            cpu: cpu_stats(c, ctx, &s.cgroup, &s.stats),
            memory: memory_stats(t, &s.stats, s.stats.memory_limit_bytes),
            rootfs: None,
            logs: None,
        })
        .collect();
    let node = NodeStats {
        node_name: snap.node_name.clone(),
        system_containers,
        start_time: c.boot_time.clone(),
        cpu: cpu_stats(c, ctx, "/", &c.node),
        memory: memory_stats(t, &c.node, c.machine_memory),
        fs: c.nodefs.map(|f| fs_stats(t, Some(f), None)),
        runtime: c.imagefs.map(|f| RuntimeStats {
            image_fs: fs_stats(t, Some(f), c.images_bytes),
        }),
        rlimit: Some(RlimitStats {
            time: c.time.clone(),
            maxpid: read_i64("/proc/sys/kernel/pid_max"),
            curproc: processes(),
        }),
    };
    let storage = ctx.stats.node.storage.get();
    let mut pods = Vec::new();
    for p in &c.pods {
        let view = Collected::view(snap, p);
        let status = view.and_then(|v| v.pod.status.as_ref());
        let usage = storage.get(&p.uid);
        let containers = p
            .containers
            .iter()
            .map(|cs| {
                let started = status
                    .into_iter()
                    .flat_map(|s| {
                        s.container_statuses
                            .iter()
                            .flatten()
                            .chain(s.init_container_statuses.iter().flatten())
                    })
                    .find(|st| st.name == cs.name)
                    .and_then(|st| st.state.as_ref()?.running.as_ref()?.started_at.as_ref())
                    .map(|t| t.0.to_string());
                let stats = cs.stats.clone().unwrap_or_default();
                let total = usage.and_then(|u| u.containers.get(&cs.name).copied());
                let log = usage.and_then(|u| u.container_logs.get(&cs.name).copied());
                ContainerStats {
                    name: cs.name.clone(),
                    start_time: started,
                    cpu: cpu_stats(c, ctx, &cs.cgroup, &stats),
                    memory: memory_stats(t, &stats, stats.memory_limit_bytes),
                    rootfs: total.map(|tot| {
                        fs_stats(t, c.nodefs, Some(tot.saturating_sub(log.unwrap_or(0))))
                    }),
                    logs: log.map(|l| fs_stats(t, c.nodefs, Some(l))),
                }
            })
            .collect();
        let stats = p.stats.clone().unwrap_or_default();
        let mut volume = Vec::new();
        if let Some(spec) = view.and_then(|v| v.pod.spec.as_ref()) {
            for v in spec.volumes.iter().flatten() {
                let Some(ed) = &v.empty_dir else { continue };
                let dir = ctx
                    .root_dir
                    .join("pods")
                    .join(&p.uid)
                    .join("volumes")
                    .join(&v.name);
                let fs = super::collect::fs_numbers(&dir);
                let used = if ed.medium.as_deref() == Some("Memory") {
                    // Its own tmpfs: the filesystem's usage is the volume's.
                    None
                } else {
                    match usage.and_then(|u| u.volumes.get(&v.name)) {
                        Some(u) => Some(*u),
                        None => continue,
                    }
                };
                if fs.is_none() {
                    continue;
                }
                volume.push(VolumeStats {
                    fs: fs_stats(t, fs, used),
                    name: v.name.clone(),
                });
            }
        }
        pods.push(PodStats {
            pod_ref: PodReference {
                name: p.name.clone(),
                namespace: p.namespace.clone(),
                uid: p.uid.clone(),
            },
            start_time: status
                .and_then(|s| s.start_time.as_ref())
                .map(|t| t.0.to_string()),
            containers,
            cpu: cpu_stats(c, ctx, &p.cgroup, &stats),
            memory: memory_stats(t, &stats, stats.memory_limit_bytes),
            volume,
            ephemeral_storage: usage.map(|u| fs_stats(t, c.nodefs, Some(u.used_bytes))),
            process_stats: stats
                .pids_current
                .map(|n| ProcessStats { process_count: n }),
        });
    }
    Summary { node, pods }
}

/// `/stats/summary`.
pub fn answer(snap: &Snapshot, ctx: &Context) -> Response {
    let c = collect(snap, &ctx.stats, &ctx.root_dir);
    Response::json_of(200, &summary(snap, ctx, &c))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::routes::tests::{context, get, snapshot};
    use std::fs;

    /// A v2 tree under `dir/cgroup` for the test snapshot's running pod (BestEffort, uid u1,
    /// container c1).
    pub(crate) fn cgroups(dir: &std::path::Path) {
        let r = dir.join("cgroup");
        fs::create_dir_all(r.join("pv/besteffort/podu1/c1")).expect("mkdir");
        fs::write(r.join("cgroup.controllers"), "cpu memory pids\n").expect("w");
        fs::write(r.join("cpu.stat"), "usage_usec 50000000\n").expect("w");
        fs::write(r.join("memory.stat"), "anon 1000\ninactive_file 0\n").expect("w");
        let pod = r.join("pv/besteffort/podu1");
        for (d, usec, mem) in [
            (pod.clone(), 3_000_000, 8192),
            (pod.join("c1"), 2_000_000, 4096),
        ] {
            fs::write(d.join("cpu.stat"), format!("usage_usec {usec}\n")).expect("w");
            fs::write(d.join("memory.current"), format!("{mem}\n")).expect("w");
            fs::write(
                d.join("memory.stat"),
                "anon 2048\ninactive_file 1024\npgfault 5\npgmajfault 1\n",
            )
            .expect("w");
            fs::write(d.join("memory.events"), "oom_kill 1\n").expect("w");
            fs::write(d.join("pids.current"), "2\n").expect("w");
        }
        fs::write(pod.join("c1/memory.max"), "65536\n").expect("w");
    }

    #[test]
    fn summary_has_the_kubelets_shape_and_units() {
        let dir = tempfile::tempdir().expect("tempdir");
        cgroups(dir.path());
        let ctx = context(snapshot(), dir.path());
        let mut usage = std::collections::BTreeMap::new();
        usage.insert(
            "u1".to_string(),
            crate::status::EphemeralStorageUsage {
                used_bytes: 700,
                limit_bytes: None,
                containers: [("main".to_string(), 600)].into(),
                volumes: Default::default(),
                container_logs: [("main".to_string(), 100)].into(),
            },
        );
        ctx.stats.node.storage.set(usage);
        let r = get("/stats/summary", &ctx);
        assert_eq!(r.status, 200);
        let v: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
        assert_eq!(v["node"]["nodeName"], "node");
        assert_eq!(v["node"]["cpu"]["usageCoreNanoSeconds"], 50_000_000_000u64);
        assert!(
            v["node"]["cpu"].get("usageNanoCores").is_none(),
            "first sample"
        );
        assert!(v["node"]["fs"]["capacityBytes"].as_u64().is_some());
        assert!(v["node"]["runtime"]["imageFs"]["availableBytes"]
            .as_u64()
            .is_some());
        let pods = v["pods"].as_array().expect("pods");
        assert_eq!(pods.len(), 1, "the pending pod has no cgroup: {v}");
        let p = &pods[0];
        assert_eq!(
            p["podRef"],
            serde_json::json!({"name": "web-node", "namespace": "default", "uid": "u1"})
        );
        assert_eq!(p["startTime"], "2026-01-01T00:00:00Z");
        assert_eq!(p["memory"]["workingSetBytes"], 8192 - 1024);
        assert_eq!(p["process_stats"]["process_count"], 2);
        assert_eq!(p["ephemeral-storage"]["usedBytes"], 700);
        let c = &p["containers"][0];
        assert_eq!(c["name"], "main");
        assert_eq!(c["startTime"], "2026-01-01T00:00:01Z");
        assert_eq!(c["cpu"]["usageCoreNanoSeconds"], 2_000_000_000u64);
        assert_eq!(c["memory"]["availableBytes"], 65536 - (4096 - 1024));
        assert_eq!(c["memory"]["rssBytes"], 2048);
        assert_eq!(c["memory"]["pageFaults"], 5);
        assert_eq!(c["rootfs"]["usedBytes"], 500);
        assert_eq!(c["logs"]["usedBytes"], 100);
        // The second request has rates from the first one's samples.
        fs::write(
            dir.path().join("cgroup/pv/besteffort/podu1/c1/cpu.stat"),
            "usage_usec 9000000\n",
        )
        .expect("w");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let v: serde_json::Value =
            serde_json::from_slice(&get("/stats/summary", &ctx).body).expect("json");
        let rate = v["pods"][0]["containers"][0]["cpu"]["usageNanoCores"]
            .as_u64()
            .expect("rate");
        assert!(rate > 0, "{v}");
    }
}
