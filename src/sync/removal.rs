//! sync::removal: the pod generations being stopped and removed, and the state they own
//! ([`Removals`]; the kubelet's killPodWithSyncResult and pod cleanup): preStop hooks, the
//! stop signal, SIGKILL at the end of the grace period (decided by
//! [`compute_removal_actions`, a pure function]), then one `RemovePod` job once every container exited
//! and no start or sandbox creation of the uid is in flight. [`Removals::sync`] returns that
//! work; the loop sends the signals and submits the jobs.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use super::executor::{Job, RemovePodFailure};
use super::results::removal_backoff;
use super::{grace_of, probes, SandboxPhase, SyncLoop};
use crate::status::PodView;

/// How many removed pod uids are remembered for `kubelet_restarted_pods_total`.
const RECENTLY_REMOVED: usize = 256;

/// A pod generation being stopped and removed.
#[derive(Debug)]
pub(super) struct Removal {
    /// Running containers: id -> stop signal.
    pub(super) running: BTreeMap<String, i32>,
    /// Start jobs still in flight for this uid.
    pub(super) pending_starts: u32,
    /// A sandbox creation still in flight for this uid: removing before it ends would leave
    /// the sandbox it then creates (mounts, cgroups) behind.
    pub(super) sandbox_pending: bool,
    pub(super) grace: Duration,
    pub(super) kill_at: Option<Instant>,
    pub(super) killed: bool,
    pub(super) remove_submitted: bool,
    /// `RemovePod` jobs that failed so far, and when the next may run (a removal that keeps
    /// failing, say a busy mount or cgroup, is retried with backoff, not in a tight loop).
    pub(super) remove_failures: u32,
    pub(super) remove_retry_at: Option<Instant>,
    /// Shown as Terminating until gone, when the whole pod goes away (not on replacement).
    pub(super) view: Option<PodView>,
    /// Whether the desired-pod record must be deleted once removed.
    pub(super) forget_store: bool,
    /// `namespace/name` of the pod (or its uid for orphans), for events.
    pub(super) name: String,
    /// Containers whose preStop hook runs: their stop signal waits for it.
    pub(super) hooks_pending: BTreeSet<String>,
    /// The running sidecars, in declaration order: each gets its stop signal once the app
    /// containers and the sidecars declared after it exited (the kubelet's termination
    /// ordering), or at the end of the grace period.
    pub(super) sidecars: Vec<String>,
    /// Sidecars whose stop signal waits for their turn.
    pub(super) waiting_turn: BTreeSet<String>,
    /// The generation's `prober_probe_total` series, forgotten once it is removed (no probe
    /// of it can run any more then).
    pub(super) probe_series: Vec<(crate::metrics::ProbeType, crate::metrics::ProbeSubject)>,
}

impl Removal {
    /// Containers found on disk that no pod claims (uid `uid`): stopped within the default
    /// grace period, in no particular order (their pod is not known).
    pub(super) fn orphan(uid: String, running: BTreeMap<String, i32>) -> Removal {
        Removal {
            running,
            pending_starts: 0,
            sandbox_pending: false,
            grace: Duration::from_secs(30),
            kill_at: None,
            killed: false,
            remove_submitted: false,
            remove_failures: 0,
            remove_retry_at: None,
            view: None,
            forget_store: true,
            name: uid,
            hooks_pending: BTreeSet::new(),
            sidecars: Vec::new(),
            waiting_turn: BTreeSet::new(),
            probe_series: Vec::new(),
        }
    }

    /// The pod's name for events and hook messages: its full name, or the uid of an orphan.
    pub(super) fn pod_name(&self) -> String {
        self.view
            .as_ref()
            .map(|v| crate::status::full_name(&v.pod))
            .unwrap_or_else(|| self.name.clone())
    }
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
    /// Sidecars whose turn came (the app containers and the later-declared sidecars exited,
    /// their preStop hook returned): stop signal now, SIGKILL at the pod's deadline.
    StopInTurn { ids: Vec<(String, i32)> },
    /// The grace period ended: SIGKILL to every container still running.
    Kill { ids: Vec<String> },
    /// Every container exited and nothing is in flight: remove the pod's records and sandbox.
    RemovePod,
}

/// What to do now for a pod generation being removed (`None`: wait for exits or jobs).
pub(super) fn compute_removal_actions(now: Instant, r: &Removal) -> Option<RemovalAction> {
    if !r.running.is_empty() {
        let due = r.kill_at.is_some_and(|t| now >= t);
        // Stop signals not sent yet: preStop hooks running, sidecars waiting for their turn.
        let held = |id: &String| r.hooks_pending.contains(id) || r.waiting_turn.contains(id);
        return match r.kill_at {
            None => {
                let mut ids: Vec<(String, i32)> = r
                    .running
                    .iter()
                    .filter(|(id, _)| !held(id))
                    .map(|(id, sig)| (id.clone(), *sig))
                    .collect();
                // No app container left: the last sidecars' turn is now.
                ids.extend(sidecars_in_turn(r));
                Some(RemovalAction::Stop { ids })
            }
            Some(_) if !r.killed && due && r.running.keys().any(held) => {
                Some(RemovalAction::StopAfterPreStop {
                    ids: r
                        .running
                        .iter()
                        .filter(|(id, _)| held(id))
                        .map(|(id, sig)| (id.clone(), *sig))
                        .collect(),
                })
            }
            Some(_) if !r.killed && due => Some(RemovalAction::Kill {
                ids: r.running.keys().cloned().collect(),
            }),
            Some(_) if r.killed => None,
            Some(_) => {
                let ids = sidecars_in_turn(r);
                (!ids.is_empty()).then_some(RemovalAction::StopInTurn { ids })
            }
        };
    }
    if r.pending_starts > 0 || r.sandbox_pending || r.remove_submitted {
        return None;
    }
    if r.remove_retry_at.is_some_and(|t| now < t) {
        return None;
    }
    Some(RemovalAction::RemovePod)
}

/// The sidecars waiting for their turn whose turn came: no app container runs, no sidecar
/// declared after them runs, and their preStop hook (if any) returned.
fn sidecars_in_turn(r: &Removal) -> Vec<(String, i32)> {
    let app_running = r.running.keys().any(|id| !r.sidecars.contains(id));
    if app_running {
        return Vec::new();
    }
    let mut ids = Vec::new();
    for (k, id) in r.sidecars.iter().enumerate() {
        let later_running = r.sidecars[k + 1..]
            .iter()
            .any(|l| r.running.contains_key(l));
        if later_running || !r.waiting_turn.contains(id) || r.hooks_pending.contains(id) {
            continue;
        }
        if let Some(sig) = r.running.get(id) {
            ids.push((id.clone(), *sig));
        }
    }
    ids
}

/// Work a removal asks of the loop.
#[derive(Debug)]
pub(super) enum RemovalWork {
    /// A signal to a container of pod `uid` (`what` names it in the log if it fails).
    Signal {
        uid: String,
        id: String,
        sig: i32,
        what: &'static str,
    },
    Job(Job),
}

/// The pod generations being removed, by uid, and the uids removed in this run.
#[derive(Debug, Default)]
pub(super) struct Removals {
    pods: BTreeMap<String, Removal>,
    /// Uids of pods removed in this run, most recent last (at most [`RECENTLY_REMOVED`]): one
    /// desired again is a restarted pod (`kubelet_restarted_pods_total`).
    recently_removed: VecDeque<String>,
}

impl Removals {
    pub(super) fn get(&self, uid: &str) -> Option<&Removal> {
        self.pods.get(uid)
    }

    pub(super) fn contains(&self, uid: &str) -> bool {
        self.pods.contains_key(uid)
    }

    /// The uids being removed.
    pub(super) fn uids(&self) -> impl Iterator<Item = &String> {
        self.pods.keys()
    }

    /// Being removed, or removed earlier in this run.
    pub(super) fn seen(&self, uid: &str) -> bool {
        self.pods.contains_key(uid) || self.recently_removed.iter().any(|u| u == uid)
    }

    /// Starts removing a generation of a pod that had a worker.
    pub(super) fn begin(&mut self, uid: String, r: Removal) {
        if self.recently_removed.len() == RECENTLY_REMOVED {
            self.recently_removed.pop_front();
        }
        self.recently_removed.push_back(uid.clone());
        self.pods.insert(uid, r);
    }

    /// Starts removing what was found on disk of a pod no source defines.
    pub(super) fn begin_orphan(&mut self, uid: String, r: Removal) {
        self.pods.insert(uid, r);
    }

    /// The Terminating views of whole pods going away.
    pub(super) fn views(&self) -> impl Iterator<Item = &PodView> {
        self.pods.values().filter_map(|r| r.view.as_ref())
    }

    /// The uid of the generation of pod `name` (full name) being removed, if one is.
    pub(super) fn of_pod(&self, name: &str) -> Option<String> {
        self.pods
            .iter()
            .find(|(_, r)| {
                r.view
                    .as_ref()
                    .is_some_and(|v| crate::status::full_name(&v.pod) == name)
            })
            .map(|(uid, _)| uid.clone())
    }

    /// Every pod being removed gets SIGKILL at `now`; preStop hooks and sidecars waiting for
    /// their turn are not waited for.
    pub(super) fn kill_now(&mut self, now: Instant) {
        for r in self.pods.values_mut() {
            if !r.running.is_empty() && !r.killed {
                r.hooks_pending.clear();
                r.waiting_turn.clear();
                r.kill_at = Some(now);
            }
        }
    }

    /// The earliest SIGKILL or removal retry due.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.pods
            .values()
            .flat_map(|r| {
                [
                    r.kill_at.filter(|_| !r.killed),
                    r.remove_retry_at.filter(|_| !r.remove_submitted),
                ]
            })
            .flatten()
            .min()
    }

    /// Syncs every removal: decides with [`compute_removal_actions`], updates its state, and
    /// returns the signals to send and the jobs to submit.
    pub(super) fn sync(&mut self, now: Instant) -> Vec<RemovalWork> {
        let mut work = Vec::new();
        for (uid, r) in self.pods.iter_mut() {
            let mut signals = Vec::new();
            match compute_removal_actions(now, r) {
                None => continue,
                Some(RemovalAction::Stop { ids }) => {
                    // At least MIN_GRACE between the stop signal and SIGKILL, as the kubelet.
                    r.kill_at = Some(now + r.grace.max(probes::MIN_GRACE));
                    for (id, _) in &ids {
                        r.waiting_turn.remove(id);
                    }
                    // Containers with a running preStop hook get their stop signal after it.
                    signals.extend(ids.into_iter().map(|(id, sig)| (id, sig, "stop")));
                }
                Some(RemovalAction::StopInTurn { ids }) => {
                    for (id, _) in &ids {
                        r.waiting_turn.remove(id);
                    }
                    signals.extend(ids.into_iter().map(|(id, sig)| (id, sig, "stop")));
                }
                Some(RemovalAction::StopAfterPreStop { ids }) => {
                    r.hooks_pending.clear();
                    r.waiting_turn.clear();
                    r.kill_at = Some(now + probes::MIN_GRACE);
                    signals.extend(ids.into_iter().map(|(id, sig)| (id, sig, "stop")));
                }
                Some(RemovalAction::Kill { ids }) => {
                    r.killed = true;
                    signals.extend(ids.into_iter().map(|id| (id, libc::SIGKILL, "kill")));
                }
                Some(RemovalAction::RemovePod) => {
                    r.remove_submitted = true;
                    work.push(RemovalWork::Job(Job::RemovePod { uid: uid.clone() }));
                    continue;
                }
            }
            work.extend(
                signals
                    .into_iter()
                    .map(|(id, sig, what)| RemovalWork::Signal {
                        uid: uid.clone(),
                        id,
                        sig,
                        what,
                    }),
            );
        }
        work
    }

    /// A sandbox creation of `uid` ended; false when `uid` is not being removed. Its
    /// `RemovePod` tears the sandbox down.
    pub(super) fn sandbox_done(&mut self, uid: &str) -> bool {
        let Some(r) = self.pods.get_mut(uid) else {
            return false;
        };
        r.sandbox_pending = false;
        true
    }

    /// A start job of `uid` ended (`started`: the container's id and stop signal); `None`
    /// when `uid` is not being removed. A container started while its pod was going away is
    /// stopped right away.
    pub(super) fn start_done(
        &mut self,
        uid: &str,
        started: Option<(String, i32)>,
        now: Instant,
    ) -> Option<Vec<RemovalWork>> {
        let r = self.pods.get_mut(uid)?;
        r.pending_starts = r.pending_starts.saturating_sub(1);
        let Some((id, sig)) = started else {
            return Some(Vec::new());
        };
        r.running.insert(id.clone(), sig);
        r.kill_at = r.kill_at.or(Some(now + r.grace));
        Some(vec![RemovalWork::Signal {
            uid: uid.to_string(),
            id,
            sig,
            what: "stop",
        }])
    }

    /// Container `id` of `uid` exited; `None` when `uid` is not being removed, else whether
    /// the exit came before the start result naming the container (to keep until then).
    pub(super) fn exited(&mut self, uid: &str, id: &str) -> Option<bool> {
        let r = self.pods.get_mut(uid)?;
        Some(r.running.remove(id).is_none() && r.pending_starts > 0)
    }

    /// A preStop hook of container `id` of `uid` returned; `None` when `uid` is not being
    /// removed, else whether that hook was awaited, and the work: the container gets its stop
    /// signal now, and SIGKILL at least the minimum grace later (a sidecar still waiting for
    /// its turn gets it when its turn comes).
    pub(super) fn pre_stop_done(
        &mut self,
        uid: &str,
        id: &str,
        now: Instant,
    ) -> Option<(bool, Vec<RemovalWork>)> {
        let r = self.pods.get_mut(uid)?;
        if !r.hooks_pending.remove(id) {
            return Some((false, Vec::new()));
        }
        let mut work = Vec::new();
        if let Some(sig) = r.running.get(id).filter(|_| !r.waiting_turn.contains(id)) {
            work.push(RemovalWork::Signal {
                uid: uid.to_string(),
                id: id.to_string(),
                sig: *sig,
                what: "stop",
            });
            r.kill_at = Some(
                r.kill_at
                    .map_or(now + probes::MIN_GRACE, |t| t.max(now + probes::MIN_GRACE)),
            );
        }
        Some((true, work))
    }

    /// A `RemovePod` job succeeded: the removal ends.
    pub(super) fn removed(&mut self, uid: &str) -> Option<Removal> {
        self.pods.remove(uid)
    }

    /// A `RemovePod` job failed: live containers (listed by the worker) are stopped again
    /// first, and the removal runs again once they exited. Without any, the cause is outside
    /// the pod's processes: the next attempt waits, and the warning is logged at attempts 1,
    /// 2, 4, 8, ... (flash).
    pub(super) fn remove_failed(&mut self, uid: &str, failed: RemovePodFailure, now: Instant) {
        let Some(r) = self.pods.get_mut(uid) else {
            log::warn!("pod {uid}: removal failed: {}", failed.error);
            return;
        };
        r.remove_submitted = false;
        r.remove_failures = r.remove_failures.saturating_add(1);
        let retry = if failed.running.is_empty() {
            let wait = removal_backoff(r.remove_failures);
            r.remove_retry_at = Some(now + wait);
            format!("retrying in {} ms", wait.as_millis())
        } else {
            r.remove_retry_at = None;
            format!(
                "stopping {} container(s) still running first",
                failed.running.len()
            )
        };
        r.running.extend(failed.running);
        if r.remove_failures.is_power_of_two() {
            log::warn!(
                "pod {uid}: removal failed (attempt {}), {retry}: {}",
                r.remove_failures,
                failed.error
            );
        }
    }
}

impl SyncLoop {
    /// Moves a worker's containers into a removal (stop, then remove).
    pub(super) fn begin_removal(&mut self, name: &str, whole_pod: bool) {
        let Some(w) = self.workers.remove(name) else {
            return;
        };
        let mut running = BTreeMap::new();
        let mut pending_starts = 0;
        let mut sidecars = Vec::new();
        for s in &w.slots {
            if let Some(i) = &s.instance {
                if i.id.is_empty() {
                    pending_starts += 1;
                } else {
                    running.insert(i.id.clone(), i.stop_signal);
                    if s.sidecar() {
                        sidecars.push(i.id.clone());
                    }
                }
            }
        }
        let waiting_turn = sidecars.iter().cloned().collect();
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
        self.removals.begin(
            w.uid.clone(),
            Removal {
                running,
                pending_starts,
                sandbox_pending: w.sandbox == SandboxPhase::Creating,
                grace: grace_of(&w.pod),
                kill_at: None,
                killed: false,
                remove_submitted: false,
                remove_failures: 0,
                remove_retry_at: None,
                view,
                forget_store: true,
                name: name.to_string(),
                hooks_pending,
                sidecars,
                waiting_turn,
                probe_series: probe_series(&w),
            },
        );
        self.status.dirty = true;
    }

    /// Syncs every removal ([`Removals::sync`]) and carries out what it asks.
    pub(super) fn sync_removals(&mut self) {
        let work = self.removals.sync(self.clock.now());
        self.do_removal_work(work);
    }

    /// Sends the signals (on the loop's thread: a signal does not wait) and submits the jobs.
    pub(super) fn do_removal_work(&self, work: Vec<RemovalWork>) {
        for w in work {
            match w {
                RemovalWork::Signal { uid, id, sig, what } => {
                    if let Err(e) = self.runtime.signal_container(&id, sig) {
                        log::warn!("pod {uid}: {what} {id}: {e}");
                    }
                }
                RemovalWork::Job(j) => self.executor.submit(j),
            }
        }
    }
}

/// The `prober_probe_total` series a pod generation's probes may have: one per container and
/// probe kind it declares.
fn probe_series(
    w: &super::PodWorker,
) -> Vec<(crate::metrics::ProbeType, crate::metrics::ProbeSubject)> {
    use crate::metrics::{ProbeSubject, ProbeType};
    let mut out = Vec::new();
    for s in &w.slots {
        let c = &s.container;
        let subject = ProbeSubject {
            container: c.name.clone(),
            pod: w.pod.metadata.name.clone().unwrap_or_default(),
            namespace: w.pod.metadata.namespace.clone().unwrap_or_default(),
            pod_uid: w.uid.clone(),
        };
        for (has, kind) in [
            (c.liveness_probe.is_some(), ProbeType::Liveness),
            (c.readiness_probe.is_some(), ProbeType::Readiness),
            (c.startup_probe.is_some(), ProbeType::Startup),
        ] {
            if has {
                out.push((kind, subject.clone()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
