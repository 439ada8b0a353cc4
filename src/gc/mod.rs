//! gc: container and log garbage collection, the kubelet's container GC
//! (`pkg/kubelet/container_gc.go`, `kuberuntime/kuberuntime_gc.go`) and the compression and
//! pruning half of its container log manager (`kuberuntime/logs/container_log_manager.go`).
//!
//! What is collected, and why (each deletion is logged with its [`ContainerGcReason`] or
//! [`LogGcReason`]):
//! - **Dead containers** (exit records, writable layers, their log files): grouped per pod
//!   and container name (the kubelet's "evict unit"), newest first; at most
//!   `maxPerPodContainer` dead instances are kept per unit (1: the one `logs --previous`
//!   shows), at most `maxContainers` in all when that is not -1, and none younger than
//!   `minAge` is touched. Every dead container of a pod no source defines any more is removed
//!   once the sources have reported (the kubelet's `ShouldPodContentBeRemoved`).
//! - **Pod log directories** (`<log-dir>/<ns>_<pod>_<uid>`) of pods that are gone, once the
//!   sources have reported (`evictPodLogsDirectories`).
//! - **Rotated log files**: those beyond `containerLogMaxFiles` are deleted, the others are
//!   gzip-compressed except the newest (as the kubelet compresses every rotated file but the
//!   one it just rotated); leftovers of an interrupted compression are removed.
//! - Beyond the kubelet: log files of an instance whose record is gone (collected by an
//!   earlier version, which kept every log) are deleted, except the highest restart count of
//!   each container, which a restart count after a lost record is computed from.
//!
//! The decisions are pure functions over what was listed ([`plan_container_gc`],
//! [`logs::plan_rotated`], [`logs::plan_log_dirs`]), table-tested in `tests.rs`; the effects
//! run on one thread, `container-gc` ([`worker`]), which the sync loop asks for a pass at each
//! periodic resync (`syncFrequency`) with its view of the pods ([`GcRequest`]). Pods being
//! removed are left to their removal; containers, files and directories newer than that view
//! are never taken for a gone pod's.

pub mod logs;
pub mod worker;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub use worker::{spawn, GcHandle, GcPass, GcReport, GcSettings};

/// The kubelet's container GC policy (`kubecontainer.GCPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContainerGcPolicy {
    /// Dead containers created more recently than this are never collected
    /// (`--minimum-container-ttl-duration`, default 0).
    pub min_age: Duration,
    /// Dead instances kept per pod and container name; negative: no limit
    /// (`--maximum-dead-containers-per-container`, default 1).
    pub max_per_pod_container: i32,
    /// Dead containers kept in all; negative: no limit (`--maximum-dead-containers`, default -1).
    pub max_containers: i32,
}

impl Default for ContainerGcPolicy {
    fn default() -> Self {
        ContainerGcPolicy {
            min_age: Duration::ZERO,
            max_per_pod_container: 1,
            max_containers: -1,
        }
    }
}

/// The sync loop's view of the pods when it asked for a pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcRequest {
    /// When the view was taken: anything created after it may belong to a pod the view does
    /// not know yet, and is never collected as a gone pod's.
    pub taken_at: Option<SystemTime>,
    /// Uids of the pods that should run (a pod worker exists).
    pub active: BTreeSet<String>,
    /// Uids of pods being removed (or found on disk and not claimed yet): left to the loop.
    pub removing: BTreeSet<String>,
    /// Every source has reported: a pod it does not define is gone.
    pub sources_ready: bool,
}

impl GcRequest {
    /// Whether content of pod `uid` created at `created` belongs to a pod that is gone.
    pub fn pod_gone(&self, uid: &str, created: SystemTime) -> bool {
        self.sources_ready
            && !self.active.contains(uid)
            && !self.removing.contains(uid)
            && self.taken_at.is_some_and(|t| created < t)
    }
}

/// A dead (exited) container, as container GC sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadContainer {
    pub id: String,
    pub pod_uid: String,
    /// `namespace/name` of the pod, for the log line.
    pub pod: String,
    pub container_name: String,
    pub restart_count: u32,
    /// Creation time (the kubelet orders and ages dead containers by it).
    pub created: SystemTime,
    /// Its current CRI log file; rotated files sit next to it.
    pub log_path: PathBuf,
}

/// Why container GC removes a dead container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerGcReason {
    /// No source defines its pod any more.
    PodGone,
    /// Older than the `keep` newest dead instances of the same pod and container.
    PerContainerLimit { keep: usize },
    /// Beyond the node's limit on dead containers.
    NodeLimit { max: usize },
}

impl fmt::Display for ContainerGcReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContainerGcReason::PodGone => f.write_str("its pod no longer exists"),
            ContainerGcReason::PerContainerLimit { keep } => write!(
                f,
                "only the {keep} most recent dead instance(s) of a container are kept \
                 (maximum-dead-containers-per-container)"
            ),
            ContainerGcReason::NodeLimit { max } => write!(
                f,
                "the node keeps at most {max} dead containers (maximum-dead-containers)"
            ),
        }
    }
}

/// One container GC decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRemoval {
    pub container: DeadContainer,
    pub reason: ContainerGcReason,
}

/// Which dead containers to remove, and why (the kubelet's `evictContainers`). `dead` holds
/// every exited container listed; `now` ages them against `policy.min_age`.
pub fn plan_container_gc(
    dead: &[DeadContainer],
    req: &GcRequest,
    policy: &ContainerGcPolicy,
    now: SystemTime,
) -> Vec<ContainerRemoval> {
    let newest_gc_time = now
        .checked_sub(policy.min_age)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    // Evict units: (pod uid, container name) -> dead containers, newest first.
    let mut units: BTreeMap<(&str, &str), Vec<&DeadContainer>> = BTreeMap::new();
    for c in dead {
        if c.created > newest_gc_time || req.removing.contains(&c.pod_uid) {
            continue;
        }
        units
            .entry((c.pod_uid.as_str(), c.container_name.as_str()))
            .or_default()
            .push(c);
    }
    for unit in units.values_mut() {
        unit.sort_by(|a, b| b.created.cmp(&a.created).then(b.id.cmp(&a.id)));
    }
    let mut out = Vec::new();
    let mut remove = |c: &DeadContainer, reason| {
        out.push(ContainerRemoval {
            container: c.clone(),
            reason,
        })
    };
    // Containers of gone pods: all of them.
    for unit in units.values_mut() {
        unit.retain(|c| {
            let gone = req.pod_gone(&c.pod_uid, c.created);
            if gone {
                remove(c, ContainerGcReason::PodGone);
            }
            !gone
        });
    }
    units.retain(|_, u| !u.is_empty());
    let enforce_per_unit =
        |units: &mut BTreeMap<_, Vec<&DeadContainer>>,
         keep: usize,
         reason: ContainerGcReason,
         remove: &mut dyn FnMut(&DeadContainer, ContainerGcReason)| {
            for unit in units.values_mut() {
                if unit.len() > keep {
                    for c in unit.drain(keep..).rev() {
                        remove(c, reason);
                    }
                }
            }
        };
    if let Ok(keep) = usize::try_from(policy.max_per_pod_container) {
        enforce_per_unit(
            &mut units,
            keep,
            ContainerGcReason::PerContainerLimit { keep },
            &mut remove,
        );
    }
    if let Ok(max) = usize::try_from(policy.max_containers) {
        let total = |u: &BTreeMap<_, Vec<&DeadContainer>>| u.values().map(Vec::len).sum::<usize>();
        if total(&units) > max {
            // An equal share per unit first (at least one each), then the oldest overall.
            let share = (max / units.len().max(1)).max(1);
            let reason = ContainerGcReason::NodeLimit { max };
            enforce_per_unit(&mut units, share, reason, &mut remove);
            let n = total(&units);
            if n > max {
                let mut flat: Vec<&DeadContainer> = units.values().flatten().copied().collect();
                flat.sort_by(|a, b| b.created.cmp(&a.created).then(b.id.cmp(&a.id)));
                for c in flat.drain(max..).rev() {
                    remove(c, reason);
                }
            }
        }
    }
    out
}

/// Parses an RFC 3339 time as written in container records.
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let ts: k8s_openapi::jiff::Timestamp = s.parse().ok()?;
    Some(SystemTime::from(ts))
}
