//! cli::summary: kubectl's `printPod` columns of one pod (READY, STATUS and RESTARTS, with
//! its reasons, init-container progress and sidecars), which `podvisor pods` prints.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use k8s_openapi::jiff::Timestamp;

use super::time::since;
use crate::reason::{PodReason, TerminatedReason, WaitingReason};

/// The kubectl columns of one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSummary {
    /// `ready/total`, restartable init containers (sidecars) included.
    pub ready: String,
    /// kubectl's STATUS: `Running`, `Init:1/2`, `CrashLoopBackOff`, `Completed`, ...
    pub status: String,
    /// `3` or `3 (2m ago)`.
    pub restarts: String,
}

fn is_restartable_init(pod: &Pod, name: &str) -> bool {
    pod.spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .any(|c| c.name == name && c.restart_policy.as_deref() == Some("Always"))
}

fn condition_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == type_ && c.status == "True")
}

fn last_finished(c: &ContainerStatus) -> Option<Timestamp> {
    c.last_state
        .as_ref()?
        .terminated
        .as_ref()?
        .finished_at
        .as_ref()
        .map(|t| t.0)
}

/// kubectl's `printPod`: the READY, STATUS and RESTARTS cells of `pod` at `now`.
pub fn pod_summary(pod: &Pod, now: Timestamp) -> PodSummary {
    let empty = Vec::new();
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
    let mut reason = match status.and_then(|s| s.reason.as_deref()) {
        Some(r) if !r.is_empty() => r.to_string(),
        _ => phase.to_string(),
    };
    if status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("SchedulingGated"))
    {
        reason = "SchedulingGated".into();
    }
    let spec_init_len = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    let mut total = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    total += pod
        .spec
        .iter()
        .flat_map(|s| s.init_containers.iter().flatten())
        .filter(|c| c.restart_policy.as_deref() == Some("Always"))
        .count();
    let mut ready = 0;
    let mut restarts: i64 = 0;
    let mut sidecar_restarts: i64 = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_sidecar_restart: Option<Timestamp> = None;

    let init_statuses = status
        .and_then(|s| s.init_container_statuses.as_ref())
        .unwrap_or(&empty);
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        restarts += i64::from(c.restart_count);
        last_restart = last_restart.max(last_finished(c));
        let sidecar = is_restartable_init(pod, &c.name);
        if sidecar {
            sidecar_restarts += i64::from(c.restart_count);
            last_sidecar_restart = last_sidecar_restart.max(last_finished(c));
        }
        let state = c.state.as_ref();
        let terminated = state.and_then(|s| s.terminated.as_ref());
        let waiting_reason = state
            .and_then(|s| s.waiting.as_ref())
            .and_then(|w| w.reason.as_deref())
            .unwrap_or("");
        if terminated.is_some_and(|t| t.exit_code == 0) {
            continue;
        }
        if sidecar && c.started == Some(true) {
            if c.ready {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            reason = match t.reason.as_deref() {
                Some(r) if !r.is_empty() => format!("Init:{r}"),
                _ => match t.signal {
                    Some(sig) if sig != 0 => format!("Init:Signal:{sig}"),
                    _ => format!("Init:ExitCode:{}", t.exit_code),
                },
            };
        } else if !waiting_reason.is_empty() && waiting_reason != WaitingReason::PodInitializing {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{i}/{spec_init_len}");
        }
        initializing = true;
        break;
    }

    if !initializing || condition_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut has_running = false;
        let statuses = status
            .and_then(|s| s.container_statuses.as_ref())
            .unwrap_or(&empty);
        for c in statuses.iter().rev() {
            restarts += i64::from(c.restart_count);
            last_restart = last_restart.max(last_finished(c));
            let state = c.state.as_ref();
            let waiting_reason = state
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref())
                .unwrap_or("");
            let terminated = state.and_then(|s| s.terminated.as_ref());
            let running = state.is_some_and(|s| s.running.is_some());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_string();
            } else if let Some(t) = terminated {
                reason = match t.reason.as_deref() {
                    Some(r) if !r.is_empty() => r.to_string(),
                    _ => match t.signal {
                        Some(sig) if sig != 0 => format!("Signal:{sig}"),
                        _ => format!("ExitCode:{}", t.exit_code),
                    },
                };
            } else if c.ready && running {
                has_running = true;
                ready += 1;
            }
        }
        if reason == TerminatedReason::Completed && has_running {
            reason = if condition_true(pod, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }

    if pod.metadata.deletion_timestamp.is_some() {
        if status.and_then(|s| s.reason.as_deref()) == Some(PodReason::NodeLost.as_str()) {
            reason = "Unknown".into();
        } else if phase != "Succeeded" && phase != "Failed" {
            reason = "Terminating".into();
        }
    }

    let restarts = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(t), now)),
        _ => restarts.to_string(),
    };
    PodSummary {
        ready: format!("{ready}/{total}"),
        status: reason,
        restarts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStateWaiting, PodCondition, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn now() -> Timestamp {
        "2024-01-02T03:04:05Z".parse().expect("now")
    }

    fn ts(s: &str) -> Time {
        Time(s.parse().expect("time"))
    }

    fn running() -> ContainerState {
        ContainerState {
            running: Some(ContainerStateRunning::default()),
            ..Default::default()
        }
    }

    fn waiting(reason: &str) -> ContainerState {
        ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: (!reason.is_empty()).then(|| reason.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn terminated(reason: &str, exit_code: i32, signal: Option<i32>) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                reason: (!reason.is_empty()).then(|| reason.to_string()),
                exit_code,
                signal,
                finished_at: Some(ts("2024-01-02T03:02:05Z")),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn cs(name: &str, state: ContainerState, ready: bool, restarts: i32) -> ContainerStatus {
        ContainerStatus {
            name: name.into(),
            state: Some(state),
            ready,
            restart_count: restarts,
            started: Some(ready),
            ..Default::default()
        }
    }

    /// A pod with `containers` main containers and init containers (name, sidecar?).
    fn pod(
        phase: &str,
        containers: &[&str],
        init: &[(&str, bool)],
        init_statuses: Vec<ContainerStatus>,
        statuses: Vec<ContainerStatus>,
        conditions: &[(&str, &str)],
    ) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.spec = Some(PodSpec {
            containers: containers
                .iter()
                .map(|n| Container {
                    name: n.to_string(),
                    ..Default::default()
                })
                .collect(),
            init_containers: (!init.is_empty()).then(|| {
                init.iter()
                    .map(|(n, sidecar)| Container {
                        name: n.to_string(),
                        restart_policy: sidecar.then(|| "Always".to_string()),
                        ..Default::default()
                    })
                    .collect()
            }),
            ..Default::default()
        });
        p.status = Some(PodStatus {
            phase: Some(phase.into()),
            init_container_statuses: (!init_statuses.is_empty()).then_some(init_statuses),
            container_statuses: Some(statuses),
            conditions: Some(
                conditions
                    .iter()
                    .map(|(t, s)| PodCondition {
                        type_: t.to_string(),
                        status: s.to_string(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        p
    }

    fn with_last_state(mut c: ContainerStatus) -> ContainerStatus {
        c.last_state = Some(terminated("Error", 1, None));
        c
    }

    #[test]
    fn status_column_matches_kubectl_print_pod() {
        let a = &["a"];
        let ab = &["a", "b"];
        let cases: Vec<(&str, Pod, &str, &str, &str)> = vec![
            (
                "running",
                pod(
                    "Running",
                    a,
                    &[],
                    vec![],
                    vec![cs("a", running(), true, 0)],
                    &[("Ready", "True")],
                ),
                "1/1",
                "Running",
                "0",
            ),
            (
                "running, not ready",
                pod(
                    "Running",
                    a,
                    &[],
                    vec![],
                    vec![cs("a", running(), false, 0)],
                    &[],
                ),
                "0/1",
                "Running",
                "0",
            ),
            (
                "creating",
                pod(
                    "Pending",
                    ab,
                    &[],
                    vec![],
                    vec![
                        cs("a", waiting("ContainerCreating"), false, 0),
                        cs("b", waiting("ContainerCreating"), false, 0),
                    ],
                    &[],
                ),
                "0/2",
                "ContainerCreating",
                "0",
            ),
            (
                "crashloop with restarts",
                pod(
                    "Running",
                    ab,
                    &[],
                    vec![],
                    vec![
                        with_last_state(cs("a", waiting("CrashLoopBackOff"), false, 3)),
                        cs("b", running(), true, 0),
                    ],
                    &[],
                ),
                "1/2",
                "CrashLoopBackOff",
                "3 (2m ago)",
            ),
            (
                "completed",
                pod(
                    "Succeeded",
                    a,
                    &[],
                    vec![],
                    vec![cs("a", terminated("Completed", 0, None), false, 0)],
                    &[],
                ),
                "0/1",
                "Completed",
                "0",
            ),
            (
                "error",
                pod(
                    "Failed",
                    a,
                    &[],
                    vec![],
                    vec![cs("a", terminated("Error", 2, None), false, 0)],
                    &[],
                ),
                "0/1",
                "Error",
                "0",
            ),
            (
                "oom",
                pod(
                    "Running",
                    a,
                    &[],
                    vec![],
                    vec![cs("a", terminated("OOMKilled", 137, None), false, 1)],
                    &[],
                ),
                "0/1",
                "OOMKilled",
                "1",
            ),
            (
                "exit code without reason",
                pod(
                    "Failed",
                    a,
                    &[],
                    vec![],
                    vec![cs("a", terminated("", 3, None), false, 0)],
                    &[],
                ),
                "0/1",
                "ExitCode:3",
                "0",
            ),
            (
                "signal without reason",
                pod(
                    "Failed",
                    a,
                    &[],
                    vec![],
                    vec![cs("a", terminated("", 137, Some(9)), false, 0)],
                    &[],
                ),
                "0/1",
                "Signal:9",
                "0",
            ),
            (
                "one completed, one running, ready",
                pod(
                    "Running",
                    ab,
                    &[],
                    vec![],
                    vec![
                        cs("a", terminated("Completed", 0, None), false, 0),
                        cs("b", running(), true, 0),
                    ],
                    &[("Ready", "True")],
                ),
                "1/2",
                "Running",
                "0",
            ),
            (
                "one completed, one running, not ready",
                pod(
                    "Running",
                    ab,
                    &[],
                    vec![],
                    vec![
                        cs("a", terminated("Completed", 0, None), false, 0),
                        cs("b", running(), true, 0),
                    ],
                    &[("Ready", "False")],
                ),
                "1/2",
                "NotReady",
                "0",
            ),
            (
                "init running",
                pod(
                    "Pending",
                    a,
                    &[("i1", false), ("i2", false)],
                    vec![
                        cs("i1", terminated("Completed", 0, None), false, 0),
                        cs("i2", running(), false, 0),
                    ],
                    vec![cs("a", waiting("PodInitializing"), false, 0)],
                    &[],
                ),
                "0/1",
                "Init:1/2",
                "0",
            ),
            (
                "init waiting PodInitializing counts as progress",
                pod(
                    "Pending",
                    a,
                    &[("i1", false)],
                    vec![cs("i1", waiting("PodInitializing"), false, 0)],
                    vec![cs("a", waiting("PodInitializing"), false, 0)],
                    &[],
                ),
                "0/1",
                "Init:0/1",
                "0",
            ),
            (
                "init crashloop",
                pod(
                    "Pending",
                    a,
                    &[("i1", false)],
                    vec![with_last_state(cs(
                        "i1",
                        waiting("CrashLoopBackOff"),
                        false,
                        4,
                    ))],
                    vec![cs("a", waiting("PodInitializing"), false, 0)],
                    &[],
                ),
                "0/1",
                "Init:CrashLoopBackOff",
                "4 (2m ago)",
            ),
            (
                "init failed",
                pod(
                    "Failed",
                    a,
                    &[("i1", false)],
                    vec![cs("i1", terminated("Error", 1, None), false, 0)],
                    vec![cs("a", waiting("PodInitializing"), false, 0)],
                    &[],
                ),
                "0/1",
                "Init:Error",
                "0",
            ),
            (
                "init exit code",
                pod(
                    "Failed",
                    a,
                    &[("i1", false)],
                    vec![cs("i1", terminated("", 5, None), false, 0)],
                    vec![],
                    &[],
                ),
                "0/1",
                "Init:ExitCode:5",
                "0",
            ),
            (
                "init signal",
                pod(
                    "Failed",
                    a,
                    &[("i1", false)],
                    vec![cs("i1", terminated("", 0, Some(15)), false, 0)],
                    vec![],
                    &[],
                ),
                // exit code 0 counts as done even with a signal, as in kubectl
                "0/1",
                "Failed",
                "0",
            ),
            (
                "all init done, main creating",
                pod(
                    "Pending",
                    a,
                    &[("i1", false)],
                    vec![cs("i1", terminated("Completed", 0, None), false, 0)],
                    vec![cs("a", waiting("ContainerCreating"), false, 0)],
                    &[("Initialized", "True")],
                ),
                "0/1",
                "ContainerCreating",
                "0",
            ),
            (
                "sidecar started and ready",
                pod(
                    "Running",
                    a,
                    &[("side", true)],
                    vec![cs("side", running(), true, 2)],
                    vec![cs("a", running(), true, 1)],
                    &[("Initialized", "True"), ("Ready", "True")],
                ),
                "2/2",
                "Running",
                "3",
            ),
            (
                "sidecar not started yet",
                pod(
                    "Pending",
                    a,
                    &[("side", true)],
                    vec![cs("side", running(), false, 0)],
                    vec![cs("a", waiting("PodInitializing"), false, 0)],
                    &[],
                ),
                "0/2",
                "Init:0/1",
                "0",
            ),
            (
                "no statuses yet",
                pod("Pending", ab, &[], vec![], vec![], &[]),
                "0/2",
                "Pending",
                "0",
            ),
        ];
        for (name, p, ready, status, restarts) in cases {
            let s = pod_summary(&p, now());
            assert_eq!(
                (s.ready.as_str(), s.status.as_str(), s.restarts.as_str()),
                (ready, status, restarts),
                "{name}"
            );
        }
    }

    #[test]
    fn status_reason_gating_and_terminating() {
        let mut p = pod(
            "Running",
            &["a"],
            &[],
            vec![],
            vec![cs("a", running(), true, 0)],
            &[],
        );
        p.status.as_mut().expect("status").reason = Some("Evicted".into());
        p.status.as_mut().expect("status").container_statuses = Some(vec![]);
        assert_eq!(pod_summary(&p, now()).status, "Evicted");

        let mut p = pod(
            "Running",
            &["a"],
            &[],
            vec![],
            vec![cs("a", running(), true, 0)],
            &[],
        );
        p.metadata.deletion_timestamp = Some(ts("2024-01-02T03:04:00Z"));
        assert_eq!(pod_summary(&p, now()).status, "Terminating");
        let mut done = pod(
            "Succeeded",
            &["a"],
            &[],
            vec![],
            vec![cs("a", terminated("Completed", 0, None), false, 0)],
            &[],
        );
        done.metadata.deletion_timestamp = Some(ts("2024-01-02T03:04:00Z"));
        assert_eq!(pod_summary(&done, now()).status, "Completed");

        let mut gated = pod("Pending", &["a"], &[], vec![], vec![], &[]);
        gated.status.as_mut().expect("status").conditions = Some(vec![PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("SchedulingGated".into()),
            ..Default::default()
        }]);
        assert_eq!(pod_summary(&gated, now()).status, "SchedulingGated");
    }
}
