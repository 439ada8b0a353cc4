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

fn start_sleeper(
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
        "metadata: {{name: {name}}}\nspec:\n  containers:\n  - name: main\n    image: busybox\n    command: [sleep, '1000']\n    resources: {resources}\n"
    )
}

#[test]
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
    let info = start_sleeper(&rt, &p);
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
fn guaranteed_and_best_effort_pods_are_placed_by_qos() {
    let env = TestEnv::new("cgqos");
    let (rt, rx) = env.runtime();
    let g = pod(&pod_yaml("guar", "{limits: {cpu: 500m, memory: 32Mi}}"));
    let b = pod(&pod_yaml("best", "{}"));
    let gi = start_sleeper(&rt, &g);
    let bi = start_sleeper(&rt, &b);
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
    rt.signal_container(&gi.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &gi.meta.id, T);
    rt.remove_container(&gi.meta.id).expect("remove");
    rt.remove_pod_sandbox(&guid).expect("remove sandbox");
    stop_and_remove(&rt, &rx, &env, &b, &bi.meta.id);
}
