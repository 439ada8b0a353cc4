//! eviction::storage: each running pod's ephemeral storage on a real node, for the local
//! storage limits ([`super::ephemeral`]) and `/stats`: the limits from the published
//! snapshot's pods, the usage of their trees through the bounded [`UsageCache`]:
//! - a container: its writable layer (`<root>/containers/<id>/upper`) and its running
//!   instance's log files (`<log-dir>/<pod>/<container>/<restartCount>.log*`: an earlier
//!   instance's log, kept for `logs --previous`, does not count against the new one, so a pod
//!   started again after its eviction is not evicted again for its predecessor's output);
//! - a pod: its containers and its emptyDir volumes on disk (`<root>/pods/<uid>/volumes/<name>`,
//!   `medium: Memory` and HugePages volumes are not on disk).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::ephemeral::{ContainerStorage, Limit, PodStorage, VolumeStorage};
use super::ranking::is_critical;
use super::usage::{PassCost, Tree, UsageCache, ENTRIES_PER_PASS};
use crate::pod::quantity::{format_canonical_bytes, is_binary_si, parse_bytes};
use crate::pod::resources::{pod_ephemeral_storage_limit, StorageAmount};
use crate::status::{EphemeralStorageUsage, PodView, Snapshot, StorageUsageCell};

/// The pods' ephemeral storage, measured at most [`ENTRIES_PER_PASS`] entries a pass.
#[derive(Debug)]
pub struct LocalStorage {
    root_dir: PathBuf,
    cache: Mutex<UsageCache>,
    /// The last measurements, for `/stats`.
    published: StorageUsageCell,
}

fn limit_of(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Option<Limit> {
    let bytes = parse_bytes(q).ok()?;
    Some(Limit {
        bytes,
        text: format_canonical_bytes(bytes, is_binary_si(q)),
    })
}

/// What a pod's trees are: one per running container (writable layer, logs), one per
/// emptyDir volume on disk.
struct PodTrees {
    storage: PodStorage,
    /// Per container: the indices of its trees in the pass's list.
    containers: Vec<Vec<usize>>,
    volumes: Vec<usize>,
}

impl LocalStorage {
    pub fn new(root_dir: &Path, published: StorageUsageCell) -> LocalStorage {
        LocalStorage {
            root_dir: root_dir.to_path_buf(),
            cache: Mutex::new(UsageCache::new(ENTRIES_PER_PASS)),
            published,
        }
    }

    fn trees_of(&self, v: &PodView, trees: &mut Vec<Tree>) -> Option<PodTrees> {
        let pod = &v.pod;
        if crate::status::is_terminal(pod) {
            return None;
        }
        let uid = pod.metadata.uid.clone()?;
        let spec = pod.spec.as_ref()?;
        let status = pod.status.as_ref()?;
        let pod_limit = match pod_ephemeral_storage_limit(pod) {
            Ok(l) => l.map(|StorageAmount { bytes, binary }| Limit {
                bytes,
                text: format_canonical_bytes(bytes, binary),
            }),
            // Validation refuses such a pod; nothing to measure it against.
            Err(_) => None,
        };
        let mut storage = PodStorage {
            uid: uid.clone(),
            name: crate::status::full_name(pod),
            critical: is_critical(pod),
            pod_limit,
            containers: Vec::new(),
            volumes: Vec::new(),
        };
        let mut containers = Vec::new();
        for cs in status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
        {
            let Some(id) = crate::status::running_container_id(cs) else {
                continue;
            };
            let mut idx = vec![trees.len()];
            trees.push(Tree::new(
                self.root_dir.join("containers").join(id).join("upper"),
            ));
            if let Some(log) = v.log_paths.get(&cs.name) {
                if let (Some(dir), Some(file)) = (log.parent(), log.file_name()) {
                    idx.push(trees.len());
                    trees.push(Tree {
                        path: dir.to_path_buf(),
                        prefix: Some(file.to_string_lossy().into_owned()),
                    });
                }
            }
            containers.push(idx);
            // Only app containers' limits are checked (the kubelet's thresholdsMap).
            let limit = spec
                .containers
                .iter()
                .find(|c| c.name == cs.name)
                .and_then(|c| {
                    c.resources
                        .as_ref()?
                        .limits
                        .as_ref()?
                        .get("ephemeral-storage")
                })
                .and_then(limit_of);
            storage.containers.push(ContainerStorage {
                name: cs.name.clone(),
                limit,
                used: 0,
            });
        }
        let mut volumes = Vec::new();
        let dir = self.root_dir.join("pods").join(&uid).join("volumes");
        for vol in spec.volumes.iter().flatten() {
            let Some(ed) = vol.empty_dir.as_ref() else {
                continue;
            };
            if ed.medium.as_deref().is_some_and(|m| !m.is_empty()) {
                continue;
            }
            volumes.push(trees.len());
            trees.push(Tree::new(dir.join(&vol.name)));
            storage.volumes.push(VolumeStorage {
                name: vol.name.clone(),
                size_limit: ed.size_limit.as_ref().and_then(limit_of),
                used: 0,
            });
        }
        Some(PodTrees {
            storage,
            containers,
            volumes,
        })
    }

    /// One pass: every running pod of `snap` with its usage (published for `/stats`).
    pub fn measure(&self, snap: &Snapshot) -> (Vec<PodStorage>, PassCost) {
        let mut trees = Vec::new();
        let pods: Vec<PodTrees> = snap
            .pods
            .iter()
            .filter_map(|v| self.trees_of(v, &mut trees))
            .collect();
        let (usage, cost) = match self.cache.lock() {
            Ok(mut c) => c.measure(&trees),
            // A panic in an earlier pass: start over with an empty cache.
            Err(poisoned) => {
                let mut c = poisoned.into_inner();
                *c = UsageCache::new(ENTRIES_PER_PASS);
                c.measure(&trees)
            }
        };
        let used = |i: &usize| usage.get(*i).copied().flatten().unwrap_or(0);
        // Per pod uid: each container's log part (its second tree, when it has a log).
        let mut logs: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        let out: Vec<PodStorage> = pods
            .into_iter()
            .map(|mut p| {
                let pod_logs = logs.entry(p.storage.uid.clone()).or_default();
                for (c, idx) in p.storage.containers.iter_mut().zip(&p.containers) {
                    c.used = idx.iter().map(used).fold(0, u64::saturating_add);
                    if let Some(log) = idx.get(1) {
                        pod_logs.insert(c.name.clone(), used(log));
                    }
                }
                for (v, i) in p.storage.volumes.iter_mut().zip(&p.volumes) {
                    v.used = used(i);
                }
                p.storage
            })
            .collect();
        self.published.set(
            out.iter()
                .map(|p| {
                    let usage = EphemeralStorageUsage {
                        used_bytes: p.used(),
                        limit_bytes: p.pod_limit.as_ref().map(|l| l.bytes),
                        containers: p
                            .containers
                            .iter()
                            .map(|c| (c.name.clone(), c.used))
                            .collect(),
                        volumes: p.volumes.iter().map(|v| (v.name.clone(), v.used)).collect(),
                        container_logs: logs.remove(&p.uid).unwrap_or_default(),
                    };
                    (p.uid.clone(), usage)
                })
                .collect::<BTreeMap<_, _>>(),
        );
        (out, cost)
    }
}
