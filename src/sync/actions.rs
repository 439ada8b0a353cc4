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
use super::{restart_policy, PodWorker, SandboxPhase};
use crate::prober::ProbeKind;
use crate::reason::WaitingReason;
use crate::runtime::ContainerKind;
use crate::staticpod::StaticPod;

/// What the loop knows about one pod when it decides.
#[derive(Debug)]
pub(super) struct PodState<'a> {
    pub worker: &'a PodWorker,
    /// The previous generation this worker waits for (`blocked_by`) is still being removed.
    pub previous_generation_removing: bool,
    /// A removal of this very uid is in flight: nothing may be created for it before it ends.
    pub same_uid_removing: bool,
    /// How long the pod has been active (since `status.startTime`), once it has a start time.
    pub active_for: Option<std::time::Duration>,
    /// The node pressure the pod was evicted for still holds.
    pub pressure_active: bool,
}

/// The kubelet's status message (and event) for a pod past its `activeDeadlineSeconds`.
pub(super) const DEADLINE_MESSAGE: &str =
    "Pod was active on the node longer than the specified deadline";

/// Where an evicted pod's sandbox is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum EvictedSandbox {
    /// Containers are stopping, or the sandbox is still there.
    Up,
    Removing,
    /// Gone: the pod may start again in a new one.
    Removed,
}

/// One decision about a pod; `slot` indexes the worker's slots (init containers first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Action {
    /// The container's liveness or startup probe failed: Killing, preStop, stop signal.
    KillContainer { slot: usize, probe: ProbeKind },
    /// The preStop hook of a container being killed used its grace period: stop signal now,
    /// SIGKILL after the minimum grace.
    StopAfterPreStop { slot: usize },
    /// The grace period of a container being killed ended: SIGKILL.
    ForceKill { slot: usize },
    /// The previous generation is gone: this worker may start.
    Unblock,
    /// Create the pod's sandbox; `then_start` is the slot of the container to start in it
    /// as soon as it is made, in the same job ([`first_start`]).
    CreateSandbox { then_start: Option<usize> },
    /// An init container failed under restartPolicy Never: the pod failed for good.
    PodFailed { slot: usize, exit_code: i32 },
    /// The ImagePullBackOff timer of a waiting container is due; `show` when it waits with
    /// ErrImagePull (it then shows ImagePullBackOff and a BackOff event is recorded).
    PullBackoffDue { slot: usize, show: bool },
    /// Start the container (its restart count is the slot's instances started so far).
    StartContainer { slot: usize },
    /// The container ended and does not run again under the restartPolicy: no waiting reason.
    NotRestarted { slot: usize },
    /// The pod ran longer than its `activeDeadlineSeconds`: it failed for good
    /// (DeadlineExceeded) and its app containers are killed (its sidecars after them).
    DeadlineExceeded,
    /// A sidecar started for the first time in this sandbox: the next init container may run.
    SidecarStarted { slot: usize },
    /// The pod is done (its app containers finished for good, or it failed): stop this
    /// sidecar (preStop, stop signal, SIGKILL after the grace period); the later-declared
    /// ones have exited.
    StopSidecar { slot: usize },
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
    // The kubelet's active deadline handler: past the deadline the pod is failed and killed
    // (a pod already done for good is left alone).
    let over = super::active_deadline(&w.pod)
        .zip(state.active_for)
        .is_some_and(|(limit, active)| active >= limit);
    if over && !w.failed && !apps_finished(w, restart_policy(&w.pod)) {
        actions.push(Action::DeadlineExceeded);
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
                actions.push(Action::CreateSandbox {
                    then_start: first_start(now, w),
                });
            }
            return actions;
        }
    }
    container_actions(now, w, &mut actions);
    actions
}

/// The container a new sandbox starts first: the first `StartContainer` of what
/// [`container_actions`] decides once the sandbox is ready. Nothing in that decision comes
/// from the sandbox (the start reads the pod's IPs from the sandbox's record itself), so the
/// sandbox job starts it too, without a round trip through the loop in between, and the
/// runtime may prepare it while the sandbox is made; the other containers that are due follow
/// when the sandbox is reported.
fn first_start(now: Instant, w: &PodWorker) -> Option<usize> {
    let mut after = Vec::new();
    container_actions(now, w, &mut after);
    after.into_iter().find_map(|a| match a {
        Action::StartContainer { slot } => Some(slot),
        _ => None,
    })
}

/// What to do about the containers of a pod whose sandbox is ready: stop the sidecars of a
/// pod that is done, else start what is due (init containers in order, then the app
/// containers under their restartPolicy and backoff).
fn container_actions(now: Instant, w: &PodWorker, actions: &mut Actions) {
    let policy = restart_policy(&w.pod);
    if w.failed || apps_finished(w, policy) {
        // The kubelet's KillPod once the pod cannot progress or its app containers are done
        // for good: sidecars are stopped, last declared first, and not restarted.
        stop_sidecars(w, actions);
        return;
    }
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
    // Once initialized (in this sandbox), init containers are not run again and sidecars
    // that stopped are restarted (crash-loop backoff) without holding anything back.
    let initialized = initialized(w);
    let inits = w
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == ContainerKind::Init);
    if initialized {
        for (i, s) in inits {
            if s.sidecar() && s.instance.is_none() {
                due(actions, i);
            }
        }
    } else {
        // Init containers in order: each to successful completion, or for a sidecar until it
        // started (running, postStart returned, startup probe passed); a sidecar that started
        // before and stopped is restarted without holding back the later ones.
        for (i, s) in inits {
            if s.succeeded {
                if s.sidecar() && s.instance.is_none() {
                    due(actions, i);
                }
                continue;
            }
            match (&s.instance, &s.last) {
                (Some(_), _) if s.sidecar() && s.started() => {
                    actions.push(Action::SidecarStarted { slot: i });
                    continue;
                }
                (Some(_), _) => {}
                (None, Some(last)) if policy == "Never" && !s.sidecar() => {
                    actions.push(Action::PodFailed {
                        slot: i,
                        exit_code: last.exit.exit_code,
                    })
                }
                (None, _) => due(actions, i),
            }
            return;
        }
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
        due(actions, i);
    }
}

/// Whether the pod is initialized in its current sandbox: every init container completed
/// (a sidecar: started once), or an app container runs (adopted after a daemon restart).
/// A new sandbox runs the init containers again (`sandbox_changed` resets them).
pub(super) fn initialized(w: &PodWorker) -> bool {
    let mut inits = w.slots.iter().filter(|s| s.kind == ContainerKind::Init);
    inits.all(|s| s.succeeded)
        || w.slots
            .iter()
            .any(|s| s.kind == ContainerKind::App && s.instance.is_some())
}

/// Whether every app container of the pod has ended and none runs again under the pod's
/// restartPolicy (the kubelet's "keepCount == 0 and nothing to start": it then kills the pod,
/// its sidecars included). Never true under restartPolicy Always.
pub(super) fn apps_finished(w: &PodWorker, policy: &str) -> bool {
    let mut apps = w
        .slots
        .iter()
        .filter(|s| s.kind == ContainerKind::App)
        .peekable();
    apps.peek().is_some()
        && apps.all(|s| {
            s.instance.is_none()
                && s.last
                    .as_ref()
                    .is_some_and(|l| !backoff::should_restart(s.kind, policy, l.exit.exit_code))
        })
}

/// The sidecars of a pod that is done: the last-declared one still running is stopped
/// (the earlier ones wait for it: the kubelet's termination ordering), and containers
/// waiting for a restart no longer show a waiting reason.
fn stop_sidecars(w: &PodWorker, actions: &mut Actions) {
    let sidecars = || w.slots.iter().enumerate().filter(|(_, s)| s.sidecar());
    let app_running = w
        .slots
        .iter()
        .any(|s| s.kind == ContainerKind::App && s.instance.is_some());
    if app_running {
        // Killed first (a deadline exceeded): the sidecars wait for them.
    } else if let Some((i, s)) = sidecars().rev().find(|(_, s)| s.instance.is_some()) {
        // A start still in flight (no id yet) is stopped once it reports.
        if s.instance
            .as_ref()
            .is_some_and(|inst| !inst.id.is_empty() && inst.health.kill.is_none())
        {
            actions.push(Action::StopSidecar { slot: i });
        }
    }
    // App containers too: they ended for good (or never start in a failed pod).
    for (i, s) in w.slots.iter().enumerate() {
        if (s.sidecar() || s.kind == ContainerKind::App)
            && s.instance.is_none()
            && s.waiting.is_some()
        {
            actions.push(Action::NotRestarted { slot: i });
        }
    }
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
mod tests;
