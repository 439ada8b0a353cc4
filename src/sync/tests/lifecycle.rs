//! Pods come, change and go: sandbox and starts, metadata and spec edits, removal with
//! grace, crash-loop backoff, restart policies, init containers, sources (last-known-good,
//! URL errors, duplicate names).

use super::*;

#[test]
fn add_starts_sandbox_then_container() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let calls = h.rt.calls();
    assert!(matches!(calls[0], Call::RunSandbox(_)), "{calls:?}");
    assert_eq!(h.rt.starts(), vec![("main".to_string(), 0)]);
    let snap = h.snap();
    let v = snap.find_pod("web").expect("pod");
    assert_eq!(v.pod.metadata.name.as_deref(), Some("web-node1"));
    let st = v.pod.status.as_ref().expect("status");
    assert_eq!(st.phase.as_deref(), Some("Running"));
    let ready = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("ready");
    assert_eq!(ready.status, "True");
}

/// The sandbox job starts the pod's first container itself (the runtime may prepare it
/// while the sandbox is made); the loop starts the others once the sandbox is reported.
#[test]
fn the_sandbox_job_starts_the_first_container_and_the_loop_the_others() {
    let mut h = harness();
    let c =
        |name: &str| format!("  - name: {name}\n    image: busybox\n    imagePullPolicy: Never\n");
    let yaml = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  initContainers:\n{}  containers:\n{}{}",
        c("setup"),
        c("main"),
        c("side")
    );
    h.file("web.yaml", &yaml);
    assert_eq!(h.rt.state.lock().expect("lock").with_sandbox, vec!["setup"]);
    assert_eq!(h.rt.starts(), vec![("setup".to_string(), 0)]);
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    let mut starts = h.rt.starts();
    starts.sort();
    let want = [("main", 0), ("setup", 0), ("side", 0)].map(|(c, n)| (c.to_string(), n));
    assert_eq!(starts, want, "{:?}", h.rt.calls());
    assert_eq!(h.rt.state.lock().expect("lock").with_sandbox, vec!["setup"]);
    let snap = h.snap();
    let st = snap.find_pod("web").and_then(|v| v.pod.status.clone());
    assert_eq!(st.and_then(|s| s.phase).as_deref(), Some("Running"));
}

/// A sandbox job whose sandbox fails starts nothing: the container waits for the next
/// sandbox, which starts it as instance 0, with no container event in between. Its image
/// (`imagePullPolicy: Always`, busybox having no tag) is pulled after the sandbox, as by a
/// start job: not for a sandbox that failed.
#[test]
fn a_failed_sandbox_starts_no_container_and_the_next_one_does() {
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .refused_sandbox_images
        .insert("busybox".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with(rt, dir.path().join("static-pods"));
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    assert!(h.rt.starts().is_empty(), "{:?}", h.rt.calls());
    assert!(h.images.pulls().is_empty());
    assert_eq!(
        h.waiting_reason("web", "main").as_deref(),
        Some("ContainerCreating")
    );
    let reasons =
        |h: &Harness| -> Vec<String> { h.snap().events.iter().map(|e| e.reason.clone()).collect() };
    assert_eq!(reasons(&h), vec!["FailedCreatePodSandBox"]);
    h.rt.state
        .lock()
        .expect("lock")
        .refused_sandbox_images
        .clear();
    h.advance(Duration::from_secs(11));
    assert_eq!(h.rt.starts(), vec![("main".to_string(), 0)]);
    assert_eq!(h.images.pulls(), vec!["busybox"]);
    let sandboxes = h.rt.calls();
    let sandboxes = sandboxes
        .iter()
        .filter(|c| matches!(c, Call::RunSandbox(_)));
    assert_eq!(sandboxes.count(), 2);
    assert!(!reasons(&h).iter().any(|r| r == "Failed" || r == "BackOff"));
}

#[test]
fn metadata_only_edit_restarts_nothing() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let before = h.rt.calls().len();
    h.file(
        "web.yaml",
        &pod_yaml("web", "busybox", "").replace("app: web", "app: web, tier: front"),
    );
    assert_eq!(h.rt.calls().len(), before, "{:?}", h.rt.calls());
    let snap = h.snap();
    let labels = snap
        .find_pod("web")
        .expect("pod")
        .pod
        .metadata
        .labels
        .clone()
        .expect("labels");
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
}

#[test]
fn spec_edit_replaces_the_pod_after_the_old_one_stopped() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let old_id = h.rt.running_ids()[0].clone();
    h.file("web.yaml", &pod_yaml("web", "busybox:v2", ""));
    // The old container got its stop signal; the new one waits for it.
    assert!(h.rt.calls().contains(&Call::Signal {
        id: old_id.clone(),
        signal: libc::SIGTERM
    }));
    assert_eq!(h.rt.starts().len(), 1);
    let ev = h.rt.exit(&old_id, 143);
    h.send(ev);
    let starts = h.rt.starts();
    assert_eq!(starts.len(), 2, "{:?}", h.rt.calls());
    assert!(h.rt.calls().contains(&Call::Remove(old_id)));
    let snap = h.snap();
    assert!(snap.events.iter().any(|e| e.reason == "Replaced"));
}

/// A manifest edited back to an earlier content gets that content's uid again, maybe while
/// that generation is still stopping. The removal of a uid kills and deletes every container
/// and the sandbox of that uid, so the new generation must wait for it: otherwise its new
/// container is killed by the removal (and its exit taken for the old one's), or its sandbox
/// and cgroups deleted under it.
#[test]
fn edit_back_to_a_uid_still_being_removed_waits_for_that_removal() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let old_id = h.rt.running_ids()[0].clone();
    h.file("web.yaml", &pod_yaml("web", "busybox:v2", ""));
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    assert_eq!(h.rt.starts().len(), 1, "{:?}", h.rt.calls());
    let ev = h.rt.exit(&old_id, 143);
    h.send(ev);
    let calls = h.rt.calls();
    assert_eq!(h.rt.starts().len(), 2, "{calls:?}");
    let removed = calls
        .iter()
        .position(|c| *c == Call::Remove(old_id.clone()))
        .expect("old container removed");
    let started = calls
        .iter()
        .rposition(|c| matches!(c, Call::Start { .. }))
        .expect("new start");
    assert!(removed < started, "{calls:?}");
    let new_id = h.rt.running_ids()[0].clone();
    assert!(!calls
        .iter()
        .any(|c| matches!(c, Call::Signal { id, .. } if *id == new_id)));
    // The new generation keeps its record in the store.
    assert_eq!(std::fs::read_dir(&h.store_dir).expect("store").count(), 1);
}

#[test]
fn removal_stops_with_grace_then_kills() {
    let mut h = harness();
    h.scan_done();
    h.file(
        "web.yaml",
        &pod_yaml("web", "busybox", "  terminationGracePeriodSeconds: 5\n"),
    );
    let id = h.rt.running_ids()[0].clone();
    h.remove_file("web.yaml");
    assert!(h.rt.calls().contains(&Call::Signal {
        id: id.clone(),
        signal: libc::SIGTERM
    }));
    h.advance(Duration::from_secs(4));
    assert!(!h.rt.calls().contains(&Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL
    }));
    h.advance(Duration::from_secs(2));
    assert!(h.rt.calls().contains(&Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL
    }));
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    let calls = h.rt.calls();
    assert!(
        calls.iter().any(|c| matches!(c, Call::RemoveSandbox(_))),
        "{calls:?}"
    );
    assert!(h.snap().pods.is_empty());
    assert_eq!(std::fs::read_dir(&h.store_dir).expect("store").count(), 0);
}

#[test]
fn a_failed_removal_stops_what_still_runs_then_retries() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let id = h.rt.running_ids()[0].clone();
    let uid = h.uid("web");
    // A live container of the pod the loop does not know (left by a crash), and a sandbox
    // removal that fails once: the worker lists the straggler with the failure.
    let straggler = {
        let mut st = h.rt.state.lock().expect("lock");
        let mut c = st.containers[&id].clone();
        c.meta.id = "straggler".into();
        c.meta.created_at = "99999999".into();
        st.containers.insert("straggler".into(), c);
        st.failing_sandbox_removals = 1;
        "straggler".to_string()
    };
    h.remove_file("web.yaml");
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    let removals = |h: &Harness| h.rt.sandbox_removals(&uid);
    assert_eq!(removals(&h), 1, "{:?}", h.rt.calls());
    assert!(h.snap().find_pod("web").is_some(), "still terminating");
    // The straggler was killed by the job; its exit lets the removal run again.
    assert!(h.rt.calls().contains(&Call::Signal {
        id: straggler.clone(),
        signal: libc::SIGKILL
    }));
    let ev = h.rt.exit(&straggler, 137);
    h.send(ev);
    assert_eq!(removals(&h), 2, "{:?}", h.rt.calls());
    assert!(h.snap().pods.is_empty());
}

#[test]
fn a_removal_that_keeps_failing_backs_off() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let id = h.rt.running_ids()[0].clone();
    let uid = h.uid("web");
    // The sandbox cannot be removed three times (a busy mount, say), with nothing running.
    h.rt.state.lock().expect("lock").failing_sandbox_removals = 3;
    h.remove_file("web.yaml");
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    let removals = |h: &Harness| h.rt.sandbox_removals(&uid);
    // Each failure waits longer before the next attempt: 100 ms, 200 ms, 400 ms; no attempt
    // runs early, however often the loop syncs meanwhile.
    assert_eq!(removals(&h), 1);
    for (wait_ms, attempts) in [(100, 2), (200, 3), (400, 4)] {
        h.advance(Duration::from_millis(wait_ms - 1));
        h.advance(Duration::ZERO);
        assert_eq!(removals(&h), attempts - 1, "{wait_ms} ms: too early");
        h.advance(Duration::from_millis(1));
        assert_eq!(removals(&h), attempts, "{wait_ms} ms: due");
    }
    assert!(h.snap().pods.is_empty(), "removed at the fourth attempt");
}

#[test]
fn crash_loop_backoff_steps_and_reset() {
    let mut h = harness();
    h.file("crash.yaml", &pod_yaml("crash", "busybox", ""));
    // Crash 1: immediate restart.
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 1);
    h.send(ev);
    assert_eq!(h.rt.starts().len(), 2);
    let mut expected = 2;
    for delay in [10u64, 20, 40, 80, 160, 300, 300] {
        h.advance(Duration::from_secs(1));
        let id = h.rt.running_ids()[0].clone();
        let ev = h.rt.exit(&id, 1);
        h.send(ev);
        assert_eq!(
            h.waiting_reason("crash", "main").as_deref(),
            Some("CrashLoopBackOff")
        );
        h.advance(Duration::from_secs(delay - 1));
        assert_eq!(
            h.rt.starts().len(),
            expected,
            "still backing off before {delay}s"
        );
        h.advance(Duration::from_secs(1));
        expected += 1;
        assert_eq!(h.rt.starts().len(), expected, "restarted after {delay}s");
    }
    let restart_counts: Vec<u32> = h.rt.starts().iter().map(|(_, r)| *r).collect();
    assert_eq!(restart_counts, (0..expected as u32).collect::<Vec<_>>());
    // Ten minutes of clean running reset the backoff: the next crash restarts at once.
    h.advance(Duration::from_secs(601));
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 1);
    h.send(ev);
    assert_eq!(h.rt.starts().len(), expected + 1);
    let snap = h.snap();
    let st = snap
        .find_pod("crash")
        .expect("pod")
        .pod
        .status
        .clone()
        .expect("status");
    let cs = &st.container_statuses.expect("cs")[0];
    assert_eq!(cs.restart_count, expected as i32);
    assert!(cs
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .is_some());
}

#[test]
fn restart_policies() {
    for (policy, code, restarts) in [
        ("Always", 0, true),
        ("OnFailure", 0, false),
        ("OnFailure", 2, true),
        ("Never", 2, false),
    ] {
        let mut h = harness();
        h.file(
            "p.yaml",
            &pod_yaml("p", "busybox", &format!("  restartPolicy: {policy}\n")),
        );
        let id = h.rt.running_ids()[0].clone();
        let ev = h.rt.exit(&id, code);
        h.send(ev);
        assert_eq!(h.rt.starts().len() == 2, restarts, "{policy} exit {code}");
        if !restarts {
            let snap = h.snap();
            let phase = snap
                .find_pod("p")
                .expect("pod")
                .pod
                .status
                .clone()
                .expect("st")
                .phase;
            let want = if code == 0 { "Succeeded" } else { "Failed" };
            assert_eq!(phase.as_deref(), Some(want), "{policy} exit {code}");
        }
    }
}

#[test]
fn init_containers_run_in_order_before_apps() {
    let mut h = harness();
    h.file(
        "i.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: i}\nspec:\n  initContainers:\n  - {name: one, image: busybox}\n  - {name: two, image: busybox}\n  containers:\n  - {name: app, image: busybox}\n",
    );
    assert_eq!(h.rt.starts(), vec![("one".to_string(), 0)]);
    assert_eq!(
        h.waiting_reason("i", "app").as_deref(),
        Some("PodInitializing")
    );
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 1);
    h.send(ev);
    // A failed init container is retried (restartPolicy Always).
    assert_eq!(h.rt.starts().len(), 2);
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    let names: Vec<String> = h.rt.starts().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["one", "one", "two", "app"]);
}

#[test]
fn last_known_good_for_every_bad_input() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let calls = h.rt.calls().len();
    for bad in [
        String::new(),
        "apiVersion: v1\nkind: Pod\nmetadata: [".to_string(),
        pod_yaml("web", "", ""),
        pod_yaml("Web_Bad", "busybox", ""),
    ] {
        h.file("web.yaml", &bad);
        assert_eq!(h.rt.calls().len(), calls, "nothing stopped for {bad:?}");
        let snap = h.snap();
        let v = snap.find_pod("web").expect("still there");
        assert!(v.source_error.is_some(), "error shown for {bad:?}");
        assert!(snap.events.iter().any(|e| e.reason == "SourceError"));
    }
    h.send(SyncEvent::Source(SourceEvent::FileError {
        path: PathBuf::from("/m/web.yaml"),
        message: "file is over 10 MB".into(),
    }));
    assert_eq!(h.rt.calls().len(), calls);
    h.remove_file("web.yaml");
    assert!(
        h.rt.calls().len() > calls,
        "removing the file stops the pod"
    );
}

#[test]
fn url_errors_keep_pods() {
    let mut h = harness();
    let url = "http://127.0.0.1:9/pods".to_string();
    h.send(SyncEvent::Source(SourceEvent::UrlChanged {
        url: url.clone(),
        data: pod_yaml("u", "busybox", "").into_bytes(),
    }));
    let calls = h.rt.calls().len();
    h.send(SyncEvent::Source(SourceEvent::UrlError {
        url,
        message: "timed out".into(),
    }));
    assert_eq!(h.rt.calls().len(), calls);
    assert!(h.snap().find_pod("u").expect("pod").source_error.is_some());
}

#[test]
fn duplicate_names_refuse_the_second_file() {
    let mut h = harness();
    h.file("a.yaml", &pod_yaml("web", "busybox", ""));
    h.file("b.yaml", &pod_yaml("web", "nginx", ""));
    assert_eq!(h.rt.starts().len(), 1);
    let snap = h.snap();
    let e = snap
        .events
        .iter()
        .find(|e| e.reason == "DuplicatePod")
        .expect("event");
    assert!(
        e.message.contains("/m/a.yaml") && e.message.contains("/m/b.yaml"),
        "{}",
        e.message
    );
}

#[test]
fn a_defaulted_volume_is_a_warning_event_naming_the_dropped_key() {
    let mut h = harness();
    let extra = "  volumes:\n  - name: data\n    empty-dir: {}\n";
    h.file("web.yaml", &pod_yaml("web", "busybox", extra));
    let snap = h.snap();
    let warnings: Vec<_> = snap
        .events
        .iter()
        .filter(|e| e.reason == "VolumeDefaulted")
        .collect();
    assert_eq!(warnings.len(), 1, "{:?}", snap.events);
    let e = warnings[0];
    assert_eq!(e.type_, crate::status::EventType::Warning);
    assert!(e.pod.starts_with("default/web"), "{}", e.pod);
    assert!(
        e.message.contains("/m/web.yaml")
            && e.message.contains("spec.volumes[0]")
            && e.message.contains("\"empty-dir\"")
            && e.message.contains("defaulted to emptyDir"),
        "{}",
        e.message
    );
    // The same content read again (a rescan) is the same generation: no second event.
    h.file("web.yaml", &pod_yaml("web", "busybox", extra));
    let n = h
        .snap()
        .events
        .iter()
        .filter(|e| e.reason == "VolumeDefaulted")
        .map(|e| e.count)
        .sum::<u32>();
    assert_eq!(n, 1);
}

/// Native sidecars through the loop: started before the app, restarted on exit under
/// restartPolicy Never, stopped after the app containers (later-declared sidecar first).
#[test]
fn sidecars_start_first_restart_and_stop_after_the_app_in_reverse_order() {
    let mut h = harness();
    h.scan_done();
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: s}\nspec:\n  restartPolicy: Never\n  initContainers:\n  - {name: a, image: busybox, restartPolicy: Always}\n  - {name: b, image: busybox, restartPolicy: Always}\n  containers:\n  - {name: main, image: busybox}\n";
    h.file("s.yaml", yaml);
    let order: Vec<String> = h.rt.starts().into_iter().map(|(c, _)| c).collect();
    assert_eq!(order, ["a", "b", "main"]);
    let id_of = |h: &Harness, name: &str| {
        let st = h.rt.state.lock().expect("lock");
        st.containers
            .values()
            .filter(|c| c.meta.container_name == name)
            .filter(|c| matches!(c.state, ContainerState::Running { .. }))
            .map(|c| c.meta.id.clone())
            .next()
            .expect("running")
    };
    // A sidecar that exits restarts even under restartPolicy Never.
    let a = id_of(&h, "a");
    let ev = h.rt.exit(&a, 1);
    h.send(ev);
    assert!(
        h.rt.starts().contains(&("a".to_string(), 1)),
        "{:?}",
        h.rt.starts()
    );
    // Removal: the app gets its stop signal; the sidecars wait for their turn.
    let (a, b, main) = (id_of(&h, "a"), id_of(&h, "b"), id_of(&h, "main"));
    h.remove_file("s.yaml");
    let signaled = |h: &Harness, id: &str| {
        h.rt.calls().contains(&Call::Signal {
            id: id.to_string(),
            signal: libc::SIGTERM,
        })
    };
    assert!(signaled(&h, &main) && !signaled(&h, &a) && !signaled(&h, &b));
    let ev = h.rt.exit(&main, 0);
    h.send(ev);
    assert!(signaled(&h, &b) && !signaled(&h, &a), "{:?}", h.rt.calls());
    let ev = h.rt.exit(&b, 0);
    h.send(ev);
    assert!(signaled(&h, &a));
    let ev = h.rt.exit(&a, 0);
    h.send(ev);
    assert!(h.snap().find_pod("s").is_none());
}

/// Adds manifest `file` and feeds the job results back in order up to the first container's
/// start result, which it returns instead.
fn first_start_held_back(h: &mut Harness, file: &str, yaml: &str) -> JobResult {
    h.sync.handle(SyncEvent::Source(SourceEvent::FileChanged {
        path: PathBuf::from(format!("/m/{file}")),
        data: yaml.as_bytes().to_vec(),
    }));
    loop {
        let r = h
            .done
            .lock()
            .expect("lock")
            .pop_front()
            .expect("a job result");
        if matches!(r, JobResult::ContainerStarted { .. }) {
            return r;
        }
        h.sync.handle(SyncEvent::Work(Box::new(r)));
    }
}

#[test]
fn an_exit_reported_before_its_start_result_is_applied_when_the_result_arrives() {
    // A container that ends within milliseconds: the runtime's exit watcher can report it
    // before the worker thread that started it sends the start result. The exit must not be
    // lost (the pod would wait for a running init container forever).
    let mut h = harness();
    h.scan_done();
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: hello}\nspec:\n  restartPolicy: Never\n  initContainers:\n  - {name: init, image: busybox}\n  containers:\n  - {name: app, image: busybox}\n";
    // The init container's start result, held back.
    let started = first_start_held_back(&mut h, "hello.yaml", yaml);
    let ids = h.rt.running_ids();
    assert_eq!(ids.len(), 1, "only the init container runs");
    let ev = h.rt.exit(&ids[0], 0);
    h.send(ev);
    assert_eq!(
        h.rt.starts().len(),
        1,
        "nothing more before the start result"
    );
    h.send(SyncEvent::Work(Box::new(started)));
    // The init container is done: the app container started.
    let starts: Vec<String> = h.rt.starts().into_iter().map(|(n, _)| n).collect();
    assert_eq!(starts, ["init", "app"], "{starts:?}");
    assert_eq!(h.rt.running_ids().len(), 1);
}

#[test]
fn an_exit_reported_before_the_start_result_of_a_pod_going_away_lets_the_removal_finish() {
    let mut h = harness();
    h.scan_done();
    let started = first_start_held_back(&mut h, "web.yaml", &pod_yaml("web", "busybox", ""));
    // Removed while its start is in flight; the container exits before the result arrives.
    h.sync.handle(SyncEvent::Source(SourceEvent::FileRemoved {
        path: PathBuf::from("/m/web.yaml"),
    }));
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    h.send(SyncEvent::Work(Box::new(started)));
    h.advance(Duration::ZERO);
    assert!(
        h.snap().pods.is_empty(),
        "removed without waiting for a kill"
    );
}
