//! The periodic resync (`syncFrequency`): a deadline of the loop, and a container GC request
//! with the loop's view of the pods each time it passes.

use super::*;

#[test]
fn resync_is_a_deadline_and_asks_container_gc_with_the_loops_view() {
    let mut h = harness();
    h.scan_done();
    let (gc, requests) = crate::gc::GcHandle::channel();
    h.sync
        .set_periodic_resync(Duration::from_secs(60), Some(gc));
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let web = h.uid("web");
    let due = h.sync.next_deadline().expect("a deadline");
    assert!(
        due <= h.clock.now() + Duration::from_secs(60),
        "the resync is a deadline"
    );
    h.advance(Duration::from_secs(30));
    assert!(requests.try_recv().is_err(), "not due yet");
    h.advance(Duration::from_secs(31));
    let req = requests
        .try_recv()
        .expect("a GC request at the resync")
        .request;
    assert!(req.sources_ready);
    assert!(req.active.contains(&web), "{req:?}");
    assert!(req.removing.is_empty(), "{req:?}");
    assert!(req.taken_at.is_some());
    // A spec edit: the new generation is active, the old one is not.
    h.file("web.yaml", &pod_yaml("web", "busybox:1.36", ""));
    let new = h.uid("web");
    assert_ne!(new, web);
    h.advance(Duration::from_secs(61));
    let req = requests.try_recv().expect("the next resync").request;
    assert!(
        req.active.contains(&new) && !req.active.contains(&web),
        "{req:?}"
    );
}

#[test]
fn a_waiting_container_shows_its_last_instance_for_logs_and_previous() {
    // Container GC keeps one dead instance: in CrashLoopBackOff, `logs` and `logs --previous`
    // must both name it (the kubelet's validateContainerLogStatus), not an older one.
    let mut h = harness();
    h.file("crash.yaml", &pod_yaml("crash", "busybox", ""));
    let mut last = String::new();
    for _ in 0..2 {
        let id = h.rt.running_ids()[0].clone();
        last = id.clone();
        let ev = h.rt.exit(&id, 1);
        h.send(ev);
        h.advance(Duration::from_secs(1));
    }
    assert_eq!(
        h.waiting_reason("crash", "main").as_deref(),
        Some("CrashLoopBackOff")
    );
    let snap = h.snap();
    let v = snap.find_pod("crash").expect("pod");
    let current = v.log_paths.get("main").expect("log path");
    assert!(current.ends_with(format!("{last}.log")), "{current:?}");
    assert_eq!(v.previous_log_paths.get("main"), Some(current));
}
