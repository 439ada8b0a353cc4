//! Images: ErrImageNeverPull, failed pulls (ErrImagePull, ImagePullBackOff), pull policies.

use super::*;

#[test]
fn missing_image_is_err_image_never_pull_with_backoff() {
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .missing_images
        .insert("ghost".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with(rt, dir.path().join("static-pods"));
    let yaml = pod_yaml("g", "ghost", "").replace(
        "    image: ghost\n",
        "    image: ghost\n    imagePullPolicy: Never\n",
    );
    h.file("g.yaml", &yaml);
    assert_eq!(
        h.waiting_reason("g", "main").as_deref(),
        Some("ErrImageNeverPull")
    );
    assert_eq!(h.rt.starts().len(), 1);
    h.advance(Duration::from_secs(11));
    assert_eq!(h.rt.starts().len(), 2);
    assert!(h.images.pulls().is_empty(), "Never never pulls");
}

fn events_of(h: &Harness, reason: &str) -> Vec<String> {
    h.snap()
        .events
        .iter()
        .filter(|e| e.reason == reason)
        .map(|e| e.message.clone())
        .collect()
}

#[test]
fn failed_pulls_are_err_image_pull_then_image_pull_backoff() {
    let images = FakeImages::default();
    images
        .state
        .lock()
        .expect("lock")
        .failing
        .insert("reg.local/app:1".into(), "connection refused".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with_images(
        FakeRuntime::default(),
        images.clone(),
        dir.path().join("static-pods"),
    );
    h.file("a.yaml", &pod_yaml("a", "reg.local/app:1", ""));
    assert_eq!(images.pulls().len(), 1);
    assert_eq!(
        h.waiting_reason("a", "main").as_deref(),
        Some("ErrImagePull")
    );
    assert!(h.rt.starts().is_empty(), "nothing starts without its image");
    let failed = events_of(&h, "Failed");
    assert!(
        failed
            .iter()
            .any(|m| m.contains("failed to pull image \"reg.local/app:1\": connection refused")),
        "{failed:?}"
    );
    assert!(
        failed.iter().any(|m| m == "Error: ErrImagePull"),
        "{failed:?}"
    );
    assert_eq!(
        events_of(&h, "Pulling"),
        vec!["Pulling image \"reg.local/app:1\""]
    );
    // Between attempts it shows ImagePullBackOff; attempts come 10 s, then 20 s apart.
    h.advance(Duration::from_secs(5));
    assert_eq!(
        h.waiting_reason("a", "main").as_deref(),
        Some("ImagePullBackOff")
    );
    assert_eq!(
        events_of(&h, "BackOff"),
        vec!["Back-off pulling image \"reg.local/app:1\""]
    );
    h.advance(Duration::from_secs(5));
    assert_eq!(images.pulls().len(), 2);
    assert_eq!(
        h.waiting_reason("a", "main").as_deref(),
        Some("ErrImagePull")
    );
    h.advance(Duration::from_secs(19));
    assert_eq!(images.pulls().len(), 2, "second backoff is 20 s");
    // The registry comes back: the pull succeeds and the container starts as the first
    // instance (failed pulls are not restarts).
    images.state.lock().expect("lock").failing.clear();
    h.advance(Duration::from_secs(1));
    assert_eq!(images.pulls().len(), 3);
    assert_eq!(h.rt.starts(), vec![("main".to_string(), 0)]);
    let pulled = events_of(&h, "Pulled");
    assert!(
        pulled.iter().any(
            |m| m.starts_with("Successfully pulled image \"reg.local/app:1\" in ")
                && m.ends_with("Image size: 1234 bytes.")
        ),
        "{pulled:?}"
    );
    let snap = h.snap();
    let st = snap
        .find_pod("a")
        .and_then(|v| v.pod.status.clone())
        .expect("status");
    assert_eq!(st.container_statuses.expect("statuses")[0].restart_count, 0);
}

#[test]
fn if_not_present_uses_the_local_image_and_always_pulls_every_start() {
    let images = FakeImages::default();
    images
        .state
        .lock()
        .expect("lock")
        .present
        .insert("busybox:1.36".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with_images(
        FakeRuntime::default(),
        images.clone(),
        dir.path().join("static-pods"),
    );
    h.file("p.yaml", &pod_yaml("p", "busybox:1.36", ""));
    assert!(images.pulls().is_empty());
    assert_eq!(
        events_of(&h, "Pulled"),
        vec!["Container image \"busybox:1.36\" already present on machine"]
    );
    // No tag: Always, so every start pulls, restarts included.
    h.file("l.yaml", &pod_yaml("l", "busybox", ""));
    assert_eq!(images.pulls(), vec!["busybox"]);
    assert_eq!(h.rt.starts().len(), 2);
    // Crash the "l" pod's container (the one started last): its restart pulls again.
    let ids = h.rt.running_ids();
    let l_id = ids
        .iter()
        .find(|i| {
            !h.rt.state.lock().expect("lock").containers[*i]
                .meta
                .image
                .contains("1.36")
        })
        .expect("l container")
        .clone();
    let ev = h.rt.exit(&l_id, 1);
    h.send(ev);
    assert_eq!(h.rt.starts().len(), 3);
    assert_eq!(images.pulls(), vec!["busybox", "busybox"]);
}
