//! runtime: the boundary between the pod lifecycle logic and real containers.
//!
//! The [`Runtime`] trait is what the sync loop (and `podvisor play`) talks to: pod sandboxes
//! (pinned network/IPC/UTS namespaces, /etc files, /dev/shm, volumes) and containers (start,
//! signal, remove, list). Container exits arrive as [`RuntimeEvent`]s on a channel, event
//! driven. The real implementation, [`daemon::LinuxRuntime`], never calls libcontainer itself:
//! each container gets a monitor process ([`monitor`]), forked by the runtime's single-threaded
//! spawner ([`spawner`]), so libcontainer's clone-without-exec only ever happens in a
//! single-threaded process.
//!
//! Split by process, then by verb:
//! - [`daemon`]: what the multi-threaded daemon runs: [`daemon::LinuxRuntime`], one file per
//!   verb (start, signal, remove, list, exec, the pod sandbox's create, list and remove), the
//!   exit watcher, the handle on the spawner.
//! - [`spawner`]: the spawner process (`podvisor shim spawner`), which forks monitors and
//!   sandbox helpers without exec.
//! - [`monitor`]: the per-container monitor process (`podvisor shim run`, and `shim cleanup`
//!   for one that died), one file per verb (create, supervise, attach, delete).
//! - [`exec`]: the exec helper process (`podvisor shim exec`).
//! - [`sandbox`]: a pod sandbox's layout and liveness, and the sandbox helper process
//!   (`shim sandbox`, `shim pod-init`).
//! - [`protocol`]: every message between those processes.
//!
//! Shared by them:
//! - [`container`]: a container's two directories and the files in them.
//! - [`spec`]: OCI runtime spec from a Pod container and its image config.
//! - [`check`]: the runtime's refusals of a pod decided before it runs (the static-pod
//!   loader reports them: `validate` accepts a pod if and only if the runtime builds it).
//! - [`rundir`]: the runtime dir (per-boot state, default /run/podvisor) and the boot ID.
//! - [`rootfs`]: the overlayfs root filesystem of a container.
//! - [`procfs`]: process identity (pid + start time) and pidfds.
//! - [`volumes`], [`userns`], [`user`], [`dns`], [`console`].

pub mod check;
pub mod console;
pub mod container;
pub mod daemon;
pub mod dns;
pub mod exec;
pub mod monitor;
pub mod procfs;
pub mod protocol;
pub mod rootfs;
pub mod rundir;
pub mod sandbox;
pub mod spawner;
pub mod spec;
pub mod user;
pub mod userns;
pub mod volumes;

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container, Pod};
use serde::{Deserialize, Serialize};

/// Errors of the runtime boundary.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("pod {pod}: image {image} is not present in the image store (import it with `podvisor image import`)")]
    ImageNotPresent { pod: String, image: String },
    #[error("pod {pod}: {source}")]
    Image {
        pod: String,
        #[source]
        source: Box<crate::images::ImageError>,
    },
    /// The container's lease on its image could not be taken (the image store's disk).
    #[error("container {id}: image lease: {source}")]
    Lease {
        id: String,
        #[source]
        source: Box<crate::images::ImageError>,
    },
    #[error("pod {pod} container {container}: {source}")]
    Spec {
        pod: String,
        container: String,
        #[source]
        source: Box<spec::SpecError>,
    },
    #[error("pod {pod}: sandbox: {source}")]
    Sandbox {
        pod: String,
        #[source]
        source: Box<sandbox::SandboxError>,
    },
    /// The pod's sandbox is missing or not live (its namespaces died): it must be created
    /// again, as the kubelet does when a sandbox is not ready.
    #[error("pod {pod}: sandbox is not ready: {message}")]
    SandboxNotReady { pod: String, message: String },
    #[error(transparent)]
    RunDir(#[from] rundir::RunDirError),
    #[error("container {id}: rootfs: {source}")]
    Rootfs {
        id: String,
        #[source]
        source: rootfs::RootfsError,
    },
    #[error("container {id}: {message}")]
    Start { id: String, message: String },
    #[error("container {id}: {source}")]
    Shim {
        id: String,
        #[source]
        source: Box<container::ShimError>,
    },
    #[error("container {id} not found")]
    NotFound { id: String },
    #[error("container {id}: failed to signal: {source}")]
    Signal { id: String, source: std::io::Error },
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to spawn monitor {binary}: {source}")]
    Spawn {
        binary: PathBuf,
        source: std::io::Error,
    },
    #[error("cgroup: {0}")]
    Cgroup(#[from] crate::cgroups::CgroupError),
    #[error("container {id}: exec: {source}")]
    Exec {
        id: String,
        #[source]
        source: Box<exec::ExecError>,
    },
    #[error("pod {pod}: resources: {source}")]
    PodResources {
        pod: String,
        source: crate::cgroups::resources::PodCgroupConfigError,
    },
}

/// Which list of the pod a container comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerKind {
    Init,
    App,
}

/// What the sync loop asks for when it starts one container of a pod.
pub struct ContainerRequest<'a> {
    /// The pod, with defaults applied (metadata.uid set).
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub kind: ContainerKind,
    /// The kubelet's restart count: also the log file name `<restartCount>.log`.
    pub restart_count: u32,
}

/// How a container ended, recorded atomically on disk by its monitor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitRecord {
    /// Exit code; 128+signal when killed by a signal (as the kubelet reports it).
    pub exit_code: i32,
    /// The signal that killed the process, if any.
    pub signal: Option<i32>,
    /// The container's cgroup recorded an OOM kill.
    pub oom_killed: bool,
    /// RFC 3339 time the process started (empty if it never started).
    pub started_at: String,
    /// RFC 3339 time the exit was observed.
    pub finished_at: String,
    /// The kubelet's reason, a [`crate::reason::TerminatedReason`] (kept a string on disk and
    /// in this struct: exit records written by earlier versions stay readable).
    pub reason: String,
    /// Human-readable detail (e.g. the start error), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A container's state as the runtime sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "state")]
pub enum ContainerState {
    /// Its monitor exists but the process is not started yet.
    Created,
    /// The process runs.
    Running { pid: i32, started_at: String },
    /// It ended; the record says how.
    Exited(ExitRecord),
}

/// Identity of a container, written once when it is created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerMeta {
    pub id: String,
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub container_name: String,
    pub kind: ContainerKind,
    pub restart_count: u32,
    /// The image reference as written in the manifest.
    pub image: String,
    /// The image's manifest digest (`sha256:...`).
    pub image_digest: String,
    pub log_path: PathBuf,
    /// Signal to send first when stopping (the image's STOPSIGNAL, default SIGTERM).
    pub stop_signal: i32,
    pub created_at: String,
    /// The boot the container was created in (/proc/sys/kernel/random/boot_id): a container of
    /// another boot did not survive it. Empty in records of older versions.
    #[serde(default)]
    pub boot_id: String,
}

/// A container and its current state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    pub meta: ContainerMeta,
    pub state: ContainerState,
}

/// What the runtime tells its owner, asynchronously.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeEvent {
    /// The container's process exited and its monitor has cleaned up.
    ContainerExited {
        id: String,
        pod_uid: String,
        exit: ExitRecord,
    },
}

/// A pod sandbox that exists on this node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    /// The sandbox's ID (CNI_CONTAINERID of its network attachment). Empty in records of
    /// older versions.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// The pod's IPs from its network, IPv4 first; empty without a pod network (hostNetwork,
    /// or networking off: loopback only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<String>,
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    pub host_network: bool,
    pub hostname: String,
    pub created_at: String,
    /// Volume name -> host path prepared for the pod.
    pub volumes: BTreeMap<String, PathBuf>,
}

/// Output of a command run inside a running container (CRI ExecSync).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub exit_code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub timed_out: bool,
}

/// The runtime boundary. The sync loop holds one and is unit-tested against a recording fake;
/// [`daemon::LinuxRuntime`] is the real one.
pub trait Runtime: Send + Sync {
    /// Creates the pod's sandbox (idempotent: an existing sandbox of the same pod is reused).
    fn run_pod_sandbox(&self, pod: &Pod) -> Result<SandboxInfo, RuntimeError>;
    /// Tears the sandbox down: namespaces, mounts, files and the pod's cgroups. Its containers
    /// must have exited.
    fn remove_pod_sandbox(&self, pod_uid: &str) -> Result<(), RuntimeError>;
    /// Existing live sandboxes (used after a daemon restart). Incomplete ones (an interrupted
    /// creation or removal) and dead ones (namespaces of an earlier boot) are torn down, not
    /// listed.
    fn list_pod_sandboxes(&self) -> Result<Vec<SandboxInfo>, RuntimeError>;
    /// Uids of pods with data on this node's disk (emptyDir volumes), live sandbox or not:
    /// after a reboot, the pods that ran before it. [`Runtime::remove_pod_sandbox`] removes
    /// that data with the pod.
    fn list_pod_data(&self) -> Result<Vec<String>, RuntimeError> {
        Ok(Vec::new())
    }
    /// Writes the downwardAPI and projected volumes of a running pod again from `pod` (its
    /// labels or annotations changed), through the atomic writer: containers see the new
    /// files at once, as the kubelet's periodic volume remount does.
    fn update_pod_volumes(&self, _pod: &Pod) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// The highest restart count among the log files of a container of `pod`, as the kubelet
    /// reads it when the runtime lost the container's status (a node reboot): the next
    /// instance never reuses an earlier instance's log file.
    fn restart_count_from_logs(&self, _pod: &Pod, _container: &str) -> Option<u32> {
        None
    }
    /// The pinned network namespace of a pod that has its own (not hostNetwork): probes and
    /// httpGet hooks connect from inside it, where the pod's 127.0.0.1 is.
    fn pod_network_namespace(&self, _pod_uid: &str) -> Option<PathBuf> {
        None
    }
    /// Creates and starts one container; returns once its process runs (or failed to).
    fn start_container(&self, req: &ContainerRequest<'_>) -> Result<ContainerInfo, RuntimeError>;
    /// Creates the pod's sandbox, hands its result to `sandbox_done` as soon as it is known,
    /// then starts `first` in it: [`Runtime::run_pod_sandbox`] followed by
    /// [`Runtime::start_container`], which is what this default does. A runtime may prepare
    /// the container (its monitor, its rootfs) while the sandbox is made. `None` when the
    /// sandbox failed: the container was not started and nothing of it is left.
    fn run_pod_sandbox_and_start(
        &self,
        pod: &Pod,
        first: &ContainerRequest<'_>,
        sandbox_done: &mut dyn FnMut(&Result<SandboxInfo, RuntimeError>),
    ) -> Option<Result<ContainerInfo, RuntimeError>> {
        sandbox_then_start(self, pod, first, sandbox_done)
    }
    /// Sends a signal to the container's init process (no-op if it already exited).
    fn signal_container(&self, id: &str, signal: i32) -> Result<(), RuntimeError>;
    /// Forgets an exited container (its record; its log file stays).
    fn remove_container(&self, id: &str) -> Result<(), RuntimeError>;
    /// Every container on disk with its state. Running ones are watched again, so their exits
    /// arrive as events; leftovers of containers whose monitor died are cleaned up.
    fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError>;
    /// Runs `cmd` in the container's namespaces, cgroup and environment; kills it after `timeout`.
    fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: std::time::Duration,
    ) -> Result<ExecOutput, RuntimeError>;
}

/// [`Runtime::run_pod_sandbox_and_start`] in order: the sandbox, its result to
/// `sandbox_done`, then the start (none when the sandbox failed).
pub fn sandbox_then_start<R: Runtime + ?Sized>(
    runtime: &R,
    pod: &Pod,
    first: &ContainerRequest<'_>,
    sandbox_done: &mut dyn FnMut(&Result<SandboxInfo, RuntimeError>),
) -> Option<Result<ContainerInfo, RuntimeError>> {
    let sandbox = runtime.run_pod_sandbox(pod);
    sandbox_done(&sandbox);
    sandbox.ok()?;
    Some(runtime.start_container(first))
}

/// Current time as RFC 3339 with nanoseconds (UTC).
pub use crate::logs::timestamp::now_rfc3339;
