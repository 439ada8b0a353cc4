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
//!
//! Here: the sandbox's layout ([`SandboxDirs`], [`SandboxPaths`]), its record and liveness,
//! shared by every process; and the helper process that makes the namespaces (`helper`,
//! `in_userns`, `steps`: a child of the spawner, or `podvisor shim sandbox`), with the pod
//! init. Creating, listing and removing sandboxes is the daemon's (`daemon::pod_sandbox`).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

use super::rootfs::is_mounted;
use super::rundir::is_nsfs;
use super::volumes;
use super::SandboxInfo;
use crate::fsutil::{self, Loaded};
use crate::network::NetworkError;

mod helper;
mod in_userns;
mod steps;
pub(super) use helper::stop_pod_init_at;
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

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> SandboxError + '_ {
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

/// Reads a complete sandbox's record, `None` if there is none (or it is torn: an interrupted
/// write on a runtime dir that is not a tmpfs, treated as an interrupted creation).
pub fn load(paths: &SandboxPaths) -> Result<Option<SandboxInfo>, SandboxError> {
    let p = paths.info();
    match fsutil::load_json(&p).map_err(io_err(&p))? {
        Loaded::Ok(info) => Ok(Some(info)),
        Loaded::Missing | Loaded::Torn(_) => Ok(None),
    }
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
