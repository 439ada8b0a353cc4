//! Root integration tests of pod lifecycle features through `podvisor run` with real
//! containers: native sidecars (start order gated by the startup probe, restart on exit,
//! stopped after the app containers) and `activeDeadlineSeconds`.

mod common;

use std::fs;
use std::time::Duration;

use common::daemon::Daemon;
use common::TestEnv;
use common::{init_pid, wait_until};
use k8s_openapi::api::core::v1::ContainerStatus;
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(60);

fn init_status(v: &PodView, name: &str) -> Option<ContainerStatus> {
    v.pod
        .status
        .as_ref()?
        .init_container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)
        .cloned()
}

fn app_status(v: &PodView, name: &str) -> Option<ContainerStatus> {
    v.pod
        .status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)
        .cloned()
}

fn running(c: &ContainerStatus) -> bool {
    c.state.as_ref().is_some_and(|s| s.running.is_some())
}

/// Host uptime in seconds from a marker file a container wrote (`cat /proc/uptime`).
fn uptime_in(path: &std::path::Path) -> f64 {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{}: {text:?}", path.display()))
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn sidecar_gates_the_app_restarts_on_exit_and_stops_after_it() {
    let env = TestEnv::new("sidecars");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let marks = env.dir.path().join("marks");
    let d = Daemon::start(&env, &dir);
    // The sidecar becomes "up" 2 s after it starts; its startup probe sees it. On SIGTERM it
    // records whether the app container had already stopped.
    let manifest = format!(
        r#"apiVersion: v1
kind: Pod
metadata:
  name: side
spec:
  terminationGracePeriodSeconds: 10
  volumes:
  - name: marks
    hostPath: {{path: {marks}, type: DirectoryOrCreate}}
  initContainers:
  - name: proxy
    image: busybox:1.35
    restartPolicy: Always
    command: [sh, -c, 'trap "if [ -f /marks/main-stopped ]; then echo after; else echo before; fi > /marks/proxy-stopped; exit 0" TERM; sleep 2; cat /proc/uptime > /marks/proxy-up; touch /tmp/up; while true; do sleep 0.2; done']
    startupProbe:
      exec: {{command: [test, -f, /tmp/up]}}
      periodSeconds: 1
      failureThreshold: 30
    volumeMounts: [{{name: marks, mountPath: /marks}}]
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'cat /proc/uptime > /marks/main-started; trap "touch /marks/main-stopped; exit 0" TERM; while true; do sleep 0.2; done']
    volumeMounts: [{{name: marks, mountPath: /marks}}]
"#,
        marks = marks.display()
    );
    fs::write(dir.join("side.yaml"), manifest).expect("write");

    // The app container starts only once the sidecar's startup probe passed.
    wait_until("main running", T, || {
        d.pod("side")
            .and_then(|v| app_status(&v, "main"))
            .is_some_and(|c| running(&c))
    });
    wait_until("main wrote its mark", T, || {
        marks.join("main-started").exists()
    });
    assert!(
        uptime_in(&marks.join("main-started")) >= uptime_in(&marks.join("proxy-up")),
        "the app container started before the sidecar's startup probe passed"
    );
    let v = d.pod("side").expect("pod");
    let proxy = init_status(&v, "proxy").expect("sidecar status");
    assert!(running(&proxy) && proxy.started == Some(true), "{proxy:?}");
    // imageID as containerd reports it: the repo digest of the image.
    let main = app_status(&v, "main").expect("main");
    assert!(
        main.image_id
            .starts_with("docker.io/library/busybox@sha256:")
            && main.image_id.len() == 97,
        "{}",
        main.image_id
    );
    assert_eq!(proxy.image_id, main.image_id);
    let (ok, out, _) = d.cli(&env, &["describe", "side"]);
    assert!(ok && out.contains(&main.image_id), "{out}");
    let phase = v.pod.status.as_ref().and_then(|s| s.phase.clone());
    assert_eq!(phase.as_deref(), Some("Running"));
    let initialized = v
        .pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Initialized"))
        .map(|c| c.status.clone());
    assert_eq!(initialized.as_deref(), Some("True"));
    wait_until("pods shows 2/2 ready", T, || {
        let (ok, out, _) = d.cli(&env, &["pods"]);
        ok && out
            .lines()
            .any(|l| l.contains("side-") && l.contains("2/2"))
    });

    // A killed sidecar is restarted (restartPolicy Always on the sidecar), the app runs on.
    let main_id = app_status(&v, "main").and_then(|c| c.container_id);
    let pid = init_pid(&env, proxy.container_id.as_deref().expect("id"));
    // SAFETY: kill(2) on a pid read from the monitor's state file of a running container.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    wait_until("sidecar restarted", T, || {
        d.pod("side")
            .and_then(|v| init_status(&v, "proxy"))
            .is_some_and(|c| c.restart_count == 1 && running(&c))
    });
    let v = d.pod("side").expect("pod");
    assert_eq!(app_status(&v, "main").and_then(|c| c.container_id), main_id);

    // Deleting the pod stops the app container first, then the sidecar.
    wait_until("sidecar started again", T, || {
        d.pod("side")
            .and_then(|v| init_status(&v, "proxy"))
            .is_some_and(|c| c.started == Some(true))
    });
    fs::remove_file(dir.join("side.yaml")).expect("rm");
    wait_until("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    assert!(marks.join("main-stopped").exists(), "main got no SIGTERM");
    assert_eq!(
        fs::read_to_string(marks.join("proxy-stopped"))
            .expect("the sidecar got no SIGTERM")
            .trim(),
        "after",
        "the sidecar was stopped before the app container"
    );
    d.stop();
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn active_deadline_fails_and_kills_the_pod() {
    let env = TestEnv::new("deadline");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start(&env, &dir);
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\nspec:\n  activeDeadlineSeconds: 2\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.2; done']\n";
    fs::write(dir.join("late.yaml"), manifest).expect("write");
    wait_until("main running", T, || {
        d.pod("late")
            .and_then(|v| app_status(&v, "main"))
            .is_some_and(|c| running(&c))
    });
    wait_until("pod failed with DeadlineExceeded", T, || {
        d.pod("late").is_some_and(|v| {
            let st = v.pod.status.clone().unwrap_or_default();
            st.phase.as_deref() == Some("Failed")
                && st.reason.as_deref() == Some("DeadlineExceeded")
                && st.message.as_deref()
                    == Some("Pod was active on the node longer than the specified deadline")
        })
    });
    wait_until("container stopped", T, || {
        d.pod("late")
            .and_then(|v| app_status(&v, "main"))
            .is_some_and(|c| c.state.as_ref().is_some_and(|s| s.terminated.is_some()))
    });
    assert!(
        d.events()
            .iter()
            .any(|e| e.reason == "DeadlineExceeded" && e.pod.contains("late")),
        "no DeadlineExceeded event"
    );
    // A static pod that failed is not restarted.
    std::thread::sleep(Duration::from_secs(3));
    let v = d.pod("late").expect("pod");
    let main = app_status(&v, "main").expect("main");
    assert!(!running(&main) && main.restart_count == 0, "{main:?}");
    let (ok, out, _) = d.cli(&env, &["describe", "late"]);
    assert!(ok && out.contains("DeadlineExceeded"), "{out}");
    fs::remove_file(dir.join("late.yaml")).expect("rm");
    wait_until("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    d.stop();
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn downward_api_files_follow_a_label_edit_without_a_restart() {
    let env = TestEnv::new("downward-update");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start(&env, &dir);
    let manifest = |tier: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: info\n  labels: {{tier: {tier}}}\nspec:\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: podinfo\n    downwardAPI:\n      items:\n      - {{path: labels, fieldRef: {{fieldPath: metadata.labels}}}}\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do cat /podinfo/labels; echo; sleep 0.3; done']\n    volumeMounts: [{{name: podinfo, mountPath: /podinfo}}]\n"
        )
    };
    let file = dir.join("info.yaml");
    fs::write(&file, manifest("front")).expect("write");
    let main_id = || {
        d.pod("info")
            .and_then(|v| app_status(&v, "main"))
            .filter(running)
            .and_then(|c| c.container_id)
    };
    wait_until("main running", T, || main_id().is_some());
    let first = main_id();
    // The container prints the file every 0.3 s: its log shows what it sees.
    let seen = |want: &str| {
        let (ok, out, _) = d.cli(&env, &["logs", "info"]);
        ok && out.lines().any(|l| l.trim() == want)
    };
    wait_until("front seen", T, || seen("tier=\"front\""));
    fs::write(&file, manifest("back")).expect("write");
    wait_until("the container sees the new label", T, || {
        seen("tier=\"back\"")
    });
    assert_eq!(main_id(), first, "a label edit restarted the container");
    fs::remove_file(&file).expect("rm");
    wait_until("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    d.stop();
    env.assert_clean();
}
