//! sync::eviction: what the eviction manager's events do to the pods the sync loop owns.
//!
//! - **Node conditions** (`NodePressure`): MemoryPressure, DiskPressure and PIDPressure as the
//!   manager reports them (it applies `evictionPressureTransitionPeriod`), with their
//!   transition times and the kubelet's node events (`NodeHasDiskPressure`, ...), published
//!   in the snapshot.
//! - **Eviction** (`EvictionEvent::Evict`): the pod's containers are stopped with the
//!   eviction's grace (none for a hard threshold), the pod shows phase Failed, reason Evicted
//!   and the kubelet's message, the `DisruptionTarget` condition (reason
//!   `TerminationByKubelet`, the same message), with an `Evicted` event; once its containers have stopped its
//!   sandbox (cgroups, namespaces, emptyDir volumes) is removed, as the kubelet tears an
//!   evicted pod down. Critical pods are never evicted (checked again here).
//! - **Beyond the kubelet**, whose evicted static pods stay dead until their manifest changes:
//!   the pod starts again in a new sandbox once the pressure it was evicted for has cleared
//!   (the condition is False, i.e. not observed for the transition period) and its eviction
//!   backoff has passed (10 s, doubling per eviction of the generation, at most 5 min), the
//!   containers with their own crash-loop backoff. A pod is thus never evicted and restarted
//!   in a tight loop. A pod evicted for its own local storage limit (`EvictForLimit`: no node
//!   pressure, no grace) starts again after the same backoff, with new writable layers and
//!   empty emptyDir volumes; one that fills its storage again is evicted again, at most
//!   every 5 min once the backoff has grown.
//! - **Admission under pressure** (the eviction manager's `Admit`): under memory pressure
//!   alone, new BestEffort pods are refused; under any other pressure, every new pod; critical
//!   pods are always admitted. Refused pods are Failed with reason Evicted and "The node had
//!   condition: [DiskPressure]. ".
//! - **No eviction that cannot help** (`EvictionEvent::NotEvicting`): the manager's reason
//!   for evicting nothing under pressure becomes the node's Warning `EvictionSkipped` event
//!   (the manager rate-limits it).
//! - **Node-level reclaim**: the manager's request for a container GC pass goes to the GC
//!   thread with the loop's view of the pods, and the report back to the manager.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::actions::EvictedSandbox;
use super::{podstatus, restart_policy, PodWorker, SandboxPhase, SyncLoop};
use crate::eviction::ephemeral::LimitKind;
use crate::eviction::ranking::is_critical;
use crate::eviction::{EvictionEvent, Pressure};
use crate::pod::qos::{qos_class, QosClass};
use crate::reason::{EventReason, PodReason};
use crate::runtime::ContainerKind;
use crate::status::{EventType, NodeConditionView};

/// First wait before an evicted pod starts again; doubles per eviction, up to the maximum.
const EVICTION_BACKOFF: Duration = Duration::from_secs(10);
const EVICTION_BACKOFF_MAX: Duration = Duration::from_secs(300);

/// An eviction of a pod generation.
#[derive(Debug, Clone)]
pub(super) struct Evicted {
    pub message: String,
    /// The condition it was evicted for (`None`: its own local storage limit).
    pub pressure: Option<Pressure>,
    /// Stop grace (zero for a hard threshold).
    pub grace: Duration,
    pub sandbox: EvictedSandbox,
    /// Not before this may it start again (the eviction backoff).
    pub restart_at: Instant,
    /// RFC 3339 time of the eviction: the DisruptionTarget condition's transition.
    pub at: String,
}

/// The eviction backoff after the `n`th eviction (n >= 1).
pub(super) fn eviction_backoff(n: u32) -> Duration {
    let shift = n.saturating_sub(1).min(16);
    EVICTION_BACKOFF
        .saturating_mul(1u32 << shift)
        .min(EVICTION_BACKOFF_MAX)
}

/// The node conditions and when each last changed.
#[derive(Debug, Default)]
pub(super) struct NodePressure {
    active: BTreeSet<Pressure>,
    /// RFC 3339 time of each condition's last transition (the loop's start for none).
    transitions: BTreeMap<Pressure, String>,
}

impl NodePressure {
    pub fn is_active(&self, p: Pressure) -> bool {
        self.active.contains(&p)
    }

    /// The conditions now met.
    pub fn active(&self) -> &BTreeSet<Pressure> {
        &self.active
    }

    /// The eviction manager reports the conditions `set` at `now` (RFC 3339): returns each
    /// condition that changed, and whether it is met now.
    pub fn set(&mut self, set: BTreeSet<Pressure>, now: &str) -> Vec<(Pressure, bool)> {
        let mut changed = Vec::new();
        for p in Pressure::ALL {
            let (was, is) = (self.active.contains(&p), set.contains(&p));
            if was != is {
                self.transitions.insert(p, now.to_string());
                changed.push((p, is));
            }
        }
        self.active = set;
        changed
    }

    /// The conditions as v1 NodeConditions, with the kubelet's reasons and messages.
    pub fn views(&self) -> Vec<NodeConditionView> {
        Pressure::ALL
            .iter()
            .map(|p| {
                let on = self.active.contains(p);
                let (reason, message) = condition_text(*p, on);
                NodeConditionView {
                    type_: p.condition_type().to_string(),
                    status: if on { "True" } else { "False" }.into(),
                    reason: reason.into(),
                    message: message.into(),
                    last_transition_time: self.transitions.get(p).cloned().unwrap_or_default(),
                }
            })
            .collect()
    }
}

/// The kubelet's condition reason and message (`nodestatus.MemoryPressureCondition`, ...).
fn condition_text(p: Pressure, on: bool) -> (&'static str, &'static str) {
    match (p, on) {
        (Pressure::Memory, false) => (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
        (Pressure::Memory, true) => (
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
        ),
        (Pressure::Disk, false) => ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        (Pressure::Disk, true) => ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        (Pressure::Pid, false) => (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
        (Pressure::Pid, true) => (
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
        ),
    }
}

/// The node event of a condition's transition.
fn transition_event(p: Pressure, on: bool) -> EventReason {
    match (p, on) {
        (Pressure::Memory, true) => EventReason::NodeHasInsufficientMemory,
        (Pressure::Memory, false) => EventReason::NodeHasSufficientMemory,
        (Pressure::Disk, true) => EventReason::NodeHasDiskPressure,
        (Pressure::Disk, false) => EventReason::NodeHasNoDiskPressure,
        (Pressure::Pid, true) => EventReason::NodeHasInsufficientPID,
        (Pressure::Pid, false) => EventReason::NodeHasSufficientPID,
    }
}

/// The eviction manager's admission (`Admit`): `None` admits, else the message of the
/// refusal (reason Evicted). Under memory pressure alone only BestEffort pods are refused;
/// under any other pressure every pod; critical pods always pass.
pub(super) fn admit_under_pressure(
    active: &BTreeSet<Pressure>,
    critical: bool,
    qos: Option<QosClass>,
) -> Option<String> {
    if active.is_empty() || critical {
        return None;
    }
    if active.len() == 1 && active.contains(&Pressure::Memory) && qos != Some(QosClass::BestEffort)
    {
        return None;
    }
    let names: Vec<&str> = active.iter().map(|p| p.condition_type()).collect();
    Some(format!("The node had condition: [{}]. ", names.join(", ")))
}

impl SyncLoop {
    pub(super) fn on_eviction(&mut self, e: EvictionEvent) {
        match e {
            EvictionEvent::Conditions(set) => self.set_pressure(set),
            EvictionEvent::ThresholdMet { signal } => {
                let msg = format!("Attempting to reclaim {}", signal.resource());
                self.event(
                    EventType::Warning,
                    "",
                    None,
                    EventReason::EvictionThresholdMet,
                    &msg,
                );
            }
            EvictionEvent::ReclaimContainers(reply) => match &self.resync.gc {
                Some(gc) => gc.request_with_reply(self.gc_request(), Some(reply)),
                // No container GC (play): nothing to reclaim; the sender is dropped.
                None => drop(reply),
            },
            EvictionEvent::Evict(p) => {
                if self.evict(&p.uid, p.message, Some(p.signal.condition()), p.grace) {
                    self.cfg.metrics.record_eviction(p.signal.as_str());
                }
            }
            // A threshold is met and evicting cannot help (or is off): say why.
            EvictionEvent::NotEvicting { message } => self.event(
                EventType::Warning,
                "",
                None,
                EventReason::EvictionSkipped,
                &message,
            ),
            // The kubelet evicts for a local storage limit with no grace period.
            EvictionEvent::EvictForLimit(l) => {
                if self.evict(&l.uid, l.message, None, Duration::ZERO) {
                    // The kubelet's signal names of the local storage limits.
                    self.cfg.metrics.record_eviction(match l.kind {
                        LimitKind::EmptyDir => "emptydirfs.limit",
                        LimitKind::Pod => "ephemeralpodfs.limit",
                        LimitKind::Container => "ephemeralcontainerfs.limit",
                    });
                }
            }
        }
    }

    fn set_pressure(&mut self, set: BTreeSet<Pressure>) {
        let now = self.now_str();
        let node = self.cfg.node_name.clone();
        for (p, is) in self.pressure.set(set, &now) {
            let reason = transition_event(p, is);
            let msg = format!("Node {node} status is now: {reason}");
            let type_ = if is {
                EventType::Warning
            } else {
                EventType::Normal
            };
            log::info!("node condition {} is now {is}", p.condition_type());
            self.event(type_, "", None, reason, &msg);
        }
        self.status.dirty = true;
    }

    /// Evicts the pod `uid`; false when it is not evicted (gone, already evicted, rejected,
    /// critical or terminal).
    fn evict(
        &mut self,
        uid: &str,
        message: String,
        pressure: Option<Pressure>,
        grace: Duration,
    ) -> bool {
        let now = self.clock.now();
        let at = self.now_str();
        let Some((name, w)) = self.workers.by_uid_mut(uid) else {
            return false;
        };
        if w.evicted.is_some() || w.rejected.is_some() || is_critical(&w.pod) {
            return false;
        }
        if podstatus::is_terminal(w) {
            return false;
        }
        let name = name.clone();
        w.evictions = w.evictions.saturating_add(1);
        w.evicted = Some(Evicted {
            message: message.clone(),
            pressure,
            grace,
            sandbox: EvictedSandbox::Up,
            restart_at: now + eviction_backoff(w.evictions),
            at,
        });
        let live: Vec<String> = w
            .slots
            .iter()
            .filter_map(|s| s.instance.as_ref())
            .filter(|i| !i.id.is_empty())
            .map(|i| i.id.clone())
            .collect();
        log::warn!("{name}: evicted: {}", message.trim_end());
        self.event(
            EventType::Warning,
            &name,
            None,
            EventReason::Evicted,
            message.trim_end(),
        );
        for id in live {
            self.begin_container_kill(&name, &id, None);
        }
        self.status.dirty = true;
        true
    }

    /// Applies `RemoveEvictedSandbox` / `RestartEvicted` (see `actions`).
    pub(super) fn remove_evicted_sandbox(&mut self, name: &str) {
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        if let Some(e) = w.evicted.as_mut() {
            e.sandbox = EvictedSandbox::Removing;
            self.executor
                .submit(super::executor::Job::RemoveSandbox { uid: w.uid.clone() });
        }
    }

    pub(super) fn on_evicted_sandbox_removed(
        &mut self,
        uid: &str,
        result: Result<(), super::executor::JobError>,
    ) {
        let now = self.clock.now();
        let Some((name, w)) = self.workers.by_uid_mut(uid) else {
            return;
        };
        let Some(e) = w.evicted.as_mut() else {
            return;
        };
        match result {
            Ok(()) => {
                e.sandbox = EvictedSandbox::Removed;
                w.sandbox = SandboxPhase::Pending;
                w.sandbox_retry_at = None;
                w.pod_ips.clear();
            }
            Err(msg) => {
                log::warn!("{name}: removing the evicted pod's sandbox: {msg}");
                // Tried again at the next decision after a pause.
                e.sandbox = EvictedSandbox::Up;
                e.restart_at = e.restart_at.max(now + EVICTION_BACKOFF);
                w.sandbox_retry_at = Some(now + EVICTION_BACKOFF);
            }
        }
        self.status.dirty = true;
    }

    pub(super) fn restart_evicted(&mut self, name: &str) {
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        let Some(e) = w.evicted.take() else {
            return;
        };
        let never = restart_policy(&w.pod) == "Never";
        for s in &mut w.slots {
            if s.kind == ContainerKind::Init {
                s.succeeded = false;
            }
            // A new start of the pod: even under restartPolicy Never its containers run again
            // (the kubelet would create a new pod); the killed instance is `lastState`.
            if never {
                if let Some(last) = s.last.take() {
                    s.previous_log = Some(last.log_path);
                }
            }
            // The crash-loop backoff of the killed instance (`retry_at`) still applies.
            s.waiting = None;
        }
        let msg = match e.pressure {
            Some(p) => format!(
                "the node's {} cleared: starting the pod again after its eviction",
                p.condition_type()
            ),
            None => "starting the pod again after its eviction for its local storage limit (eviction backoff passed)".to_string(),
        };
        self.event(
            EventType::Normal,
            name,
            None,
            EventReason::EvictionRecovered,
            &msg,
        );
        self.status.dirty = true;
    }

    /// When an evicted pod may start again next (its backoff), for the loop's timer.
    pub(super) fn eviction_restart_deadline(&self) -> Option<Instant> {
        self.workers
            .values()
            .filter_map(|w| w.evicted.as_ref())
            .filter(|e| {
                e.sandbox == EvictedSandbox::Removed
                    && !e.pressure.is_some_and(|p| self.pressure.is_active(p))
            })
            .map(|e| e.restart_at)
            .min()
    }

    /// Admission under node pressure; marks `w` rejected when refused.
    pub(super) fn admit_under_pressure(&mut self, name: &str, w: &mut PodWorker) {
        let qos = qos_class(&w.pod).ok();
        if let Some(message) =
            admit_under_pressure(self.pressure.active(), is_critical(&w.pod), qos)
        {
            self.event(
                EventType::Warning,
                name,
                None,
                EventReason::Evicted,
                message.trim_end(),
            );
            w.rejected = Some((PodReason::Evicted, message));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_under_pressure_table() {
        let set = |ps: &[Pressure]| ps.iter().copied().collect::<BTreeSet<_>>();
        let be = Some(QosClass::BestEffort);
        let bu = Some(QosClass::Burstable);
        let cases = [
            (set(&[]), false, be, None),
            (
                set(&[Pressure::Memory]),
                false,
                be,
                Some("The node had condition: [MemoryPressure]. "),
            ),
            (set(&[Pressure::Memory]), false, bu, None),
            (set(&[Pressure::Memory]), true, be, None),
            (
                set(&[Pressure::Disk]),
                false,
                bu,
                Some("The node had condition: [DiskPressure]. "),
            ),
            (set(&[Pressure::Disk]), true, bu, None),
            (
                set(&[Pressure::Pid]),
                false,
                Some(QosClass::Guaranteed),
                Some("The node had condition: [PIDPressure]. "),
            ),
            (
                set(&[Pressure::Memory, Pressure::Disk]),
                false,
                bu,
                Some("The node had condition: [MemoryPressure, DiskPressure]. "),
            ),
        ];
        for (active, critical, qos, want) in cases {
            assert_eq!(
                admit_under_pressure(&active, critical, qos).as_deref(),
                want,
                "{active:?} critical={critical} {qos:?}"
            );
        }
    }

    #[test]
    fn eviction_backoff_doubles_up_to_five_minutes() {
        let got: Vec<u64> = (1..=7).map(|n| eviction_backoff(n).as_secs()).collect();
        assert_eq!(got, vec![10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(eviction_backoff(100), EVICTION_BACKOFF_MAX);
    }
}
