//! Confinement from the security context: capabilities, no_new_privileges, sysctls, seccomp
//! and AppArmor (the node-side policies live in [`crate::security`]).

use super::invalid;
use super::Ctx;
use super::SpecError;
use crate::security::apparmor;
use crate::security::seccomp;
use crate::security::NodeSecurity;
use crate::security::DEFAULT_CAPABILITIES;
use oci_spec::runtime::Capabilities;
use oci_spec::runtime::Capability;
use oci_spec::runtime::LinuxCapabilities;
use oci_spec::runtime::LinuxSeccomp;
use std::collections::HashMap;

pub(super) fn parse_capability(name: &str, field: String) -> Result<Capability, SpecError> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| invalid(field, name, "unknown capability"))
}

pub(super) fn capabilities(
    ctx: &Ctx<'_>,
    privileged: bool,
) -> Result<LinuxCapabilities, SpecError> {
    let host = &ctx.node.bounding_capabilities;
    let mut set: Capabilities = if privileged {
        host.clone()
    } else {
        DEFAULT_CAPABILITIES
            .into_iter()
            .filter(|c| host.contains(c))
            .collect()
    };
    let caps = ctx.sc().and_then(|s| s.capabilities.as_ref());
    let add = caps.and_then(|c| c.add.clone()).unwrap_or_default();
    let drop = caps.and_then(|c| c.drop.clone()).unwrap_or_default();
    // Validate every name, even when privileged makes them moot.
    let parse = |list: &[String], kind: &str| -> Result<Vec<Option<Capability>>, SpecError> {
        list.iter()
            .enumerate()
            .map(|(i, n)| {
                if n.eq_ignore_ascii_case("ALL") {
                    return Ok(None);
                }
                let f = ctx.field(&format!("securityContext.capabilities.{kind}[{i}]"));
                let cap = parse_capability(n, f.clone())?;
                if kind == "add" && !privileged && !host.contains(&cap) {
                    return Err(invalid(
                        f,
                        n,
                        "podvisor itself does not hold this capability",
                    ));
                }
                Ok(Some(cap))
            })
            .collect()
    };
    let add = parse(&add, "add")?;
    let drop = parse(&drop, "drop")?;
    if !privileged {
        // containerd's order: add ALL, drop ALL, then the individual adds and drops.
        if add.iter().any(Option::is_none) {
            set.extend(host.iter().copied());
        }
        if drop.iter().any(Option::is_none) {
            set.clear();
        }
        set.extend(add.iter().flatten().copied());
        for c in drop.iter().flatten() {
            set.remove(c);
        }
    }
    let mut lc = LinuxCapabilities::default();
    lc.set_bounding(Some(set.clone()));
    lc.set_effective(Some(set.clone()));
    lc.set_permitted(Some(set));
    lc.set_inheritable(Some(Capabilities::new()));
    lc.set_ambient(Some(Capabilities::new()));
    Ok(lc)
}

pub(super) fn no_new_privileges(ctx: &Ctx<'_>, privileged: bool) -> Result<bool, SpecError> {
    let Some(false) = ctx.sc().and_then(|s| s.allow_privilege_escalation) else {
        return Ok(false);
    };
    let field = ctx.field("securityContext.allowPrivilegeEscalation");
    if privileged {
        return Err(invalid(
            field,
            "false",
            "cannot set allowPrivilegeEscalation to false and privileged to true",
        ));
    }
    let adds_sys_admin = ctx
        .sc()
        .and_then(|s| s.capabilities.as_ref())
        .and_then(|c| c.add.as_ref())
        .is_some_and(|a| {
            a.iter().any(|n| {
                let u = n.to_ascii_uppercase();
                u == "SYS_ADMIN" || u == "CAP_SYS_ADMIN"
            })
        });
    if adds_sys_admin {
        return Err(invalid(
            field,
            "false",
            "cannot set allowPrivilegeEscalation to false and capabilities.Add CAP_SYS_ADMIN",
        ));
    }
    Ok(true)
}

/// The pod's sysctls in `.` form, as the node allows them.
pub(super) fn sysctls(
    ctx: &Ctx<'_>,
    node: &NodeSecurity,
) -> Result<Option<HashMap<String, String>>, SpecError> {
    let list = crate::security::pod_sysctls(ctx.pod, node).map_err(SpecError::Security)?;
    Ok((!list.is_empty()).then(|| list.into_iter().collect()))
}

/// The container's seccomp filter: none for privileged containers and Unconfined, containerd's
/// default profile for its bounding capabilities, or the Localhost profile file.
pub(super) fn seccomp_filter(
    ctx: &Ctx<'_>,
    privileged: bool,
    caps: &LinuxCapabilities,
    node: &NodeSecurity,
) -> Result<Option<LinuxSeccomp>, SpecError> {
    let (choice, field) = seccomp::choice(ctx.spec, ctx.container, &ctx.path, node.seccomp_default)
        .map_err(SpecError::Security)?;
    if privileged {
        return Ok(None);
    }
    let profile = match choice {
        seccomp::SeccompChoice::Unconfined => return Ok(None),
        seccomp::SeccompChoice::RuntimeDefault => seccomp::runtime_default(
            node.arch,
            caps.bounding().as_ref().unwrap_or(&Capabilities::new()),
            node.kernel,
        ),
        seccomp::SeccompChoice::Localhost(rel) => seccomp::load_localhost(&node.seccomp_root, &rel)
            .map_err(|source| SpecError::SeccompProfile {
                field: format!(
                    "{}.localhostProfile",
                    field.unwrap_or_else(|| ctx.field("securityContext.seccompProfile"))
                ),
                source,
            })?,
    };
    Ok(Some(seccomp::for_libcontainer(profile)))
}

/// The AppArmor profile the container runs under, if any.
pub(super) fn apparmor_profile(
    ctx: &Ctx<'_>,
    privileged: bool,
    node: &NodeSecurity,
) -> Result<Option<String>, SpecError> {
    let (choice, field) =
        apparmor::choice(ctx.pod, ctx.container, &ctx.path).map_err(SpecError::Security)?;
    apparmor::resolve(&choice, field.as_deref(), privileged, &node.apparmor)
        .map_err(SpecError::Security)
}

#[cfg(test)]
mod tests {
    use super::super::build_spec;
    use super::super::capabilities_from_mask;
    use super::super::current_bounding_capabilities;
    use super::super::testutil::*;
    use super::super::ContainerSpec;
    use super::super::NodeInfo;
    use super::super::SubPaths;
    use super::super::ALL_CAPABILITIES;
    use super::*;
    use crate::runtime::spec::SpecRequest;
    use crate::security::MASKED_PATHS;
    use crate::security::READONLY_PATHS;
    use k8s_openapi::api::core::v1::Pod;
    use oci_spec::runtime::LinuxDevice;
    use serde_json::json;
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;
    use std::path::PathBuf;

    // ---- security ----

    fn caps(cs: &ContainerSpec) -> (Vec<String>, bool) {
        let c = process(cs).capabilities().clone().expect("caps");
        let mut b: Vec<String> = c
            .bounding()
            .clone()
            .expect("b")
            .iter()
            .map(|c| c.to_string())
            .collect();
        b.sort();
        let same = c.bounding() == c.effective() && c.bounding() == c.permitted();
        let empty = c.inheritable().as_ref().is_some_and(|s| s.is_empty())
            && c.ambient().as_ref().is_some_and(|s| s.is_empty());
        (b, same && empty)
    }

    #[test]
    fn default_capabilities_masked_and_readonly_paths() {
        let cs = ok(&pod_with(json!({}), json!({})));
        let (c, consistent) = caps(&cs);
        assert!(consistent);
        let mut want: Vec<String> = DEFAULT_CAPABILITIES.iter().map(|c| c.to_string()).collect();
        want.sort();
        assert_eq!(c, want);
        assert_eq!(c.len(), 14);
        assert_eq!(linux(&cs).masked_paths().clone(), Some(strs(&MASKED_PATHS)));
        assert_eq!(
            linux(&cs).readonly_paths().clone(),
            Some(strs(&READONLY_PATHS))
        );
        assert_eq!(process(&cs).no_new_privileges(), None);
        assert_eq!(
            cs.spec.root().as_ref().expect("root").readonly(),
            Some(false)
        );
    }

    #[test]
    fn capability_add_and_drop() {
        let p = pod_with(
            json!({"securityContext": {"capabilities": {"add": ["NET_ADMIN", "cap_sys_time"], "drop": ["CAP_CHOWN", "kill"]}}}),
            json!({}),
        );
        let (c, _) = caps(&ok(&p));
        assert!(c.contains(&"NET_ADMIN".to_string()) && c.contains(&"SYS_TIME".to_string()));
        assert!(!c.contains(&"CHOWN".to_string()) && !c.contains(&"KILL".to_string()));
        assert_eq!(c.len(), 14);
        let p = pod_with(
            json!({"securityContext": {"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}),
            json!({}),
        );
        assert_eq!(caps(&ok(&p)).0, strs(&["NET_BIND_SERVICE"]));
        let p = pod_with(
            json!({"securityContext": {"capabilities": {"add": ["all"], "drop": ["SYS_ADMIN"]}}}),
            json!({}),
        );
        let (c, _) = caps(&ok(&p));
        assert_eq!(c.len(), ALL_CAPABILITIES.len() - 1);
        let p = pod_with(
            json!({"securityContext": {"capabilities": {"add": ["NET_ADMIN", "FLY"]}}}),
            json!({}),
        );
        assert_eq!(
            err(&p),
            "spec.containers[0].securityContext.capabilities.add[1]: invalid value \"FLY\": unknown capability"
        );
    }

    #[test]
    fn privileged_gets_everything() {
        let p = pod_with(
            json!({"securityContext": {"privileged": true, "capabilities": {"drop": ["ALL"]},
                                       "seccompProfile": {"type": "RuntimeDefault"}}}),
            json!({}),
        );
        let mut loop0 = LinuxDevice::default();
        loop0.set_path(PathBuf::from("/dev/loop0"));
        loop0.set_typ(oci_spec::runtime::LinuxDeviceType::B);
        loop0.set_major(7);
        let (dir, security) = apparmor_node(&format!("{} (enforce)\n", apparmor::DEFAULT_PROFILE));
        let build = |c: &Pod| build_on(c, &security, std::slice::from_ref(&loop0));
        let cs = build(&p).expect("privileged");
        assert_eq!(caps(&cs).0.len(), ALL_CAPABILITIES.len());
        assert_eq!(linux(&cs).masked_paths(), &None);
        assert_eq!(linux(&cs).readonly_paths(), &None);
        assert_eq!(linux(&cs).seccomp(), &None);
        assert_eq!(process(&cs).apparmor_profile(), &None);
        assert_eq!(linux(&cs).devices().clone(), Some(vec![loop0.clone()]));
        let m = mount_summary(&cs);
        assert_eq!(m[4].3, "nosuid,noexec,nodev,rw");
        assert_eq!(m[5].3, "nosuid,noexec,nodev,relatime,rw");
        let devices = linux(&cs)
            .resources()
            .clone()
            .expect("res")
            .devices()
            .clone()
            .expect("dev");
        assert_eq!(
            devices.iter().map(|d| d.to_string()).collect::<Vec<_>>(),
            strs(&["a *:* rwm"])
        );
        // The same request without privileged: no host devices, the default AppArmor profile.
        let plain = pod_with(json!({}), json!({}));
        let cs = build(&plain).expect("plain");
        assert_eq!(linux(&cs).devices(), &None);
        assert_eq!(
            process(&cs).apparmor_profile().as_deref(),
            Some(apparmor::DEFAULT_PROFILE)
        );
        drop(dir);
    }

    /// A node with AppArmor whose loaded profiles are `profiles`.
    fn apparmor_node(profiles: &str) -> (tempfile::TempDir, NodeSecurity) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("profiles"), profiles).expect("write");
        let security = NodeSecurity {
            apparmor: apparmor::AppArmorHost::Enabled {
                securityfs: dir.path().to_path_buf(),
                default_profile: apparmor::DefaultProfile::Available,
            },
            ..NodeSecurity::default()
        };
        (dir, security)
    }

    #[test]
    fn device_cgroup_rules_are_containerds() {
        let cs = ok(&pod_with(json!({}), json!({})));
        let devices = linux(&cs)
            .resources()
            .clone()
            .expect("res")
            .devices()
            .clone()
            .expect("dev");
        assert_eq!(devices, crate::security::devices::cgroup_rules(false));
        assert_eq!(linux(&cs).devices(), &None);
    }

    #[test]
    fn allow_privilege_escalation_false_sets_no_new_privileges() {
        let p = pod_with(
            json!({"securityContext": {"allowPrivilegeEscalation": false}}),
            json!({}),
        );
        assert_eq!(process(&ok(&p)).no_new_privileges(), Some(true));
        let p = pod_with(
            json!({"securityContext": {"allowPrivilegeEscalation": false, "privileged": true}}),
            json!({}),
        );
        assert!(err(&p).starts_with("spec.containers[0].securityContext.allowPrivilegeEscalation"));
        let p = pod_with(
            json!({"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"add": ["SYS_ADMIN"]}}}),
            json!({}),
        );
        assert!(err(&p).contains("CAP_SYS_ADMIN"));
    }

    #[test]
    fn sysctls_from_pod_security_context() {
        let p = pod_with(
            json!({}),
            json!({"securityContext": {"sysctls": [
                {"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"},
                {"name": "net/ipv4/ping_group_range", "value": "0 2147483647"}
            ]}}),
        );
        let s = linux(&ok(&p)).sysctl().clone().expect("sysctl");
        assert_eq!(
            s.get("net.ipv4.ip_local_port_range").map(String::as_str),
            Some("1024 65000")
        );
        assert_eq!(
            s.get("net.ipv4.ping_group_range").map(String::as_str),
            Some("0 2147483647")
        );
        assert_eq!(linux(&ok(&pod_with(json!({}), json!({})))).sysctl(), &None);
        for (name, want) in [
            ("a b", "not a valid sysctl name"),
            ("net.core.somaxconn", "allowedUnsafeSysctls"),
        ] {
            let bad = pod_with(
                json!({}),
                json!({"securityContext": {"sysctls": [{"name": name, "value": "1"}]}}),
            );
            let e = err(&bad);
            assert!(e.starts_with("spec.securityContext.sysctls[0].name"), "{e}");
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn seccomp_profiles() {
        let none = ok(&pod_with(json!({}), json!({})));
        assert_eq!(linux(&none).seccomp(), &None);
        let pod_rd = pod_with(
            json!({}),
            json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
        );
        let s = linux(&ok(&pod_rd)).seccomp().clone().expect("seccomp");
        // containerd's allow-list; the clone rule in libcontainer's argument order.
        assert_eq!(
            s.default_action(),
            oci_spec::runtime::LinuxSeccompAction::ScmpActErrno
        );
        let allowed = seccomp::allowed_syscalls(&s);
        assert!(allowed.contains("read") && allowed.contains("clone"));
        assert!(!allowed.contains("mount") && !allowed.contains("unshare"));
        let clone = s
            .syscalls()
            .iter()
            .flatten()
            .find(|r| r.names().iter().any(|n| n == "clone"))
            .expect("clone rule");
        let arg = &clone.args().clone().expect("args")[0];
        assert_eq!((arg.value(), arg.value_two()), (0, Some(0x7e02_0000)));
        // CAP_SYS_ADMIN added: mount and unshare allowed, clone unconditional.
        let admin = pod_with(
            json!({"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]},
                                       "seccompProfile": {"type": "RuntimeDefault"}}}),
            json!({}),
        );
        let s = linux(&ok(&admin)).seccomp().clone().expect("seccomp");
        assert!(seccomp::allowed_syscalls(&s).contains("mount"));
        // The container's Unconfined overrides the pod's RuntimeDefault.
        let overridden = pod_with(
            json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
            json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
        );
        assert_eq!(linux(&ok(&overridden)).seccomp(), &None);
        let bad = pod_with(
            json!({}),
            json!({"securityContext": {"seccompProfile": {"type": "Strict"}}}),
        );
        assert!(err(&bad)
            .starts_with("spec.securityContext.seccompProfile.type: \"Strict\" is not one of"));
    }

    #[test]
    fn seccomp_default_and_localhost_profiles() {
        let dir = tempfile::tempdir().expect("tempdir");
        let profile = dir.path().join("deny-mkdir.json");
        std::fs::write(
            &profile,
            r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["clone"],
                "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 256, "valueTwo": 256,
                "op": "SCMP_CMP_MASKED_EQ"}]}]}"#,
        )
        .expect("write");
        std::fs::set_permissions(&profile, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let security = NodeSecurity {
            seccomp_default: true,
            seccomp_root: dir.path().to_path_buf(),
            ..NodeSecurity::default()
        };
        let build = |p: &Pod| build_on(p, &security, &[]);
        // seccompDefault: unset means RuntimeDefault.
        let unset = build(&pod_with(json!({}), json!({}))).expect("unset");
        assert_eq!(
            linux(&unset).seccomp().as_ref().map(|s| s.default_action()),
            Some(oci_spec::runtime::LinuxSeccompAction::ScmpActErrno)
        );
        let local = pod_with(
            json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "deny-mkdir.json"}}}),
            json!({}),
        );
        let s = linux(&build(&local).expect("localhost"))
            .seccomp()
            .clone()
            .expect("seccomp");
        assert_eq!(
            s.default_action(),
            oci_spec::runtime::LinuxSeccompAction::ScmpActAllow
        );
        let rules = s.syscalls().clone().expect("rules");
        assert_eq!(rules[0].names(), &strs(&["clone"]));
        let missing = pod_with(
            json!({"securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "gone.json"}}}),
            json!({}),
        );
        let e = build(&missing).expect_err("missing").to_string();
        assert!(
            e.starts_with("spec.containers[0].securityContext.seccompProfile.localhostProfile: "),
            "{e}"
        );
    }

    #[test]
    fn apparmor_profiles() {
        let (_d, security) = apparmor_node("podvisor-default (enforce)\nmine (enforce)\n");
        let profile = |c: serde_json::Value| {
            let p = pod_with(json!({"securityContext": c}), json!({}));
            build_on(&p, &security, &[]).map(|cs| process(&cs).apparmor_profile().clone())
        };
        assert_eq!(
            profile(json!({})).expect("default"),
            Some("podvisor-default".into())
        );
        assert_eq!(
            profile(json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "mine"}}))
                .expect("mine"),
            Some("mine".into())
        );
        assert_eq!(
            profile(json!({"privileged": true, "appArmorProfile": {"type": "Localhost", "localhostProfile": "mine"}}))
                .expect("privileged localhost"),
            Some("mine".into())
        );
        assert_eq!(
            profile(json!({"appArmorProfile": {"type": "Unconfined"}})).expect("unconfined"),
            None
        );
        let e = profile(
            json!({"appArmorProfile": {"type": "Localhost", "localhostProfile": "theirs"}}),
        )
        .expect_err("not loaded")
        .to_string();
        assert!(e.contains("\"theirs\" is not loaded"), "{e}");
        // On a host without AppArmor, containers that ask for nothing get no profile.
        assert_eq!(
            process(&ok(&pod_with(json!({}), json!({})))).apparmor_profile(),
            &None
        );
    }

    #[test]
    fn capabilities_are_limited_to_podvisors_bounding_set() {
        // Bit 24 (CAP_SYS_RESOURCE) missing, as on some container hosts.
        let host = capabilities_from_mask(0x1ff_feff_ffff);
        assert_eq!(host.len(), 40);
        assert!(!host.contains(&Capability::SysResource));
        assert!(host.contains(&Capability::CheckpointRestore));
        let mut n = node();
        n.bounding_capabilities = host.clone();
        let img = image(json!({"Cmd": ["x"]}));
        let sb = sandbox(false);
        let run = |c: serde_json::Value, n: &NodeInfo| {
            let p = pod_with(json!({"securityContext": c}), json!({}));
            build_spec(&SpecRequest {
                pod: &p,
                container: &p.spec.as_ref().expect("spec").containers[0],
                image: &img,
                rootfs: Path::new("/r"),
                sandbox: &sb,
                cgroups_path: "/x",
                node: n,
                critical: false,
                security: &NodeSecurity::default(),
                host_devices: &[],
                sub_paths: SubPaths::Open,
            })
        };
        let cs = run(json!({"privileged": true}), &n).expect("privileged");
        let bounding = process(&cs)
            .capabilities()
            .clone()
            .expect("caps")
            .bounding()
            .clone();
        assert_eq!(bounding, Some(host.clone()));
        let cs = run(json!({"capabilities": {"add": ["ALL"]}}), &n).expect("all");
        assert_eq!(caps(&cs).0.len(), 40);
        let e = run(json!({"capabilities": {"add": ["SYS_RESOURCE"]}}), &n).expect_err("missing");
        assert_eq!(
            e.to_string(),
            "spec.containers[0].securityContext.capabilities.add[0]: invalid value \"SYS_RESOURCE\": podvisor itself does not hold this capability"
        );
        // Defaults outside the bounding set are left out.
        n.bounding_capabilities = capabilities_from_mask(!(1u64 << 27));
        let cs = run(json!({}), &n).expect("no mknod");
        assert_eq!(caps(&cs).0.len(), 13);
        assert!(!caps(&cs).0.contains(&"MKNOD".to_string()));
        assert!(current_bounding_capabilities()
            .expect("self")
            .contains(&Capability::Chown));
    }
}
