//! Probes and lifecycle hooks: readiness, startup, liveness kills, postStart, preStop.

use super::*;

use crate::prober::scheduler::ProbeUpdate;
use crate::prober::{ProbeKind, ProbeResult};

impl Harness {
    fn probe(&mut self, id: &str, kind: ProbeKind, result: ProbeResult, changed: Option<bool>) {
        let uid = {
            let st = self.rt.state.lock().expect("lock");
            st.containers[id].meta.pod_uid.clone()
        };
        self.send(SyncEvent::Probe(Box::new(ProbeUpdate {
            pod_uid: uid,
            container: "main".into(),
            container_id: id.to_string(),
            kind,
            result,
            changed,
        })));
    }
    fn status(&self, pod: &str) -> k8s_openapi::api::core::v1::PodStatus {
        self.snap()
            .find_pod(pod)
            .and_then(|v| v.pod.status.clone())
            .expect("status")
    }
    fn condition(&self, pod: &str, t: &str) -> (String, String) {
        let st = self.status(pod);
        let c = st
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == t)
            .cloned()
            .expect("condition");
        (
            c.status,
            c.last_transition_time
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        )
    }
    fn event_count(&self, reason: &str) -> u32 {
        self.snap()
            .events
            .iter()
            .filter(|e| e.reason == reason)
            .map(|e| e.count)
            .sum()
    }
    fn prober_log(&self) -> Vec<String> {
        self.prober.log.lock().expect("lock").clone()
    }
    fn release_hooks(&mut self) {
        let held = self
            .hold_hooks
            .lock()
            .expect("lock")
            .replace(Vec::new())
            .unwrap_or_default();
        for j in held {
            let emit = |r| self.done.lock().expect("lock").push_back(r);
            let r = run_job(&self.rt, &self.images, j, &emit);
            self.done.lock().expect("lock").push_back(r);
        }
        self.pump();
    }
}

fn fail(msg: &str) -> ProbeResult {
    ProbeResult::Failure {
        message: msg.into(),
    }
}

fn with_container_fields(name: &str, extra_pod: &str, fields: &str) -> String {
    let mut y = pod_yaml(name, "busybox", extra_pod);
    y.push_str(fields);
    y
}

#[test]
fn readiness_drives_ready_flag_and_conditions_with_transition_times() {
    let mut h = harness();
    h.file(
        "r.yaml",
        &with_container_fields(
            "r",
            "",
            "    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    assert_eq!(h.prober_log(), vec![format!("add {id}")]);
    let cs = h.status("r").container_statuses.expect("cs")[0].clone();
    assert_eq!((cs.ready, cs.started), (false, Some(true)));
    assert_eq!(h.condition("r", "ContainersReady").0, "False");
    assert_eq!(h.condition("r", "Ready").0, "False");
    assert_eq!(h.condition("r", "PodReadyToStartContainers").0, "True");
    assert_eq!(h.condition("r", "Initialized").0, "True");
    h.advance(Duration::from_secs(3));
    h.probe(&id, ProbeKind::Readiness, ProbeResult::Success, Some(true));
    let (ready, t1) = h.condition("r", "Ready");
    assert_eq!(ready, "True");
    assert!(h.status("r").container_statuses.expect("cs")[0].ready);
    h.advance(Duration::from_secs(5));
    h.probe(
        &id,
        ProbeKind::Readiness,
        fail("connection refused"),
        Some(false),
    );
    let (ready, t2) = h.condition("r", "Ready");
    assert_eq!(ready, "False");
    assert_ne!(t1, t2, "transition time moves on a change");
    // Another failure: no transition, the event is counted.
    h.advance(Duration::from_secs(1));
    h.probe(&id, ProbeKind::Readiness, fail("connection refused"), None);
    assert_eq!(h.condition("r", "Ready"), ("False".to_string(), t2));
    assert_eq!(h.event_count("Unhealthy"), 2);
    let ev = h
        .snap()
        .events
        .iter()
        .find(|e| e.reason == "Unhealthy")
        .cloned()
        .expect("event");
    assert_eq!(ev.message, "Readiness probe failed: connection refused");
    assert_ne!(ev.first_timestamp, ev.last_timestamp);
    // Readiness never kills.
    assert!(!h
        .rt
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Signal { .. })));
}

#[test]
fn startup_probe_gates_started_and_ready() {
    let mut h = harness();
    h.file(
        "s.yaml",
        &with_container_fields(
            "s",
            "",
            "    startupProbe: {tcpSocket: {port: 1}, failureThreshold: 30}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    let cs = h.status("s").container_statuses.expect("cs")[0].clone();
    assert_eq!((cs.ready, cs.started), (false, Some(false)));
    h.probe(&id, ProbeKind::Startup, ProbeResult::Success, Some(true));
    let cs = h.status("s").container_statuses.expect("cs")[0].clone();
    assert_eq!((cs.ready, cs.started), (true, Some(true)));
    assert_eq!(h.condition("s", "Ready").0, "True");
}

#[test]
fn liveness_failure_runs_prestop_then_stops_then_kills_at_probe_grace() {
    let mut h = harness();
    h.file(
        "l.yaml",
        &with_container_fields(
            "l",
            "  terminationGracePeriodSeconds: 60\n",
            "    livenessProbe: {httpGet: {port: 80}, terminationGracePeriodSeconds: 10}\n    lifecycle:\n      preStop: {exec: {command: [drain]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    h.probe(
        &id,
        ProbeKind::Liveness,
        fail("HTTP probe failed with statuscode: 500"),
        Some(false),
    );
    let calls = h.rt.calls();
    let exec = calls
        .iter()
        .position(|c| matches!(c, Call::Exec { cmd, .. } if cmd == &vec!["drain".to_string()]))
        .expect("preStop ran");
    let term = calls
        .iter()
        .position(|c| {
            *c == Call::Signal {
                id: id.clone(),
                signal: libc::SIGTERM,
            }
        })
        .expect("stop signal");
    assert!(exec < term, "preStop before the stop signal: {calls:?}");
    let snap = h.snap();
    let killing = snap
        .events
        .iter()
        .find(|e| e.reason == "Killing")
        .expect("Killing");
    assert_eq!(
        killing.message,
        "Container main failed liveness probe, will be restarted"
    );
    assert!(snap.events.iter().any(|e| e.reason == "Unhealthy"));
    assert!(h.prober_log().contains(&format!("remove {id}")));
    // Being killed: no longer ready.
    assert!(!h.status("l").container_statuses.expect("cs")[0].ready);
    assert_eq!(h.condition("l", "Ready").0, "False");
    let sigkill = Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL,
    };
    h.advance(Duration::from_secs(9));
    assert!(!h.rt.calls().contains(&sigkill));
    h.advance(Duration::from_secs(2));
    assert!(
        h.rt.calls().contains(&sigkill),
        "killed at the probe's grace"
    );
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    // restartPolicy Always: restarted (first restart is immediate), restartCount 1.
    assert_eq!(h.rt.starts().len(), 2);
    let cs = h.status("l").container_statuses.expect("cs")[0].clone();
    assert_eq!(cs.restart_count, 1);
    let new_id = h.rt.running_ids()[0].clone();
    assert!(h.prober_log().contains(&format!("add {new_id}")));
}

#[test]
fn post_start_gates_started_and_failure_kills() {
    let mut h = harness();
    *h.hold_hooks.lock().expect("lock") = Some(Vec::new());
    h.file(
        "p.yaml",
        &with_container_fields(
            "p",
            "",
            "    readinessProbe: {tcpSocket: {port: 1}}\n    lifecycle:\n      postStart: {exec: {command: [warmup]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    assert_eq!(
        h.waiting_reason("p", "main").as_deref(),
        Some("ContainerCreating")
    );
    let cs = h.status("p").container_statuses.expect("cs")[0].clone();
    assert_eq!(cs.started, Some(false));
    assert_eq!(h.event_count("Created"), 1);
    assert_eq!(h.event_count("Started"), 0);
    assert!(
        h.prober_log().is_empty(),
        "no probes before postStart returns"
    );
    h.release_hooks();
    assert_eq!(h.event_count("Started"), 1);
    assert_eq!(h.waiting_reason("p", "main"), None);
    assert_eq!(h.prober_log(), vec![format!("add {id}")]);

    // A failing postStart hook kills the container.
    let mut h = harness();
    h.rt.state
        .lock()
        .expect("lock")
        .exec_exit
        .insert("warmup".into(), 3);
    h.file(
        "p.yaml",
        &with_container_fields(
            "p",
            "",
            "    lifecycle:\n      postStart: {exec: {command: [warmup]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    assert_eq!(h.event_count("FailedPostStartHook"), 1);
    let ev = h
        .snap()
        .events
        .iter()
        .find(|e| e.reason == "FailedPostStartHook")
        .cloned()
        .expect("event");
    assert_eq!(
        ev.message,
        "Exec lifecycle hook ([warmup]) for Container \"main\" in Pod \"default/p-node1\" failed - error: exit 3"
    );
    assert_eq!(h.event_count("Started"), 0);
    assert!(h.rt.calls().contains(&Call::Signal {
        id,
        signal: libc::SIGTERM
    }));
}

#[test]
fn pod_removal_waits_for_prestop_within_the_grace_period() {
    let mut h = harness();
    h.scan_done();
    h.file(
        "g.yaml",
        &with_container_fields(
            "g",
            "  terminationGracePeriodSeconds: 5\n",
            "    lifecycle:\n      preStop: {exec: {command: [hang]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    *h.hold_hooks.lock().expect("lock") = Some(Vec::new());
    h.remove_file("g.yaml");
    let term = Call::Signal {
        id: id.clone(),
        signal: libc::SIGTERM,
    };
    let kill = Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL,
    };
    assert!(
        !h.rt.calls().contains(&term),
        "stop signal waits for preStop"
    );
    h.advance(Duration::from_secs(4));
    assert!(!h.rt.calls().contains(&term));
    // The hook is still running at the end of the grace period: stop now, kill 2 s later.
    h.advance(Duration::from_secs(1));
    assert!(h.rt.calls().contains(&term));
    assert!(!h.rt.calls().contains(&kill));
    h.advance(Duration::from_secs(2));
    assert!(h.rt.calls().contains(&kill));

    // A preStop that finishes in time: stop signal right after it, failure is reported.
    let mut h = harness();
    h.scan_done();
    h.rt.state
        .lock()
        .expect("lock")
        .exec_exit
        .insert("drain".into(), 1);
    h.file(
        "g.yaml",
        &with_container_fields(
            "g",
            "",
            "    lifecycle:\n      preStop: {exec: {command: [drain]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    h.remove_file("g.yaml");
    let calls = h.rt.calls();
    let exec = calls
        .iter()
        .position(|c| matches!(c, Call::Exec { .. }))
        .expect("preStop");
    let term = calls
        .iter()
        .position(|c| {
            *c == Call::Signal {
                id: id.clone(),
                signal: libc::SIGTERM,
            }
        })
        .expect("term");
    assert!(exec < term);
    assert_eq!(h.event_count("FailedPreStopHook"), 1);
}

#[test]
fn zero_grace_skips_prestop_and_still_waits_the_minimal_window_before_sigkill() {
    // terminationGracePeriodSeconds: 0, as the kubelet: no preStop, the stop signal, and
    // SIGKILL only after its 2 s minimal shutdown window; the same for a pod removal.
    let mut h = harness();
    h.scan_done();
    h.file(
        "z.yaml",
        &with_container_fields(
            "z",
            "  terminationGracePeriodSeconds: 0\n",
            "    livenessProbe: {httpGet: {port: 80}}\n    lifecycle:\n      preStop: {exec: {command: [drain]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    h.probe(
        &id,
        ProbeKind::Liveness,
        fail("HTTP probe failed with statuscode: 500"),
        Some(false),
    );
    let sigterm = Call::Signal {
        id: id.clone(),
        signal: libc::SIGTERM,
    };
    let sigkill = Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL,
    };
    let calls = h.rt.calls();
    assert!(calls.contains(&sigterm), "{calls:?}");
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Exec { .. })),
        "no preStop with no grace: {calls:?}"
    );
    h.advance(Duration::from_millis(1900));
    assert!(!h.rt.calls().contains(&sigkill), "{:?}", h.rt.calls());
    h.advance(Duration::from_millis(200));
    assert!(h.rt.calls().contains(&sigkill), "{:?}", h.rt.calls());
    let ev = h.rt.exit(&id, 137);
    h.send(ev);

    let id = h.rt.running_ids()[0].clone();
    h.remove_file("z.yaml");
    let sigterm = Call::Signal {
        id: id.clone(),
        signal: libc::SIGTERM,
    };
    let sigkill = Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL,
    };
    assert!(h.rt.calls().contains(&sigterm), "{:?}", h.rt.calls());
    assert!(
        !h.rt.calls().iter().any(|c| matches!(c, Call::Exec { .. })),
        "no preStop on removal either"
    );
    h.advance(Duration::from_millis(1900));
    assert!(!h.rt.calls().contains(&sigkill), "{:?}", h.rt.calls());
    h.advance(Duration::from_millis(200));
    assert!(h.rt.calls().contains(&sigkill), "{:?}", h.rt.calls());
}
