//! podstatus: a worker's state as a `v1 PodStatus`, in the kubelet's vocabulary (the status
//! manager's generatePodStatus): phase, conditions with transition times, container states
//! with reasons (ContainerCreating, PodInitializing, CrashLoopBackOff, ErrImageNeverPull,
//! CreateContainerError, Completed, Error, OOMKilled), exit codes, restart counts, and the
//! probe-driven `started`/`ready` flags behind the ContainersReady and Ready conditions.
//!
//! [`StatusManager`] is what the loop publishes them with (the kubelet's statusManager): the
//! event log, whether anything changed since the last snapshot, and the cell readers take
//! snapshots from. The published types themselves are `crate::status`'s, which the API, the
//! node API and the API server link read without depending on the sync loop.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ContainerState as K8sState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{PodWorker, SandboxPhase, Slot, SyncConfig};
use crate::reason::PodReason;
use crate::runtime::ContainerKind;
use crate::sources::podconfig::PodConfig;
use crate::status::{EventLog, PodView, SnapshotCell};

/// Parses an RFC 3339 time into the API type.
pub fn to_time(s: &str) -> Option<Time> {
    s.parse::<k8s_openapi::jiff::Timestamp>().ok().map(Time)
}

/// A container's `imageID` as containerd's CRI reports it: the image's repo digest
/// (`docker.io/library/busybox@sha256:<manifest digest>`: containerd derives one from every
/// name of the image), or the digest alone when the reference names no repository.
pub(super) fn image_id(image: &str, manifest_digest: &str) -> String {
    if manifest_digest.is_empty() {
        return String::new();
    }
    match crate::images::reference::Reference::parse(image) {
        Ok(r) if !image.starts_with("sha256:") => format!("{}@{manifest_digest}", r.name()),
        _ => manifest_digest.to_string(),
    }
}

/// The conditions of a worker right now: (type, status).
fn conditions_now(w: &PodWorker) -> Vec<(&'static str, bool)> {
    let sandbox = w.sandbox == SandboxPhase::Ready;
    let initialized = super::actions::initialized(w);
    // Sidecars' readiness counts for the pod's (the kubelet's ContainersReady).
    let ready = initialized
        && w.slots
            .iter()
            .filter(|s| s.kind == ContainerKind::App || s.sidecar())
            .all(ready);
    vec![
        ("PodReadyToStartContainers", sandbox),
        ("Initialized", initialized),
        ("ContainersReady", ready),
        ("Ready", ready),
        ("PodScheduled", true),
    ]
}

/// Whether the pod is Ready right now (the Ready condition).
pub(super) fn ready_now(w: &PodWorker) -> bool {
    conditions_now(w)
        .iter()
        .any(|(t, status)| *t == "Ready" && *status)
}

/// Updates the remembered conditions, stamping a transition time on every change.
pub(super) fn update_conditions(w: &mut PodWorker, now: &str) {
    for (t, status) in conditions_now(w) {
        match w.conditions.get(t) {
            Some((s, _)) if *s == status => {}
            _ => {
                w.conditions.insert(t, (status, now.to_string()));
            }
        }
    }
}

fn running(s: &Slot) -> bool {
    s.instance.as_ref().is_some_and(|i| !i.id.is_empty())
}

fn started(s: &Slot) -> bool {
    s.started()
}

/// Started, its readiness probe (if any) passes, and it is not being killed.
fn ready(s: &Slot) -> bool {
    started(s)
        && s.instance
            .as_ref()
            .is_some_and(|i| i.health.ready && i.health.kill.is_none())
}

/// Will this container run again (never started yet, starting, or waiting for a restart)?
fn pending(s: &Slot) -> bool {
    s.instance.is_some() || s.last.is_none() || s.retry_at.is_some()
}

fn terminated(s: &Slot) -> Option<ContainerStateTerminated> {
    s.last.as_ref().map(|l| ContainerStateTerminated {
        container_id: Some(format!("podvisor://{}", l.id)),
        exit_code: l.exit.exit_code,
        finished_at: to_time(&l.exit.finished_at),
        message: l.exit.message.clone(),
        reason: Some(l.exit.reason.clone()),
        signal: l.exit.signal,
        started_at: to_time(&l.exit.started_at),
    })
}

fn container_status(s: &Slot, inits_pending: bool) -> ContainerStatus {
    let state = if s
        .instance
        .as_ref()
        .is_some_and(|i| i.health.post_start_pending)
    {
        // The kubelet reports a container Running only once its postStart hook returned.
        K8sState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                message: None,
            }),
            ..Default::default()
        }
    } else if let Some(i) = s.instance.as_ref().filter(|i| !i.id.is_empty()) {
        K8sState {
            running: Some(ContainerStateRunning {
                started_at: to_time(&i.started_at),
            }),
            ..Default::default()
        }
    } else if let Some((reason, message)) = &s.waiting {
        K8sState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.to_string()),
                message: (!message.is_empty()).then(|| message.clone()),
            }),
            ..Default::default()
        }
    } else if s.last.is_some()
        && (!pending(s) || (s.kind == ContainerKind::Init && s.succeeded && !s.sidecar()))
    {
        K8sState {
            terminated: terminated(s),
            ..Default::default()
        }
    } else {
        let reason = if s.kind == ContainerKind::App && inits_pending {
            "PodInitializing"
        } else {
            "ContainerCreating"
        };
        K8sState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.into()),
                message: None,
            }),
            ..Default::default()
        }
    };
    let shows_terminated = state.terminated.is_some();
    let last_state = if shows_terminated {
        None
    } else {
        terminated(s).map(|t| K8sState {
            terminated: Some(t),
            ..Default::default()
        })
    };
    let id = s
        .instance
        .as_ref()
        .map(|i| i.id.clone())
        .filter(|i| !i.is_empty())
        .or_else(|| s.last.as_ref().map(|l| l.id.clone()));
    ContainerStatus {
        name: s.container.name.clone(),
        image: s.container.image.clone().unwrap_or_default(),
        image_id: s.image_id.clone(),
        container_id: id.map(|i| format!("podvisor://{i}")),
        ready: ready(s),
        started: Some(started(s)),
        restart_count: s.instances_started.saturating_sub(1) as i32,
        state: Some(state),
        last_state,
        ..Default::default()
    }
}

/// Whether the pod has finished for good (Succeeded or Failed): it no longer counts against
/// the node's allocatable.
pub(super) fn is_terminal(w: &PodWorker) -> bool {
    matches!(phase(w), "Succeeded" | "Failed")
}

fn phase(w: &PodWorker) -> &'static str {
    if w.failed || w.rejected.is_some() || w.evicted.is_some() {
        return "Failed";
    }
    let apps: Vec<&Slot> = w
        .slots
        .iter()
        .filter(|s| s.kind == ContainerKind::App)
        .collect();
    if apps.iter().any(|s| running(s)) {
        return "Running";
    }
    if !apps.is_empty() && apps.iter().all(|s| s.last.is_some() && !pending(s)) {
        let ok = apps
            .iter()
            .all(|s| s.last.as_ref().is_some_and(|l| l.exit.exit_code == 0));
        return if ok { "Succeeded" } else { "Failed" };
    }
    if apps.iter().any(|s| s.last.is_some()) {
        // Restarting after a crash.
        return "Running";
    }
    "Pending"
}

/// The condition the kubelet's eviction manager puts on the pod it evicts
/// (`v1.DisruptionTarget`, reason `TerminationByKubelet`, the eviction message).
pub(super) fn disruption_target(message: &str, at: &str) -> PodCondition {
    PodCondition {
        type_: "DisruptionTarget".into(),
        status: "True".into(),
        reason: Some("TerminationByKubelet".into()),
        message: Some(message.to_string()),
        last_transition_time: to_time(at),
        ..Default::default()
    }
}

/// The view of one worker.
pub(super) fn view(w: &PodWorker, config: &PodConfig, cfg: &SyncConfig) -> PodView {
    let mut pod = (*w.pod).clone();
    pod.metadata.creation_timestamp = to_time(&w.created);
    let inits_pending = !super::actions::initialized(w);
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    // With a pod network, no IP until the sandbox has one (as the kubelet shows a pod).
    let pod_ips = if cfg.pod_network && !host_network && w.pod_ips.is_empty() {
        Vec::new()
    } else {
        crate::runtime::spec::pod_ips(&pod, &cfg.host_ip, &w.pod_ips)
    };
    let mut conditions: Vec<PodCondition> = w
        .conditions
        .iter()
        .map(|(t, (status, at))| PodCondition {
            type_: t.to_string(),
            status: if *status { "True" } else { "False" }.into(),
            last_transition_time: to_time(at),
            ..Default::default()
        })
        .collect();
    let qos = crate::pod::qos::qos_class(&pod)
        .ok()
        .map(|q| q.as_str().to_string());
    let inits: Vec<ContainerStatus> = w
        .slots
        .iter()
        .filter(|s| s.kind == ContainerKind::Init)
        .map(|s| container_status(s, inits_pending))
        .collect();
    let apps: Vec<ContainerStatus> = w
        .slots
        .iter()
        .filter(|s| s.kind == ContainerKind::App)
        .map(|s| container_status(s, inits_pending))
        .collect();
    let mut message = None;
    let mut reason = None;
    if let SandboxPhase::Failed { message: m } = &w.sandbox {
        reason = Some(PodReason::FailedCreatePodSandBox.to_string());
        message = Some(m.clone());
    }
    if w.deadline_exceeded {
        reason = Some(PodReason::DeadlineExceeded.to_string());
        message = Some(super::actions::DEADLINE_MESSAGE.to_string());
    }
    if let Some(e) = &w.evicted {
        // As the kubelet shows an evicted pod: Failed, Evicted, the message, and the
        // DisruptionTarget condition its eviction manager adds; the container statuses stay
        // (they show how each was stopped).
        reason = Some(PodReason::Evicted.to_string());
        message = Some(e.message.clone());
        conditions.push(disruption_target(&e.message, &e.at));
    }
    let (mut inits, mut apps) = (inits, apps);
    if let Some((r, m)) = &w.rejected {
        // As the kubelet's rejectPod: phase, reason and message only, no container statuses
        // (so `podvisor pods` shows the reason, as kubectl does).
        reason = Some(r.to_string());
        message = Some(m.clone());
        inits.clear();
        apps.clear();
    }
    pod.status = Some(PodStatus {
        phase: Some(phase(w).into()),
        conditions: Some(conditions),
        host_ip: Some(cfg.host_ip.clone()),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.into_iter().map(|ip| PodIP { ip }).collect()),
        start_time: w.start_time.as_deref().and_then(to_time),
        qos_class: qos,
        init_container_statuses: (!inits.is_empty()).then_some(inits),
        container_statuses: (!apps.is_empty() || w.rejected.is_none()).then_some(apps),
        reason,
        message,
        ..Default::default()
    });
    let mut log_paths = BTreeMap::new();
    let mut previous_log_paths = BTreeMap::new();
    for s in &w.slots {
        let current = s
            .instance
            .as_ref()
            .filter(|i| !i.id.is_empty())
            .map(|i| i.log_path.clone());
        let last = s.last.as_ref().map(|l| l.log_path.clone());
        // As the kubelet's validateContainerLogStatus: `logs` is the running instance, else
        // (waiting in a crash-loop backoff) the last terminated one; `logs --previous` is the
        // last terminated one either way (the one dead instance container GC keeps).
        if let Some(p) = current.or(last.clone()) {
            log_paths.insert(s.container.name.clone(), p);
        }
        if let Some(prev) = last.or(s.previous_log.clone()) {
            previous_log_paths.insert(s.container.name.clone(), prev);
        }
    }
    PodView {
        rolled_back: None,
        source_error: config.error_for(&w.spec.full_name, &w.spec.source),
        source: w.spec.source.clone(),
        pod,
        log_paths,
        previous_log_paths,
        mirror: None,
    }
}

/// The loop's status publishing state.
pub(super) struct StatusManager {
    /// The pods' and the node's events (the kubelet's event recorder), at most 1,000.
    pub(super) events: EventLog,
    pub(super) snapshots: SnapshotCell,
    /// Something changed since the last snapshot.
    pub(super) dirty: bool,
    /// `sources_ready` of the latest published snapshot (its change is published too).
    published_sources_ready: bool,
}

impl StatusManager {
    pub(super) fn new(snapshots: SnapshotCell) -> StatusManager {
        StatusManager {
            events: EventLog::new(1000),
            snapshots,
            dirty: true,
            published_sources_ready: false,
        }
    }

    /// Whether a snapshot is to be published now (something changed, or the sources'
    /// readiness did); if so, the next one waits for the next change.
    pub(super) fn publish_due(&mut self, sources_ready: bool) -> bool {
        if !self.dirty && sources_ready == self.published_sources_ready {
            return false;
        }
        self.dirty = false;
        self.published_sources_ready = sources_ready;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::image_id;

    #[test]
    fn image_id_is_containerds_repo_digest() {
        let d = "sha256:6d9ac9237a84afe1516540f40a0fafdc86859b2141954b4d643af7066d598b74";
        let table = [
            ("busybox:1.35", d, format!("docker.io/library/busybox@{d}")),
            ("busybox", d, format!("docker.io/library/busybox@{d}")),
            (
                "localhost:5000/edge/app:v2",
                d,
                format!("localhost:5000/edge/app@{d}"),
            ),
            (&format!("quay.io/a/b@{d}"), d, format!("quay.io/a/b@{d}")),
            (d, d, d.to_string()),
            ("busybox:1.35", "", String::new()),
        ];
        for (image, digest, want) in table {
            assert_eq!(image_id(image, digest), want, "{image}");
        }
    }
}
