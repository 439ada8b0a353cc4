//! Shared builders for the spec tests: pods, images, sandboxes and accessors.

use super::*;
use serde_json::json;

pub(super) fn pod(v: serde_json::Value) -> Pod {
    serde_json::from_value(v).expect("pod json")
}

/// A pod with one container `c` whose fields are `container`, and pod spec extras.
pub(super) fn pod_with(container: serde_json::Value, spec_extra: serde_json::Value) -> Pod {
    let mut c = json!({"name": "c", "image": "img"});
    merge(&mut c, container);
    let mut spec = json!({"containers": [c]});
    merge(&mut spec, spec_extra);
    pod(json!({
        "metadata": {"name": "web-node1", "namespace": "prod", "uid": "u-1",
                     "labels": {"app": "web"}, "annotations": {"note": "hi"}},
        "spec": spec
    }))
}

pub(super) fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
    if let (Some(b), serde_json::Value::Object(e)) = (base.as_object_mut(), extra) {
        b.extend(e);
    }
}

pub(super) fn image(config: serde_json::Value) -> ImageConfiguration {
    serde_json::from_value(json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": []},
        "config": config
    }))
    .expect("image json")
}

pub(super) fn sandbox(host_network: bool) -> SandboxMounts {
    SandboxMounts {
        pid_ns: None,
        user_ns: None,
        network_ns: (!host_network).then(|| PathBuf::from("/run/podvisor/ns/net")),
        ipc_ns: PathBuf::from("/run/podvisor/ns/ipc"),
        uts_ns: (!host_network).then(|| PathBuf::from("/run/podvisor/ns/uts")),
        hosts: PathBuf::from("/var/lib/podvisor/p/hosts"),
        hostname: PathBuf::from("/var/lib/podvisor/p/hostname"),
        resolv_conf: PathBuf::from("/var/lib/podvisor/p/resolv.conf"),
        shm: PathBuf::from("/var/lib/podvisor/p/shm"),
        volumes: BTreeMap::from([
            (
                "data".to_string(),
                PathBuf::from("/var/lib/podvisor/p/volumes/data"),
            ),
            ("logs".to_string(), PathBuf::from("/var/log/app")),
        ]),
        pod_ips: Vec::new(),
    }
}

pub(super) fn node() -> NodeInfo {
    NodeInfo {
        name: "node1".into(),
        cpu_millis: 2000,
        memory_bytes: 4 << 30,
        host_ip: "192.0.2.10".into(),
        bounding_capabilities: ALL_CAPABILITIES.into_iter().collect(),
    }
}

pub(super) fn build_with(
    p: &Pod,
    img: &ImageConfiguration,
    sb: &SandboxMounts,
) -> Result<ContainerSpec, SpecError> {
    let spec = p.spec.as_ref().expect("spec");
    let container = &spec.containers[0];
    let n = node();
    build_spec(&SpecRequest {
        pod: p,
        container,
        image: img,
        rootfs: Path::new("/var/lib/podvisor/rootfs/c"),
        sandbox: sb,
        cgroups_path: "/podvisor/pod-u-1/c",
        node: &n,
        critical: false,
        security: &NodeSecurity {
            // Not the default /var/lib/podvisor/seccomp: whether that exists depends on
            // what ran on this machine before (a daemon, a package), not on the test.
            seccomp_root: PathBuf::from("/nonexistent/podvisor-test/seccomp"),
            ..NodeSecurity::default()
        },
        host_devices: &[],
        sub_paths: SubPaths::Open,
    })
}

/// Builds the first container of `p` on a node offering `security`.
pub(super) fn build_on(
    p: &Pod,
    security: &NodeSecurity,
    host_devices: &[LinuxDevice],
) -> Result<ContainerSpec, SpecError> {
    build_spec(&SpecRequest {
        pod: p,
        container: &p.spec.as_ref().expect("spec").containers[0],
        image: &image(json!({"Cmd": ["x"]})),
        rootfs: Path::new("/r"),
        sandbox: &sandbox(false),
        cgroups_path: "/x",
        node: &node(),
        critical: false,
        security,
        host_devices,
        sub_paths: SubPaths::Open,
    })
}

pub(super) fn build(p: &Pod) -> Result<ContainerSpec, SpecError> {
    let host_network = p
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    build_with(
        p,
        &image(json!({"Entrypoint": ["/bin/app"], "Cmd": ["--serve"]})),
        &sandbox(host_network),
    )
}

pub(super) fn ok(p: &Pod) -> ContainerSpec {
    build(p).expect("build_spec")
}

pub(super) fn err(p: &Pod) -> String {
    build(p).expect_err("build_spec must fail").to_string()
}

pub(super) fn process(cs: &ContainerSpec) -> &Process {
    cs.spec.process().as_ref().expect("process")
}

pub(super) fn linux(cs: &ContainerSpec) -> &Linux {
    cs.spec.linux().as_ref().expect("linux")
}

pub(super) fn args(cs: &ContainerSpec) -> Vec<String> {
    process(cs).args().clone().expect("args")
}

pub(super) fn env(cs: &ContainerSpec) -> Vec<String> {
    process(cs).env().clone().expect("env")
}

pub(super) fn env_value(cs: &ContainerSpec, key: &str) -> Option<String> {
    env(cs)
        .iter()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_string))
}

pub(super) fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub(super) fn mount_summary(cs: &ContainerSpec) -> Vec<(String, String, String, String)> {
    cs.spec
        .mounts()
        .clone()
        .expect("mounts")
        .iter()
        .map(|m| {
            (
                m.destination().display().to_string(),
                m.typ().clone().unwrap_or_default(),
                m.source().clone().unwrap_or_default().display().to_string(),
                m.options().clone().unwrap_or_default().join(","),
            )
        })
        .collect()
}

pub(super) fn row(d: &str, t: &str, s: &str, o: &str) -> (String, String, String, String) {
    (d.into(), t.into(), s.into(), o.into())
}
