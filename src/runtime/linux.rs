//! linux: [`LinuxRuntime`], the real [`Runtime`]: containers through per-container monitor
//! processes ([`super::shim`]), sandboxes through [`super::sandbox`].
//!
//! Owns the container directories (runtime part `<runtime-dir>/containers/<id>/`, records
//! `<root-dir>/containers/<id>/`) and one thread, the exit watcher, which waits on the pidfds of
//! every monitor with epoll and turns each monitor exit into a
//! [`RuntimeEvent::ContainerExited`] (reading the `exit.json` the monitor wrote). The daemon's
//! threads never call libcontainer: they spawn monitors (fork+exec) and send signals through
//! pidfds. At start it makes the runtime dir this boot's ([`super::rundir`]); containers of an
//! earlier boot are reported exited with containerd's unknown status (255, `Unknown`), their
//! records and logs kept, everything else of them removed.
//!
//! Submodules: `records` (a container's two directories and what a listing finds in them:
//! complete, interrupted, monitor dead, lost with an earlier boot), `watcher` (the exit
//! watcher thread).

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::procfs::{self, ProcessId};
use super::rundir;
use super::sandbox::{self, SandboxDirs, SandboxPaths};
use super::shim::{self, ContainerPaths, ShimConfig, ShimState, StartReport};
use super::spec::{self, NodeInfo, SandboxMounts, SpecRequest};
use super::{
    ContainerInfo, ContainerMeta, ContainerRequest, ContainerState, ExecOutput, Runtime,
    RuntimeError, RuntimeEvent, SandboxInfo,
};
use crate::cgroups::resources::PodCgroupConfig;
use crate::cgroups::{self, CgroupRoot};
use crate::fsutil;
use crate::images::ImageStore;
use crate::security::apparmor::{self, AppArmorHost};
use crate::security::{self, NodeSecurity};

mod records;
mod watcher;

use records::{remove_container_dirs, remove_orphan_runtime_dirs};
pub use records::{UNKNOWN_EXIT_CODE, UNKNOWN_EXIT_REASON};
use watcher::ExitWatcher;

/// Settings of the real runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// podvisor's persistent state (`--root-dir`, default /var/lib/podvisor).
    pub root_dir: PathBuf,
    /// podvisor's per-boot state (`--runtime-dir`, default /run/podvisor, a tmpfs).
    pub run_dir: PathBuf,
    /// Where the current boot's ID is read (`--boot-id-file`; the kernel's by default).
    pub boot_id_file: PathBuf,
    /// Root of the CRI log tree (default /var/log/pods).
    pub log_dir: PathBuf,
    /// The podvisor binary re-executed as monitor and helpers.
    pub shim_binary: PathBuf,
    pub cgroup_root: CgroupRoot,
    /// Name of podvisor's top-level cgroup (default "podvisor").
    pub cgroup_parent: String,
    /// `podPidsLimit`: pids.max of every pod cgroup (`None` = unlimited).
    pub pod_pids_limit: Option<i64>,
    pub log_max_size: u64,
    pub log_max_files: u32,
    pub node: NodeInfo,
    /// The confinement this node offers (sysctls, seccomp, AppArmor).
    pub security: NodeSecurity,
    /// How long a monitor may take to report that its container started.
    pub start_timeout: Duration,
}

impl RuntimeConfig {
    /// Defaults for a node: the current executable as monitor, kubelet log defaults.
    pub fn new(root_dir: PathBuf, run_dir: PathBuf, log_dir: PathBuf) -> io::Result<RuntimeConfig> {
        Ok(RuntimeConfig {
            run_dir,
            boot_id_file: PathBuf::from(rundir::BOOT_ID_FILE),
            log_dir,
            shim_binary: std::env::current_exe()?,
            cgroup_root: CgroupRoot::default(),
            cgroup_parent: "podvisor".into(),
            pod_pids_limit: None,
            log_max_size: 10 * 1024 * 1024,
            log_max_files: 5,
            node: detect_node_info(),
            security: NodeSecurity::for_host(&root_dir, &[], false, AppArmorHost::detect()),
            root_dir,
            start_timeout: Duration::from_secs(60),
        })
    }
    /// Runtime directories of containers (bundles, monitor state), gone with the boot.
    pub fn containers_dir(&self) -> PathBuf {
        self.run_dir.join("containers")
    }
    /// Record directories of containers (identity, exit, writable layer), kept across boots.
    pub fn records_dir(&self) -> PathBuf {
        self.root_dir.join("containers")
    }
    /// Runtime parts of pod sandboxes.
    pub fn pods_dir(&self) -> PathBuf {
        self.run_dir.join("pods")
    }
    pub fn sandbox_dirs(&self) -> SandboxDirs {
        SandboxDirs {
            run: self.pods_dir(),
            data: self.root_dir.join("pods"),
        }
    }
}

/// Node facts used by specs (downward API, OOM score): name, CPUs, memory, an address.
pub fn detect_node_info() -> NodeInfo {
    let name = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().to_lowercase())
        .unwrap_or_else(|_| "localhost".into());
    let cpus = thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1);
    let memory = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| cgroups::allocatable::parse_mem_total(&m))
        .unwrap_or(0);
    NodeInfo {
        name,
        cpu_millis: cpus * 1000,
        memory_bytes: memory,
        host_ip: host_ip().unwrap_or_else(|| "127.0.0.1".into()),
        // Unreadable status is not expected on Linux; assume nothing is missing then.
        bounding_capabilities: spec::current_bounding_capabilities()
            .unwrap_or_else(|_| spec::capabilities_from_mask(u64::MAX)),
    }
}

/// The address the host would use to reach the outside (no packet is sent: a UDP connect
/// only picks a route). Falls back to loopback.
fn host_ip() -> Option<String> {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    sock.connect("192.0.2.1:9").ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then(|| ip.to_string())
}

/// File in a pod directory recording what its cgroup was created with.
const POD_CGROUP_RECORD: &str = "cgroup.json";

/// What a pod's cgroup was created with: the QoS class (its place) and the cpu request that
/// the Burstable tier's weight sums.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct PodCgroupRecord {
    qos: crate::pod::qos::QosClass,
    cpu_request_millis: u64,
}

/// Names (container ids or pod uids) this process is working on right now, so that a listing
/// on another worker thread leaves them alone.
#[derive(Default)]
struct BusySet(Mutex<HashSet<String>>);

impl BusySet {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        // Single inserts and removes cannot leave the set inconsistent: a poisoned lock is
        // still usable.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks `name` busy until the returned guard is dropped.
    fn enter(&self, name: &str) -> BusyGuard<'_> {
        self.lock().insert(name.to_string());
        BusyGuard {
            set: self,
            name: name.to_string(),
        }
    }

    fn contains(&self, name: &str) -> bool {
        self.lock().contains(name)
    }
}

struct BusyGuard<'a> {
    set: &'a BusySet,
    name: String,
}

impl Drop for BusyGuard<'_> {
    fn drop(&mut self) {
        self.set.lock().remove(&self.name);
    }
}

/// The real runtime.
pub struct LinuxRuntime {
    cfg: RuntimeConfig,
    /// This boot's ID: recorded in every container's identity.
    boot_id: String,
    /// Containers being created or removed by this process. `list_containers` (run by the
    /// removal of another pod on another worker) skips them: without this it took a directory
    /// still being written for the leftover of a crashed creation and deleted it, or ran
    /// `shim cleanup` on it just before its monitor started (killing the new container's
    /// cgroup and rootfs under it), or read a directory `remove_container` was deleting.
    busy_containers: BusySet,
    /// This process's hold on the runtime dir (one runtime per runtime dir).
    _run_dir_lock: rundir::RunDirLock,
    /// Pod sandboxes being created by this process (never torn down as partial).
    busy_sandboxes: BusySet,
    /// Serializes pod cgroup creation and removal (tiers are removed when empty, and the
    /// Burstable tier's weight is a sum over pods).
    cgroup_lock: Mutex<()>,
    images: Arc<ImageStore>,
    watcher: Arc<ExitWatcher>,
    thread: Option<thread::JoinHandle<()>>,
}

impl LinuxRuntime {
    /// Creates the runtime and starts its exit-watcher thread, which sends to `events`.
    pub fn new(
        cfg: RuntimeConfig,
        images: Arc<ImageStore>,
        events: Sender<RuntimeEvent>,
    ) -> Result<LinuxRuntime, RuntimeError> {
        cgroups::validate_parent(&cfg.cgroup_parent)?;
        let boot_id = rundir::read_boot_id(&cfg.boot_id_file)?;
        let run_dir_lock = rundir::lock(&cfg.run_dir)?;
        rundir::prepare(&cfg.run_dir, &boot_id)?;
        let sandbox_dirs = cfg.sandbox_dirs();
        // root only, whatever existed: the state holds specs (environment values), images with
        // setuid binaries and container root filesystems (the kubelet's root dir is 0750
        // root:root; containerd keeps its snapshots 0700).
        for d in [
            cfg.root_dir.clone(),
            cfg.containers_dir(),
            cfg.records_dir(),
            sandbox_dirs.run,
            sandbox_dirs.data,
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&d)
                .and_then(|()| fs::set_permissions(&d, fs::Permissions::from_mode(0o700)))
                .map_err(|source| RuntimeError::Io {
                    what: "create",
                    path: d.clone(),
                    source,
                })?;
        }
        remove_orphan_runtime_dirs(&cfg);
        let watcher =
            Arc::new(
                ExitWatcher::new(cfg.clone(), events).map_err(|source| RuntimeError::Io {
                    what: "create exit watcher for",
                    path: cfg.containers_dir(),
                    source,
                })?,
            );
        let w = Arc::clone(&watcher);
        let thread = thread::Builder::new()
            .name("exit-watcher".into())
            .spawn(move || w.run())
            .map_err(|source| RuntimeError::Io {
                what: "spawn exit watcher for",
                path: PathBuf::from("exit-watcher"),
                source,
            })?;
        Ok(LinuxRuntime {
            cfg,
            boot_id,
            busy_containers: BusySet::default(),
            _run_dir_lock: run_dir_lock,
            busy_sandboxes: BusySet::default(),
            cgroup_lock: Mutex::new(()),
            images,
            watcher,
            thread: Some(thread),
        })
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.cfg
    }

    /// The boot this runtime runs in.
    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    /// Sets the Burstable tier's CPU weight from the cpu requests of the Burstable pods on
    /// disk. Called with `cgroup_lock` held; no-op while the tier does not exist.
    fn update_burstable_tier(&self) -> Result<(), RuntimeError> {
        let parent = &self.cfg.cgroup_parent;
        let tier = cgroups::qos_cgroup(parent, crate::pod::qos::QosClass::Burstable);
        if !self.cfg.cgroup_root.dir("cpu", &tier).is_dir() {
            return Ok(());
        }
        let mut total: u64 = 0;
        if let Ok(entries) = fs::read_dir(self.cfg.pods_dir()) {
            for e in entries.flatten() {
                let path = e.path().join(POD_CGROUP_RECORD);
                let Ok(data) = fs::read(&path) else { continue };
                match serde_json::from_slice::<PodCgroupRecord>(&data) {
                    Ok(r) if r.qos == crate::pod::qos::QosClass::Burstable => {
                        total = total.saturating_add(r.cpu_request_millis);
                    }
                    Ok(_) => {}
                    Err(e) => log::warn!("{}: {e}", path.display()),
                }
            }
        }
        self.cfg.cgroup_root.set_burstable_cpu(parent, total)?;
        Ok(())
    }

    /// Finishes tearing down a sandbox that has no record, or one that is not live, keeping
    /// the pod's data. No container runs in it: a container starts only in a complete sandbox,
    /// a removal deletes the record only once every container of the pod exited, and a dead
    /// sandbox is only torn down once no container of its pod lives.
    fn remove_partial_sandbox(&self, uid: &str) -> Result<(), RuntimeError> {
        let _busy = self.busy_sandboxes.enter(uid);
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.cfg
            .cgroup_root
            .remove_pod(&self.cfg.cgroup_parent, uid)?;
        sandbox::remove_runtime(&self.cfg.sandbox_dirs(), uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: uid.to_string(),
                source: Box::new(source),
            }
        })?;
        self.update_burstable_tier()
    }

    fn prepare(
        &self,
        req: &ContainerRequest<'_>,
        id: &str,
        paths: &ContainerPaths,
    ) -> Result<(ContainerMeta, ShimConfig), RuntimeError> {
        let pod = req.pod;
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let pod_ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let cname = req.container.name.clone();
        let image_ref = req.container.image.clone().unwrap_or_default();
        let image = self
            .images
            .resolve(&image_ref)
            .map_err(|source| RuntimeError::Image {
                pod: pod_name.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| RuntimeError::ImageNotPresent {
                pod: pod_name.clone(),
                image: image_ref.clone(),
            })?;
        let image_config =
            self.images
                .image_config(&image)
                .map_err(|source| RuntimeError::Image {
                    pod: pod_name.clone(),
                    source: Box::new(source),
                })?;
        let layers_dir = self.images.layers_dir();
        let mut lower: Vec<String> = self
            .images
            .layer_dirs(&image)
            .map_err(|source| RuntimeError::Image {
                pod: pod_name.clone(),
                source: Box::new(source),
            })?
            .iter()
            .map(|p| {
                p.strip_prefix(&layers_dir)
                    .unwrap_or(p)
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        lower.reverse();

        let sb_paths = SandboxPaths::new(&self.cfg.sandbox_dirs(), &uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: pod_name.clone(),
                source: Box::new(source),
            }
        })?;
        let sb = sandbox::load(&sb_paths)
            .map_err(|source| RuntimeError::Sandbox {
                pod: pod_name.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| RuntimeError::SandboxNotReady {
                pod: pod_name.clone(),
                message: "the pod has no sandbox".into(),
            })?;
        // Never join a namespace file that is not a live nsfs mount (one left by an earlier
        // boot is an empty file): the owner creates the sandbox again.
        sandbox::check_namespaces(&sb_paths, sb.host_network).map_err(|message| {
            RuntimeError::SandboxNotReady {
                pod: pod_name.clone(),
                message,
            }
        })?;
        let mounts = SandboxMounts {
            network_ns: (!sb.host_network).then(|| sb_paths.ns("net")),
            ipc_ns: sb_paths.ns("ipc"),
            uts_ns: (!sb.host_network).then(|| sb_paths.ns("uts")),
            hosts: sb_paths.etc("hosts"),
            hostname: sb_paths.etc("hostname"),
            resolv_conf: sb_paths.etc("resolv.conf"),
            shm: sb_paths.shm(),
            volumes: sb.volumes.clone(),
        };
        let qos = crate::pod::qos::qos_class(pod).map_err(|source| RuntimeError::Spec {
            pod: pod_name.clone(),
            container: cname.clone(),
            source: Box::new(spec::SpecError::from(source)),
        })?;
        let cgroup_path = cgroups::container_cgroup(&self.cfg.cgroup_parent, qos, &uid, id);
        let rootfs = paths.rootfs().rootfs;
        let host_devices = if security::is_privileged(req.container) {
            security::devices::host_devices(Path::new("/dev")).map_err(|source| {
                RuntimeError::Io {
                    what: "list host devices in",
                    path: PathBuf::from("/dev"),
                    source,
                }
            })?
        } else {
            Vec::new()
        };
        let built = spec::build_spec(&SpecRequest {
            pod,
            container: req.container,
            image: &image_config,
            rootfs: &rootfs,
            sandbox: &mounts,
            cgroups_path: &cgroup_path,
            node: &self.cfg.node,
            // Static pods are critical; the kubelet's -997 is for node-critical ones.
            critical: pod
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_deref())
                == Some("system-node-critical"),
            security: &self.cfg.security,
            host_devices: &host_devices,
            sub_path_pins: Some(&paths.rootfs().sub_paths),
        })
        .map_err(|source| RuntimeError::Spec {
            pod: pod_name.clone(),
            container: cname.clone(),
            source: Box::new(source),
        })?;
        self.ensure_apparmor_profile(&built.spec, id)?;
        let log_path = crate::logs::container_log_path(
            &self.cfg.log_dir,
            &pod_ns,
            &pod_name,
            &uid,
            &cname,
            req.restart_count,
        );
        let meta = ContainerMeta {
            id: id.to_string(),
            pod_uid: uid,
            pod_namespace: pod_ns,
            pod_name,
            container_name: cname,
            kind: req.kind,
            restart_count: req.restart_count,
            image: image_ref,
            image_digest: image.digest.clone(),
            log_path: log_path.clone(),
            stop_signal: built.stop_signal,
            created_at: super::now_rfc3339(),
            boot_id: self.boot_id.clone(),
        };
        let shim_cfg = ShimConfig {
            id: id.to_string(),
            record_dir: paths.record.clone(),
            youki_root: paths.dir.join("youki"),
            layers_dir,
            lower_layers: lower,
            log_path,
            log_max_size: self.cfg.log_max_size,
            log_max_files: self.cfg.log_max_files,
            user: built.user,
            cgroup_root: self.cfg.cgroup_root.path().to_path_buf(),
            cgroup_path,
        };
        let write = |path: PathBuf, r: io::Result<()>| {
            r.map_err(|source| RuntimeError::Io {
                what: "write",
                path,
                source,
            })
        };
        write(
            paths.config(),
            fsutil::write_json_atomic_volatile(&paths.config(), &built.spec),
        )?;
        write(
            paths.shim_config(),
            fsutil::write_json_atomic_volatile(&paths.shim_config(), &shim_cfg),
        )?;
        // No fsync on the start path: the runtime files live on a tmpfs, and the monitor makes
        // meta.json durable once the container started (a torn one after a power cut is an
        // interrupted creation: the directories are removed).
        // meta.json last: its presence marks a container as complete.
        write(
            paths.meta(),
            fsutil::write_json_atomic_volatile(&paths.meta(), &meta),
        )?;
        Ok((meta, shim_cfg))
    }

    /// Loads podvisor's default AppArmor profile if the spec uses it and a policy reload (or
    /// `aa-teardown`) removed it since start, as containerd checks before every container.
    fn ensure_apparmor_profile(
        &self,
        spec: &oci_spec::runtime::Spec,
        id: &str,
    ) -> Result<(), RuntimeError> {
        let wants_default = spec
            .process()
            .as_ref()
            .and_then(|p| p.apparmor_profile().as_deref())
            == Some(apparmor::DEFAULT_PROFILE);
        match &self.cfg.security.apparmor {
            AppArmorHost::Enabled { securityfs, .. } if wants_default => {
                apparmor::ensure_default_profile(securityfs).map_err(|e| RuntimeError::Start {
                    id: id.to_string(),
                    message: format!("AppArmor: {e}"),
                })
            }
            _ => Ok(()),
        }
    }

    /// Spawns the monitor and waits for its start report.
    fn spawn_monitor(
        &self,
        meta: &ContainerMeta,
        paths: &ContainerPaths,
    ) -> Result<ContainerInfo, RuntimeError> {
        let id = meta.id.clone();
        let io = |what: &'static str, path: PathBuf| {
            move |source: io::Error| RuntimeError::Io { what, path, source }
        };
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(paths.lock())
            .map_err(io("create", paths.lock()))?;
        // SAFETY: flock on an fd we own.
        if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(io("lock", paths.lock())(io::Error::last_os_error()));
        }
        let (ready_r, ready_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| io("create pipe for", paths.dir.clone())(e.into()))?;
        let shim_log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(paths.shim_log())
            .map_err(io("create", paths.shim_log()))?;
        let mut cmd = Command::new(&self.cfg.shim_binary);
        cmd.arg("shim")
            .arg("run")
            .arg(&paths.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(shim_log))
            .env("RUST_LOG", "warn");
        let ready_fd = ready_w.as_raw_fd();
        let lock_fd = lock.as_raw_fd();
        // SAFETY: the closure only calls async-signal-safe functions (setsid, dup2, fcntl).
        unsafe {
            cmd.pre_exec(move || {
                if libc::setsid() < 0 {
                    return Err(io::Error::last_os_error());
                }
                // Park both above the targets first so neither dup2 clobbers the other.
                let r = libc::fcntl(ready_fd, libc::F_DUPFD_CLOEXEC, 10);
                let l = libc::fcntl(lock_fd, libc::F_DUPFD_CLOEXEC, 10);
                if r < 0 || l < 0 {
                    return Err(io::Error::last_os_error());
                }
                move_fd(r, shim::READY_FD)?;
                move_fd(l, shim::LOCK_FD)?;
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| RuntimeError::Spawn {
            binary: self.cfg.shim_binary.clone(),
            source,
        })?;
        // The monitor holds the lock and the pipe now; ours must go so EOF and the lock follow
        // the monitor's life.
        drop(ready_w);
        drop(lock);
        let shim_pid = child.id() as i32;
        // `child` is not waited on through std: the watcher reaps it via its pidfd.
        drop(child);
        let pidfd = procfs::pidfd_open(shim_pid).map_err(io("pidfd_open", paths.dir.clone()))?;
        self.watcher.watch(meta, paths.clone(), pidfd)?;

        match read_report(&ready_r, self.cfg.start_timeout) {
            Ok(StartReport::Started { pid, started_at }) => Ok(ContainerInfo {
                meta: meta.clone(),
                state: ContainerState::Running { pid, started_at },
            }),
            Ok(StartReport::Failed { message }) => {
                self.discard_failed(&id, paths);
                Err(RuntimeError::Start { id, message })
            }
            Err(message) => {
                if let Ok(p) = ProcessId::of(shim_pid) {
                    let _ = p.signal(libc::SIGKILL);
                }
                self.discard_failed(&id, paths);
                Err(RuntimeError::Start { id, message })
            }
        }
    }

    /// A start failed: stop watching the monitor, let it finish its cleanup (or finish it),
    /// and remove the container's directories.
    fn discard_failed(&self, id: &str, paths: &ContainerPaths) {
        if let Some(fd) = self.watcher.forget(id) {
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, PollTimeout::from(10_000u16));
            procfs::reap_pidfd(&fd);
        }
        if !paths.cleaned().exists() && paths.shim_config().exists() {
            if let Err(e) = self.run_cleanup(paths) {
                log::warn!("container {id}: {e}");
            }
        }
        if let Err(e) = self.images.remove_lease(id) {
            log::warn!("container {id}: {e}");
        }
        if let Err(e) = remove_container_dirs(paths) {
            log::warn!("container {id}: {e}");
        }
    }

    fn run_cleanup(&self, paths: &ContainerPaths) -> Result<(), RuntimeError> {
        run_cleanup(&self.cfg.shim_binary, paths)
    }
}

impl Drop for LinuxRuntime {
    fn drop(&mut self) {
        self.watcher.shutdown();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// dup2 `from` onto `to`, clearing close-on-exec (also when they are already equal).
fn move_fd(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: plain fd syscalls, async-signal-safe; called between fork and exec.
    unsafe {
        if from == to {
            let flags = libc::fcntl(to, libc::F_GETFD);
            if flags < 0 || libc::fcntl(to, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(io::Error::last_os_error());
            }
        } else if libc::dup2(from, to) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn read_report(fd: &OwnedFd, timeout: Duration) -> Result<StartReport, String> {
    let deadline = Instant::now() + timeout;
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let mut file = fs::File::from(fd.try_clone().map_err(|e| e.to_string())?);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "monitor did not report a start within {}s",
                timeout.as_secs()
            ));
        }
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(format!("waiting for the monitor: {e}")),
        }
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if data.contains(&b'\n') {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("reading the monitor's report: {e}")),
        }
    }
    let line = data.split(|b| *b == b'\n').next().unwrap_or_default();
    if line.is_empty() {
        return Err(
            "monitor exited without reporting (see shim.log in the container directory)".into(),
        );
    }
    serde_json::from_slice(line).map_err(|e| format!("malformed start report: {e}"))
}

fn run_cleanup(binary: &Path, paths: &ContainerPaths) -> Result<(), RuntimeError> {
    let out = Command::new(binary)
        .arg("shim")
        .arg("cleanup")
        .arg(&paths.dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env("RUST_LOG", "warn")
        .output()
        .map_err(|source| RuntimeError::Spawn {
            binary: binary.to_path_buf(),
            source,
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(RuntimeError::Start {
            id: paths
                .dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            message: format!(
                "cleanup failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

fn new_container_id(uid: &str, name: &str, restart_count: u32) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!(
        "{uid}/{name}/{restart_count}/{nanos}/{}/{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    use sha2::Digest;
    let h = hex::encode(sha2::Sha256::digest(seed.as_bytes()));
    let short_uid: String = uid.chars().filter(|c| *c != '-').take(8).collect();
    format!("{short_uid}-{name}-{restart_count}-{}", &h[..8])
}

impl Runtime for LinuxRuntime {
    fn run_pod_sandbox(&self, pod: &Pod) -> Result<SandboxInfo, RuntimeError> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        sandbox::validate_uid(&uid).map_err(|source| RuntimeError::Sandbox {
            pod: name.clone(),
            source: Box::new(source),
        })?;
        let _busy = self.busy_sandboxes.enter(&uid);
        let cg = PodCgroupConfig::for_pod(pod, self.cfg.pod_pids_limit).map_err(|source| {
            RuntimeError::PodResources {
                pod: name.clone(),
                source,
            }
        })?;
        let info = sandbox::create(&self.cfg.sandbox_dirs(), pod, &self.cfg.shim_binary).map_err(
            |source| RuntimeError::Sandbox {
                pod: name.clone(),
                source: Box::new(source),
            },
        )?;
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.cfg
            .cgroup_root
            .create_pod(&self.cfg.cgroup_parent, &uid, &cg)?;
        let record = PodCgroupRecord {
            qos: cg.qos,
            cpu_request_millis: cg.requests.cpu_millis,
        };
        let path = self.cfg.pods_dir().join(&uid).join(POD_CGROUP_RECORD);
        fsutil::write_json_atomic_volatile(&path, &record).map_err(|source| RuntimeError::Io {
            what: "write",
            path: path.clone(),
            source,
        })?;
        self.update_burstable_tier()?;
        Ok(info)
    }

    fn remove_pod_sandbox(&self, pod_uid: &str) -> Result<(), RuntimeError> {
        let _busy = self.busy_sandboxes.enter(pod_uid);
        for c in self.list_containers()? {
            if c.meta.pod_uid == pod_uid && !matches!(c.state, ContainerState::Exited(_)) {
                return Err(RuntimeError::Start {
                    id: c.meta.id,
                    message: format!("still running; stop it before removing pod {pod_uid}"),
                });
            }
        }
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        // All three QoS places are probed: the pod's class is not needed to find it.
        self.cfg
            .cgroup_root
            .remove_pod(&self.cfg.cgroup_parent, pod_uid)?;
        sandbox::remove(&self.cfg.sandbox_dirs(), pod_uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: pod_uid.to_string(),
                source: Box::new(source),
            }
        })?;
        self.update_burstable_tier()?;
        Ok(())
    }

    fn list_pod_sandboxes(&self) -> Result<Vec<SandboxInfo>, RuntimeError> {
        let scan =
            sandbox::scan(&self.cfg.sandbox_dirs()).map_err(|source| RuntimeError::Sandbox {
                pod: String::new(),
                source: Box::new(source),
            })?;
        // A sandbox whose creation or removal was interrupted (daemon killed) has no record,
        // so it is listed as nothing, but its namespaces and /dev/shm may still be mounted
        // and its cgroups still there: nobody would ever remove them.
        for uid in scan.partial {
            if self.busy_sandboxes.contains(&uid) {
                continue;
            }
            log::info!(
                "pod {uid}: tearing down an incomplete sandbox (interrupted creation or removal)"
            );
            if let Err(e) = self.remove_partial_sandbox(&uid) {
                log::warn!("pod {uid}: {e}");
            }
        }
        // A sandbox that is not live is never listed (its pod gets a new one). It is torn
        // down once none of its containers lives; until then the owner stops them first.
        for (uid, why) in scan.dead {
            if self.busy_sandboxes.contains(&uid) {
                continue;
            }
            if self.pod_has_live_container(&uid) {
                log::warn!("pod {uid}: sandbox is not live ({why}) but containers still run in it");
                continue;
            }
            log::info!("pod {uid}: tearing down a sandbox that is not live ({why})");
            if let Err(e) = self.remove_partial_sandbox(&uid) {
                log::warn!("pod {uid}: {e}");
            }
        }
        Ok(scan.live)
    }

    fn list_pod_data(&self) -> Result<Vec<String>, RuntimeError> {
        sandbox::list_data(&self.cfg.sandbox_dirs()).map_err(|source| RuntimeError::Sandbox {
            pod: String::new(),
            source: Box::new(source),
        })
    }

    fn restart_count_from_logs(&self, pod: &Pod, container: &str) -> Option<u32> {
        let log = crate::logs::container_log_path(
            &self.cfg.log_dir,
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default(),
            pod.metadata.uid.as_deref().unwrap_or_default(),
            container,
            0,
        );
        crate::logs::highest_restart_count(log.parent()?)
    }

    fn pod_network_namespace(&self, pod_uid: &str) -> Option<PathBuf> {
        let net = sandbox::SandboxPaths::new(&self.cfg.sandbox_dirs(), pod_uid)
            .ok()?
            .ns("net");
        // Only pods with their own network namespace have it pinned.
        net.exists().then_some(net)
    }

    fn start_container(&self, req: &ContainerRequest<'_>) -> Result<ContainerInfo, RuntimeError> {
        let uid = req.pod.metadata.uid.clone().unwrap_or_default();
        sandbox::validate_uid(&uid).map_err(|source| RuntimeError::Sandbox {
            pod: req.pod.metadata.name.clone().unwrap_or_default(),
            source: Box::new(source),
        })?;
        let id = new_container_id(&uid, &req.container.name, req.restart_count);
        let paths = self.container_paths(&id)?;
        // Until its start is reported the container is incomplete: listings leave it alone.
        let _busy = self.busy_containers.enter(&id);
        // The record directory first: a runtime directory without one is an interrupted
        // removal, removed at the next start.
        for dir in [&paths.record, &paths.dir] {
            if let Err(source) = fs::DirBuilder::new().mode(0o700).create(dir) {
                let _ = remove_container_dirs(&paths);
                return Err(RuntimeError::Io {
                    what: "create",
                    path: dir.clone(),
                    source,
                });
            }
        }
        let prepared = self.prepare(req, &id, &paths).and_then(|(meta, _)| {
            self.images
                .add_lease(&id, &meta.image_digest)
                .map_err(|source| RuntimeError::Image {
                    pod: meta.pod_name.clone(),
                    source: Box::new(source),
                })?;
            Ok(meta)
        });
        let meta = match prepared {
            Ok(m) => m,
            Err(e) => {
                let _ = self.images.remove_lease(&id);
                let _ = remove_container_dirs(&paths);
                return Err(e);
            }
        };
        self.spawn_monitor(&meta, &paths)
    }

    fn signal_container(&self, id: &str, signal: i32) -> Result<(), RuntimeError> {
        let paths = self.container_paths(id)?;
        if !paths.meta().exists() {
            return Err(RuntimeError::NotFound { id: id.to_string() });
        }
        let state: ShimState = shim::read_json_opt(&paths.state())
            .map_err(|source| RuntimeError::Shim {
                id: id.to_string(),
                source: Box::new(source),
            })?
            .unwrap_or_default();
        if let Some(init) = state.init {
            init.signal(signal).map_err(|source| RuntimeError::Signal {
                id: id.to_string(),
                source,
            })?;
        }
        Ok(())
    }

    fn remove_container(&self, id: &str) -> Result<(), RuntimeError> {
        let paths = self.container_paths(id)?;
        let _busy = self.busy_containers.enter(id);
        if !paths.record.exists() && !paths.dir.exists() {
            return Ok(());
        }
        if shim::monitor_alive(&paths) {
            return Err(RuntimeError::Start {
                id: id.to_string(),
                message: "still running; stop it before removing it".into(),
            });
        }
        if !paths.cleaned().exists() && paths.shim_config().exists() {
            self.run_cleanup(&paths)?;
        }
        self.watcher.forget(id);
        self.images
            .remove_lease(id)
            .map_err(|source| RuntimeError::Image {
                pod: String::new(),
                source: Box::new(source),
            })?;
        remove_container_dirs(&paths).map_err(|source| RuntimeError::Io {
            what: "remove",
            path: paths.record.clone(),
            source,
        })
    }

    fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let dir = self.cfg.records_dir();
        let entries = fs::read_dir(&dir).map_err(|source| RuntimeError::Io {
            what: "read",
            path: dir.clone(),
            source,
        })?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            let id = entry.file_name().to_string_lossy().into_owned();
            if self.busy_containers.contains(&id) {
                continue;
            }
            let Ok(paths) = self.container_paths(&id) else {
                continue;
            };
            match self.container_info(&paths) {
                Ok(Some(info)) => out.push(info),
                Ok(None) => {}
                // Removed meanwhile (by another process sharing the root): gone, not broken.
                Err(_) if !paths.meta().exists() => {}
                // One broken directory must not hide the others.
                Err(e) => log::warn!("{}: {e}", paths.record.display()),
            }
        }
        out.sort_by(|a, b| a.meta.created_at.cmp(&b.meta.created_at));
        Ok(out)
    }

    fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        let paths = self.container_paths(id)?;
        if !paths.meta().exists() {
            return Err(RuntimeError::NotFound { id: id.to_string() });
        }
        // Its runtime directory goes with the container's end.
        if !paths.shim_config().exists() {
            return Err(RuntimeError::Exec {
                id: id.to_string(),
                source: Box::new(super::exec::ExecError::NotRunning { id: id.to_string() }),
            });
        }
        // libcontainer runs only in the helper process (`shim exec`), never in this one.
        super::exec::exec_capture(&self.cfg.shim_binary, &paths.dir, cmd, timeout).map_err(
            |source| RuntimeError::Exec {
                id: id.to_string(),
                source: Box::new(source),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_are_unique_and_valid_for_libcontainer() {
        let a = new_container_id("0d1e2f3a-aaaa", "web", 0);
        let b = new_container_id("0d1e2f3a-aaaa", "web", 0);
        assert_ne!(a, b);
        assert!(a.starts_with("0d1e2f3a-web-0-"), "{a}");
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+-.".contains(c)));
    }

    #[test]
    fn move_fd_clears_cloexec_when_already_in_place() {
        let (r, _w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let fd = r.as_raw_fd();
        move_fd(fd, fd).expect("move");
        // SAFETY: F_GETFD on an fd we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, 0);
    }
}
