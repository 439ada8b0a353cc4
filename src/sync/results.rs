//! sync::results: what the results of executor jobs do to the pods (the kubelet's
//! PodSyncResult handling): image pulled, sandbox created or failed, container started or
//! failed to start (ErrImagePull, the crash-loop backoff of failed starts, a sandbox found
//! dead), hooks done, pod removed.

use std::time::Duration;

use super::executor::{ImageOutcome, Job, JobResult, StartFailure, StartFailureReason};
use super::{probes, rfc3339, Instance, SandboxPhase, SyncLoop};
use crate::reason::{EventReason, WaitingReason};
use crate::runtime::{ContainerInfo, ContainerState};
use crate::status::EventType;

/// The wait before sandbox creation attempt `failures + 1`: 10 s, doubling to 5 min.
pub(super) fn sandbox_backoff(failures: u32) -> Duration {
    Duration::from_secs(10u64.saturating_mul(1u64 << failures.min(5))).min(Duration::from_secs(300))
}

/// The wait before `RemovePod` attempt `failures + 1` when the failed one found nothing
/// running (a busy mount or cgroup, a full disk): 100 ms, doubling to 10 s, the kubelet's
/// pod worker backoff after a failed sync.
pub(super) fn removal_backoff(failures: u32) -> Duration {
    let ms = 100u64.saturating_mul(1u64 << failures.saturating_sub(1).min(7));
    Duration::from_millis(ms).min(Duration::from_secs(10))
}

impl SyncLoop {
    pub(super) fn on_work(&mut self, r: JobResult) {
        match r {
            JobResult::ImagePulling { uid, name, image } => {
                if let Some(pod) = self.pod_name_of(&uid) {
                    let msg = format!("Pulling image {image:?}");
                    self.event(
                        EventType::Normal,
                        &pod,
                        Some(&name),
                        EventReason::Pulling,
                        &msg,
                    );
                }
            }
            JobResult::ImageReady {
                uid,
                name,
                image,
                outcome,
            } => self.on_image_ready(&uid, &name, &image, outcome),
            JobResult::SandboxCreated { uid, result } => {
                // Submitted by a generation now being removed (a worker of the same uid waits
                // for that removal): its RemovePod tears this sandbox down.
                if self.removals.sandbox_done(&uid) {
                    self.status.dirty = true;
                    return;
                }
                let Some((name, w)) = self.workers.by_uid_mut(&uid) else {
                    // The pod went away meanwhile, without a removal: remove the sandbox.
                    self.executor.submit(Job::RemovePod { uid });
                    return;
                };
                let name = name.clone();
                self.cfg.metrics.started_pods.inc();
                if result.is_err() {
                    self.cfg.metrics.started_pods_errors.inc();
                }
                match result {
                    Ok(info) => {
                        w.sandbox = SandboxPhase::Ready;
                        w.sandbox_retry_at = None;
                        w.sandbox_failures = 0;
                        w.pod_ips = info.pod_ips;
                        w.start_time = Some(rfc3339(self.clock.wall()));
                    }
                    Err(e) => {
                        let message = e.to_string();
                        w.sandbox = SandboxPhase::Failed {
                            message: message.clone(),
                        };
                        // The kubelet's pod worker backoff, doubling: a missing plugin or a
                        // broken network configuration is not retried in a tight loop.
                        w.sandbox_retry_at =
                            Some(self.clock.now() + sandbox_backoff(w.sandbox_failures));
                        w.sandbox_failures = w.sandbox_failures.saturating_add(1);
                        self.event(
                            EventType::Warning,
                            &name,
                            None,
                            EventReason::FailedCreatePodSandBox,
                            &message,
                        );
                    }
                }
            }
            JobResult::ContainerStarted {
                uid,
                name: cname,
                result,
            } => self.on_started(&uid, &cname, result),
            JobResult::HookDone {
                uid,
                name,
                container_id,
                hook,
                what,
                result,
            } => self.on_hook_done(&uid, &name, &container_id, hook, &what, result),
            JobResult::PodVolumesUpdated { uid, result } => {
                if let (Err(e), Some(name)) = (result, self.pod_name_of(&uid)) {
                    self.event(
                        EventType::Warning,
                        &name,
                        None,
                        EventReason::FailedMount,
                        &format!("downwardAPI volumes not updated: {e}"),
                    );
                }
            }
            JobResult::SandboxRemoved { uid, result } => {
                self.on_evicted_sandbox_removed(&uid, result)
            }
            JobResult::PodRemoved { uid, result } => match result {
                Ok(()) => {
                    if let Some(r) = self.removals.removed(&uid) {
                        for (kind, subject) in &r.probe_series {
                            self.cfg.metrics.forget_probe(*kind, subject);
                        }
                        if r.forget_store {
                            self.records.forget_desired(&uid);
                        }
                    }
                    // A new generation with the same uid (a re-added manifest) keeps its record.
                    if let Some(w) = self.workers.values().find(|w| w.uid == uid) {
                        self.records.save_desired(&w.spec);
                    }
                    log::info!("pod {uid}: removed");
                }
                Err(failed) => self.removals.remove_failed(&uid, failed, self.clock.now()),
            },
        }
        self.status.dirty = true;
    }

    pub(super) fn pod_name_of(&self, uid: &str) -> Option<String> {
        self.workers.name_of(uid)
    }

    pub(super) fn on_image_ready(
        &mut self,
        uid: &str,
        cname: &str,
        image: &str,
        outcome: ImageOutcome,
    ) {
        let Some((name, w)) = self.workers.by_uid_mut(uid) else {
            return;
        };
        let name = name.clone();
        let msg = match outcome {
            ImageOutcome::AlreadyPresent => {
                format!("Container image {image:?} already present on machine")
            }
            ImageOutcome::Pulled {
                image: pulled,
                took,
            } => {
                self.cfg
                    .metrics
                    .record_image_pull(took.as_secs_f64(), pulled.size);
                if let Some(slot) = w.slots.iter_mut().find(|s| s.container.name == cname) {
                    slot.image_backoff.reset();
                    slot.pull_backoff_at = None;
                }
                format!(
                    "Successfully pulled image {image:?} in {:.3}s. Image size: {} bytes.",
                    took.as_secs_f64(),
                    pulled.size
                )
            }
        };
        self.event(
            EventType::Normal,
            &name,
            Some(cname),
            EventReason::Pulled,
            &msg,
        );
    }

    pub(super) fn on_started(
        &mut self,
        uid: &str,
        cname: &str,
        result: Result<Box<ContainerInfo>, StartFailure>,
    ) {
        let started = result.as_ref().ok().map(|info| info.meta.id.clone());
        self.record_started(uid, cname, result);
        // Its exit may have come first: applied now that the container is known.
        if let Some(id) = started {
            self.apply_early_exit(&id);
        }
    }

    fn record_started(
        &mut self,
        uid: &str,
        cname: &str,
        result: Result<Box<ContainerInfo>, StartFailure>,
    ) {
        let now = self.clock.now();
        let started = result
            .as_ref()
            .ok()
            .map(|info| (info.meta.id.clone(), info.meta.stop_signal));
        if let Some(work) = self.removals.start_done(uid, started, now) {
            self.do_removal_work(work);
            return;
        }
        let Some((name, w)) = self.workers.by_uid_mut(uid) else {
            if let Ok(info) = result {
                let _ = self.runtime.signal_container(&info.meta.id, libc::SIGKILL);
            }
            return;
        };
        let name = name.clone();
        let Some(slot) = w.slots.iter_mut().find(|s| s.container.name == cname) else {
            return;
        };
        record_container_start(&self.cfg.metrics, slot.kind, &result);
        match result {
            Ok(info) => {
                // The first start is not a restart: only restarts feed the backoff.
                if let Some(finished) = slot.last.as_ref().map(|l| l.at) {
                    slot.backoff.started(finished, now);
                }
                let started_at = match &info.state {
                    ContainerState::Running { started_at, .. } => started_at.clone(),
                    _ => rfc3339(self.clock.wall()),
                };
                if let Some(last) = &slot.last {
                    slot.previous_log = Some(last.log_path.clone());
                }
                slot.instance = Some(Instance {
                    id: info.meta.id.clone(),
                    started_at,
                    stop_signal: info.meta.stop_signal,
                    log_path: info.meta.log_path.clone(),
                    health: probes::Health::new(&slot.container),
                });
                slot.waiting = None;
                slot.retry_at = None;
                slot.image_id =
                    super::podstatus::image_id(&info.meta.image, &info.meta.image_digest);
                let image = slot.container.image.clone().unwrap_or_default();
                self.event(
                    EventType::Normal,
                    &name,
                    Some(cname),
                    EventReason::Created,
                    &format!("Created container {cname} (image {image})"),
                );
                // Started once its postStart hook (if any) completed.
                self.begin_post_start(&name, cname);
            }
            Err(StartFailure {
                reason: StartFailureReason::SandboxNotReady,
                message,
            }) => {
                // Nothing was created: this attempt is not an instance.
                slot.instance = None;
                slot.instances_started = slot.instances_started.saturating_sub(1);
                slot.waiting = Some((WaitingReason::ContainerCreating, String::new()));
                let ready = w.sandbox == SandboxPhase::Ready;
                // A sandbox job whose sandbox failed did not start its container: that
                // failure is the pod's event already.
                if !matches!(w.sandbox, SandboxPhase::Failed { .. }) {
                    log::warn!("{name} {cname}: {message}");
                }
                if ready {
                    self.sandbox_changed(&name, &message);
                }
            }
            Err(StartFailure {
                reason: StartFailureReason::Waiting(WaitingReason::ErrImagePull),
                message,
            }) => {
                slot.instance = None;
                // Nothing was created: this attempt is not an instance (restart count, log).
                slot.instances_started = slot.instances_started.saturating_sub(1);
                let delay = slot.image_backoff.failed(now);
                slot.retry_at = Some(now + delay);
                slot.pull_backoff_at = Some(now + delay / 2);
                slot.waiting = Some((WaitingReason::ErrImagePull, message.clone()));
                self.event(
                    EventType::Warning,
                    &name,
                    Some(cname),
                    EventReason::Failed,
                    &message,
                );
                self.event(
                    EventType::Warning,
                    &name,
                    Some(cname),
                    EventReason::Failed,
                    "Error: ErrImagePull",
                );
            }
            Err(StartFailure {
                reason: StartFailureReason::Waiting(reason),
                message,
            }) => {
                slot.instance = None;
                // Treated like a crash for the backoff, as the kubelet does.
                slot.backoff.started(now, now);
                slot.retry_at = Some(now + slot.backoff.current_delay());
                slot.waiting = Some((reason, message.clone()));
                self.event(
                    EventType::Warning,
                    &name,
                    Some(cname),
                    EventReason::Failed,
                    &format!("{reason}: {message}"),
                );
            }
        }
        self.status.dirty = true;
    }
}

/// `kubelet_started_containers_total` and `..._errors_total` for one start job's result, as
/// the kubelet counts them around CreateContainer/StartContainer: image pulls that failed and
/// starts that found no sandbox never reached the runtime and are not counted. The `code` is
/// the waiting reason (the kubelet's is a gRPC status code; podvisor has no CRI).
fn record_container_start(
    m: &crate::metrics::KubeletMetrics,
    kind: crate::runtime::ContainerKind,
    result: &Result<Box<ContainerInfo>, StartFailure>,
) {
    let container_type = match kind {
        crate::runtime::ContainerKind::Init => "init_container",
        crate::runtime::ContainerKind::App => "container",
    };
    let code = match result {
        Ok(_) => None,
        Err(StartFailure {
            reason:
                StartFailureReason::SandboxNotReady
                | StartFailureReason::Waiting(WaitingReason::ErrImagePull),
            ..
        }) => return,
        Err(StartFailure {
            reason: StartFailureReason::Waiting(reason),
            ..
        }) => Some(reason.as_str()),
    };
    m.started_containers
        .get_or_create(&vec![("container_type", container_type.to_string())])
        .inc();
    if let Some(code) = code {
        m.started_containers_errors
            .get_or_create(&vec![
                ("container_type", container_type.to_string()),
                ("code", code.to_string()),
            ])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::{removal_backoff, sandbox_backoff};
    use std::time::Duration;

    #[test]
    fn removal_retries_back_off_from_100_ms_doubling_to_10_s() {
        let ms: Vec<u128> = (1..10).map(|n| removal_backoff(n).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000]);
        assert_eq!(removal_backoff(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn sandbox_retries_back_off_from_10_s_doubling_to_5_min() {
        let secs: Vec<u64> = (0..8).map(|n| sandbox_backoff(n).as_secs()).collect();
        assert_eq!(secs, [10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(sandbox_backoff(u32::MAX), Duration::from_secs(300));
    }
}
