//! OCI runtime spec generation for one container of a Pod, with the semantics the kubelet
//! and containerd's CRI plugin give it together.
//!
//! [`build_spec`] is pure except for `subPath` volume mounts (they are checked, created like
//! the kubelet does below the volume directory, and pinned) and `Localhost` seccomp profiles
//! (read from the profile root). The process user is left as uid 0 and
//! returned as a [`UserRequest`]: [`resolve_user`] resolves it once the rootfs is mounted.
//!
//! Choices where the upstream behaviour is unspecified or where podvisor differs:
//! - **Env order**: containerd starts from `PATH=<default>` and `HOSTNAME=<hostname>`, then
//!   applies the image `Env`, then the container's env; a key set again replaces the value IN
//!   PLACE (first position kept). The kubelet hands the container env over in map order; here
//!   it is kept in manifest order (duplicates: later value, first position).
//! - **Pod IP**: `status.podIP(s)` are the IPs the pod network gave the sandbox, the host IP
//!   for hostNetwork pods, `127.0.0.1` without a pod network.
//! - **Image `User` group**: "uid:gid" / "name:group" in the image config are honoured (as
//!   Docker, Podman and CRI-O do). The kubelet + containerd pair drops the group part and takes
//!   the passwd gid instead; securityContext.runAsUser still discards the image user entirely.
//! - **Confinement** follows containerd's CRI plugin (see [`crate::security`]): its default
//!   capabilities, masked and read-only paths and device cgroup rules; seccomp per the
//!   container's or pod's `seccompProfile` (containerd's default profile for RuntimeDefault,
//!   `<root-dir>/seccomp/<file>` for Localhost, RuntimeDefault for unset ones only with
//!   `seccompDefault`); AppArmor `podvisor-default` (containerd's rules) unless the container
//!   asks otherwise, where the host has AppArmor; sysctls from the kubelet's safe set and
//!   `allowedUnsafeSysctls`.
//! - **Privileged**: all of podvisor's capabilities, no seccomp filter, no default AppArmor
//!   profile, no masked/readonly paths, rw /sys and cgroupfs, every host device node in /dev
//!   and an allow-all device rule (containerd's `WithPrivileged` + `WithHostDevices`).
//! - **/etc/hosts** is always read-write (the kubelet manages it), `/etc/hostname` and
//!   `/etc/resolv.conf` are read-only when `readOnlyRootFilesystem` is set (containerd).
//! - **Devices**: libcontainer 0.7 itself creates /dev/null, zero, full, tty, random, urandom,
//!   the /dev/fd, stdin, stdout, stderr and /dev/ptmx symlinks (and /dev/kcore), and libcgroups
//!   always appends its own allow rules; the spec carries the device cgroup rules explicitly
//!   so that it stands alone.
//! - **subPath**: resolved below the volume with `openat2(RESOLVE_BENEATH)` (symlinks leaving
//!   the volume are refused), missing directories created, and the result pinned: bind-mounted
//!   through `/proc/self/fd` on `<container-dir>/subpaths/<n>` (as the kubelet binds through
//!   /proc/<pid>/fd), which the container mounts. A container swapping a directory for a
//!   symlink after the check changes nothing.
//! - **oom_score_adj**: lowering it (Guaranteed/critical pods get -997) needs
//!   CAP_SYS_RESOURCE, and libcontainer's `build()` writes it to the CALLER's own
//!   /proc/self/oom_score_adj too; on hosts without that capability the create fails with
//!   EACCES. The spec states the kubelet's value; the runtime decides how to cope.
//! - **Not modelled**: setHostnameAsFQDN (no cluster domain: the FQDN is the hostname),
//!   hostnameOverride, SELinux options (ignored). Pod-level
//!   `spec.resources` is enforced on the pod cgroup (see `cgroups`), not in the container's
//!   spec.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, SecurityContext};
use oci_spec::image::ImageConfiguration;
use oci_spec::runtime::{
    Capabilities, Capability, Linux, LinuxDevice, LinuxNamespace, LinuxNamespaceType, Process,
    Root, Spec, User,
};

use crate::pod::qos::{self, QosError};
use crate::pod::quantity::QuantityError;

use crate::pod::validation::is_dns1123_label;
use crate::security::{seccomp, NodeSecurity, Violation};
pub use crate::security::{DEFAULT_CAPABILITIES, MASKED_PATHS, READONLY_PATHS};

pub use super::user::{resolve_user, UserError, UserRequest};

mod env;
mod mounts;
mod process;
mod resources;
mod security;
#[cfg(test)]
mod testutil;

use env::{container_env, replace_or_append};
pub use env::{downward_volume_value, expand, pod_ip, pod_ips};
use mounts::mounts;
pub use process::parse_signal;
use process::{process_args, stop_signal, user_request, working_dir};
use resources::resources;
use security::{apparmor_profile, capabilities, no_new_privileges, seccomp_filter, sysctls};

/// Files and namespaces prepared by the pod sandbox, shared by all containers of the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxMounts {
    /// Pinned network namespace file; `None` = hostNetwork (no network namespace entry).
    pub network_ns: Option<PathBuf>,
    /// Pinned IPC namespace file.
    pub ipc_ns: PathBuf,
    /// Pinned UTS namespace file; `None` = hostNetwork (host UTS, `spec.hostname` unset).
    pub uts_ns: Option<PathBuf>,
    /// Pinned shared PID namespace file (`shareProcessNamespace: true`); `None` = each
    /// container gets its own PID namespace (or the host's with hostPID).
    pub pid_ns: Option<PathBuf>,
    /// Pinned user namespace file (`hostUsers: false`) and the first host ID of its 65536:
    /// every container joins it; its other namespaces are owned by it. `None` = the host's
    /// user namespace.
    pub user_ns: Option<(PathBuf, u32)>,
    /// Bind-mounted on /etc/hosts.
    pub hosts: PathBuf,
    /// Bind-mounted on /etc/hostname.
    pub hostname: PathBuf,
    /// Bind-mounted on /etc/resolv.conf.
    pub resolv_conf: PathBuf,
    /// Per-pod tmpfs directory bind-mounted on /dev/shm.
    pub shm: PathBuf,
    /// Pod volume name -> prepared host path (hostPath, emptyDir...).
    pub volumes: BTreeMap<String, PathBuf>,
    /// The pod's IPs from its network (`status.podIP(s)`), IPv4 first; empty without one.
    pub pod_ips: Vec<String>,
}

/// The node as the spec needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Node name, also the hostname of hostNetwork pods.
    pub name: String,
    /// Allocatable CPU, used for resourceFieldRef `limits.cpu` without a limit.
    pub cpu_millis: u64,
    /// Memory capacity: oom_score_adj and resourceFieldRef `limits.memory` without a limit.
    pub memory_bytes: u64,
    /// `status.hostIP`.
    pub host_ip: String,
    /// Capabilities podvisor can hand out: its own bounding set (see
    /// [`current_bounding_capabilities`]). Privileged containers and `add: [ALL]` get exactly
    /// these (containerd's `WithAllCurrentCapabilities`); defaults outside it are left out and
    /// an explicit `add` outside it is an error, since the runtime could not grant it.
    pub bounding_capabilities: Capabilities,
}

/// Reads the calling process's capability bounding set from `/proc/self/status`.
pub fn current_bounding_capabilities() -> io::Result<Capabilities> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix("CapBnd:"))
        .ok_or_else(|| io::Error::other("no CapBnd line in /proc/self/status"))?;
    let mask = u64::from_str_radix(hex.trim(), 16)
        .map_err(|e| io::Error::other(format!("bad CapBnd {hex:?}: {e}")))?;
    Ok(capabilities_from_mask(mask))
}

/// The capabilities whose kernel numbers are set in `mask` (numbers oci-spec does not know
/// are ignored).
pub fn capabilities_from_mask(mask: u64) -> Capabilities {
    ALL_CAPABILITIES
        .iter()
        .enumerate()
        .filter(|(bit, _)| mask & (1u64 << bit) != 0)
        .map(|(_, c)| *c)
        .collect()
}

/// Everything [`build_spec`] reads.
#[derive(Debug, Clone, Copy)]
pub struct SpecRequest<'a> {
    pub pod: &'a Pod,
    /// A container of `pod` (regular or init), found by name.
    pub container: &'a Container,
    pub image: &'a ImageConfiguration,
    pub rootfs: &'a Path,
    pub sandbox: &'a SandboxMounts,
    pub cgroups_path: &'a str,
    pub node: &'a NodeInfo,
    /// Node-critical pod: oom_score_adj -997 (the kubelet's `IsNodeCriticalPod`).
    pub critical: bool,
    /// The confinement the node offers (sysctls, seccomp, AppArmor).
    pub security: &'a NodeSecurity,
    /// The host's device nodes, given to privileged containers (see
    /// [`crate::security::devices::host_devices`]); unused otherwise.
    pub host_devices: &'a [LinuxDevice],
    /// What is done with subPath sources.
    pub sub_paths: SubPaths<'a>,
}

/// What [`build_spec`] does with a volume mount's `subPath`.
#[derive(Debug, Clone, Copy)]
pub enum SubPaths<'a> {
    /// Resolved below the volume, created, and pinned in this directory (see
    /// [`super::rootfs::pin_sub_path`]): a container start.
    Pin(&'a Path),
    /// Resolved below the volume and created; the checked path itself is mounted (tests).
    Open,
    /// Only its form is checked; the volume is not looked at (the static-pod loader's
    /// [`crate::runtime::check::check_pod`]: the volume's content is host state at start).
    Planned,
}

/// The generated spec and what is left to do with it.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    /// The runtime spec; `process.user` is uid 0 / gid 0 until [`resolve_user`] fills it.
    pub spec: Spec,
    /// What to resolve against the mounted rootfs.
    pub user: UserRequest,
    /// Signal that asks the container to stop (lifecycle.stopSignal, image StopSignal,
    /// SIGTERM).
    pub stop_signal: i32,
}

/// Why a spec could not be built. `field` values are manifest paths such as
/// `spec.containers[1].securityContext.capabilities.add[0]`.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("pod has no spec")]
    MissingPodSpec,
    #[error("{field} is required")]
    MissingField { field: String },
    #[error("container {container:?} is not part of the pod")]
    ContainerNotInPod { container: String },
    #[error("container {container:?} has no command: neither the manifest nor the image sets one")]
    EmptyCommand { container: String },
    #[error("{field} is not supported: {reason}")]
    Unsupported { field: String, reason: &'static str },
    #[error("{field} is not supported yet")]
    NotSupportedYet { field: String },
    #[error("{field}: static pods cannot reference API objects")]
    ApiObjectReference { field: String },
    #[error("{field}: invalid value {value:?}: {reason}")]
    InvalidField {
        field: String,
        value: String,
        reason: String,
    },
    #[error("{field}: {source}")]
    Quantity {
        field: String,
        source: QuantityError,
    },
    #[error("{field}: volume {volume:?} is not prepared by the pod sandbox")]
    UnknownVolume { field: String, volume: String },
    #[error("{field}: subPath {sub_path:?} in {volume_path}")]
    SubPath {
        field: String,
        sub_path: String,
        volume_path: PathBuf,
        source: io::Error,
    },
    #[error("container {container:?}: {reason}")]
    RunAsNonRoot { container: String, reason: String },
    #[error("sandbox does not match the pod: {reason}")]
    SandboxMismatch { reason: &'static str },
    #[error("oom_score_adj: {0}")]
    Qos(#[from] QosError),
    /// A confinement setting the node cannot honour (validation refuses it too).
    #[error("{}: {}", .0.field, .0.message)]
    Security(Violation),
    #[error("{field}: {source}")]
    SeccompProfile {
        field: String,
        source: seccomp::LocalhostError,
    },
    #[error(transparent)]
    User(#[from] UserError),
}

/// containerd's `PATH` when neither the image nor the container sets one.
pub const DEFAULT_PATH_ENV: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// Every capability oci-spec 0.10 knows, indexed by its kernel number (CAP_CHOWN = 0 ...
/// CAP_CHECKPOINT_RESTORE = 40).
pub const ALL_CAPABILITIES: [Capability; 41] = [
    Capability::Chown,
    Capability::DacOverride,
    Capability::DacReadSearch,
    Capability::Fowner,
    Capability::Fsetid,
    Capability::Kill,
    Capability::Setgid,
    Capability::Setuid,
    Capability::Setpcap,
    Capability::LinuxImmutable,
    Capability::NetBindService,
    Capability::NetBroadcast,
    Capability::NetAdmin,
    Capability::NetRaw,
    Capability::IpcLock,
    Capability::IpcOwner,
    Capability::SysModule,
    Capability::SysRawio,
    Capability::SysChroot,
    Capability::SysPtrace,
    Capability::SysPacct,
    Capability::SysAdmin,
    Capability::SysBoot,
    Capability::SysNice,
    Capability::SysResource,
    Capability::SysTime,
    Capability::SysTtyConfig,
    Capability::Mknod,
    Capability::Lease,
    Capability::AuditWrite,
    Capability::AuditControl,
    Capability::Setfcap,
    Capability::MacOverride,
    Capability::MacAdmin,
    Capability::Syslog,
    Capability::WakeAlarm,
    Capability::BlockSuspend,
    Capability::AuditRead,
    Capability::Perfmon,
    Capability::Bpf,
    Capability::CheckpointRestore,
];

/// Where the container sits in the manifest.
struct Ctx<'a> {
    pod: &'a Pod,
    spec: &'a PodSpec,
    container: &'a Container,
    /// `spec.containers[i]` or `spec.initContainers[i]`.
    path: String,
    node: &'a NodeInfo,
    /// The pod's IPs from its network (empty without one).
    pod_ips: &'a [String],
}

impl Ctx<'_> {
    fn field(&self, rest: &str) -> String {
        format!("{}.{rest}", self.path)
    }
    fn sc(&self) -> Option<&SecurityContext> {
        self.container.security_context.as_ref()
    }
    fn host_network(&self) -> bool {
        self.spec.host_network.unwrap_or(false)
    }
}

fn invalid(field: String, value: impl Into<String>, reason: impl Into<String>) -> SpecError {
    SpecError::InvalidField {
        field,
        value: value.into(),
        reason: reason.into(),
    }
}

/// Builds the OCI runtime spec of `req.container`.
pub fn build_spec(req: &SpecRequest<'_>) -> Result<ContainerSpec, SpecError> {
    let pod_spec = req.pod.spec.as_ref().ok_or(SpecError::MissingPodSpec)?;
    let name = &req.container.name;
    let path = if let Some(i) = pod_spec.containers.iter().position(|c| &c.name == name) {
        format!("spec.containers[{i}]")
    } else if let Some(i) = pod_spec
        .init_containers
        .iter()
        .flatten()
        .position(|c| &c.name == name)
    {
        format!("spec.initContainers[{i}]")
    } else {
        return Err(SpecError::ContainerNotInPod {
            container: name.clone(),
        });
    };
    let ctx = Ctx {
        pod: req.pod,
        spec: pod_spec,
        container: req.container,
        path,
        node: req.node,
        pod_ips: &req.sandbox.pod_ips,
    };
    check_path_names(&ctx)?;
    check_unsupported(&ctx, req.security)?;

    let hostname = pod_hostname(&ctx, req.sandbox)?;
    let env_hostname = hostname.clone().unwrap_or_else(|| req.node.name.clone());
    let container_env = container_env(&ctx)?;
    let image_config = req.image.config().as_ref();
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), DEFAULT_PATH_ENV.into()),
        ("HOSTNAME".into(), env_hostname),
    ];
    for kv in image_config
        .and_then(|c| c.env().as_ref())
        .into_iter()
        .flatten()
    {
        let (k, v) = kv.split_once('=').unwrap_or((kv.as_str(), ""));
        replace_or_append(&mut env, k, v);
    }
    for (k, v) in &container_env {
        replace_or_append(&mut env, k, v);
    }

    let args = process_args(&ctx, image_config, &container_env)?;
    let cwd = working_dir(&ctx, image_config)?;
    let user = user_request(&ctx, image_config)?;
    let privileged = ctx.sc().and_then(|s| s.privileged).unwrap_or(false);
    let capabilities = capabilities(&ctx, privileged)?;

    let mut process = Process::default();
    // tty: the monitor receives the pty master through libcontainer's console socket.
    process.set_terminal(Some(ctx.container.tty.unwrap_or(false)));
    process.set_user(User::default());
    process.set_args(Some(args));
    process.set_env(Some(env.iter().map(|(k, v)| format!("{k}={v}")).collect()));
    process.set_cwd(cwd);
    process.set_capabilities(Some(capabilities.clone()));
    process.set_rlimits(None);
    // Absent rather than `false`: libcontainer 0.7 treats any present value as "set" and then
    // loads the seccomp filter after dropping capabilities, which the kernel refuses without
    // no_new_privs (runc and the OCI spec treat false like absent).
    process.set_no_new_privileges(no_new_privileges(&ctx, privileged)?.then_some(true));
    process.set_apparmor_profile(apparmor_profile(&ctx, privileged, req.security)?);
    process.set_oom_score_adj(Some(qos::oom_score_adj(
        ctx.pod,
        ctx.container,
        req.node.memory_bytes,
        req.critical,
    )?));

    let read_only_root = ctx
        .sc()
        .and_then(|s| s.read_only_root_filesystem)
        .unwrap_or(false);
    let mut root = Root::default();
    root.set_path(req.rootfs.to_path_buf());
    root.set_readonly(Some(read_only_root));

    let (mounts, rootfs_propagation) = mounts(
        &ctx,
        req.sandbox,
        privileged,
        read_only_root,
        req.sub_paths,
        &container_env,
    )?;

    let mut linux = Linux::default();
    let host_pid = pod_spec.host_pid.unwrap_or(false);
    let host_ipc = pod_spec.host_ipc.unwrap_or(false);
    if flag_set(pod_spec.share_process_namespace) != req.sandbox.pid_ns.is_some() {
        return Err(SpecError::SandboxMismatch {
            reason: "shareProcessNamespace pods have a shared PID namespace and others none",
        });
    }
    linux.set_namespaces(Some(namespaces(req.sandbox, host_pid, host_ipc)));
    if (ctx.spec.host_users == Some(false)) != req.sandbox.user_ns.is_some() {
        return Err(SpecError::SandboxMismatch {
            reason: "hostUsers: false pods have a user namespace and others none",
        });
    }
    if let Some((_, base)) = req.sandbox.user_ns {
        // Informational for the monitor, which idmaps the rootfs and the volumes with it;
        // libcontainer joins the namespace by path and writes no map.
        let map = oci_spec::runtime::LinuxIdMappingBuilder::default()
            .host_id(base)
            .container_id(0u32)
            .size(crate::runtime::userns::IDS_PER_POD)
            .build()
            .map_err(|e| invalid("spec.hostUsers".into(), "false", e.to_string()))?;
        linux.set_uid_mappings(Some(vec![map]));
        linux.set_gid_mappings(Some(vec![map]));
    }
    linux.set_cgroups_path(Some(PathBuf::from(req.cgroups_path)));
    linux.set_resources(Some(resources(&ctx, privileged)?));
    // containerd's WithHostDevices: a privileged container sees the host's device nodes.
    linux.set_devices(privileged.then(|| req.host_devices.to_vec()));
    linux.set_sysctl(sysctls(&ctx, req.security)?);
    linux.set_seccomp(seccomp_filter(
        &ctx,
        privileged,
        &capabilities,
        req.security,
    )?);
    linux.set_rootfs_propagation(rootfs_propagation);
    // `procMount: Unmasked`: the kubelet sends empty masked and read-only path lists.
    let unmasked = ctx.sc().and_then(|sc| sc.proc_mount.as_deref()) == Some("Unmasked");
    if privileged || unmasked {
        linux.set_masked_paths(None);
        linux.set_readonly_paths(None);
    } else {
        linux.set_masked_paths(Some(MASKED_PATHS.iter().map(|s| s.to_string()).collect()));
        linux.set_readonly_paths(Some(READONLY_PATHS.iter().map(|s| s.to_string()).collect()));
    }

    let meta = &ctx.pod.metadata;
    let annotations = HashMap::from([
        (
            "io.kubernetes.pod.name".to_string(),
            meta.name.clone().unwrap_or_default(),
        ),
        (
            "io.kubernetes.pod.namespace".to_string(),
            meta.namespace.clone().unwrap_or_else(|| "default".into()),
        ),
        (
            "io.kubernetes.pod.uid".to_string(),
            meta.uid.clone().unwrap_or_default(),
        ),
        (
            "io.kubernetes.container.name".to_string(),
            ctx.container.name.clone(),
        ),
    ]);

    let mut spec = Spec::default();
    spec.set_version(oci_spec::runtime::VERSION.to_string());
    spec.set_root(Some(root));
    spec.set_mounts(Some(mounts));
    spec.set_process(Some(process));
    spec.set_hostname(hostname);
    spec.set_domainname(None);
    spec.set_hooks(None);
    spec.set_annotations(Some(annotations));
    spec.set_linux(Some(linux));

    Ok(ContainerSpec {
        spec,
        user,
        stop_signal: stop_signal(&ctx, image_config)?,
    })
}

/// The names that become path components of podvisor's state and logs
/// (`<log-dir>/<namespace>_<name>_<uid>/<container>/`, container ids): validation refuses bad
/// ones (DNS names), and the runtime checks again that each is one plain path component, so
/// that no manifest reaches outside those directories.
fn check_path_names(ctx: &Ctx<'_>) -> Result<(), SpecError> {
    let plain = |s: &str| !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\0']);
    let meta = &ctx.pod.metadata;
    let why = "must be a single path component (no '/', not '.' or '..')";
    let name = meta.name.as_deref().unwrap_or("");
    if !plain(name) {
        return Err(invalid("metadata.name".into(), name, why));
    }
    let ns = meta.namespace.as_deref().unwrap_or("default");
    if !plain(ns) {
        return Err(invalid("metadata.namespace".into(), ns, why));
    }
    if !plain(&ctx.container.name) {
        return Err(invalid(ctx.field("name"), &ctx.container.name, why));
    }
    Ok(())
}

fn check_unsupported(ctx: &Ctx<'_>, node: &NodeSecurity) -> Result<(), SpecError> {
    let s = ctx.spec;
    let flag = |v: Option<bool>| v.unwrap_or(false);
    let yet = |field: String| Err(SpecError::NotSupportedYet { field });
    if flag(s.share_process_namespace) && flag(s.host_pid) {
        return Err(invalid(
            "spec.shareProcessNamespace".into(),
            "true",
            "ShareProcessNamespace and HostPID cannot both be enabled",
        ));
    }
    if s.host_users == Some(false) {
        for (field, set) in [
            ("spec.hostNetwork", s.host_network),
            ("spec.hostPID", s.host_pid),
            ("spec.hostIPC", s.host_ipc),
        ] {
            if flag(set) {
                return Err(invalid(
                    field.into(),
                    "true",
                    "forbidden when `hostUsers` is false",
                ));
            }
        }
        if let Some(v) = crate::security::host_users_violation(ctx.pod, node) {
            return Err(invalid(v.field, "false", v.message));
        }
    }
    let c = ctx.container;
    // Every envFrom source (configMapRef, secretRef) is an API object.
    if c.env_from.as_ref().is_some_and(|v| !v.is_empty()) {
        return Err(SpecError::ApiObjectReference {
            field: ctx.field("envFrom[0]"),
        });
    }
    if c.volume_devices.as_ref().is_some_and(|v| !v.is_empty()) {
        return yet(ctx.field("volumeDevices"));
    }
    if let Some(m) = ctx.sc().and_then(|sc| sc.proc_mount.as_deref()) {
        match m {
            "Default" => {}
            "Unmasked" if s.host_users == Some(false) => {}
            "Unmasked" => {
                return Err(invalid(
                    ctx.field("securityContext.procMount"),
                    m,
                    "`hostUsers` must be false to use `Unmasked`",
                ))
            }
            _ => {
                return Err(invalid(
                    ctx.field("securityContext.procMount"),
                    m,
                    "must be Default or Unmasked",
                ))
            }
        }
    }
    Ok(())
}

/// The pod's hostname as the kubelet computes it; `None` for hostNetwork pods.
fn pod_hostname(ctx: &Ctx<'_>, sandbox: &SandboxMounts) -> Result<Option<String>, SpecError> {
    let host_network = ctx.host_network();
    if host_network != sandbox.network_ns.is_none() {
        return Err(SpecError::SandboxMismatch {
            reason: "hostNetwork pods have no network namespace and others need one",
        });
    }
    if host_network != sandbox.uts_ns.is_none() {
        return Err(SpecError::SandboxMismatch {
            reason: "hostNetwork pods have no UTS namespace and others need one",
        });
    }
    if host_network {
        return Ok(None);
    }
    let pod_name = ctx
        .pod
        .metadata
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| SpecError::MissingField {
            field: "metadata.name".into(),
        })?;
    let hostname = match ctx.spec.hostname.as_deref().filter(|h| !h.is_empty()) {
        Some(h) if !is_dns1123_label(h) => {
            return Err(invalid(
                "spec.hostname".into(),
                h,
                "must be a DNS-1123 label",
            ))
        }
        Some(h) => h,
        None => pod_name,
    };
    let truncated = if hostname.len() > 63 {
        // Pod names are DNS subdomains (ASCII), so byte 63 is a char boundary; fall back to the
        // whole name if it is not.
        hostname.get(..63).unwrap_or(hostname)
    } else {
        hostname
    };
    let trimmed = truncated.trim_end_matches(['-', '.']);
    if trimmed.is_empty() {
        return Err(invalid(
            "metadata.name".into(),
            pod_name,
            "hostname is empty after truncation",
        ));
    }
    Ok(Some(trimmed.to_string()))
}

fn flag_set(v: Option<bool>) -> bool {
    v.unwrap_or(false)
}

/// The container's namespaces: its own PID namespace unless `hostPID` (the pod's with
/// `shareProcessNamespace`), the pod's IPC
/// namespace unless `hostIPC` (then the host's, which the container keeps by not joining
/// any), the pod's UTS and network namespaces unless `hostNetwork`.
fn namespaces(sandbox: &SandboxMounts, host_pid: bool, host_ipc: bool) -> Vec<LinuxNamespace> {
    let ns = |typ, path: Option<&PathBuf>| {
        let mut n = LinuxNamespace::default();
        n.set_typ(typ);
        n.set_path(path.cloned());
        n
    };
    let mut list = Vec::new();
    // The user namespace first: libcontainer joins it before the others, which it owns.
    if let Some((p, _)) = &sandbox.user_ns {
        list.push(ns(LinuxNamespaceType::User, Some(p)));
    }
    if !host_pid {
        list.push(ns(LinuxNamespaceType::Pid, sandbox.pid_ns.as_ref()));
    }
    if !host_ipc {
        list.push(ns(LinuxNamespaceType::Ipc, Some(&sandbox.ipc_ns)));
    }
    if let Some(p) = &sandbox.uts_ns {
        list.push(ns(LinuxNamespaceType::Uts, Some(p)));
    }
    list.push(ns(LinuxNamespaceType::Mount, None));
    if let Some(p) = &sandbox.network_ns {
        list.push(ns(LinuxNamespaceType::Network, Some(p)));
    }
    list.push(ns(LinuxNamespaceType::Cgroup, None));
    list
}

#[cfg(test)]
mod tests;
