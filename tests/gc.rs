//! Root integration test of container and log GC in `podvisor run`: a crash-looping container
//! keeps one dead instance (and its log) besides the current one, rotated log files are
//! compressed and still read back, a deleted pod's log directory goes.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::daemon::{Daemon, KeepLogOnPanic};
use common::wait_until;
use common::TestEnv;

const T: Duration = Duration::from_secs(60);

fn restart_count(d: &Daemon, pod: &str, container: &str) -> i32 {
    d.pod(pod)
        .and_then(|v| v.pod.status)
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().find(|c| c.name == container))
        .map(|c| c.restart_count)
        .unwrap_or(0)
}

/// The container log directory of `container` in the only pod log directory named `pod`.
fn container_log_dir(logs: &Path, pod: &str, container: &str) -> Option<PathBuf> {
    fs::read_dir(logs)
        .ok()?
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("default_{pod}-testnode_"))
        })
        .map(|e| e.path().join(container))
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|e| {
            e.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn record_count(env: &TestEnv) -> usize {
    fs::read_dir(env.root.join("containers"))
        .map(|e| e.count())
        .unwrap_or(0)
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn crash_loop_keeps_one_dead_instance_rotated_logs_compress_and_gone_pods_lose_their_logs() {
    let env = TestEnv::new("gc");
    let _ = env.images();
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let config = env.dir.path().join("config.yaml");
    fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         syncFrequency: 1s\ncontainerLogMaxSize: 4Ki\ncontainerLogMaxFiles: 3\n",
    )
    .expect("config");
    let d = Daemon::start_with(&env, &dir, &["--config", config.to_str().expect("utf8")]);

    // A crash loop: every instance prints its line and fails.
    fs::write(
        dir.join("crash.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: crash\nspec:\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'echo instance $(date +%s%N); exit 1']\n",
    )
    .expect("write");
    // A chatty pod: its log rotates every few lines.
    fs::write(
        dir.join("chatty.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: chatty\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; i=0; while true; do i=$((i+1)); echo \"line $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"; sleep 0.01; done']\n",
    )
    .expect("write");

    wait_until("three crash-loop restarts", T, || {
        restart_count(&d, "crash", "main") >= 3
    });
    // After the next GC pass: the current (or latest) instance and one dead one.
    let crash_logs = container_log_dir(&env.logs, "crash", "main").expect("crash log dir");
    wait_until("dead instances collected", T, || {
        names(&crash_logs)
            .iter()
            .filter(|n| n.ends_with(".log"))
            .count()
            <= 2
    });
    let log = d.log();
    assert!(
        log.contains("container GC: removed dead container main of pod default/crash-testnode"),
        "{log}"
    );
    assert!(
        log.contains("only the 1 most recent dead instance(s) of a container are kept"),
        "{log}"
    );
    let (ok, out, err) = d.cli(&env, &["logs", "crash", "--previous"]);
    assert!(
        ok && out.contains("instance"),
        "logs --previous: {out}{err}"
    );

    // Rotation: compressed files appear, at most containerLogMaxFiles files in all.
    let chatty_logs = container_log_dir(&env.logs, "chatty", "main").expect("chatty log dir");
    wait_until("a compressed rotated file", T, || {
        names(&chatty_logs).iter().any(|n| n.ends_with(".gz"))
    });
    for _ in 0..3 {
        let files = names(&chatty_logs);
        assert!(
            files.len() <= 3 + 1,
            "containerLogMaxFiles 3 (one compression may be in flight): {files:?}"
        );
        std::thread::sleep(Duration::from_millis(700));
    }
    let (ok, out, err) = d.cli(&env, &["logs", "chatty"]);
    assert!(ok && out.contains("line "), "logs: {out}{err}");

    // Deleted: the pod log directories go after the removal.
    fs::remove_file(dir.join("crash.yaml")).expect("rm");
    fs::remove_file(dir.join("chatty.yaml")).expect("rm");
    wait_until("pods gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    wait_until("records gone", T, || record_count(&env) == 0);
    wait_until("pod log directories gone", T, || {
        names(&env.logs).is_empty()
    });
    assert!(
        d.log().contains("container GC: removed pod log directory"),
        "{}",
        d.log()
    );
    d.stop();
    env.assert_clean();
}
