//! sync::removal: stopping and removing a pod generation (the kubelet's killPodWithSyncResult
//! and pod cleanup): preStop hooks, the stop signal, SIGKILL at the end of the grace period
//! (decided by `actions::compute_removal_actions`), then one `RemovePod` job once every
//! container exited and no start or sandbox creation of the uid is in flight.

use std::collections::BTreeMap;

use super::actions::{compute_removal_actions, RemovalAction};
use super::executor::Job;
use super::{grace_of, probes, Removal, SandboxPhase, SyncLoop};

impl SyncLoop {
    /// Moves a worker's containers into a removal (stop, then remove).
    pub(super) fn begin_removal(&mut self, name: &str, whole_pod: bool) {
        let Some(w) = self.workers.remove(name) else {
            return;
        };
        if self.recently_removed.len() == super::RECENTLY_REMOVED {
            self.recently_removed.pop_front();
        }
        self.recently_removed.push_back(w.uid.clone());
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
        self.dirty = true;
    }

    /// Syncs one removal: decides with [`compute_removal_actions`], then signals or submits.
    pub(super) fn sync_removal(&mut self, uid: &str) {
        let now = self.clock.now();
        let Some(r) = self.removals.get_mut(uid) else {
            return;
        };
        let mut signals = Vec::new();
        match compute_removal_actions(now, r) {
            None => return,
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
                self.executor.submit(Job::RemovePod {
                    uid: uid.to_string(),
                });
                return;
            }
        }
        for (id, sig, what) in signals {
            if let Err(e) = self.runtime.signal_container(&id, sig) {
                log::warn!("pod {uid}: {what} {id}: {e}");
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
