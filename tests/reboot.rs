//! Root integration tests of reboots and power cuts, simulated on this host: what a reboot
//! does to a node (containers, monitors and mounts gone, cgroups removed, a new boot ID, the
//! runtime dir cleared or left behind) is done to the test's private environment, then a new
//! runtime or daemon starts. Every pod must come back with the kubelet's restart counts and
//! last states, pod data must survive where the kubelet keeps it, and nothing of the earlier
//! boot may be joined or left behind.

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::daemon::{wait_for, Daemon, KeepLogOnPanic};
use common::{pod, wait_exit, TestEnv};
use podvisor::runtime::{ContainerKind, ContainerRequest, ContainerState, Runtime, RuntimeError};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(30);

/// A pod whose container records each start in a disk emptyDir and a memory emptyDir, prints
/// what it found, then sleeps.
const VOLUMES_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: vols
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'echo boot >> /data/starts; echo \"starts=$(wc -l < /data/starts) mem=$(cat /mem/marker 2>/dev/null || echo none)\"; echo here > /mem/marker; trap \"exit 0\" TERM; while true; do sleep 0.2; done']
    volumeMounts:
    - {name: data, mountPath: /data}
    - {name: mem, mountPath: /mem}
  volumes:
  - name: data
    emptyDir: {}
  - name: mem
    emptyDir: {medium: Memory}
";

fn first_line_with(log: &Path, needle: &str) -> Option<String> {
    if !log.exists() {
        return None;
    }
    common::log_lines(log)
        .into_iter()
        .find(|l| l.contains(needle))
}

#[test]
fn runtime_reports_containers_of_an_earlier_boot_lost_and_keeps_pod_data() {
    let env = TestEnv::new("reboot-runtime");
    let p = pod(VOLUMES_POD);
    let uid = p.metadata.uid.clone().expect("uid");
    let before = {
        let (rt, _rx) = env.runtime();
        rt.run_pod_sandbox(&p).expect("sandbox");
        let info = common::start_container(&rt, &p, 0, 0);
        wait_for("first output", T, || {
            first_line_with(&info.meta.log_path, "starts=").is_some()
        });
        info
    };
    assert_eq!(
        first_line_with(&before.meta.log_path, "starts=").as_deref(),
        Some("starts=1 mem=none")
    );
    let old_run = env.run.join("containers").join(&before.meta.id);
    assert!(old_run.join("state.json").exists());
    // A reboot, with a runtime dir on disk that keeps the earlier boot's files.
    env.simulate_reboot(2, false);
    assert!(
        old_run.exists(),
        "precondition: the runtime dir is not a tmpfs"
    );

    let (rt, rx) = env.runtime();
    assert_ne!(rt.boot_id(), before.meta.boot_id);
    // The earlier boot's runtime state is gone, its sandbox is not listed, its pod data stays.
    assert!(!old_run.exists(), "runtime state of the earlier boot left");
    assert!(rt.list_pod_sandboxes().expect("sandboxes").is_empty());
    assert_eq!(rt.list_pod_data().expect("data"), vec![uid.clone()]);
    let list = rt.list_containers().expect("list");
    let lost = list
        .iter()
        .find(|c| c.meta.id == before.meta.id)
        .expect("listed");
    match &lost.state {
        ContainerState::Exited(e) => {
            assert_eq!((e.exit_code, e.reason.as_str()), (255, "Unknown"), "{e:?}");
            assert_eq!(e.started_at, before.meta.created_at);
        }
        other => panic!("lost container listed as {other:?}"),
    }
    // Only its records remain: identity, exit record, the cleaned mark (and the monitor's
    // own log); the writable layer is gone.
    let record = env.root.join("containers").join(&before.meta.id);
    for gone in ["upper", "work"] {
        assert!(!record.join(gone).exists(), "{gone} left");
    }
    for kept in ["meta.json", "exit.json", "cleaned"] {
        assert!(record.join(kept).exists(), "{kept} missing");
    }
    assert!(
        before.meta.log_path.exists(),
        "the log is kept for logs --previous"
    );

    // The pod starts again: new sandbox, disk emptyDir kept, memory emptyDir empty.
    rt.run_pod_sandbox(&p).expect("sandbox again");
    let again = common::start_container(&rt, &p, 0, 1);
    wait_for("second output", T, || {
        first_line_with(&again.meta.log_path, "starts=").is_some()
    });
    assert_eq!(
        first_line_with(&again.meta.log_path, "starts=").as_deref(),
        Some("starts=2 mem=none")
    );
    rt.signal_container(&again.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &again.meta.id, T);
    for c in rt.list_containers().expect("list") {
        rt.remove_container(&c.meta.id).expect("remove");
    }
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    assert!(!env.root.join("pods").join(&uid).exists(), "pod data left");
    env.assert_clean();
}

#[test]
fn torn_identity_after_a_power_cut_is_an_interrupted_creation() {
    let env = TestEnv::new("reboot-torn");
    let (rt, _rx) = env.runtime();
    // What ext4 can leave of a file written without fsync: the name, no content.
    let record = env.root.join("containers").join("0d1e2f3a-main-0-abcdef12");
    fs::create_dir_all(record.join("upper")).expect("mkdir");
    fs::write(record.join("meta.json"), b"").expect("empty identity");
    let record2 = env.root.join("containers").join("0d1e2f3a-main-1-abcdef13");
    fs::create_dir_all(&record2).expect("mkdir");
    fs::write(record2.join("meta.json"), b"{\"id\": \"0d1e").expect("torn identity");
    assert!(rt.list_containers().expect("list").is_empty());
    assert!(!record.exists() && !record2.exists(), "torn records left");
    env.assert_clean();
}

#[test]
fn sandbox_with_a_dead_namespace_is_never_joined_and_is_created_again() {
    let env = TestEnv::new("reboot-deadns");
    let p = pod(VOLUMES_POD);
    let uid = p.metadata.uid.clone().expect("uid");
    let (rt, rx) = env.runtime();
    rt.run_pod_sandbox(&p).expect("sandbox");
    let net = env.run.join("pods").join(&uid).join("ns").join("net");
    // What a reboot leaves of a pinned namespace: the empty file it was mounted on.
    nix::mount::umount2(&net, nix::mount::MntFlags::MNT_DETACH).expect("unmount ns/net");
    assert!(net.exists() && !podvisor::runtime::rundir::is_nsfs(&net));
    let err = rt
        .start_container(&ContainerRequest {
            pod: &p,
            container: &p.spec.as_ref().expect("spec").containers[0],
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .expect_err("never joined");
    assert!(matches!(err, RuntimeError::SandboxNotReady { .. }), "{err}");
    assert!(
        rt.list_containers().expect("list").is_empty(),
        "nothing left of the attempt"
    );
    // Not listed as a sandbox; created again on request.
    assert!(rt.list_pod_sandboxes().expect("list").is_empty());
    rt.run_pod_sandbox(&p).expect("sandbox again");
    assert!(podvisor::runtime::rundir::is_nsfs(&net));
    let info = common::start_container(&rt, &p, 0, 0);
    rt.signal_container(&info.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &info.meta.id, T);
    rt.remove_container(&info.meta.id).expect("remove");
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    env.assert_clean();
}

// --- the daemon --------------------------------------------------------------------------

/// Status of container `name` of a pod view (app or init).
fn status_of(v: &PodView, name: &str) -> Option<k8s_openapi::api::core::v1::ContainerStatus> {
    let st = v.pod.status.as_ref()?;
    st.container_statuses
        .iter()
        .flatten()
        .chain(st.init_container_statuses.iter().flatten())
        .find(|c| c.name == name)
        .cloned()
}

/// Every app container of the pod runs and is ready.
fn pod_running(d: &Daemon, name: &str) -> bool {
    d.pod(name).is_some_and(|v| {
        let st = v.pod.status.as_ref();
        st.and_then(|s| s.phase.as_deref()) == Some("Running")
            && st
                .and_then(|s| s.container_statuses.as_ref())
                .is_some_and(|cs| {
                    !cs.is_empty()
                        && cs.iter().all(|c| {
                            c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some())
                        })
                })
    })
}

/// (restartCount, lastState exit code and reason) of a container.
fn restarts(d: &Daemon, pod: &str, container: &str) -> (i32, Option<(i32, String)>) {
    let cs = d
        .pod(pod)
        .and_then(|v| status_of(&v, container))
        .expect("container status");
    let last = cs
        .last_state
        .and_then(|s| s.terminated)
        .map(|t| (t.exit_code, t.reason.unwrap_or_default()));
    (cs.restart_count, last)
}

const INIT_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: withinit
spec:
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: setup
    image: busybox:1.35
    command: [sh, -c, 'echo setup done']
  containers:
  - name: app
    image: busybox:1.35
    command: [sh, -c, 'echo app up; trap \"exit 0\" TERM; while true; do sleep 0.2; done']
";

const HOSTNET_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: hostnet
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'echo hostnet up; trap \"exit 0\" TERM; while true; do sleep 0.2; done']
";

/// Container record directories, with the boot their identity names.
fn records(env: &TestEnv) -> Vec<(String, String, bool)> {
    let mut out = Vec::new();
    for e in fs::read_dir(env.root.join("containers"))
        .expect("records")
        .flatten()
    {
        let meta: serde_json::Value =
            serde_json::from_slice(&fs::read(e.path().join("meta.json")).expect("meta"))
                .expect("meta json");
        out.push((
            e.file_name().to_string_lossy().into_owned(),
            meta["boot_id"].as_str().unwrap_or_default().to_string(),
            e.path().join("cleaned").exists(),
        ));
    }
    out
}

#[test]
fn pods_come_back_after_a_simulated_reboot_and_power_cut() {
    let env = TestEnv::new("reboot-daemon");
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("vols.yaml"), VOLUMES_POD).expect("write");
    fs::write(dir.join("withinit.yaml"), INIT_POD).expect("write");
    fs::write(dir.join("hostnet.yaml"), HOSTNET_POD).expect("write");
    let names = ["vols", "withinit", "hostnet"];
    let d = Daemon::start(&env, &dir);
    wait_for("pods running", T, || {
        names.iter().all(|n| pod_running(&d, n))
    });
    let first_boot = records(&env);
    // An orderly shutdown (the daemon stops, containers keep running until the power goes),
    // then a boot whose runtime dir still holds the earlier boot's files.
    d.stop();
    env.simulate_reboot(2, false);

    let t0 = Instant::now();
    let d = Daemon::start(&env, &dir);
    wait_for(
        "pods running after the reboot",
        Duration::from_secs(60),
        || names.iter().all(|n| pod_running(&d, n)),
    );
    eprintln!(
        "reboot: daemon start to {} pods running: {} ms",
        names.len(),
        t0.elapsed().as_millis()
    );
    // The kubelet's view: restartCount = previous + 1, lastState = the instance lost with
    // the node (containerd: exit code 255, reason Unknown); init containers ran again.
    for (pod, container) in [("vols", "main"), ("withinit", "app"), ("hostnet", "main")] {
        assert_eq!(
            restarts(&d, pod, container),
            (1, Some((255, "Unknown".to_string()))),
            "{pod}/{container}"
        );
    }
    assert_eq!(
        restarts(&d, "withinit", "setup").0,
        1,
        "the init container ran again"
    );
    let (ok, out, err) = d.cli(&env, &["logs", "vols", "--previous"]);
    assert!(ok && out.contains("starts=1 mem=none"), "{out}{err}");
    let (ok, out, err) = d.cli(&env, &["logs", "vols"]);
    assert!(
        ok && out.contains("starts=2 mem=none"),
        "disk emptyDir kept, memory lost: {out}{err}"
    );
    // No record of the earlier boot is live: its containers are finished records, its
    // runtime state is gone.
    let boot2 = fs::read_to_string(&env.boot_id_file)
        .expect("boot")
        .trim()
        .to_string();
    for (id, boot, cleaned) in records(&env) {
        if first_boot.iter().any(|(old, _, _)| *old == id) {
            assert!(cleaned && boot != boot2, "{id}: earlier boot, not finished");
            assert!(
                !env.run.join("containers").join(&id).exists(),
                "{id}: runtime state left"
            );
        }
    }
    for e in fs::read_dir(env.run.join("containers"))
        .expect("run")
        .flatten()
    {
        let id = e.file_name().to_string_lossy().into_owned();
        assert!(
            records(&env)
                .iter()
                .any(|(r, b, _)| *r == id && *b == boot2),
            "runtime state {id} of no container of this boot"
        );
    }

    // A power cut this time (SIGKILL, no orderly stop), with a cleared runtime dir (tmpfs).
    d.kill9();
    env.simulate_reboot(3, true);
    let d = Daemon::start(&env, &dir);
    wait_for(
        "pods running after the power cut",
        Duration::from_secs(60),
        || names.iter().all(|n| pod_running(&d, n)),
    );
    assert_eq!(restarts(&d, "vols", "main").0, 2);
    let (ok, out, _) = d.cli(&env, &["logs", "vols"]);
    assert!(ok && out.contains("starts=3 mem=none"), "{out}");
    let out = env.podvisor().arg("check").output().expect("check");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("; consistent"),
        "{text}"
    );
    // Exactly one container per slot runs.
    let procs = common::processes_in_cgroup(&env.cgroup_parent);
    let sleepers = procs.iter().filter(|(_, c)| c.starts_with("sh -c")).count();
    assert_eq!(sleepers, 3, "{procs:?}");

    for n in names {
        fs::remove_file(dir.join(format!("{n}.yaml"))).expect("rm");
    }
    wait_for("all gone", T, || {
        d.pods().is_some_and(|p| p.is_empty())
            && fs::read_dir(env.root.join("containers")).is_ok_and(|e| e.count() == 0)
            && fs::read_dir(env.root.join("pods")).is_ok_and(|e| e.count() == 0)
    });
    d.stop();
    env.assert_clean();
}

#[test]
fn containers_of_the_earlier_single_directory_layout_are_listed_and_removed() {
    let env = TestEnv::new("reboot-legacy");
    let (rt, _rx) = env.runtime();
    // An exited container as podvisor wrote it before the runtime dir existed: every file in
    // <root>/containers/<id>, no boot id in its identity.
    let id = "0d1e2f3a-main-3-abcdef14";
    let dir = env.root.join("containers").join(id);
    fs::create_dir_all(&dir).expect("mkdir");
    let meta = serde_json::json!({
        "id": id, "pod_uid": "0d1e2f3a-0000", "pod_namespace": "default", "pod_name": "old",
        "container_name": "main", "kind": "app", "restart_count": 3, "image": "busybox:1.35",
        "image_digest": "sha256:00", "log_path": "/nonexistent/3.log", "stop_signal": 15,
        "created_at": "2026-01-01T00:00:00Z"
    });
    fs::write(dir.join("meta.json"), meta.to_string()).expect("meta");
    let exit = serde_json::json!({
        "exit_code": 2, "signal": null, "oom_killed": false, "started_at": "",
        "finished_at": "2026-01-01T00:00:01Z", "reason": "Error"
    });
    fs::write(dir.join("exit.json"), exit.to_string()).expect("exit");
    fs::write(dir.join("shim.json"), b"{}").expect("shim.json");
    fs::write(dir.join("cleaned"), b"").expect("cleaned");
    let list = rt.list_containers().expect("list");
    let c = list.iter().find(|c| c.meta.id == id).expect("listed");
    match &c.state {
        ContainerState::Exited(e) => assert_eq!((e.exit_code, c.meta.restart_count), (2, 3)),
        other => panic!("{other:?}"),
    }
    rt.remove_container(id).expect("remove");
    assert!(!dir.exists());
    env.assert_clean();
}
