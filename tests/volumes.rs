//! Root integration tests of pod volumes and host namespaces with real containers: what a
//! container sees of downwardAPI and projected volumes, fsGroup ownership, subPathExpr,
//! hostPID and hostIPC, the pod's resolv.conf and hosts files; and a start that fails in
//! libcontainer naming the mount.

mod common;

use std::fs;
use std::time::Duration;

use common::{log_lines, pod, wait_exit, TestEnv};
use podvisor::runtime::{ContainerKind, ContainerRequest, Runtime};

const T: Duration = Duration::from_secs(30);

/// Runs the first container of `yaml` to its end; returns its exit code and log lines.
fn run(env: &TestEnv, yaml: &str) -> (i32, Vec<String>) {
    let (rt, rx) = env.runtime();
    let p = pod(yaml);
    rt.run_pod_sandbox(&p).expect("sandbox");
    let info = common::start_container(&rt, &p, 0, 0);
    let exit = wait_exit(&rx, &info.meta.id, T);
    let lines = log_lines(&info.meta.log_path);
    let uid = p.metadata.uid.clone().expect("uid");
    rt.remove_container(&info.meta.id)
        .expect("remove container");
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    env.assert_clean();
    (exit.exit_code, lines)
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn downward_api_and_projected_volumes_with_fs_group() {
    let env = TestEnv::new("dapivol");
    let yaml = r#"
metadata: {name: dapi, uid: u-dapi, namespace: default, labels: {zone: a, app: web}}
spec:
  restartPolicy: Never
  securityContext: {runAsUser: 1000, fsGroup: 2000}
  containers:
  - name: main
    image: busybox:1.35
    resources: {limits: {memory: 64Mi}}
    env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    command: [sh, -c, 'cat /info/labels; echo; cat /proj/mem; echo; ls -a /info | tr "\n" " "; echo; stat -c "%g %a" /cache; touch /cache/x && echo writable; ls /sub']
    volumeMounts:
    - {name: info, mountPath: /info}
    - {name: proj, mountPath: /proj}
    - {name: cache, mountPath: /cache}
    - {name: cache, mountPath: /sub, subPathExpr: 'per-pod/$(POD)'}
  volumes:
  - name: info
    downwardAPI: {items: [{path: labels, fieldRef: {fieldPath: metadata.labels}}]}
  - name: proj
    projected: {sources: [{downwardAPI: {items: [{path: mem, resourceFieldRef: {containerName: main, resource: limits.memory, divisor: 1Mi}}]}}]}
  - name: cache
    empty-dir: {}
"#;
    let (code, lines) = run(&env, yaml);
    assert_eq!(code, 0, "{lines:?}");
    assert_eq!(lines[0], "app=\"web\"");
    assert_eq!(lines[1], "zone=\"a\"");
    assert_eq!(lines[2], "64");
    assert!(
        lines[3].contains("..data") && lines[3].contains("labels"),
        "{lines:?}"
    );
    assert_eq!(lines[4], "2000 2777", "fsGroup owns the emptyDir, setgid");
    assert_eq!(lines[5], "writable");
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn host_pid_and_host_ipc_share_the_host_namespaces() {
    let env = TestEnv::new("hostns");
    let yaml = r#"
metadata: {name: hostns, uid: u-hostns, namespace: default}
spec:
  restartPolicy: Never
  hostPID: true
  hostIPC: true
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'readlink /proc/self/ns/pid; readlink /proc/self/ns/ipc; test -d /proc/1 && echo $$']
"#;
    let (code, lines) = run(&env, yaml);
    assert_eq!(code, 0, "{lines:?}");
    let host = |kind: &str| {
        fs::read_link(format!("/proc/self/ns/{kind}"))
            .expect("ns")
            .display()
            .to_string()
    };
    assert_eq!(lines[0], host("pid"));
    assert_eq!(lines[1], host("ipc"));
    assert_ne!(
        lines[2], "1",
        "the shell is not PID 1 in the host's PID namespace"
    );
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn a_failed_mount_is_named_in_the_start_error() {
    let env = TestEnv::new("mountfail");
    let (rt, _rx) = env.runtime();
    // A file mounted over a directory of the image: the bind mount fails in libcontainer.
    let file = env.dir.path().join("a-file");
    fs::write(&file, b"x").expect("file");
    let p = pod(&format!(
        "metadata: {{name: mountfail, uid: u-mountfail}}\nspec:\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh]\n    volumeMounts: [{{name: f, mountPath: /bin/sh/x}}]\n  volumes: [{{name: f, hostPath: {{path: {}, type: File}}}}]\n",
        file.display()
    ));
    rt.run_pod_sandbox(&p).expect("sandbox");
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let err = rt
        .start_container(&ContainerRequest {
            pod: &p,
            container: c,
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .expect_err("must fail")
        .to_string();
    assert!(err.contains("failed to prepare rootfs"), "{err}");
    assert!(err.contains("/bin/sh/x"), "the mount is named: {err}");
    rt.remove_pod_sandbox("u-mountfail")
        .expect("remove sandbox");
    env.assert_clean();
}

/// A mount the host makes below a `HostToContainer` hostPath after the container started
/// reaches the container (containerd gives such a pod `rootfsPropagation: rslave` and the
/// mount `rslave`; libcontainer 0.7 refused the recursive name until the vendored patch).
#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn host_to_container_propagation_shows_a_later_host_mount() {
    use nix::mount::{mount, umount2, MntFlags, MsFlags};
    /// Detaches the test's own mounts, whatever the test's outcome.
    struct Unmount(Vec<std::path::PathBuf>);
    impl Drop for Unmount {
        fn drop(&mut self) {
            for p in self.0.iter().rev() {
                let _ = umount2(p, MntFlags::MNT_DETACH);
            }
        }
    }
    let env = TestEnv::new("h2c");
    let shared = env.dir.path().join("shared");
    fs::create_dir_all(&shared).expect("mkdir shared");
    let later = shared.join("later");
    let _unmount = Unmount(vec![shared.clone(), later.clone()]);
    // The hostPath is a shared mount of its own, so that what is mounted below it propagates
    // to its slaves whatever the propagation of the test's directory is.
    mount(
        Some("tmpfs"),
        &shared,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("size=1m"),
    )
    .expect("mount tmpfs on the hostPath");
    mount(
        None::<&str>,
        &shared,
        None::<&str>,
        MsFlags::MS_SHARED,
        None::<&str>,
    )
    .expect("make the hostPath shared");
    fs::create_dir_all(shared.join("later")).expect("mkdir later");
    let yaml = format!(
        r#"
metadata: {{name: h2c, uid: u-h2c, namespace: default}}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox:1.35
    command: [sh, -c, 'echo started; i=0; while [ ! -e /host/later/marker ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i+1)); done; cat /host/later/marker']
    volumeMounts:
    - {{name: host, mountPath: /host, mountPropagation: HostToContainer}}
  volumes:
  - name: host
    hostPath: {{path: {}, type: Directory}}
"#,
        shared.display()
    );
    let (rt, rx) = env.runtime();
    let p = pod(&yaml);
    rt.run_pod_sandbox(&p).expect("sandbox");
    let info = common::start_container(&rt, &p, 0, 0);
    common::wait_until("the container to start", T, || {
        info.meta.log_path.exists()
            && log_lines(&info.meta.log_path).first().map(String::as_str) == Some("started")
    });
    // After the start: a new mount on the host, below the hostPath.
    mount(
        Some("tmpfs"),
        &later,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("size=1m"),
    )
    .expect("mount below the hostPath");
    fs::write(later.join("marker"), "from the host\n").expect("write marker");
    let exit = wait_exit(&rx, &info.meta.id, T);
    let lines = log_lines(&info.meta.log_path);
    let uid = p.metadata.uid.clone().expect("uid");
    rt.remove_container(&info.meta.id)
        .expect("remove container");
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    umount2(&later, MntFlags::MNT_DETACH).expect("umount later");
    umount2(&shared, MntFlags::MNT_DETACH).expect("umount shared");
    env.assert_clean();
    assert_eq!(exit.exit_code, 0, "{lines:?}");
    assert_eq!(lines, ["started", "from the host"]);
}
