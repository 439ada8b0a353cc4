//! Root integration tests of the pod cgroup hierarchy on this host's cgroup layout (hybrid or
//! v1 here; the pure v2 kernel is covered by the VM harness): QoS placement, pod-level values,
//! stats of a running container, and nothing left after removal.

mod common;

use std::fs;
use std::path::PathBuf;
use std::time::Duration;

use common::{pod, wait_exit, TestEnv};
use podvisor::cgroups::{CgroupMode, CgroupRoot};
use podvisor::runtime::{ContainerKind, ContainerRequest, ContainerState, Runtime};

const T: Duration = Duration::from_secs(30);

fn read(path: PathBuf) -> String {
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// The cgroup path of `pid` in the hierarchy that has `controller` (v1) or the unified one.
fn cgroup_of(pid: i32, controller: &str) -> String {
    let text = read(PathBuf::from(format!("/proc/{pid}/cgroup")));
    text.lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
            let hit = if controller.is_empty() {
                ctrls.is_empty()
            } else {
                ctrls.split(',').any(|c| c == controller)
            };
            hit.then(|| path.to_string())
        })
        .unwrap_or_else(|| panic!("no {controller} cgroup for {pid}: {text}"))
}

fn start_first(
    rt: &impl Runtime,
    p: &k8s_openapi::api::core::v1::Pod,
) -> podvisor::runtime::ContainerInfo {
    rt.run_pod_sandbox(p).expect("sandbox");
    rt.start_container(&ContainerRequest {
        pod: p,
        container: &p.spec.as_ref().expect("spec").containers[0],
        kind: ContainerKind::App,
        restart_count: 0,
    })
    .expect("start")
}

fn stop_and_remove(
    rt: &impl Runtime,
    rx: &std::sync::mpsc::Receiver<podvisor::runtime::RuntimeEvent>,
    env: &TestEnv,
    p: &k8s_openapi::api::core::v1::Pod,
    id: &str,
) {
    rt.signal_container(id, libc::SIGKILL).expect("kill");
    wait_exit(rx, id, T);
    rt.remove_container(id).expect("remove container");
    rt.remove_pod_sandbox(p.metadata.uid.as_deref().expect("uid"))
        .expect("remove sandbox");
    env.assert_clean();
}

fn pod_yaml(name: &str, resources: &str) -> String {
    format!(
        "metadata: {{name: {name}}}\nspec:\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sleep, '1000']\n    resources: {resources}\n"
    )
}

#[test]
#[ignore = "needs root: creates cgroups and containers (scripts/test runs it)"]
fn burstable_pod_lands_in_its_tier_with_pod_limits_and_is_removed() {
    let env = TestEnv::new("cgburst");
    let mut cfg = env.config();
    cfg.pod_pids_limit = Some(64);
    let (rt, rx) = env.runtime_with(cfg);
    let p = pod(&pod_yaml(
        "burst",
        "{requests: {cpu: 100m, memory: 16Mi}, limits: {cpu: 250m, memory: 64Mi}}",
    ));
    let uid = p.metadata.uid.clone().expect("uid");
    let info = start_first(&rt, &p);
    let ContainerState::Running { pid, .. } = info.state else {
        panic!("not running: {:?}", info.state);
    };
    let root = CgroupRoot::default();
    let pod_rel = format!("/{}/burstable/pod{uid}", env.cgroup_parent);
    let want = format!("{pod_rel}/{}", info.meta.id);
    match root.mode() {
        CgroupMode::Unified => {
            assert_eq!(cgroup_of(pid, ""), want);
            let dir = root.path().join(pod_rel.trim_start_matches('/'));
            assert_eq!(read(dir.join("cpu.weight")), "4");
            assert_eq!(read(dir.join("cpu.max")), "25000 100000");
            assert_eq!(read(dir.join("memory.max")), (64u64 << 20).to_string());
            assert_eq!(read(dir.join("pids.max")), "64");
        }
        CgroupMode::Legacy => {
            assert_eq!(cgroup_of(pid, "memory"), want);
            assert_eq!(cgroup_of(pid, "pids"), want);
            let rel = pod_rel.trim_start_matches('/');
            let cpu = root.path().join("cpu").join(rel);
            assert_eq!(read(cpu.join("cpu.shares")), "102");
            assert_eq!(read(cpu.join("cpu.cfs_quota_us")), "25000");
            assert_eq!(read(cpu.join("cpu.cfs_period_us")), "100000");
            assert_eq!(
                read(
                    root.path()
                        .join("memory")
                        .join(rel)
                        .join("memory.limit_in_bytes")
                ),
                (64u64 << 20).to_string()
            );
            assert_eq!(
                read(root.path().join("pids").join(rel).join("pids.max")),
                "64"
            );
            // The pod cgroup is made in every hierarchy the container is placed in (the
            // kubelet's pod cgroups are in every subsystem), its cpuset filled from the tier's.
            for h in ["cpuset", "freezer", "devices", "blkio", "cpuacct"] {
                if !root.path().join(h).is_dir() {
                    continue;
                }
                assert_eq!(cgroup_of(pid, h), want, "{h}");
            }
            let cpuset = root.path().join("cpuset").join(rel);
            if cpuset.is_dir() {
                assert!(!read(cpuset.join("cpuset.cpus")).is_empty());
                assert!(!read(cpuset.join("cpuset.mems")).is_empty());
            }
            // The Burstable tier's shares follow the pods' summed requests (100m -> 102).
            assert_eq!(
                read(
                    root.path()
                        .join("cpu")
                        .join(&env.cgroup_parent)
                        .join("burstable/cpu.shares")
                ),
                "102"
            );
            assert_eq!(
                read(
                    root.path()
                        .join("cpu")
                        .join(&env.cgroup_parent)
                        .join("besteffort/cpu.shares")
                ),
                "2"
            );
            // The container's own limit, applied by libcontainer's v1 manager.
            assert_eq!(
                read(
                    root.path()
                        .join("memory")
                        .join(want.trim_start_matches('/'))
                        .join("memory.limit_in_bytes")
                ),
                (64u64 << 20).to_string()
            );
        }
    }
    // The monitor (parent of the container's init) is outside the pod's cgroup.
    let monitor = procfs_ppid(pid);
    assert!(
        !cgroup_of(monitor, "memory").contains(&env.cgroup_parent),
        "monitor {monitor} is inside the pod cgroups"
    );
    // Stats of the running container and of the pod.
    let s = root
        .stats(&want)
        .expect("stats")
        .expect("container cgroup exists");
    assert!(s.pids_current.unwrap_or(0) >= 1, "{s:?}");
    assert!(s.memory_usage_bytes.unwrap_or(0) > 0, "{s:?}");
    assert_eq!(s.oom_kills, Some(0), "{s:?}");
    let ps = root.stats(&pod_rel).expect("stats").expect("pod cgroup");
    assert!(ps.cpu_usage_usec.is_some(), "{ps:?}");
    stop_and_remove(&rt, &rx, &env, &p, &info.meta.id);
}

fn procfs_ppid(pid: i32) -> i32 {
    let stat = read(PathBuf::from(format!("/proc/{pid}/stat")));
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    after
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("ppid of {pid}: {stat}"))
}

#[test]
#[ignore = "needs root: creates cgroups and containers (scripts/test runs it)"]
fn guaranteed_and_best_effort_pods_are_placed_by_qos() {
    let env = TestEnv::new("cgqos");
    let (rt, rx) = env.runtime();
    let g = pod(&pod_yaml("guar", "{limits: {cpu: 500m, memory: 32Mi}}"));
    let b = pod(&pod_yaml("best", "{}"));
    let gi = start_first(&rt, &g);
    let bi = start_first(&rt, &b);
    let pid = |s: &ContainerState| match s {
        ContainerState::Running { pid, .. } => *pid,
        other => panic!("not running: {other:?}"),
    };
    let ctrl = match CgroupRoot::default().mode() {
        CgroupMode::Unified => "",
        CgroupMode::Legacy => "memory",
    };
    let guid = g.metadata.uid.clone().expect("uid");
    let buid = b.metadata.uid.clone().expect("uid");
    assert_eq!(
        cgroup_of(pid(&gi.state), ctrl),
        format!("/{}/pod{guid}/{}", env.cgroup_parent, gi.meta.id)
    );
    assert_eq!(
        cgroup_of(pid(&bi.state), ctrl),
        format!("/{}/besteffort/pod{buid}/{}", env.cgroup_parent, bi.meta.id)
    );
    // On v1 the init is placed in every hierarchy libcontainer manages: its intermediate
    // process moved itself through each hierarchy's `tasks` (vendor/README.md).
    if ctrl == "memory" {
        for h in [
            "cpu", "cpuacct", "cpuset", "devices", "freezer", "blkio", "pids",
        ] {
            if CgroupRoot::default().path().join(h).is_dir() {
                assert_eq!(
                    cgroup_of(pid(&gi.state), h),
                    format!("/{}/pod{guid}/{}", env.cgroup_parent, gi.meta.id),
                    "hierarchy {h}"
                );
            }
        }
        // Every empty cpuset level got its values from the nearest ancestor that has them
        // (the move would have failed with ENOSPC otherwise): the test's parent, the pod and
        // the container, whichever were empty (vendor/README.md).
        let cpuset = CgroupRoot::default().path().join("cpuset");
        if cpuset.is_dir() {
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let want = read(cpuset.join(file));
                let mut dir = cpuset.clone();
                for part in [
                    env.cgroup_parent.clone(),
                    format!("pod{guid}"),
                    gi.meta.id.clone(),
                ] {
                    dir.push(part);
                    assert_eq!(read(dir.join(file)), want, "{}", dir.display());
                }
            }
        }
    }
    rt.signal_container(&gi.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &gi.meta.id, T);
    rt.remove_container(&gi.meta.id).expect("remove");
    rt.remove_pod_sandbox(&guid).expect("remove sandbox");
    stop_and_remove(&rt, &rx, &env, &b, &bi.meta.id);
}

/// `podvisor run` on this host: a pod that does not fit is rejected with OutOfcpu, a fitting
/// one runs, `/stats` and `podvisor top` show it, the v1/hybrid degradations are logged once,
/// and deleting the manifests removes every cgroup.
#[test]
#[ignore = "needs root: creates cgroups and containers (scripts/test runs it)"]
fn daemon_admits_reports_stats_and_cleans_up() {
    use std::process::{Command, Stdio};
    let env = TestEnv::new("cgdaemon");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let socket = env.dir.path().join("api.sock");
    let log_path = env.dir.path().join("daemon.log");
    let log = fs::File::create(&log_path).expect("log");
    let sleeper = |name: &str, cpu: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.2; done']\n    resources: {{requests: {{cpu: {cpu}, memory: 8Mi}}}}\n"
        )
    };
    fs::write(dir.join("web.yaml"), sleeper("web", "100m")).expect("write");
    fs::write(dir.join("huge.yaml"), sleeper("huge", "4096")).expect("write");
    let mut child = env
        .podvisor()
        .arg("run")
        .arg("--pod-manifest-path")
        .arg(&dir)
        .arg("--api-socket")
        .arg(&socket)
        .arg("--hostname-override")
        .arg("testnode")
        // As tests/common/daemon.rs: the default disk thresholds would make the test depend on
        // how full the host's disk is (a host at 85 % used reports DiskPressure and evicts).
        .arg("--eviction-hard=memory.available<100Mi")
        // As tests/common/daemon.rs: no pod network on the host.
        .arg("--cni-conf-dir=")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log"))
        .stderr(log)
        .spawn()
        .expect("start daemon");
    let pods = || {
        podvisor::api::client::get_json::<Vec<podvisor::status::PodView>>(&socket, "/pods")
            .unwrap_or_default()
    };
    let status = |name: &str| {
        pods()
            .into_iter()
            .find(|v| v.pod.metadata.name.as_deref() == Some(name))
            .and_then(|v| v.pod.status)
    };
    let wait = |what: &str, f: &dyn Fn() -> bool| common::wait_until(what, T, f);
    wait("web running", &|| {
        status("web-testnode").is_some_and(|s| s.phase.as_deref() == Some("Running"))
    });
    wait("huge rejected", &|| {
        status("huge-testnode").is_some_and(|s| s.reason.as_deref() == Some("OutOfcpu"))
    });
    let huge = status("huge-testnode").expect("huge");
    assert_eq!(huge.phase.as_deref(), Some("Failed"));
    assert!(
        huge.message.as_deref().is_some_and(|m| m.starts_with(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 4096000"
        )),
        "{huge:?}"
    );
    assert_eq!(
        status("web-testnode").and_then(|s| s.qos_class).as_deref(),
        Some("Burstable")
    );

    let stats: Vec<podvisor::api::stats::PodStats> =
        podvisor::api::client::get_json(&socket, "/stats?pod=web").expect("stats");
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert!(stats[0]
        .cgroup
        .ends_with(&format!("/burstable/pod{}", stats[0].uid)));
    let c = &stats[0].containers[0];
    assert!(
        c.stats
            .as_ref()
            .and_then(|s| s.pids_current)
            .is_some_and(|n| n >= 1),
        "{c:?}"
    );
    let top = Command::new(common::podvisor_bin())
        .args(["top", "--containers", "--api-socket"])
        .arg(&socket)
        .output()
        .expect("top");
    let text = String::from_utf8_lossy(&top.stdout);
    assert!(
        top.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&top.stderr)
    );
    assert!(text.starts_with("POD "), "{text}");
    assert!(text.contains("web-testnode   main"), "{text}");
    assert!(text.contains("Mi\n"), "{text}");

    fs::remove_file(dir.join("web.yaml")).expect("rm");
    fs::remove_file(dir.join("huge.yaml")).expect("rm");
    wait("pods gone", &|| pods().is_empty());
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    assert!(child.wait().expect("wait").success());
    let log = fs::read_to_string(&log_path).expect("log");
    if CgroupRoot::default().mode() == CgroupMode::Legacy {
        assert_eq!(log.matches("cgroup v1/hybrid host").count(), 1, "{log}");
    }
    env.assert_clean();
}

#[test]
#[ignore = "needs root: creates cgroups and containers (scripts/test runs it)"]
fn fifty_create_delete_cycles_leave_no_cgroup() {
    let env = TestEnv::new("cgcycles");
    let (rt, rx) = env.runtime();
    let classes = [
        "{limits: {cpu: 100m, memory: 32Mi}}",
        "{requests: {cpu: 50m}}",
        "{}",
    ];
    for i in 0..50 {
        let p = pod(&format!(
            "metadata: {{name: cycle{i}}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: ['true']\n    resources: {}\n",
            classes[i % 3]
        ));
        let uid = p.metadata.uid.clone().expect("uid");
        let info = start_first(&rt, &p);
        let exit = wait_exit(&rx, &info.meta.id, T);
        assert_eq!(exit.exit_code, 0, "cycle {i}: {exit:?}");
        rt.remove_container(&info.meta.id)
            .expect("remove container");
        rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    }
    env.assert_clean();
}

/// The unified (v2) hierarchy of this host: `/sys/fs/cgroup` on v2, `unified` below it on a
/// hybrid host; `None` on a pure v1 host.
fn unified_hierarchy() -> Option<PathBuf> {
    let root = CgroupRoot::default();
    let dir = match root.mode() {
        CgroupMode::Unified => root.path().to_path_buf(),
        CgroupMode::Legacy => root.path().join("unified"),
    };
    dir.join("cgroup.procs").exists().then_some(dir)
}

#[test]
#[ignore = "needs root: creates a v2 cgroup and clones into it (scripts/test runs it)"]
fn the_intermediate_is_cloned_into_its_v2_cgroup_or_where_the_caller_is() {
    use std::os::fd::AsFd;
    let Some(unified) = unified_hierarchy() else {
        eprintln!("no cgroup v2 hierarchy on this host: nothing to test");
        return;
    };
    let env = TestEnv::new("cginto");
    let rel = format!("{}-clone/into", env.cgroup_parent);
    let dir = unified.join(&rel);
    fs::create_dir_all(&dir).expect("mkdir");
    let cgroup = fs::File::open(&dir).expect("open cgroup");
    let not_a_cgroup = fs::File::open(&env.root).expect("open dir");
    let ours = cgroup_of(std::process::id() as i32, "");
    for (fd, want) in [
        (cgroup.as_fd(), format!("/{rel}")),
        // A directory that is no cgroup: the kernel refuses the flag, the clone goes on
        // without it.
        (not_a_cgroup.as_fd(), ours.clone()),
    ] {
        // The child only waits to be killed (no allocation after the clone of this
        // multi-threaded test process).
        let child = libcontainer::process::fork::container_clone_into(
            Box::new(|| {
                // SAFETY: pause only blocks until a signal; nothing is shared.
                unsafe { libc::pause() };
                0
            }),
            false,
            Some(fd),
        )
        .expect("clone");
        let seen = cgroup_of(child.as_raw(), "");
        nix::sys::signal::kill(child, nix::sys::signal::Signal::SIGKILL).expect("kill");
        nix::sys::wait::waitpid(child, None).expect("wait");
        assert_eq!(seen, want);
    }
    for d in [dir.clone(), dir.parent().expect("parent").to_path_buf()] {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while fs::remove_dir(&d).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "{} stays",
                d.display()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
