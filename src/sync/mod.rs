//! sync: the sync loop, the one thread that owns desired and actual pod state (the kubelet's
//! syncLoop + pod workers, without the god object).
//!
//! Inputs arrive as typed [`SyncEvent`]s on one channel: source updates (files, URL), container
//! exits from the runtime's exit watcher (event driven, never polled), and the results of slow
//! work done by the [`executor`] pool. Timers (crash-loop backoff, stop grace periods) are
//! deadlines the loop computes itself; time comes from a [`Clock`] so the whole state machine
//! is unit-tested with a fake clock and a recording fake runtime.
//!
//! Decisions are apart from effects: `actions` computes what to do as pure functions of the
//! loop's state (`compute_actions` per pod, the kubelet's computePodActions); the loop applies
//! them by updating its state, recording events and sending jobs to the executor, and never
//! waits on I/O itself (docs/design.md lists the small exceptions).
//!
//! This file keeps the loop itself: routing (events in, reconcile, snapshot out), timers, and
//! the managers that each own a part of the state, as the kubelet's podWorkers,
//! statusManager, probe results and evictionManager do. A manager's method changes its state
//! and returns what the loop must do (jobs, signals, record writes); effects stay on the
//! executor's workers, decisions stay pure:
//! - `podworkers`: `PodWorkers` (one `PodWorker` per pod generation, with its container
//!   slots, and the exits that came early) and `Leftovers` (what the last run left on disk);
//!   `worker` is one pod's sync (sandbox, init containers, app containers, exits), decided by
//!   `actions::compute_actions`; `reconcile` matches desired pods to workers;
//! - `removal`: `Removals`, the generations being stopped and removed (`Removals::sync`);
//! - `rollback`: `Rollbacks`, each pod's last Ready generation, which [`generations`]
//!   persists (safe updates);
//! - `probes`: `ProbeState` (what the prober is asked to probe) and what probe results and
//!   hooks do; `eviction`: `NodePressure` and what evictions do; `admission`: `admit_pod`;
//! - `record_writer`: `Records`, the desired-pod records ([`store`]), generation records and
//!   pushed pods' store; `liveness`: health monitor and systemd reporting;
//! - `results` routes the results of executor jobs; `apipods` the node API's pushes.
//!
//! Also: [`engine`] wires runtime, workers, prober and loop for the daemon and `podvisor
//! play`; [`backoff`] is the crash-loop backoff; `batch` which queued events one turn handles;
//! [`executor`] runs jobs off-thread; [`podstatus`] computes v1 PodStatus in the kubelet's
//! vocabulary (published through `crate::status`). The desired pods come from
//! `crate::sources::podconfig`, which merges the sources.

mod actions;
mod admission;
pub mod apipods;
pub mod backoff;
mod batch;
pub mod engine;
pub(super) mod eviction;
pub mod executor;
pub mod generations;
mod liveness;
pub mod podstatus;
mod podworkers;
mod probes;
mod reconcile;
mod record_writer;
mod removal;
mod results;
mod rollback;
pub mod store;
mod worker;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;

use self::batch::drain_batch;
use self::executor::{Executor, JobResult};
use self::generations::GenerationStore;
use self::podworkers::{Finished, Instance, Leftovers, PodWorker, PodWorkers, SandboxPhase, Slot};
use self::store::DesiredStore;
use crate::reason::EventReason;
use crate::runtime::{ContainerInfo, Runtime, RuntimeEvent};
use crate::sources::podconfig::PodConfig;
use crate::sources::SourceEvent;
use crate::staticpod::{SourceKind, StaticPod};
use crate::status::{EventType, PodView, Snapshot, SnapshotCell};

/// Everything the sync loop reacts to.
#[derive(Debug)]
pub enum SyncEvent {
    Source(SourceEvent),
    Runtime(RuntimeEvent),
    Work(Box<JobResult>),
    /// A probe result that changes something or must be recorded (prober thread).
    Probe(Box<crate::prober::scheduler::ProbeUpdate>),
    /// The eviction manager: node conditions, node-level reclaim, a pod to evict.
    Eviction(crate::eviction::EvictionEvent),
    /// A pod pushed to or deleted from the node API (its connection thread waits for the
    /// answer).
    ApiPod(crate::sources::api::ApiPodRequest),
    /// The API server client (`apiserver`): something about a pod's mirror pod to record as
    /// a Warning event of the pod (`namespace/name`); no pod state changes.
    MirrorPod {
        pod: String,
        reason: EventReason,
        message: String,
    },
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
    pub allocatable: Option<crate::pod::resources::Amounts>,
    /// Node allocatable `ephemeral-storage` for admission; `None` admits every pod.
    pub allocatable_ephemeral_storage: Option<u64>,
    /// The node's /sys/kernel/mm/hugepages, read when a pod requesting huge pages is
    /// admitted; `None` admits huge page requests unchecked.
    pub hugepages_dir: Option<PathBuf>,
    /// What the node offers for confinement: manifests are validated against it.
    pub security: crate::security::NodeSecurity,
    /// `podvisor play`: the loop runs this one pod and nothing else. Only what is on disk for
    /// its uid is adopted (or removed); other pods' containers, sandboxes and records are
    /// left alone, and desired pods are not persisted (`store_dir` is not used).
    pub only_pod: Option<StaticPod>,
    /// Safe updates: a new generation not Ready this long after it could start is rolled
    /// back to the pod's last Ready one (`podvisor.io/rollback-after` overrides it per pod;
    /// zero turns rollbacks off).
    pub rollback_after: Duration,
    /// Pods without hostNetwork get their IPs from a pod network (CNI): until their sandbox
    /// has one, status shows no pod IP. Without it they have loopback only (`127.0.0.1`).
    pub pod_network: bool,
    /// The kubelet's counters this loop records (pod starts, container starts, evictions,
    /// restarted pods, image pulls); the node API reads them.
    pub metrics: crate::metrics::KubeletMetrics,
}

/// How often manifests refused for the node's state (a missing profile) are checked again.
const RECHECK_PERIOD: Duration = Duration::from_secs(20);

/// The sync loop.
pub struct SyncLoop {
    cfg: SyncConfig,
    config: PodConfig,
    runtime: Arc<dyn Runtime>,
    executor: Box<dyn Executor>,
    clock: Box<dyn Clock>,
    /// The desired-pod, generation and pushed-pod records on disk.
    records: record_writer::Records,
    /// Each pod's last Ready generation and the generation rolled back from (safe updates).
    rollbacks: rollback::Rollbacks,
    workers: PodWorkers,
    removals: removal::Removals,
    /// What the previous run left on disk, not yet claimed by a worker.
    on_disk: Leftovers,
    /// Events, snapshots and whether the next publish is due.
    status: podstatus::StatusManager,
    sources: SourcesReady,
    reported_dups: BTreeSet<(String, String)>,
    probe_state: probes::ProbeState,
    /// When refused manifests are checked again next (see `PodConfig::recheck`).
    next_recheck: Instant,
    /// Health monitor, systemd notifications, the wedge test hook.
    liveness: liveness::Liveness,
    resync: Resync,
    /// The node's pressure conditions, as the eviction manager last reported them.
    pressure: eviction::NodePressure,
}

/// Whether the sources reported: each expected source once, or the timeout passed.
struct SourcesReady {
    file: bool,
    url: bool,
    started: Instant,
    timeout: Duration,
}

impl SourcesReady {
    fn ready(&self, now: Instant) -> bool {
        (self.file && self.url) || now.saturating_duration_since(self.started) >= self.timeout
    }

    /// When the sources count as ready anyway, while one has not reported.
    fn deadline(&self) -> Option<Instant> {
        (!(self.file && self.url)).then(|| self.started + self.timeout)
    }

    /// A source's first scan or fetch (or its error) is its report.
    fn saw(&mut self, se: &SourceEvent) {
        match se {
            SourceEvent::FileScanComplete { .. } | SourceEvent::DirError { .. } => self.file = true,
            SourceEvent::UrlChanged { .. } | SourceEvent::UrlError { .. } => self.url = true,
            _ => {}
        }
    }
}

/// The periodic resync (`syncFrequency`): its period and when it is due next, the container
/// GC asked for a pass at each one (the daemon's; none under `play`), and what runs on the
/// loop's thread after it (the daemon's memory housekeeping).
#[derive(Default)]
struct Resync {
    every: Option<(Duration, Instant)>,
    gc: Option<crate::gc::GcHandle>,
    housekeeping: Option<Box<dyn FnMut()>>,
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

/// The pod's `activeDeadlineSeconds`.
fn active_deadline(pod: &Pod) -> Option<Duration> {
    let secs = pod.spec.as_ref()?.active_deadline_seconds?;
    Some(Duration::from_secs(secs.max(0) as u64))
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
        let mut config = PodConfig::new(&cfg.node_name, cfg.security.clone());
        let (store, persisted, persisted_uids) = match &cfg.only_pod {
            // The one pod is seeded as its source's last-known-good: it never changes.
            Some(pod) => (None, vec![pod.clone()], BTreeSet::new()),
            None => {
                let store = DesiredStore::new(cfg.store_dir.clone());
                let persisted = store.recover();
                let uids = persisted
                    .iter()
                    .filter_map(|p| p.pod.metadata.uid.clone())
                    .collect();
                (Some(store), persisted, uids)
            }
        };
        // `<root>/pod-generations`, next to the desired pods' `<root>/static-pods`.
        let generations = store
            .as_ref()
            .map(|_| GenerationStore::new(cfg.store_dir.with_file_name("pod-generations")));
        let rollbacks = rollback::Rollbacks::new(
            generations
                .as_ref()
                .map(|g| g.recover())
                .unwrap_or_default(),
        );
        let scope = cfg.only_pod.as_ref().map(|p| p.uid().to_string());
        let in_scope = |uid: &str| scope.as_deref().is_none_or(|s| s == uid);
        config.seed(persisted, |p| {
            if p.source.starts_with("http://") || p.source.starts_with("https://") {
                SourceKind::Http
            } else if p.source.starts_with(crate::sources::api::API_SOURCE_PREFIX) {
                SourceKind::Api
            } else {
                SourceKind::File
            }
        });
        // `<root>/api-pods`, next to `<root>/static-pods`: the push source's whole state, read
        // now (before any source answers, pushed pods are known).
        let api_store = store.as_ref().map(|_| {
            crate::sources::api::ApiPodStore::new(cfg.store_dir.with_file_name("api-pods"))
        });
        let api_notices = match &api_store {
            Some(s) => config.load_api_stored(s.load(), &rfc3339(clock.wall())),
            None => Vec::new(),
        };
        let mut adopted: BTreeMap<String, Vec<ContainerInfo>> = BTreeMap::new();
        for c in runtime.list_containers()? {
            if in_scope(&c.meta.pod_uid) {
                adopted.entry(c.meta.pod_uid.clone()).or_default().push(c);
            }
        }
        let sandboxes_on_disk = runtime
            .list_pod_sandboxes()?
            .into_iter()
            .filter(|s| in_scope(&s.pod_uid))
            .map(|s| (s.pod_uid, (s.created_at, s.pod_ips)))
            .collect();
        let data_on_disk = runtime
            .list_pod_data()?
            .into_iter()
            .filter(|u| in_scope(u))
            .collect();
        let store_writer = match (&store, generations) {
            (Some(st), Some(g)) => Some(record_writer::Writer::start(st.clone(), g).map_err(
                |source| crate::runtime::RuntimeError::Io {
                    what: "start the desired-pod record writer for",
                    path: cfg.store_dir.clone(),
                    source,
                },
            )?),
            _ => None,
        };
        let started = clock.now();
        let mut s = SyncLoop {
            sources: SourcesReady {
                file: !cfg.expect_file_source,
                url: !cfg.expect_url_source,
                started,
                timeout: cfg.sources_ready_timeout,
            },
            cfg,
            config,
            runtime,
            executor,
            clock,
            records: record_writer::Records {
                store,
                writer: store_writer,
                api: api_store,
            },
            rollbacks,
            workers: PodWorkers::default(),
            removals: Default::default(),
            on_disk: Leftovers {
                containers: adopted,
                sandboxes: sandboxes_on_disk,
                data: data_on_disk,
                records: persisted_uids,
            },
            probe_state: probes::ProbeState::default(),
            status: podstatus::StatusManager::new(snapshots),
            reported_dups: BTreeSet::new(),
            next_recheck: started + RECHECK_PERIOD,
            liveness: liveness::Liveness::new(started),
            resync: Resync::default(),
            pressure: eviction::NodePressure::default(),
        };
        s.on_notices(api_notices);
        s.reconcile();
        s.publish();
        Ok(s)
    }

    /// Waits until the desired-pod records asked for are on disk (tests).
    pub fn flush_desired(&self) {
        self.records.flush();
    }

    /// Stops waiting for grace periods: every pod being removed gets SIGKILL now (`podvisor
    /// play` on a second Ctrl-C). preStop hooks still running are not waited for.
    pub fn kill_removals_now(&mut self) {
        self.removals.kill_now(self.clock.now());
        self.reconcile();
        self.publish();
    }

    /// How long the pod has been active on the node: since its `status.startTime` (the
    /// sandbox's creation), as the kubelet's active deadline handler measures it.
    fn active_for(&self, w: &PodWorker) -> Option<Duration> {
        let start = w
            .start_time
            .as_deref()?
            .parse::<k8s_openapi::jiff::Timestamp>()
            .ok()?;
        let start = SystemTime::from(start);
        Some(self.clock.wall().duration_since(start).unwrap_or_default())
    }

    fn now_str(&self) -> String {
        rfc3339(self.clock.wall())
    }

    fn sources_ready(&self) -> bool {
        self.sources.ready(self.clock.now())
    }

    fn event(
        &mut self,
        type_: EventType,
        pod: &str,
        container: Option<&str>,
        reason: EventReason,
        message: &str,
    ) {
        let now = self.now_str();
        if self
            .status
            .events
            .record(type_, pod, container, reason.as_str(), message, &now)
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
        self.status.dirty = true;
    }

    /// Handles one event, then brings every pod closer to its desired state.
    pub fn handle(&mut self, ev: SyncEvent) {
        self.handle_batch(std::iter::once(ev));
    }

    /// Handles every event of `batch` in order, then reconciles and publishes once: events
    /// that queued while the loop was busy (ten manifests written at once, the start results
    /// of a burst) cost one pass over the pods, not one each. The kubelet's config merge hands
    /// its sync loop a file source's pods as one update the same way.
    fn handle_batch(&mut self, batch: impl IntoIterator<Item = SyncEvent>) {
        let mut tpk = "other";
        for ev in batch {
            tpk = match &ev {
                SyncEvent::Source(_) => "src",
                SyncEvent::Work(_) => "work",
                SyncEvent::Runtime(_) => "exit",
                _ => "other",
            };
            crate::tp!("loop.{tpk}.recv");
            self.apply(ev);
        }
        self.reconcile();
        crate::tp!("loop.{tpk}.reconciled");
        self.publish();
        crate::tp!("loop.{tpk}.published");
    }

    /// One event's effect on the loop's state, without the reconcile that follows it.
    fn apply(&mut self, ev: SyncEvent) {
        match ev {
            SyncEvent::Source(se) => self.on_source(se),
            SyncEvent::Runtime(RuntimeEvent::ContainerExited { id, pod_uid, exit }) => {
                self.on_exit(&id, &pod_uid, exit)
            }
            SyncEvent::Work(r) => self.on_work(*r),
            SyncEvent::Probe(u) => self.on_probe(*u),
            SyncEvent::Eviction(e) => self.on_eviction(e),
            SyncEvent::ApiPod(r) => self.on_api_pod(r),
            SyncEvent::MirrorPod {
                pod,
                reason,
                message,
            } => self.event(EventType::Warning, &pod, None, reason, &message),
            SyncEvent::Shutdown => {}
        }
    }

    /// Resyncs every pod each `period` (`syncFrequency`), even without an event, and asks
    /// `gc` for a container and log GC pass each time (the kubelet's ContainerGCPeriod is a
    /// minute, `syncFrequency`'s default).
    pub fn set_periodic_resync(&mut self, period: Duration, gc: Option<crate::gc::GcHandle>) {
        self.resync.every = Some((period, self.clock.now() + period));
        self.resync.gc = gc;
    }

    /// Runs `f` on the loop's thread after every periodic resync.
    pub fn set_housekeeping(&mut self, f: Box<dyn FnMut()>) {
        self.resync.housekeeping = Some(f);
    }

    /// Saves desired-pod records that a failed write (a full disk) left missing, so a pod
    /// comes back after a reboot once space is there again.
    fn save_missing_desired(&self) {
        for w in self.workers.values() {
            if self.records.missing(&w.uid) {
                // Written by the writer thread, which logs a failure; a record still queued
                // is simply written twice.
                log::debug!("pod {}: desired-pod record missing: written again", w.uid);
                self.records.save_desired(&w.spec);
            }
        }
    }

    /// The loop's view of the pods for container GC.
    fn gc_request(&self) -> crate::gc::GcRequest {
        crate::gc::GcRequest {
            taken_at: Some(self.clock.wall()),
            active: self.workers.values().map(|w| w.uid.clone()).collect(),
            removing: self
                .removals
                .uids()
                .chain(self.on_disk.containers.keys())
                .cloned()
                .collect(),
            sources_ready: self.sources_ready(),
        }
    }

    /// Called when a deadline passed (or periodically): advances timers.
    pub fn tick(&mut self) {
        let now = self.clock.now();
        if let Some((period, due)) = self.resync.every {
            if now >= due {
                self.resync.every = Some((period, now + period));
                // Every pod is reconciled below; the snapshot is published again.
                self.status.dirty = true;
                if let Some(gc) = &self.resync.gc {
                    gc.request(self.gc_request());
                }
                self.save_missing_desired();
                if let Some(f) = self.resync.housekeeping.as_mut() {
                    f();
                }
            }
        }
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
        let now = self.clock.now();
        for w in self.workers.values() {
            consider(w.sandbox_retry_at);
            if let (Some(limit), Some(active)) = (active_deadline(&w.pod), self.active_for(w)) {
                if !w.failed {
                    consider(Some(now + limit.saturating_sub(active)));
                }
            }
            for s in &w.slots {
                if s.instance.is_none() {
                    consider(s.retry_at);
                    consider(s.pull_backoff_at);
                }
            }
        }
        consider(self.removals.next_deadline());
        consider(self.container_kill_deadline());
        consider(self.rollback_deadline());
        consider(self.resync.every.map(|(_, due)| due));
        consider(self.eviction_restart_deadline());
        consider(self.sources.deadline());
        if self.config.has_refused() {
            consider(Some(self.next_recheck));
        }
        d
    }

    fn view_of(&self, w: &PodWorker) -> PodView {
        let mut v = podstatus::view(w, &self.config, &self.cfg);
        v.rolled_back = self.rolled_back_why(w);
        v
    }

    fn publish(&mut self) {
        let sources_ready = self.sources_ready();
        if !self.status.publish_due(sources_ready) {
            return;
        }
        let now = self.now_str();
        for w in self.workers.values_mut() {
            podstatus::update_conditions(w, &now);
        }
        let mut pods: Vec<PodView> = self.workers.values().map(|w| self.view_of(w)).collect();
        self.record_pod_starts(&pods);
        pods.extend(self.removals.views().cloned());
        pods.sort_by_key(|v| crate::status::full_name(&v.pod));
        let snapshot = Snapshot {
            node_name: self.cfg.node_name.clone(),
            pods,
            source_errors: self.config.orphan_errors(),
            events: self.status.events.to_vec(),
            node_conditions: self.pressure.views(),
            sources_ready,
        };
        self.liveness.status_line = crate::systemd::status_line(&snapshot);
        self.status.snapshots.publish(snapshot);
    }

    /// `kubelet_pod_start_duration_seconds`: each generation the first time it shows phase
    /// Running, measured from when the loop first saw it (the kubelet's firstSeenTime).
    fn record_pod_starts(&mut self, views: &[PodView]) {
        let now = self.clock.now();
        for v in views {
            let running = v.pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
            let uid = v.pod.metadata.uid.as_deref().unwrap_or("");
            if !running {
                continue;
            }
            if let Some(w) = self
                .workers
                .values_mut()
                .find(|w| w.uid == uid && !w.start_recorded)
            {
                w.start_recorded = true;
                self.cfg
                    .metrics
                    .pod_start_duration
                    .observe(now.saturating_duration_since(w.seen).as_secs_f64());
            }
        }
    }

    /// The loop's liveness signal, for readers on other threads (a health endpoint).
    pub fn monitor(&self) -> crate::health::SyncLoopMonitor {
        self.liveness.monitor.clone()
    }

    /// Reports readiness, status and watchdog pings to systemd from now on.
    pub fn set_service(&mut self, service: crate::systemd::ServiceReporter) {
        self.liveness.service = Some(service);
    }

    /// Test hook (`PODVISOR_TEST_WEDGE_FILE`): once `path` exists, the loop removes it and
    /// blocks forever at its next turnover, as a deadlocked loop would, so the watchdog can
    /// be seen to act (and the restarted daemon runs normally).
    pub fn set_wedge_file(&mut self, path: PathBuf) {
        self.liveness.wedge_file = Some(path);
    }

    /// One turnover: recorded for health checks, and told to systemd (readiness once the
    /// sources reported and the previous run's pods are re-adopted, the status line, a
    /// watchdog ping).
    fn turnover(&mut self) {
        let ready = self.sources_ready();
        self.liveness.turnover(self.clock.now(), ready);
    }

    /// Runs until a [`SyncEvent::Shutdown`] arrives or every sender is gone.
    pub fn run(mut self, rx: std::sync::mpsc::Receiver<SyncEvent>) {
        use std::sync::mpsc::RecvTimeoutError;
        loop {
            self.turnover();
            let mut deadline = self.next_deadline();
            if let Some(ping) = self.liveness.next_ping() {
                deadline = Some(deadline.map_or(ping, |d| d.min(ping)));
            }
            let timeout = deadline
                .map(|d| d.saturating_duration_since(self.clock.now()))
                .unwrap_or(Duration::from_secs(60));
            match rx.recv_timeout(timeout) {
                Ok(SyncEvent::Shutdown) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(ev) => {
                    let (batch, stop) = drain_batch(ev, &rx);
                    self.handle_batch(batch);
                    if stop {
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.tick(),
            }
        }
        self.liveness.stopping();
    }
}
