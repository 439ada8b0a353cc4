//! sandbox: everything a pod's containers share. Per-boot state lives in the runtime dir
//! (`<runtime-dir>/pods/<uid>/`), pod data that outlives a reboot in the root dir
//! (`<root-dir>/pods/<uid>/`), as the kubelet keeps emptyDir data under /var/lib/kubelet/pods
//! while containerd keeps sandbox state under /run.
//!
//! There is no pause container. The pod's network, IPC and UTS namespaces are created by a
//! short-lived single-threaded helper (`podvisor shim sandbox`, see [`pin_namespaces`]: forked
//! by the runtime's spawner, or exec'd, [`NamespaceHelper`]) and
//! pinned by bind-mounting their nsfs files on `ns/{net,ipc,uts}`; containers join them by
//! path, and only after [`check_namespaces`] found them live. With `hostNetwork: true` the
//! host's network and UTS namespaces are used.
//!
//! With `shareProcessNamespace: true` the helper also creates the pod's PID namespace, whose
//! PID 1 is podvisor's own pod init (`podvisor shim pod-init`, [`pod_init`]: reaps orphans,
//! nothing else; the pause container's role under containerd). A PID namespace lives only as
//! long as its PID 1, so the init is the namespace: its identity (pid + start time) is
//! `pod-init.json`, its namespace is pinned on `ns/pid` like the others, the daemon moves it
//! into the pod cgroup (`<pod cgroup>/pod-init`), and it is SIGKILLed (which kills whatever is
//! left in the namespace) before the pod's cgroups are removed.
//!
//! Runtime part (`<runtime-dir>/pods/<uid>/`, gone with the boot):
//! - `sandbox.json`: [`SandboxInfo`], written last (its presence marks a complete sandbox),
//! - `ns/net`, `ns/ipc`, `ns/uts`, with shareProcessNamespace `ns/pid`: pinned namespaces
//!   (bind mounts),
//! - `pod-init.json`: with shareProcessNamespace, the pod init's identity,
//! - `shm/`: the pod's /dev/shm (tmpfs, shared by its containers),
//! - `etc/hosts`, `etc/hostname`, `etc/resolv.conf`: bind-mounted into every container,
//! - `cgroup.json`: what the pod cgroup was created with (written by [`super::daemon`]),
//! - `network.json`: the pod network's latest CNI result (see [`crate::network`]), and
//!   `network.failed` when its CHECK failed at re-adoption (the sandbox is then not live).
//!
//! The pod's network: after the helper pinned the namespaces, the runtime's
//! [`PodNetwork`] attaches `ns/net` to the CNI network (ADD) before `sandbox.json` is
//! written, and detaches it (DEL) before `ns/net` is unmounted, in every teardown (removal,
//! a partial or dead sandbox, a failed creation). A DEL that fails leaves the namespace
//! pinned for the next attempt (the bridge plugin removes its masquerade rule only while it
//! can find the pod's addresses in the namespace).
//!
//! Data part (`<root-dir>/pods/<uid>/`, kept across reboots while the pod exists):
//! - `volumes/<name>/`: emptyDir volumes; `medium: Memory` ones are tmpfs mounts, whose content
//!   a reboot loses, as under a kubelet.
//!
//! With `hostUsers: false` the helper first creates the pod's user namespace (the mapping
//! the runtime allocated, [`super::userns`]) and the other namespaces inside it, pinned on
//! `ns/user` too ([`in_userns`]).
//!
//! A sandbox is live when its record exists and its namespace files are nsfs mounts and /dev/shm
//! is mounted. A sandbox that is not live (its namespaces died with an earlier boot, or were
//! unmounted) is never joined: it is torn down and created again.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::Pod;

use super::dns::{self, DnsSettings};
use super::rootfs::{is_mounted, unmount_if_mounted};
use super::rundir::is_nsfs;
use super::spec::NodeInfo;
use super::volumes;
use super::SandboxInfo;
use crate::network::{self, NetworkError, PodNetwork};

mod helper;
mod in_userns;
mod steps;
use crate::fsutil::{self, Loaded};
use helper::stop_pod_init_at;
pub use helper::{
    helper_main, load_pod_init, pin_namespaces, pin_spare, pin_unshared, pod_init, stop_pod_init,
    unshare_pod_namespaces, SPARE_KINDS,
};

/// Errors of sandbox handling.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("invalid pod uid {uid:?}: want 1-64 characters of [A-Za-z0-9-]")]
    InvalidUid { uid: String },
    #[error("pod has no metadata.{field}")]
    MissingField { field: &'static str },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Volume(#[from] volumes::VolumeError),
    #[error("namespace helper failed: {message}")]
    Helper { message: String },
    #[error("{what} {path}: {source}")]
    Sys {
        what: &'static str,
        path: PathBuf,
        source: nix::Error,
    },
    #[error("failed to unmount: {0}")]
    Unmount(#[from] super::rootfs::RootfsError),
    #[error("user namespace: {0}")]
    UserNamespace(#[from] super::userns::UsernsError),
    #[error("pod network: {0}")]
    Network(Box<NetworkError>),
}

impl From<NetworkError> for SandboxError {
    fn from(e: NetworkError) -> Self {
        SandboxError::Network(Box::new(e))
    }
}

/// Why a complete sandbox cannot be joined: it must be torn down and created again.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum NotLive {
    /// A pinned namespace file is not an nsfs mount (it died with an earlier boot).
    #[error("{path} is not a live namespace")]
    Namespace { path: PathBuf },
    /// The pod's /dev/shm is not mounted.
    #[error("{path} is not mounted")]
    Shm { path: PathBuf },
    /// The shared PID namespace's init (its PID 1) is gone: the namespace is dead.
    #[error("the pod init recorded in {path} is not running")]
    PodInit { path: PathBuf },
    /// The pod network's CHECK failed when the sandbox was re-adopted.
    #[error("its network failed CHECK: {message}")]
    Network { message: String },
}

/// Why a `hostPath` volume does not match its `type`.
#[derive(Debug, thiserror::Error)]
pub enum HostPathError {
    #[error("cannot create directory: {source}")]
    CreateDir { source: io::Error },
    #[error("cannot create file: {source}")]
    CreateFile { source: io::Error },
    #[error("cannot set its permissions: {source}")]
    Chmod { source: io::Error },
    #[error("exists and is not a {what}")]
    WrongType { what: &'static str },
    #[error("is not an existing {what} (type {kind})")]
    Missing {
        kind: &'static str,
        what: &'static str,
    },
    #[error("unknown hostPath type {kind:?}")]
    UnknownType { kind: String },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SandboxError + '_ {
    move |source| SandboxError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where sandboxes live: `run` holds the per-boot part (`<runtime-dir>/pods`), `data` the
/// pod data that outlives a reboot (`<root-dir>/pods`).
#[derive(Debug, Clone)]
pub struct SandboxDirs {
    pub run: PathBuf,
    pub data: PathBuf,
}

/// Paths of one pod's sandbox.
#[derive(Debug, Clone)]
pub struct SandboxPaths {
    /// The per-boot part (runtime dir).
    pub dir: PathBuf,
    /// The pod's data (root dir): emptyDir volumes.
    pub data: PathBuf,
}

impl SandboxPaths {
    pub fn new(dirs: &SandboxDirs, uid: &str) -> Result<SandboxPaths, SandboxError> {
        validate_uid(uid)?;
        Ok(SandboxPaths {
            dir: dirs.run.join(uid),
            data: dirs.data.join(uid),
        })
    }
    pub fn info(&self) -> PathBuf {
        self.dir.join("sandbox.json")
    }
    pub fn ns(&self, kind: &str) -> PathBuf {
        self.dir.join("ns").join(kind)
    }
    /// The pod init's identity (shareProcessNamespace only).
    pub fn pod_init(&self) -> PathBuf {
        self.dir.join("pod-init.json")
    }
    /// Whether the sandbox has a shared PID namespace (its pin file exists).
    pub fn shares_pid(&self) -> bool {
        self.ns("pid").exists()
    }
    /// Whether the sandbox has a user namespace of its own (`hostUsers: false`).
    pub fn has_user_ns(&self) -> bool {
        self.ns("user").exists()
    }
    pub fn shm(&self) -> PathBuf {
        self.dir.join("shm")
    }
    pub fn etc(&self, name: &str) -> PathBuf {
        self.dir.join("etc").join(name)
    }
    pub fn volumes(&self) -> PathBuf {
        self.data.join("volumes")
    }
    /// The pod network's latest CNI result.
    pub fn network_result(&self) -> PathBuf {
        self.dir.join("network.json")
    }
    /// Present when the network's CHECK failed: the sandbox is made again.
    pub fn network_failed(&self) -> PathBuf {
        self.dir.join("network.failed")
    }
    pub fn volume(&self, name: &str) -> PathBuf {
        self.volumes().join(name)
    }
}

/// Pod UIDs name directories and cgroups: keep them to a safe alphabet.
pub fn validate_uid(uid: &str) -> Result<(), SandboxError> {
    if uid.is_empty()
        || uid.len() > 64
        || !uid.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(SandboxError::InvalidUid {
            uid: uid.to_string(),
        });
    }
    Ok(())
}

/// The hostname the kubelet gives a pod: spec.hostname or the pod name, at most 63 characters,
/// without trailing '-' or '.'.
pub fn pod_hostname(pod: &Pod) -> String {
    let spec_host = pod.spec.as_ref().and_then(|s| s.hostname.clone());
    let name = spec_host
        .filter(|h| !h.is_empty())
        .or_else(|| pod.metadata.name.clone())
        .unwrap_or_default();
    let mut h: String = name.chars().take(63).collect();
    while h.ends_with('-') || h.ends_with('.') {
        h.pop();
    }
    h
}

/// Whether the pod uses the host's network namespace.
pub fn host_network(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false)
}

/// What a sandbox is created with besides the pod.
pub struct CreateOptions<'a> {
    pub node: &'a NodeInfo,
    pub dns: &'a DnsSettings,
    /// Pins the pod's namespaces in a single-threaded process (the runtime's spawner, or an
    /// exec'd `shim sandbox`).
    pub helper: &'a dyn NamespaceHelper,
    /// `hostUsers: false`: the base of the pod's user namespace mapping.
    pub user_ns_base: Option<u32>,
    /// The pod network: attachments of a sandbox being torn down are DELed through it.
    pub network: Option<&'a PodNetwork>,
    /// Whether the new sandbox joins it (false: loopback only).
    pub join_network: bool,
}

/// Creates (or reuses, if complete and live) the sandbox of `pod`. The pod's data (emptyDir
/// volumes) is kept: a sandbox created again after a reboot finds it where it was.
pub fn create(
    dirs: &SandboxDirs,
    pod: &Pod,
    opts: &CreateOptions<'_>,
) -> Result<SandboxInfo, SandboxError> {
    let user_ns_base = opts.user_ns_base;
    let uid = pod_uid(pod)?;
    let paths = SandboxPaths::new(dirs, &uid)?;
    if let Some(info) = load(&paths)? {
        match check_live(&paths, info.host_network) {
            Ok(()) if paths.has_user_ns() == user_ns_base.is_some() => return Ok(info),
            Ok(()) => {
                log::warn!("pod {uid}: sandbox has another user namespace mode: creating it again")
            }
            Err(why) => log::warn!("pod {uid}: sandbox is not live ({why}): creating it again"),
        }
    }
    crate::tp!("sb.loaded");
    // A partial or dead sandbox is torn down and made again.
    if paths.dir.exists() {
        remove_runtime_part(&paths, opts.network)?;
    }
    let result = create_new(&paths, pod, opts, &uid);
    if result.is_err() {
        if let Err(e) = remove_runtime_part(&paths, opts.network) {
            log::warn!("pod {uid}: cleanup of failed sandbox: {e}");
        }
    }
    result
}

/// Whether the pod asks for one PID namespace for all its containers.
pub fn share_process_namespace(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false)
}

/// Checks that the pod's namespace files are live nsfs mounts (never join anything else), and
/// that a shared PID namespace still has its init.
pub fn check_namespaces(paths: &SandboxPaths, host_network: bool) -> Result<(), NotLive> {
    if paths.shares_pid() {
        let pin = paths.ns("pid");
        if !is_nsfs(&pin) {
            return Err(NotLive::Namespace { path: pin });
        }
        if !load_pod_init(paths).is_some_and(|id| id.is_alive()) {
            return Err(NotLive::PodInit {
                path: paths.pod_init(),
            });
        }
    }
    // A hostUsers: false pod's user namespace (its pin exists from creation on).
    if paths.has_user_ns() {
        let pin = paths.ns("user");
        if !is_nsfs(&pin) {
            return Err(NotLive::Namespace { path: pin });
        }
    }
    let kinds: &[&str] = if host_network {
        &["ipc"]
    } else {
        &["net", "ipc", "uts"]
    };
    for kind in kinds {
        let p = paths.ns(kind);
        if !is_nsfs(&p) {
            return Err(NotLive::Namespace { path: p });
        }
    }
    Ok(())
}

/// Whether a complete sandbox is usable: live namespaces, a mounted /dev/shm and no failed
/// network CHECK.
pub fn check_live(paths: &SandboxPaths, host_network: bool) -> Result<(), NotLive> {
    check_namespaces(paths, host_network)?;
    if !is_mounted(&paths.shm()) {
        return Err(NotLive::Shm { path: paths.shm() });
    }
    if let Ok(message) = fs::read_to_string(paths.network_failed()) {
        return Err(NotLive::Network { message });
    }
    Ok(())
}

fn create_new(
    paths: &SandboxPaths,
    pod: &Pod,
    opts: &CreateOptions<'_>,
    uid: &str,
) -> Result<SandboxInfo, SandboxError> {
    let (node, user_ns_base) = (opts.node, opts.user_ns_base);
    let hostname = pod_hostname(pod);
    let host_net = host_network(pod);
    for d in [paths.dir.join("ns"), paths.dir.join("etc"), paths.shm()] {
        fs::create_dir_all(&d).map_err(io_err(&d))?;
    }
    // A hostUsers: false pod's root joins its namespaces by path: traversable, not listable.
    let mode = if user_ns_base.is_some() { 0o711 } else { 0o700 };
    fs::set_permissions(&paths.dir, fs::Permissions::from_mode(mode))
        .map_err(io_err(&paths.dir))?;
    fs::create_dir_all(&paths.data).map_err(io_err(&paths.data))?;
    fs::set_permissions(&paths.data, fs::Permissions::from_mode(0o700))
        .map_err(io_err(&paths.data))?;
    crate::tp!("sb.dirs");
    let volumes = prepare_volumes(paths, pod, node)?;
    crate::tp!("sb.volumes");

    opts.helper.pin_namespaces(&HelperRequest {
        dir: &paths.dir,
        hostname: &hostname,
        host_network: host_net,
        share_pid: share_process_namespace(pod),
        user_ns_base,
    })?;
    crate::tp!("sb.helper");
    let resolv = dns::pod_resolv_conf(pod, &dns::host_resolv_conf(opts.dns, !host_net), opts.dns);
    // The pod network, once its namespace is pinned; the sandbox is complete only after it.
    let (id, pod_ips) = match opts.network.filter(|_| opts.join_network && !host_net) {
        Some(net) => {
            let st = net.setup(&network::SetupRequest {
                pod,
                netns: &paths.ns("net"),
                result_path: &paths.network_result(),
                dns: crate::pod::netargs::DnsArgs {
                    servers: resolv.nameservers.clone(),
                    searches: resolv.searches.clone(),
                    options: resolv.options.clone(),
                },
            })?;
            let ips = st.ips.iter().map(|i| i.to_string()).collect();
            (st.id, ips)
        }
        None => (network::new_sandbox_id(uid, ""), Vec::new()),
    };
    let domain = dns::pod_domain(pod, &opts.dns.cluster_domain);
    write_etc_files(
        paths,
        pod,
        &hostname,
        host_net,
        &resolv,
        &pod_ips,
        domain.as_deref(),
    )?;
    crate::tp!("sb.etc");
    let info = SandboxInfo {
        id,
        pod_ips,
        pod_uid: uid.to_string(),
        pod_namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod_name: pod.metadata.name.clone().unwrap_or_default(),
        host_network: host_net,
        hostname,
        created_at: super::now_rfc3339(),
        volumes,
    };
    // The runtime dir is a tmpfs: no fsync (a power cut takes the namespaces with it).
    fsutil::write_json_atomic_volatile(&paths.info(), &info).map_err(io_err(&paths.info()))?;
    Ok(info)
}

/// What the namespace helper is asked to do for one pod ([`pin_namespaces`] in a
/// single-threaded process of its own).
#[derive(Debug, Clone, Copy)]
pub struct HelperRequest<'a> {
    /// The sandbox's runtime directory.
    pub dir: &'a Path,
    pub hostname: &'a str,
    pub host_network: bool,
    pub share_pid: bool,
    /// hostUsers: false: the first host ID of the pod's user namespace.
    pub user_ns_base: Option<u32>,
}

/// Runs [`pin_namespaces`] in a single-threaded process of its own (unshare changes the
/// calling process, and the daemon must keep its own namespaces): the runtime's spawner
/// (`runtime::spawner`, a fork), or [`ExecHelper`].
pub trait NamespaceHelper: Send + Sync {
    fn pin_namespaces(&self, req: &HelperRequest<'_>) -> Result<(), SandboxError>;
}

/// The helper as its own exec of podvisor's binary: `podvisor shim sandbox <dir> ...`.
pub struct ExecHelper<'a>(pub &'a Path);

impl NamespaceHelper for ExecHelper<'_> {
    fn pin_namespaces(&self, req: &HelperRequest<'_>) -> Result<(), SandboxError> {
        let mut cmd = Command::new(self.0);
        cmd.arg("shim")
            .arg("sandbox")
            .arg(req.dir)
            .arg("--hostname")
            .arg(req.hostname);
        if req.host_network {
            cmd.arg("--host-network");
        }
        if req.share_pid {
            cmd.arg("--share-pid");
        }
        if let Some(base) = req.user_ns_base {
            cmd.arg("--user-ns-base").arg(base.to_string());
        }
        let out = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(io_err(self.0))?;
        if !out.status.success() {
            return Err(SandboxError::Helper {
                message: format!(
                    "{} ({})",
                    String::from_utf8_lossy(&out.stderr).trim(),
                    out.status
                ),
            });
        }
        Ok(())
    }
}

/// Reads a complete sandbox's record, `None` if there is none (or it is torn: an interrupted
/// write on a runtime dir that is not a tmpfs, treated as an interrupted creation).
pub fn load(paths: &SandboxPaths) -> Result<Option<SandboxInfo>, SandboxError> {
    let p = paths.info();
    match fsutil::load_json(&p).map_err(io_err(&p))? {
        Loaded::Ok(info) => Ok(Some(info)),
        Loaded::Missing | Loaded::Torn(_) => Ok(None),
    }
}

/// What [`scan`] found in the runtime dir.
#[derive(Debug, Default)]
pub struct SandboxScan {
    /// Complete and live sandboxes, by uid.
    pub live: Vec<SandboxInfo>,
    /// Pod directories without a record (a creation or removal interrupted by a crash), with
    /// their namespaces, /dev/shm and memory volumes possibly still mounted.
    pub partial: Vec<String>,
    /// Complete sandboxes that are not live: (uid, why).
    pub dead: Vec<(String, NotLive)>,
}

/// Sorts the sandboxes of the runtime dir into live, partial and dead ones.
pub fn scan(dirs: &SandboxDirs) -> Result<SandboxScan, SandboxError> {
    let mut out = SandboxScan::default();
    let entries = match fs::read_dir(&dirs.run) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(SandboxError::Io {
                path: dirs.run.clone(),
                source,
            })
        }
    };
    for entry in entries.flatten() {
        let uid = entry.file_name().to_string_lossy().into_owned();
        let Ok(paths) = SandboxPaths::new(dirs, &uid) else {
            continue;
        };
        if !paths.dir.is_dir() {
            continue;
        }
        match load(&paths)? {
            None => out.partial.push(uid),
            Some(info) => match check_live(&paths, info.host_network) {
                Ok(()) => out.live.push(info),
                Err(why) => out.dead.push((uid, why)),
            },
        }
    }
    out.live.sort_by(|a, b| a.pod_uid.cmp(&b.pod_uid));
    out.partial.sort();
    out.dead.sort();
    Ok(out)
}

/// Pods with data under the root dir (emptyDir volumes), live sandbox or not: after a reboot
/// these are the pods that ran before it.
pub fn list_data(dirs: &SandboxDirs) -> Result<Vec<String>, SandboxError> {
    let entries = match fs::read_dir(&dirs.data) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(SandboxError::Io {
                path: dirs.data.clone(),
                source,
            })
        }
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|u| validate_uid(u).is_ok())
        .collect();
    out.sort();
    Ok(out)
}

/// Tears a sandbox down for good (the pod is removed): unmounts the pinned namespaces,
/// /dev/shm and memory volumes, then removes both parts. Never recurses into a directory that
/// is still a mount point.
pub fn remove(dirs: &SandboxDirs, uid: &str, net: Option<&PodNetwork>) -> Result<(), SandboxError> {
    let paths = SandboxPaths::new(dirs, uid)?;
    remove_runtime_part(&paths, net)?;
    if !paths.data.exists() {
        return Ok(());
    }
    if let Ok(entries) = fs::read_dir(paths.volumes()) {
        for entry in entries.flatten() {
            unmount_if_mounted(&entry.path())?;
        }
    }
    fsutil::remove_tree_no_mounts(&paths.data).map_err(io_err(&paths.data))
}

/// Tears down the runtime part of a sandbox (namespaces, /dev/shm, /etc files), keeping the
/// pod's data: an interrupted or dead sandbox is made again with the same emptyDir volumes.
pub fn remove_runtime(
    dirs: &SandboxDirs,
    uid: &str,
    net: Option<&PodNetwork>,
) -> Result<(), SandboxError> {
    let paths = SandboxPaths::new(dirs, uid)?;
    remove_runtime_part(&paths, net)
}

/// Detaches the pod's network (DEL of every recorded attachment of the pod; nothing without
/// a record), then tears the runtime part down. A failed DEL leaves everything in place.
fn remove_runtime_part(paths: &SandboxPaths, net: Option<&PodNetwork>) -> Result<(), SandboxError> {
    if let (Some(net), Some(uid)) = (net, paths.dir.file_name().and_then(|n| n.to_str())) {
        net.teardown_pod(uid, &paths.network_result())?;
    }
    if !paths.dir.exists() {
        return Ok(());
    }
    // Remove the completion marker first: a crash below leaves a partial sandbox, which the
    // next create or remove, or the next daemon's listing, finishes tearing down.
    match fs::remove_file(paths.info()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(SandboxError::Io {
                path: paths.info(),
                source,
            })
        }
    }
    stop_pod_init_at(paths)?;
    for kind in ["net", "ipc", "uts", "pid", "user"] {
        unmount_if_mounted(&paths.ns(kind))?;
    }
    unmount_if_mounted(&paths.shm())?;
    fsutil::remove_tree_no_mounts(&paths.dir).map_err(io_err(&paths.dir))
}

fn write_etc_files(
    paths: &SandboxPaths,
    pod: &Pod,
    hostname: &str,
    host_net: bool,
    resolv: &dns::ResolvConf,
    pod_ips: &[String],
    domain: Option<&str>,
) -> Result<(), SandboxError> {
    let hosts = dns::hosts_file(
        pod,
        hostname,
        host_net,
        Path::new("/etc/hosts"),
        pod_ips,
        domain,
    );
    let hostname_content = if host_net {
        nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| hostname.to_string())
    } else {
        hostname.to_string()
    };
    let resolv = resolv.render();
    for (name, data) in [
        ("hosts", hosts),
        ("hostname", format!("{hostname_content}\n")),
        ("resolv.conf", resolv),
    ] {
        let p = paths.etc(name);
        fs::write(&p, data).map_err(io_err(&p))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).map_err(io_err(&p))?;
    }
    Ok(())
}

fn pod_uid(pod: &Pod) -> Result<String, SandboxError> {
    pod.metadata
        .uid
        .clone()
        .ok_or(SandboxError::MissingField { field: "uid" })
}

/// Writes the downwardAPI and projected volumes of a pod whose sandbox exists again, from
/// `pod` (new labels or annotations): each through the atomic writer (`..data` swapped), so a
/// container reading them sees the old files or the new ones, never a mix.
pub fn refresh_projected_volumes(
    dirs: &SandboxDirs,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<(), SandboxError> {
    let uid = pod_uid(pod)?;
    let paths = SandboxPaths::new(dirs, &uid)?;
    let spec = pod.spec.as_ref();
    let sc = spec.and_then(|s| s.security_context.as_ref());
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    for (i, v) in volumes.iter().enumerate() {
        let dir = paths.volume(&v.name);
        let projected = v.downward_api.is_some() || v.projected.is_some();
        if !projected || !dir.is_dir() {
            continue;
        }
        let (path, _) = volumes::prepare(pod, node, v, i, &dir)?;
        if let Some(sc) = sc {
            volumes::apply_fs_group(&path, sc, true, &format!("spec.volumes[{i}]"))?;
        }
    }
    Ok(())
}

fn prepare_volumes(
    paths: &SandboxPaths,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<BTreeMap<String, PathBuf>, SandboxError> {
    let mut out = BTreeMap::new();
    let spec = pod.spec.as_ref();
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    let sc = spec.and_then(|s| s.security_context.as_ref());
    for (i, v) in volumes.iter().enumerate() {
        if v.name.is_empty() || v.name.contains('/') || v.name == "." || v.name == ".." {
            return Err(SandboxError::Volume(volumes::VolumeError::Invalid {
                field: format!("spec.volumes[{i}].name"),
                message: format!("invalid volume name {:?}", v.name),
            }));
        }
        let (path, kind) = volumes::prepare(pod, node, v, i, &paths.volume(&v.name))?;
        if let Some(sc) = sc.filter(|_| kind != volumes::VolumeKind::HostPath) {
            let read_only = kind == volumes::VolumeKind::Projected;
            volumes::apply_fs_group(&path, sc, read_only, &format!("spec.volumes[{i}]"))?;
        }
        out.insert(v.name.clone(), path);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::procfs::ProcessId;

    fn pod(yaml: &str) -> Pod {
        serde_json::from_value(
            serde_json::to_value(serde_saphyr::from_str::<serde_json::Value>(yaml).expect("yaml"))
                .expect("value"),
        )
        .expect("pod")
    }

    #[test]
    fn hostname_is_pod_name_truncated_and_trimmed() {
        let long = format!("{}-x", "a".repeat(62));
        let p = pod(&format!(
            "metadata: {{name: {long}}}\nspec: {{containers: []}}"
        ));
        assert_eq!(pod_hostname(&p), "a".repeat(62));
        let p = pod("metadata: {name: web}\nspec: {hostname: custom, containers: []}");
        assert_eq!(pod_hostname(&p), "custom");
    }

    #[test]
    fn uid_alphabet_is_enforced() {
        assert!(validate_uid("0d1e-aa").is_ok());
        assert!(validate_uid("../x").is_err());
        assert!(validate_uid("").is_err());
    }

    fn test_dirs(root: &Path) -> SandboxDirs {
        SandboxDirs {
            run: root.join("run"),
            data: root.join("data"),
        }
    }

    #[test]
    fn a_shared_pid_namespace_is_live_only_with_its_pin_and_its_init() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dirs = test_dirs(dir.path());
        let paths = SandboxPaths::new(&dirs, "u1").expect("paths");
        fs::create_dir_all(paths.dir.join("ns")).expect("mkdir");
        // A pin file left by an earlier boot: an empty file, not an nsfs mount.
        fs::write(paths.ns("pid"), b"").expect("pin");
        assert!(paths.shares_pid());
        assert_eq!(
            check_namespaces(&paths, true),
            Err(NotLive::Namespace {
                path: paths.ns("pid")
            })
        );
        // No recorded init at all: nothing to stop.
        stop_pod_init_at(&paths).expect("no init");
        // A recorded init that is gone (a pid that cannot exist) is not alive.
        let gone = ProcessId {
            pid: i32::MAX,
            start_time: 1,
        };
        fsutil::write_json_atomic_volatile(&paths.pod_init(), &gone).expect("record");
        assert_eq!(load_pod_init(&paths), Some(gone));
        assert!(!gone.is_alive());
        stop_pod_init_at(&paths).expect("gone init");
        assert!(!paths.pod_init().exists());
    }

    #[test]
    fn a_sandbox_without_its_namespaces_is_not_live_and_says_which_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dirs = test_dirs(dir.path());
        let paths = SandboxPaths::new(&dirs, "u1").expect("paths");
        let why = check_live(&paths, false).expect_err("no namespaces");
        assert_eq!(
            why,
            NotLive::Namespace {
                path: paths.ns("net")
            }
        );
        assert_eq!(
            why.to_string(),
            format!("{} is not a live namespace", paths.ns("net").display())
        );
    }
}
