//! The daemon restarting or the node rebooting: re-adoption, duplicate live containers,
//! persisted pods, kubelet restart counts, dead sandboxes, stale records.

use super::*;

#[test]
fn restart_reconciles_with_what_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    // First daemon: two pods run.
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("keep.yaml", &pod_yaml("keep", "busybox", ""));
    h1.file("gone.yaml", &pod_yaml("gone", "busybox", ""));
    let keep_uid = h1.uid("keep");
    let running_before = rt.running_ids();
    assert_eq!(running_before.len(), 2);
    // The daemon dies; containers and the store stay. A second daemon starts: keep.yaml is
    // still there, gone.yaml was deleted meanwhile.
    drop(h1);
    let mut h2 = harness_with(rt.clone(), store);
    let starts_before = rt.starts().len();
    h2.file("keep.yaml", &pod_yaml("keep", "busybox", ""));
    h2.scan_done();
    assert_eq!(
        rt.starts().len(),
        starts_before,
        "nothing started again: {:?}",
        rt.calls()
    );
    let (keep_id, gone_id) = {
        let st = rt.state.lock().expect("lock");
        let keep = running_before
            .iter()
            .find(|id| st.containers[*id].meta.pod_uid == keep_uid)
            .cloned()
            .expect("keep container");
        let gone = running_before
            .iter()
            .find(|id| **id != keep)
            .cloned()
            .expect("gone container");
        (keep, gone)
    };
    assert!(rt.calls().contains(&Call::Signal {
        id: gone_id,
        signal: libc::SIGTERM
    }));
    assert!(!rt
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Signal { id, .. } if *id == keep_id)));
    // The re-adopted container's exit is handled like any other: restarted.
    let ev = rt.exit(&keep_id, 1);
    h2.send(ev);
    assert_eq!(rt.starts().len(), starts_before + 1);
}

/// What a crash can leave next to a pod's running container: a second live container of the
/// same slot, and an exited one with a higher restart count.
fn leftovers_of_a_crash(rt: &FakeRuntime, running: &str) -> (String, String) {
    let mut st = rt.state.lock().expect("lock");
    let orig = st.containers[running].clone();
    let mut dup = orig.clone();
    dup.meta.id = "dup".into();
    dup.meta.created_at = "99999998".into();
    let mut dead = orig;
    dead.meta.id = "dead".into();
    dead.meta.restart_count = 5;
    dead.meta.created_at = "99999999".into();
    dead.state = ContainerState::Exited(ExitRecord {
        exit_code: 137,
        signal: None,
        oom_killed: false,
        started_at: String::new(),
        finished_at: String::new(),
        reason: "ContainerStatusUnknown".into(),
        message: None,
    });
    st.containers.insert("dup".into(), dup);
    st.containers.insert("dead".into(), dead);
    ("dup".into(), "dead".into())
}

#[test]
fn restart_with_two_live_containers_of_one_slot_keeps_one_and_stops_the_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let first = rt.running_ids();
    assert_eq!(first.len(), 1);
    drop(h1);
    let (dup, dead) = leftovers_of_a_crash(&rt, &first[0]);
    let mut h2 = harness_with(rt.clone(), store);
    let starts = rt.starts().len();
    h2.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h2.scan_done();
    assert_eq!(rt.starts().len(), starts, "nothing new: {:?}", rt.calls());
    let killed: Vec<String> = rt
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Signal { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(
        killed,
        vec![first[0].clone()],
        "only the older duplicate is stopped"
    );
    let snap = h2.snap();
    let v = snap.find_pod("web").expect("pod");
    let cs = &v
        .pod
        .status
        .as_ref()
        .expect("status")
        .container_statuses
        .as_ref()
        .expect("cs")[0];
    assert_eq!(
        cs.container_id.as_deref(),
        Some(&*format!("podvisor://{dup}"))
    );
    assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    // The stopped duplicate's exit changes nothing; the kept one still restarts when it ends.
    let ev = rt.exit(&first[0], 137);
    h2.send(ev);
    assert_eq!(rt.starts().len(), starts);
    let ev = rt.exit(&dup, 1);
    h2.send(ev);
    h2.advance(Duration::from_secs(300));
    assert_eq!(rt.starts().len(), starts + 1);
    assert!(rt
        .state
        .lock()
        .expect("lock")
        .containers
        .contains_key(&dead));
}

#[test]
fn broken_source_at_restart_keeps_the_persisted_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    drop(h1);
    let mut h2 = harness_with(rt.clone(), store);
    let calls = rt.calls().len();
    h2.file("web.yaml", "not: [valid");
    h2.scan_done();
    assert_eq!(rt.calls().len(), calls, "{:?}", rt.calls());
    assert!(h2.snap().find_pod("web").is_some());
}

/// Restart count and last state of a container in the snapshot.
fn restarts_and_last(h: &Harness, pod: &str, container: &str) -> (i32, Option<(i32, String)>) {
    let snap = h.snap();
    let st = snap
        .find_pod(pod)
        .and_then(|v| v.pod.status.clone())
        .expect("status");
    let cs = st
        .container_statuses
        .iter()
        .flatten()
        .chain(st.init_container_statuses.iter().flatten())
        .find(|c| c.name == container)
        .expect("container status")
        .clone();
    let last = cs
        .last_state
        .and_then(|s| s.terminated)
        .map(|t| (t.exit_code, t.reason.unwrap_or_default()));
    (cs.restart_count, last)
}

#[test]
fn after_a_reboot_every_pod_starts_again_with_kubelet_restart_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let init_pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: i}\nspec:\n  initContainers:\n  - {name: setup, image: busybox}\n  containers:\n  - {name: app, image: busybox}\n";
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h1.file("i.yaml", init_pod);
    // The init container completes, the app runs; web crashed once and runs again.
    let setup = h1.rt.running_ids().into_iter().find(|id| {
        h1.rt.state.lock().expect("lock").containers[id]
            .meta
            .container_name
            == "setup"
    });
    let ev = h1.rt.exit(&setup.expect("setup running"), 0);
    h1.send(ev);
    let web = h1
        .rt
        .running_ids()
        .into_iter()
        .find(|id| {
            h1.rt.state.lock().expect("lock").containers[id]
                .meta
                .container_name
                == "main"
        })
        .expect("web running");
    let ev = h1.rt.exit(&web, 1);
    h1.send(ev);
    assert_eq!(restarts_and_last(&h1, "web", "main").0, 1);
    drop(h1);

    // Power cut: the sandboxes and processes are gone; records, store and pod data stay.
    rt.reboot();
    let starts_before = rt.starts().len();
    let mut h2 = harness_with(rt.clone(), store);
    // Pods start from the persisted records before the sources answer.
    let after: Vec<(String, u32)> = rt.starts()[starts_before..].to_vec();
    assert!(after.contains(&("main".to_string(), 2)), "{after:?}");
    assert!(after.contains(&("setup".to_string(), 1)), "{after:?}");
    let calls = rt.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| matches!(c, Call::RunSandbox(_)))
            .count(),
        4,
        "each pod got a new sandbox: {calls:?}"
    );
    // The kubelet's view: restartCount = previous + 1, lastState = the lost instance.
    assert_eq!(
        restarts_and_last(&h2, "web", "main"),
        (2, Some((255, "Unknown".to_string())))
    );
    // Init containers run again in the new sandbox; the app waits for them.
    assert!(!after.iter().any(|(n, _)| n == "app"), "{after:?}");
    let setup = rt
        .running_ids()
        .into_iter()
        .find(|id| {
            rt.state.lock().expect("lock").containers[id]
                .meta
                .container_name
                == "setup"
        })
        .expect("setup runs again");
    let ev = rt.exit(&setup, 0);
    h2.send(ev);
    assert!(
        rt.starts().contains(&("app".to_string(), 1)),
        "{:?}",
        rt.starts()
    );
    assert_eq!(
        restarts_and_last(&h2, "i", "app"),
        (1, Some((255, "Unknown".to_string())))
    );
    assert!(h2
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "SandboxChanged"));
    // The sources report the same manifests: nothing else happens.
    let n = rt.starts().len();
    h2.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h2.file("i.yaml", init_pod);
    h2.scan_done();
    assert_eq!(rt.starts().len(), n, "{:?}", rt.calls());
}

#[test]
fn restart_count_follows_log_files_when_records_are_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .log_counts
        .insert("main".into(), 4);
    let mut h = harness_with(rt.clone(), dir.path().join("static-pods"));
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    assert_eq!(rt.starts(), vec![("main".to_string(), 5)]);
    assert_eq!(restarts_and_last(&h, "web", "main").0, 5);
}

#[test]
fn data_of_pods_no_source_defines_is_removed_after_a_reboot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .pod_data
        .insert("gone-uid".into());
    let mut h = harness_with(rt.clone(), dir.path().join("static-pods"));
    assert!(!rt.calls().contains(&Call::RemoveSandbox("gone-uid".into())));
    h.scan_done();
    assert!(
        rt.calls().contains(&Call::RemoveSandbox("gone-uid".into())),
        "{:?}",
        rt.calls()
    );
}

#[test]
fn a_dead_sandbox_is_created_again_once_the_pod_stopped() {
    let mut h = harness();
    h.file(
        "two.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: two}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox}\n",
    );
    let uid = h.uid("two");
    let ids = h.rt.running_ids();
    assert_eq!(ids.len(), 2);
    let name_of = |rt: &FakeRuntime, id: &str| {
        rt.state.lock().expect("lock").containers[id]
            .meta
            .container_name
            .clone()
    };
    let (a, b) = if name_of(&h.rt, &ids[0]) == "a" {
        (ids[0].clone(), ids[1].clone())
    } else {
        (ids[1].clone(), ids[0].clone())
    };
    // The sandbox's namespaces die; b exits and its restart finds the sandbox dead.
    h.rt.state
        .lock()
        .expect("lock")
        .dead_sandboxes
        .insert(uid.clone());
    let sandboxes_before =
        h.rt.calls()
            .iter()
            .filter(|c| matches!(c, Call::RunSandbox(_)))
            .count();
    let ev = h.rt.exit(&b, 1);
    h.send(ev);
    // Never joined: a is stopped first, no sandbox is made while it runs.
    assert!(h.rt.calls().contains(&Call::Signal {
        id: a.clone(),
        signal: libc::SIGTERM
    }));
    let sandboxes = |h: &Harness| {
        h.rt.calls()
            .iter()
            .filter(|c| matches!(c, Call::RunSandbox(_)))
            .count()
    };
    assert_eq!(sandboxes(&h), sandboxes_before);
    assert!(h.snap().events.iter().any(|e| e.reason == "SandboxChanged"));
    let ev = h.rt.exit(&a, 143);
    h.send(ev);
    assert_eq!(sandboxes(&h), sandboxes_before + 1, "{:?}", h.rt.calls());
    h.advance(Duration::from_secs(30));
    let running: Vec<String> =
        h.rt.running_ids()
            .iter()
            .map(|id| name_of(&h.rt, id))
            .collect();
    assert_eq!(
        running.len(),
        2,
        "both run again in the new sandbox: {running:?}"
    );
}

#[test]
fn a_replaced_generation_left_in_the_store_is_dropped_once_the_sources_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let old = h1.uid("web");
    // The spec is edited; a power cut comes before the old generation's record was removed.
    let old_record = fs::read(store.join(format!("{old}.json"))).expect("old record");
    h1.file("web.yaml", &pod_yaml("web", "busybox:1.36", ""));
    h1.advance(Duration::from_secs(60));
    drop(h1);
    fs::write(store.join(format!("{old}.json")), old_record).expect("restore old record");
    rt.reboot();
    {
        let mut st = rt.state.lock().expect("lock");
        st.containers.retain(|_, c| c.meta.pod_uid != old);
        st.pod_data.remove(&old);
    }
    let mut h2 = harness_with(rt.clone(), store.clone());
    assert!(store.join(format!("{old}.json")).exists());
    h2.file("web.yaml", &pod_yaml("web", "busybox:1.36", ""));
    h2.scan_done();
    assert!(
        !store.join(format!("{old}.json")).exists(),
        "stale record left"
    );
    assert_eq!(fs::read_dir(&store).expect("store").count(), 1);
    assert!(h2.snap().find_pod("web").is_some());
}
