//! sync::worker: one pod's worker (the kubelet's pod worker + SyncPod): building it from a
//! desired pod and re-adopting what a previous run left on disk, the sandbox-changed
//! reaction, syncing it (sandbox, then init containers in order, then app containers, each
//! start a job) and what a container exit means for it (restartPolicy, crash-loop backoff).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::core::v1::Pod;

use super::actions::{apps_finished, compute_actions, Action, Actions, PodState, DEADLINE_MESSAGE};
use super::backoff;
use super::executor::{ContainerStart, Job};
use super::{probes, restart_policy, Finished, Instance, PodWorker, SandboxPhase, Slot, SyncLoop};
use crate::reason::{EventReason, WaitingReason};
use crate::runtime::{ContainerKind, ContainerState, ExitRecord};
use crate::staticpod::StaticPod;
use crate::status::EventType;

impl SyncLoop {
    pub(super) fn start_worker(&mut self, sp: StaticPod, blocked_by: Option<String>) {
        crate::tp!("loop.worker.start");
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
            sandbox_failures: 0,
            pod_ips: Vec::new(),
            slots,
            blocked_by,
            start_time: None,
            created: self.now_str(),
            conditions: BTreeMap::new(),
            failed: false,
            rejected: None,
            deadline_exceeded: false,
            evicted: None,
            evictions: 0,
            since: self.clock.now(),
            was_ready: false,
            seen: self.clock.now(),
            start_recorded: false,
        };
        if self.removals.seen(&uid) {
            let is_static = w
                .spec
                .pod
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(crate::staticpod::CONFIG_SOURCE_ANNOTATION))
                .map(String::as_str)
                != Some(crate::staticpod::SourceKind::Api.as_str());
            self.cfg
                .metrics
                .restarted_pods
                .get_or_create(&vec![("static", is_static.to_string())])
                .inc();
        }
        // Re-adopt what a previous run left: the sandbox and the containers of this uid.
        self.on_disk.data.remove(&uid);
        self.on_disk.records.remove(&uid);
        if let Some((created, pod_ips)) = self.on_disk.sandboxes.remove(&uid) {
            // Running before this run: its start was (or could not be) measured then.
            w.start_recorded = true;
            w.sandbox = SandboxPhase::Ready;
            w.pod_ips = pod_ips;
            w.start_time = Some(created.clone());
            w.created = created;
        }
        if let Some(mut found) = self.on_disk.containers.remove(&uid) {
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
                slot.image_id = super::podstatus::image_id(&c.meta.image, &c.meta.image_digest);
                let live = slot.instance.as_ref().map(|i| i.id.clone());
                match c.state {
                    ContainerState::Exited(exit) => {
                        if slot.kind == ContainerKind::Init
                            && exit.exit_code == 0
                            && !slot.sidecar()
                        {
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
        // A running sidecar next to app containers that ran started before (the pod was
        // initialized): it gates nothing while its probes run again.
        let apps_ran = w
            .slots
            .iter()
            .any(|s| s.kind == ContainerKind::App && (s.instance.is_some() || s.last.is_some()));
        for s in &mut w.slots {
            if apps_ran && s.sidecar() && s.instance.is_some() {
                s.succeeded = true;
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
        self.records.save_desired(&w.spec);
        // Containers but no live sandbox (a reboot took it, or its namespaces died): the
        // kubelet's "sandbox changed".
        let changed = ran && w.sandbox != SandboxPhase::Ready;
        let warnings = w.spec.warnings.clone();
        self.workers.insert(name.clone(), w);
        for warning in warnings {
            self.event(
                EventType::Warning,
                &name,
                None,
                EventReason::VolumeDefaulted,
                &warning,
            );
        }
        if changed {
            self.sandbox_changed(&name, "no live sandbox for the pod's containers");
        }
        self.status.dirty = true;
    }

    /// The kubelet's reaction to a pod sandbox that is gone or not live ("Pod sandbox changed,
    /// it will be killed and re-created"): live containers are stopped, init containers run
    /// again (not under restartPolicy Never, where the kubelet leaves a pod that has run as it
    /// is), and a new sandbox is created once no container of the pod runs.
    pub(super) fn sandbox_changed(&mut self, name: &str, why: &str) {
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        w.sandbox = SandboxPhase::Pending;
        w.sandbox_retry_at = None;
        w.pod_ips.clear();
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
            EventReason::SandboxChanged,
            "Pod sandbox changed, it will be killed and re-created.",
        );
        for id in live {
            self.begin_container_kill(name, &id, None);
        }
    }

    /// Syncs one pod: decides with [`compute_actions`], then applies the decisions (state,
    /// events, jobs; signals to containers being killed).
    pub(super) fn sync_worker(&mut self, name: &str) {
        crate::tp!("loop.sync_worker");
        let now = self.clock.now();
        let Some(w) = self.workers.get(name) else {
            return;
        };
        let state = PodState {
            pressure_active: w
                .evicted
                .as_ref()
                .is_some_and(|e| e.pressure.is_some_and(|p| self.pressure.is_active(p))),
            worker: w,
            previous_generation_removing: w
                .blocked_by
                .as_ref()
                .is_some_and(|b| self.removals.contains(b)),
            same_uid_removing: self.removals.contains(&w.uid),
            active_for: self.active_for(w),
        };
        let actions = compute_actions(now, &state);
        if !actions.is_empty() {
            self.apply_actions(name, now, actions);
        }
    }

    fn apply_actions(&mut self, name: &str, now: Instant, actions: Actions) {
        crate::tp!("loop.actions");
        let mut jobs = Vec::new();
        let mut notes: Vec<(EventType, String, EventReason, String)> = Vec::new();
        let mut kills = Vec::new();
        let mut signals = Vec::new();
        let mut stops = Vec::new();
        let mut eviction_steps = Vec::new();
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        for action in actions {
            match action {
                Action::KillContainer { slot, probe } => {
                    if let Some(i) = &w.slots[slot].instance {
                        kills.push((w.slots[slot].container.name.clone(), i.id.clone(), probe));
                    }
                }
                Action::StopAfterPreStop { slot } | Action::ForceKill { slot } => {
                    let Some(inst) = w.slots[slot].instance.as_mut() else {
                        continue;
                    };
                    let Some(k) = inst.health.kill.as_mut() else {
                        continue;
                    };
                    if k.hook_pending {
                        // The preStop hook used the whole grace period: stop now, kill soon.
                        k.hook_pending = false;
                        k.deadline = now + probes::MIN_GRACE;
                        signals.push((inst.id.clone(), inst.stop_signal));
                    } else {
                        k.killed = true;
                        signals.push((inst.id.clone(), libc::SIGKILL));
                    }
                }
                Action::Unblock => {
                    w.blocked_by = None;
                    w.since = now;
                }
                Action::CreateSandbox { then_start } => {
                    w.sandbox = SandboxPhase::Creating;
                    let first = then_start.map(|slot| begin_start(&mut w.slots[slot]));
                    jobs.push(Job::CreateSandbox {
                        uid: w.uid.clone(),
                        pod: Arc::clone(&w.pod),
                        first,
                    });
                }
                Action::PodFailed { slot, exit_code } => {
                    w.failed = true;
                    notes.push((
                        EventType::Warning,
                        w.slots[slot].container.name.clone(),
                        EventReason::Failed,
                        format!(
                            "init container exited with {exit_code}; restartPolicy Never: the pod failed"
                        ),
                    ));
                }
                Action::PullBackoffDue { slot, show } => {
                    let s = &mut w.slots[slot];
                    s.pull_backoff_at = None;
                    if show {
                        // As the kubelet shows it between pull attempts.
                        let image = s.container.image.clone().unwrap_or_default();
                        let msg = format!("Back-off pulling image {image:?}");
                        s.waiting = Some((WaitingReason::ImagePullBackOff, msg.clone()));
                        notes.push((
                            EventType::Normal,
                            s.container.name.clone(),
                            EventReason::BackOff,
                            msg,
                        ));
                    }
                }
                Action::StartContainer { slot } => {
                    jobs.push(start_container(&w.uid, &w.pod, &mut w.slots[slot]));
                }
                Action::NotRestarted { slot } => w.slots[slot].waiting = None,
                Action::SidecarStarted { slot } => w.slots[slot].succeeded = true,
                Action::DeadlineExceeded => {
                    w.failed = true;
                    w.deadline_exceeded = true;
                    notes.push((
                        EventType::Normal,
                        String::new(),
                        EventReason::DeadlineExceeded,
                        DEADLINE_MESSAGE.to_string(),
                    ));
                    for s in &w.slots {
                        if let Some(i) = s.instance.as_ref().filter(|i| !i.id.is_empty()) {
                            if s.kind == ContainerKind::App {
                                stops.push((s.container.name.clone(), i.id.clone()));
                            }
                        }
                    }
                }
                Action::StopSidecar { slot } => {
                    if let Some(i) = &w.slots[slot].instance {
                        stops.push((w.slots[slot].container.name.clone(), i.id.clone()));
                    }
                }
                a @ (Action::RemoveEvictedSandbox | Action::RestartEvicted) => {
                    eviction_steps.push(a)
                }
            }
        }
        for a in eviction_steps {
            if a == Action::RemoveEvictedSandbox {
                self.remove_evicted_sandbox(name);
            } else {
                self.restart_evicted(name);
                // The new sandbox is asked for at once, not at the next timer.
                self.sync_worker(name);
            }
        }
        for (cname, id, probe) in kills {
            let kind = probe.title();
            self.event(
                EventType::Normal,
                name,
                Some(&cname),
                EventReason::Killing,
                &format!(
                    "Container {cname} failed {} probe, will be restarted",
                    kind.to_lowercase()
                ),
            );
            self.begin_container_kill(name, &id, Some(probe));
        }
        for (cname, id) in stops {
            self.event(
                EventType::Normal,
                name,
                Some(&cname),
                EventReason::Killing,
                &format!("Stopping container {cname}"),
            );
            self.begin_container_kill(name, &id, None);
        }
        for (id, sig) in signals {
            if let Err(e) = self.runtime.signal_container(&id, sig) {
                log::warn!("signal {sig} to {id}: {e}");
            }
        }
        for (t, c, reason, msg) in notes {
            let container = (!c.is_empty()).then_some(c.as_str());
            self.event(t, name, container, reason, &msg);
        }
        for j in jobs {
            crate::tp!("loop.submit");
            self.executor.submit(j);
            self.status.dirty = true;
        }
    }

    /// Applies an exit that arrived before the start result of `id` (now handled).
    pub(super) fn apply_early_exit(&mut self, id: &str) {
        if let Some((id, uid, exit)) = self.workers.take_early_exit(id) {
            self.on_exit(&id, &uid, exit);
        }
    }

    pub(super) fn on_exit(&mut self, id: &str, uid: &str, exit: ExitRecord) {
        let now = self.clock.now();
        if let Some(early) = self.removals.exited(uid, id) {
            if early {
                self.workers.keep_early_exit(id, uid, exit);
            }
            self.status.dirty = true;
            return;
        }
        let Some((name, w)) = self.workers.by_uid_mut(uid) else {
            return;
        };
        if !w
            .slots
            .iter()
            .any(|s| s.instance.as_ref().is_some_and(|i| i.id == id))
        {
            // Not started as far as the loop knows: its start job's result is still on its
            // way (the exit watcher can be quicker than the worker thread).
            self.workers.keep_early_exit(id, uid, exit);
            return;
        }
        let name = name.clone();
        let policy = restart_policy(&w.pod).to_string();
        // The pod is done (a sidecar's exit changes nothing of its app containers).
        let failed = w.failed;
        let finished = failed || apps_finished(w, &policy);
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
        if slot.kind == ContainerKind::Init && code == 0 && !slot.sidecar() {
            slot.succeeded = true;
        } else {
            // A sidecar restarts whatever the pod's restartPolicy, until the pod is done.
            let restart = if slot.sidecar() {
                !finished
            } else {
                !failed && backoff::should_restart(slot.kind, &policy, code)
            };
            if restart {
                let at = slot.backoff.restart_at(now);
                slot.retry_at = Some(at);
                if at > now {
                    let secs = at.duration_since(now).as_secs();
                    slot.waiting = Some((
                        WaitingReason::CrashLoopBackOff,
                        format!("back-off {secs}s restarting failed container={cname} pod={name}"),
                    ));
                    note = Some((
                        EventType::Warning,
                        EventReason::BackOff,
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
            EventReason::Exited,
            &format!("container exited with code {code} ({reason})"),
        );
        if let Some((t, r, m)) = note {
            self.event(t, &name, Some(&cname), r, &m);
        }
    }
}

/// The start job of a container that is due; its slot shows it being created.
fn start_container(uid: &str, pod: &Arc<Pod>, s: &mut Slot) -> Job {
    let start = begin_start(s);
    Job::StartContainer {
        uid: uid.to_string(),
        pod: Arc::clone(pod),
        container: start.container,
        kind: start.kind,
        restart_count: start.restart_count,
    }
}

/// What starting the slot's container asks for (its restart count: the slot's instances
/// started so far); from here on the slot shows the container being created.
fn begin_start(s: &mut Slot) -> ContainerStart {
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
        .is_some_and(|(r, _)| *r == WaitingReason::CrashLoopBackOff)
        || s.waiting.is_none()
    {
        s.waiting = Some((WaitingReason::ContainerCreating, String::new()));
    }
    ContainerStart {
        container: Box::new(s.container.clone()),
        kind: s.kind,
        restart_count,
    }
}
