//! sync::actions: the sync loop's decisions as pure functions (the kubelet's
//! `computePodActions`, apart from `SyncPod`'s effects).
//!
//! [`compute_actions`] reads one pod worker as the loop knows it (desired pod, observed
//! containers, backoff timers, probe and kill state) and says what to do now: kill a container
//! whose liveness or startup probe failed, send the stop signal after a preStop hook that used
//! the grace period or SIGKILL at its end, create the sandbox, start the next init container
//! (one at a time, in order) or the app containers that are due under their restartPolicy and
//! crash-loop backoff, turn ErrImagePull into ImagePullBackOff, give up on a pod whose init
//! container failed under restartPolicy Never. [`compute_removal_actions`] says the same for a
//! pod generation being removed, and [`compute_pod_change`] what a source edit does to a
//! worker. None of them does I/O, reads a clock or sends anything: the loop applies the
//! actions (worker.rs, removal.rs, reconcile.rs) by updating its state, recording events and
//! sending jobs to the executor. The tests are tables of state -> actions.

use std::time::Instant;

use super::backoff;
use super::eviction::EvictedSandbox;
use super::{restart_policy, PodWorker, Removal, SandboxPhase};
use crate::pod::static_pod::StaticPod;
use crate::prober::ProbeKind;
use crate::reason::WaitingReason;
use crate::runtime::ContainerKind;

/// What the loop knows about one pod when it decides.
#[derive(Debug)]
pub(super) struct PodState<'a> {
    pub worker: &'a PodWorker,
    /// The previous generation this worker waits for (`blocked_by`) is still being removed.
    pub previous_generation_removing: bool,
    /// A removal of this very uid is in flight: nothing may be created for it before it ends.
    pub same_uid_removing: bool,
    /// The node pressure the pod was evicted for still holds.
    pub pressure_active: bool,
}

/// One decision about a pod; `slot` indexes the worker's slots (init containers first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// The container's liveness or startup probe failed: Killing, preStop, stop signal.
    KillContainer {
        slot: usize,
        probe: ProbeKind,
    },
    /// The preStop hook of a container being killed used its grace period: stop signal now,
    /// SIGKILL after the minimum grace.
    StopAfterPreStop {
        slot: usize,
    },
    /// The grace period of a container being killed ended: SIGKILL.
    ForceKill {
        slot: usize,
    },
    /// The previous generation is gone: this worker may start.
    Unblock,
    CreateSandbox,
    /// An init container failed under restartPolicy Never: the pod failed for good.
    PodFailed {
        slot: usize,
        exit_code: i32,
    },
    /// The ImagePullBackOff timer of a waiting container is due; `show` when it waits with
    /// ErrImagePull (it then shows ImagePullBackOff and a BackOff event is recorded).
    PullBackoffDue {
        slot: usize,
        show: bool,
    },
    /// Start the container (its restart count is the slot's instances started so far).
    StartContainer {
        slot: usize,
    },
    /// The container ended and does not run again under the restartPolicy: no waiting reason.
    NotRestarted {
        slot: usize,
    },
    /// An evicted pod's containers have all stopped: remove its sandbox (namespaces, cgroups,
    /// emptyDir volumes), as the kubelet tears down an evicted pod.
    RemoveEvictedSandbox,
    /// An evicted pod's pressure has cleared (for `evictionPressureTransitionPeriod`, and its
    /// eviction backoff passed): start it again in a new sandbox.
    RestartEvicted,
}

/// The decisions for one pod, in the order they are applied.
pub(super) type Actions = Vec<Action>;

/// What to do now for one pod (see the module docs).
pub(super) fn compute_actions(now: Instant, state: &PodState<'_>) -> Actions {
    let w = state.worker;
    let mut actions = Vec::new();
    // Containers of a running pod being killed, or to kill: whatever else the pod waits for.
    for (i, s) in w.slots.iter().enumerate() {
        let Some(inst) = s.instance.as_ref() else {
            continue;
        };
        match (&inst.health.kill, inst.health.probe_failed) {
            (None, Some(probe)) => actions.push(Action::KillContainer { slot: i, probe }),
            (Some(k), _) if !k.killed && now >= k.deadline => actions.push(if k.hook_pending {
                Action::StopAfterPreStop { slot: i }
            } else {
                Action::ForceKill { slot: i }
            }),
            _ => {}
        }
    }
    if w.rejected.is_some() {
        return actions;
    }
    if let Some(e) = &w.evicted {
        let stopped = w.slots.iter().all(|s| s.instance.is_none());
        match e.sandbox {
            EvictedSandbox::Up
                if stopped
                    && w.sandbox != SandboxPhase::Creating
                    && w.sandbox_retry_at.is_none_or(|t| now >= t) =>
            {
                actions.push(Action::RemoveEvictedSandbox)
            }
            EvictedSandbox::Removed if !state.pressure_active && now >= e.restart_at => {
                actions.push(Action::RestartEvicted)
            }
            _ => {}
        }
        return actions;
    }
    if w.blocked_by.is_some() {
        if state.previous_generation_removing {
            return actions;
        }
        actions.push(Action::Unblock);
    }
    if state.same_uid_removing {
        return actions;
    }
    match &w.sandbox {
        SandboxPhase::Ready => {}
        SandboxPhase::Creating => return actions,
        SandboxPhase::Pending | SandboxPhase::Failed { .. } => {
            let waiting = w.sandbox_retry_at.is_some_and(|t| now < t);
            // Not while a container of the old sandbox still runs (or a start into it is in
            // flight).
            if !waiting && !w.slots.iter().any(|s| s.instance.is_some()) {
                actions.push(Action::CreateSandbox);
            }
            return actions;
        }
    }
    if w.failed {
        return actions;
    }
    let policy = restart_policy(&w.pod);
    let due = |actions: &mut Actions, i: usize| {
        let s = &w.slots[i];
        if s.pull_backoff_at.is_some_and(|t| now >= t) {
            let show = s
                .waiting
                .as_ref()
                .is_some_and(|(r, _)| *r == WaitingReason::ErrImagePull);
            actions.push(Action::PullBackoffDue { slot: i, show });
        }
        if s.retry_at.is_none_or(|t| now >= t) {
            actions.push(Action::StartContainer { slot: i });
        }
    };
    // Init containers: one at a time, in order, each to successful completion.
    let next_init = w
        .slots
        .iter()
        .enumerate()
        .find(|(_, s)| s.kind == ContainerKind::Init && !s.succeeded);
    if let Some((i, s)) = next_init {
        if s.instance.is_some() {
            return actions;
        }
        match &s.last {
            Some(last) if policy == "Never" => actions.push(Action::PodFailed {
                slot: i,
                exit_code: last.exit.exit_code,
            }),
            _ => due(&mut actions, i),
        }
        return actions;
    }
    for (i, s) in w.slots.iter().enumerate() {
        if s.kind != ContainerKind::App || s.instance.is_some() {
            continue;
        }
        let restart = s
            .last
            .as_ref()
            .is_none_or(|l| backoff::should_restart(s.kind, policy, l.exit.exit_code));
        if !restart {
            if s.waiting.is_some() {
                actions.push(Action::NotRestarted { slot: i });
            }
            continue;
        }
        due(&mut actions, i);
    }
    actions
}

/// One decision about a pod generation being removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RemovalAction {
    /// Stop signal to these containers (those whose preStop hook runs wait for it); SIGKILL
    /// is due after the grace period.
    Stop { ids: Vec<(String, i32)> },
    /// The preStop hooks used the grace period: stop signal to their containers now,
    /// SIGKILL after the minimum grace.
    StopAfterPreStop { ids: Vec<(String, i32)> },
    /// The grace period ended: SIGKILL to every container still running.
    Kill { ids: Vec<String> },
    /// Every container exited and nothing is in flight: remove the pod's records and sandbox.
    RemovePod,
}

/// What to do now for a pod generation being removed (`None`: wait for exits or jobs).
pub(super) fn compute_removal_actions(now: Instant, r: &Removal) -> Option<RemovalAction> {
    if !r.running.is_empty() {
        let due = r.kill_at.is_some_and(|t| now >= t);
        return match r.kill_at {
            None => Some(RemovalAction::Stop {
                ids: r
                    .running
                    .iter()
                    .filter(|(id, _)| !r.hooks_pending.contains(*id))
                    .map(|(id, sig)| (id.clone(), *sig))
                    .collect(),
            }),
            Some(_) if !r.killed && due && !r.hooks_pending.is_empty() => {
                Some(RemovalAction::StopAfterPreStop {
                    ids: r
                        .hooks_pending
                        .iter()
                        .filter_map(|id| Some((id.clone(), *r.running.get(id)?)))
                        .collect(),
                })
            }
            Some(_) if !r.killed && due => Some(RemovalAction::Kill {
                ids: r.running.keys().cloned().collect(),
            }),
            Some(_) => None,
        };
    }
    if r.pending_starts > 0 || r.sandbox_pending || r.remove_submitted {
        return None;
    }
    Some(RemovalAction::RemovePod)
}

/// What a source's current definition of a pod does to its worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PodChange {
    /// Same spec (same uid), same labels and annotations.
    Unchanged,
    /// Same spec, new labels or annotations: updated in place, nothing restarts.
    UpdateMetadata,
    /// The spec changed (a new uid): the generation is removed, the new one starts after it.
    Replace,
    /// No source defines the pod any more (and the sources have reported): stop and remove.
    Remove,
}

/// What `desired` (the pod as the sources define it now, if they do) does to a worker of
/// uid `uid` whose labels and annotations hash to `meta_hash`.
pub(super) fn compute_pod_change(
    uid: &str,
    meta_hash: &str,
    desired: Option<&StaticPod>,
    sources_ready: bool,
) -> PodChange {
    match desired {
        Some(sp) if sp.pod.metadata.uid.as_deref() == Some(uid) => {
            if sp.meta_hash != meta_hash {
                PodChange::UpdateMetadata
            } else {
                PodChange::Unchanged
            }
        }
        Some(_) => PodChange::Replace,
        None if sources_ready => PodChange::Remove,
        None => PodChange::Unchanged,
    }
}

#[cfg(test)]
#[path = "actions_tests.rs"]
mod tests;
