//! Eviction: what the eviction manager's events do to pods (stop, Failed/Evicted, sandbox
//! removed, started again once the pressure cleared), node conditions, admission under
//! pressure.

use std::collections::BTreeSet;

use super::*;
use crate::eviction::{EvictPod, EvictionEvent, Pressure, Signal};

const MESSAGE: &str = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. Container main was using 300Mi, request is 0, has larger consumption of memory. ";

fn conditions(h: &mut Harness, ps: &[Pressure]) {
    let set: BTreeSet<Pressure> = ps.iter().copied().collect();
    h.send(SyncEvent::Eviction(EvictionEvent::Conditions(set)));
}

fn evict(h: &mut Harness, pod: &str, grace: Duration) {
    let uid = h.uid(pod);
    let name = crate::status::full_name(&h.snap().find_pod(pod).expect("pod").pod);
    h.send(SyncEvent::Eviction(EvictionEvent::Evict(EvictPod {
        uid,
        name,
        signal: Signal::MemoryAvailable,
        message: MESSAGE.into(),
        grace,
    })));
}

fn status(h: &Harness, pod: &str) -> k8s_openapi::api::core::v1::PodStatus {
    h.snap()
        .find_pod(pod)
        .and_then(|v| v.pod.status.clone())
        .expect("status")
}

fn condition(h: &Harness, t: &str) -> String {
    h.snap()
        .node_conditions
        .iter()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
        .expect("condition")
}

#[test]
fn evicted_pod_stops_fails_and_starts_again_once_the_pressure_cleared() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h.scan_done();
    let id = h.rt.running_ids().pop().expect("running");
    let uid = h.uid("web");
    assert_eq!(condition(&h, "MemoryPressure"), "False");
    conditions(&mut h, &[Pressure::Memory]);
    assert_eq!(condition(&h, "MemoryPressure"), "True");
    assert!(h
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "NodeHasInsufficientMemory" && e.pod.is_empty()));

    evict(&mut h, "web", Duration::ZERO);
    let st = status(&h, "web");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("Evicted"));
    assert_eq!(st.message.as_deref(), Some(MESSAGE));
    let target = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "DisruptionTarget")
        .expect("DisruptionTarget condition");
    assert_eq!(target.status, "True");
    assert_eq!(target.reason.as_deref(), Some("TerminationByKubelet"));
    assert_eq!(target.message.as_deref(), Some(MESSAGE));
    assert!(target.last_transition_time.is_some());
    assert!(h
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "Evicted" && e.message == MESSAGE.trim_end()));
    // Hard eviction: no grace, SIGKILL at once.
    assert!(
        h.rt.calls().contains(&Call::Signal {
            id: id.clone(),
            signal: libc::SIGKILL
        }),
        "{:?}",
        h.rt.calls()
    );
    // Once stopped, the sandbox goes (cgroups, emptyDir volumes); nothing restarts.
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    assert!(h.rt.calls().contains(&Call::RemoveSandbox(uid.clone())));
    h.advance(Duration::from_secs(120));
    assert_eq!(h.rt.starts().len(), 1, "not under pressure");
    assert_eq!(status(&h, "web").phase.as_deref(), Some("Failed"));
    // The condition clears (the manager applies the transition period): it starts again in
    // a new sandbox, its restart count going on.
    conditions(&mut h, &[]);
    assert_eq!(condition(&h, "MemoryPressure"), "False");
    h.advance(Duration::from_secs(1));
    let runs =
        h.rt.calls()
            .iter()
            .filter(|c| **c == Call::RunSandbox(uid.clone()))
            .count();
    assert_eq!(runs, 2, "{:?}", h.rt.calls());
    assert_eq!(h.rt.starts().len(), 2, "{:?}", h.rt.starts());
    let st = status(&h, "web");
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(st.reason, None);
    assert!(
        !st.conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "DisruptionTarget"),
        "a new start of the pod: no DisruptionTarget"
    );
    assert!(h
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "EvictionRecovered"));

    // A second eviction waits longer (20 s) before the pod comes back.
    conditions(&mut h, &[Pressure::Memory]);
    let id = h.rt.running_ids().pop().expect("running");
    evict(&mut h, "web", Duration::ZERO);
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    conditions(&mut h, &[]);
    h.advance(Duration::from_secs(15));
    assert_eq!(h.rt.starts().len(), 2, "backoff");
    h.advance(Duration::from_secs(10));
    assert_eq!(h.rt.starts().len(), 3);
}

#[test]
fn soft_eviction_uses_its_grace_and_critical_pods_are_never_evicted() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h.file(
        "etcd.yaml",
        &pod_yaml(
            "etcd",
            "busybox",
            "  priorityClassName: system-node-critical\n",
        ),
    );
    h.scan_done();
    evict(&mut h, "etcd", Duration::ZERO);
    assert_eq!(status(&h, "etcd").phase.as_deref(), Some("Running"));
    let calls = h.rt.calls().len();
    evict(&mut h, "web", Duration::from_secs(5));
    assert_eq!(status(&h, "web").reason.as_deref(), Some("Evicted"));
    let signals: Vec<i32> = h.rt.calls()[calls..]
        .iter()
        .filter_map(|c| match c {
            Call::Signal { signal, .. } => Some(*signal),
            _ => None,
        })
        .collect();
    assert_eq!(
        signals,
        vec![libc::SIGTERM],
        "stop signal, SIGKILL after 5 s"
    );
    h.advance(Duration::from_secs(6));
    assert!(h
        .rt
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Signal { signal, .. } if *signal == libc::SIGKILL)));
}

#[test]
fn admission_under_pressure() {
    let mut h = harness();
    h.scan_done();
    conditions(&mut h, &[Pressure::Memory]);
    h.file("be.yaml", &pod_yaml("be", "busybox", ""));
    let st = status(&h, "be");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("Evicted"));
    assert_eq!(
        st.message.as_deref(),
        Some("The node had condition: [MemoryPressure]. ")
    );
    let burstable = pod_yaml("bu", "busybox", "") + "    resources: {requests: {memory: 10Mi}}\n";
    h.file("bu.yaml", &burstable);
    assert_eq!(status(&h, "bu").phase.as_deref(), Some("Running"));

    conditions(&mut h, &[Pressure::Disk]);
    h.file("bu2.yaml", &burstable.replace("name: bu\n", "name: bu2\n"));
    assert_eq!(
        status(&h, "bu2").message.as_deref(),
        Some("The node had condition: [DiskPressure]. ")
    );
    h.file(
        "crit.yaml",
        &pod_yaml(
            "crit",
            "busybox",
            "  priorityClassName: system-cluster-critical\n",
        ),
    );
    assert_eq!(status(&h, "crit").phase.as_deref(), Some("Running"));
    // Running pods are not touched by admission.
    assert_eq!(status(&h, "bu").phase.as_deref(), Some("Running"));
}

#[test]
fn a_pod_over_its_local_storage_limit_is_evicted_at_once_and_backs_off_before_starting_again() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h.scan_done();
    let id = h.rt.running_ids().pop().expect("running");
    let uid = h.uid("web");
    let message = "Container main exceeded its local ephemeral storage limit \"10Mi\". ";
    let limit = |h: &mut Harness| {
        let name = crate::status::full_name(&h.snap().find_pod("web").expect("pod").pod);
        h.send(SyncEvent::Eviction(EvictionEvent::EvictForLimit(
            crate::eviction::LimitEviction {
                uid: uid.clone(),
                name,
                kind: crate::eviction::ephemeral::LimitKind::Container,
                message: message.into(),
            },
        )));
    };
    limit(&mut h);
    let st = status(&h, "web");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("Evicted"));
    assert_eq!(st.message.as_deref(), Some(message));
    assert!(h
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "Evicted" && e.message == message.trim_end()));
    assert!(h.rt.calls().contains(&Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL
    }));
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    assert!(h.rt.calls().contains(&Call::RemoveSandbox(uid.clone())));
    // No node pressure to wait for, but the eviction backoff: 10 s, then 20 s.
    h.advance(Duration::from_secs(5));
    assert_eq!(h.rt.starts().len(), 1, "backoff");
    h.advance(Duration::from_secs(6));
    assert_eq!(h.rt.starts().len(), 2);
    assert_eq!(status(&h, "web").phase.as_deref(), Some("Running"));
    let id = h.rt.running_ids().pop().expect("running");
    limit(&mut h);
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    h.advance(Duration::from_secs(15));
    assert_eq!(h.rt.starts().len(), 2, "a longer backoff the second time");
    h.advance(Duration::from_secs(10));
    assert_eq!(h.rt.starts().len(), 3);
}

#[test]
fn the_reason_for_evicting_nothing_is_a_node_event_and_the_pods_run_on() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h.scan_done();
    let id = h.rt.running_ids().pop().expect("running");
    conditions(&mut h, &[Pressure::Disk]);
    let reason = "not evicting for nodefs.available: 5Mi short, and no pod that may be evicted uses any ephemeral-storage: evicting would free nothing";
    h.send(SyncEvent::Eviction(EvictionEvent::NotEvicting {
        message: reason.into(),
    }));
    let events = h.snap().events.clone();
    let skipped: Vec<_> = events
        .iter()
        .filter(|e| e.reason == "EvictionSkipped")
        .collect();
    assert_eq!(skipped.len(), 1, "{events:?}");
    assert!(skipped[0].pod.is_empty(), "a node event");
    assert_eq!(skipped[0].message, reason);
    assert_eq!(skipped[0].type_, crate::status::EventType::Warning);
    assert_eq!(h.rt.running_ids(), vec![id], "the pod runs on");
    assert_eq!(condition(&h, "DiskPressure"), "True");
}
