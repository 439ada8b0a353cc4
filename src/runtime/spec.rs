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
//! - **Pod IP**: pod networking is not there yet: `status.podIP(s)` is the host IP for
//!   hostNetwork pods and `127.0.0.1` otherwise.
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
//!   hostnameOverride, SELinux options (ignored), `procMount: Unmasked` (refused). Pod-level
//!   `spec.resources` is enforced on the pod cgroup (see `cgroups`), not in the container's
//!   spec.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec, SecurityContext};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use oci_spec::image::ImageConfiguration;
use oci_spec::runtime::{
    Capabilities, Capability, Linux, LinuxCapabilities, LinuxCpu, LinuxDevice, LinuxMemory,
    LinuxNamespace, LinuxNamespaceType, LinuxResources, LinuxSeccomp, Mount, Process, Root, Spec,
    User,
};

use crate::cgroups::resources as cgroup_resources;
use crate::pod::qos::{self, effective_requests, QosError};
use crate::pod::quantity::{parse_bytes, parse_cpu_millis, QuantityError};

use crate::fsutil::{open_root, openat2_in_root};
use crate::security::{self, apparmor, seccomp, NodeSecurity, Violation};
pub use crate::security::{DEFAULT_CAPABILITIES, MASKED_PATHS, READONLY_PATHS};

pub use super::user::{resolve_user, UserError, UserRequest};

/// Files and namespaces prepared by the pod sandbox, shared by all containers of the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxMounts {
    /// Pinned network namespace file; `None` = hostNetwork (no network namespace entry).
    pub network_ns: Option<PathBuf>,
    /// Pinned IPC namespace file.
    pub ipc_ns: PathBuf,
    /// Pinned UTS namespace file; `None` = hostNetwork (host UTS, `spec.hostname` unset).
    pub uts_ns: Option<PathBuf>,
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
    /// [`security::devices::host_devices`]); unused otherwise.
    pub host_devices: &'a [LinuxDevice],
    /// Where subPath sources are pinned (see [`super::rootfs::pin_sub_path`]); `None` mounts
    /// the checked path itself (tests).
    pub sub_path_pins: Option<&'a Path>,
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
    };
    check_path_names(&ctx)?;
    check_unsupported(&ctx)?;

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
    process.set_terminal(Some(false));
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
        req.sub_path_pins,
    )?;

    let mut linux = Linux::default();
    linux.set_namespaces(Some(namespaces(req.sandbox)));
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
    if privileged {
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

fn check_unsupported(ctx: &Ctx<'_>) -> Result<(), SpecError> {
    let s = ctx.spec;
    let flag = |v: Option<bool>| v.unwrap_or(false);
    if flag(s.host_pid) {
        return Err(SpecError::Unsupported {
            field: "spec.hostPID".into(),
            reason: "podvisor always gives containers their own PID namespace",
        });
    }
    if flag(s.host_ipc) {
        return Err(SpecError::Unsupported {
            field: "spec.hostIPC".into(),
            reason: "podvisor always gives pods their own IPC namespace",
        });
    }
    let yet = |field: String| Err(SpecError::NotSupportedYet { field });
    if flag(s.share_process_namespace) {
        return yet("spec.shareProcessNamespace".into());
    }
    if s.host_users == Some(false) {
        return yet("spec.hostUsers".into());
    }
    let c = ctx.container;
    if flag(c.tty) {
        return yet(ctx.field("tty"));
    }
    if flag(c.stdin) {
        return yet(ctx.field("stdin"));
    }
    // Every envFrom source (configMapRef, secretRef) is an API object.
    if c.env_from.as_ref().is_some_and(|v| !v.is_empty()) {
        return Err(SpecError::ApiObjectReference {
            field: ctx.field("envFrom[0]"),
        });
    }
    if c.volume_devices.as_ref().is_some_and(|v| !v.is_empty()) {
        return yet(ctx.field("volumeDevices"));
    }
    if let Some(sc) = ctx.sc() {
        if sc.proc_mount.as_deref().is_some_and(|m| m != "Default") {
            return yet(ctx.field("securityContext.procMount"));
        }
    }
    Ok(())
}

fn replace_or_append(env: &mut Vec<(String, String)>, key: &str, value: &str) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_string(),
        None => env.push((key.to_string(), value.to_string())),
    }
}

/// Kubernetes `$(VAR)` expansion (third_party/forked/golang/expansion): `$$` is a literal `$`,
/// unknown references and an unclosed `$(` are kept as written.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < b.len() {
        if b[cursor] == b'$' && cursor + 1 < b.len() {
            out.extend_from_slice(&b[checkpoint..cursor]);
            let rest = &b[cursor + 1..];
            let advance = match rest[0] {
                b'$' => {
                    out.push(b'$');
                    1
                }
                b'(' => match rest.iter().position(|&x| x == b')') {
                    Some(close) => {
                        let name = &input[cursor + 2..cursor + 1 + close];
                        match lookup(name) {
                            Some(v) => out.extend_from_slice(v.as_bytes()),
                            None => {
                                out.extend_from_slice(b"$(");
                                out.extend_from_slice(name.as_bytes());
                                out.push(b')');
                            }
                        }
                        close + 1
                    }
                    None => {
                        out.extend_from_slice(b"$(");
                        1
                    }
                },
                other => {
                    out.push(b'$');
                    out.push(other);
                    1
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.extend_from_slice(&b[checkpoint.min(b.len())..]);
    // Only ASCII bytes were inserted or split around, so the result is valid UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The container's env, resolved and expanded, in manifest order (later duplicates replace the
/// value, the first position is kept).
fn container_env(ctx: &Ctx<'_>) -> Result<Vec<(String, String)>, SpecError> {
    let mut env: Vec<(String, String)> = Vec::new();
    for (i, var) in ctx.container.env.iter().flatten().enumerate() {
        let field = ctx.field(&format!("env[{i}]"));
        if var.name.is_empty() {
            return Err(SpecError::MissingField {
                field: format!("{field}.name"),
            });
        }
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) if !v.is_empty() => expand(v, |name| {
                env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            }),
            (_, Some(_)) => env_value_from(ctx, var, &field)?,
            _ => String::new(),
        };
        replace_or_append(&mut env, &var.name, &value);
    }
    Ok(env)
}

fn env_value_from(ctx: &Ctx<'_>, var: &EnvVar, field: &str) -> Result<String, SpecError> {
    let Some(from) = &var.value_from else {
        return Ok(String::new());
    };
    let field = format!("{field}.valueFrom");
    if from.secret_key_ref.is_some() {
        return Err(SpecError::ApiObjectReference {
            field: format!("{field}.secretKeyRef"),
        });
    }
    if from.config_map_key_ref.is_some() {
        return Err(SpecError::ApiObjectReference {
            field: format!("{field}.configMapKeyRef"),
        });
    }
    if from.file_key_ref.is_some() {
        return Err(SpecError::NotSupportedYet {
            field: format!("{field}.fileKeyRef"),
        });
    }
    if let Some(f) = &from.field_ref {
        return field_ref(ctx, &f.field_path, f.api_version.as_deref(), &field);
    }
    if let Some(r) = &from.resource_field_ref {
        return resource_field_ref(
            ctx,
            r.container_name.as_deref(),
            &r.resource,
            r.divisor.as_ref(),
            &format!("{field}.resourceFieldRef"),
        );
    }
    Err(SpecError::MissingField { field })
}

fn pod_ip(ctx: &Ctx<'_>) -> String {
    if ctx.host_network() {
        ctx.node.host_ip.clone()
    } else {
        "127.0.0.1".to_string()
    }
}

fn field_ref(
    ctx: &Ctx<'_>,
    path: &str,
    api_version: Option<&str>,
    field: &str,
) -> Result<String, SpecError> {
    let field = format!("{field}.fieldRef");
    if let Some(v) = api_version.filter(|v| *v != "v1") {
        return Err(invalid(
            format!("{field}.apiVersion"),
            v,
            "only \"v1\" is supported",
        ));
    }
    let meta = &ctx.pod.metadata;
    let subscript = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(rest.to_string())
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_else(|| "default".into()),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => ctx
            .spec
            .node_name
            .clone()
            .unwrap_or_else(|| ctx.node.name.clone()),
        "spec.serviceAccountName" => ctx.spec.service_account_name.clone().unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => ctx.node.host_ip.clone(),
        "status.podIP" | "status.podIPs" => pod_ip(ctx),
        _ => {
            if let Some(key) = subscript("metadata.labels['") {
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else if let Some(key) = subscript("metadata.annotations['") {
                meta.annotations
                    .as_ref()
                    .and_then(|l| l.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else {
                return Err(invalid(
                    format!("{field}.fieldPath"),
                    path,
                    "not a field supported in environment variables",
                ));
            }
        }
    };
    Ok(value)
}

fn resource_field_ref(
    ctx: &Ctx<'_>,
    container_name: Option<&str>,
    resource: &str,
    divisor: Option<&Quantity>,
    field: &str,
) -> Result<String, SpecError> {
    let container = match container_name.filter(|n| !n.is_empty()) {
        None => ctx.container,
        Some(n) => ctx
            .spec
            .containers
            .iter()
            .chain(ctx.spec.init_containers.iter().flatten())
            .find(|c| c.name == n)
            .ok_or_else(|| {
                invalid(
                    format!("{field}.containerName"),
                    n,
                    "no container of the pod has this name",
                )
            })?,
    };
    let (kind, name) = resource.split_once('.').unwrap_or(("", resource));
    let r = container.resources.as_ref();
    let quantity = match kind {
        "limits" => r
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get(name))
            .cloned(),
        "requests" => effective_requests(r).get(name).cloned(),
        _ => None,
    };
    let parse_div = |f: fn(&Quantity) -> Result<u64, QuantityError>| -> Result<u64, SpecError> {
        // The default divisor is "1": 1000 millicores, 1 byte.
        let one = Quantity("1".to_string());
        let d = divisor.unwrap_or(&one);
        let v = f(d).map_err(|source| SpecError::Quantity {
            field: format!("{field}.divisor"),
            source,
        })?;
        if v == 0 {
            return Err(invalid(
                format!("{field}.divisor"),
                &d.0,
                "must not be zero",
            ));
        }
        Ok(v)
    };
    let quantity_err = |source| SpecError::Quantity {
        field: format!("{field}.resource ({resource})"),
        source,
    };
    let value = match (kind, name) {
        ("limits" | "requests", "cpu") => {
            let millis = match &quantity {
                Some(q) => parse_cpu_millis(q).map_err(quantity_err)?,
                None if kind == "limits" => ctx.node.cpu_millis,
                None => 0,
            };
            millis.div_ceil(parse_div(parse_cpu_millis)?)
        }
        ("limits" | "requests", "memory") => {
            let bytes = match &quantity {
                Some(q) => parse_bytes(q).map_err(quantity_err)?,
                None if kind == "limits" => ctx.node.memory_bytes,
                None => 0,
            };
            bytes.div_ceil(parse_div(parse_bytes)?)
        }
        _ => {
            return Err(invalid(
                format!("{field}.resource"),
                resource,
                "supported: limits.cpu, limits.memory, requests.cpu, requests.memory",
            ))
        }
    };
    Ok(value.to_string())
}

fn process_args(
    ctx: &Ctx<'_>,
    image: Option<&oci_spec::image::Config>,
    env: &[(String, String)],
) -> Result<Vec<String>, SpecError> {
    let map: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let exp = |list: &Option<Vec<String>>| -> Vec<String> {
        list.iter()
            .flatten()
            .map(|s| expand(s, |n| map.get(n).map(|v| v.to_string())))
            .collect()
    };
    let command = exp(&ctx.container.command);
    let args = exp(&ctx.container.args);
    let image_entrypoint = image
        .and_then(|c| c.entrypoint().clone())
        .unwrap_or_default();
    // Docker writes ENTRYPOINT [""] for "no entrypoint"; containerd treats it so.
    let image_entrypoint = if image_entrypoint.len() == 1 && image_entrypoint[0].is_empty() {
        Vec::new()
    } else {
        image_entrypoint
    };
    let image_cmd = image.and_then(|c| c.cmd().clone()).unwrap_or_default();
    let argv = match (command.is_empty(), args.is_empty()) {
        (true, true) => [image_entrypoint, image_cmd].concat(),
        (false, true) => command,
        (true, false) => [image_entrypoint, args].concat(),
        (false, false) => [command, args].concat(),
    };
    if argv.is_empty() || argv[0].is_empty() {
        return Err(SpecError::EmptyCommand {
            container: ctx.container.name.clone(),
        });
    }
    Ok(argv)
}

fn working_dir(
    ctx: &Ctx<'_>,
    image: Option<&oci_spec::image::Config>,
) -> Result<PathBuf, SpecError> {
    if let Some(wd) = ctx
        .container
        .working_dir
        .as_deref()
        .filter(|w| !w.is_empty())
    {
        if !wd.starts_with('/') {
            return Err(invalid(
                ctx.field("workingDir"),
                wd,
                "must be an absolute path",
            ));
        }
        return Ok(PathBuf::from(wd));
    }
    match image
        .and_then(|c| c.working_dir().as_deref())
        .filter(|w| !w.is_empty())
    {
        Some(wd) if wd.starts_with('/') => Ok(PathBuf::from(wd)),
        Some(wd) => Err(invalid(
            "image config WorkingDir".into(),
            wd,
            "must be an absolute path",
        )),
        None => Ok(PathBuf::from("/")),
    }
}

fn id_field(value: i64, field: String) -> Result<u32, SpecError> {
    u32::try_from(value)
        .ok()
        .filter(|v| *v <= i32::MAX as u32)
        .ok_or_else(|| invalid(field, value.to_string(), "must be between 0 and 2147483647"))
}

/// The securityContext setting of the container, else of the pod, with its field path.
fn sc_setting<T: Clone>(
    ctx: &Ctx<'_>,
    name: &str,
    container: impl Fn(&SecurityContext) -> Option<T>,
    pod: impl Fn(&k8s_openapi::api::core::v1::PodSecurityContext) -> Option<T>,
) -> Option<(T, String)> {
    if let Some(v) = ctx.sc().and_then(&container) {
        return Some((v, ctx.field(&format!("securityContext.{name}"))));
    }
    ctx.spec
        .security_context
        .as_ref()
        .and_then(pod)
        .map(|v| (v, format!("spec.securityContext.{name}")))
}

fn user_request(
    ctx: &Ctx<'_>,
    image: Option<&oci_spec::image::Config>,
) -> Result<UserRequest, SpecError> {
    let run_as_user = sc_setting(ctx, "runAsUser", |s| s.run_as_user, |p| p.run_as_user)
        .map(|(v, f)| id_field(v, f))
        .transpose()?;
    let run_as_group = sc_setting(ctx, "runAsGroup", |s| s.run_as_group, |p| p.run_as_group)
        .map(|(v, f)| id_field(v, f))
        .transpose()?;
    let run_as_non_root = sc_setting(
        ctx,
        "runAsNonRoot",
        |s| s.run_as_non_root,
        |p| p.run_as_non_root,
    )
    .is_some_and(|(v, _)| v);
    let psc = ctx.spec.security_context.as_ref();
    let mut supplemental_groups = Vec::new();
    if let Some(fs_group) = psc.and_then(|p| p.fs_group) {
        supplemental_groups.push(id_field(fs_group, "spec.securityContext.fsGroup".into())?);
    }
    for (i, g) in psc
        .and_then(|p| p.supplemental_groups.as_ref())
        .into_iter()
        .flatten()
        .enumerate()
    {
        supplemental_groups.push(id_field(
            *g,
            format!("spec.securityContext.supplementalGroups[{i}]"),
        )?);
    }
    let strict_supplemental_groups = match psc.and_then(|p| p.supplemental_groups_policy.as_deref())
    {
        None | Some("Merge") => false,
        Some("Strict") => true,
        Some(other) => {
            return Err(invalid(
                "spec.securityContext.supplementalGroupsPolicy".into(),
                other,
                "must be Merge or Strict",
            ))
        }
    };
    let mut req = UserRequest {
        uid: None,
        user_name: None,
        gid: run_as_group,
        group_name: None,
        supplemental_groups,
        run_as_non_root,
        strict_supplemental_groups,
    };
    let container = ctx.container.name.clone();
    if let Some(uid) = run_as_user {
        if run_as_non_root && uid == 0 {
            return Err(SpecError::RunAsNonRoot {
                container,
                reason: "runAsUser breaks non-root policy".into(),
            });
        }
        req.uid = Some(uid);
        return Ok(req);
    }
    let image_user = image.and_then(|c| c.user().as_deref()).unwrap_or("");
    let (user_part, group_part) = match image_user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (image_user, None),
    };
    let field = || "image config User".to_string();
    if user_part.is_empty() && group_part.is_some() {
        return Err(invalid(field(), image_user, "a group needs a user"));
    }
    match user_part.parse::<u32>() {
        Ok(uid) => req.uid = Some(uid),
        Err(_) if user_part.is_empty() => {}
        Err(_) => req.user_name = Some(user_part.to_string()),
    }
    if run_as_non_root {
        if let Some(name) = &req.user_name {
            return Err(SpecError::RunAsNonRoot {
                container,
                reason: format!(
                    "runAsNonRoot and image has non-numeric user ({name}), cannot verify user is non-root"
                ),
            });
        }
        if req.uid.unwrap_or(0) == 0 {
            return Err(SpecError::RunAsNonRoot {
                container,
                reason: "runAsNonRoot and image will run as root".into(),
            });
        }
    }
    if req.gid.is_none() {
        match group_part {
            None => {}
            Some("") => return Err(invalid(field(), image_user, "empty group")),
            Some(g) => match g.parse::<u32>() {
                Ok(gid) => req.gid = Some(gid),
                Err(_) => req.group_name = Some(g.to_string()),
            },
        }
    }
    Ok(req)
}

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
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

fn namespaces(sandbox: &SandboxMounts) -> Vec<LinuxNamespace> {
    let ns = |typ, path: Option<&PathBuf>| {
        let mut n = LinuxNamespace::default();
        n.set_typ(typ);
        n.set_path(path.cloned());
        n
    };
    let mut list = vec![
        ns(LinuxNamespaceType::Pid, None),
        ns(LinuxNamespaceType::Ipc, Some(&sandbox.ipc_ns)),
    ];
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

fn mount(dest: &str, typ: &str, source: &Path, options: &[&str]) -> Mount {
    let mut m = Mount::default();
    m.set_destination(PathBuf::from(dest));
    m.set_typ(Some(typ.to_string()));
    m.set_source(Some(source.to_path_buf()));
    m.set_options(Some(options.iter().map(|s| s.to_string()).collect()));
    m
}

fn bind(dest: &Path, source: &Path, options: Vec<String>) -> Mount {
    let mut m = Mount::default();
    m.set_destination(dest.to_path_buf());
    m.set_typ(Some("bind".to_string()));
    m.set_source(Some(source.to_path_buf()));
    m.set_options(Some(options));
    m
}

fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// The spec's mounts and the rootfs propagation volume mounts require.
fn mounts(
    ctx: &Ctx<'_>,
    sandbox: &SandboxMounts,
    privileged: bool,
    read_only_root: bool,
    pin_dir: Option<&Path>,
) -> Result<(Vec<Mount>, Option<String>), SpecError> {
    let sys_mode = if privileged { "rw" } else { "ro" };
    let defaults = vec![
        mount(
            "/proc",
            "proc",
            Path::new("proc"),
            &["nosuid", "noexec", "nodev"],
        ),
        mount(
            "/dev",
            "tmpfs",
            Path::new("tmpfs"),
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        ),
        mount(
            "/dev/pts",
            "devpts",
            Path::new("devpts"),
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        ),
        mount(
            "/dev/mqueue",
            "mqueue",
            Path::new("mqueue"),
            &["nosuid", "noexec", "nodev"],
        ),
        mount(
            "/sys",
            "sysfs",
            Path::new("sysfs"),
            &["nosuid", "noexec", "nodev", sys_mode],
        ),
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            Path::new("cgroup"),
            &["nosuid", "noexec", "nodev", "relatime", sys_mode],
        ),
    ];

    let etc_mode = if read_only_root { "ro" } else { "rw" };
    let opts = |extra: &[&str]| -> Vec<String> {
        ["rbind", "rprivate"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    // containerd's CRI mounts: sandbox files, then the pod's volumes.
    let mut cri: Vec<Mount> = vec![
        bind(
            Path::new("/etc/hostname"),
            &sandbox.hostname,
            opts(&[etc_mode]),
        ),
        bind(Path::new("/etc/hosts"), &sandbox.hosts, opts(&["rw"])),
        bind(
            Path::new("/etc/resolv.conf"),
            &sandbox.resolv_conf,
            opts(&[etc_mode]),
        ),
        bind(
            Path::new("/dev/shm"),
            &sandbox.shm,
            opts(&["nosuid", "nodev", "noexec", "rw"]),
        ),
    ];
    let mut volume_dests: HashSet<PathBuf> = HashSet::new();
    let mut volume_mounts = Vec::new();
    let mut propagation_needed: Option<&str> = None;
    for (j, vm) in ctx.container.volume_mounts.iter().flatten().enumerate() {
        let field = ctx.field(&format!("volumeMounts[{j}]"));
        let dest = Path::new(&vm.mount_path);
        if !dest.is_absolute() || dest.components().any(|c| c == Component::ParentDir) {
            return Err(invalid(
                format!("{field}.mountPath"),
                &vm.mount_path,
                "must be an absolute path without '..'",
            ));
        }
        let dest = PathBuf::from("/").join(dest.components().collect::<PathBuf>());
        if !volume_dests.insert(dest.clone()) {
            return Err(invalid(
                format!("{field}.mountPath"),
                &vm.mount_path,
                "must be unique",
            ));
        }
        let volume_path =
            sandbox
                .volumes
                .get(&vm.name)
                .ok_or_else(|| SpecError::UnknownVolume {
                    field: field.clone(),
                    volume: vm.name.clone(),
                })?;
        if vm.sub_path_expr.as_deref().is_some_and(|s| !s.is_empty()) {
            return Err(SpecError::NotSupportedYet {
                field: format!("{field}.subPathExpr"),
            });
        }
        let read_only = vm.read_only.unwrap_or(false);
        match vm.recursive_read_only.as_deref() {
            None | Some("Disabled") => {}
            Some("IfPossible") if read_only => {}
            Some("Enabled") => {
                return Err(SpecError::NotSupportedYet {
                    field: format!("{field}.recursiveReadOnly"),
                })
            }
            Some(other) => {
                return Err(invalid(
                    format!("{field}.recursiveReadOnly"),
                    other,
                    "must be Disabled, or IfPossible/Enabled with readOnly",
                ))
            }
        }
        let propagation =
            match vm.mount_propagation.as_deref() {
                None | Some("None") => "rprivate",
                Some("HostToContainer") => {
                    propagation_needed.get_or_insert("rslave");
                    "rslave"
                }
                Some("Bidirectional") if privileged => {
                    propagation_needed = Some("rshared");
                    "rshared"
                }
                Some("Bidirectional") => return Err(invalid(
                    format!("{field}.mountPropagation"),
                    "Bidirectional",
                    "Bidirectional mount propagation is available only to privileged containers",
                )),
                Some(other) => {
                    return Err(invalid(
                        format!("{field}.mountPropagation"),
                        other,
                        "must be None, HostToContainer or Bidirectional",
                    ))
                }
            };
        let source = match vm.sub_path.as_deref().filter(|s| !s.is_empty()) {
            None => volume_path.clone(),
            Some(sub) => {
                let sub_field = format!("{field}.subPath");
                let (path, fd) = prepare_sub_path(volume_path, sub, &sub_field)?;
                match pin_dir {
                    Some(dir) => super::rootfs::pin_sub_path(dir, j, &fd).map_err(|source| {
                        SpecError::SubPath {
                            field: sub_field,
                            sub_path: sub.to_string(),
                            volume_path: volume_path.clone(),
                            source,
                        }
                    })?,
                    None => path,
                }
            }
        };
        let options = vec![
            "rbind".to_string(),
            propagation.to_string(),
            if read_only { "ro" } else { "rw" }.to_string(),
        ];
        volume_mounts.push(bind(&dest, &source, options));
    }
    // A volume mounted over a sandbox file or a default mount replaces it (containerd).
    cri.retain(|m| !volume_dests.contains(m.destination()));
    cri.extend(volume_mounts);
    cri.sort_by_key(|m| depth(m.destination()));
    let mut all: Vec<Mount> = defaults
        .into_iter()
        .filter(|m| !volume_dests.contains(m.destination()))
        .collect();
    all.extend(cri);
    Ok((all, propagation_needed.map(str::to_string)))
}

/// Checks that `sub` stays below `volume` (relative, no `..`, symlinks resolved beneath the
/// volume) and creates missing directories with the volume's mode, like the kubelet. Returns
/// the path and the resolved file or directory, open with `O_PATH`.
fn prepare_sub_path(
    volume: &Path,
    sub: &str,
    field: &str,
) -> Result<(PathBuf, OwnedFd), SpecError> {
    let rel = Path::new(sub);
    if rel.is_absolute() || rel.components().any(|c| c == Component::ParentDir) {
        return Err(invalid(
            field.to_string(),
            sub,
            "must be a relative path without '..'",
        ));
    }
    let err = |source| SpecError::SubPath {
        field: field.to_string(),
        sub_path: sub.to_string(),
        volume_path: volume.to_path_buf(),
        source,
    };
    let root = open_root(volume).map_err(err)?;
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    match openat2_in_root(&root, rel, libc::O_PATH, resolve) {
        Ok(fd) => return Ok((volume.join(rel), fd)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let mode = std::fs::metadata(volume).map_err(err)?.permissions().mode() & 0o7777;
    let mut dir: OwnedFd = root;
    for comp in rel.components() {
        let Component::Normal(name) = comp else {
            continue;
        };
        let next = match openat2_in_root(&dir, Path::new(name), libc::O_PATH, resolve) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match nix::sys::stat::mkdirat(
                    Some(dir.as_raw_fd()),
                    name,
                    nix::sys::stat::Mode::from_bits_truncate(mode),
                ) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    Err(e) => return Err(err(io::Error::from(e))),
                }
                openat2_in_root(
                    &dir,
                    Path::new(name),
                    libc::O_PATH | libc::O_DIRECTORY,
                    resolve,
                )
                .map_err(err)?
            }
            Err(e) => return Err(err(e)),
        };
        dir = next;
    }
    Ok((volume.join(rel), dir))
}

fn parse_capability(name: &str, field: String) -> Result<Capability, SpecError> {
    serde_json::from_value(serde_json::Value::String(name.to_string()))
        .map_err(|_| invalid(field, name, "unknown capability"))
}

fn capabilities(ctx: &Ctx<'_>, privileged: bool) -> Result<LinuxCapabilities, SpecError> {
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

fn no_new_privileges(ctx: &Ctx<'_>, privileged: bool) -> Result<bool, SpecError> {
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

fn resources(ctx: &Ctx<'_>, privileged: bool) -> Result<LinuxResources, SpecError> {
    let r = ctx.container.resources.as_ref();
    let requests = effective_requests(r);
    let limits = r.and_then(|r| r.limits.clone()).unwrap_or_default();
    let get = |list: &BTreeMap<String, Quantity>,
               name: &str,
               kind: &str,
               f: fn(&Quantity) -> Result<u64, QuantityError>|
     -> Result<u64, SpecError> {
        list.get(name)
            .map(|q| {
                f(q).map_err(|source| SpecError::Quantity {
                    field: ctx.field(&format!("resources.{kind}.{name}")),
                    source,
                })
            })
            .transpose()
            .map(Option::unwrap_or_default)
    };
    let cpu_request = get(&requests, "cpu", "requests", parse_cpu_millis)?;
    let cpu_limit = get(&limits, "cpu", "limits", parse_cpu_millis)?;
    let memory_limit = get(&limits, "memory", "limits", parse_bytes)?;

    let share_millis = if cpu_request == 0 && cpu_limit != 0 {
        cpu_limit
    } else {
        cpu_request
    };
    // The kubelet's calculateLinuxResources: shares from the request (or the limit when only
    // a limit is set), the CFS quota from the limit.
    let shares = cgroup_resources::milli_cpu_to_shares(share_millis);
    let mut cpu = LinuxCpu::default();
    cpu.set_shares(Some(shares));
    if cpu_limit != 0 {
        let quota =
            cgroup_resources::milli_cpu_to_quota(cpu_limit, cgroup_resources::CPU_PERIOD_US);
        cpu.set_quota(Some(i64::try_from(quota).unwrap_or(i64::MAX)));
        cpu.set_period(Some(cgroup_resources::CPU_PERIOD_US));
    }
    let mut res = LinuxResources::default();
    res.set_devices(Some(security::devices::cgroup_rules(privileged)));
    res.set_cpu(Some(cpu));
    if memory_limit != 0 {
        let limit = i64::try_from(memory_limit).map_err(|_| {
            invalid(
                ctx.field("resources.limits.memory"),
                memory_limit.to_string(),
                "too large",
            )
        })?;
        let mut memory = LinuxMemory::default();
        memory.set_limit(Some(limit));
        res.set_memory(Some(memory));
    }
    Ok(res)
}

/// The pod's sysctls in `.` form, as the node allows them.
fn sysctls(
    ctx: &Ctx<'_>,
    node: &NodeSecurity,
) -> Result<Option<HashMap<String, String>>, SpecError> {
    let list = security::pod_sysctls(ctx.pod, node).map_err(SpecError::Security)?;
    Ok((!list.is_empty()).then(|| list.into_iter().collect()))
}

/// The container's seccomp filter: none for privileged containers and Unconfined, containerd's
/// default profile for its bounding capabilities, or the Localhost profile file.
fn seccomp_filter(
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
fn apparmor_profile(
    ctx: &Ctx<'_>,
    privileged: bool,
    node: &NodeSecurity,
) -> Result<Option<String>, SpecError> {
    let (choice, field) =
        apparmor::choice(ctx.pod, ctx.container, &ctx.path).map_err(SpecError::Security)?;
    apparmor::resolve(&choice, field.as_deref(), privileged, &node.apparmor)
        .map_err(SpecError::Security)
}

/// Parses "SIGTERM", "TERM", "sigterm", "15", "SIGRTMIN+3".
pub fn parse_signal(s: &str) -> Option<i32> {
    let s = s.trim();
    if let Ok(n) = s.parse::<i32>() {
        return (1..=libc::SIGRTMAX()).contains(&n).then_some(n);
    }
    let upper = s.to_ascii_uppercase();
    let name = upper.strip_prefix("SIG").unwrap_or(&upper);
    let rt = |base: i32, off: &str, sign: i32| -> Option<i32> {
        let off: i32 = if off.is_empty() { 0 } else { off.parse().ok()? };
        let n = base + sign * off;
        (libc::SIGRTMIN()..=libc::SIGRTMAX())
            .contains(&n)
            .then_some(n)
    };
    if let Some(off) = name.strip_prefix("RTMIN") {
        return rt(libc::SIGRTMIN(), off.strip_prefix('+').unwrap_or(off), 1);
    }
    if let Some(off) = name.strip_prefix("RTMAX") {
        return rt(libc::SIGRTMAX(), off.strip_prefix('-').unwrap_or(off), -1);
    }
    format!("SIG{name}")
        .parse::<nix::sys::signal::Signal>()
        .ok()
        .map(|sig| sig as i32)
}

fn stop_signal(ctx: &Ctx<'_>, image: Option<&oci_spec::image::Config>) -> Result<i32, SpecError> {
    if let Some(s) = ctx
        .container
        .lifecycle
        .as_ref()
        .and_then(|l| l.stop_signal.as_deref())
    {
        return parse_signal(s)
            .ok_or_else(|| invalid(ctx.field("lifecycle.stopSignal"), s, "unknown signal"));
    }
    match image.and_then(|c| c.stop_signal().as_deref()) {
        None | Some("") => Ok(libc::SIGTERM),
        Some(s) => parse_signal(s)
            .ok_or_else(|| invalid("image config StopSignal".into(), s, "unknown signal")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).expect("pod json")
    }

    /// A pod with one container `c` whose fields are `container`, and pod spec extras.
    fn pod_with(container: serde_json::Value, spec_extra: serde_json::Value) -> Pod {
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

    fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
        if let (Some(b), serde_json::Value::Object(e)) = (base.as_object_mut(), extra) {
            b.extend(e);
        }
    }

    fn image(config: serde_json::Value) -> ImageConfiguration {
        serde_json::from_value(json!({
            "architecture": "amd64", "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": []},
            "config": config
        }))
        .expect("image json")
    }

    fn sandbox(host_network: bool) -> SandboxMounts {
        SandboxMounts {
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
        }
    }

    fn node() -> NodeInfo {
        NodeInfo {
            name: "node1".into(),
            cpu_millis: 2000,
            memory_bytes: 4 << 30,
            host_ip: "192.0.2.10".into(),
            bounding_capabilities: ALL_CAPABILITIES.into_iter().collect(),
        }
    }

    fn build_with(
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
            sub_path_pins: None,
        })
    }

    /// Builds the first container of `p` on a node offering `security`.
    fn build_on(
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
            sub_path_pins: None,
        })
    }

    fn build(p: &Pod) -> Result<ContainerSpec, SpecError> {
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

    fn ok(p: &Pod) -> ContainerSpec {
        build(p).expect("build_spec")
    }

    fn err(p: &Pod) -> String {
        build(p).expect_err("build_spec must fail").to_string()
    }

    fn process(cs: &ContainerSpec) -> &Process {
        cs.spec.process().as_ref().expect("process")
    }

    fn linux(cs: &ContainerSpec) -> &Linux {
        cs.spec.linux().as_ref().expect("linux")
    }

    fn args(cs: &ContainerSpec) -> Vec<String> {
        process(cs).args().clone().expect("args")
    }

    fn env(cs: &ContainerSpec) -> Vec<String> {
        process(cs).env().clone().expect("env")
    }

    fn env_value(cs: &ContainerSpec, key: &str) -> Option<String> {
        env(cs)
            .iter()
            .find_map(|kv| kv.strip_prefix(&format!("{key}=")).map(str::to_string))
    }

    fn strs(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    // ---- command / args (one test per row of the Kubernetes docs table) ----

    #[test]
    fn command_args_neither_uses_image_entrypoint_and_cmd() {
        assert_eq!(
            args(&ok(&pod_with(json!({}), json!({})))),
            strs(&["/bin/app", "--serve"])
        );
    }

    #[test]
    fn command_args_command_only_ignores_image_entrypoint_and_cmd() {
        let p = pod_with(json!({"command": ["/bin/other", "-x"]}), json!({}));
        assert_eq!(args(&ok(&p)), strs(&["/bin/other", "-x"]));
    }

    #[test]
    fn command_args_args_only_uses_image_entrypoint() {
        let p = pod_with(json!({"args": ["--debug"]}), json!({}));
        assert_eq!(args(&ok(&p)), strs(&["/bin/app", "--debug"]));
    }

    #[test]
    fn command_args_both_use_manifest() {
        let p = pod_with(
            json!({"command": ["/bin/sh"], "args": ["-c", "echo"]}),
            json!({}),
        );
        assert_eq!(args(&ok(&p)), strs(&["/bin/sh", "-c", "echo"]));
    }

    #[test]
    fn empty_command_is_an_error_naming_the_container() {
        let p = pod_with(json!({}), json!({}));
        let e = build_with(&p, &image(json!({"Entrypoint": [""]})), &sandbox(false))
            .expect_err("no command");
        assert_eq!(
            e.to_string(),
            "container \"c\" has no command: neither the manifest nor the image sets one"
        );
        // ENTRYPOINT [""] means "none": the Cmd alone runs.
        let cs = build_with(
            &p,
            &image(json!({"Entrypoint": [""], "Cmd": ["sh"]})),
            &sandbox(false),
        )
        .expect("cmd only");
        assert_eq!(args(&cs), strs(&["sh"]));
    }

    // ---- env and expansion ----

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars = HashMap::from([("A", "1"), ("EMPTY", "")]);
        let lookup = |n: &str| vars.get(n).map(|v| v.to_string());
        let cases = [
            ("$(A)", "1"),
            ("x$(A)y$(A)", "x1y1"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$1"),
            ("$(B)", "$(B)"),
            ("$(A", "$(A"),
            ("$(", "$("),
            ("$", "$"),
            ("a$b", "a$b"),
            ("$()", "$()"),
            ("$(EMPTY)", ""),
            ("é$(A)é", "é1é"),
            ("$é", "$é"),
            ("$(A)$", "1$"),
            ("$$", "$"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, lookup), want, "input {input:?}");
        }
    }

    #[test]
    fn env_order_image_then_container_with_in_place_override() {
        let p = pod_with(
            json!({"env": [
                {"name": "B", "value": "container-b"},
                {"name": "C", "value": "c"},
                {"name": "C", "value": "c2"}
            ]}),
            json!({}),
        );
        let img = image(json!({"Entrypoint": ["/bin/app"], "Env": ["A=img-a", "B=img-b"]}));
        let cs = build_with(&p, &img, &sandbox(false)).expect("build");
        assert_eq!(
            env(&cs),
            strs(&[
                &format!("PATH={DEFAULT_PATH_ENV}"),
                "HOSTNAME=web-node1",
                "A=img-a",
                "B=container-b",
                "C=c2",
            ])
        );
    }

    #[test]
    fn image_path_replaces_default_and_container_path_wins() {
        let img = image(json!({"Entrypoint": ["/bin/app"], "Env": ["PATH=/opt/bin"]}));
        let cs = build_with(&pod_with(json!({}), json!({})), &img, &sandbox(false)).expect("build");
        assert_eq!(env(&cs)[0], "PATH=/opt/bin");
        let p = pod_with(json!({"env": [{"name": "PATH", "value": "/x"}]}), json!({}));
        let cs = build_with(&p, &img, &sandbox(false)).expect("build");
        assert_eq!(env_value(&cs, "PATH").as_deref(), Some("/x"));
        assert_eq!(
            env(&cs).iter().filter(|e| e.starts_with("PATH=")).count(),
            1
        );
    }

    #[test]
    fn env_expansion_sees_only_earlier_container_vars() {
        let p = pod_with(
            json!({"env": [
                {"name": "A", "value": "a"},
                {"name": "B", "value": "$(A)-$(C)-$(IMG)-$$(A)"},
                {"name": "C", "value": "c"}
            ],
            "command": ["/bin/echo", "$(A)$(C)", "$(IMG)"],
            "args": ["$(B)"]}),
            json!({}),
        );
        let img = image(json!({"Env": ["IMG=i"]}));
        let cs = build_with(&p, &img, &sandbox(false)).expect("build");
        assert_eq!(env_value(&cs, "B").as_deref(), Some("a-$(C)-$(IMG)-$(A)"));
        assert_eq!(
            args(&cs),
            strs(&["/bin/echo", "ac", "$(IMG)", "a-$(C)-$(IMG)-$(A)"])
        );
    }

    #[test]
    fn field_refs_resolve_pod_metadata_and_node() {
        let fr = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
        let p = pod_with(
            json!({"env": [
                fr("NAME", "metadata.name"),
                fr("NS", "metadata.namespace"),
                fr("UID", "metadata.uid"),
                fr("APP", "metadata.labels['app']"),
                fr("MISSING", "metadata.labels['nope']"),
                fr("NOTE", "metadata.annotations['note']"),
                fr("NODE", "spec.nodeName"),
                fr("SA", "spec.serviceAccountName"),
                fr("HOST_IP", "status.hostIP"),
                fr("HOST_IPS", "status.hostIPs"),
                fr("POD_IP", "status.podIP"),
                fr("POD_IPS", "status.podIPs"),
                {"name": "LITERAL", "value": "$(NAME)"}
            ]}),
            json!({"serviceAccountName": "sa1"}),
        );
        let cs = ok(&p);
        let want = [
            ("NAME", "web-node1"),
            ("NS", "prod"),
            ("UID", "u-1"),
            ("APP", "web"),
            ("MISSING", ""),
            ("NOTE", "hi"),
            ("NODE", "node1"),
            ("SA", "sa1"),
            ("HOST_IP", "192.0.2.10"),
            ("HOST_IPS", "192.0.2.10"),
            ("POD_IP", "127.0.0.1"),
            ("POD_IPS", "127.0.0.1"),
            ("LITERAL", "web-node1"),
        ];
        for (k, v) in want {
            assert_eq!(env_value(&cs, k).as_deref(), Some(v), "{k}");
        }
        let host = pod_with(
            json!({"env": [fr("POD_IP", "status.podIP")]}),
            json!({"hostNetwork": true}),
        );
        assert_eq!(
            env_value(&ok(&host), "POD_IP").as_deref(),
            Some("192.0.2.10")
        );
        let bad = pod_with(json!({"env": [fr("X", "metadata.labels")]}), json!({}));
        assert!(
            err(&bad).starts_with("spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: invalid value \"metadata.labels\""),
            "{}",
            err(&bad)
        );
    }

    #[test]
    fn resource_field_refs_use_divisor_and_node_capacity() {
        let rf = |name: &str, res: &str, div: Option<&str>| {
            let mut r = json!({"resource": res});
            if let Some(d) = div {
                r["divisor"] = json!(d);
            }
            json!({"name": name, "valueFrom": {"resourceFieldRef": r}})
        };
        let p = pod_with(
            json!({
                "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "env": [
                    rf("CPU_LIMIT", "limits.cpu", None),
                    rf("CPU_LIMIT_M", "limits.cpu", Some("1m")),
                    rf("CPU_REQ", "requests.cpu", None),
                    rf("CPU_REQ_M", "requests.cpu", Some("1m")),
                    rf("MEM_LIMIT_MI", "limits.memory", Some("1Mi")),
                    rf("MEM_REQ", "requests.memory", None),
                    rf("MEM_REQ_K", "requests.memory", Some("1k"))
                ]
            }),
            json!({}),
        );
        let cs = ok(&p);
        let want = [
            ("CPU_LIMIT", "2"),
            ("CPU_LIMIT_M", "2000"),
            ("CPU_REQ", "1"),
            ("CPU_REQ_M", "250"),
            ("MEM_LIMIT_MI", "128"),
            ("MEM_REQ", "134217728"),
            ("MEM_REQ_K", "134218"),
        ];
        for (k, v) in want {
            assert_eq!(env_value(&cs, k).as_deref(), Some(v), "{k}");
        }
        let no_limit = pod_with(json!({"env": [rf("M", "limits.memory", None)]}), json!({}));
        assert_eq!(
            env_value(&ok(&no_limit), "M"),
            Some((4u64 << 30).to_string())
        );
        let bad = pod_with(
            json!({"env": [rf("E", "limits.ephemeral-storage", None)]}),
            json!({}),
        );
        assert!(
            err(&bad).starts_with("spec.containers[0].env[0].valueFrom.resourceFieldRef.resource")
        );
    }

    #[test]
    fn api_object_references_are_refused_with_field_path() {
        let p = pod_with(
            json!({"env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "2"},
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
            ]}),
            json!({}),
        );
        assert_eq!(
            err(&p),
            "spec.containers[0].env[2].valueFrom.secretKeyRef: static pods cannot reference API objects"
        );
        let p = pod_with(
            json!({"env": [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]}),
            json!({}),
        );
        assert_eq!(
            err(&p),
            "spec.containers[0].env[0].valueFrom.configMapKeyRef: static pods cannot reference API objects"
        );
        let p = pod_with(
            json!({"envFrom": [{"configMapRef": {"name": "c"}}]}),
            json!({}),
        );
        assert_eq!(
            err(&p),
            "spec.containers[0].envFrom[0]: static pods cannot reference API objects"
        );
    }

    // ---- working directory ----

    #[test]
    fn working_dir_container_then_image_then_root() {
        let img = image(json!({"Entrypoint": ["/a"], "WorkingDir": "/srv"}));
        let cwd = |p: &Pod, i: &ImageConfiguration| {
            process(&build_with(p, i, &sandbox(false)).expect("build"))
                .cwd()
                .clone()
        };
        let plain = pod_with(json!({}), json!({}));
        assert_eq!(cwd(&plain, &img), PathBuf::from("/srv"));
        assert_eq!(
            cwd(&plain, &image(json!({"Entrypoint": ["/a"]}))),
            PathBuf::from("/")
        );
        let set = pod_with(json!({"workingDir": "/work"}), json!({}));
        assert_eq!(cwd(&set, &img), PathBuf::from("/work"));
        let rel = pod_with(json!({"workingDir": "work"}), json!({}));
        assert!(err(&rel).starts_with("spec.containers[0].workingDir: invalid value \"work\""));
    }

    // ---- user ----

    fn user_of(
        container: serde_json::Value,
        pod_sc: serde_json::Value,
        image_user: &str,
    ) -> Result<UserRequest, SpecError> {
        let p = pod_with(container, json!({"securityContext": pod_sc}));
        let img = image(json!({"Entrypoint": ["/a"], "User": image_user}));
        build_with(&p, &img, &sandbox(false)).map(|cs| cs.user)
    }

    #[test]
    fn security_context_user_overrides_image_and_container_overrides_pod() {
        let u = user_of(
            json!({"securityContext": {"runAsUser": 1000}}),
            json!({"runAsUser": 2000, "runAsGroup": 3000, "fsGroup": 4000, "supplementalGroups": [5000, 6000]}),
            "app:staff",
        )
        .expect("user");
        assert_eq!(
            u,
            UserRequest {
                uid: Some(1000),
                user_name: None,
                gid: Some(3000),
                group_name: None,
                supplemental_groups: vec![4000, 5000, 6000],
                run_as_non_root: false,
                strict_supplemental_groups: false,
            }
        );
    }

    #[test]
    fn image_user_forms() {
        let cases = [
            ("", None, None, None, None),
            ("1000", Some(1000), None, None, None),
            ("1000:50", Some(1000), None, Some(50), None),
            ("app", None, Some("app"), None, None),
            ("app:staff", None, Some("app"), None, Some("staff")),
            ("1000:staff", Some(1000), None, None, Some("staff")),
            ("app:50", None, Some("app"), Some(50), None),
        ];
        for (img_user, uid, name, gid, group) in cases {
            let u = user_of(json!({}), json!({}), img_user).expect(img_user);
            assert_eq!(
                (
                    u.uid,
                    u.user_name.as_deref(),
                    u.gid,
                    u.group_name.as_deref()
                ),
                (uid, name, gid, group),
                "image user {img_user:?}"
            );
        }
        // runAsGroup replaces the image group but keeps the image user.
        let u = user_of(
            json!({"securityContext": {"runAsGroup": 7}}),
            json!({}),
            "app:staff",
        )
        .expect("group");
        assert_eq!(
            (u.user_name.as_deref(), u.gid, u.group_name),
            (Some("app"), Some(7), None)
        );
        let bad = user_of(json!({}), json!({}), ":50").expect_err("no user");
        assert!(bad
            .to_string()
            .starts_with("image config User: invalid value \":50\""));
    }

    #[test]
    fn run_as_non_root_follows_kubelet_checks() {
        let non_root = json!({"runAsNonRoot": true});
        let e = user_of(
            json!({"securityContext": {"runAsUser": 0}}),
            non_root.clone(),
            "1000",
        )
        .expect_err("uid 0");
        assert_eq!(
            e.to_string(),
            "container \"c\": runAsUser breaks non-root policy"
        );
        let e = user_of(json!({}), non_root.clone(), "").expect_err("image root");
        assert_eq!(
            e.to_string(),
            "container \"c\": runAsNonRoot and image will run as root"
        );
        let e = user_of(json!({}), non_root.clone(), "0:0").expect_err("image uid 0");
        assert!(e.to_string().ends_with("image will run as root"));
        let e = user_of(json!({}), non_root.clone(), "app").expect_err("name");
        assert!(e.to_string().contains("non-numeric user (app)"), "{e}");
        let u = user_of(json!({}), non_root.clone(), "1000").expect("numeric non-root");
        assert!(u.run_as_non_root);
        // The container can switch the pod setting off.
        let u = user_of(
            json!({"securityContext": {"runAsNonRoot": false}}),
            non_root,
            "",
        )
        .expect("off");
        assert!(!u.run_as_non_root);
        let e = user_of(json!({"securityContext": {"runAsUser": -1}}), json!({}), "")
            .expect_err("negative");
        assert!(e
            .to_string()
            .starts_with("spec.containers[0].securityContext.runAsUser: invalid value \"-1\""));
    }

    #[test]
    fn strict_supplemental_groups_policy() {
        let u = user_of(
            json!({}),
            json!({"supplementalGroupsPolicy": "Strict"}),
            "1",
        )
        .expect("strict");
        assert!(u.strict_supplemental_groups);
        let e =
            user_of(json!({}), json!({"supplementalGroupsPolicy": "Loose"}), "1").expect_err("bad");
        assert!(e
            .to_string()
            .starts_with("spec.securityContext.supplementalGroupsPolicy"));
    }

    #[test]
    fn build_then_resolve_user_against_rootfs() {
        let root = tempfile::tempdir().expect("rootfs");
        std::fs::create_dir(root.path().join("etc")).expect("etc");
        std::fs::write(
            root.path().join("etc/passwd"),
            "app:x:1000:1000::/:/bin/sh\n",
        )
        .expect("passwd");
        std::fs::write(root.path().join("etc/group"), "tools:x:20:app\n").expect("group");
        let u = user_of(json!({}), json!({"fsGroup": 30}), "app").expect("user");
        let resolved = resolve_user(root.path(), &u).expect("resolve");
        assert_eq!((resolved.uid(), resolved.gid()), (1000, 1000));
        assert_eq!(resolved.additional_gids().clone(), Some(vec![1000, 20, 30]));
    }

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
        let e =
            build_with(&p, &image(json!({"Cmd": ["x"]})), &sandbox(false)).expect_err("mismatch");
        assert!(matches!(e, SpecError::SandboxMismatch { .. }));
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
                json!({}),
                json!({"hostPID": true}),
                "spec.hostPID is not supported",
            ),
            (
                json!({}),
                json!({"hostIPC": true}),
                "spec.hostIPC is not supported",
            ),
            (
                json!({}),
                json!({"shareProcessNamespace": true}),
                "spec.shareProcessNamespace is not supported yet",
            ),
            (
                json!({"tty": true}),
                json!({}),
                "spec.containers[0].tty is not supported yet",
            ),
            (
                json!({"stdin": true}),
                json!({}),
                "spec.containers[0].stdin is not supported yet",
            ),
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
    fn init_containers_are_found_and_named() {
        let p = pod(json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "main"}],
                "initContainers": [{"name": "init", "tty": true}]
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
            sub_path_pins: None,
        };
        let e = build_spec(&req).expect_err("tty");
        assert_eq!(
            e.to_string(),
            "spec.initContainers[0].tty is not supported yet"
        );
        let stranger: Container = serde_json::from_value(json!({"name": "stranger"})).expect("c");
        req.container = &stranger;
        assert_eq!(
            build_spec(&req).expect_err("stranger").to_string(),
            "container \"stranger\" is not part of the pod"
        );
    }

    // ---- mounts ----

    fn mount_summary(cs: &ContainerSpec) -> Vec<(String, String, String, String)> {
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

    fn row(d: &str, t: &str, s: &str, o: &str) -> (String, String, String, String) {
        (d.into(), t.into(), s.into(), o.into())
    }

    #[test]
    fn default_mounts_golden() {
        let cs = ok(&pod_with(json!({}), json!({})));
        assert_eq!(
            mount_summary(&cs),
            vec![
                row("/proc", "proc", "proc", "nosuid,noexec,nodev"),
                row(
                    "/dev",
                    "tmpfs",
                    "tmpfs",
                    "nosuid,strictatime,mode=755,size=65536k"
                ),
                row(
                    "/dev/pts",
                    "devpts",
                    "devpts",
                    "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5"
                ),
                row("/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev"),
                row("/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro"),
                row(
                    "/sys/fs/cgroup",
                    "cgroup",
                    "cgroup",
                    "nosuid,noexec,nodev,relatime,ro"
                ),
                row(
                    "/etc/hostname",
                    "bind",
                    "/var/lib/podvisor/p/hostname",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/etc/hosts",
                    "bind",
                    "/var/lib/podvisor/p/hosts",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/etc/resolv.conf",
                    "bind",
                    "/var/lib/podvisor/p/resolv.conf",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/dev/shm",
                    "bind",
                    "/var/lib/podvisor/p/shm",
                    "rbind,rprivate,nosuid,nodev,noexec,rw"
                ),
            ]
        );
    }

    #[test]
    fn read_only_root_makes_hostname_and_resolv_conf_read_only() {
        let p = pod_with(
            json!({"securityContext": {"readOnlyRootFilesystem": true}}),
            json!({}),
        );
        let cs = ok(&p);
        assert_eq!(
            cs.spec.root().as_ref().expect("root").readonly(),
            Some(true)
        );
        let m = mount_summary(&cs);
        assert_eq!(m[6].3, "rbind,rprivate,ro");
        assert_eq!(m[7].3, "rbind,rprivate,rw");
        assert_eq!(m[8].3, "rbind,rprivate,ro");
    }

    #[test]
    fn volume_mounts_sorted_by_depth_with_modes_and_propagation() {
        let p = pod_with(
            json!({"volumeMounts": [
                {"name": "logs", "mountPath": "/data/logs/app", "readOnly": true},
                {"name": "data", "mountPath": "/data", "mountPropagation": "HostToContainer"},
                {"name": "data", "mountPath": "/etc/hosts"}
            ]}),
            json!({}),
        );
        let cs = ok(&p);
        let m = mount_summary(&cs);
        let tail: Vec<_> = m[6..].to_vec();
        assert_eq!(
            tail,
            vec![
                row(
                    "/data",
                    "bind",
                    "/var/lib/podvisor/p/volumes/data",
                    "rbind,rslave,rw"
                ),
                row(
                    "/etc/hostname",
                    "bind",
                    "/var/lib/podvisor/p/hostname",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/etc/resolv.conf",
                    "bind",
                    "/var/lib/podvisor/p/resolv.conf",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/dev/shm",
                    "bind",
                    "/var/lib/podvisor/p/shm",
                    "rbind,rprivate,nosuid,nodev,noexec,rw"
                ),
                row(
                    "/etc/hosts",
                    "bind",
                    "/var/lib/podvisor/p/volumes/data",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/data/logs/app",
                    "bind",
                    "/var/log/app",
                    "rbind,rprivate,ro"
                ),
            ]
        );
        assert_eq!(linux(&cs).rootfs_propagation().as_deref(), Some("rslave"));
    }

    #[test]
    fn bidirectional_propagation_needs_privileged() {
        let vm = json!([{"name": "data", "mountPath": "/d", "mountPropagation": "Bidirectional"}]);
        let p = pod_with(json!({"volumeMounts": vm.clone()}), json!({}));
        assert!(err(&p).starts_with(
            "spec.containers[0].volumeMounts[0].mountPropagation: invalid value \"Bidirectional\""
        ));
        let p = pod_with(
            json!({"volumeMounts": vm, "securityContext": {"privileged": true}}),
            json!({}),
        );
        let cs = ok(&p);
        let d = mount_summary(&cs)
            .into_iter()
            .find(|m| m.0 == "/d")
            .expect("mount");
        assert_eq!(d.3, "rbind,rshared,rw");
        assert_eq!(linux(&cs).rootfs_propagation().as_deref(), Some("rshared"));
    }

    #[test]
    fn bad_volume_mounts_are_named() {
        let cases = [
            (json!([{"name": "data", "mountPath": "/a"}, {"name": "nope", "mountPath": "/b"}]),
             "spec.containers[0].volumeMounts[1]: volume \"nope\" is not prepared by the pod sandbox"),
            (json!([{"name": "data", "mountPath": "rel"}]),
             "spec.containers[0].volumeMounts[0].mountPath: invalid value \"rel\""),
            (json!([{"name": "data", "mountPath": "/a/../b"}]),
             "spec.containers[0].volumeMounts[0].mountPath: invalid value"),
            (json!([{"name": "data", "mountPath": "/a"}, {"name": "logs", "mountPath": "/a/"}]),
             "spec.containers[0].volumeMounts[1].mountPath: invalid value \"/a/\": must be unique"),
            (json!([{"name": "data", "mountPath": "/a", "subPath": "../x"}]),
             "spec.containers[0].volumeMounts[0].subPath: invalid value \"../x\""),
            (json!([{"name": "data", "mountPath": "/a", "subPath": "/etc"}]),
             "spec.containers[0].volumeMounts[0].subPath: invalid value \"/etc\""),
            (json!([{"name": "data", "mountPath": "/a", "subPathExpr": "$(X)"}]),
             "spec.containers[0].volumeMounts[0].subPathExpr is not supported yet"),
            (json!([{"name": "data", "mountPath": "/a", "mountPropagation": "Sideways"}]),
             "spec.containers[0].volumeMounts[0].mountPropagation: invalid value \"Sideways\""),
        ];
        for (vms, want) in cases {
            let e = err(&pod_with(json!({"volumeMounts": vms}), json!({})));
            assert!(e.starts_with(want), "{e}\n  expected {want}");
        }
    }

    #[test]
    fn sub_path_is_created_below_the_volume_and_symlink_escapes_fail() {
        let vol = tempfile::tempdir().expect("volume");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::set_permissions(vol.path(), std::fs::Permissions::from_mode(0o750))
            .expect("chmod");
        std::os::unix::fs::symlink(outside.path(), vol.path().join("escape")).expect("symlink");
        std::fs::create_dir(vol.path().join("real")).expect("real");
        std::os::unix::fs::symlink("real", vol.path().join("inside")).expect("symlink");
        let mut sb = sandbox(false);
        sb.volumes.insert("v".into(), vol.path().to_path_buf());
        let img = image(json!({"Cmd": ["x"]}));
        let with_sub = |sub: &str| {
            let p = pod_with(
                json!({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": sub}]}),
                json!({}),
            );
            build_with(&p, &img, &sb)
        };
        let cs = with_sub("a/b").expect("created");
        let created = vol.path().join("a/b");
        assert!(created.is_dir());
        assert_eq!(
            std::fs::metadata(&created)
                .expect("meta")
                .permissions()
                .mode()
                & 0o777,
            0o750
        );
        let m = mount_summary(&cs)
            .into_iter()
            .find(|m| m.0 == "/m")
            .expect("mount");
        assert_eq!(m.2, created.display().to_string());
        with_sub("inside").expect("relative symlink within the volume");
        let e = with_sub("escape/x").expect_err("escape");
        assert!(
            e.to_string()
                .starts_with("spec.containers[0].volumeMounts[0].subPath: subPath \"escape/x\""),
            "{e}"
        );
        assert!(
            !outside.path().join("x").exists(),
            "nothing created outside"
        );
    }

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
        assert_eq!(devices, security::devices::cgroup_rules(false));
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

    // ---- resources ----

    /// cpu shares, cpu quota, cpu period, memory limit, oom_score_adj.
    type Limits = (
        Option<u64>,
        Option<i64>,
        Option<u64>,
        Option<i64>,
        Option<i32>,
    );

    fn cpu_mem(p: &Pod) -> Limits {
        let cs = ok(p);
        let r = linux(&cs).resources().clone().expect("res");
        let cpu = r.cpu().clone().expect("cpu");
        (
            cpu.shares(),
            cpu.quota(),
            cpu.period(),
            r.memory().and_then(|m| m.limit()),
            process(&cs).oom_score_adj(),
        )
    }

    #[test]
    fn resources_follow_kubelet_conversions() {
        let with = |r: serde_json::Value| pod_with(json!({"resources": r}), json!({}));
        // Guaranteed: request defaults to limit.
        assert_eq!(
            cpu_mem(&with(json!({"limits": {"cpu": "500m", "memory": "256Mi"}}))),
            (
                Some(512),
                Some(50_000),
                Some(100_000),
                Some(256 << 20),
                Some(-997)
            )
        );
        // Tiny limit: quota floor 1000, shares floor 2.
        assert_eq!(
            cpu_mem(&with(json!({"limits": {"cpu": "1m"}}))),
            (Some(2), Some(1000), Some(100_000), None, Some(999))
        );
        // Request only: shares, no quota; burstable oom score from memory request.
        assert_eq!(
            cpu_mem(&with(json!({"requests": {"cpu": "2", "memory": "1Gi"}}))),
            (Some(2048), None, None, None, Some(750))
        );
        // Nothing: BestEffort.
        assert_eq!(
            cpu_mem(&with(json!({}))),
            (Some(2), None, None, None, Some(1000))
        );
        // Explicit zero request with a limit: shares come from the limit.
        assert_eq!(
            cpu_mem(&with(
                json!({"requests": {"cpu": "0"}, "limits": {"cpu": "1"}})
            ))
            .0,
            Some(1024)
        );
        let bad = with(json!({"limits": {"memory": "1Zi"}}));
        assert!(err(&bad).contains("resources"), "{}", err(&bad));
    }

    #[test]
    fn critical_pods_get_guaranteed_oom_score() {
        let p = pod_with(json!({}), json!({}));
        let img = image(json!({"Cmd": ["x"]}));
        let sb = sandbox(false);
        let n = node();
        let cs = build_spec(&SpecRequest {
            pod: &p,
            container: &p.spec.as_ref().expect("spec").containers[0],
            image: &img,
            rootfs: Path::new("/r"),
            sandbox: &sb,
            cgroups_path: "/x",
            node: &n,
            critical: true,
            security: &NodeSecurity::default(),
            host_devices: &[],
            sub_path_pins: None,
        })
        .expect("build");
        assert_eq!(process(&cs).oom_score_adj(), Some(-997));
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

    #[test]
    fn stop_signal_from_lifecycle_image_or_default() {
        for (s, want) in [
            ("SIGTERM", libc::SIGTERM),
            ("TERM", libc::SIGTERM),
            ("15", 15),
            ("sigquit", libc::SIGQUIT),
            ("SIGRTMIN+3", libc::SIGRTMIN() + 3),
            ("RTMAX", libc::SIGRTMAX()),
        ] {
            assert_eq!(parse_signal(s), Some(want), "{s}");
        }
        for bad in ["SIGNOPE", "0", "99", "", "RTMIN+99"] {
            assert_eq!(parse_signal(bad), None, "{bad}");
        }
        let p = pod_with(json!({}), json!({}));
        let cs = build_with(
            &p,
            &image(json!({"Cmd": ["x"], "StopSignal": "SIGQUIT"})),
            &sandbox(false),
        )
        .expect("build");
        assert_eq!(cs.stop_signal, libc::SIGQUIT);
        let p = pod_with(json!({"lifecycle": {"stopSignal": "SIGUSR1"}}), json!({}));
        let cs = build_with(
            &p,
            &image(json!({"Cmd": ["x"], "StopSignal": "SIGQUIT"})),
            &sandbox(false),
        )
        .expect("build");
        assert_eq!(cs.stop_signal, libc::SIGUSR1);
        let e = build_with(
            &pod_with(json!({}), json!({})),
            &image(json!({"Cmd": ["x"], "StopSignal": "SIGFOO"})),
            &sandbox(false),
        )
        .expect_err("bad signal");
        assert_eq!(
            e.to_string(),
            "image config StopSignal: invalid value \"SIGFOO\": unknown signal"
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
                sub_path_pins: None,
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
