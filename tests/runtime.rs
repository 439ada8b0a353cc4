//! Root integration tests of the runtime core with real containers: busybox built offline,
//! imported, run through monitors; exit codes, logs and rotation, OOM kills, stop with grace,
//! shared pod namespaces, monitor and daemon deaths, re-adoption, and no leaks.

mod common;

use std::fs;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{log_lines, pod, wait_exit, wait_until, TestEnv};
use podvisor::runtime::daemon::LinuxRuntime;
use podvisor::runtime::{ContainerKind, ContainerRequest, ContainerState, Runtime};

const T: Duration = Duration::from_secs(30);

fn simple_pod(name: &str, script: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [\"sh\", \"-c\", {script:?}]\n"
    )
}

fn start(
    rt: &impl Runtime,
    p: &k8s_openapi::api::core::v1::Pod,
    idx: usize,
) -> podvisor::runtime::ContainerInfo {
    common::start_container(rt, p, idx, 0)
}

/// Creates the pod's sandbox, starts its first container and waits (up to `timeout`) for
/// it to exit.
fn run_to_exit(
    rt: &impl Runtime,
    rx: &std::sync::mpsc::Receiver<podvisor::runtime::RuntimeEvent>,
    p: &k8s_openapi::api::core::v1::Pod,
    timeout: Duration,
) -> (
    podvisor::runtime::ContainerInfo,
    podvisor::runtime::ExitRecord,
) {
    rt.run_pod_sandbox(p).expect("sandbox");
    let info = start(rt, p, 0);
    let exit = wait_exit(rx, &info.meta.id, timeout);
    (info, exit)
}

fn finish(rt: &impl Runtime, env: &TestEnv, p: &k8s_openapi::api::core::v1::Pod) {
    let uid = p.metadata.uid.clone().expect("uid");
    for c in rt.list_containers().expect("list") {
        if c.meta.pod_uid == uid {
            rt.remove_container(&c.meta.id).expect("remove container");
        }
    }
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn container_output_and_exit_code_are_recorded() {
    let env = TestEnv::new("exit");
    let (rt, rx) = env.runtime();
    let p = pod(&simple_pod(
        "exit",
        "echo hello out; echo hello err >&2; exit 3",
    ));
    rt.run_pod_sandbox(&p).expect("sandbox");
    let info = start(&rt, &p, 0);
    assert!(matches!(info.state, ContainerState::Running { .. }));
    let exit = wait_exit(&rx, &info.meta.id, T);
    assert_eq!(exit.exit_code, 3);
    assert_eq!(exit.reason, "Error");
    let lines = log_lines(&info.meta.log_path);
    assert!(lines.contains(&"hello out".to_string()), "{lines:?}");
    assert!(lines.contains(&"hello err".to_string()), "{lines:?}");
    let raw = fs::read_to_string(&info.meta.log_path).expect("log");
    assert!(
        raw.lines().any(|l| l.contains(" stderr F hello err")),
        "{raw}"
    );
    assert!(info.meta.log_path.ends_with("main/0.log"));
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn the_roots_of_records_pod_data_and_logs_spread_their_children_on_ext4() {
    use podvisor::sys::topdir::{spread_subdirectories, Spread};
    use rustix::fs::{ioctl_getflags, IFlags};
    let env = TestEnv::new("topdir");
    let (rt, rx) = env.runtime();
    let dirs = [
        env.root.join("containers"),
        env.root.join("pods"),
        env.logs.clone(),
    ];
    // Whether this file system takes the flag at all (ext2/3/4): a fresh directory beside.
    let probe = env.dir.path().join("probe");
    fs::create_dir(&probe).expect("mkdir probe");
    let ext = spread_subdirectories(&probe).expect("spread the probe") == Spread::Set;
    for d in &dirs {
        let f = fs::File::open(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        match ioctl_getflags(&f) {
            Ok(flags) => assert_eq!(
                flags.contains(IFlags::TOPDIR),
                ext,
                "{}: {flags:?}",
                d.display()
            ),
            Err(e) => assert!(!ext, "{}: {e}", d.display()),
        }
    }
    // A container runs and is taken apart below them as anywhere else.
    let p = pod(&simple_pod("topdir", "echo spread"));
    let (info, exit) = run_to_exit(&rt, &rx, &p, T);
    assert_eq!(exit.exit_code, 0);
    assert_eq!(log_lines(&info.meta.log_path), vec!["spread".to_string()]);
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn command_args_env_and_working_dir_follow_kubernetes() {
    let env = TestEnv::new("spec");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: spec}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox:1.35\n    workingDir: /tmp\n    env:\n    - {name: GREETING, value: hi}\n    - {name: MSG, value: \"$(GREETING) there $$(GREETING)\"}\n    - name: POD\n      valueFrom: {fieldRef: {fieldPath: metadata.name}}\n    command: [sh, -c]\n    args: [\"echo $MSG; echo $(POD); pwd; hostname; id -u\"]\n",
    );
    let (info, exit) = run_to_exit(&rt, &rx, &p, T);
    assert_eq!(exit.exit_code, 0, "{:?}", log_lines(&info.meta.log_path));
    let lines = log_lines(&info.meta.log_path);
    assert_eq!(
        lines,
        vec!["hi there $(GREETING)", "spec", "/tmp", "spec", "0"]
    );
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn image_user_by_name_is_resolved_in_the_rootfs() {
    let env = TestEnv::new("user");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: user}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'id -u; id -g']\n    securityContext: {runAsUser: 65534}\n",
    );
    let (info, exit) = run_to_exit(&rt, &rx, &p, T);
    assert_eq!(exit.exit_code, 0);
    assert_eq!(log_lines(&info.meta.log_path), vec!["65534", "65534"]);
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn bad_command_is_a_start_error_and_leaves_nothing() {
    let env = TestEnv::new("badcmd");
    let (rt, _rx) = env.runtime();
    let p = pod(
        "metadata: {name: badcmd}\nspec:\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [/no/such/binary]\n",
    );
    rt.run_pod_sandbox(&p).expect("sandbox");
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let err = rt
        .start_container(&ContainerRequest {
            pod: &p,
            container: c,
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .expect_err("must fail");
    assert!(
        err.to_string().contains("main") || err.to_string().contains("no/such"),
        "{err}"
    );
    assert!(rt.list_containers().expect("list").is_empty());
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn missing_image_is_reported_naming_it() {
    let env = TestEnv::new("noimage");
    let (rt, _rx) = env.runtime();
    let p = pod("metadata: {name: noimg}\nspec:\n  containers:\n  - name: main\n    image: example.com/nothing:1\n");
    rt.run_pod_sandbox(&p).expect("sandbox");
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let err = rt
        .start_container(&ContainerRequest {
            pod: &p,
            container: c,
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .expect_err("must fail");
    assert!(err.to_string().contains("example.com/nothing:1"), "{err}");
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn stop_signal_then_sigkill_after_grace() {
    let env = TestEnv::new("stop");
    let (rt, rx) = env.runtime();
    // One container exits on SIGTERM, the other ignores it and needs SIGKILL.
    let p = pod(
        "metadata: {name: stop}\nspec:\n  containers:\n  - name: polite\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.1; done']\n  - name: stubborn\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"\" TERM; while true; do sleep 0.1; done']\n",
    );
    rt.run_pod_sandbox(&p).expect("sandbox");
    let polite = start(&rt, &p, 0);
    let stubborn = start(&rt, &p, 1);
    std::thread::sleep(Duration::from_millis(300));
    rt.signal_container(&polite.meta.id, polite.meta.stop_signal)
        .expect("term");
    rt.signal_container(&stubborn.meta.id, stubborn.meta.stop_signal)
        .expect("term");
    let e = wait_exit(&rx, &polite.meta.id, T);
    assert_eq!((e.exit_code, e.reason.as_str()), (0, "Completed"));
    // The stubborn one is still running after its SIGTERM.
    std::thread::sleep(Duration::from_millis(500));
    let running = rt
        .list_containers()
        .expect("list")
        .into_iter()
        .find(|c| c.meta.id == stubborn.meta.id)
        .expect("listed");
    assert!(matches!(running.state, ContainerState::Running { .. }));
    rt.signal_container(&stubborn.meta.id, libc::SIGKILL)
        .expect("kill");
    let e = wait_exit(&rx, &stubborn.meta.id, T);
    assert_eq!((e.exit_code, e.signal), (137, Some(9)));
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn oom_kill_is_detected_from_the_cgroup() {
    let env = TestEnv::new("oom");
    let (rt, rx) = env.runtime();
    // A child is OOM-killed while PID 1 (the shell) survives and exits 0: only the cgroup
    // counter tells.
    let p = pod(
        "metadata: {name: oom}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'dd if=/dev/zero of=/dev/null bs=64M count=1; true']\n    resources: {limits: {memory: 32Mi}}\n",
    );
    let (_, e) = run_to_exit(&rt, &rx, &p, T);
    assert!(e.oom_killed, "{e:?}");
    assert_eq!(e.reason, "OOMKilled");
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn memory_hog_as_pid1_exits_137_oomkilled() {
    let env = TestEnv::new("oom137");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: oomb}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [dd, if=/dev/zero, of=/dev/null, bs=64M, count=1]\n    resources: {limits: {memory: 32Mi}}\n",
    );
    let (_, e) = run_to_exit(&rt, &rx, &p, T);
    assert_eq!(
        (e.exit_code, e.reason.as_str()),
        (137, "OOMKilled"),
        "{e:?}"
    );
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn pod_containers_share_network_ipc_uts_and_loopback_is_up() {
    let env = TestEnv::new("share");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: share}\nspec:\n  containers:\n  - name: a\n    image: busybox:1.35\n    command: [sleep, '1000']\n  - name: b\n    image: busybox:1.35\n    command: [sleep, '1000']\n",
    );
    rt.run_pod_sandbox(&p).expect("sandbox");
    let a = start(&rt, &p, 0);
    let b = start(&rt, &p, 1);
    let pid = |s: &ContainerState| match s {
        ContainerState::Running { pid, .. } => *pid,
        other => panic!("not running: {other:?}"),
    };
    let (pa, pb) = (pid(&a.state), pid(&b.state));
    for ns in ["net", "ipc", "uts"] {
        let na = fs::read_link(format!("/proc/{pa}/ns/{ns}")).expect("ns a");
        let nb = fs::read_link(format!("/proc/{pb}/ns/{ns}")).expect("ns b");
        let host = fs::read_link(format!("/proc/self/ns/{ns}")).expect("ns self");
        assert_eq!(na, nb, "{ns} shared");
        assert_ne!(na, host, "{ns} not the host's");
    }
    // pid and mount namespaces are per container.
    for ns in ["pid", "mnt"] {
        let na = fs::read_link(format!("/proc/{pa}/ns/{ns}")).expect("ns a");
        let nb = fs::read_link(format!("/proc/{pb}/ns/{ns}")).expect("ns b");
        assert_ne!(na, nb, "{ns} private");
    }
    let flags =
        fs::read_to_string(format!("/proc/{pa}/root/proc/self/../1/net/dev")).unwrap_or_default();
    let _ = flags;
    let lo_up = std::process::Command::new("nsenter")
        .args([
            "-t",
            &pa.to_string(),
            "-n",
            "cat",
            "/sys/class/net/lo/flags",
        ])
        .output();
    if let Ok(out) = lo_up {
        if out.status.success() {
            let v = u32::from_str_radix(
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .trim_start_matches("0x"),
                16,
            )
            .expect("flags");
            assert_eq!(v & 1, 1, "lo is up");
        }
    }
    for c in [&a, &b] {
        rt.signal_container(&c.meta.id, libc::SIGKILL)
            .expect("kill");
        wait_exit(&rx, &c.meta.id, T);
    }
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn host_network_pod_uses_the_host_network_namespace() {
    let env = TestEnv::new("hostnet");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: hostnet}\nspec:\n  hostNetwork: true\n  containers:\n  - name: a\n    image: busybox:1.35\n    command: [sleep, '1000']\n",
    );
    rt.run_pod_sandbox(&p).expect("sandbox");
    let a = start(&rt, &p, 0);
    let ContainerState::Running { pid, .. } = a.state else {
        panic!("not running")
    };
    let na = fs::read_link(format!("/proc/{pid}/ns/net")).expect("ns");
    let host = fs::read_link("/proc/self/ns/net").expect("ns");
    assert_eq!(na, host);
    rt.signal_container(&a.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &a.meta.id, T);
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn logs_rotate_without_losing_or_duplicating_lines() {
    let env = TestEnv::new("rotate");
    let mut cfg = env.config();
    cfg.log_max_size = 64 * 1024;
    cfg.log_max_files = 50;
    let (rt, rx) = env.runtime_with(cfg);
    let p = pod(&simple_pod(
        "rotate",
        "i=0; while [ $i -lt 20000 ]; do echo line-$i; i=$((i+1)); done",
    ));
    let (info, e) = run_to_exit(&rt, &rx, &p, Duration::from_secs(120));
    assert_eq!(e.exit_code, 0);
    let lines = log_lines(&info.meta.log_path);
    let expected: Vec<String> = (0..20000).map(|i| format!("line-{i}")).collect();
    assert_eq!(lines.len(), expected.len());
    assert!(lines == expected, "lines out of order or altered");
    let dir = info.meta.log_path.parent().expect("dir");
    let files = fs::read_dir(dir).expect("dir").count();
    assert!(files > 1, "rotation happened ({files} files)");
    for f in fs::read_dir(dir).expect("dir").flatten() {
        assert!(f.metadata().expect("md").len() <= 64 * 1024);
    }
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn long_lines_are_split_into_partial_records() {
    let env = TestEnv::new("longline");
    let (rt, rx) = env.runtime();
    let p = pod(&simple_pod(
        "longline",
        "yes x | head -c 80000 | tr -d '\\n'; echo; echo done",
    ));
    let (info, _) = run_to_exit(&rt, &rx, &p, T);
    let raw = fs::read_to_string(&info.meta.log_path).expect("log");
    let partial = raw.lines().filter(|l| l.contains(" stdout P ")).count();
    assert!(partial >= 2, "{partial} partial records");
    let lines = log_lines(&info.meta.log_path);
    assert_eq!(lines.len(), 2);
    assert!(
        lines[0] == "x".repeat(40000),
        "first line has {} bytes",
        lines[0].len()
    );
    assert_eq!(lines[1], "done");
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn running_container_is_readopted_by_a_new_runtime_with_the_same_pid() {
    let env = TestEnv::new("readopt");
    let p = pod(&simple_pod("readopt", "echo started; sleep 1000"));
    let (id, pid) = {
        let (rt, _rx) = env.runtime();
        rt.run_pod_sandbox(&p).expect("sandbox");
        let info = start(&rt, &p, 0);
        let ContainerState::Running { pid, .. } = info.state else {
            panic!("not running")
        };
        // Let the container print its line before it is killed further down.
        wait_until("the container's first log line", T, || {
            !log_lines_if_any(&info.meta.log_path).is_empty()
        });
        (info.meta.id, pid)
        // The first runtime (the "daemon") goes away here; the monitor stays.
    };
    let (rt, rx) = env.runtime();
    let list = rt.list_containers().expect("list");
    let c = list.iter().find(|c| c.meta.id == id).expect("found again");
    assert_eq!(
        c.state,
        ContainerState::Running {
            pid,
            started_at: match &c.state {
                ContainerState::Running { started_at, .. } => started_at.clone(),
                _ => String::new(),
            }
        }
    );
    // Its exit reaches the new runtime as an event.
    rt.signal_container(&id, libc::SIGKILL).expect("kill");
    let e = wait_exit(&rx, &id, T);
    assert_eq!(e.exit_code, 137);
    assert_eq!(log_lines(&c.meta.log_path), vec!["started"]);
    finish(&rt, &env, &p);
}

/// Waits for the first line of a container log under the environment's log dir; its path.
fn wait_for_log_line(env: &TestEnv, timeout: Duration) -> std::path::PathBuf {
    let mut found = None;
    wait_until("a container's first log line", timeout, || {
        let logs = fs::read_dir(&env.logs).into_iter().flatten().flatten();
        found = logs
            .flat_map(|pod| fs::read_dir(pod.path()).into_iter().flatten().flatten())
            .map(|c| c.path().join("0.log"))
            .find(|l| fs::read(l).is_ok_and(|b| b.contains(&b'\n')));
        found.is_some()
    });
    found.expect("found")
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn sigkilled_play_daemon_leaves_containers_running_and_readoptable() {
    let env = TestEnv::new("killplay");
    let manifest = env.dir.path().join("pod.yaml");
    fs::write(
        &manifest,
        "metadata: {name: killplay}\nspec:\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'while true; do echo tick; sleep 0.2; done']\n",
    )
    .expect("manifest");
    let _ = env.images();
    let mut child = env
        .podvisor()
        .arg("play")
        .arg("--cni-conf-dir=")
        .arg(&manifest)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("play");
    // While play runs, it holds the runtime dir: a second runtime is refused, naming it.
    let log = wait_for_log_line(&env, T);
    let e = LinuxRuntime::new(env.config(), env.images(), mpsc::channel().0)
        .err()
        .expect("a second runtime on the same runtime dir is refused")
        .to_string();
    assert!(e.contains("is in use by another podvisor"), "{e}");
    assert!(e.contains(&env.run.display().to_string()), "{e}");
    // So is one on the same root dir with a runtime dir of its own: it would take play's
    // pods for orphans of its own.
    let mut other = env.config();
    other.run_dir = env.dir.path().join("other-run");
    let e = LinuxRuntime::new(other, env.images(), mpsc::channel().0)
        .err()
        .expect("a second runtime on the same root dir is refused")
        .to_string();
    assert!(e.contains("root dir"), "{e}");
    assert!(e.contains(&env.root.display().to_string()), "{e}");
    assert!(
        !env.dir.path().join("other-run").join("pods").exists(),
        "nothing made in it"
    );
    child.kill().expect("SIGKILL play");
    child.wait().expect("reap play");
    // Then SIGKILL the "daemon": the container is found running by a new runtime.
    let (rt, rx) = env.runtime();
    let list = rt.list_containers().expect("list");
    assert_eq!(list.len(), 1, "{list:?}");
    let info = list.into_iter().next().expect("one container");
    assert!(
        matches!(info.state, ContainerState::Running { .. }),
        "{:?}",
        info.state
    );
    assert_eq!(info.meta.log_path, log);
    let before = log_lines(&info.meta.log_path).len();
    std::thread::sleep(Duration::from_millis(800));
    let after = log_lines(&info.meta.log_path).len();
    assert!(
        after > before,
        "container kept running and logging ({before} -> {after})"
    );
    let again = rt.list_containers().expect("list");
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].state, info.state, "same process");
    rt.signal_container(&info.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &info.meta.id, T);
    let uid = info.meta.pod_uid.clone();
    rt.remove_container(&info.meta.id).expect("remove");
    rt.remove_pod_sandbox(&uid).expect("sandbox");
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn sigkilled_monitor_is_cleaned_up_and_reported_unknown() {
    let env = TestEnv::new("killshim");
    let (rt, rx) = env.runtime();
    let p = pod(&simple_pod("killshim", "sleep 1000"));
    rt.run_pod_sandbox(&p).expect("sandbox");
    let info = start(&rt, &p, 0);
    let dir = env.run.join("containers").join(&info.meta.id);
    let state: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("state.json")).expect("state")).expect("json");
    let shim_pid = state["shim"]["pid"].as_i64().expect("shim pid") as i32;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(shim_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill monitor");
    let e = wait_exit(&rx, &info.meta.id, T);
    assert_eq!(e.reason, "ContainerStatusUnknown", "{e:?}");
    assert_eq!(e.exit_code, 137);
    // The container's process is gone too.
    let ContainerState::Running { pid, .. } = info.state else {
        panic!("not running")
    };
    std::thread::sleep(Duration::from_millis(200));
    // The orphaned init was re-parented to this (subreaper) test process: reap it.
    let _ = nix::sys::wait::waitpid(
        nix::unistd::Pid::from_raw(pid),
        Some(nix::sys::wait::WaitPidFlag::WNOHANG),
    );
    assert!(
        fs::read_to_string(format!("/proc/{pid}/stat")).is_err()
            || !fs::read_link(format!("/proc/{pid}/root"))
                .map(|r| r.starts_with(env.dir.path()))
                .unwrap_or(false),
        "container init survived"
    );
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn play_runs_a_pod_prints_prefixed_output_and_cleans_up() {
    let env = TestEnv::new("play");
    let _ = env.images();
    let manifest = env.dir.path().join("pod.yaml");
    fs::write(
        &manifest,
        "metadata: {name: hello}\nspec:\n  restartPolicy: Never\n  initContainers:\n  - name: init\n    image: busybox:1.35\n    command: [echo, from-init]\n  containers:\n  - name: app\n    image: busybox:1.35\n    command: [sh, -c, 'echo hello from app']\n",
    )
    .expect("manifest");
    let out = env
        .podvisor()
        .arg("play")
        .arg("--cni-conf-dir=")
        .arg(&manifest)
        .output()
        .expect("play");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("init | from-init"), "{stdout}");
    assert!(stdout.contains("app | hello from app"), "{stdout}");
    let init_pos = stdout.find("init | from-init").expect("init");
    let app_pos = stdout.find("app | hello").expect("app");
    assert!(init_pos < app_pos, "init ran first");
    assert!(!env.logs.join("default_hello").exists());
    assert_eq!(
        fs::read_dir(env.root.join("containers"))
            .expect("dir")
            .count(),
        0
    );
    assert_eq!(fs::read_dir(env.run.join("pods")).expect("dir").count(), 0);
    assert_eq!(fs::read_dir(env.root.join("pods")).expect("dir").count(), 0);
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn play_stops_gracefully_on_sigterm() {
    let env = TestEnv::new("playterm");
    let _ = env.images();
    let manifest = env.dir.path().join("pod.yaml");
    fs::write(
        &manifest,
        "metadata: {name: term}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: app\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"echo bye; exit 0\" TERM; echo up; while true; do sleep 0.1; done']\n",
    )
    .expect("manifest");
    let child = env
        .podvisor()
        .arg("play")
        .arg("--cni-conf-dir=")
        .arg(&manifest)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("play");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Wait for the container's first line in the log tree, then SIGTERM play.
    wait_until("the container's first log line", T, || {
        walk_logs(&env.logs).iter().any(|p| {
            fs::read_to_string(p)
                .map(|s| s.contains(" up"))
                .unwrap_or(false)
        })
    });
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("term");
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("app | bye"), "{stdout}\n{stderr}");
    assert!(stderr.contains("exited with code 0"), "{stderr}");
    env.assert_clean();
}

fn walk_logs(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk_logs(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The log's lines, or none while the file does not exist yet.
fn log_lines_if_any(path: &std::path::Path) -> Vec<String> {
    if path.exists() {
        log_lines(path)
    } else {
        Vec::new()
    }
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn runtime_default_seccomp_applies_with_privilege_escalation_allowed() {
    // allowPrivilegeEscalation defaults to true: no no_new_privs, so libcontainer must load
    // the filter while the init still has CAP_SYS_ADMIN.
    let env = TestEnv::new("seccomp");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: seccomp}\nspec:\n  restartPolicy: Never\n  securityContext: {seccompProfile: {type: RuntimeDefault}}\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'grep -E \"^(Seccomp|NoNewPrivs):\" /proc/self/status']\n",
    );
    let (info, exit) = run_to_exit(&rt, &rx, &p, T);
    let lines = log_lines(&info.meta.log_path);
    assert_eq!(exit.exit_code, 0, "{exit:?} {lines:?}");
    let text = lines.join("\n");
    assert!(text.contains("Seccomp:\t2"), "{text}");
    assert!(text.contains("NoNewPrivs:\t0"), "{text}");
    finish(&rt, &env, &p);
}

/// A pod's removal lists the containers on one worker while another worker starts a
/// container of another pod. The listing must not take the new container's directory for
/// the leftover of a crashed creation: it deleted it (the start failed with "config.json: No
/// such file or directory") or ran `shim cleanup` on it just before its monitor started,
/// which marked a running container `cleaned` and removed its cgroup and rootfs under it.
#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn listing_on_another_thread_never_disturbs_a_container_being_started() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = TestEnv::new("list-race");
    let p = pod(&simple_pod("listrace", "sleep 1000"));
    let (rt, rx) = env.runtime();
    rt.run_pod_sandbox(&p).expect("sandbox");
    let stop = AtomicBool::new(false);
    let ids: Vec<String> = std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let _ = rt.list_containers();
            }
        });
        let c = &p.spec.as_ref().expect("spec").containers[0];
        let results: Vec<_> = (0..8)
            .map(|_| {
                rt.start_container(&ContainerRequest {
                    pod: &p,
                    container: c,
                    kind: ContainerKind::App,
                    restart_count: 0,
                })
            })
            .collect();
        stop.store(true, Ordering::Relaxed);
        results
            .into_iter()
            .map(|r| r.map(|info| info.meta.id))
            .collect::<Result<Vec<_>, _>>()
    })
    .unwrap_or_else(|e| {
        // Stop what did start before failing, so nothing is left running.
        for c in rt.list_containers().unwrap_or_default() {
            let _ = rt.signal_container(&c.meta.id, libc::SIGKILL);
        }
        panic!("start failed while another thread listed: {e}")
    });
    let list = rt.list_containers().expect("list");
    for id in &ids {
        let dir = env.root.join("containers").join(id);
        for f in ["cleaned", "exit.json"] {
            assert!(
                !dir.join(f).exists(),
                "{id}: {f} written for a running container"
            );
        }
        let c = list.iter().find(|c| &c.meta.id == id).expect("listed");
        assert!(
            matches!(c.state, ContainerState::Running { .. }),
            "{id}: {:?}",
            c.state
        );
    }
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "no container may have exited"
    );
    for id in &ids {
        rt.signal_container(id, libc::SIGKILL).expect("kill");
    }
    let mut left: std::collections::BTreeSet<&String> = ids.iter().collect();
    let deadline = Instant::now() + T;
    while !left.is_empty() {
        let wait = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Ok(podvisor::runtime::RuntimeEvent::ContainerExited { id, exit, .. }) => {
                assert_eq!(exit.exit_code, 137, "{id}");
                left.remove(&id);
            }
            Err(e) => panic!("no exit event for {left:?}: {e}"),
        }
    }
    finish(&rt, &env, &p);
}

/// The daemon killed while a sandbox is being removed (right after its record, the first
/// thing removed) or created (before its record is written): the pod directory has no
/// record, so it is not listed as a sandbox, but its namespaces and /dev/shm are still
/// mounted and its cgroup exists. The next runtime must finish the teardown.
#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn sandbox_without_record_is_torn_down_by_the_next_runtime() {
    let env = TestEnv::new("partial-sandbox");
    let p = pod(&simple_pod("partial", "true"));
    let uid = p.metadata.uid.clone().expect("uid");
    let pod_dir = env.run.join("pods").join(&uid);
    {
        let (rt, _rx) = env.runtime();
        rt.run_pod_sandbox(&p).expect("sandbox");
    }
    fs::remove_file(pod_dir.join("sandbox.json")).expect("remove record");
    let mounted = fs::read_to_string("/proc/self/mountinfo")
        .expect("mountinfo")
        .contains(&pod_dir.join("shm").to_string_lossy().to_string());
    assert!(mounted, "precondition: the sandbox's /dev/shm is mounted");
    let has_cgroups = common::cgroup_dirs(&env.cgroup_parent)
        .iter()
        .any(|d| fs::read_dir(d).is_ok_and(|mut e| e.any(|e| e.is_ok_and(|e| e.path().is_dir()))));
    assert!(has_cgroups, "precondition: the pod has cgroups");
    let (rt, _rx) = env.runtime();
    assert!(rt.list_pod_sandboxes().expect("list").is_empty());
    assert!(
        !pod_dir.exists(),
        "partial sandbox left: {}",
        pod_dir.display()
    );
    env.assert_clean();
}

/// The daemon killed while `remove_container` deletes a container directory: what is left
/// must not stay forever as an unreadable container (it kept meta.json and `cleaned` but lost
/// exit.json and shim.json, failed every listing and blocked the pod's removal).
#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn half_removed_container_directory_is_removed_by_the_next_listing() {
    let env = TestEnv::new("half-removed");
    let p = pod(&simple_pod("halfrm", "exit 3"));
    let (rt, rx) = env.runtime();
    let (info, exit) = run_to_exit(&rt, &rx, &p, T);
    assert_eq!(exit.exit_code, 3);
    let dir = env.root.join("containers").join(&info.meta.id);
    // The exit is reported once recorded; the monitor then takes the container apart: its
    // runtime directory goes, the records stay.
    wait_until("the monitor removed the runtime directory", T, || {
        !env.run.join("containers").join(&info.meta.id).exists()
    });
    let _ = fs::remove_file(dir.join("exit.json"));
    assert!(dir.join("meta.json").exists() && dir.join("cleaned").exists());
    drop(rt);
    let (rt, _rx) = env.runtime();
    let list = rt.list_containers().expect("list");
    assert!(list.iter().all(|c| c.meta.id != info.meta.id), "{list:?}");
    assert!(!dir.exists(), "left: {}", dir.display());
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn share_process_namespace_has_podvisors_init_as_pid1_and_leaves_nothing() {
    let env = TestEnv::new("sharepid");
    let p = pod(
        "metadata: {name: sharepid}\nspec:\n  shareProcessNamespace: true\n  containers:\n  - name: a\n    image: busybox:1.35\n    command: [sleep, '1001']\n  - name: b\n    image: busybox:1.35\n    command: [sleep, '1002']\n",
    );
    let uid = p.metadata.uid.clone().expect("uid");
    let (a, b) = {
        let (rt, _rx) = env.runtime();
        rt.run_pod_sandbox(&p).expect("sandbox");
        (start(&rt, &p, 0), start(&rt, &p, 1))
        // This runtime (the "daemon") goes away: the pod init and the containers stay.
    };
    let (rt, rx) = env.runtime();
    // Listing watches the running containers again.
    rt.list_containers().expect("list");
    let live = rt.list_pod_sandboxes().expect("list sandboxes");
    assert!(
        live.iter().any(|s| s.pod_uid == uid),
        "the shared PID namespace's sandbox is re-adopted: {live:?}"
    );
    let pid = |s: &ContainerState| match s {
        ContainerState::Running { pid, .. } => *pid,
        other => panic!("not running: {other:?}"),
    };
    let (pa, pb) = (pid(&a.state), pid(&b.state));
    let na = fs::read_link(format!("/proc/{pa}/ns/pid")).expect("ns a");
    let nb = fs::read_link(format!("/proc/{pb}/ns/pid")).expect("ns b");
    assert_eq!(na, nb, "one PID namespace for the pod");
    assert_ne!(na, fs::read_link("/proc/self/ns/pid").expect("own"));
    // The pod init: PID 1 of that namespace, podvisor's own binary, in the pod cgroup.
    let init = podvisor::runtime::sandbox::load_pod_init(
        &podvisor::runtime::sandbox::SandboxPaths::new(&env.config().sandbox_dirs(), &uid)
            .expect("paths"),
    )
    .expect("pod-init.json");
    assert!(init.is_alive());
    assert_eq!(
        fs::read_link(format!("/proc/{}/ns/pid", init.pid)).expect("ns init"),
        na
    );
    let cgroup = fs::read_to_string(format!("/proc/{}/cgroup", init.pid)).expect("cgroup");
    assert!(
        cgroup.contains(&format!("pod{uid}/pod-init")),
        "init in the pod cgroup: {cgroup}"
    );

    // Container b sees a's process and PID 1 is the init; its own main process is not PID 1.
    let sh = |script: &str| {
        let out = rt
            .exec_sync(&b.meta.id, &["sh".into(), "-c".into(), script.into()], T)
            .expect("exec");
        assert_eq!(out.exit_code, 0, "{script}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let pid1 = sh("tr '\\0' ' ' < /proc/1/cmdline");
    assert!(pid1.starts_with("podvisor shim pod-init"), "PID 1: {pid1}");
    let a_pid = sh(
        "for d in /proc/[0-9]*; do if [ \"$(tr '\\0' ' ' < $d/cmdline)\" = 'sleep 1001 ' ]; then echo ${d#/proc/}; fi; done",
    );
    let a_pid = a_pid.trim();
    assert!(
        !a_pid.is_empty() && a_pid != "1",
        "a's sleep seen from b: {a_pid:?}"
    );
    let b_self = sh("for d in /proc/[0-9]*; do if [ \"$(tr '\\0' ' ' < $d/cmdline)\" = 'sleep 1002 ' ]; then echo ${d#/proc/}; fi; done");
    assert_ne!(
        b_self.trim(),
        "1",
        "a container's main process is not PID 1"
    );
    // kill across containers.
    sh(&format!("kill {a_pid}"));
    let e = wait_exit(&rx, &a.meta.id, T);
    assert_eq!(e.exit_code, 143, "a was killed by b's SIGTERM: {e:?}");

    rt.signal_container(&b.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &b.meta.id, T);
    finish(&rt, &env, &p);
    assert!(!init.is_alive(), "the pod init is gone with the pod");
}

/// The parent pid (field 4 of /proc/<pid>/stat); `None` once the process is gone.
fn try_parent_of(pid: i32) -> Option<i32> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The parent pid of a live process.
fn parent_of(pid: i32) -> i32 {
    try_parent_of(pid).unwrap_or_else(|| panic!("no parent pid for {pid}"))
}

fn monitor_pid(env: &TestEnv, id: &str) -> i32 {
    let state: serde_json::Value = serde_json::from_slice(
        &fs::read(env.run.join("containers").join(id).join("state.json")).expect("state"),
    )
    .expect("json");
    state["shim"]["pid"].as_i64().expect("shim pid") as i32
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn monitors_are_forked_by_the_spawner_and_look_exec_d() {
    let env = TestEnv::new("spawnlook");
    let (rt, rx) = env.runtime();
    let p = pod(&simple_pod("spawnlook", "sleep 1000"));
    rt.run_pod_sandbox(&p).expect("sandbox");
    let spawner = rt
        .spawner_pid()
        .expect("the sandbox helper came from the spawner");
    assert_eq!(
        fs::read_to_string(format!("/proc/{spawner}/comm"))
            .expect("comm")
            .trim(),
        "podvisor-shim"
    );
    assert_eq!(
        fs::read_dir(format!("/proc/{spawner}/task"))
            .expect("tasks")
            .count(),
        1,
        "the spawner is single-threaded"
    );
    let info = start(&rt, &p, 0);
    let shim = monitor_pid(&env, &info.meta.id);
    assert_eq!(parent_of(shim), spawner, "forked by the spawner");
    // What `ps` shows and the VM scripts and tests match: `<binary> shim run <dir>`.
    let cmdline = fs::read(format!("/proc/{shim}/cmdline")).expect("cmdline");
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let dir = env.run.join("containers").join(&info.meta.id);
    assert_eq!(
        args[1..],
        ["shim", "run", &dir.to_string_lossy()],
        "{args:?}"
    );
    assert_eq!(
        fs::read_to_string(format!("/proc/{shim}/comm"))
            .expect("comm")
            .trim(),
        "podvisor-shim"
    );
    // Its own session, and none of the spawner's descriptors (its socket, signalfd).
    let sid = |pid: i32| -> i32 {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let rest = &stat[stat.rfind(')').expect(")") + 2..];
        rest.split_whitespace()
            .nth(3)
            .and_then(|s| s.parse().ok())
            .expect("sid")
    };
    assert_eq!(sid(shim), shim, "session leader");
    let links: Vec<String> = fs::read_dir(format!("/proc/{shim}/fd"))
        .expect("fds")
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .collect();
    let spawner_socket = fs::read_link(format!("/proc/{spawner}/fd/3")).expect("socket");
    assert!(
        !links.contains(&spawner_socket.to_string_lossy().into_owned()),
        "the monitor holds the spawner's socket: {links:?}"
    );
    assert!(
        links.iter().any(|l| l.ends_with("shim.lock")),
        "the monitor holds its lock: {links:?}"
    );
    rt.signal_container(&info.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &info.meta.id, T);
    finish(&rt, &env, &p);
}

/// The namespaces other than the host's the spawner holds open (its spare namespaces):
/// `net:[...]` and the like.
fn held_namespaces(spawner: i32) -> Vec<String> {
    let Ok(dir) = fs::read_dir(format!("/proc/{spawner}/fd")) else {
        return Vec::new();
    };
    let host = ["ipc", "net", "uts"].map(|k| ns_name(&format!("/proc/self/ns/{k}")));
    let mut held: Vec<String> = dir
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .map(|l| l.to_string_lossy().into_owned())
        .filter(|l| ["ipc:[", "net:[", "uts:["].iter().any(|k| l.starts_with(k)))
        .filter(|l| !host.contains(l))
        .collect();
    held.sort();
    held
}

/// The name of a namespace (`net:[4026532...]`) from a pid's or a pin's file.
fn ns_name(path: &str) -> String {
    fs::read_link(path)
        .map(|l| l.to_string_lossy().into_owned())
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The identity of a pinned namespace (its nsfs inode), as `ns_name` shows it.
fn pin_name(kind: &str, pin: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let ino = fs::metadata(pin).expect("pin").ino();
    format!("{kind}:[{ino}]")
}

/// Runs `f` on a thread that has joined the namespace pinned at `pin`.
fn in_namespace<T: Send + 'static>(
    pin: &std::path::Path,
    kind: nix::sched::CloneFlags,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let file = fs::File::open(pin).expect("open pin");
    std::thread::spawn(move || {
        nix::sched::setns(&file, kind).expect("setns");
        f()
    })
    .join()
    .expect("thread")
}

/// Whether loopback is up in this thread's network namespace.
fn loopback_is_up() -> bool {
    // SAFETY: plain socket(2), closed below; SIOCGIFFLAGS fills the ifreq we pass.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket");
        let mut req: libc::ifreq = std::mem::zeroed();
        req.ifr_name[0] = b'l' as libc::c_char;
        req.ifr_name[1] = b'o' as libc::c_char;
        let r = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req);
        libc::close(fd);
        assert_eq!(r, 0, "SIOCGIFFLAGS");
        req.ifr_ifru.ifru_flags & libc::IFF_UP as libc::c_short != 0
    }
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn a_pod_joins_the_namespaces_the_spawner_made_ahead_and_new_spares_follow() {
    let env = TestEnv::new("spare");
    let (rt, rx) = env.runtime();
    let a = pod(&simple_pod("spare-a", "sleep 1000"));
    rt.run_pod_sandbox(&a).expect("sandbox a");
    let spawner = rt.spawner_pid().expect("spawner");
    // Made when the spawner has been quiet for a moment: IPC, network and UTS namespaces of
    // their own, held open by the spawner.
    let mut spare = Vec::new();
    wait_until("spare namespaces", T, || {
        spare = held_namespaces(spawner);
        spare.len() == 3
    });
    for host in ["ipc", "net", "uts"].map(|k| ns_name(&format!("/proc/self/ns/{k}"))) {
        assert!(!spare.contains(&host), "{host} is the host's: {spare:?}");
    }

    // The next pod's sandbox is those namespaces, with the pod's hostname and lo up.
    let b = pod(&simple_pod("spare-b", "sleep 1000"));
    rt.run_pod_sandbox(&b).expect("sandbox b");
    let ns_dir = env
        .run
        .join("pods")
        .join(b.metadata.uid.as_deref().expect("uid"))
        .join("ns");
    let mut pinned: Vec<String> = ["ipc", "net", "uts"]
        .iter()
        .map(|k| pin_name(k, &ns_dir.join(k)))
        .collect();
    pinned.sort();
    assert_eq!(pinned, spare);
    let host = in_namespace(
        &ns_dir.join("uts"),
        nix::sched::CloneFlags::CLONE_NEWUTS,
        || {
            nix::sys::utsname::uname()
                .expect("uname")
                .nodename()
                .to_string_lossy()
                .into_owned()
        },
    );
    assert_eq!(host, "spare-b");
    // The spawner set it and went back to the host's UTS namespace (its children are born
    // there).
    assert_eq!(
        ns_name(&format!("/proc/{spawner}/ns/uts")),
        ns_name("/proc/self/ns/uts")
    );
    assert!(in_namespace(
        &ns_dir.join("net"),
        nix::sched::CloneFlags::CLONE_NEWNET,
        loopback_is_up
    ));
    // New ones follow, and the spawner no longer holds the pod's.
    let mut next = Vec::new();
    wait_until("new spare namespaces", T, || {
        next = held_namespaces(spawner);
        next.len() == 3 && next.iter().all(|n| !spare.contains(n))
    });
    // A container of the pod runs in them.
    let info = start(&rt, &b, 0);
    let ContainerState::Running { pid, .. } = info.state else {
        panic!("not running")
    };
    let spare_net = spare.iter().find(|n| n.starts_with("net:")).expect("net");
    assert_eq!(&ns_name(&format!("/proc/{pid}/ns/net")), spare_net);
    rt.signal_container(&info.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &info.meta.id, T);
    rt.remove_pod_sandbox(a.metadata.uid.as_deref().expect("uid"))
        .expect("remove sandbox a");
    finish(&rt, &env, &b);
}

/// The spawner's children whose command line is `<binary> shim spare-monitor`.
fn spare_monitors(spawner: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmd) = fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        if !String::from_utf8_lossy(&cmd).contains("shim\0spare-monitor") {
            continue;
        }
        // (one that ended between the two reads has no parent to ask for)
        if try_parent_of(pid) == Some(spawner) {
            out.push(pid);
        }
    }
    out
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn a_container_gets_the_spare_monitor_and_a_new_spare_follows() {
    let env = TestEnv::new("sparemon");
    let (rt, rx) = env.runtime();
    let p = pod(&simple_pod("sparemon", "sleep 1000"));
    rt.run_pod_sandbox(&p).expect("sandbox");
    let spawner = rt.spawner_pid().expect("spawner");
    // Forked once the spawner has been quiet for a moment: one, waiting.
    let mut spare = Vec::new();
    wait_until("a spare monitor", T, || {
        spare = spare_monitors(spawner);
        !spare.is_empty()
    });
    assert_eq!(spare.len(), 1, "one spare at a time: {spare:?}");
    let info = start(&rt, &p, 0);
    // The container's monitor is that process, now `shim run <dir>` in a session of its own.
    let shim = monitor_pid(&env, &info.meta.id);
    assert_eq!(shim, spare[0], "the spare became the monitor");
    let cmdline = fs::read(format!("/proc/{shim}/cmdline")).expect("cmdline");
    let dir = env.run.join("containers").join(&info.meta.id);
    assert!(
        String::from_utf8_lossy(&cmdline).contains(&format!("shim\0run\0{}\0", dir.display())),
        "{:?}",
        String::from_utf8_lossy(&cmdline)
    );
    let ContainerState::Running { pid, .. } = info.state else {
        panic!("not running: {:?}", info.state)
    };
    assert_eq!(parent_of(pid), shim, "the init is the monitor's child");
    // A new spare follows.
    let mut next = Vec::new();
    wait_until("a new spare monitor", T, || {
        next = spare_monitors(spawner);
        next.len() == 1 && next[0] != shim
    });
    rt.signal_container(&info.meta.id, libc::SIGKILL)
        .expect("kill");
    let exit = wait_exit(&rx, &info.meta.id, T);
    assert_eq!(exit.signal, Some(libc::SIGKILL));
    finish(&rt, &env, &p);
    // The unused spare ends with its spawner: nothing is left once the runtime is dropped.
    drop(rt);
    assert!(
        !std::path::Path::new(&format!("/proc/{}", next[0])).exists(),
        "the spare {} outlived its spawner",
        next[0]
    );
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn a_new_pod_whose_sandbox_fails_keeps_no_pod_cgroup() {
    // The pod cgroup is made once the sandbox is: a sandbox that fails (here its hostPath
    // volume) leaves none behind.
    let env = TestEnv::new("sbfail");
    let (rt, _rx) = env.runtime();
    let missing = env.root.join("no-such-dir");
    let p = pod(&format!(
        "{}  volumes:\n  - name: data\n    hostPath:\n      path: {}\n      type: Directory\n",
        simple_pod("sbfail", "true"),
        missing.display()
    ));
    let err = rt
        .run_pod_sandbox(&p)
        .expect_err("missing hostPath")
        .to_string();
    assert!(err.contains("no-such-dir"), "the path is named: {err}");
    env.assert_clean();
    // Made once it can be, and gone with the pod.
    fs::create_dir_all(&missing).expect("mkdir");
    rt.run_pod_sandbox(&p).expect("sandbox");
    finish(&rt, &env, &p);
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn a_killed_spawner_takes_no_container_with_it_and_is_replaced() {
    let env = TestEnv::new("spawnkill");
    let (rt, rx) = env.runtime();
    let p = pod(&simple_pod("spawnkill", "sleep 1000"));
    rt.run_pod_sandbox(&p).expect("sandbox");
    let a = start(&rt, &p, 0);
    let ContainerState::Running { pid: a_init, .. } = a.state else {
        panic!("not running")
    };
    let old = rt.spawner_pid().expect("spawner");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(old),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill spawner");
    // The container and its monitor run on.
    std::thread::sleep(Duration::from_millis(200));
    let a_shim = monitor_pid(&env, &a.meta.id);
    for pid in [a_shim, a_init] {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).expect("alive");
        assert!(
            !stat.contains(") Z "),
            "{pid} died with the spawner: {stat}"
        );
    }
    // The next start gets a new spawner.
    let b = common::start_container(&rt, &p, 0, 1);
    let new = rt.spawner_pid().expect("a new spawner");
    assert_ne!(new, old);
    assert_eq!(parent_of(monitor_pid(&env, &b.meta.id)), new);
    // Both exits arrive; the orphaned monitor of `a` is watched as before.
    for id in [&a.meta.id, &b.meta.id] {
        rt.signal_container(id, libc::SIGKILL).expect("kill");
        let e = wait_exit(&rx, id, T);
        assert_eq!(e.exit_code, 137, "{id}: {e:?}");
    }
    finish(&rt, &env, &p);
}

/// The start of the pod's first app container, as the sync loop asks for it.
fn first_app(p: &k8s_openapi::api::core::v1::Pod) -> ContainerRequest<'_> {
    ContainerRequest {
        pod: p,
        container: &p.spec.as_ref().expect("spec").containers[0],
        kind: ContainerKind::App,
        restart_count: 0,
    }
}

/// A pod's first container staged beside its sandbox (`run_pod_sandbox_and_start`: the
/// monitor forked and the rootfs mounted while the sandbox is made, the spec written once it
/// exists) runs in that sandbox: its hostname, /etc/hosts and network namespace.
#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn a_first_container_staged_beside_its_sandbox_runs_in_it() {
    let env = TestEnv::new("staged");
    let (rt, rx) = env.runtime();
    let p = pod(&simple_pod(
        "staged",
        "hostname; grep -c staged /etc/hosts; readlink /proc/self/ns/net; exec sleep 60",
    ));
    let mut sandbox = None;
    let started = rt
        .run_pod_sandbox_and_start(&p, &first_app(&p), &mut |r| {
            sandbox = Some(
                r.as_ref()
                    .map(|s| s.hostname.clone())
                    .map_err(|e| e.to_string()),
            )
        })
        .expect("the sandbox was made")
        .expect("started");
    assert_eq!(sandbox, Some(Ok("staged".to_string())));
    let shim = env
        .run
        .join("containers")
        .join(&started.meta.id)
        .join("shim.json");
    let shim: serde_json::Value =
        serde_json::from_slice(&fs::read(&shim).expect("shim.json")).expect("json");
    assert_eq!(shim["staged"], true, "{shim}");
    wait_until("the container's output", T, || {
        started.meta.log_path.exists() && log_lines(&started.meta.log_path).len() >= 3
    });
    rt.signal_container(&started.meta.id, libc::SIGKILL)
        .expect("kill");
    let exit = wait_exit(&rx, &started.meta.id, T);
    assert_eq!(exit.exit_code, 137);
    let lines = log_lines(&started.meta.log_path);
    assert_eq!(
        lines.first().map(String::as_str),
        Some("staged"),
        "{lines:?}"
    );
    assert_eq!(lines.get(1).map(String::as_str), Some("1"), "{lines:?}");
    let pinned = env
        .run
        .join("pods")
        .join(p.metadata.uid.as_deref().expect("uid"))
        .join("ns/net");
    let pod_net = fs::metadata(&pinned).map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let host_net =
        fs::metadata("/proc/self/ns/net").map(|m| std::os::unix::fs::MetadataExt::ino(&m));
    let want = format!("net:[{}]", pod_net.expect("pinned netns"));
    assert_eq!(lines.get(2), Some(&want), "{lines:?}");
    assert_ne!(want, format!("net:[{}]", host_net.expect("host netns")));
    // /etc/hosts, /etc/hostname and /etc/resolv.conf were mounted on the shared
    // mount-targets layer's files: no /etc in the writable layer (nothing copied up). This
    // test image has no /proc, /dev or /sys, so the init makes those mount points there, as
    // runc does; real images have them.
    let upper = env
        .root
        .join("containers")
        .join(&started.meta.id)
        .join("upper");
    let written: Vec<_> = fs::read_dir(&upper)
        .expect("upper")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        !written.iter().any(|n| n == "etc"),
        "the writable layer holds {written:?}"
    );
    finish(&rt, &env, &p);
}

/// A staged container whose sandbox cannot be made is called off: no start, and nothing of it
/// is left (no rootfs mount, directories, lease or monitor), nor a pod cgroup.
#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn a_staged_container_whose_sandbox_fails_leaves_nothing() {
    let env = TestEnv::new("staged-off");
    let (rt, _rx) = env.runtime();
    let missing = env.root.join("no-such-dir");
    let p = pod(&format!(
        "{}  volumes:\n  - name: data\n    hostPath: {{path: {}, type: Directory}}\n",
        simple_pod("calledoff", "sleep 60"),
        missing.display()
    ));
    for _ in 0..3 {
        let mut failed = None;
        let started = rt.run_pod_sandbox_and_start(&p, &first_app(&p), &mut |r| {
            failed = r.as_ref().err().map(|e| e.to_string())
        });
        assert!(started.is_none(), "{started:?}");
        let why = failed.expect("the sandbox failed");
        assert!(why.contains("no-such-dir"), "{why}");
        let left = |d: &std::path::Path| fs::read_dir(d).map(|e| e.count()).unwrap_or(0);
        assert_eq!(left(&env.run.join("containers")), 0, "runtime dirs left");
        assert_eq!(left(&env.root.join("containers")), 0, "record dirs left");
        let mounts = common::mounts_under(&env.run.join("containers"));
        assert!(mounts.is_empty(), "{mounts:?}");
        assert!(rt.list_containers().expect("list").is_empty());
        assert_eq!(
            left(&env.root.join("images/leases")),
            0,
            "image leases left"
        );
    }
    // Nor of the sandbox: the pod cgroup made before it was removed with it.
    env.assert_clean();
    rt.remove_pod_sandbox(p.metadata.uid.as_deref().expect("uid"))
        .expect("remove what is left of the sandbox");
    env.assert_clean();
}
