//! Root tests of `hostUsers: false` pods (a user namespace per pod, as the kubelet >= 1.33
//! with containerd 2 runs them): the mapping inside, idmapped volumes and rootfs, the range
//! kept across a daemon restart and container restarts, released with the pod; and
//! `procMount: Unmasked`.

mod common;

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::time::Duration;

use common::{pod, wait_exit, TestEnv};
use podvisor::runtime::{ContainerState, Runtime};

const T: Duration = Duration::from_secs(30);

fn userns_pod(name: &str, host_dir: &std::path::Path) -> String {
    format!(
        "metadata: {{name: {name}}}\nspec:\n  hostUsers: false\n  volumes:\n  - {{name: host, hostPath: {{path: {host}, type: Directory}}}}\n  - {{name: scratch, emptyDir: {{}}}}\n  containers:\n  - name: unmasked\n    image: busybox:1.35\n    command: [sleep, '1000']\n    securityContext: {{procMount: Unmasked}}\n    volumeMounts: [{{name: host, mountPath: /host}}, {{name: scratch, mountPath: /scratch}}]\n  - name: masked\n    image: busybox:1.35\n    command: [sleep, '1001']\n",
        host = host_dir.display()
    )
}

/// The first host ID of `/proc/<pid>/uid_map` (and that it maps 0..65536).
fn mapped_base(pid: i32, file: &str) -> u32 {
    let map = fs::read_to_string(format!("/proc/{pid}/{file}")).expect("map");
    let f: Vec<u32> = map
        .split_whitespace()
        .map(|n| n.parse().expect("number"))
        .collect();
    assert_eq!((f.len(), f[0], f[2]), (3, 0, 65536), "{file}: {map}");
    f[1]
}

/// A test environment whose directory the pod's root (an unprivileged host ID) can pass
/// through to its rootfs mount point and pinned namespaces, as through /run on a node.
fn userns_env(name: &str) -> TestEnv {
    let env = TestEnv::new(name);
    fs::set_permissions(
        env.root.parent().expect("dir"),
        fs::Permissions::from_mode(0o711),
    )
    .expect("chmod");
    env
}

fn running_pid(s: &ContainerState) -> i32 {
    match s {
        ContainerState::Running { pid, .. } => *pid,
        other => panic!("not running: {other:?}"),
    }
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn host_users_false_pod_runs_in_its_own_user_namespace_with_idmapped_volumes() {
    let env = userns_env("userns");
    let host_dir = env.root.parent().expect("dir").join("host");
    fs::create_dir(&host_dir).expect("host dir");
    fs::write(host_dir.join("by-host-1234"), "x").expect("file");
    nix::unistd::chown(
        &host_dir.join("by-host-1234"),
        Some(nix::unistd::Uid::from_raw(1234)),
        None,
    )
    .expect("chown");
    let p = pod(&userns_pod("userns", &host_dir));
    let uid = p.metadata.uid.clone().expect("uid");
    let mapping_file = env.root.join("pods").join(&uid).join("userns");

    let (rt, _rx) = env.runtime();
    rt.run_pod_sandbox(&p).expect("sandbox");
    let a = common::start_container(&rt, &p, 0, 0);
    let b = common::start_container(&rt, &p, 1, 0);
    let (pa, pb) = (running_pid(&a.state), running_pid(&b.state));
    // One user namespace for the pod: 65536 IDs from 65536 (the first slot of the default
    // range), the same for UIDs and GIDs and for both containers.
    let base = mapped_base(pa, "uid_map");
    assert_eq!(base, 65536);
    assert_eq!(mapped_base(pa, "gid_map"), base);
    assert_eq!(mapped_base(pb, "uid_map"), base);
    assert_eq!(
        fs::read_link(format!("/proc/{pa}/ns/user")).expect("ns"),
        fs::read_link(format!("/proc/{pb}/ns/user")).expect("ns")
    );
    // The container's root is the range's first ID on the host.
    let status = fs::read_to_string(format!("/proc/{pa}/status")).expect("status");
    let uid_line = status.lines().find(|l| l.starts_with("Uid:")).expect("Uid");
    assert_eq!(
        uid_line.split_whitespace().nth(1),
        Some(base.to_string().as_str()),
        "{uid_line}"
    );
    let text = fs::read_to_string(&mapping_file).expect("mapping persisted");
    assert!(text.contains("\"hostId\":65536"), "{text}");

    let sh = |id: &str, script: &str| {
        let out = rt
            .exec_sync(id, &["sh".into(), "-c".into(), script.into()], T)
            .expect("exec");
        assert_eq!(
            out.exit_code,
            0,
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let inside = sh(&a.meta.id, "cat /proc/self/uid_map");
    assert_eq!(
        inside.split_whitespace().collect::<Vec<_>>(),
        ["0", "65536", "65536"]
    );
    // Idmapped hostPath: host root's files are root's, host uid 1234's are 1234's, and what
    // the pod writes lands with its in-pod IDs.
    assert_eq!(
        sh(&a.meta.id, "stat -c %u /host /host/by-host-1234"),
        "0\n1234"
    );
    sh(
        &a.meta.id,
        "echo hi > /host/by-root && touch /host/by-1000 && chown 1000:1000 /host/by-1000",
    );
    let meta = |n: &str| fs::metadata(host_dir.join(n)).expect("meta");
    assert_eq!((meta("by-root").uid(), meta("by-root").gid()), (0, 0));
    assert_eq!((meta("by-1000").uid(), meta("by-1000").gid()), (1000, 1000));
    // emptyDir: writable, owned by the pod's root.
    assert_eq!(
        sh(
            &a.meta.id,
            "echo x > /scratch/f && stat -c %u:%g /scratch /scratch/f"
        ),
        "0:0\n0:0"
    );
    // The rootfs: the image's files are root's, and root can write it; on the host the
    // writable layer is the range's.
    assert_eq!(
        sh(
            &a.meta.id,
            "stat -c %u /bin/busybox; touch /made-here; stat -c %u /made-here"
        ),
        "0\n0"
    );
    let upper = env
        .root
        .join("containers")
        .join(&a.meta.id)
        .join("upper/made-here");
    assert_eq!(fs::metadata(&upper).expect("upper").uid(), base);
    // procMount: Unmasked: nothing of /proc masked or read-only in that container only.
    let proc_mounts = |id: &str| {
        sh(id, "grep -c ' /proc/' /proc/self/mountinfo || true")
            .parse::<u32>()
            .expect("count")
    };
    assert_eq!(proc_mounts(&a.meta.id), 0, "Unmasked: no /proc submounts");
    assert!(proc_mounts(&b.meta.id) > 0, "Default: masked /proc paths");

    // The daemon restarts: its containers, its sandbox and its range are adopted; another
    // pod gets the next range.
    drop(rt);
    let (rt, rx) = env.runtime();
    rt.list_containers().expect("list");
    let live = rt.list_pod_sandboxes().expect("sandboxes");
    assert!(live.iter().any(|s| s.pod_uid == uid), "{live:?}");
    let other_dir = env.root.parent().expect("dir").join("host2");
    fs::create_dir(&other_dir).expect("host2");
    let p2 = pod(&userns_pod("userns2", &other_dir));
    rt.run_pod_sandbox(&p2).expect("sandbox 2");
    let c2 = common::start_container(&rt, &p2, 1, 0);
    assert_eq!(mapped_base(running_pid(&c2.state), "uid_map"), 2 * 65536);
    // A restarted container keeps the pod's mapping.
    rt.signal_container(&a.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &a.meta.id, T);
    let a1 = common::start_container(&rt, &p, 0, 1);
    assert_eq!(mapped_base(running_pid(&a1.state), "uid_map"), base);

    // The pod goes: its range is released (the file with it) and handed out again.
    for c in rt.list_containers().expect("list") {
        if !matches!(c.state, ContainerState::Exited(_)) {
            rt.signal_container(&c.meta.id, libc::SIGKILL)
                .expect("kill");
            wait_exit(&rx, &c.meta.id, T);
        }
        rt.remove_container(&c.meta.id).expect("remove");
    }
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    assert!(!mapping_file.exists());
    let third = env.root.parent().expect("dir").join("host3");
    fs::create_dir(&third).expect("host3");
    let p3 = pod(&userns_pod("userns3", &third));
    rt.run_pod_sandbox(&p3).expect("sandbox 3");
    let c3 = common::start_container(&rt, &p3, 1, 0);
    assert_eq!(mapped_base(running_pid(&c3.state), "uid_map"), base);
    for c in rt.list_containers().expect("list") {
        if !matches!(c.state, ContainerState::Exited(_)) {
            rt.signal_container(&c.meta.id, libc::SIGKILL)
                .expect("kill");
            wait_exit(&rx, &c.meta.id, T);
        }
        rt.remove_container(&c.meta.id).expect("remove");
    }
    for p in [&p2, &p3] {
        rt.remove_pod_sandbox(p.metadata.uid.as_deref().expect("uid"))
            .expect("remove sandbox");
    }
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn host_users_false_with_a_shared_pid_namespace_has_its_init_inside_the_user_namespace() {
    let env = userns_env("userns-pid");
    let p = pod(
        "metadata: {name: usernspid}\nspec:\n  hostUsers: false\n  shareProcessNamespace: true\n  containers:\n  - name: a\n    image: busybox:1.35\n    command: [sleep, '1003']\n",
    );
    let uid = p.metadata.uid.clone().expect("uid");
    let (rt, rx) = env.runtime();
    rt.run_pod_sandbox(&p).expect("sandbox");
    let a = common::start_container(&rt, &p, 0, 0);
    let pa = running_pid(&a.state);
    let base = mapped_base(pa, "uid_map");
    let init = podvisor::runtime::sandbox::load_pod_init(
        &podvisor::runtime::sandbox::SandboxPaths::new(&env.config().sandbox_dirs(), &uid)
            .expect("paths"),
    )
    .expect("pod-init.json");
    // The pod init runs as the pod's root, in the pod's user and PID namespaces.
    assert_eq!(mapped_base(init.pid, "uid_map"), base);
    for ns in ["user", "pid"] {
        assert_eq!(
            fs::read_link(format!("/proc/{}/ns/{ns}", init.pid)).expect("init ns"),
            fs::read_link(format!("/proc/{pa}/ns/{ns}")).expect("container ns"),
            "{ns}"
        );
    }
    let out = rt
        .exec_sync(
            &a.meta.id,
            &[
                "sh".into(),
                "-c".into(),
                "tr '\\0' ' ' < /proc/1/cmdline".into(),
            ],
            T,
        )
        .expect("exec");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("podvisor shim pod-init"),
        "{out:?}"
    );
    rt.signal_container(&a.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &a.meta.id, T);
    rt.remove_container(&a.meta.id).expect("remove");
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    assert!(!init.is_alive());
    env.assert_clean();
}
