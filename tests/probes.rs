//! Root integration tests of probes with real containers under `podvisor run`: a busybox
//! httpd in its own (loopback-only) network namespace, probed from the daemon; readiness
//! flips the Ready condition, a failing liveness probe gets the container killed and
//! restarted, with the kubelet's events.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::wait_until;
use common::TestEnv;
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(60);

fn condition(v: &PodView, t: &str) -> Option<String> {
    v.pod
        .status
        .as_ref()?
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == t)
        .map(|c| c.status.clone())
}

fn restart_count(v: &PodView) -> i32 {
    v.pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(0, |c| c.restart_count)
}

/// httpd serves /www; /ready exists from 1 s to 4 s after start; /healthz until 6 s.
const MANIFEST: &str = r#"apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.35
    ports:
    - {name: http, containerPort: 8080}
    command:
    - sh
    - -c
    - |
      mkdir -p /tmp/www; echo ok > /tmp/www/healthz
      httpd -p 127.0.0.1:8080 -h /tmp/www
      sleep 1; echo ok > /tmp/www/ready
      sleep 3; rm /tmp/www/ready
      sleep 2; rm /tmp/www/healthz
      while true; do sleep 1; done
    readinessProbe:
      httpGet: {path: /ready, port: http}
      periodSeconds: 1
    livenessProbe:
      httpGet: {path: /healthz, port: 8080}
      periodSeconds: 1
      failureThreshold: 2
      terminationGracePeriodSeconds: 1
"#;

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn readiness_flips_ready_and_liveness_failure_restarts_the_container() {
    let env = TestEnv::new("probes");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start(&env, &dir);
    fs::write(dir.join("web.yaml"), MANIFEST).expect("write");

    wait_until("pod listed", T, || d.pod("web").is_some());
    let v = d.pod("web").expect("pod");
    assert_eq!(condition(&v, "Ready").as_deref(), Some("False"));
    wait_until("Ready True", T, || {
        d.pod("web")
            .is_some_and(|v| condition(&v, "Ready").as_deref() == Some("True"))
    });
    let v = d.pod("web").expect("pod");
    assert_eq!(condition(&v, "ContainersReady").as_deref(), Some("True"));
    wait_until("Ready False again", T, || {
        d.pod("web")
            .is_some_and(|v| condition(&v, "Ready").as_deref() == Some("False"))
    });
    wait_until("restarted after liveness failure", T, || {
        d.pod("web").is_some_and(|v| restart_count(&v) >= 1)
    });
    let events = d.events();
    let has = |reason: &str, needle: &str| {
        events
            .iter()
            .any(|e| e.reason == reason && e.message.contains(needle))
    };
    assert!(
        has(
            "Unhealthy",
            "Readiness probe failed: HTTP probe failed with statuscode: 404"
        ),
        "{events:#?}"
    );
    assert!(
        has(
            "Unhealthy",
            "Liveness probe failed: HTTP probe failed with statuscode: 404"
        ),
        "{events:#?}"
    );
    assert!(
        has(
            "Killing",
            "Container main failed liveness probe, will be restarted"
        ),
        "{events:#?}"
    );
    fs::remove_file(dir.join("web.yaml")).expect("rm");
    wait_until("pod gone", T, || d.pod("web").is_none());
    wait_until("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

/// Container state name (running/waiting/terminated) and `started` of the first container.
fn state(v: &PodView) -> (String, Option<bool>) {
    let Some(cs) = v
        .pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
    else {
        return (String::new(), None);
    };
    let st = cs.state.clone().unwrap_or_default();
    let name = if st.running.is_some() {
        "running"
    } else if st.waiting.is_some() {
        "waiting"
    } else {
        "terminated"
    };
    (name.to_string(), cs.started)
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn post_start_sleep_holds_the_container_until_it_returns_then_pre_stop_runs_on_removal() {
    let env = TestEnv::new("hooks");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start(&env, &dir);
    fs::write(
        dir.join("hooked.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: hooked\nspec:\n  terminationGracePeriodSeconds: 120\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.1; done']\n    lifecycle:\n      postStart: {sleep: {seconds: 2}}\n      preStop: {sleep: {seconds: 1}}\n",
    )
    .expect("write");
    wait_until("container created", T, || {
        d.events()
            .iter()
            .any(|e| e.reason == "Created" && e.pod.ends_with("hooked-testnode"))
    });
    let created = Instant::now();
    let v = d.pod("hooked").expect("pod");
    assert_eq!(state(&v), ("waiting".to_string(), Some(false)));
    assert!(!d.events().iter().any(|e| e.reason == "Started"));
    wait_until("running after postStart", T, || {
        d.pod("hooked")
            .is_some_and(|v| state(&v) == ("running".to_string(), Some(true)))
    });
    assert!(
        created.elapsed() >= Duration::from_millis(1500),
        "{:?}",
        created.elapsed()
    );
    assert!(d.events().iter().any(|e| e.reason == "Started"));
    // Removal: the 1 s preStop runs before the stop signal, and the container ends on that
    // TERM: order of events, the pod is gone after the preStop and before its 120 s grace
    // period would have ended in a SIGKILL.
    let t0 = Instant::now();
    fs::remove_file(dir.join("hooked.yaml")).expect("rm");
    wait_until("pod gone", T, || d.pod("hooked").is_none());
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(120),
        "{took:?}"
    );
    wait_until("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}
