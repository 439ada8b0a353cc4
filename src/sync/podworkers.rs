//! sync::podworkers: the pods that should run and their state (the kubelet's podWorkers and
//! the pod status it caches): a [`PodWorker`] per pod generation, its container [`Slot`]s,
//! and [`PodWorkers`], the map of them by full name with the container exits that arrived
//! before the start result naming their container. One pod's sync (what to start, stop or
//! retry) is `worker`'s; the decision itself is `actions::compute_actions`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::{Container, Pod};

use super::backoff::{CrashLoopBackoff, ImagePullBackoff};
use super::{eviction, probes};
use crate::reason::{PodReason, WaitingReason};
use crate::runtime::{ContainerInfo, ContainerKind, ExitRecord};
use crate::staticpod::StaticPod;

/// How many exits of containers the loop does not know yet it keeps (see
/// [`PodWorkers::keep_early_exit`]).
const EARLY_EXITS: usize = 64;

#[derive(Debug, Clone)]
pub(super) struct Finished {
    pub(super) id: String,
    pub(super) exit: ExitRecord,
    pub(super) at: Instant,
    pub(super) log_path: PathBuf,
}

#[derive(Debug, Clone)]
pub(super) struct Instance {
    /// Empty while the start job is in flight.
    pub(super) id: String,
    pub(super) started_at: String,
    /// The image's STOPSIGNAL (SIGTERM by default), as the monitor recorded it.
    pub(super) stop_signal: i32,
    pub(super) log_path: PathBuf,
    /// Probe and hook state of this instance.
    pub(super) health: probes::Health,
}

#[derive(Debug, Clone)]
pub(super) struct Slot {
    pub(super) container: Container,
    pub(super) kind: ContainerKind,
    /// Instances started so far; the next one gets this as its restart count (log file name)
    /// and the status shows one less.
    pub(super) instances_started: u32,
    pub(super) instance: Option<Instance>,
    pub(super) last: Option<Finished>,
    pub(super) previous_log: Option<PathBuf>,
    pub(super) backoff: CrashLoopBackoff,
    /// Backoff of failed pulls of the container's image.
    pub(super) image_backoff: ImagePullBackoff,
    /// When an ErrImagePull waiting reason turns into ImagePullBackOff.
    pub(super) pull_backoff_at: Option<Instant>,
    /// Why it is not running: (reason, message).
    pub(super) waiting: Option<(WaitingReason, String)>,
    pub(super) retry_at: Option<Instant>,
    /// `imageID` of the latest instance (containerd's image reference: `<repo>@<digest>`).
    pub(super) image_id: String,
    /// An init container that completed successfully, or a sidecar (`restartPolicy: Always`)
    /// that started in this sandbox: either no longer holds back the next init container.
    pub(super) succeeded: bool,
}

impl Slot {
    pub(super) fn new(container: Container, kind: ContainerKind) -> Slot {
        Slot {
            container,
            kind,
            instances_started: 0,
            instance: None,
            last: None,
            previous_log: None,
            backoff: CrashLoopBackoff::default(),
            image_backoff: ImagePullBackoff::default(),
            pull_backoff_at: None,
            waiting: None,
            retry_at: None,
            succeeded: false,
            image_id: String::new(),
        }
    }

    /// A restartable init container (KEP-753 native sidecar): started in init order, then
    /// kept running next to the app containers whatever the pod's restartPolicy.
    pub(super) fn sidecar(&self) -> bool {
        self.kind == ContainerKind::Init
            && self.container.restart_policy.as_deref() == Some("Always")
    }

    /// Running, its postStart hook done and its startup probe (if any) passed.
    pub(super) fn started(&self) -> bool {
        self.instance
            .as_ref()
            .is_some_and(|i| !i.id.is_empty() && !i.health.post_start_pending && i.health.started)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum SandboxPhase {
    Pending,
    Creating,
    Ready,
    Failed { message: String },
}

/// A pod that should run.
#[derive(Debug)]
pub(super) struct PodWorker {
    pub(super) spec: StaticPod,
    pub(super) uid: String,
    pub(super) pod: Arc<Pod>,
    pub(super) sandbox: SandboxPhase,
    pub(super) sandbox_retry_at: Option<Instant>,
    /// Sandbox creations that failed in a row (the retry waits 10 s, doubling to 5 min).
    pub(super) sandbox_failures: u32,
    /// The pod's IPs from its network (its sandbox's), IPv4 first; empty without one.
    pub(super) pod_ips: Vec<String>,
    pub(super) slots: Vec<Slot>,
    /// The uid of a previous generation still being removed: nothing starts before it is gone.
    pub(super) blocked_by: Option<String>,
    pub(super) start_time: Option<String>,
    /// When this pod generation was first seen (metadata.creationTimestamp).
    pub(super) created: String,
    pub(super) conditions: BTreeMap<&'static str, (bool, String)>,
    /// The pod can no longer make progress (init failed under restartPolicy Never...).
    pub(super) failed: bool,
    /// Not admitted (does not fit the node): (reason, message); nothing is started.
    pub(super) rejected: Option<(PodReason, String)>,
    /// Killed for running longer than `activeDeadlineSeconds` (`failed` is set too).
    pub(super) deadline_exceeded: bool,
    /// Evicted by the eviction manager: stopped, phase Failed, reason Evicted, until its
    /// pressure has cleared (see `sync::eviction`).
    pub(super) evicted: Option<eviction::Evicted>,
    /// How often this pod generation was evicted (the wait before it starts again doubles).
    pub(super) evictions: u32,
    /// When this generation could start: created, or its previous generation gone (the
    /// rollback deadline runs from here).
    pub(super) since: Instant,
    /// This generation proved Ready (see `rollback::proven_ready`): the pod's last Ready one.
    pub(super) was_ready: bool,
    /// When the loop first saw this generation (`kubelet_pod_start_duration_seconds` runs
    /// from here).
    pub(super) seen: Instant,
    /// Its start duration is recorded (or it was re-adopted running: nothing to record).
    pub(super) start_recorded: bool,
}

/// The pod workers by full name (`namespace/name`), and the exits that came early.
#[derive(Debug, Default)]
pub(super) struct PodWorkers {
    pods: BTreeMap<String, PodWorker>,
    /// Exits reported before the start job's result that names their container (a container
    /// that ends within milliseconds, reported by the runtime's exit watcher while the worker
    /// thread that started it has not sent its result yet): container id, pod uid, record;
    /// applied when that result arrives, oldest dropped past [`EARLY_EXITS`].
    early_exits: VecDeque<(String, String, ExitRecord)>,
}

impl PodWorkers {
    pub(super) fn get(&self, name: &str) -> Option<&PodWorker> {
        self.pods.get(name)
    }

    pub(super) fn get_mut(&mut self, name: &str) -> Option<&mut PodWorker> {
        self.pods.get_mut(name)
    }

    pub(super) fn insert(&mut self, name: String, w: PodWorker) {
        self.pods.insert(name, w);
    }

    pub(super) fn remove(&mut self, name: &str) -> Option<PodWorker> {
        self.pods.remove(name)
    }

    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.pods.contains_key(name)
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &String> {
        self.pods.keys()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &PodWorker> {
        self.pods.values()
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut PodWorker> {
        self.pods.values_mut()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&String, &PodWorker)> {
        self.pods.iter()
    }

    /// The full name of the pod whose generation `uid` has a worker.
    pub(super) fn name_of(&self, uid: &str) -> Option<String> {
        self.pods
            .iter()
            .find(|(_, w)| w.uid == uid)
            .map(|(n, _)| n.clone())
    }

    /// The worker of pod generation `uid`, and its pod's full name.
    pub(super) fn by_uid_mut(&mut self, uid: &str) -> Option<(&String, &mut PodWorker)> {
        self.pods.iter_mut().find(|(_, w)| w.uid == uid)
    }

    /// Keeps an exit the loop cannot place yet: container `id` of pod `uid`.
    pub(super) fn keep_early_exit(&mut self, id: &str, uid: &str, exit: ExitRecord) {
        if self.early_exits.len() >= EARLY_EXITS {
            self.early_exits.pop_front();
        }
        self.early_exits
            .push_back((id.to_string(), uid.to_string(), exit));
    }

    /// The exit kept for container `id`, if one came early: (id, pod uid, record).
    pub(super) fn take_early_exit(&mut self, id: &str) -> Option<(String, String, ExitRecord)> {
        let i = self.early_exits.iter().position(|(c, _, _)| c == id)?;
        self.early_exits.remove(i)
    }
}

/// What the previous run left on disk, by pod uid, not yet claimed by a worker: a worker of
/// the uid re-adopts it; once the sources reported, what no worker claimed is removed.
#[derive(Debug, Default)]
pub(super) struct Leftovers {
    /// Containers found at start.
    pub(super) containers: BTreeMap<String, Vec<ContainerInfo>>,
    /// Sandboxes found at start: (creation time, pod IPs).
    pub(super) sandboxes: BTreeMap<String, (String, Vec<String>)>,
    /// Pods with data on disk (emptyDir volumes): after a reboot these have no sandbox.
    pub(super) data: BTreeSet<String>,
    /// Desired-pod records found at start. A record no worker claims once the sources
    /// reported (a generation replaced while the daemon was down, or by a power cut before
    /// its removal finished) is deleted.
    pub(super) records: BTreeSet<String>,
}

impl Leftovers {
    /// Whether anything of pod `uid` was found on disk (its pod ran before this run).
    pub(super) fn has(&self, uid: &str) -> bool {
        self.containers.contains_key(uid)
            || self.sandboxes.contains_key(uid)
            || self.data.contains(uid)
    }
}
