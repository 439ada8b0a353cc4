//! sync::reconcile: desired pods against workers (the kubelet's HandlePodAdditions /
//! HandlePodUpdates / HandlePodRemoves): source events into [`PodConfig`], then each desired
//! pod gets a worker, a labels-only edit updates it in place, a spec edit (new UID) moves the
//! old generation into a removal and starts the new one after it, a pod no source defines any
//! more is removed (only once the sources reported), and what was found on disk at start that
//! no pod claims is removed. Then every worker and removal is synced.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::actions::{compute_pod_change, PodChange};
use super::removal::Removal;
use super::SyncLoop;
use crate::reason::EventReason;
use crate::runtime::ContainerState;
use crate::sources::podconfig::ConfigNotice;
use crate::sources::SourceEvent;
use crate::staticpod::StaticPod;
use crate::status::EventType;

impl SyncLoop {
    pub(super) fn on_source(&mut self, se: SourceEvent) {
        self.sources.saw(&se);
        let now = self.now_str();
        let notices = self.config.apply(se, &now);
        crate::tp!("loop.applied");
        self.on_notices(notices);
    }

    /// Records what the configuration merge said: source errors as events, recoveries.
    pub(super) fn on_notices(&mut self, notices: Vec<ConfigNotice>) {
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
                            EventReason::SourceError,
                            &format!("{source}: {message}"),
                        );
                    }
                    for p in pods {
                        self.event(
                            EventType::Warning,
                            &p,
                            None,
                            EventReason::SourceError,
                            &format!("{message}; the last valid manifest keeps running"),
                        );
                    }
                }
                ConfigNotice::SourceRecovered { source } => {
                    log::info!("{source}: manifest is valid again");
                    self.status.dirty = true;
                }
                ConfigNotice::Duplicate { .. } => {}
            }
        }
    }

    /// Compares desired and actual state and submits the work that closes the gap.
    pub(super) fn reconcile(&mut self) {
        crate::tp!("loop.rc.start");
        let (mut desired, dups) = self.config.desired();
        crate::tp!("loop.rc.desired");
        self.note_ready_generations();
        self.apply_rollbacks(&mut desired);
        crate::tp!("loop.rc.rollbacks");
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
                        EventReason::DuplicatePod,
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
            let w_uid = w.uid.clone();
            let sp = desired.get(&name);
            match compute_pod_change(&w_uid, &w.spec.meta_hash, sp, ready) {
                PodChange::Unchanged => {}
                PodChange::UpdateMetadata => {
                    if let Some(sp) = sp {
                        self.update_metadata(&name, sp.clone());
                    }
                }
                PodChange::Replace => {
                    let Some(sp) = sp else { continue };
                    let msg = format!(
                        "manifest spec changed in {}: replacing pod (uid {} -> {})",
                        sp.source,
                        w_uid,
                        sp.pod.metadata.uid.clone().unwrap_or_default()
                    );
                    self.event(EventType::Normal, &name, None, EventReason::Replaced, &msg);
                    self.begin_removal(&name, false);
                    self.start_worker(sp.clone(), Some(w_uid));
                }
                PodChange::Remove => {
                    self.event(
                        EventType::Normal,
                        &name,
                        None,
                        EventReason::Killing,
                        "manifest removed: stopping pod",
                    );
                    self.begin_removal(&name, true);
                }
            }
        }
        // Pods already running from a previous run first, so admission counts them before
        // judging new pods.
        let mut order: Vec<(&String, &StaticPod)> = desired.iter().collect();
        order.sort_by_key(|(_, sp)| {
            !sp.pod
                .metadata
                .uid
                .as_deref()
                .is_some_and(|u| self.on_disk.has(u))
        });
        for (name, sp) in order {
            if !self.workers.contains_key(name) {
                let blocked = self.removals.of_pod(name);
                self.start_worker(sp.clone(), blocked);
            }
        }
        if ready {
            // Containers, sandboxes and pod data on disk that no desired pod claims.
            let orphan_uids: Vec<String> = self
                .on_disk
                .containers
                .keys()
                .chain(self.on_disk.sandboxes.keys())
                .chain(self.on_disk.data.iter())
                .filter(|u| !self.removals.contains(u))
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            for uid in orphan_uids {
                let containers = self.on_disk.containers.remove(&uid).unwrap_or_default();
                self.on_disk.sandboxes.remove(&uid);
                self.on_disk.data.remove(&uid);
                let mut running = BTreeMap::new();
                for c in containers {
                    if !matches!(c.state, ContainerState::Exited(_)) {
                        running.insert(c.meta.id.clone(), c.meta.stop_signal);
                    }
                }
                log::info!("pod {uid}: not defined by any source: removing its containers");
                self.on_disk.records.remove(&uid);
                self.removals
                    .begin_orphan(uid.clone(), Removal::orphan(uid, running));
            }
        }
        if ready {
            // Desired-pod records nothing claimed: nothing of them is on disk either.
            for uid in std::mem::take(&mut self.on_disk.records) {
                if self.removals.contains(&uid) {
                    continue;
                }
                log::info!("pod {uid}: no source defines it any more: removing its record");
                self.records.forget_desired(&uid);
            }
        }
        crate::tp!("loop.rc.orphans");
        let names: Vec<String> = self.workers.keys().cloned().collect();
        for name in names {
            self.sync_worker(&name);
        }
        crate::tp!("loop.rc.workers");
        self.sync_removals();
        crate::tp!("loop.rc.removals");
        self.sync_probes();
        crate::tp!("loop.rc.probes");
        // After the workers' decisions (a failed init container is only known then): a
        // rollback starts the last Ready generation, which the next pass syncs.
        if self.check_rollbacks() {
            self.reconcile();
        }
    }

    pub(super) fn update_metadata(&mut self, name: &str, sp: StaticPod) {
        let Some(w) = self.workers.get_mut(name) else {
            return;
        };
        let mut pod = (*w.pod).clone();
        pod.metadata.labels = sp.pod.metadata.labels.clone();
        pod.metadata.annotations = sp.pod.metadata.annotations.clone();
        w.pod = Arc::new(pod);
        w.spec = sp.clone();
        // downwardAPI/projected files show labels and annotations: written again (the
        // kubelet's volume manager does it on its next remount).
        let has_projected = w.pod.spec.as_ref().is_some_and(|s| {
            s.volumes
                .iter()
                .flatten()
                .any(|v| v.downward_api.is_some() || v.projected.is_some())
        });
        if has_projected && w.sandbox == super::SandboxPhase::Ready {
            self.executor
                .submit(super::executor::Job::UpdatePodVolumes {
                    uid: w.uid.clone(),
                    pod: Arc::clone(&w.pod),
                });
        }
        self.records.save_desired(&sp);
        self.event(
            EventType::Normal,
            name,
            None,
            EventReason::MetadataUpdated,
            "labels/annotations changed: nothing restarted",
        );
    }
}
