//! eviction::node: the manager's seams on a real node — the pods and what they use
//! ([`SnapshotPods`]: the published snapshot for pods, requests and container ids; the cgroup
//! files for memory and pids; the writable layers, log directories and emptyDir volumes for
//! ephemeral storage, measured only when disk space is the signal, and their inodes only when
//! inodes are) and node-level reclaim
//! ([`NodeReclaim`]: a container and log GC pass asked of the sync loop, then unused images).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Container;

use super::manager::{EvictionEvent, NodeReclaimer, PodSource};
use super::ranking::{is_critical, priority, ContainerUsage, PodCandidate};
use super::threshold::{Pressure, Signal};
use crate::cgroups::{container_cgroup, pod_cgroup, CgroupRoot};
use crate::images::ImageStore;
use crate::images::PinnedImages;
use crate::pod::qos::QosClass;
use crate::pod::quantity::parse_bytes;
use crate::status::SnapshotCell;

/// How long node-level reclaim waits for the container GC pass it asked for.
const CONTAINER_GC_WAIT: Duration = Duration::from_secs(60);
/// Entries a disk usage walk visits at most per tree (bounded cost on huge trees).
const MAX_WALK_ENTRIES: usize = 200_000;

/// Bytes allocated under `path` on the filesystem `dev` (other mounts, such as a Memory
/// emptyDir's tmpfs, are not counted), symlinks not followed, at most `budget` entries.
pub fn disk_usage(path: &Path, dev: Option<u64>, budget: &mut usize) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if dev.is_some_and(|d| d != meta.dev()) || *budget == 0 {
        return 0;
    }
    *budget -= 1;
    let mut total = meta.blocks().saturating_mul(512);
    if meta.is_dir() {
        if let Ok(entries) = fs::read_dir(path) {
            for e in entries.flatten() {
                total = total.saturating_add(disk_usage(&e.path(), Some(meta.dev()), budget));
            }
        }
    }
    total
}

/// Inodes used under `path` on the filesystem `dev` (the entries themselves: files,
/// directories, links), symlinks not followed, at most `budget` entries.
pub fn inode_usage(path: &Path, dev: Option<u64>, budget: &mut usize) -> u64 {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    if dev.is_some_and(|d| d != meta.dev()) || *budget == 0 {
        return 0;
    }
    *budget -= 1;
    let mut total = 1u64;
    if meta.is_dir() {
        if let Ok(entries) = fs::read_dir(path) {
            for e in entries.flatten() {
                total = total.saturating_add(inode_usage(&e.path(), Some(meta.dev()), budget));
            }
        }
    }
    total
}

/// The running pods of the published snapshot, with their usage.
#[derive(Debug, Clone)]
pub struct SnapshotPods {
    pub snapshots: SnapshotCell,
    pub cgroups: CgroupRoot,
    /// podvisor's cgroup parent.
    pub parent: String,
    /// `--root-dir` (container records, emptyDir volumes).
    pub root_dir: PathBuf,
    /// The pods' ephemeral storage against their limits.
    pub storage: Arc<super::storage::LocalStorage>,
}

fn request_of(c: &Container, resource: &str) -> (String, u64) {
    let q = c
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource));
    match q {
        Some(q) => (q.0.clone(), parse_bytes(q).unwrap_or(0)),
        None => ("0".to_string(), 0),
    }
}

impl SnapshotPods {
    fn candidate(
        &self,
        v: &crate::status::PodView,
        disk: bool,
        inodes: bool,
    ) -> Option<PodCandidate> {
        let pod = &v.pod;
        let uid = pod.metadata.uid.clone()?;
        let status = pod.status.as_ref()?;
        if crate::status::is_terminal(pod) {
            return None;
        }
        let qos = QosClass::from_name(status.qos_class.as_deref()?)?;
        let spec = pod.spec.as_ref()?;
        let pod_stats = self
            .cgroups
            .stats(&pod_cgroup(&self.parent, qos, &uid))
            .ok()
            .flatten();
        let requests = crate::pod::resources::pod_requests(pod).unwrap_or_default();
        let mut containers = Vec::new();
        let (mut disk_total, mut disk_request) = (0u64, 0u64);
        let mut inodes_total = 0u64;
        for cs in status.container_statuses.iter().flatten() {
            let running = cs.state.as_ref().is_some_and(|s| s.running.is_some());
            let Some(id) = cs
                .container_id
                .as_deref()
                .and_then(|i| i.strip_prefix("podvisor://"))
                .filter(|_| running)
            else {
                continue;
            };
            let Some(c) = spec.containers.iter().find(|c| c.name == cs.name) else {
                continue;
            };
            let memory = self
                .cgroups
                .stats(&container_cgroup(&self.parent, qos, &uid, id))
                .ok()
                .flatten()
                .and_then(|s| s.memory_working_set_bytes)
                .unwrap_or(0);
            let (memory_request, memory_request_bytes) = request_of(c, "memory");
            let (disk_req, disk_request_bytes) = request_of(c, "ephemeral-storage");
            let mut used = 0;
            if disk {
                let mut budget = MAX_WALK_ENTRIES;
                used = disk_usage(
                    &self.root_dir.join("containers").join(id).join("upper"),
                    None,
                    &mut budget,
                );
                if let Some(log_dir) = v.log_paths.get(&cs.name).and_then(|p| p.parent()) {
                    used = used.saturating_add(disk_usage(log_dir, None, &mut budget));
                }
            }
            if inodes {
                let mut budget = MAX_WALK_ENTRIES;
                let upper = self.root_dir.join("containers").join(id).join("upper");
                inodes_total = inodes_total.saturating_add(inode_usage(&upper, None, &mut budget));
                if let Some(log_dir) = v.log_paths.get(&cs.name).and_then(|p| p.parent()) {
                    inodes_total =
                        inodes_total.saturating_add(inode_usage(log_dir, None, &mut budget));
                }
            }
            disk_total = disk_total.saturating_add(used);
            disk_request = disk_request.saturating_add(disk_request_bytes);
            containers.push(ContainerUsage {
                name: cs.name.clone(),
                memory,
                memory_request,
                memory_request_bytes,
                disk: used,
                disk_request: disk_req,
                disk_request_bytes,
            });
        }
        if disk {
            let mut budget = MAX_WALK_ENTRIES;
            let volumes = self.root_dir.join("pods").join(&uid).join("volumes");
            let dev = fs::metadata(&volumes).ok().map(|m| m.dev());
            disk_total = disk_total.saturating_add(disk_usage(&volumes, dev, &mut budget));
        }
        if inodes {
            let mut budget = MAX_WALK_ENTRIES;
            let volumes = self.root_dir.join("pods").join(&uid).join("volumes");
            let dev = fs::metadata(&volumes).ok().map(|m| m.dev());
            inodes_total = inodes_total.saturating_add(inode_usage(&volumes, dev, &mut budget));
        }
        Some(PodCandidate {
            name: crate::status::full_name(pod),
            uid,
            priority: priority(pod),
            critical: is_critical(pod),
            guaranteed: qos == QosClass::Guaranteed,
            grace: Duration::from_secs(
                spec.termination_grace_period_seconds.unwrap_or(30).max(0) as u64
            ),
            memory: pod_stats.as_ref().and_then(|s| s.memory_working_set_bytes),
            memory_request: requests.memory_bytes,
            disk: disk.then_some(disk_total),
            disk_request,
            inodes: inodes.then_some(inodes_total),
            pids: pod_stats.as_ref().and_then(|s| s.pids_current),
            containers,
        })
    }
}

impl PodSource for SnapshotPods {
    fn candidates(&self, signal: Signal) -> Vec<PodCandidate> {
        let snap = self.snapshots.get();
        let inodes = matches!(signal, Signal::NodeFsInodesFree | Signal::ImageFsInodesFree);
        let disk = signal.condition() == Pressure::Disk && !inodes;
        snap.pods
            .iter()
            .filter_map(|v| self.candidate(v, disk, inodes))
            .collect()
    }

    fn local_storage(&self) -> Vec<super::ephemeral::PodStorage> {
        let (pods, cost) = self.storage.measure(&self.snapshots.get());
        log::trace!("eviction manager: local storage pass: {cost:?}");
        pods
    }
}

/// Node-level reclaim on a real node.
pub struct NodeReclaim {
    pub images: Arc<ImageStore>,
    pub snapshots: SnapshotCell,
    /// `imageMinimumGCAge`: younger images are kept, as the kubelet's image GC keeps them.
    pub image_minimum_age: Duration,
    /// `kubelet_image_garbage_collected_total` counts the images removed here.
    pub metrics: crate::metrics::KubeletMetrics,
}

impl NodeReclaimer for NodeReclaim {
    fn reclaim_containers(&mut self, send: &dyn Fn(EvictionEvent)) -> u64 {
        let (tx, rx) = mpsc::sync_channel(1);
        send(EvictionEvent::ReclaimContainers(tx));
        match rx.recv_timeout(CONTAINER_GC_WAIT) {
            Ok(r) => {
                log::info!(
                    "eviction manager: node-level reclaim: container GC removed {} dead container(s), {} log dir(s), {} bytes",
                    r.containers_removed,
                    r.dirs_removed,
                    r.bytes_freed
                );
                r.bytes_freed
            }
            // A pass already running took the slot: its effect is measured all the same.
            Err(_) => 0,
        }
    }

    fn reclaim_images(&mut self) -> u64 {
        let snap = self.snapshots.get();
        let pinned = PinnedImages::from_pods(snap.pods.iter().map(|v| &v.pod));
        let removed = self.images.delete_unused_images(
            &pinned,
            self.image_minimum_age,
            std::time::SystemTime::now(),
        );
        match removed {
            Ok(removed) => {
                self.metrics.record_images_collected(removed.len() as u64);
                let mut freed = 0;
                for r in &removed {
                    log::info!(
                        "eviction manager: node-level reclaim: removed image {} ({}, {} bytes): {}",
                        r.references.join(", "),
                        r.digest,
                        r.size,
                        r.reason
                    );
                    freed += r.size;
                }
                freed
            }
            Err(e) => {
                log::warn!("eviction manager: node-level reclaim of images: {e}");
                0
            }
        }
    }
}
