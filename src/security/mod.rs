//! security: what confines a container and which confinement a node can give — the kubelet's
//! sysctl allowlist and AppArmor validator (pkg/kubelet/sysctl, pkg/security/apparmor) and
//! containerd's CRI confinement (default capabilities, masked paths, device rules, the
//! default seccomp and AppArmor profiles).
//!
//! [`NodeSecurity`] is the node's side: its sysctl policy (the safe set plus
//! `allowedUnsafeSysctls`), `seccompDefault`, the seccomp profile root
//! (`<root-dir>/seccomp`), AppArmor on this host, the kernel and the architecture.
//! [`validate_pod`] holds a pod against it, so that `podvisor validate` and the manifest
//! sources refuse what the runtime could not run, naming the field; the runtime
//! ([`crate::runtime::spec`]) applies the same decisions when it builds a container's spec.
//!
//! Submodules: [`sysctl`], [`seccomp`] with the default profile as data in
//! [`seccomp_default`], [`apparmor`], [`devices`].

pub mod apparmor;
pub mod devices;
pub mod seccomp;
pub mod seccomp_default;
pub mod sysctl;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};
use oci_spec::runtime::Capability;

use apparmor::AppArmorHost;
use seccomp::SeccompChoice;
use seccomp_default::HostArch;
use sysctl::{KernelVersion, SysctlPattern, SysctlPolicy};

/// containerd's default capability set.
pub const DEFAULT_CAPABILITIES: [Capability; 14] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::Fsetid,
    Capability::Fowner,
    Capability::Mknod,
    Capability::NetRaw,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setfcap,
    Capability::Setpcap,
    Capability::NetBindService,
    Capability::SysChroot,
    Capability::Kill,
    Capability::AuditWrite,
];

/// containerd's masked paths for unprivileged containers.
pub const MASKED_PATHS: [&str; 11] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// containerd's read-only paths for unprivileged containers.
pub const READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// The directory below the root directory where Localhost seccomp profiles live.
pub const SECCOMP_PROFILE_DIR: &str = "seccomp";

/// One field of a pod that the node cannot run as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub field: String,
    pub message: String,
}

impl Violation {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Violation {
        Violation {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The type of a `seccompProfile` or `appArmorProfile`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileType<'a> {
    Unconfined,
    RuntimeDefault,
    /// With `localhostProfile` as written (checked by the caller).
    Localhost(Option<&'a str>),
}

/// Reads a profile's `type` and checks that `localhostProfile` is set only with Localhost
/// (API validation). `field` is the profile's field path.
pub fn profile_type<'a>(
    type_: &str,
    localhost: Option<&'a str>,
    field: &str,
) -> Result<ProfileType<'a>, Violation> {
    match type_ {
        "Unconfined" | "RuntimeDefault" if localhost.is_some() => Err(Violation::new(
            format!("{field}.localhostProfile"),
            format!("may only be set when type is Localhost (type is {type_})"),
        )),
        "Unconfined" => Ok(ProfileType::Unconfined),
        "RuntimeDefault" => Ok(ProfileType::RuntimeDefault),
        "Localhost" => Ok(ProfileType::Localhost(localhost)),
        other => Err(Violation::new(
            format!("{field}.type"),
            format!("{other:?} is not one of RuntimeDefault, Unconfined, Localhost"),
        )),
    }
}

/// What the node offers for confinement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSecurity {
    pub sysctls: SysctlPolicy,
    /// `seccompDefault`: RuntimeDefault for containers without a seccomp profile.
    pub seccomp_default: bool,
    /// Where `Localhost` seccomp profiles are read (`<root-dir>/seccomp`).
    pub seccomp_root: PathBuf,
    pub apparmor: AppArmorHost,
    pub kernel: Option<KernelVersion>,
    pub arch: HostArch,
}

impl NodeSecurity {
    /// This host, for a node with `root_dir`, the configured unsafe sysctls and
    /// `seccompDefault`, with `apparmor` as detected (or detected and loaded).
    pub fn for_host(
        root_dir: &Path,
        allowed_unsafe_sysctls: &[SysctlPattern],
        seccomp_default: bool,
        apparmor: AppArmorHost,
    ) -> NodeSecurity {
        let kernel = KernelVersion::running();
        NodeSecurity {
            sysctls: SysctlPolicy::new(allowed_unsafe_sysctls, kernel),
            seccomp_default,
            seccomp_root: root_dir.join(SECCOMP_PROFILE_DIR),
            apparmor,
            kernel,
            arch: HostArch::current(),
        }
    }
}

impl Default for NodeSecurity {
    /// The kubelet's defaults (safe sysctls, no seccompDefault) for the default root
    /// directory, on a host without AppArmor.
    fn default() -> Self {
        NodeSecurity {
            sysctls: SysctlPolicy::default(),
            seccomp_default: false,
            seccomp_root: Path::new("/var/lib/podvisor").join(SECCOMP_PROFILE_DIR),
            apparmor: AppArmorHost::Disabled {
                reason: "not checked".into(),
            },
            kernel: None,
            arch: HostArch::current(),
        }
    }
}

/// True if the container runs privileged.
pub fn is_privileged(container: &Container) -> bool {
    container
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false)
}

/// Every container of the pod with its field path (`spec.initContainers[i]` first).
fn containers(pod: &Pod) -> Vec<(String, &Container)> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c));
    let app = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c));
    init.chain(app).collect()
}

/// Each sysctl of the pod in `.` form with its value, or why the node refuses it.
fn checked_sysctls(pod: &Pod, node: &NodeSecurity) -> Vec<Result<(String, String), Violation>> {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let list = spec
        .and_then(|s| s.security_context.as_ref())
        .and_then(|s| s.sysctls.as_ref());
    let mut seen = BTreeSet::new();
    list.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, s)| {
            let field = format!("spec.securityContext.sysctls[{i}].name");
            let dotted = node
                .sysctls
                .check(&s.name, host_network)
                .map_err(|e| Violation::new(&field, e.to_string()))?;
            if !seen.insert(dotted.clone()) {
                return Err(Violation::new(
                    field,
                    format!("duplicate sysctl {dotted:?}"),
                ));
            }
            Ok((dotted, s.value.clone()))
        })
        .collect()
}

/// The sysctls of the pod in `.` form with their values, or the first problem.
pub fn pod_sysctls(pod: &Pod, node: &NodeSecurity) -> Result<Vec<(String, String)>, Violation> {
    checked_sysctls(pod, node).into_iter().collect()
}

/// The first Linux with idmapped tmpfs mounts: a `hostUsers: false` pod's etc files,
/// /dev/shm, memory-backed emptyDirs and projected volumes are tmpfs (the kubelet's docs
/// require it for the same reason).
pub const USER_NAMESPACE_KERNEL: KernelVersion = KernelVersion { major: 6, minor: 3 };

/// Why this node cannot run `pod` in a user namespace of its own (`hostUsers: false`):
/// idmapped tmpfs mounts need Linux 6.3. `None` when it can, or the pod does not ask.
pub fn host_users_violation(pod: &Pod, node: &NodeSecurity) -> Option<Violation> {
    let wants = pod.spec.as_ref().and_then(|s| s.host_users) == Some(false);
    let k = node.kernel?;
    (wants && k < USER_NAMESPACE_KERNEL).then(|| {
        Violation::new(
            "spec.hostUsers",
            format!(
                "false needs idmapped mounts of tmpfs (Linux 6.3 or later) for the pod's volumes; this node runs Linux {}.{}",
                k.major, k.minor
            ),
        )
    })
}

/// Every confinement setting of `pod` the node cannot honour.
pub fn validate_pod(pod: &Pod, node: &NodeSecurity) -> Vec<Violation> {
    let mut v: Vec<Violation> = checked_sysctls(pod, node)
        .into_iter()
        .filter_map(Result::err)
        .collect();
    v.extend(host_users_violation(pod, node));
    let Some(spec) = &pod.spec else {
        return v;
    };
    let mut seccomp_reported = BTreeSet::new();
    let mut apparmor_reported = BTreeSet::new();
    for (path, c) in containers(pod) {
        let privileged = is_privileged(c);
        match seccomp::choice(spec, c, &path, node.seccomp_default) {
            // A profile the pod sets is reported once, not once per container.
            Err(e) => {
                if seccomp_reported.insert(e.field.clone()) {
                    v.push(e)
                }
            }
            // containerd never filters privileged containers: their profile is not read.
            Ok((SeccompChoice::Localhost(rel), Some(field))) if !privileged => {
                if let Err(e) = seccomp::load_localhost(&node.seccomp_root, &rel) {
                    let field = format!("{field}.localhostProfile");
                    if seccomp_reported.insert(field.clone()) {
                        v.push(Violation::new(field, e.to_string()));
                    }
                }
            }
            Ok(_) => {}
        }
        let resolved = apparmor::choice(pod, c, &path).and_then(|(choice, field)| {
            apparmor::resolve(&choice, field.as_deref(), privileged, &node.apparmor)
        });
        if let Err(e) = resolved {
            if apparmor_reported.insert((e.field.clone(), e.message.clone())) {
                v.push(e);
            }
        }
    }
    v
}

#[cfg(test)]
mod tests;
