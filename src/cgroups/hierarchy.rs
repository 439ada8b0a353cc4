//! hierarchy: creating podvisor's QoS tiers and pod cgroups with their values, and removing
//! them again.
//!
//! Files written (relative to the cgroup root; `<pod>` is the pod cgroup of [`super::layout`]):
//!
//! | what | cgroup v2 | cgroup v1 |
//! |---|---|---|
//! | controllers | `+cpu +memory +pids` (+`cpuset io hugetlb` if offered) in `cgroup.subtree_control` of the root, every parent level, the tier and `<pod>` | — |
//! | BestEffort tier | `besteffort/cpu.weight` = 1 | `cpu/…/besteffort/cpu.shares` = 2 |
//! | Burstable tier | `burstable/cpu.weight` from the summed requests of its pods | `cpu/…/burstable/cpu.shares` |
//! | pod cpu request | `<pod>/cpu.weight` | `cpu/<pod>/cpu.shares` |
//! | pod cpu limit | `<pod>/cpu.max` = `<quota> 100000` (or `max 100000`) | `cpu.cfs_period_us` = 100000, `cpu.cfs_quota_us` (or -1) |
//! | pod memory limit | `<pod>/memory.max` (or `max`), `memory.swap.max` = 0 | `memory/<pod>/memory.limit_in_bytes` (or -1) |
//! | podPidsLimit | `<pod>/pids.max` (or `max`) | `pids/<pod>/pids.max` (or `max`) |
//!
//! A file that does not exist (its controller is not available, e.g. no swap accounting) is
//! skipped. No process is ever placed in these cgroups: containers go into their own leaf
//! cgroups below the pod.

use std::fs;
use std::io;
use std::path::Path;

use super::layout::{pod_cgroup, pod_cgroup_candidates, qos_cgroup};
use super::resources::{
    milli_cpu_to_shares, shares_to_weight, PodCgroupConfig, CPU_PERIOD_US, MIN_SHARES,
};
use super::{read_optional, CgroupError, CgroupMode, CgroupRoot};
use crate::pod::qos::QosClass;

/// The v2 controllers podvisor enables down to the pod level, when the kernel offers them.
pub const V2_CONTROLLERS: [&str; 6] = ["cpuset", "cpu", "io", "memory", "hugetlb", "pids"];
/// The v1 hierarchies podvisor writes pod values to (and places a shared-PID pod's init in).
const V1_HIERARCHIES: [&str; 3] = ["cpu", "memory", "pids"];
/// The v1 hierarchies the tiers and pod cgroups are made in: every one libcontainer places a
/// container in (libcgroups' v1 controllers), as the kubelet makes its pod cgroups in every
/// subsystem. Made here, beside the pod's other sandbox work, each level exists before the
/// container's placement, which is then one `mkdir` per hierarchy, as a restart's is (round
/// fourteen of issue 19: libcgroups made the pod level in five hierarchies inside the start).
/// Not mounted ones are skipped; co-mounted ones (`cpu,cpuacct`) are one directory.
const V1_POD_HIERARCHIES: [&str; 12] = [
    "cpu",
    "cpuacct",
    "cpuset",
    "devices",
    "hugetlb",
    "memory",
    "pids",
    "perf_event",
    "blkio",
    "net_prio",
    "net_cls",
    "freezer",
];

/// Writes `value` to `path` unless the file does not exist. Returns whether it was written.
/// The open says whether it exists (cgroup files are never created by writing), so a file
/// costs one path walk, not two.
fn write_if_present(path: &Path, value: &str) -> Result<bool, CgroupError> {
    let err = |source| CgroupError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    };
    let mut file = match fs::OpenOptions::new().write(true).truncate(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            log::debug!("cgroup file {} absent: not set", path.display());
            return Ok(false);
        }
        Err(e) => return Err(err(e)),
    };
    io::Write::write_all(&mut file, value.as_bytes())
        .map(|()| true)
        .map_err(err)
}

/// A v1 cpuset cgroup starts with no CPUs and no memory nodes, and takes no process until
/// it has both: an empty `cpuset.cpus` or `cpuset.mems` of `dir` gets its parent's (the
/// parents are filled first, top-down), as libcontainer does for the levels it makes.
fn fill_cpuset(dir: &Path) -> Result<(), CgroupError> {
    for file in ["cpuset.cpus", "cpuset.mems"] {
        let path = dir.join(file);
        let Some(own) = read_optional(&path)? else {
            continue;
        };
        if !own.trim().is_empty() {
            continue;
        }
        let Some(parent) = dir.parent() else { continue };
        if let Some(value) = read_optional(&parent.join(file))? {
            if !value.trim().is_empty() {
                write_if_present(&path, value.trim())?;
            }
        }
    }
    Ok(())
}

/// `mkdir` of one level in v1 hierarchy `h` (or the unified tree, `h` empty): a new cpuset
/// level gets its parent's CPUs and memory nodes.
fn mkdir_v1(h: &str, dir: &Path) -> Result<(), CgroupError> {
    mkdir(dir)?;
    if h == "cpuset" {
        fill_cpuset(dir)?;
    }
    Ok(())
}

fn mkdir(path: &Path) -> Result<(), CgroupError> {
    match fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(source) => Err(CgroupError::Create {
            path: path.to_path_buf(),
            source,
        }),
    }
}

impl CgroupRoot {
    /// The mounted ones of [`V1_POD_HIERARCHIES`], looked up once per `CgroupRoot`.
    fn v1_pod_hierarchies(&self) -> &[&'static str] {
        self.v1_mounted.get_or_init(|| {
            V1_POD_HIERARCHIES
                .into_iter()
                .filter(|h| self.root.join(h).is_dir())
                .collect()
        })
    }

    /// The v2 controllers of [`V2_CONTROLLERS`] the root offers, in that order.
    pub fn offered_controllers(&self) -> Result<Vec<&'static str>, CgroupError> {
        let path = self.root.join("cgroup.controllers");
        let text = read_optional(&path)?.unwrap_or_default();
        let offered: Vec<&str> = text.split_whitespace().collect();
        Ok(V2_CONTROLLERS
            .into_iter()
            .filter(|c| offered.contains(c))
            .collect())
    }

    /// Enables `controllers` in `dir`'s `cgroup.subtree_control`. When the whole set is
    /// refused, each is tried alone; the ones still refused are logged and skipped.
    fn enable_controllers(&self, dir: &Path, controllers: &[&str]) -> Result<(), CgroupError> {
        if controllers.is_empty() {
            return Ok(());
        }
        let path = dir.join("cgroup.subtree_control");
        let all: Vec<String> = controllers.iter().map(|c| format!("+{c}")).collect();
        if fs::write(&path, all.join(" ")).is_ok() {
            return Ok(());
        }
        for c in &all {
            if let Err(source) = fs::write(&path, c) {
                log::warn!(
                    "{}",
                    CgroupError::Write {
                        path: path.clone(),
                        value: c.clone(),
                        source,
                    }
                );
            }
        }
        Ok(())
    }

    /// Creates the directories of `relative` in every hierarchy (v2: the unified tree,
    /// enabling controllers at every level from the root down to `relative` itself; v1:
    /// every mounted one of [`V1_POD_HIERARCHIES`], cpuset levels filled from their parent).
    fn create_path(&self, relative: &str) -> Result<(), CgroupError> {
        let rel = relative.trim_matches('/');
        match self.mode() {
            CgroupMode::Unified => {
                let controllers = self.offered_controllers()?;
                let mut dir = self.root.clone();
                self.enable_controllers(&dir, &controllers)?;
                for part in rel.split('/') {
                    dir.push(part);
                    mkdir(&dir)?;
                    self.enable_controllers(&dir, &controllers)?;
                }
            }
            CgroupMode::Legacy => {
                for h in self.v1_pod_hierarchies() {
                    let mut dir = self.root.join(h);
                    for part in rel.split('/') {
                        dir.push(part);
                        mkdir_v1(h, &dir)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Creates the last directory of `relative` (in every hierarchy [`Self::create_path`]
    /// would) when its parent exists everywhere; false, with nothing to undo, when a parent is
    /// missing. A pod's start takes this path whenever its tier exists: the tiers are kept
    /// once made (for the node's life), so its cgroup is one `mkdir` per hierarchy (plus
    /// enabling the controllers below it, v2) instead of a `mkdir` of every level, the
    /// controllers enabled again at every level and the BestEffort weight written again.
    fn create_in_existing_parent(&self, relative: &str) -> Result<bool, CgroupError> {
        let rel = relative.trim_matches('/');
        // `mkdir` (v1: of hierarchy `h`), with a missing parent as `false`.
        let made = |h: &str, dir: &Path| match mkdir_v1(h, dir) {
            Ok(()) => Ok(true),
            Err(CgroupError::Create { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Ok(false)
            }
            Err(e) => Err(e),
        };
        match self.mode() {
            CgroupMode::Unified => {
                let dir = self.root.join(rel);
                if !made("", &dir)? {
                    return Ok(false);
                }
                // What the parents enabled reaches the new cgroup; when that is not every
                // controller the root offers (tiers made by an older podvisor, or changed by
                // hand), the caller enables them again at every level.
                let offered = self.offered_controllers()?;
                let available = read_optional(&dir.join("cgroup.controllers"))?.unwrap_or_default();
                let available: Vec<&str> = available.split_whitespace().collect();
                if !offered.iter().all(|c| available.contains(c)) {
                    return Ok(false);
                }
                self.enable_controllers(&dir, &offered)?;
            }
            CgroupMode::Legacy => {
                for h in self.v1_pod_hierarchies() {
                    if !made(h, &self.root.join(h).join(rel))? {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Writes the cpu weight (v2) or shares (v1) of `relative`.
    fn set_cpu_shares(&self, relative: &str, shares: u64) -> Result<(), CgroupError> {
        match self.mode() {
            CgroupMode::Unified => write_if_present(
                &self.dir("cpu", relative).join("cpu.weight"),
                &shares_to_weight(shares).to_string(),
            )?,
            CgroupMode::Legacy => write_if_present(
                &self.dir("cpu", relative).join("cpu.shares"),
                &shares.to_string(),
            )?,
        };
        Ok(())
    }

    /// Creates `/<parent>` and its QoS tiers; the BestEffort tier gets the minimum CPU weight.
    pub fn ensure_tiers(&self, parent: &str) -> Result<(), CgroupError> {
        for qos in [QosClass::Burstable, QosClass::BestEffort] {
            self.create_path(&qos_cgroup(parent, qos))?;
        }
        self.set_cpu_shares(&qos_cgroup(parent, QosClass::BestEffort), MIN_SHARES)
    }

    /// Sets the Burstable tier's CPU weight from the summed cpu requests of its pods.
    pub fn set_burstable_cpu(&self, parent: &str, requests_millis: u64) -> Result<(), CgroupError> {
        self.set_cpu_shares(
            &qos_cgroup(parent, QosClass::Burstable),
            milli_cpu_to_shares(requests_millis),
        )
    }

    /// Creates the tiers and the pod cgroup of `pod_uid` with the values of `cfg`; returns
    /// the pod cgroup's relative path. Idempotent.
    pub fn create_pod(
        &self,
        parent: &str,
        pod_uid: &str,
        cfg: &PodCgroupConfig,
    ) -> Result<String, CgroupError> {
        let rel = pod_cgroup(parent, cfg.qos, pod_uid);
        if !self.create_in_existing_parent(&rel)? {
            self.ensure_tiers(parent)?;
            self.create_path(&rel)?;
        }
        self.set_cpu_shares(&rel, cfg.cpu_shares)?;
        let pids = cfg
            .pids_max
            .map_or_else(|| "max".to_string(), |n| n.to_string());
        match self.mode() {
            CgroupMode::Unified => {
                let dir = self.dir("cpu", &rel);
                let quota = cfg
                    .cpu_quota_us
                    .map_or_else(|| "max".to_string(), |q| q.to_string());
                write_if_present(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
                let memory = cfg
                    .memory_max
                    .map_or_else(|| "max".to_string(), |m| m.to_string());
                write_if_present(&dir.join("memory.max"), &memory)?;
                if cfg.memory_max.is_some() {
                    write_if_present(&dir.join("memory.swap.max"), "0")?;
                }
                write_if_present(&dir.join("pids.max"), &pids)?;
            }
            CgroupMode::Legacy => {
                let cpu = self.dir("cpu", &rel);
                write_if_present(&cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                let quota = cfg
                    .cpu_quota_us
                    .map_or_else(|| "-1".to_string(), |q| q.to_string());
                write_if_present(&cpu.join("cpu.cfs_quota_us"), &quota)?;
                let memory = cfg
                    .memory_max
                    .map_or_else(|| "-1".to_string(), |m| m.to_string());
                write_if_present(
                    &self.dir("memory", &rel).join("memory.limit_in_bytes"),
                    &memory,
                )?;
                write_if_present(&self.dir("pids", &rel).join("pids.max"), &pids)?;
            }
        }
        Ok(rel)
    }

    /// Creates the leaf cgroup `relative` (every hierarchy podvisor uses) and moves process
    /// `pid` into it: the pod init of a shared PID namespace goes to `<pod cgroup>/pod-init`,
    /// as containerd puts the pause container below the pod cgroup (v2 allows processes only
    /// in leaves). [`Self::remove_pod`] removes it with the pod.
    pub fn add_process(&self, relative: &str, pid: i32) -> Result<(), CgroupError> {
        let rel = relative.trim_matches('/');
        if let Some((parent, _)) = rel.rsplit_once('/') {
            self.create_path(parent)?;
        }
        let dirs: Vec<std::path::PathBuf> = match self.mode() {
            CgroupMode::Unified => vec![self.root.join(rel)],
            CgroupMode::Legacy => V1_HIERARCHIES
                .iter()
                .filter(|h| self.root.join(h).is_dir())
                .map(|h| self.root.join(h).join(rel))
                .collect(),
        };
        for dir in dirs {
            // A plain mkdir: enabling controllers in the leaf's own subtree_control would
            // make v2 refuse the process (no internal processes).
            mkdir(&dir)?;
            let path = dir.join("cgroup.procs");
            fs::write(&path, pid.to_string()).map_err(|source| CgroupError::Write {
                path,
                value: pid.to_string(),
                source,
            })?;
        }
        Ok(())
    }

    /// Removes the pod cgroup of `pod_uid` wherever it is (all three QoS places are probed).
    /// The tiers stay, as the kubelet keeps its QoS cgroups for the node's life: the next
    /// pod of a node whose last pod went is one `mkdir` per hierarchy, not the tiers made
    /// again (and, on v1, libcontainer making them again in the hierarchies it adds).
    pub fn remove_pod(&self, parent: &str, pod_uid: &str) -> Result<(), CgroupError> {
        for rel in pod_cgroup_candidates(parent, pod_uid) {
            self.remove(&rel)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
