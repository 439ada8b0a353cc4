//! seccomp: which seccomp filter a container gets and what it contains, as the kubelet and
//! containerd's CRI plugin decide it together.
//!
//! - The profile: the container's `securityContext.seccompProfile`, else the pod's, else
//!   `RuntimeDefault` when the KubeletConfiguration sets `seccompDefault: true`, else
//!   `Unconfined` (the kubelet's default). Privileged containers are never filtered, whatever
//!   the profile (containerd).
//! - `RuntimeDefault` is containerd's default profile ([`super::seccomp_default`]) evaluated
//!   for this host's architecture, the container's bounding capabilities and the kernel.
//! - `Localhost` reads `<root-dir>/seccomp/<localhostProfile>`, an OCI `LinuxSeccomp` JSON
//!   document as containerd reads it (the kubelet's `<root-dir>/seccomp` profile root).
//!   The path is relative without `..` (API validation) and is opened with
//!   `openat2(RESOLVE_BENEATH)`, so a symlink cannot reach outside the profile root; the file
//!   must belong to root and not be writable by group or others (whoever can write it can
//!   unconfine containers); notify actions are refused (podvisor runs no seccomp agent).
//!
//! libcontainer 0.7 reads an OCI `SCMP_CMP_MASKED_EQ` argument with `value` and `valueTwo`
//! swapped (`valueTwo` as the mask) where runc and the runtime spec take `value` as the mask:
//! [`for_libcontainer`] swaps them in the spec podvisor hands it, so `clone` without namespace
//! flags stays allowed.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

use k8s_openapi::api::core::v1::{Container, PodSpec, SeccompProfile};
use oci_spec::runtime::{
    Arch, Capabilities, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder,
    LinuxSeccompOperator, LinuxSyscall,
};

use super::seccomp_default::{self, ArgOp, HostArch, Rule, When};
use super::sysctl::KernelVersion;
use super::{profile_type, ProfileType, Violation};

/// Largest Localhost profile read (Docker's default profile is ~20 KB).
const MAX_PROFILE_BYTES: u64 = 1 << 20;

/// The filter a container asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeccompChoice {
    Unconfined,
    RuntimeDefault,
    /// A path below the profile root, as written.
    Localhost(String),
}

/// The profile of a container and the field it comes from (`None`: the node default).
pub fn choice(
    spec: &PodSpec,
    container: &Container,
    container_path: &str,
    seccomp_default: bool,
) -> Result<(SeccompChoice, Option<String>), Violation> {
    let from_container = container
        .security_context
        .as_ref()
        .and_then(|s| s.seccomp_profile.as_ref())
        .map(|p| {
            (
                p,
                format!("{container_path}.securityContext.seccompProfile"),
            )
        });
    let from_pod = || {
        spec.security_context
            .as_ref()
            .and_then(|s| s.seccomp_profile.as_ref())
            .map(|p| (p, "spec.securityContext.seccompProfile".to_string()))
    };
    match from_container.or_else(from_pod) {
        Some((p, field)) => parse_profile(p, &field).map(|c| (c, Some(field))),
        None if seccomp_default => Ok((SeccompChoice::RuntimeDefault, None)),
        None => Ok((SeccompChoice::Unconfined, None)),
    }
}

fn parse_profile(p: &SeccompProfile, field: &str) -> Result<SeccompChoice, Violation> {
    match profile_type(&p.type_, p.localhost_profile.as_deref(), field)? {
        ProfileType::Unconfined => Ok(SeccompChoice::Unconfined),
        ProfileType::RuntimeDefault => Ok(SeccompChoice::RuntimeDefault),
        ProfileType::Localhost(localhost) => {
            let path = localhost.filter(|s| !s.is_empty()).ok_or_else(|| {
                Violation::new(
                    format!("{field}.localhostProfile"),
                    "required when type is Localhost",
                )
            })?;
            let p = Path::new(path);
            if p.is_absolute() || p.components().any(|c| c == Component::ParentDir) {
                return Err(Violation::new(
                    format!("{field}.localhostProfile"),
                    format!(
                        "{path:?} must be a relative path below the seccomp profile root, \
                         without '..'"
                    ),
                ));
            }
            Ok(SeccompChoice::Localhost(path.to_string()))
        }
    }
}

/// containerd's architectures for the host: the native one plus the compat ABIs it runs.
pub fn architectures(arch: HostArch) -> Vec<Arch> {
    match arch {
        HostArch::X86_64 => vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32],
        HostArch::X86 => vec![Arch::ScmpArchX86],
        HostArch::Aarch64 => vec![Arch::ScmpArchArm, Arch::ScmpArchAarch64],
        HostArch::Arm => vec![Arch::ScmpArchArm],
        HostArch::Ppc64le => vec![Arch::ScmpArchPpc64le],
        HostArch::S390x => vec![Arch::ScmpArchS390, Arch::ScmpArchS390x],
        HostArch::Riscv64 => vec![Arch::ScmpArchRiscv64],
        HostArch::Other => vec![Arch::ScmpArchNative],
    }
}

fn applies(
    when: &When,
    arch: HostArch,
    bounding: &Capabilities,
    kernel: Option<KernelVersion>,
) -> bool {
    (when.arches.is_empty() || when.arches.contains(&arch))
        && !when.not_arches.contains(&arch)
        && when.cap.is_none_or(|c| bounding.contains(&c))
        && when.without_cap.is_none_or(|c| !bounding.contains(&c))
        // containerd leaves kernel-gated rules out when the kernel version is unknown.
        && when
            .min_kernel
            .is_none_or(|min| kernel.is_some_and(|k| k >= min))
}

fn oci_rule(rule: &Rule) -> LinuxSyscall {
    let mut s = LinuxSyscall::default();
    s.set_names(rule.names.iter().map(|n| n.to_string()).collect());
    match rule.errno {
        None => {
            s.set_action(LinuxSeccompAction::ScmpActAllow);
        }
        Some(errno) => {
            s.set_action(LinuxSeccompAction::ScmpActErrno);
            s.set_errno_ret(Some(errno));
        }
    }
    if !rule.args.is_empty() {
        s.set_args(Some(
            rule.args
                .iter()
                .map(|a| {
                    let op = match a.op {
                        ArgOp::Eq => LinuxSeccompOperator::ScmpCmpEq,
                        ArgOp::Lt => LinuxSeccompOperator::ScmpCmpLt,
                        ArgOp::Gt => LinuxSeccompOperator::ScmpCmpGt,
                        ArgOp::MaskedEq => LinuxSeccompOperator::ScmpCmpMaskedEq,
                    };
                    seccomp_arg(a.index as usize, a.value, a.value_two, op)
                })
                .collect(),
        ));
    }
    s
}

fn seccomp_arg(
    index: usize,
    value: u64,
    value_two: u64,
    op: LinuxSeccompOperator,
) -> LinuxSeccompArg {
    LinuxSeccompArgBuilder::default()
        .index(index)
        .value(value)
        .value_two(value_two)
        .op(op)
        .build()
        // Cannot fail: every field of the builder has a value or a default.
        .unwrap_or_default()
}

/// containerd's default profile for a container with `bounding` capabilities, in OCI terms
/// (runtime-spec argument order; see [`for_libcontainer`]).
pub fn runtime_default(
    arch: HostArch,
    bounding: &Capabilities,
    kernel: Option<KernelVersion>,
) -> LinuxSeccomp {
    let mut s = LinuxSeccomp::default();
    s.set_default_action(LinuxSeccompAction::ScmpActErrno);
    s.set_default_errno_ret(Some(seccomp_default::DEFAULT_ERRNO));
    s.set_architectures(Some(architectures(arch)));
    s.set_syscalls(Some(
        seccomp_default::RULES
            .iter()
            .filter(|r| applies(&r.when, arch, bounding, kernel))
            .map(oci_rule)
            .collect(),
    ));
    s
}

/// The distinct syscall names a profile allows unconditionally or under argument checks.
pub fn allowed_syscalls(profile: &LinuxSeccomp) -> std::collections::BTreeSet<String> {
    profile
        .syscalls()
        .iter()
        .flatten()
        .filter(|s| s.action() == LinuxSeccompAction::ScmpActAllow)
        .flat_map(|s| s.names().iter().cloned())
        .collect()
}

/// The profile with every `SCMP_CMP_MASKED_EQ` argument in the order libcontainer 0.7 reads
/// it (mask in `valueTwo`).
pub fn for_libcontainer(mut profile: LinuxSeccomp) -> LinuxSeccomp {
    if let Some(rules) = profile.syscalls().clone() {
        let swapped = rules
            .into_iter()
            .map(|mut rule| {
                if let Some(args) = rule.args().clone() {
                    rule.set_args(Some(
                        args.into_iter()
                            .map(|mut a| {
                                if a.op() == LinuxSeccompOperator::ScmpCmpMaskedEq {
                                    let (mask, datum) = (a.value(), a.value_two().unwrap_or(0));
                                    a = seccomp_arg(a.index(), datum, mask, a.op());
                                }
                                a
                            })
                            .collect(),
                    ));
                }
                rule
            })
            .collect();
        profile.set_syscalls(Some(swapped));
    }
    profile
}

/// Why a Localhost profile cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LocalhostError {
    #[error("seccomp profile root {root}: {source}")]
    Root {
        root: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Unsafe {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("{path}: not an OCI seccomp profile: {source}")]
    Parse {
        path: std::path::PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}: {message}")]
    Unsupported {
        path: std::path::PathBuf,
        message: String,
    },
}

/// Reads and checks the Localhost profile `rel` below `root`.
pub fn load_localhost(root: &Path, rel: &str) -> Result<LinuxSeccomp, LocalhostError> {
    let path = root.join(rel);
    let root_fd = crate::sys::at::open_root(root).map_err(|source| LocalhostError::Root {
        root: root.to_path_buf(),
        source,
    })?;
    let open_err = |source| LocalhostError::Open {
        path: path.clone(),
        source,
    };
    let fd = crate::sys::at::openat2_in_root(
        &root_fd,
        Path::new(rel),
        // O_NONBLOCK: a FIFO planted there must not hang the daemon.
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOCTTY,
        rustix::fs::ResolveFlags::BENEATH | rustix::fs::ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| match e.raw_os_error() {
        Some(libc::EXDEV) => LocalhostError::Unsafe {
            path: path.clone(),
            message: "resolves outside the seccomp profile root".into(),
        },
        _ => open_err(e),
    })?;
    let mut file = std::fs::File::from(fd);
    let md = file.metadata().map_err(open_err)?;
    let unsafe_err = |message: String| LocalhostError::Unsafe {
        path: path.clone(),
        message,
    };
    if !md.is_file() {
        return Err(unsafe_err("not a regular file".into()));
    }
    if md.uid() != 0 || md.mode() & 0o022 != 0 {
        return Err(unsafe_err(format!(
            "must belong to root and not be writable by group or others (owner uid {}, \
             mode {:o}): whoever can write it can unconfine containers",
            md.uid(),
            md.mode() & 0o7777
        )));
    }
    if md.len() > MAX_PROFILE_BYTES {
        return Err(unsafe_err(format!(
            "{} bytes, over the {MAX_PROFILE_BYTES}-byte profile limit",
            md.len()
        )));
    }
    let mut data = Vec::new();
    (&mut file)
        .take(MAX_PROFILE_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(open_err)?;
    let profile: LinuxSeccomp =
        serde_json::from_slice(&data).map_err(|source| LocalhostError::Parse {
            path: path.clone(),
            source,
        })?;
    let unsupported = |message: &str| LocalhostError::Unsupported {
        path: path.clone(),
        message: message.into(),
    };
    if profile.listener_path().is_some() || libcontainer::seccomp::is_notify(&profile) {
        return Err(unsupported(
            "SCMP_ACT_NOTIFY and listenerPath need a seccomp agent, which podvisor does not run",
        ));
    }
    if profile.default_action() == LinuxSeccompAction::ScmpActNotify {
        return Err(unsupported("SCMP_ACT_NOTIFY cannot be the default action"));
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci_spec::runtime::Capability;
    use std::os::unix::fs::PermissionsExt;

    fn caps(list: &[Capability]) -> Capabilities {
        list.iter().copied().collect()
    }

    fn default_caps() -> Capabilities {
        caps(&crate::security::DEFAULT_CAPABILITIES)
    }

    fn kernel() -> Option<KernelVersion> {
        Some(KernelVersion { major: 6, minor: 1 })
    }

    fn rules_named<'a>(p: &'a LinuxSeccomp, name: &str) -> Vec<&'a LinuxSyscall> {
        p.syscalls()
            .iter()
            .flatten()
            .filter(|s| s.names().iter().any(|n| n == name))
            .collect()
    }

    #[test]
    fn runtime_default_is_containerds_allow_list() {
        let p = runtime_default(HostArch::X86_64, &default_caps(), kernel());
        assert_eq!(p.default_action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(p.default_errno_ret(), Some(1));
        assert_eq!(
            p.architectures().clone(),
            Some(vec![
                Arch::ScmpArchX86_64,
                Arch::ScmpArchX86,
                Arch::ScmpArchX32
            ])
        );
        let allowed = allowed_syscalls(&p);
        for name in [
            "read",
            "execve",
            "clone",
            "socket",
            "personality",
            "ptrace",
            "arch_prctl",
        ] {
            assert!(allowed.contains(name), "{name}");
        }
        for name in [
            "mount",
            "unshare",
            "setns",
            "bpf",
            "kexec_load",
            "reboot",
            "init_module",
            "keyctl",
            "add_key",
            "io_uring_setup",
            "open_by_handle_at",
            "swapon",
            "acct",
        ] {
            assert!(!allowed.contains(name), "{name}");
        }
        // 363 base names + socket + personality + ptrace & co. + arch_prctl, modify_ldt +
        // chroot (CAP_SYS_CHROOT is a default capability) + clone (argument-checked).
        assert_eq!(allowed.len(), 363 + 2 + 3 + 2 + 1 + 1, "{allowed:?}");
    }

    #[test]
    fn arguments_are_checked_for_clone_socket_and_personality() {
        let p = runtime_default(HostArch::X86_64, &default_caps(), kernel());
        let clone = rules_named(&p, "clone");
        assert_eq!(clone.len(), 1);
        let a = &clone[0].args().clone().expect("clone args")[0];
        assert_eq!(
            (a.index(), a.value(), a.value_two(), a.op()),
            (
                0,
                0x7e02_0000,
                Some(0),
                LinuxSeccompOperator::ScmpCmpMaskedEq
            )
        );
        let clone3 = rules_named(&p, "clone3");
        assert_eq!(clone3[0].action(), LinuxSeccompAction::ScmpActErrno);
        assert_eq!(clone3[0].errno_ret(), Some(libc::ENOSYS as u32));
        assert_eq!(rules_named(&p, "socket").len(), 3);
        assert_eq!(rules_named(&p, "personality").len(), 5);
        // libcontainer's order for the same rule: the mask in valueTwo.
        let lc = for_libcontainer(p);
        let a = &rules_named(&lc, "clone")[0].args().clone().expect("args")[0];
        assert_eq!((a.value(), a.value_two()), (0, Some(0x7e02_0000)));
    }

    #[test]
    fn capabilities_open_their_syscalls() {
        let mut c = default_caps();
        c.insert(Capability::SysAdmin);
        c.insert(Capability::SysPtrace);
        c.remove(&Capability::SysChroot);
        let p = runtime_default(HostArch::X86_64, &c, kernel());
        let allowed = allowed_syscalls(&p);
        for name in ["mount", "unshare", "setns", "kcmp", "pidfd_getfd", "clone3"] {
            assert!(allowed.contains(name), "{name}");
        }
        assert!(!allowed.contains("chroot"));
        // With CAP_SYS_ADMIN clone is unconditional and clone3 is not refused.
        assert!(rules_named(&p, "clone").iter().all(|r| r.args().is_none()));
        assert!(rules_named(&p, "clone3")
            .iter()
            .all(|r| r.action() == LinuxSeccompAction::ScmpActAllow));
    }

    #[test]
    fn architectures_and_kernel_select_rules() {
        let arm64 = runtime_default(HostArch::Aarch64, &default_caps(), kernel());
        assert_eq!(
            arm64.architectures().clone(),
            Some(vec![Arch::ScmpArchArm, Arch::ScmpArchAarch64])
        );
        let allowed = allowed_syscalls(&arm64);
        assert!(allowed.contains("set_tls") && allowed.contains("cacheflush"));
        assert!(!allowed.contains("arch_prctl"));
        let arm = runtime_default(HostArch::Arm, &default_caps(), kernel());
        assert_eq!(arm.architectures().clone(), Some(vec![Arch::ScmpArchArm]));
        assert!(allowed_syscalls(&arm).contains("arm_fadvise64_64"));
        let s390 = runtime_default(HostArch::S390x, &default_caps(), kernel());
        let clone = rules_named(&s390, "clone");
        assert_eq!(clone[0].args().clone().expect("args")[0].index(), 1);
        let old = runtime_default(HostArch::X86_64, &default_caps(), None);
        assert!(!allowed_syscalls(&old).contains("ptrace"));
        let k47 = runtime_default(
            HostArch::X86_64,
            &default_caps(),
            Some(KernelVersion { major: 4, minor: 7 }),
        );
        assert!(!allowed_syscalls(&k47).contains("process_vm_readv"));
    }

    fn container(sc: serde_json::Value) -> Container {
        serde_json::from_value(serde_json::json!({"name": "c", "securityContext": sc}))
            .expect("container")
    }

    fn pod_spec(sc: serde_json::Value) -> PodSpec {
        serde_json::from_value(serde_json::json!({"containers": [], "securityContext": sc}))
            .expect("spec")
    }

    #[test]
    fn container_then_pod_then_seccomp_default() {
        let path = "spec.containers[0]";
        let none = (
            pod_spec(serde_json::json!({})),
            container(serde_json::json!({})),
        );
        assert_eq!(
            choice(&none.0, &none.1, path, false).expect("ok"),
            (SeccompChoice::Unconfined, None)
        );
        assert_eq!(
            choice(&none.0, &none.1, path, true).expect("ok"),
            (SeccompChoice::RuntimeDefault, None)
        );
        let pod = pod_spec(
            serde_json::json!({"seccompProfile": {"type": "Localhost", "localhostProfile": "a/b.json"}}),
        );
        let c = container(serde_json::json!({"seccompProfile": {"type": "Unconfined"}}));
        assert_eq!(
            choice(&pod, &c, path, true).expect("ok"),
            (
                SeccompChoice::Unconfined,
                Some("spec.containers[0].securityContext.seccompProfile".into())
            )
        );
        assert_eq!(
            choice(&pod, &none.1, path, false).expect("ok").0,
            SeccompChoice::Localhost("a/b.json".into())
        );
        for (bad, field) in [
            (
                serde_json::json!({"type": "Localhost"}),
                "seccompProfile.localhostProfile",
            ),
            (
                serde_json::json!({"type": "Localhost", "localhostProfile": "../x"}),
                "seccompProfile.localhostProfile",
            ),
            (
                serde_json::json!({"type": "Localhost", "localhostProfile": "/etc/x"}),
                "seccompProfile.localhostProfile",
            ),
            (
                serde_json::json!({"type": "RuntimeDefault", "localhostProfile": "x"}),
                "seccompProfile.localhostProfile",
            ),
            (serde_json::json!({"type": "Strict"}), "seccompProfile.type"),
        ] {
            let e = choice(
                &pod_spec(serde_json::json!({"seccompProfile": bad})),
                &none.1,
                path,
                false,
            )
            .expect_err("invalid");
            assert_eq!(
                e.field,
                format!("spec.securityContext.{field}"),
                "{}",
                e.message
            );
        }
    }

    fn write(dir: &Path, name: &str, text: &str, mode: u32) {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(&p, text).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn localhost_profiles_are_read_below_the_root_and_checked() {
        let root = tempfile::tempdir().expect("tempdir");
        let r = root.path();
        let good = r#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [
            {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]}"#;
        write(r, "profiles/no-mkdir.json", good, 0o644);
        let p = load_localhost(r, "profiles/no-mkdir.json").expect("profile");
        assert_eq!(p.default_action(), LinuxSeccompAction::ScmpActAllow);
        write(r, "group-writable.json", good, 0o664);
        let e = load_localhost(r, "group-writable.json").expect_err("writable");
        assert!(e.to_string().contains("not be writable"), "{e}");
        write(
            r,
            "notify.json",
            r#"{"defaultAction": "SCMP_ACT_NOTIFY"}"#,
            0o600,
        );
        assert!(matches!(
            load_localhost(r, "notify.json"),
            Err(LocalhostError::Unsupported { .. })
        ));
        write(r, "empty.json", "{}", 0o600);
        let e = load_localhost(r, "empty.json").expect_err("no defaultAction");
        assert!(e.to_string().contains("defaultAction"), "{e}");
        assert!(matches!(
            load_localhost(r, "missing.json"),
            Err(LocalhostError::Open { .. })
        ));
        // A symlink out of the profile root is not followed.
        let outside = tempfile::tempdir().expect("tempdir");
        write(outside.path(), "p.json", good, 0o644);
        std::os::unix::fs::symlink(outside.path().join("p.json"), r.join("escape.json"))
            .expect("symlink");
        let e = load_localhost(r, "escape.json").expect_err("escape");
        assert!(matches!(e, LocalhostError::Unsafe { .. }), "{e}");
    }
}
