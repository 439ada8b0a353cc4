//! sync: the sync loop, the one thread that owns desired and actual pod state (the kubelet's
//! syncLoop + pod workers, without the god object).
//!
//! Inputs arrive as typed [`SyncEvent`]s on one channel: source updates (files, URL), container
//! exits from the runtime's exit watcher (event driven, never polled), and the results of slow
//! work done by the [`executor`] pool. Timers (crash-loop backoff, stop grace periods) are
//! deadlines the loop computes itself; time comes from a [`Clock`] so the whole state machine
//! is unit-tested with a fake clock and a recording fake runtime.
//!
//! Submodules: [`podconfig`] merges sources into desired pods (last-known-good, duplicates);
//! [`backoff`] is the crash-loop backoff; [`executor`] runs jobs off-thread; [`podstatus`]
//! computes v1 PodStatus in the kubelet's vocabulary; [`store`] persists the desired pods so a
//! restarted daemon re-adopts its containers even when a source is down.

mod admission;
pub mod backoff;
pub mod executor;
pub mod podconfig;
pub mod podstatus;
mod probes;
pub mod store;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Container, Pod};

use self::backoff::{CrashLoopBackoff, ImagePullBackoff};
use self::executor::{Executor, ImageOutcome, Job, JobResult, StartFailure};
use self::podconfig::{ConfigNotice, PodConfig};
use self::store::DesiredStore;
use crate::pod::static_pod::{SourceKind, StaticPod};
use crate::runtime::{
    ContainerInfo, ContainerKind, ContainerState, ExitRecord, Runtime, RuntimeEvent,
};
use crate::sources::SourceEvent;
use crate::status::{EventLog, EventType, PodView, Snapshot, SnapshotCell};

/// Everything the sync loop reacts to.
#[derive(Debug)]
pub enum SyncEvent {
    Source(SourceEvent),
    Runtime(RuntimeEvent),
    Work(Box<JobResult>),
    /// A probe result that changes something or must be recorded (prober thread).
    Probe(Box<crate::prober::scheduler::ProbeUpdate>),
    /// Stop the loop (the daemon is exiting; containers keep running).
    Shutdown,
}

/// Time, as the sync loop sees it.
pub trait Clock: Send {
    fn now(&self) -> Instant;
    fn wall(&self) -> SystemTime;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Settings of the sync loop.
#[derive(Debug, Clone)]
pub struct SyncConfig {
    pub node_name: String,
    /// Which sources must report before pods that are no longer defined are stopped.
    pub expect_file_source: bool,
    pub expect_url_source: bool,
    /// After this long the sources are considered ready anyway.
    pub sources_ready_timeout: Duration,
    /// Where desired pods are persisted (`<root>/static-pods`).
    pub store_dir: PathBuf,
    pub host_ip: String,
    /// Node allocatable for admission; `None` admits every pod.
    pub allocatable: Option<crate::cgroups::resources::Amounts>,
    /// What the node offers for confinement: manifests are validated against it.
    pub security: crate::security::NodeSecurity,
}

/// How often manifests refused for the node's state (a missing profile) are checked again.
const RECHECK_PERIOD: Duration = Duration::from_secs(20);

#[derive(Debug, Clone)]
struct Finished {
    id: String,
    exit: ExitRecord,
    at: Instant,
    log_path: PathBuf,
}

#[derive(Debug, Clone)]
struct Instance {
    /// Empty while the start job is in flight.
    id: String,
    started_at: String,
    /// The image's STOPSIGNAL (SIGTERM by default), as the monitor recorded it.
    stop_signal: i32,
    log_path: PathBuf,
    /// Probe and hook state of this instance.
    health: probes::Health,
}

#[derive(Debug, Clone)]
struct Slot {
    container: Container,
    kind: ContainerKind,
    /// Instances started so far; the next one gets this as its restart count (log file name)
    /// and the status shows one less.
    instances_started: u32,
    instance: Option<Instance>,
    last: Option<Finished>,
    previous_log: Option<PathBuf>,
    backoff: CrashLoopBackoff,
    /// Backoff of failed pulls of the container's image.
    image_backoff: ImagePullBackoff,
    /// When an ErrImagePull waiting reason turns into ImagePullBackOff.
    pull_backoff_at: Option<Instant>,
    /// Why it is not running: (reason, message).
    waiting: Option<(String, String)>,
    retry_at: Option<Instant>,
    /// An init container that completed successfully.
    succeeded: bool,
}

impl Slot {
    fn new(container: Container, kind: ContainerKind) -> Slot {
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
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SandboxPhase {
    Pending,
    Creating,
    Ready,
    Failed { message: String },
}

/// A pod that should run.
#[derive(Debug)]
struct PodWorker {
    spec: StaticPod,
    uid: String,
    pod: Arc<Pod>,
    sandbox: SandboxPhase,
    sandbox_retry_at: Option<Instant>,
    slots: Vec<Slot>,
    /// The uid of a previous generation still being removed: nothing starts before it is gone.
    blocked_by: Option<String>,
    start_time: Option<String>,
    /// When this pod generation was first seen (metadata.creationTimestamp).
    created: String,
    conditions: BTreeMap<&'static str, (bool, String)>,
    /// The pod can no longer make progress (init failed under restartPolicy Never...).
    failed: bool,
    /// Not admitted (does not fit the node): (reason, message); nothing is started.
    rejected: Option<(String, String)>,
}

/// A pod generation being stopped and removed.
#[derive(Debug)]
struct Removal {
    /// Running containers: id -> stop signal.
    running: BTreeMap<String, i32>,
    /// Start jobs still in flight for this uid.
    pending_starts: u32,
    /// A sandbox creation still in flight for this uid: removing before it ends would leave
    /// the sandbox it then creates (mounts, cgroups) behind.
    sandbox_pending: bool,
    grace: Duration,
    kill_at: Option<Instant>,
    killed: bool,
    remove_submitted: bool,
    /// Shown as Terminating until gone, when the whole pod goes away (not on replacement).
    view: Option<PodView>,
    /// Whether the desired-pod record must be deleted once removed.
    forget_store: bool,
    /// `namespace/name` of the pod (or its uid for orphans), for events.
    name: String,
    /// Containers whose preStop hook runs: their stop signal waits for it.
    hooks_pending: BTreeSet<String>,
}

/// The sync loop.
pub struct SyncLoop {
    cfg: SyncConfig,
    config: PodConfig,
    runtime: Arc<dyn Runtime>,
    executor: Box<dyn Executor>,
    clock: Box<dyn Clock>,
    store: DesiredStore,
    workers: BTreeMap<String, PodWorker>,
    removals: BTreeMap<String, Removal>,
    /// Containers found on disk at start, by pod uid, not yet claimed by a worker.
    adopted: BTreeMap<String, Vec<ContainerInfo>>,
    /// Sandboxes found on disk at start: pod uid -> creation time.
    sandboxes_on_disk: BTreeMap<String, String>,
    /// Pods with data on disk at start (emptyDir volumes), not yet claimed by a worker: after
    /// a reboot these have no sandbox; unclaimed ones are removed once the sources reported.
    data_on_disk: BTreeSet<String>,
    /// Uids of the desired-pod records found at start, not yet claimed by a worker. A record
    /// no worker claims once the sources reported (a generation replaced while the daemon was
    /// down, or by a power cut before its removal finished) is deleted.
    persisted: BTreeSet<String>,
    events: EventLog,
    snapshots: SnapshotCell,
    file_ready: bool,
    url_ready: bool,
    started: Instant,
    reported_dups: BTreeSet<(String, String)>,
    dirty: bool,
    probe_state: probes::ProbeState,
    /// When refused manifests are checked again next (see `PodConfig::recheck`).
    next_recheck: Instant,
    /// Every turnover is recorded here (the daemon's liveness signal).
    monitor: crate::health::SyncLoopMonitor,
    /// systemd notifications (`Type=notify`), when started by systemd.
    service: Option<crate::systemd::ServiceReporter>,
    /// The `STATUS=` line of the latest published snapshot.
    status_line: String,
    /// Test hook: the loop stops turning over once this file exists.
    wedge_file: Option<PathBuf>,
}

fn rfc3339(t: SystemTime) -> String {
    crate::logs::timestamp::format_timestamp(t)
}

fn grace_of(pod: &Pod) -> Duration {
    Duration::from_secs(
        pod.spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
            .unwrap_or(30)
            .max(0) as u64,
    )
}

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

impl SyncLoop {
    /// Builds the loop: loads the desired pods persisted by a previous run, lists what the
    /// runtime has on disk (re-adopting running containers) and publishes a first snapshot.
    pub fn new(
        cfg: SyncConfig,
        runtime: Arc<dyn Runtime>,
        executor: Box<dyn Executor>,
        clock: Box<dyn Clock>,
        snapshots: SnapshotCell,
    ) -> Result<SyncLoop, crate::runtime::RuntimeError> {
        let store = DesiredStore::new(cfg.store_dir.clone());
        let mut config = PodConfig::new(&cfg.node_name, cfg.security.clone());
        let persisted = store.recover();
        let persisted_uids = persisted
            .iter()
            .filter_map(|p| p.pod.metadata.uid.clone())
            .collect();
        config.seed(persisted, |p| {
            if p.source.starts_with("http://") || p.source.starts_with("https://") {
                SourceKind::Http
            } else {
                SourceKind::File
            }
        });
        let mut adopted: BTreeMap<String, Vec<ContainerInfo>> = BTreeMap::new();
        for c in runtime.list_containers()? {
            adopted.entry(c.meta.pod_uid.clone()).or_default().push(c);
        }
        let sandboxes_on_disk = runtime
            .list_pod_sandboxes()?
            .into_iter()
            .map(|s| (s.pod_uid, s.created_at))
            .collect();
        let data_on_disk = runtime.list_pod_data()?.into_iter().collect();
        let started = clock.now();
        let mut s = SyncLoop {
            file_ready: !cfg.expect_file_source,
            url_ready: !cfg.expect_url_source,
            cfg,
            config,
            runtime,
            executor,
            clock,
            store,
            workers: BTreeMap::new(),
            removals: BTreeMap::new(),
            adopted,
            sandboxes_on_disk,
            data_on_disk,
            persisted: persisted_uids,
            events: EventLog::new(1000),
            probe_state: probes::ProbeState::default(),
            snapshots,
            started,
            reported_dups: BTreeSet::new(),
            dirty: true,
            next_recheck: started + RECHECK_PERIOD,
            monitor: crate::health::SyncLoopMonitor::new(started),
            service: None,
            status_line: String::new(),
            wedge_file: None,
        };
        s.reconcile();
        s.publish();
        Ok(s)
    }

    fn now_str(&self) -> String {
        rfc3339(self.clock.wall())
    }

    fn sources_ready(&self) -> bool {
        (self.file_ready && self.url_ready)
            || self.clock.now().saturating_duration_since(self.started)
                >= self.cfg.sources_ready_timeout
    }

    fn event(
        &mut self,
        type_: EventType,
        pod: &str,
        container: Option<&str>,
        reason: &str,
        message: &str,
    ) {
        let now = self.now_str();
        if self
            .events
            .record(type_, pod, container, reason, message, &now)
        {
            let what = match container {
                Some(c) => format!("{pod} {c}"),
                None => pod.to_string(),
            };
            match type_ {
                EventType::Normal => log::info!("{what}: {reason}: {message}"),
                EventType::Warning => log::warn!("{what}: {reason}: {message}"),
            }
        }
        self.dirty = true;
    }

    /// Handles one event, then brings every pod closer to its desired state.
    pub fn handle(&mut self, ev: SyncEvent) {
        match ev {
            SyncEvent::Source(se) => self.on_source(se),
            SyncEvent::Runtime(RuntimeEvent::ContainerExited { id, pod_uid, exit }) => {
                self.on_exit(&id, &pod_uid, exit)
            }
            SyncEvent::Work(r) => self.on_work(*r),
            SyncEvent::Probe(u) => self.on_probe(*u),
            SyncEvent::Shutdown => {}
        }
        self.reconcile();
        self.publish();
    }

    /// Called when a deadline passed (or periodically): advances timers.
    pub fn tick(&mut self) {
        let now = self.clock.now();
        if now >= self.next_recheck {
            self.next_recheck = now + RECHECK_PERIOD;
            if self.config.has_refused() {
                let notices = self.config.recheck(&self.now_str());
                self.on_notices(notices);
            }
        }
        self.reconcile();
        self.publish();
    }

    /// The earliest time something is due (a restart, a SIGKILL after grace...).
    pub fn next_deadline(&self) -> Option<Instant> {
        let mut d: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                d = Some(d.map_or(t, |x| x.min(t)));
            }
        };
        for w in self.workers.values() {
            consider(w.sandbox_retry_at);
            for s in &w.slots {
                if s.instance.is_none() {
                    consider(s.retry_at);
                    consider(s.pull_backoff_at);
                }
            }
        }
        for r in self.removals.values() {
            if !r.killed {
                consider(r.kill_at);
            }
        }
        consider(self.container_kill_deadline());
        if !(self.file_ready && self.url_ready) {
            consider(Some(self.started + self.cfg.sources_ready_timeout));
        }
        if self.config.has_refused() {
            consider(Some(self.next_recheck));
        }
        d
    }

    fn on_source(&mut self, se: SourceEvent) {
        match &se {
            SourceEvent::FileScanComplete { .. } | SourceEvent::DirError { .. } => {
                self.file_ready = true
            }
            SourceEvent::UrlChanged { .. } | SourceEvent::UrlError { .. } => self.url_ready = true,
            _ => {}
        }
        let now = self.now_str();
        let notices = self.config.apply(se, &now);
        self.on_notices(notices);
    }

    /// Records what the configuration merge said: source errors as events, recoveries.
    fn on_notices(&mut self, notices: Vec<ConfigNotice>) {
        for n in notices {
            match n {
                ConfigNotice::SourceError {
                    source,
                    message,
                    pods,
                    repeated,
                } => {
                    if repeated {
                        continue;
                    }
                    if pods.is_empty() {
                        self.event(
                            EventType::Warning,
                            "",
                            None,
                            "SourceError",
                            &format!("{source}: {message}"),
                        );
                    }
                    for p in pods {
                        self.event(
                            EventType::Warning,
                            &p,
                            None,
                            "SourceError",
                            &format!("{message}; the last valid manifest keeps running"),
                        );
                    }
                }
                ConfigNotice::SourceRecovered { source } => {
                    log::info!("{source}: manifest is valid again");
                    self.dirty = true;
                }
                ConfigNotice::Duplicate { .. } => {}
            }
        }
    }

    /// Compares desired and actual state and submits the work that closes the gap.
    fn reconcile(&mut self) {
        let (desired, dups) = self.config.desired();
        for d in dups {
            if let ConfigNotice::Duplicate {
                full_name,
                kept,
                refused,
            } = d
            {
                if self
                    .reported_dups
                    .insert((full_name.clone(), refused.clone()))
                {
                    self.event(
                        EventType::Warning,
                        &full_name,
                        None,
                        "DuplicatePod",
                        &format!(
                            "{refused} defines {full_name}, already defined by {kept}: refused"
                        ),
                    );
                }
            }
        }
        let ready = self.sources_ready();
        // Pods that are no longer desired, or whose spec changed.
        let names: Vec<String> = self.workers.keys().cloned().collect();
        for name in names {
            let Some(w) = self.workers.get(&name) else {
                continue;
            };
            let (w_uid, w_meta_hash) = (w.uid.clone(), w.spec.meta_hash.clone());
            match desired.get(&name) {
                Some(sp)
                    if sp.pod.metadata.uid.as_deref() == Some(w_uid.as_str())
                        && sp.meta_hash != w_meta_hash =>
                {
                    self.update_metadata(&name, sp.clone());
                }
                Some(sp) if sp.pod.metadata.uid.as_deref() == Some(w_uid.as_str()) => {}
                Some(sp) => {
                    let msg = format!(
                        "manifest spec changed in {}: replacing pod (uid {} -> {})",
                        sp.source,
                        w_uid,
                        sp.pod.metadata.uid.clone().unwrap_or_default()
                    );
                    self.event(EventType::Normal, &name, None, "Replaced", &msg);
                    let old_uid = w_uid;
                    self.begin_removal(&name, false);
                    self.start_worker(sp.clone(), Some(old_uid));
                }
                None if ready => {
                    self.event(
                        EventType::Normal,
                        &name,
                        None,
                        "Killing",
                        "manifest removed: stopping pod",
                    );
                    self.begin_removal(&name, true);
                }
                None => {}
            }
        }
        // Pods already running from a previous run first, so admission counts them before
        // judging new pods.
        let mut order: Vec<(&String, &StaticPod)> = desired.iter().collect();
        order.sort_by_key(|(_, sp)| {
            !sp.pod.metadata.uid.as_deref().is_some_and(|u| {
                self.adopted.contains_key(u)
                    || self.sandboxes_on_disk.contains_key(u)
                    || self.data_on_disk.contains(u)
            })
        });
        for (name, sp) in order {
            if !self.workers.contains_key(name) {
                let blocked = self
                    .removals
                    .keys()
                    .find(|uid| {
                        self.removals[*uid]
                            .view
                            .as_ref()
                            .is_some_and(|v| crate::status::full_name(&v.pod) == *name)
                    })
                    .cloned();
                self.start_worker(sp.clone(), blocked);
            }
        }
        if ready {
            // Containers, sandboxes and pod data on disk that no desired pod claims.
            let orphan_uids: Vec<String> = self
                .adopted
                .keys()
                .chain(self.sandboxes_on_disk.keys())
                .chain(self.data_on_disk.iter())
                .filter(|u| !self.removals.contains_key(*u))
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            for uid in orphan_uids {
                let containers = self.adopted.remove(&uid).unwrap_or_default();
                self.sandboxes_on_disk.remove(&uid);
                self.data_on_disk.remove(&uid);
                let mut running = BTreeMap::new();
                for c in containers {
                    if !matches!(c.state, ContainerState::Exited(_)) {
                        running.insert(c.meta.id.clone(), c.meta.stop_signal);
                    }
                }
                log::info!("pod {uid}: not defined by any source: removing its containers");
                self.persisted.remove(&uid);
                self.removals.insert(
                    uid.clone(),
                    Removal {
                        running,
                        pending_starts: 0,
                        sandbox_pending: false,
                        grace: Duration::from_secs(30),
                        kill_at: None,
                        killed: false,
                        remove_submitted: false,
                        view: None,
                        forget_store: true,
                        name: uid,
                        hooks_pending: BTreeSet::new(),
                    },
                );
            }
        }
        if ready {
            // Desired-pod records nothing claimed: nothing of them is on disk either.
            for uid in std::mem::take(&mut self.persisted) {
                if self.removals.contains_key(&uid) {
                    continue;
                }
                log::info!("pod {uid}: no source defines it any more: removing its record");
                if let Err(e) = self.store.remove(&uid) {
                    log::warn!("pod {uid}: {e}");
                }
            }
        }
        let names: Vec<String> = self.workers.keys().cloned().collect();
        for name in names {
            self.sync_worker(&name);
        }
        let uids: Vec<String> = self.removals.keys().cloned().collect();
        for uid in uids {
            self.sync_removal(&uid);
        }
        self.container_kill_timers();
        self.sync_probes();
    }

    fn update_metadata(&mut self, name: &str, sp: StaticPod) {
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        let mut pod = (*w.pod).clone();
        pod.metadata.labels = sp.pod.metadata.labels.clone();
        pod.metadata.annotations = sp.pod.metadata.annotations.clone();
        w.pod = Arc::new(pod);
        w.spec = sp;
        if let Err(e) = self.store.save(&w.spec) {
            log::warn!("{name}: {e}");
        }
        self.event(
            EventType::Normal,
            name,
            None,
            "MetadataUpdated",
            "labels/annotations changed: nothing restarted",
        );
    }

    fn start_worker(&mut self, sp: StaticPod, blocked_by: Option<String>) {
        let uid = sp.pod.metadata.uid.clone().unwrap_or_default();
        let name = sp.full_name.clone();
        let spec = sp.pod.spec.clone().unwrap_or_default();
        let mut slots: Vec<Slot> = spec
            .init_containers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|c| Slot::new(c, ContainerKind::Init))
            .collect();
        slots.extend(
            spec.containers
                .iter()
                .cloned()
                .map(|c| Slot::new(c, ContainerKind::App)),
        );
        let mut w = PodWorker {
            pod: Arc::new(sp.pod.clone()),
            spec: sp,
            uid: uid.clone(),
            sandbox: SandboxPhase::Pending,
            sandbox_retry_at: None,
            slots,
            blocked_by,
            start_time: None,
            created: self.now_str(),
            conditions: BTreeMap::new(),
            failed: false,
            rejected: None,
        };
        // Re-adopt what a previous run left: the sandbox and the containers of this uid.
        self.data_on_disk.remove(&uid);
        self.persisted.remove(&uid);
        if let Some(created) = self.sandboxes_on_disk.remove(&uid) {
            w.sandbox = SandboxPhase::Ready;
            w.start_time = Some(created.clone());
            w.created = created;
        }
        if let Some(mut found) = self.adopted.remove(&uid) {
            found.sort_by_key(|c| c.meta.restart_count);
            let now = self.clock.now();
            // Live containers beyond the first of a slot (a crash left two): stopped below.
            let mut duplicates: Vec<(String, String)> = Vec::new();
            for c in found {
                let Some(slot) = w
                    .slots
                    .iter_mut()
                    .find(|s| s.container.name == c.meta.container_name)
                else {
                    continue;
                };
                if let Some(last) = &slot.last {
                    slot.previous_log = Some(last.log_path.clone());
                }
                slot.instances_started = c.meta.restart_count + 1;
                let live = slot.instance.as_ref().map(|i| i.id.clone());
                match c.state {
                    ContainerState::Exited(exit) => {
                        if slot.kind == ContainerKind::Init && exit.exit_code == 0 {
                            slot.succeeded = true;
                        }
                        slot.last = Some(Finished {
                            id: c.meta.id.clone(),
                            exit,
                            at: now,
                            log_path: c.meta.log_path.clone(),
                        });
                        // A live container is never forgotten for an exited one: it would run
                        // on untracked while a new instance is started next to it.
                        if live.is_none() {
                            slot.instance = None;
                        }
                    }
                    // A second live container of one slot: the newest stays, the other is
                    // stopped (overwriting it would leave it running, watched by nobody).
                    _ if live.is_some() => {
                        if let Some(old) = live {
                            duplicates.push((slot.container.name.clone(), old));
                        }
                        slot.instance = Some(Instance {
                            id: c.meta.id.clone(),
                            started_at: match c.state {
                                ContainerState::Running { started_at, .. } => started_at,
                                _ => String::new(),
                            },
                            stop_signal: c.meta.stop_signal,
                            log_path: c.meta.log_path.clone(),
                            health: probes::Health::new(&slot.container),
                        });
                    }
                    ContainerState::Running { started_at, .. } => {
                        slot.instance = Some(Instance {
                            id: c.meta.id.clone(),
                            started_at,
                            stop_signal: c.meta.stop_signal,
                            log_path: c.meta.log_path.clone(),
                            health: probes::Health::new(&slot.container),
                        });
                    }
                    ContainerState::Created => {
                        slot.instance = Some(Instance {
                            id: c.meta.id.clone(),
                            started_at: String::new(),
                            stop_signal: c.meta.stop_signal,
                            log_path: c.meta.log_path.clone(),
                            health: probes::Health::new(&slot.container),
                        });
                    }
                }
            }
            log::info!("{name}: re-adopted containers of pod {uid}");
            for (cname, id) in duplicates {
                log::warn!("{name} {cname}: duplicate container {id}: stopping it");
                if let Err(e) = self.runtime.signal_container(&id, libc::SIGKILL) {
                    log::warn!("{name} {cname}: stop {id}: {e}");
                }
            }
        }
        // The kubelet's restart count after a runtime lost a container's status: one above the
        // highest log file, so no instance appends to an earlier instance's log.
        for slot in &mut w.slots {
            if let Some(n) = self
                .runtime
                .restart_count_from_logs(&w.pod, &slot.container.name)
            {
                slot.instances_started = slot.instances_started.max(n.saturating_add(1));
            }
        }
        let ran = w
            .slots
            .iter()
            .any(|s| s.instance.is_some() || s.last.is_some());
        let adopted = w.sandbox == SandboxPhase::Ready || ran;
        self.admit_worker(&name, &mut w, adopted);
        if let Err(e) = self.store.save(&w.spec) {
            log::warn!("{name}: {e}");
        }
        // Containers but no live sandbox (a reboot took it, or its namespaces died): the
        // kubelet's "sandbox changed".
        let changed = ran && w.sandbox != SandboxPhase::Ready;
        self.workers.insert(name.clone(), w);
        if changed {
            self.sandbox_changed(&name, "no live sandbox for the pod's containers");
        }
        self.dirty = true;
    }

    /// The kubelet's reaction to a pod sandbox that is gone or not live ("Pod sandbox changed,
    /// it will be killed and re-created"): live containers are stopped, init containers run
    /// again (not under restartPolicy Never, where the kubelet leaves a pod that has run as it
    /// is), and a new sandbox is created once no container of the pod runs.
    fn sandbox_changed(&mut self, name: &str, why: &str) {
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        w.sandbox = SandboxPhase::Pending;
        w.sandbox_retry_at = None;
        let never = restart_policy(&w.pod) == "Never";
        let mut live = Vec::new();
        for s in &mut w.slots {
            if s.kind == ContainerKind::Init && !never {
                s.succeeded = false;
            }
            if let Some(i) = s.instance.as_ref().filter(|i| !i.id.is_empty()) {
                live.push(i.id.clone());
            }
        }
        log::debug!("{name}: sandbox changed ({why})");
        self.event(
            EventType::Normal,
            name,
            None,
            "SandboxChanged",
            "Pod sandbox changed, it will be killed and re-created.",
        );
        for id in live {
            self.begin_container_kill(name, &id, None);
        }
    }

    /// Moves a worker's containers into a removal (stop, then remove).
    fn begin_removal(&mut self, name: &str, whole_pod: bool) {
        let Some(w) = self.workers.remove(name) else {
            return;
        };
        let mut running = BTreeMap::new();
        let mut pending_starts = 0;
        for s in &w.slots {
            if let Some(i) = &s.instance {
                if i.id.is_empty() {
                    pending_starts += 1;
                } else {
                    running.insert(i.id.clone(), i.stop_signal);
                }
            }
        }
        let (hook_jobs, hooks_pending) = self.pre_stop_jobs(&w);
        for j in hook_jobs {
            self.executor.submit(j);
        }
        let view = if whole_pod {
            let mut v = self.view_of(&w);
            v.pod.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::try_from(self.clock.wall()).unwrap_or_default(),
                ));
            Some(v)
        } else {
            None
        };
        self.removals.insert(
            w.uid.clone(),
            Removal {
                running,
                pending_starts,
                sandbox_pending: w.sandbox == SandboxPhase::Creating,
                grace: grace_of(&w.pod),
                kill_at: None,
                killed: false,
                remove_submitted: false,
                view,
                forget_store: true,
                name: name.to_string(),
                hooks_pending,
            },
        );
        self.dirty = true;
    }

    fn sync_removal(&mut self, uid: &str) {
        let now = self.clock.now();
        let Some(r) = self.removals.get_mut(uid) else {
            return;
        };
        if !r.running.is_empty() {
            if r.kill_at.is_none() {
                r.kill_at = Some(now + r.grace);
                // Containers with a running preStop hook get their stop signal after it.
                for (id, sig) in r
                    .running
                    .iter()
                    .filter(|(id, _)| !r.hooks_pending.contains(*id))
                {
                    if let Err(e) = self.runtime.signal_container(id, *sig) {
                        log::warn!("pod {uid}: stop {id}: {e}");
                    }
                }
            } else if !r.killed
                && !r.hooks_pending.is_empty()
                && r.kill_at.is_some_and(|t| now >= t)
            {
                // preStop hooks used the whole grace period: stop signal now, SIGKILL soon.
                for id in std::mem::take(&mut r.hooks_pending) {
                    if let Some(sig) = r.running.get(&id) {
                        if let Err(e) = self.runtime.signal_container(&id, *sig) {
                            log::warn!("pod {uid}: stop {id}: {e}");
                        }
                    }
                }
                r.kill_at = Some(now + probes::MIN_GRACE);
            } else if !r.killed && r.kill_at.is_some_and(|t| now >= t) {
                r.killed = true;
                for id in r.running.keys() {
                    if let Err(e) = self.runtime.signal_container(id, libc::SIGKILL) {
                        log::warn!("pod {uid}: kill {id}: {e}");
                    }
                }
            }
            return;
        }
        if r.pending_starts > 0 || r.sandbox_pending || r.remove_submitted {
            return;
        }
        r.remove_submitted = true;
        self.executor.submit(Job::RemovePod {
            uid: uid.to_string(),
        });
    }

    fn sync_worker(&mut self, name: &str) {
        let now = self.clock.now();
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        if w.rejected.is_some() {
            return;
        }
        if let Some(b) = &w.blocked_by {
            if self.removals.contains_key(b) {
                return;
            }
            w.blocked_by = None;
        }
        // The same uid is still being removed (a manifest edited back to an earlier content
        // while that generation stops, or a pod re-added while its orphaned containers are
        // removed): that removal kills and deletes every container and the sandbox of the
        // uid, so nothing may be created for it before it is done.
        if self.removals.contains_key(&w.uid) {
            return;
        }
        match &w.sandbox {
            SandboxPhase::Ready => {}
            SandboxPhase::Creating => return,
            SandboxPhase::Pending | SandboxPhase::Failed { .. } => {
                if w.sandbox_retry_at.is_some_and(|t| now < t) {
                    return;
                }
                // A sandbox made again: not while a container of the old one still runs (or
                // a start into it is in flight).
                if w.slots.iter().any(|s| s.instance.is_some()) {
                    return;
                }
                w.sandbox = SandboxPhase::Creating;
                self.executor.submit(Job::CreateSandbox {
                    uid: w.uid.clone(),
                    pod: Arc::clone(&w.pod),
                });
                return;
            }
        }
        if w.failed {
            return;
        }
        let policy = restart_policy(&w.pod).to_string();
        let mut jobs = Vec::new();
        let mut notes: Vec<(EventType, Option<String>, &'static str, String)> = Vec::new();
        // Init containers: one at a time, in order, each to successful completion.
        let mut inits_done = true;
        for s in w.slots.iter_mut().filter(|s| s.kind == ContainerKind::Init) {
            if s.succeeded {
                continue;
            }
            inits_done = false;
            if s.instance.is_some() {
                break;
            }
            if let Some(last) = &s.last {
                if policy == "Never" {
                    w.failed = true;
                    notes.push((
                        EventType::Warning,
                        Some(s.container.name.clone()),
                        "Failed",
                        format!(
                            "init container exited with {}; restartPolicy Never: the pod failed",
                            last.exit.exit_code
                        ),
                    ));
                    break;
                }
            }
            if let Some(note) = pull_backoff_note(s, now) {
                notes.push(note);
            }
            if let Some(job) = start_if_due(&w.uid, &w.pod, s, now) {
                jobs.push(job);
            }
            break;
        }
        if inits_done && !w.failed {
            for s in w.slots.iter_mut().filter(|s| s.kind == ContainerKind::App) {
                if s.instance.is_some() {
                    continue;
                }
                let restart = s
                    .last
                    .as_ref()
                    .is_none_or(|l| backoff::should_restart(s.kind, &policy, l.exit.exit_code));
                if !restart {
                    s.waiting = None;
                    continue;
                }
                if let Some(note) = pull_backoff_note(s, now) {
                    notes.push(note);
                }
                if let Some(job) = start_if_due(&w.uid, &w.pod, s, now) {
                    jobs.push(job);
                }
            }
        }
        for (t, c, reason, msg) in notes {
            self.event(t, name, c.as_deref(), reason, &msg);
        }
        for j in jobs {
            self.executor.submit(j);
            self.dirty = true;
        }
    }

    fn on_work(&mut self, r: JobResult) {
        match r {
            JobResult::ImagePulling { uid, name, image } => {
                if let Some(pod) = self.pod_name_of(&uid) {
                    let msg = format!("Pulling image {image:?}");
                    self.event(EventType::Normal, &pod, Some(&name), "Pulling", &msg);
                }
            }
            JobResult::ImageReady {
                uid,
                name,
                image,
                outcome,
            } => self.on_image_ready(&uid, &name, &image, outcome),
            JobResult::SandboxCreated { uid, result } => {
                // Submitted by a generation now being removed (a worker of the same uid waits
                // for that removal): its RemovePod tears this sandbox down.
                if let Some(r) = self.removals.get_mut(&uid) {
                    r.sandbox_pending = false;
                    self.dirty = true;
                    return;
                }
                let Some((name, w)) = self.workers.iter_mut().find(|(_, w)| w.uid == uid) else {
                    // The pod went away meanwhile, without a removal: remove the sandbox.
                    self.executor.submit(Job::RemovePod { uid });
                    return;
                };
                let name = name.clone();
                match result {
                    Ok(_) => {
                        w.sandbox = SandboxPhase::Ready;
                        w.sandbox_retry_at = None;
                        w.start_time = Some(rfc3339(self.clock.wall()));
                    }
                    Err(message) => {
                        w.sandbox = SandboxPhase::Failed {
                            message: message.clone(),
                        };
                        w.sandbox_retry_at = Some(self.clock.now() + Duration::from_secs(10));
                        self.event(
                            EventType::Warning,
                            &name,
                            None,
                            "FailedCreatePodSandBox",
                            &message,
                        );
                    }
                }
            }
            JobResult::ContainerStarted {
                uid,
                name: cname,
                result,
            } => self.on_started(&uid, &cname, result),
            JobResult::HookDone {
                uid,
                name,
                container_id,
                hook,
                what,
                result,
            } => self.on_hook_done(&uid, &name, &container_id, hook, &what, result),
            JobResult::PodRemoved { uid, result } => match result {
                Ok(()) => {
                    if let Some(r) = self.removals.remove(&uid) {
                        if r.forget_store {
                            if let Err(e) = self.store.remove(&uid) {
                                log::warn!("pod {uid}: {e}");
                            }
                        }
                    }
                    // A new generation with the same uid (a re-added manifest) keeps its record.
                    if let Some(w) = self.workers.values().find(|w| w.uid == uid) {
                        if let Err(e) = self.store.save(&w.spec) {
                            log::warn!("pod {uid}: {e}");
                        }
                    }
                    log::info!("pod {uid}: removed");
                }
                Err(message) => {
                    log::warn!("pod {uid}: removal failed, retrying: {message}");
                    if let Some(r) = self.removals.get_mut(&uid) {
                        r.remove_submitted = false;
                        // Its containers are listed again on the next attempt.
                        if let Ok(list) = self.runtime.list_containers() {
                            for c in list.into_iter().filter(|c| c.meta.pod_uid == uid) {
                                if !matches!(c.state, ContainerState::Exited(_)) {
                                    r.running.insert(c.meta.id, c.meta.stop_signal);
                                }
                            }
                        }
                    }
                }
            },
        }
        self.dirty = true;
    }

    fn pod_name_of(&self, uid: &str) -> Option<String> {
        self.workers
            .iter()
            .find(|(_, w)| w.uid == uid)
            .map(|(n, _)| n.clone())
    }

    fn on_image_ready(&mut self, uid: &str, cname: &str, image: &str, outcome: ImageOutcome) {
        let Some((name, w)) = self.workers.iter_mut().find(|(_, w)| w.uid == uid) else {
            return;
        };
        let name = name.clone();
        let msg = match outcome {
            ImageOutcome::AlreadyPresent => {
                format!("Container image {image:?} already present on machine")
            }
            ImageOutcome::Pulled {
                image: pulled,
                took,
            } => {
                if let Some(slot) = w.slots.iter_mut().find(|s| s.container.name == cname) {
                    slot.image_backoff.reset();
                    slot.pull_backoff_at = None;
                }
                format!(
                    "Successfully pulled image {image:?} in {:.3}s. Image size: {} bytes.",
                    took.as_secs_f64(),
                    pulled.size
                )
            }
        };
        self.event(EventType::Normal, &name, Some(cname), "Pulled", &msg);
    }

    fn on_started(
        &mut self,
        uid: &str,
        cname: &str,
        result: Result<Box<ContainerInfo>, StartFailure>,
    ) {
        let now = self.clock.now();
        if let Some(r) = self.removals.get_mut(uid) {
            r.pending_starts = r.pending_starts.saturating_sub(1);
            if let Ok(info) = result {
                // Started while its pod was going away: stop it right away.
                if let Err(e) = self
                    .runtime
                    .signal_container(&info.meta.id, info.meta.stop_signal)
                {
                    log::warn!("pod {uid}: {e}");
                }
                r.running.insert(info.meta.id, info.meta.stop_signal);
                r.kill_at = r.kill_at.or(Some(now + r.grace));
            }
            return;
        }
        let Some((name, w)) = self.workers.iter_mut().find(|(_, w)| w.uid == uid) else {
            if let Ok(info) = result {
                let _ = self.runtime.signal_container(&info.meta.id, libc::SIGKILL);
            }
            return;
        };
        let name = name.clone();
        let Some(slot) = w.slots.iter_mut().find(|s| s.container.name == cname) else {
            return;
        };
        match result {
            Ok(info) => {
                // The first start is not a restart: only restarts feed the backoff.
                if let Some(finished) = slot.last.as_ref().map(|l| l.at) {
                    slot.backoff.started(finished, now);
                }
                let started_at = match &info.state {
                    ContainerState::Running { started_at, .. } => started_at.clone(),
                    _ => rfc3339(self.clock.wall()),
                };
                if let Some(last) = &slot.last {
                    slot.previous_log = Some(last.log_path.clone());
                }
                slot.instance = Some(Instance {
                    id: info.meta.id.clone(),
                    started_at,
                    stop_signal: info.meta.stop_signal,
                    log_path: info.meta.log_path.clone(),
                    health: probes::Health::new(&slot.container),
                });
                slot.waiting = None;
                slot.retry_at = None;
                let image = slot.container.image.clone().unwrap_or_default();
                self.event(
                    EventType::Normal,
                    &name,
                    Some(cname),
                    "Created",
                    &format!("Created container {cname} (image {image})"),
                );
                // Started once its postStart hook (if any) completed.
                self.begin_post_start(&name, cname);
            }
            Err(f) if f.reason == executor::SANDBOX_NOT_READY => {
                // Nothing was created: this attempt is not an instance.
                slot.instance = None;
                slot.instances_started = slot.instances_started.saturating_sub(1);
                slot.waiting = Some(("ContainerCreating".into(), String::new()));
                let ready = w.sandbox == SandboxPhase::Ready;
                log::warn!("{name} {cname}: {}", f.message);
                if ready {
                    self.sandbox_changed(&name, &f.message);
                }
            }
            Err(f) if f.reason == "ErrImagePull" => {
                slot.instance = None;
                // Nothing was created: this attempt is not an instance (restart count, log).
                slot.instances_started = slot.instances_started.saturating_sub(1);
                let delay = slot.image_backoff.failed(now);
                slot.retry_at = Some(now + delay);
                slot.pull_backoff_at = Some(now + delay / 2);
                slot.waiting = Some((f.reason.clone(), f.message.clone()));
                self.event(EventType::Warning, &name, Some(cname), "Failed", &f.message);
                self.event(
                    EventType::Warning,
                    &name,
                    Some(cname),
                    "Failed",
                    "Error: ErrImagePull",
                );
            }
            Err(f) => {
                slot.instance = None;
                // Treated like a crash for the backoff, as the kubelet does.
                slot.backoff.started(now, now);
                slot.retry_at = Some(now + slot.backoff.current_delay());
                slot.waiting = Some((f.reason.clone(), f.message.clone()));
                self.event(
                    EventType::Warning,
                    &name,
                    Some(cname),
                    "Failed",
                    &format!("{}: {}", f.reason, f.message),
                );
            }
        }
        self.dirty = true;
    }

    fn on_exit(&mut self, id: &str, uid: &str, exit: ExitRecord) {
        let now = self.clock.now();
        if let Some(r) = self.removals.get_mut(uid) {
            r.running.remove(id);
            self.dirty = true;
            return;
        }
        let Some((name, w)) = self.workers.iter_mut().find(|(_, w)| w.uid == uid) else {
            return;
        };
        let name = name.clone();
        let policy = restart_policy(&w.pod).to_string();
        let Some(slot) = w
            .slots
            .iter_mut()
            .find(|s| s.instance.as_ref().is_some_and(|i| i.id == id))
        else {
            return;
        };
        let Some(inst) = slot.instance.take() else {
            return;
        };
        let cname = slot.container.name.clone();
        let code = exit.exit_code;
        let reason = exit.reason.clone();
        slot.last = Some(Finished {
            id: id.to_string(),
            exit,
            at: now,
            log_path: inst.log_path,
        });
        let mut note = None;
        if slot.kind == ContainerKind::Init && code == 0 {
            slot.succeeded = true;
        } else {
            if backoff::should_restart(slot.kind, &policy, code) {
                let at = slot.backoff.restart_at(now);
                slot.retry_at = Some(at);
                if at > now {
                    let secs = at.duration_since(now).as_secs();
                    slot.waiting = Some((
                        "CrashLoopBackOff".into(),
                        format!("back-off {secs}s restarting failed container={cname} pod={name}"),
                    ));
                    note = Some((
                        EventType::Warning,
                        "BackOff",
                        format!("Back-off {secs}s restarting failed container"),
                    ));
                }
            }
        }
        self.event(
            if code == 0 {
                EventType::Normal
            } else {
                EventType::Warning
            },
            &name,
            Some(&cname),
            "Exited",
            &format!("container exited with code {code} ({reason})"),
        );
        if let Some((t, r, m)) = note {
            self.event(t, &name, Some(&cname), r, &m);
        }
    }

    fn view_of(&self, w: &PodWorker) -> PodView {
        podstatus::view(w, &self.config, &self.cfg)
    }

    fn publish(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let now = self.now_str();
        for w in self.workers.values_mut() {
            podstatus::update_conditions(w, &now);
        }
        let mut pods: Vec<PodView> = self.workers.values().map(|w| self.view_of(w)).collect();
        for r in self.removals.values() {
            if let Some(v) = &r.view {
                pods.push(v.clone());
            }
        }
        pods.sort_by_key(|v| crate::status::full_name(&v.pod));
        let snapshot = Snapshot {
            node_name: self.cfg.node_name.clone(),
            pods,
            source_errors: self.config.orphan_errors(),
            events: self.events.to_vec(),
        };
        self.status_line = crate::systemd::status_line(&snapshot);
        self.snapshots.publish(snapshot);
    }

    /// The loop's liveness signal, for readers on other threads (a health endpoint).
    pub fn monitor(&self) -> crate::health::SyncLoopMonitor {
        self.monitor.clone()
    }

    /// Reports readiness, status and watchdog pings to systemd from now on.
    pub fn set_service(&mut self, service: crate::systemd::ServiceReporter) {
        self.service = Some(service);
    }

    /// Test hook (`PODVISOR_TEST_WEDGE_FILE`): once `path` exists, the loop removes it and
    /// blocks forever at its next turnover, as a deadlocked loop would, so the watchdog can
    /// be seen to act (and the restarted daemon runs normally).
    pub fn set_wedge_file(&mut self, path: PathBuf) {
        self.wedge_file = Some(path);
    }

    /// One turnover: recorded for health checks, and told to systemd (readiness once the
    /// sources reported and the previous run's pods are re-adopted, the status line, a
    /// watchdog ping).
    fn turnover(&mut self) {
        let now = self.clock.now();
        if let Some(f) = &self.wedge_file {
            // One-shot: the file is removed, so the daemon systemd restarts runs normally.
            if std::fs::remove_file(f).is_ok() {
                log::error!(
                    "test hook: {} appeared: the sync loop stops turning over",
                    f.display()
                );
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
        }
        self.monitor.record(now);
        let ready = self.sources_ready();
        if let Some(s) = self.service.as_mut() {
            s.turnover(now, ready, &self.status_line);
        }
    }

    /// Runs until a [`SyncEvent::Shutdown`] arrives or every sender is gone.
    pub fn run(mut self, rx: std::sync::mpsc::Receiver<SyncEvent>) {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            self.turnover();
            let mut deadline = self.next_deadline();
            if let Some(ping) = self.service.as_ref().and_then(|s| s.next_ping()) {
                deadline = Some(deadline.map_or(ping, |d| d.min(ping)));
            }
            let timeout = deadline
                .map(|d| d.saturating_duration_since(self.clock.now()))
                .unwrap_or(Duration::from_secs(60));
            match rx.recv_timeout(timeout) {
                Ok(SyncEvent::Shutdown) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(ev) => self.handle(ev),
                Err(RecvTimeoutError::Timeout) => self.tick(),
            }
        }
        if let Some(s) = self.service.as_mut() {
            s.stopping();
        }
    }
}

/// Turns ErrImagePull into ImagePullBackOff once the container has waited a while (as the
/// kubelet shows it between pull attempts); returns the BackOff event to record.
fn pull_backoff_note(
    s: &mut Slot,
    now: Instant,
) -> Option<(EventType, Option<String>, &'static str, String)> {
    if s.pull_backoff_at.is_none_or(|t| now < t) {
        return None;
    }
    s.pull_backoff_at = None;
    if s.waiting.as_ref().is_none_or(|(r, _)| r != "ErrImagePull") {
        return None;
    }
    let image = s.container.image.clone().unwrap_or_default();
    let msg = format!("Back-off pulling image {image:?}");
    s.waiting = Some(("ImagePullBackOff".into(), msg.clone()));
    Some((
        EventType::Normal,
        Some(s.container.name.clone()),
        "BackOff",
        msg,
    ))
}

/// Submits a start if the container is due; records why it waits otherwise.
fn start_if_due(uid: &str, pod: &Arc<Pod>, s: &mut Slot, now: Instant) -> Option<Job> {
    if s.retry_at.is_some_and(|t| now < t) {
        return None;
    }
    s.retry_at = None;
    s.instance = Some(Instance {
        id: String::new(),
        started_at: String::new(),
        stop_signal: libc::SIGTERM,
        log_path: PathBuf::new(),
        health: probes::Health::new(&s.container),
    });
    let restart_count = s.instances_started;
    s.instances_started += 1;
    if s.waiting
        .as_ref()
        .is_some_and(|(r, _)| r == "CrashLoopBackOff")
        || s.waiting.is_none()
    {
        s.waiting = Some(("ContainerCreating".into(), String::new()));
    }
    Some(Job::StartContainer {
        uid: uid.to_string(),
        pod: Arc::clone(pod),
        container: Box::new(s.container.clone()),
        kind: s.kind,
        restart_count,
    })
}
