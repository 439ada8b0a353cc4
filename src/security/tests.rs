use super::*;
use std::os::unix::fs::PermissionsExt;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec}))
        .expect("pod")
}

fn fields(v: &[Violation]) -> Vec<&str> {
    v.iter().map(|e| e.field.as_str()).collect()
}

fn node_with_profiles() -> (tempfile::TempDir, NodeSecurity) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("ok.json");
    std::fs::write(&p, r#"{"defaultAction": "SCMP_ACT_ALLOW"}"#).expect("write");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let node = NodeSecurity {
        seccomp_root: dir.path().to_path_buf(),
        ..NodeSecurity::default()
    };
    (dir, node)
}

#[test]
fn every_unsafe_sysctl_is_reported_with_its_field() {
    let p = pod(serde_json::json!({
        "hostNetwork": true,
        "securityContext": {"sysctls": [
            {"name": "kernel.shm_rmid_forced", "value": "1"},
            {"name": "net.core.somaxconn", "value": "1024"},
            {"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"},
            {"name": "kernel/shm_rmid_forced", "value": "0"},
            {"name": "vm.swappiness", "value": "10"}]},
        "containers": [{"name": "a"}]
    }));
    let v = validate_pod(&p, &NodeSecurity::default());
    assert_eq!(
        fields(&v),
        [1, 2, 3, 4].map(|i| format!("spec.securityContext.sysctls[{i}].name"))
    );
    assert!(v[1].message.contains("hostNetwork"), "{}", v[1].message);
    assert!(v[2].message.contains("duplicate"), "{}", v[2].message);
    assert!(pod_sysctls(&p, &NodeSecurity::default()).is_err());
    let ok = pod(serde_json::json!({
        "securityContext": {"sysctls": [{"name": "net/ipv4/ping_group_range", "value": "0 1"}]},
        "containers": [{"name": "a"}]
    }));
    assert_eq!(
        pod_sysctls(&ok, &NodeSecurity::default()),
        Ok(vec![("net.ipv4.ping_group_range".into(), "0 1".into())])
    );
}

#[test]
fn localhost_seccomp_profiles_must_exist_below_the_root() {
    let (_d, node) = node_with_profiles();
    let p = pod(serde_json::json!({
        "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "missing.json"}},
        "initContainers": [{"name": "i", "securityContext": {
            "seccompProfile": {"type": "Localhost", "localhostProfile": "ok.json"}}}],
        "containers": [
            {"name": "a"},
            {"name": "b"},
            {"name": "priv", "securityContext": {"privileged": true}}]
    }));
    let v = validate_pod(&p, &node);
    // Once for the pod-level field, though two containers use it; never for the privileged one.
    assert_eq!(
        fields(&v),
        ["spec.securityContext.seccompProfile.localhostProfile"]
    );
    assert!(v[0].message.contains("missing.json"), "{}", v[0].message);
}

#[test]
fn apparmor_profiles_need_apparmor() {
    let p = pod(serde_json::json!({
        "containers": [
            {"name": "a", "securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": "x"}}},
            {"name": "b", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}},
            {"name": "c"}]
    }));
    let v = validate_pod(&p, &NodeSecurity::default());
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.appArmorProfile"]
    );
    assert!(v[0].message.contains("not available"), "{}", v[0].message);
}

#[test]
fn seccomp_default_makes_unset_runtime_default_and_bad_types_are_named() {
    let p = pod(serde_json::json!({
        "containers": [{"name": "a", "securityContext": {"seccompProfile": {"type": "Strict"}}}]
    }));
    let v = validate_pod(&p, &NodeSecurity::default());
    assert_eq!(
        fields(&v),
        ["spec.containers[0].securityContext.seccompProfile.type"]
    );
}
