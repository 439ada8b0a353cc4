//! Safe updates: an edit whose new generation fails is rolled back to the last Ready
//! generation, is not retried until the spec changes, and a restarted loop keeps it so.

use super::*;

const V1: &str = "busybox";
const V2: &str = "busybox:v2";

fn events_of(h: &Harness, reason: &str) -> Vec<String> {
    h.snap()
        .events
        .iter()
        .filter(|e| e.reason == reason)
        .map(|e| e.message.clone())
        .collect()
}

fn rolled_back(h: &Harness, pod: &str) -> Option<String> {
    h.snap().find_pod(pod).and_then(|v| v.rolled_back.clone())
}

/// web at V1, Ready, then edited to `image` (with `extra` pod spec lines); the V1 container
/// has stopped, so the new generation starts. Returns the V1 uid.
fn ready_then_edited(h: &mut Harness, image: &str, extra: &str) -> String {
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", V1, ""));
    let good = h.uid("web");
    let old = h.rt.running_ids()[0].clone();
    h.file("web.yaml", &pod_yaml("web", image, extra));
    let ev = h.rt.exit(&old, 143);
    h.send(ev);
    good
}

/// Images whose `reg.local/app:2` cannot be pulled.
fn unreachable_v2_image() -> FakeImages {
    let images = FakeImages::default();
    images
        .state
        .lock()
        .expect("lock")
        .failing
        .insert("reg.local/app:2".into(), "connection refused".into());
    images
}

/// Exits the pod's running container with `code`, as a crash.
fn crash(h: &mut Harness, code: i32) {
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, code);
    h.send(ev);
}

#[test]
fn a_crash_looping_edit_rolls_back_and_is_not_retried_until_the_spec_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h = harness_with(rt.clone(), store.clone());
    let good = ready_then_edited(&mut h, V2, "");
    let bad = h.uid("web");
    assert_ne!(bad, good, "the edit is being tried");
    // The first exit restarts at once (no backoff yet): not a crash loop.
    crash(&mut h, 1);
    assert_eq!(h.uid("web"), bad);
    assert!(events_of(&h, "RolledBack").is_empty());
    // The second one backs off: CrashLoopBackOff, rolled back.
    crash(&mut h, 1);
    assert_eq!(h.uid("web"), good, "the last Ready generation runs again");
    let ev = events_of(&h, "RolledBack");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert!(
        ev[0].starts_with("container main is crash-looping (last exit code 1): rolled back to the last Ready generation"),
        "{ev:?}"
    );
    assert_eq!(
        rolled_back(&h, "web").as_deref(),
        Some("container main is crash-looping (last exit code 1)")
    );
    let starts = h.rt.starts().len();
    assert_eq!(h.rt.running_ids().len(), 1);
    // The same spec again (a labels-only edit too): not retried.
    h.file("web.yaml", &pod_yaml("web", V2, ""));
    h.file(
        "web.yaml",
        &pod_yaml("web", V2, "").replace("app: web", "app: web, try: again"),
    );
    h.advance(Duration::from_secs(600));
    assert_eq!(h.uid("web"), good);
    assert_eq!(h.rt.starts().len(), starts, "{:?}", h.rt.calls());

    // A restarted loop runs the rolled-back generation and still knows the bad spec.
    drop(h);
    let mut h = harness_with(rt.clone(), store);
    h.file("web.yaml", &pod_yaml("web", V2, ""));
    h.scan_done();
    h.advance(Duration::from_secs(600));
    assert_eq!(h.uid("web"), good, "{:#?}", h.snap().events);
    assert_eq!(h.rt.starts().len(), starts, "{:?}", h.rt.calls());
    assert_eq!(
        rolled_back(&h, "web").as_deref(),
        Some("container main is crash-looping (last exit code 1)")
    );
    assert_eq!(rt.running_ids().len(), 1);

    // A new spec clears the rollback and is tried.
    h.file("web.yaml", &pod_yaml("web", "busybox:v3", ""));
    let id = rt.running_ids()[0].clone();
    let ev = rt.exit(&id, 143);
    h.send(ev);
    assert_ne!(h.uid("web"), good);
    assert_eq!(rolled_back(&h, "web"), None);
    assert_eq!(h.rt.starts().len(), starts + 1);
}

#[test]
fn a_start_the_runtime_refuses_rolls_back_at_once() {
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .refused_images
        .insert("busybox:bad".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with(rt, dir.path().join("static-pods"));
    let good = ready_then_edited(&mut h, "busybox:bad", "");
    // One refused start is enough: no backoff, no deadline.
    assert_eq!(h.uid("web"), good, "{:?}", h.rt.calls());
    let why = rolled_back(&h, "web").expect("rolled back");
    assert!(
        why.starts_with("container main cannot start: RunContainerError: ")
            && why.ends_with("exec of busybox:bad's command: permission denied"),
        "{why}"
    );
}

#[test]
fn image_pull_failures_roll_back_only_at_the_deadline_from_the_annotation() {
    let images = unreachable_v2_image();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with_images(
        FakeRuntime::default(),
        images,
        dir.path().join("static-pods"),
    );
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", V1, ""));
    let good = h.uid("web");
    let old = h.rt.running_ids()[0].clone();
    let edit = pod_yaml("web", "reg.local/app:2", "").replace(
        "  labels:",
        "  annotations: {podvisor.io/rollback-after: 45s}\n  labels:",
    );
    h.file("web.yaml", &edit);
    // The old generation takes 20 s to stop: the deadline runs from when the new one can start.
    h.advance(Duration::from_secs(20));
    let ev = h.rt.exit(&old, 143);
    h.send(ev);
    let bad = h.uid("web");
    assert_ne!(bad, good);
    h.advance(Duration::from_secs(40));
    assert_eq!(h.uid("web"), bad, "pull failures wait for the deadline");
    assert!(h.waiting_reason("web", "main").is_some());
    h.advance(Duration::from_secs(6));
    assert_eq!(h.uid("web"), good);
    let why = rolled_back(&h, "web").expect("rolled back");
    assert!(
        why.starts_with("not Ready within 45s (container main: "),
        "{why}"
    );
}

#[test]
fn a_daemon_restarted_during_probation_still_rolls_back() {
    let images = unreachable_v2_image();
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h = harness_with_images(rt.clone(), images.clone(), store.clone());
    let good = ready_then_edited(&mut h, "reg.local/app:2", "");
    drop(h);
    // The Ready generation's desired-pod record is gone; its generation record is not.
    let mut h = harness_with_images(rt, images, store);
    h.file("web.yaml", &pod_yaml("web", "reg.local/app:2", ""));
    h.scan_done();
    assert_ne!(h.uid("web"), good);
    h.advance(Duration::from_secs(301));
    assert_eq!(h.uid("web"), good);
    assert!(rolled_back(&h, "web").is_some());
}

#[test]
fn a_pod_that_never_was_ready_has_nothing_to_roll_back_to() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", V1, ""));
    let first = h.uid("web");
    // Crash-looping from the start: it backs off as under a kubelet, no rollback.
    crash(&mut h, 1);
    crash(&mut h, 1);
    assert_eq!(
        h.waiting_reason("web", "main").as_deref(),
        Some("CrashLoopBackOff")
    );
    h.advance(Duration::from_secs(400));
    assert_eq!(h.uid("web"), first);
    assert!(events_of(&h, "RolledBack").is_empty());
    assert_eq!(rolled_back(&h, "web"), None);
}

#[test]
fn rollback_after_zero_turns_rollbacks_off() {
    // Annotation 0 on the edit: crash loops are left to the backoff, as under a kubelet.
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", V1, ""));
    let old = h.rt.running_ids()[0].clone();
    let edit = pod_yaml("web", V2, "").replace(
        "  labels:",
        "  annotations: {podvisor.io/rollback-after: \"0\"}\n  labels:",
    );
    h.file("web.yaml", &edit);
    let ev = h.rt.exit(&old, 143);
    h.send(ev);
    let bad = h.uid("web");
    crash(&mut h, 1);
    crash(&mut h, 1);
    h.advance(Duration::from_secs(900));
    assert_eq!(h.uid("web"), bad);
    assert!(events_of(&h, "RolledBack").is_empty());
}

#[test]
fn an_edit_the_node_cannot_admit_rolls_back_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_allocatable(
        FakeRuntime::default(),
        dir.path().join("static-pods"),
        Some(crate::pod::resources::Amounts {
            cpu_millis: 1000,
            memory_bytes: 1 << 30,
        }),
    );
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", V1, ""));
    let good = h.uid("web");
    let old = h.rt.running_ids()[0].clone();
    let big = pod_yaml("web", V2, "") + "    resources: {requests: {cpu: \"2\"}}\n";
    h.file("web.yaml", &big);
    let ev = h.rt.exit(&old, 143);
    h.send(ev);
    assert_eq!(h.uid("web"), good, "{:?}", h.rt.calls());
    let why = rolled_back(&h, "web").expect("rolled back");
    assert!(
        why.starts_with("the pod was not admitted: OutOfcpu"),
        "{why}"
    );
}

#[test]
fn an_edit_whose_sandbox_cannot_be_created_rolls_back_at_once() {
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .refused_sandbox_images
        .insert(V2.into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with(rt, dir.path().join("static-pods"));
    let good = ready_then_edited(&mut h, V2, "");
    assert_eq!(h.uid("web"), good, "{:?}", h.rt.calls());
    let why = rolled_back(&h, "web").expect("rolled back");
    assert!(
        why.starts_with("the pod sandbox cannot be created: ")
            && why.ends_with("permission denied"),
        "{why}"
    );
    // The bad generation got one attempt, not the sandbox retry loop.
    let sandboxes =
        h.rt.calls()
            .iter()
            .filter(|c| matches!(c, Call::RunSandbox(_)))
            .count();
    assert_eq!(sandboxes, 3, "v1, the edit, v1 again: {:?}", h.rt.calls());
}

#[test]
fn an_edit_whose_init_container_fails_under_restart_policy_never_rolls_back_at_once() {
    let mut h = harness();
    let edit = "  restartPolicy: Never\n  initContainers:\n  - name: setup\n    image: busybox\n";
    let good = ready_then_edited(&mut h, V2, edit);
    assert_ne!(h.uid("web"), good);
    crash(&mut h, 7);
    assert_eq!(h.uid("web"), good, "{:?}", h.rt.calls());
    assert_eq!(
        rolled_back(&h, "web").as_deref(),
        Some("init container setup failed with exit code 7 under restartPolicy Never")
    );
}

#[test]
fn a_restart_with_the_source_broken_keeps_the_rollback() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h = harness_with(rt.clone(), store.clone());
    let good = ready_then_edited(&mut h, V2, "");
    crash(&mut h, 1);
    crash(&mut h, 1);
    assert_eq!(h.uid("web"), good);
    let starts = h.rt.starts().len();
    drop(h);
    // The file is broken at start: the seeded Ready generation is no edit, even once the
    // sources are taken as ready; the bad spec coming back later is still not retried.
    let mut h = harness_with(rt, store);
    h.file("web.yaml", "kind: [");
    h.scan_done();
    h.advance(Duration::from_secs(60));
    assert_eq!(h.uid("web"), good);
    assert!(rolled_back(&h, "web").is_some());
    h.file("web.yaml", &pod_yaml("web", V2, ""));
    h.advance(Duration::from_secs(60));
    assert_eq!(h.uid("web"), good);
    assert_eq!(h.rt.starts().len(), starts, "{:?}", h.rt.calls());
    // Edited back to the Ready spec itself: the rollback is over.
    h.file("web.yaml", &pod_yaml("web", V1, ""));
    assert_eq!(h.uid("web"), good);
    assert_eq!(rolled_back(&h, "web"), None);
}
