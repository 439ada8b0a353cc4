//! eviction::manager: one housekeeping pass of the eviction manager ([`Manager::synchronize`],
//! the kubelet's `synchronize`) over its seams — the signals ([`SignalSource`]), the pods and
//! what they use ([`PodSource`]), node-level reclaim ([`NodeReclaimer`]) — and the
//! `eviction-manager` thread that runs it every housekeeping interval (10 s) and at once when
//! the memory notifier wakes it. The thread owns no pod state: what it decides goes to the
//! sync loop as [`EvictionEvent`]s.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use super::decisions::{
    evaluate, eviction_grace, reclaim_sufficed, threshold_quantity, EvictionState, Observations,
};
use super::ephemeral::{limit_exceeded, LimitKind, PodStorage};
use super::ranking::{eviction_message, PodCandidate};
use super::relief::{
    decide, pending_relief, shortfall, usage, Decision, EvictionPolicy, NotEvicting,
};
use super::signals::SignalSource;
use super::threshold::{Pressure, Signal, Threshold};

/// The kubelet's eviction monitoring period (`evictionMonitoringPeriod`).
pub const HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(10);
/// How long an evicted pod is left out of ranking while the sync loop stops it (the kubelet
/// waits up to 30 s for the pod's cleanup).
const EVICTED_HOLD: Duration = Duration::from_secs(30);
/// How often the same reason for evicting nothing is announced again (an event and a log
/// line; the disk may be flash): a new reason is announced at once.
pub const NOT_EVICTING_REPEAT: Duration = Duration::from_secs(300);

/// The eviction settings (KubeletConfiguration `eviction*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionConfig {
    /// Hard and soft thresholds, with grace periods and minimum reclaim.
    pub thresholds: Vec<Threshold>,
    /// `evictionMaxPodGracePeriod` (soft evictions only).
    pub max_pod_grace_period: Duration,
    /// `evictionPressureTransitionPeriod`.
    pub pressure_transition_period: Duration,
    /// `--eviction-policy`: which pods may be evicted at all.
    pub policy: EvictionPolicy,
}

impl Default for EvictionConfig {
    fn default() -> Self {
        EvictionConfig {
            thresholds: super::threshold::parse_thresholds(&Default::default())
                // The defaults are constants that parse (tested).
                .unwrap_or_default(),
            max_pod_grace_period: Duration::ZERO,
            pressure_transition_period: super::threshold::DEFAULT_PRESSURE_TRANSITION_PERIOD,
            policy: EvictionPolicy::default(),
        }
    }
}

/// A pod to evict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictPod {
    pub uid: String,
    /// `namespace/name`.
    pub name: String,
    pub signal: Signal,
    /// The kubelet's message (phase Failed, reason Evicted, the Evicted event).
    pub message: String,
    /// Stop grace: zero for a hard threshold.
    pub grace: Duration,
}

/// What the eviction manager tells the sync loop.
#[derive(Debug)]
pub enum EvictionEvent {
    /// The node conditions that hold now (sent when they change).
    Conditions(BTreeSet<Pressure>),
    /// A threshold is met past its grace period: reclaim starts (the node's
    /// `EvictionThresholdMet` event).
    ThresholdMet { signal: Signal },
    /// Node-level reclaim: run a container and log GC pass now and send its report back.
    ReclaimContainers(SyncSender<crate::gc::GcReport>),
    /// Stop this pod: phase Failed, reason Evicted.
    Evict(EvictPod),
    /// Stop this pod, which exceeded a local storage limit: phase Failed, reason Evicted, no
    /// grace period; no node pressure to wait for before it starts again.
    EvictForLimit(LimitEviction),
    /// A threshold is met and no pod is evicted: why (the node's `EvictionSkipped` event).
    /// Sent when the reason changes, and again every [`NOT_EVICTING_REPEAT`] while it holds.
    NotEvicting { message: String },
}

/// A pod evicted for exceeding a local storage limit (`localStorageEviction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitEviction {
    pub uid: String,
    /// `namespace/name`.
    pub name: String,
    pub kind: LimitKind,
    /// The kubelet's message.
    pub message: String,
}

/// The running pods and what they use.
pub trait PodSource: Send {
    /// Pods that may be evicted (not terminal), with usage for ranking `signal`.
    fn candidates(&self, signal: Signal) -> Vec<PodCandidate>;
    /// Running pods' ephemeral storage with their limits, measured at a bounded cost (see
    /// `usage`); none where the source does not measure it.
    fn local_storage(&self) -> Vec<PodStorage> {
        Vec::new()
    }
}

/// Node-level reclaim (the kubelet's `nodeReclaimFuncs`): each returns the bytes freed.
pub trait NodeReclaimer: Send {
    /// Dead containers and their logs, gone pods' log directories, rotated logs.
    fn reclaim_containers(&mut self, send: &dyn Fn(EvictionEvent)) -> u64;
    /// Unused images.
    fn reclaim_images(&mut self) -> u64;
}

/// What one pass did (for tests and the log).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassReport {
    pub conditions: BTreeSet<Pressure>,
    /// The threshold acted on.
    pub threshold: Option<Threshold>,
    /// Reclaim steps run, in order: "containers", "images".
    pub reclaimed: Vec<&'static str>,
    /// Node-level reclaim brought the signal back (no eviction).
    pub reclaim_sufficed: bool,
    pub evicted: Option<EvictPod>,
    /// A threshold was acted on and no pod evicted: why.
    pub not_evicting: Option<NotEvicting>,
    /// Pods evicted for their local storage limits (the pass then stops, as the kubelet's).
    pub limit_evicted: Vec<LimitEviction>,
}

/// The eviction manager's state between passes.
#[derive(Debug)]
pub struct Manager {
    cfg: EvictionConfig,
    state: EvictionState,
    conditions: BTreeSet<Pressure>,
    /// Pods evicted recently, by uid.
    evicted: BTreeMap<String, Stopping>,
    /// Pods over a local storage limit that are never evicted (critical ones; every pod with
    /// `--eviction-policy never`), already logged.
    kept_over_limit: BTreeSet<String>,
    /// The last reason for evicting nothing announced, and when.
    announced: Option<((Signal, u8), Instant)>,
    /// What used the filesystem when that reason was announced.
    top_dirs: Option<((Signal, u8), super::topdirs::TopDirs)>,
}

/// A pod evicted recently, still being stopped.
#[derive(Debug, Clone, Copy)]
struct Stopping {
    at: Instant,
    /// The signal it was evicted for, what it used of that resource and what the signal
    /// showed available then (`None`: evicted for its local storage limit).
    freeing: Option<(Signal, u64, u64)>,
}

impl Manager {
    pub fn new(cfg: EvictionConfig) -> Manager {
        Manager {
            cfg,
            state: EvictionState::default(),
            conditions: BTreeSet::new(),
            evicted: BTreeMap::new(),
            kept_over_limit: BTreeSet::new(),
            announced: None,
            top_dirs: None,
        }
    }

    /// One housekeeping pass: observe, update conditions, and when a threshold is met past
    /// its grace period reclaim node-level resources first, then evict at most one pod.
    pub fn synchronize(
        &mut self,
        now: Instant,
        signals: &dyn SignalSource,
        pods: &dyn PodSource,
        reclaimer: &mut dyn NodeReclaimer,
        send: &dyn Fn(EvictionEvent),
    ) -> PassReport {
        let mut report = PassReport::default();
        let obs = signals.observe();
        let eval = evaluate(
            &mut self.state,
            now,
            &self.cfg.thresholds,
            &obs,
            self.cfg.pressure_transition_period,
        );
        if eval.conditions != self.conditions {
            self.conditions = eval.conditions.clone();
            send(EvictionEvent::Conditions(eval.conditions.clone()));
        }
        report.conditions = eval.conditions.clone();
        self.evicted
            .retain(|_, s| now.saturating_duration_since(s.at) < EVICTED_HOLD);
        // Local storage limits come before the node's thresholds; a pass that evicted for
        // them stops there (the kubelet's `localStorageEviction`).
        report.limit_evicted = self.local_storage_eviction(now, pods, send);
        if !report.limit_evicted.is_empty() {
            return report;
        }
        let Some(t) = eval.to_reclaim.first().copied() else {
            self.announced = None;
            return report;
        };
        report.threshold = Some(t);
        send(EvictionEvent::ThresholdMet { signal: t.signal });
        let mut obs = obs;
        if t.signal.condition() == Pressure::Disk {
            reclaimer.reclaim_containers(send);
            report.reclaimed.push("containers");
            obs = signals.observe();
            if !reclaim_sufficed(&eval.to_reclaim, &obs) {
                reclaimer.reclaim_images();
                report.reclaimed.push("images");
                obs = signals.observe();
            }
            if reclaim_sufficed(&eval.to_reclaim, &obs) {
                report.reclaim_sufficed = true;
                self.announced = None;
                return report;
            }
        }
        let Some(o) = obs.get(&t.signal).copied() else {
            return report;
        };
        let candidates: Vec<PodCandidate> = pods
            .candidates(t.signal)
            .into_iter()
            .filter(|p| !self.evicted.contains_key(&p.uid))
            .collect();
        let stopping: Vec<(u64, u64)> = self
            .evicted
            .values()
            .filter_map(|s| s.freeing)
            .filter(|(s, _, _)| *s == t.signal)
            .map(|(_, u, a)| (u, a))
            .collect();
        let victim = match decide(
            self.cfg.policy,
            t.signal,
            shortfall(&t, o),
            pending_relief(&stopping, o.available),
            &candidates,
        ) {
            Decision::Evict(v) => v,
            Decision::NotEvicting(mut n) => {
                let announce = self.should_announce(now, &n);
                if announce {
                    // What uses the filesystem, walked again only when the reason is said.
                    self.top_dirs = signals.top_dirs(n.signal).map(|t| (n.key(), t));
                    self.announced = Some((n.key(), now));
                }
                n.users = self
                    .top_dirs
                    .as_ref()
                    .filter(|(k, _)| *k == n.key())
                    .map(|(_, t)| t.clone());
                if announce {
                    send(EvictionEvent::NotEvicting {
                        message: n.message(),
                    });
                }
                report.not_evicting = Some(n);
                return report;
            }
        };
        let evict = self.eviction_of(&t, &obs, victim);
        self.evicted.insert(
            evict.uid.clone(),
            Stopping {
                at: now,
                freeing: Some((t.signal, usage(t.signal, victim), o.available)),
            },
        );
        self.announced = None;
        send(EvictionEvent::Evict(evict.clone()));
        report.evicted = Some(evict);
        report
    }

    /// Whether to say why no pod is evicted: when the reason is new, or again after
    /// [`NOT_EVICTING_REPEAT`]; a pass waiting for evicted pods to stop says nothing.
    fn should_announce(&self, now: Instant, n: &NotEvicting) -> bool {
        if matches!(n.reason, super::relief::NotEvictingReason::Stopping { .. }) {
            return false;
        }
        !self.announced.is_some_and(|(k, at)| {
            k == n.key() && now.saturating_duration_since(at) < NOT_EVICTING_REPEAT
        })
    }

    /// Every running pod over one of its local storage limits, evicted without grace
    /// (critical pods, and every pod with `--eviction-policy never`, are logged once and never
    /// evicted).
    fn local_storage_eviction(
        &mut self,
        now: Instant,
        pods: &dyn PodSource,
        send: &dyn Fn(EvictionEvent),
    ) -> Vec<LimitEviction> {
        let mut out = Vec::new();
        let mut kept_over = BTreeSet::new();
        for p in pods.local_storage() {
            if self.evicted.contains_key(&p.uid) {
                continue;
            }
            let Some((kind, message)) = limit_exceeded(&p) else {
                continue;
            };
            if p.critical || self.cfg.policy == EvictionPolicy::Never {
                if !self.kept_over_limit.contains(&p.uid) {
                    let why = if p.critical {
                        "critical pod"
                    } else {
                        "pod (--eviction-policy never)"
                    };
                    log::warn!(
                        "eviction manager: {why} {} is not evicted: {}",
                        p.name,
                        message.trim_end()
                    );
                }
                kept_over.insert(p.uid);
                continue;
            }
            self.evicted.insert(
                p.uid.clone(),
                Stopping {
                    at: now,
                    freeing: None,
                },
            );
            let e = LimitEviction {
                uid: p.uid,
                name: p.name,
                kind,
                message,
            };
            send(EvictionEvent::EvictForLimit(e.clone()));
            out.push(e);
        }
        self.kept_over_limit = kept_over;
        out
    }

    fn eviction_of(&self, t: &Threshold, obs: &Observations, victim: &PodCandidate) -> EvictPod {
        let (threshold, available) = obs
            .get(&t.signal)
            .map(|o| (threshold_quantity(t, o.capacity), o.available))
            .unwrap_or((0, 0));
        EvictPod {
            uid: victim.uid.clone(),
            name: victim.name.clone(),
            signal: t.signal,
            message: eviction_message(t.signal, threshold, available, victim),
            grace: eviction_grace(t.hard, victim.grace, self.cfg.max_pod_grace_period),
        }
    }

    /// The conditions of the last pass.
    pub fn conditions(&self) -> &BTreeSet<Pressure> {
        &self.conditions
    }
}

/// Starts the `eviction-manager` thread: a pass every [`HOUSEKEEPING_INTERVAL`], and one at
/// once when `wake` (the memory notifier) says memory is short. `send` delivers events to
/// the sync loop; the thread ends when it returns false (the loop is gone). Why a pass
/// evicted nothing under pressure goes to `not_evicting` at every pass.
pub fn spawn(
    cfg: EvictionConfig,
    signals: Box<dyn SignalSource>,
    pods: Box<dyn PodSource>,
    mut reclaimer: Box<dyn NodeReclaimer>,
    wake: Receiver<()>,
    send: Box<dyn Fn(EvictionEvent) -> bool + Send>,
    not_evicting: crate::status::NotEvictingCell,
) -> std::io::Result<thread::JoinHandle<()>> {
    thread::Builder::new()
        .name("eviction-manager".into())
        .spawn(move || {
            let mut manager = Manager::new(cfg);
            let alive = std::cell::Cell::new(true);
            let deliver = |e: EvictionEvent| {
                if !send(e) {
                    alive.set(false);
                }
            };
            let mut next = Instant::now();
            // After an eviction, wake-ups wait for the next interval: one pod per interval.
            let mut hold_until = next;
            loop {
                let now = Instant::now();
                if now >= next {
                    let r = manager.synchronize(
                        now,
                        signals.as_ref(),
                        pods.as_ref(),
                        reclaimer.as_mut(),
                        &deliver,
                    );
                    log_pass(&r);
                    not_evicting.set(r.not_evicting.as_ref().map(NotEvicting::message));
                    if !alive.get() {
                        return;
                    }
                    next = Instant::now() + HOUSEKEEPING_INTERVAL;
                    // Nothing to evict is not worth a pass at every memory wake-up either.
                    if r.evicted.is_some() || r.not_evicting.is_some() {
                        hold_until = next;
                    }
                }
                match wake.recv_timeout(next.saturating_duration_since(Instant::now())) {
                    // Memory is short: a pass now.
                    Ok(()) if Instant::now() >= hold_until => next = Instant::now(),
                    Ok(()) => {}
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    // No notifier: periodic passes only.
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        thread::sleep(next.saturating_duration_since(Instant::now()))
                    }
                }
            }
        })
}

fn log_pass(r: &PassReport) {
    for e in &r.limit_evicted {
        log::warn!(
            "eviction manager: evicting pod {}: {}",
            e.name,
            e.message.trim_end()
        );
    }
    let Some(t) = r.threshold else { return };
    if r.reclaim_sufficed {
        log::info!(
            "eviction manager: {} threshold met; node-level reclaim ({}) was enough, no pod evicted",
            t.signal,
            r.reclaimed.join(", ")
        );
    } else if let Some(e) = &r.evicted {
        log::warn!(
            "eviction manager: evicting pod {}: {}",
            e.name,
            e.message.trim_end()
        );
    } else if let Some(n) = &r.not_evicting {
        // The sync loop logs the event when it is announced (rate-limited).
        log::debug!("eviction manager: {}", n.message());
    }
}

/// A channel whose sender is dropped: a manager without a memory notifier.
pub fn no_wake() -> Receiver<()> {
    mpsc::channel().1
}
