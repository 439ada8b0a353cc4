//! Tests of `build_spec` as a whole: hostname and namespaces, refused and checked fields,
//! init containers, and the spec's round trip; per-concern tests live beside their code.

use super::testutil::*;
use super::*;
use serde_json::json;

// ---- hostname and namespaces ----

#[test]
fn hostname_from_spec_or_truncated_pod_name() {
    assert_eq!(
        ok(&pod_with(json!({}), json!({})))
            .spec
            .hostname()
            .as_deref(),
        Some("web-node1")
    );
    let p = pod_with(json!({}), json!({"hostname": "myhost"}));
    assert_eq!(ok(&p).spec.hostname().as_deref(), Some("myhost"));
    let bad = pod_with(json!({}), json!({"hostname": "My_Host"}));
    assert!(err(&bad).starts_with("spec.hostname: invalid value \"My_Host\""));
    let long = format!("{}-{}", "a".repeat(62), "b".repeat(10));
    let mut p = pod_with(json!({}), json!({}));
    p.metadata.name = Some(long.clone());
    let cs = ok(&p);
    assert_eq!(cs.spec.hostname().as_deref(), Some("a".repeat(62).as_str()));
    assert_eq!(env_value(&cs, "HOSTNAME"), Some("a".repeat(62)));
}

#[test]
fn host_network_has_no_hostname_and_no_network_or_uts_namespace() {
    let p = pod_with(json!({}), json!({"hostNetwork": true}));
    let cs = ok(&p);
    assert_eq!(cs.spec.hostname(), &None);
    assert_eq!(env_value(&cs, "HOSTNAME").as_deref(), Some("node1"));
    let types: Vec<_> = linux(&cs)
        .namespaces()
        .clone()
        .expect("ns")
        .iter()
        .map(|n| n.typ())
        .collect();
    assert_eq!(
        types,
        vec![
            LinuxNamespaceType::Pid,
            LinuxNamespaceType::Ipc,
            LinuxNamespaceType::Mount,
            LinuxNamespaceType::Cgroup
        ]
    );
    // A sandbox that disagrees with the pod is refused.
    let e = build_with(&p, &image(json!({"Cmd": ["x"]})), &sandbox(false)).expect_err("mismatch");
    assert!(matches!(e, SpecError::SandboxMismatch { .. }));
}

#[test]
fn share_process_namespace_joins_the_pods_pid_namespace() {
    let p = pod_with(json!({}), json!({"shareProcessNamespace": true}));
    let img = image(json!({"Cmd": ["x"]}));
    let mut sb = sandbox(false);
    // A sandbox without the shared PID namespace is refused, and the other way round.
    let e = build_with(&p, &img, &sb).expect_err("mismatch");
    assert!(matches!(e, SpecError::SandboxMismatch { .. }), "{e}");
    sb.pid_ns = Some(PathBuf::from("/run/podvisor/ns/pid"));
    let plain = pod_with(json!({}), json!({}));
    let e = build_with(&plain, &img, &sb).expect_err("mismatch");
    assert!(matches!(e, SpecError::SandboxMismatch { .. }), "{e}");
    let cs = build_with(&p, &img, &sb).expect("spec");
    let pid = linux(&cs)
        .namespaces()
        .clone()
        .expect("ns")
        .into_iter()
        .find(|n| n.typ() == LinuxNamespaceType::Pid)
        .expect("pid namespace");
    assert_eq!(pid.path(), &Some(PathBuf::from("/run/podvisor/ns/pid")));
    // With hostPID as well: refused, as the API server does.
    let both = pod_with(
        json!({}),
        json!({"shareProcessNamespace": true, "hostPID": true}),
    );
    assert!(err(&both).starts_with("spec.shareProcessNamespace: invalid value"));
}

#[test]
fn namespaces_join_the_sandbox() {
    let cs = ok(&pod_with(json!({}), json!({})));
    let ns: Vec<(LinuxNamespaceType, Option<PathBuf>)> = linux(&cs)
        .namespaces()
        .clone()
        .expect("ns")
        .iter()
        .map(|n| (n.typ(), n.path().clone()))
        .collect();
    assert_eq!(
        ns,
        vec![
            (LinuxNamespaceType::Pid, None),
            (
                LinuxNamespaceType::Ipc,
                Some(PathBuf::from("/run/podvisor/ns/ipc"))
            ),
            (
                LinuxNamespaceType::Uts,
                Some(PathBuf::from("/run/podvisor/ns/uts"))
            ),
            (LinuxNamespaceType::Mount, None),
            (
                LinuxNamespaceType::Network,
                Some(PathBuf::from("/run/podvisor/ns/net"))
            ),
            (LinuxNamespaceType::Cgroup, None),
        ]
    );
}

#[test]
fn unsupported_pod_and_container_fields_are_named() {
    let cases = [
        (
            json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}}),
            json!({}),
            "spec.containers[0].securityContext.seccompProfile.localhostProfile: seccomp profile root",
        ),
        (
            json!({"securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "p"}}}),
            json!({}),
            "spec.containers[0].securityContext.appArmorProfile: AppArmor is not available",
        ),
    ];
    for (c, s, want) in cases {
        let e = err(&pod_with(c, s));
        assert!(e.starts_with(want), "{e} vs {want}");
    }
}

#[test]
fn host_pid_and_host_ipc_keep_the_host_namespaces() {
    let kinds = |cs: &ContainerSpec| -> Vec<LinuxNamespaceType> {
        linux(cs)
            .namespaces()
            .as_ref()
            .expect("namespaces")
            .iter()
            .map(|n| n.typ())
            .collect()
    };
    let plain = ok(&pod_with(json!({}), json!({})));
    assert!(kinds(&plain).contains(&LinuxNamespaceType::Pid));
    assert!(kinds(&plain).contains(&LinuxNamespaceType::Ipc));
    let cs = ok(&pod_with(
        json!({}),
        json!({"hostPID": true, "hostIPC": true}),
    ));
    assert!(!kinds(&cs).contains(&LinuxNamespaceType::Pid), "hostPID");
    assert!(!kinds(&cs).contains(&LinuxNamespaceType::Ipc), "hostIPC");
    let shm = mount_summary(&cs)
        .into_iter()
        .find(|m| m.0 == "/dev/shm")
        .expect("/dev/shm");
    assert_eq!(shm.2, "/dev/shm", "hostIPC pods share the host's /dev/shm");
}

#[test]
fn names_that_become_paths_are_checked_again() {
    let bad_container = pod(json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "../../etc"}]}
    }));
    let e = build_on(&bad_container, &NodeSecurity::default(), &[])
        .expect_err("path name")
        .to_string();
    assert!(
        e.starts_with("spec.containers[0].name: invalid value \"../../etc\""),
        "{e}"
    );
    let mut p = pod_with(json!({}), json!({}));
    p.metadata.namespace = Some("a/b".into());
    assert!(err(&p).starts_with("metadata.namespace: invalid value \"a/b\""));
    p.metadata.namespace = None;
    p.metadata.name = Some("..".into());
    assert!(err(&p).starts_with("metadata.name: invalid value \"..\""));
}

#[test]
fn pod_level_resources_leave_the_container_spec_alone() {
    // The pod cgroup carries pod-level limits; the container gets only its own.
    let p = pod_with(
        json!({}),
        json!({"resources": {"limits": {"cpu": "1", "memory": "64Mi"}}}),
    );
    let cs = ok(&p);
    let res = linux(&cs).resources().clone().expect("resources");
    assert_eq!(res.memory().as_ref().and_then(|m| m.limit()), None);
}

#[test]
fn tty_asks_libcontainer_for_a_terminal() {
    let cs = ok(&pod_with(json!({"tty": true, "stdin": true}), json!({})));
    assert_eq!(process(&cs).terminal(), Some(true));
    let cs = ok(&pod_with(json!({}), json!({})));
    assert_eq!(process(&cs).terminal(), Some(false));
}

#[test]
fn init_containers_are_found_and_named() {
    let p = pod(json!({
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "main"}],
            "initContainers": [{"name": "init", "securityContext": {"procMount": "Unmasked"}}]
        }
    }));
    let spec = p.spec.as_ref().expect("spec");
    let init = &spec.init_containers.as_ref().expect("init")[0];
    let n = node();
    let sb = sandbox(false);
    let img = image(json!({"Cmd": ["x"]}));
    let mut req = SpecRequest {
        pod: &p,
        container: init,
        image: &img,
        rootfs: Path::new("/r"),
        sandbox: &sb,
        cgroups_path: "/x",
        node: &n,
        critical: false,
        security: &NodeSecurity::default(),
        host_devices: &[],
        sub_paths: SubPaths::Open,
    };
    let e = build_spec(&req).expect_err("procMount");
    assert_eq!(
        e.to_string(),
        "spec.initContainers[0].securityContext.procMount: invalid value \"Unmasked\": `hostUsers` must be false to use `Unmasked`"
    );
    let stranger: Container = serde_json::from_value(json!({"name": "stranger"})).expect("c");
    req.container = &stranger;
    assert_eq!(
        build_spec(&req).expect_err("stranger").to_string(),
        "container \"stranger\" is not part of the pod"
    );
}

// ---- the rest of the spec ----

#[test]
fn annotations_root_cgroups_and_process_basics() {
    let cs = ok(&pod_with(json!({}), json!({})));
    let a = cs.spec.annotations().clone().expect("annotations");
    assert_eq!(
        a.get("io.kubernetes.pod.name").map(String::as_str),
        Some("web-node1")
    );
    assert_eq!(
        a.get("io.kubernetes.pod.namespace").map(String::as_str),
        Some("prod")
    );
    assert_eq!(
        a.get("io.kubernetes.pod.uid").map(String::as_str),
        Some("u-1")
    );
    assert_eq!(
        a.get("io.kubernetes.container.name").map(String::as_str),
        Some("c")
    );
    assert_eq!(a.len(), 4);
    let root = cs.spec.root().clone().expect("root");
    assert_eq!(root.path(), Path::new("/var/lib/podvisor/rootfs/c"));
    assert_eq!(
        linux(&cs).cgroups_path().clone(),
        Some(PathBuf::from("/podvisor/pod-u-1/c"))
    );
    let p = process(&cs);
    assert_eq!(p.terminal(), Some(false));
    assert_eq!(p.rlimits(), &None);
    assert_eq!((p.user().uid(), p.user().gid()), (0, 0));
    assert_eq!(cs.spec.hooks(), &None);
    assert_eq!(cs.stop_signal, libc::SIGTERM);
    // The spec survives a JSON round trip (what libcontainer reads from config.json).
    let text = serde_json::to_string(&cs.spec).expect("serialize");
    let back: Spec = serde_json::from_str(&text).expect("deserialize");
    assert_eq!(back, cs.spec);
}

// ---- hostUsers: false and procMount ----

#[test]
fn host_users_false_joins_the_pod_user_namespace_first_with_its_mapping() {
    let p = pod_with(
        json!({"securityContext": {"procMount": "Unmasked"}}),
        json!({"hostUsers": false}),
    );
    let mut sb = sandbox(false);
    sb.user_ns = Some((PathBuf::from("/run/podvisor/ns/user"), 3 << 16));
    let cs = build_with(&p, &image(json!({"Cmd": ["x"]})), &sb).expect("spec");
    let ns = linux(&cs).namespaces().clone().expect("namespaces");
    assert_eq!(ns[0].typ(), LinuxNamespaceType::User);
    assert_eq!(ns[0].path(), &Some(PathBuf::from("/run/podvisor/ns/user")));
    let maps = |m: &Option<Vec<oci_spec::runtime::LinuxIdMapping>>| {
        m.iter()
            .flatten()
            .map(|m| (m.container_id(), m.host_id(), m.size()))
            .collect::<Vec<_>>()
    };
    assert_eq!(maps(linux(&cs).uid_mappings()), [(0, 3 << 16, 65536)]);
    assert_eq!(maps(linux(&cs).gid_mappings()), [(0, 3 << 16, 65536)]);
    // procMount: Unmasked: no masked and no read-only /proc paths.
    assert_eq!(linux(&cs).masked_paths(), &None);
    assert_eq!(linux(&cs).readonly_paths(), &None);
    // Default keeps them.
    let p = pod_with(json!({}), json!({"hostUsers": false}));
    let cs = build_with(&p, &image(json!({"Cmd": ["x"]})), &sb).expect("spec");
    assert!(linux(&cs).masked_paths().is_some());
    // A sandbox without the user namespace (or one with it for a host-users pod) is refused.
    let e = build_with(&p, &image(json!({"Cmd": ["x"]})), &sandbox(false)).expect_err("none");
    assert!(e.to_string().contains("user namespace"), "{e}");
    let host = pod_with(json!({}), json!({}));
    let e = build_with(&host, &image(json!({"Cmd": ["x"]})), &sb).expect_err("extra");
    assert!(e.to_string().contains("user namespace"), "{e}");
}

#[test]
fn host_users_false_needs_linux_6_3_and_says_so() {
    let p = pod_with(json!({}), json!({"hostUsers": false}));
    let mut node = NodeSecurity::default();
    for (kernel, refused) in [
        ((6, 1), true),
        ((5, 15), true),
        ((6, 3), false),
        ((6, 18), false),
    ] {
        node.kernel = Some(crate::security::sysctl::KernelVersion {
            major: kernel.0,
            minor: kernel.1,
        });
        let v = crate::security::validate_pod(&p, &node);
        assert_eq!(!v.is_empty(), refused, "{kernel:?}: {v:?}");
        if refused {
            assert_eq!(v[0].field, "spec.hostUsers");
            assert!(
                v[0].message
                    .contains("idmapped mounts of tmpfs (Linux 6.3 or later)"),
                "{}",
                v[0].message
            );
            assert!(v[0]
                .message
                .contains(&format!("this node runs Linux {}.{}", kernel.0, kernel.1)));
            let e = build_on(&p, &node, &[]).expect_err("refused");
            assert!(
                e.to_string()
                    .starts_with("spec.hostUsers: invalid value \"false\""),
                "{e}"
            );
        }
    }
}
