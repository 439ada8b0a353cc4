//! Root integration tests: the root dir and the log dir on a small filesystem (a tmpfs, and a
//! loop-mounted ext4) that is filled on purpose. A pod printing lines continuously keeps
//! running (same container, no restart) through the full period, its monitor drops output
//! instead of dying; a container that exits while the disk is full has its own exit recorded
//! (not ContainerStatusUnknown); a start that fails for lack of space says so naming the
//! path; once space is freed the log carries a drop marker and new lines, and the waiting pod
//! starts.

mod common;

use std::fs;
use std::time::Duration;

use common::daemon::{Daemon, KeepLogOnPanic};
use common::smallfs::{Kind, SmallFs};
use common::{wait_until, TestEnv};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(60);

fn main_container(v: &PodView) -> Option<(String, bool, i32)> {
    let cs = v
        .pod
        .status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == "main")?
        .clone();
    Some((
        cs.container_id.unwrap_or_default(),
        cs.state.as_ref().is_some_and(|s| s.running.is_some()),
        cs.restart_count,
    ))
}

fn wait_running(d: &Daemon, pod: &str) {
    wait_until(&format!("{pod} running"), T, || {
        d.pod(pod)
            .and_then(|v| main_container(&v))
            .is_some_and(|(_, running, _)| running)
    });
}

fn status(v: &PodView) -> Option<&k8s_openapi::api::core::v1::ContainerStatus> {
    v.pod.status.as_ref()?.container_statuses.as_ref()?.first()
}

fn waiting(v: &PodView) -> Option<(String, String)> {
    let w = status(v)?.state.as_ref()?.waiting.as_ref()?;
    Some((
        w.reason.clone().unwrap_or_default(),
        w.message.clone().unwrap_or_default(),
    ))
}

fn terminated_exit_code(v: &PodView) -> Option<i32> {
    Some(status(v)?.state.as_ref()?.terminated.as_ref()?.exit_code)
}

#[test]
#[ignore = "needs root: mounts a tmpfs and runs the daemon with real containers (scripts/test runs it)"]
fn full_tmpfs_keeps_pods_running_records_exits_and_drops_output_with_a_marker() {
    full_disk(Kind::Tmpfs, "diskfull-tmpfs");
}

#[test]
#[ignore = "needs root: mounts a loop ext4 and runs the daemon with real containers (scripts/test runs it)"]
fn full_ext4_keeps_pods_running_records_exits_and_drops_output_with_a_marker() {
    full_disk(Kind::LoopExt4, "diskfull-ext4");
}

fn full_disk(kind: Kind, name: &str) {
    let mut env = TestEnv::new(name);
    let small = SmallFs::mount(kind, &env.dir.path().join("small"), &env.cgroup_parent);
    // The root dir (images, records, writable layers) and the log dir on the small
    // filesystem; the runtime dir stays off it, as /run (a tmpfs of its own) is.
    env.root = small.dir.join("root");
    env.logs = small.dir.join("logs");
    fs::create_dir_all(&env.root).expect("root");
    let _ = env.images();
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("mkdir");
    let config = env.dir.path().join("config.yaml");
    fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: 1s\n",
    )
    .expect("config");
    let d = Daemon::start_with(
        &env,
        &manifests,
        &["--config", config.to_str().expect("utf8")],
    );
    fs::write(
        manifests.join("chatty.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: chatty\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; i=0; while true; do i=$((i+1)); echo \"line $i\"; sleep 0.05; done']\n",
    )
    .expect("write");
    wait_running(&d, "chatty");
    let (id, _, _) = d
        .pod("chatty")
        .and_then(|v| main_container(&v))
        .expect("id");
    // A container that ends while the disk is full (restartPolicy Never: it stays ended).
    fs::write(
        manifests.join("quitter.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: quitter\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'echo start; sleep 5; exit 3']\n",
    )
    .expect("write");
    wait_running(&d, "quitter");

    let filler = small.fill();
    // The full period: the container keeps running, unrestarted, and the daemon answers;
    // the quitter's own exit is recorded.
    let full_for = Duration::from_secs(8);
    let start = std::time::Instant::now();
    while start.elapsed() < full_for
        || d.pod("quitter")
            .and_then(|v| terminated_exit_code(&v))
            .is_none()
    {
        assert!(start.elapsed() < T, "quitter's exit was never recorded");
        let v = d
            .pod("chatty")
            .expect("the daemon answers while the disk is full");
        assert_eq!(
            main_container(&v),
            Some((id.clone(), true, 0)),
            "chatty must keep running unrestarted on a full disk"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        d.pod("quitter").and_then(|v| terminated_exit_code(&v)),
        Some(3),
        "the exit recorded on the full disk is the container's own"
    );
    // A new pod cannot start: its waiting reason says why, naming the path.
    fs::write(
        manifests.join("late.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: late\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; echo late; while true; do sleep 0.2; done']\n",
    )
    .expect("write");
    wait_until("late's start fails for lack of space", T, || {
        d.pod("late")
            .and_then(|v| waiting(&v))
            .is_some_and(|(_, m)| m.contains("No space left on device"))
    });
    let (reason, message) = d.pod("late").and_then(|v| waiting(&v)).expect("waiting");
    assert!(
        ["CreateContainerError", "CrashLoopBackOff"].contains(&reason.as_str()),
        "{reason}: {message}"
    );
    assert!(
        message.contains(&small.dir.display().to_string()),
        "the message names the path: {message}"
    );

    // Space again: the log says what was dropped, new lines follow, the late pod starts.
    fs::remove_file(&filler).expect("free space");
    wait_until("drop marker and new lines in the log", T, || {
        let (ok, out, _) = d.cli(&env, &["logs", "chatty"]);
        ok && out
            .split_once(podvisor::logs::writer::DROP_MARKER)
            .is_some_and(|(_, after)| after.contains("line "))
    });
    let (_, out, _) = d.cli(&env, &["logs", "chatty"]);
    let marker = out
        .lines()
        .find(|l| l.contains(podvisor::logs::writer::DROP_MARKER))
        .expect("marker");
    assert!(marker.contains("No space left on device"), "{marker}");
    wait_running(&d, "late");
    let v = d.pod("chatty").expect("chatty");
    assert_eq!(main_container(&v), Some((id.clone(), true, 0)));
    // The desired-pod record the full disk refused is written at a resync.
    wait_until("every desired-pod record on disk", T, || {
        fs::read_dir(env.root.join("static-pods")).map_or(0, |e| {
            e.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .count()
        }) == 3
    });
    assert!(
        !d.log().contains("ContainerStatusUnknown"),
        "no monitor died:\n{}",
        d.log()
    );

    fs::remove_file(manifests.join("chatty.yaml")).expect("rm");
    fs::remove_file(manifests.join("late.yaml")).expect("rm");
    fs::remove_file(manifests.join("quitter.yaml")).expect("rm");
    d.wait_all_gone(&env, T);
    d.stop();
    drop(small);
    env.assert_clean();
}
