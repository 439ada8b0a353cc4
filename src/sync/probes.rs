//! sync::probes: what probes and lifecycle hooks do to the pods the sync loop owns.
//!
//! The prober thread ([`crate::prober::scheduler`]) runs the probes; this file keeps the sync
//! loop's side: which running containers are probed (added when a container runs and its
//! postStart hook completed, removed when it stops or is being killed), what a probe update
//! changes (readiness -> `ready` and the pod conditions; startup -> `started`; a failed
//! liveness or startup probe -> Killing, preStop, stop signal, SIGKILL at the end of the
//! grace period, then the restartPolicy and backoff decide), the Unhealthy / ProbeWarning
//! events, and the hooks: postStart (the container is not started until it returns; failure
//! -> FailedPostStartHook and a kill) and preStop (before the stop signal, counted against the
//! grace period; FailedPreStopHook on failure). Hooks run as executor jobs, never here.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::executor::Job;
use super::{grace_of, PodWorker, SyncLoop};
use crate::prober::scheduler::{ProbeControl, ProbeTarget, ProbeUpdate};
use crate::prober::{container_probes, hook_action, HookKind, ProbeKind, ProbeResult};
use crate::reason::EventReason;
use crate::status::EventType;

/// A container always gets at least this long between the stop signal and SIGKILL, also with
/// a grace period of zero and after a preStop hook (the kubelet's minimumGracePeriodInSeconds);
/// only an eviction without grace kills at once.
pub const MIN_GRACE: Duration = Duration::from_secs(2);
/// podvisor's cap on a postStart hook (the kubelet waits without limit).
pub const POST_START_TIMEOUT: Duration = Duration::from_secs(120);

/// A container being killed by the sync loop while its pod keeps running (failed liveness or
/// startup probe, failed postStart hook).
#[derive(Debug, Clone)]
pub(super) struct Kill {
    /// preStop still running: the stop signal waits for it (or for the deadline). Once it is
    /// false the stop signal has been sent.
    pub(super) hook_pending: bool,
    pub(super) killed: bool,
    /// Stop signal (if the hook still runs) or SIGKILL is due here.
    pub(super) deadline: Instant,
}

/// Probe- and hook-derived state of one container instance.
#[derive(Debug, Clone, Default)]
pub(super) struct Health {
    /// postStart is running: not Running, not started, no Started event yet.
    pub(super) post_start_pending: bool,
    /// The startup probe passed (true when there is none).
    pub(super) started: bool,
    /// The readiness probe's state (true when there is none).
    pub(super) ready: bool,
    pub(super) kill: Option<Kill>,
    /// The liveness or startup probe failed: the sync loop kills the container (once).
    pub(super) probe_failed: Option<ProbeKind>,
}

impl Health {
    pub(super) fn new(c: &Container) -> Health {
        Health {
            post_start_pending: false,
            started: c.startup_probe.is_none(),
            ready: c.readiness_probe.is_none(),
            kill: None,
            probe_failed: None,
        }
    }
}

/// No prober: probes are never run (the default until [`SyncLoop::set_prober`]).
struct NoProber;
impl ProbeControl for NoProber {
    fn add(&self, _: ProbeTarget) {}
    fn remove(&self, _: &str) {}
}

/// The sync loop's handle on the prober thread and what it has asked it to probe (by
/// container id): the prober runs the probes and reports results that change something; the
/// results themselves live in each instance's [`Health`].
pub(super) struct ProbeState {
    control: Box<dyn ProbeControl>,
    probed: BTreeSet<String>,
}

impl ProbeState {
    /// Whether container `id` is probed already (or its probes were refused).
    fn probed(&self, id: &str) -> bool {
        self.probed.contains(id)
    }

    /// Container `id`'s probes cannot be built: never retried for this instance.
    fn refuse(&mut self, id: String) {
        self.probed.insert(id);
    }

    /// Starts probing the containers of `add`, and stops probing those not in `desired`.
    fn sync(&mut self, add: Vec<(String, ProbeTarget)>, desired: &BTreeSet<String>) {
        for (id, t) in add {
            self.probed.insert(id);
            self.control.add(t);
        }
        let gone: Vec<String> = self.probed.difference(desired).cloned().collect();
        for id in gone {
            self.probed.remove(&id);
            self.control.remove(&id);
        }
    }
}

impl Health {
    /// A probe result that changed (`Some(passing)`) or was only recorded (`None`).
    fn apply(&mut self, kind: ProbeKind, changed: Option<bool>) {
        match (kind, changed) {
            (ProbeKind::Readiness, Some(v)) => self.ready = v,
            (ProbeKind::Startup, Some(true)) => self.started = true,
            // The kill is decided by `compute_actions` (Killing, preStop, stop signal).
            (ProbeKind::Liveness | ProbeKind::Startup, Some(false)) => {
                self.probe_failed = Some(kind)
            }
            _ => {}
        }
    }
}

impl Default for ProbeState {
    fn default() -> Self {
        ProbeState {
            control: Box::new(NoProber),
            probed: BTreeSet::new(),
        }
    }
}

/// The address probes and hooks use by default: the pod IP.
pub(super) use crate::runtime::spec::pod_ip;

/// The namespace probes and hooks connect from: the pod's own for a pod without a network
/// (its 127.0.0.1), the daemon's otherwise (to the pod IP, as the kubelet does; `None`).
fn probe_netns(
    runtime: &dyn crate::runtime::Runtime,
    uid: &str,
    pod_ips: &[String],
) -> Option<std::path::PathBuf> {
    if pod_ips.is_empty() {
        runtime.pod_network_namespace(uid)
    } else {
        None
    }
}

fn kill_grace(pod: &Pod, c: &Container, kind: Option<ProbeKind>) -> Duration {
    let probe = match kind {
        Some(ProbeKind::Liveness) => c.liveness_probe.as_ref(),
        Some(ProbeKind::Startup) => c.startup_probe.as_ref(),
        _ => None,
    };
    probe
        .and_then(|p| p.termination_grace_period_seconds)
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(s as u64))
        .unwrap_or_else(|| grace_of(pod))
}

impl SyncLoop {
    /// Connects the prober thread (the daemon does; tests pass a recording fake).
    pub fn set_prober(&mut self, control: Box<dyn ProbeControl>) {
        self.probe_state.control = control;
    }

    /// A container just runs: runs its postStart hook first, or reports it Started.
    pub(super) fn begin_post_start(&mut self, name: &str, cname: &str) {
        let host_ip = self.cfg.host_ip.clone();
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        let uid = w.uid.clone();
        let w_uid = uid.clone();
        let pod = Arc::clone(&w.pod);
        let ips = w.pod_ips.clone();
        let Some(slot) = w.slots.iter_mut().find(|s| s.container.name == cname) else {
            return;
        };
        let Some(inst) = slot.instance.as_mut() else {
            return;
        };
        let handler = slot
            .container
            .lifecycle
            .as_ref()
            .and_then(|l| l.post_start.as_ref());
        let Some(handler) = handler else {
            self.event(
                EventType::Normal,
                name,
                Some(cname),
                EventReason::Started,
                &format!("Started container {cname}"),
            );
            return;
        };
        match hook_action(
            HookKind::PostStart,
            handler,
            &slot.container,
            &pod_ip(&pod, &host_ip, &ips),
        ) {
            Ok(action) => {
                inst.health.post_start_pending = true;
                let job = Job::Hook {
                    uid,
                    name: cname.to_string(),
                    container_id: inst.id.clone(),
                    hook: HookKind::PostStart,
                    action,
                    timeout: POST_START_TIMEOUT,
                    netns: probe_netns(&*self.runtime, &w_uid, &ips),
                };
                self.executor.submit(job);
            }
            Err(e) => {
                let id = inst.id.clone();
                self.event(
                    EventType::Warning,
                    name,
                    Some(cname),
                    EventReason::FailedPostStartHook,
                    &e.to_string(),
                );
                self.begin_container_kill(name, &id, None);
            }
        }
    }

    /// Kills one container of a running pod: preStop (if any), stop signal, SIGKILL after the
    /// grace period (the probe's terminationGracePeriodSeconds for probe kills).
    pub(super) fn begin_container_kill(&mut self, name: &str, id: &str, kind: Option<ProbeKind>) {
        let now = self.clock.now();
        let host_ip = self.cfg.host_ip.clone();
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        let uid = w.uid.clone();
        let pod = Arc::clone(&w.pod);
        let ips = w.pod_ips.clone();
        let evicted_grace = w.evicted.as_ref().map(|e| e.grace);
        let Some(slot) = w
            .slots
            .iter_mut()
            .find(|s| s.instance.as_ref().is_some_and(|i| i.id == id))
        else {
            return;
        };
        // An eviction sets the grace (none for a hard threshold or a local storage limit). As in
        // the kubelet's killContainer, preStop runs only with a grace period above zero.
        let grace = evicted_grace.unwrap_or_else(|| kill_grace(&pod, &slot.container, kind));
        let cname = slot.container.name.clone();
        let pre_stop = slot
            .container
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
            .filter(|_| !grace.is_zero())
            .map(|h| {
                hook_action(
                    HookKind::PreStop,
                    h,
                    &slot.container,
                    &pod_ip(&pod, &host_ip, &ips),
                )
            });
        let Some(inst) = slot.instance.as_mut() else {
            return;
        };
        if inst.health.kill.is_some() {
            return;
        }
        let stop_signal = inst.stop_signal;
        let mut job = None;
        let mut hook_error = None;
        match pre_stop {
            Some(Ok(action)) => {
                job = Some(Job::Hook {
                    netns: probe_netns(&*self.runtime, &uid, &ips),
                    uid,
                    name: cname.clone(),
                    container_id: id.to_string(),
                    hook: HookKind::PreStop,
                    action,
                    timeout: grace,
                });
            }
            Some(Err(e)) => hook_error = Some(e.to_string()),
            None => {}
        }
        // The stop signal gets at least MIN_GRACE before SIGKILL (the kubelet's minimal
        // shutdown window), even with terminationGracePeriodSeconds: 0; with a preStop hook the
        // hook has the whole grace period and the window starts when it ends. Evictions are the
        // exception: a hard threshold kills at once, so the victim's memory is back within the
        // 1 s target of docs/benchmarks.md (the kubelet's 1 s + 2 s leave a pod ignoring
        // SIGTERM 2 s more).
        let floor = if evicted_grace.is_some() {
            Duration::ZERO
        } else {
            MIN_GRACE
        };
        inst.health.kill = Some(Kill {
            hook_pending: job.is_some(),
            killed: false,
            deadline: now
                + if job.is_some() {
                    grace
                } else {
                    grace.max(floor)
                },
        });
        if let Some(msg) = hook_error {
            self.event(
                EventType::Warning,
                name,
                Some(&cname),
                EventReason::FailedPreStopHook,
                &msg,
            );
        }
        match job {
            Some(j) => self.executor.submit(j),
            None => {
                if let Err(e) = self.runtime.signal_container(id, stop_signal) {
                    log::warn!("{name} {cname}: stop {id}: {e}");
                }
            }
        }
        self.status.dirty = true;
    }

    /// A probe result the sync loop must act on.
    pub(super) fn on_probe(&mut self, u: ProbeUpdate) {
        let Some((name, w)) = self.workers.by_uid_mut(&u.pod_uid) else {
            return;
        };
        let name = name.clone();
        let Some(inst) = w
            .slots
            .iter_mut()
            .filter_map(|s| s.instance.as_mut())
            .find(|i| i.id == u.container_id)
        else {
            return;
        };
        if inst.health.kill.is_some() || inst.health.probe_failed.is_some() {
            return;
        }
        inst.health.apply(u.kind, u.changed);
        let kind = u.kind.title();
        match &u.result {
            ProbeResult::Failure { message } => self.event(
                EventType::Warning,
                &name,
                Some(&u.container),
                EventReason::Unhealthy,
                &format!("{kind} probe failed: {message}"),
            ),
            ProbeResult::Warning { message } => self.event(
                EventType::Warning,
                &name,
                Some(&u.container),
                EventReason::ProbeWarning,
                &format!("{kind} probe warning: {message}"),
            ),
            ProbeResult::Success => {}
        }
        self.status.dirty = true;
    }

    /// A hook job finished.
    pub(super) fn on_hook_done(
        &mut self,
        uid: &str,
        cname: &str,
        id: &str,
        hook: HookKind,
        what: &str,
        result: ProbeResult,
    ) {
        let now = self.clock.now();
        let pod_name = self
            .workers
            .name_of(uid)
            .or_else(|| self.removals.get(uid).map(|r| r.pod_name()))
            .unwrap_or_else(|| uid.to_string());
        // The kubelet's wording (kuberuntime handlers.go).
        let message = match &result {
            ProbeResult::Failure { message } => Some(format!(
                "{what} for Container {cname:?} in Pod {pod_name:?} failed - error: {message}"
            )),
            _ => None,
        };
        let removal = match hook {
            HookKind::PreStop => self.removals.pre_stop_done(uid, id, now),
            _ => self.removals.contains(uid).then(|| (false, Vec::new())),
        };
        if let Some((awaited, work)) = removal {
            self.do_removal_work(work);
            if let (true, Some(m)) = (awaited, message) {
                self.event(
                    EventType::Warning,
                    &pod_name,
                    Some(cname),
                    EventReason::FailedPreStopHook,
                    &m,
                );
            }
            return;
        }
        let Some((name, w)) = self.workers.by_uid_mut(uid) else {
            return;
        };
        let name = name.clone();
        let Some(inst) = w
            .slots
            .iter_mut()
            .filter_map(|s| s.instance.as_mut())
            .find(|i| i.id == id)
        else {
            return;
        };
        self.status.dirty = true;
        match hook {
            HookKind::PostStart => {
                inst.health.post_start_pending = false;
                match message {
                    None => self.event(
                        EventType::Normal,
                        &name,
                        Some(cname),
                        EventReason::Started,
                        &format!("Started container {cname}"),
                    ),
                    Some(m) => {
                        self.event(
                            EventType::Warning,
                            &name,
                            Some(cname),
                            EventReason::FailedPostStartHook,
                            &m,
                        );
                        self.begin_container_kill(&name, id, None);
                    }
                }
            }
            HookKind::PreStop => {
                let stop_signal = inst.stop_signal;
                let Some(k) = inst.health.kill.as_mut().filter(|k| k.hook_pending) else {
                    return;
                };
                k.hook_pending = false;
                k.deadline = k.deadline.max(now + MIN_GRACE);
                if let Err(e) = self.runtime.signal_container(id, stop_signal) {
                    log::warn!("{name} {cname}: stop {id}: {e}");
                }
                if let Some(m) = message {
                    self.event(
                        EventType::Warning,
                        &name,
                        Some(cname),
                        EventReason::FailedPreStopHook,
                        &m,
                    );
                }
            }
        }
    }

    /// preStop jobs for the running containers of a pod going away; returns the jobs and the
    /// ids whose stop signal waits for them.
    pub(super) fn pre_stop_jobs(&mut self, w: &PodWorker) -> (Vec<Job>, BTreeSet<String>) {
        let ip = pod_ip(&w.pod, &self.cfg.host_ip, &w.pod_ips);
        let grace = grace_of(&w.pod);
        let mut jobs = Vec::new();
        let mut ids = BTreeSet::new();
        let mut errors = Vec::new();
        if grace.is_zero() {
            // terminationGracePeriodSeconds: 0 leaves no time for preStop (the kubelet skips it).
            return (jobs, ids);
        }
        for s in &w.slots {
            let Some(inst) = s.instance.as_ref().filter(|i| !i.id.is_empty()) else {
                continue;
            };
            if inst.health.kill.is_some() {
                continue;
            }
            let Some(h) = s
                .container
                .lifecycle
                .as_ref()
                .and_then(|l| l.pre_stop.as_ref())
            else {
                continue;
            };
            match hook_action(HookKind::PreStop, h, &s.container, &ip) {
                Ok(action) => {
                    ids.insert(inst.id.clone());
                    jobs.push(Job::Hook {
                        netns: probe_netns(&*self.runtime, &w.uid, &w.pod_ips),
                        uid: w.uid.clone(),
                        name: s.container.name.clone(),
                        container_id: inst.id.clone(),
                        hook: HookKind::PreStop,
                        action,
                        timeout: grace,
                    });
                }
                Err(e) => errors.push((s.container.name.clone(), e.to_string())),
            }
        }
        for (c, e) in errors {
            self.event(
                EventType::Warning,
                &w.spec.full_name,
                Some(&c),
                EventReason::FailedPreStopHook,
                &e,
            );
        }
        (jobs, ids)
    }

    /// Tells the prober which containers to probe: running, past postStart, not being killed.
    pub(super) fn sync_probes(&mut self) {
        let mut want: Vec<(String, ProbeTarget)> = Vec::new();
        let mut errors = Vec::new();
        let now = self.clock.now();
        let mut desired = BTreeSet::new();
        for (name, w) in self.workers.iter() {
            let ip = pod_ip(&w.pod, &self.cfg.host_ip, &w.pod_ips);
            for s in &w.slots {
                let Some(inst) = s.instance.as_ref().filter(|i| !i.id.is_empty()) else {
                    continue;
                };
                if inst.health.post_start_pending || inst.health.kill.is_some() {
                    continue;
                }
                let c = &s.container;
                if c.liveness_probe.is_none()
                    && c.readiness_probe.is_none()
                    && c.startup_probe.is_none()
                {
                    continue;
                }
                desired.insert(inst.id.clone());
                if self.probe_state.probed(&inst.id) {
                    continue;
                }
                match container_probes(c, &ip) {
                    Ok(probes) => want.push((
                        inst.id.clone(),
                        ProbeTarget {
                            pod_uid: w.uid.clone(),
                            pod_name: w.pod.metadata.name.clone().unwrap_or_default(),
                            namespace: w.pod.metadata.namespace.clone().unwrap_or_default(),
                            container: c.name.clone(),
                            container_id: inst.id.clone(),
                            started_at: now,
                            netns: probe_netns(&*self.runtime, &w.uid, &w.pod_ips),
                            probes,
                        },
                    )),
                    Err(e) => {
                        // Never retried for this instance: the manifest must change.
                        self.probe_state.refuse(inst.id.clone());
                        errors.push((name.clone(), c.name.clone(), e.to_string()));
                    }
                }
            }
        }
        self.probe_state.sync(want, &desired);
        for (pod, c, e) in errors {
            self.event(EventType::Warning, &pod, Some(&c), EventReason::Failed, &e);
        }
    }

    /// The earliest kill timer of a container of a running pod.
    pub(super) fn container_kill_deadline(&self) -> Option<Instant> {
        self.workers
            .values()
            .flat_map(|w| w.slots.iter())
            .filter_map(|s| s.instance.as_ref()?.health.kill.as_ref())
            .filter(|k| !k.killed)
            .map(|k| k.deadline)
            .min()
    }
}
