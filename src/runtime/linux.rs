//! linux: [`LinuxRuntime`], the real [`Runtime`]: containers through per-container monitor
//! processes ([`super::shim`]), sandboxes through [`super::sandbox`].
//!
//! Owns the on-disk container directories `<root>/containers/<id>/` and one thread, the exit
//! watcher, which waits on the pidfds of every monitor with epoll and turns each monitor exit
//! into a [`RuntimeEvent::ContainerExited`] (reading the `exit.json` the monitor wrote). The
//! daemon's threads never call libcontainer: they spawn monitors (fork+exec) and send signals
//! through pidfds.

use std::collections::{HashMap, HashSet};
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
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::procfs::{self, ProcessId};
use super::sandbox::{self, SandboxPaths};
use super::shim::{self, ContainerPaths, ShimConfig, ShimState, StartReport};
use super::spec::{self, NodeInfo, SandboxMounts, SpecRequest};
use super::{
    ContainerInfo, ContainerMeta, ContainerRequest, ContainerState, ExecOutput, ExitRecord,
    Runtime, RuntimeError, RuntimeEvent, SandboxInfo,
};
use crate::cgroups::resources::PodCgroupConfig;
use crate::cgroups::{self, CgroupRoot};
use crate::fsutil;
use crate::images::ImageStore;
use crate::security::apparmor::{self, AppArmorHost};
use crate::security::{self, NodeSecurity};

/// Settings of the real runtime.
#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// podvisor's state root (`--root-dir`, default /var/lib/podvisor).
    pub root_dir: PathBuf,
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
    pub fn new(root_dir: PathBuf, log_dir: PathBuf) -> io::Result<RuntimeConfig> {
        Ok(RuntimeConfig {
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
    pub fn containers_dir(&self) -> PathBuf {
        self.root_dir.join("containers")
    }
    pub fn pods_dir(&self) -> PathBuf {
        self.root_dir.join("pods")
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
    /// Containers being created or removed by this process. `list_containers` (run by the
    /// removal of another pod on another worker) skips them: without this it took a directory
    /// still being written for the leftover of a crashed creation and deleted it, or ran
    /// `shim cleanup` on it just before its monitor started (killing the new container's
    /// cgroup and rootfs under it), or read a directory `remove_container` was deleting.
    busy_containers: BusySet,
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
        // root only, whatever existed: the state holds specs (environment values), images with
        // setuid binaries and container root filesystems (the kubelet's root dir is 0750
        // root:root; containerd keeps its snapshots 0700).
        for d in [cfg.root_dir.clone(), cfg.containers_dir(), cfg.pods_dir()] {
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
            busy_containers: BusySet::default(),
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

    /// Finishes tearing down a sandbox that has no record. No container can run in it: a
    /// container starts only in a complete sandbox, and a removal deletes the record only
    /// once every container of the pod exited.
    fn remove_partial_sandbox(&self, uid: &str) -> Result<(), RuntimeError> {
        let _busy = self.busy_sandboxes.enter(uid);
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.cfg
            .cgroup_root
            .remove_pod(&self.cfg.cgroup_parent, uid)?;
        sandbox::remove(&self.cfg.pods_dir(), uid).map_err(|source| RuntimeError::Sandbox {
            pod: uid.to_string(),
            source: Box::new(source),
        })?;
        self.update_burstable_tier()
    }

    fn container_paths(&self, id: &str) -> Result<ContainerPaths, RuntimeError> {
        if id.is_empty() || id.contains('/') || id == "." || id == ".." {
            return Err(RuntimeError::NotFound { id: id.to_string() });
        }
        Ok(ContainerPaths::new(self.cfg.containers_dir().join(id)))
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

        let sb_paths = SandboxPaths::new(&self.cfg.pods_dir(), &uid).map_err(|source| {
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
            .ok_or_else(|| RuntimeError::Start {
                id: id.to_string(),
                message: format!("pod {pod_name} has no sandbox (run_pod_sandbox first)"),
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
        };
        let shim_cfg = ShimConfig {
            id: id.to_string(),
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
        // Runtime files need no fsync: no container survives a power cut, and a torn file after
        // one is treated like an interrupted creation (the directory is removed).
        // meta.json last: its presence marks a container directory as complete.
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
        self.watcher.watch(meta, paths.dir.clone(), pidfd)?;

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
    /// and remove the container's directory.
    fn discard_failed(&self, id: &str, paths: &ContainerPaths) {
        if let Some(fd) = self.watcher.forget(id) {
            let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, PollTimeout::from(10_000u16));
            procfs::reap_pidfd(&fd);
        }
        if !paths.cleaned().exists() {
            if let Err(e) = self.run_cleanup(paths) {
                log::warn!("container {id}: {e}");
            }
        }
        if let Err(e) = self.images.remove_lease(id) {
            log::warn!("container {id}: {e}");
        }
        if let Err(e) = remove_container_dir(&paths.dir) {
            log::warn!("container {id}: {e}");
        }
    }

    fn run_cleanup(&self, paths: &ContainerPaths) -> Result<(), RuntimeError> {
        run_cleanup(&self.cfg.shim_binary, paths)
    }

    fn container_info(
        &self,
        paths: &ContainerPaths,
    ) -> Result<Option<ContainerInfo>, RuntimeError> {
        let shim_err = |id: &str| {
            let id = id.to_string();
            move |source| RuntimeError::Shim {
                id,
                source: Box::new(source),
            }
        };
        let name = paths
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // A torn meta.json (power cut right after creation) counts as an interrupted creation.
        let meta = match shim::read_json_opt::<ContainerMeta>(&paths.meta()) {
            Ok(m) => m,
            Err(e) if !shim::monitor_alive(paths) => {
                log::warn!(
                    "{}: {e}: removing the incomplete container",
                    paths.dir.display()
                );
                None
            }
            Err(e) => return Err(shim_err(&name)(e)),
        };
        let Some(meta) = meta else {
            // Crashed while being created: nothing was started from it.
            if !shim::monitor_alive(paths) {
                if let Err(e) = remove_container_dir(&paths.dir) {
                    log::warn!("container dir {}: {e}", paths.dir.display());
                }
                let _ = self.images.remove_lease(&name);
            }
            return Ok(None);
        };
        if shim::monitor_alive(paths) {
            // Give a monitor that is just starting a moment to record itself.
            let deadline = Instant::now() + Duration::from_secs(2);
            let state = loop {
                let st: ShimState = shim::read_json_opt(&paths.state())
                    .map_err(shim_err(&meta.id))?
                    .unwrap_or_default();
                if st.shim.is_some() || Instant::now() >= deadline {
                    break st;
                }
                thread::sleep(Duration::from_millis(10));
            };
            if let Some(shim_id) = state.shim {
                if !self.watcher.is_watched(&meta.id) {
                    if let Ok(Some(fd)) = shim_id.open_pidfd() {
                        self.watcher.watch(&meta, paths.dir.clone(), fd)?;
                    }
                }
            }
            let st = match (state.init, state.started_at) {
                (Some(init), Some(started_at)) => ContainerState::Running {
                    pid: init.pid,
                    started_at,
                },
                _ => ContainerState::Created,
            };
            return Ok(Some(ContainerInfo { meta, state: st }));
        }
        if self.watcher.is_watched(&meta.id) {
            // The monitor just exited; the watcher reports it as an event.
            let exit =
                shim::read_json_opt::<ExitRecord>(&paths.exit()).map_err(shim_err(&meta.id))?;
            if let Some(exit) = exit {
                return Ok(Some(ContainerInfo {
                    meta,
                    state: ContainerState::Exited(exit),
                }));
            }
        }
        if !paths.cleaned().exists() {
            self.run_cleanup(paths)?;
        } else if !paths.exit().exists() {
            // `cleaned` is written after exit.json: only a removal interrupted half-way (by
            // an older version that deleted meta.json last) leaves one without the other.
            log::warn!(
                "{}: half-removed container: removing it",
                paths.dir.display()
            );
            if let Err(e) = remove_container_dir(&paths.dir) {
                log::warn!("container dir {}: {e}", paths.dir.display());
            }
            let _ = self.images.remove_lease(&name);
            return Ok(None);
        }
        let exit = shim::read_json::<ExitRecord>(&paths.exit()).map_err(shim_err(&meta.id))?;
        Ok(Some(ContainerInfo {
            meta,
            state: ContainerState::Exited(exit),
        }))
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

/// Removes a container directory without descending into mount points (pinned subPaths are
/// unmounted first).
fn remove_container_dir(dir: &Path) -> io::Result<()> {
    super::rootfs::unpin_sub_paths(&super::rootfs::RootfsPaths::in_dir(dir).sub_paths)
        .map_err(io::Error::other)?;
    let rootfs = dir.join("rootfs");
    if super::rootfs::is_mounted(&rootfs) {
        return Err(io::Error::other(format!(
            "{} is still mounted",
            rootfs.display()
        )));
    }
    // meta.json first: a removal interrupted below (daemon killed) then looks like an
    // interrupted creation, which the next listing removes. Deleted in directory order, a
    // half-removed directory could keep meta.json but lose exit.json and shim.json, and
    // stay forever as an unreadable container.
    match fs::remove_file(ContainerPaths::new(dir).meta()) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    match fs::remove_dir_all(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r,
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
        let info = sandbox::create(&self.cfg.pods_dir(), pod, &self.cfg.shim_binary).map_err(
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
        sandbox::remove(&self.cfg.pods_dir(), pod_uid).map_err(|source| RuntimeError::Sandbox {
            pod: pod_uid.to_string(),
            source: Box::new(source),
        })?;
        self.update_burstable_tier()?;
        Ok(())
    }

    fn list_pod_sandboxes(&self) -> Result<Vec<SandboxInfo>, RuntimeError> {
        let err = |source| RuntimeError::Sandbox {
            pod: String::new(),
            source: Box::new(source),
        };
        // A sandbox whose creation or removal was interrupted (daemon killed) has no record,
        // so it is listed as nothing, but its namespaces and /dev/shm may still be mounted
        // and its cgroups still there: nobody would ever remove them.
        for uid in sandbox::list_partial(&self.cfg.pods_dir()).map_err(err)? {
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
        sandbox::list(&self.cfg.pods_dir()).map_err(err)
    }

    fn pod_network_namespace(&self, pod_uid: &str) -> Option<PathBuf> {
        let net = sandbox::SandboxPaths::new(&self.cfg.pods_dir(), pod_uid)
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
        // Until its start is reported the directory is incomplete: listings leave it alone.
        let _busy = self.busy_containers.enter(&id);
        fs::DirBuilder::new()
            .mode(0o700)
            .create(&paths.dir)
            .map_err(|source| RuntimeError::Io {
                what: "create",
                path: paths.dir.clone(),
                source,
            })?;
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
                let _ = remove_container_dir(&paths.dir);
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
        if !paths.dir.exists() {
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
        remove_container_dir(&paths.dir).map_err(|source| RuntimeError::Io {
            what: "remove",
            path: paths.dir.clone(),
            source,
        })
    }

    fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let dir = self.cfg.containers_dir();
        let entries = fs::read_dir(&dir).map_err(|source| RuntimeError::Io {
            what: "read",
            path: dir.clone(),
            source,
        })?;
        let mut out = Vec::new();
        for entry in entries.flatten() {
            if self
                .busy_containers
                .contains(&entry.file_name().to_string_lossy())
            {
                continue;
            }
            let paths = ContainerPaths::new(entry.path());
            match self.container_info(&paths) {
                Ok(Some(info)) => out.push(info),
                Ok(None) => {}
                // Removed meanwhile (by another process sharing the root): gone, not broken.
                Err(_) if !paths.meta().exists() => {}
                // One broken directory must not hide the others.
                Err(e) => log::warn!("{}: {e}", paths.dir.display()),
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
        // libcontainer runs only in the helper process (`shim exec`), never in this one.
        super::exec::exec_capture(&self.cfg.shim_binary, &paths.dir, cmd, timeout).map_err(
            |source| RuntimeError::Exec {
                id: id.to_string(),
                source: Box::new(source),
            },
        )
    }
}

struct Watched {
    id: String,
    pod_uid: String,
    dir: PathBuf,
    pidfd: OwnedFd,
}

/// The exit-watcher: epoll over monitor pidfds.
struct ExitWatcher {
    cfg: RuntimeConfig,
    epoll: Epoll,
    stop: EventFd,
    next: AtomicU64,
    watched: Mutex<HashMap<u64, Watched>>,
    events: Mutex<Sender<RuntimeEvent>>,
}

const STOP_TOKEN: u64 = 0;

impl ExitWatcher {
    fn new(cfg: RuntimeConfig, events: Sender<RuntimeEvent>) -> io::Result<ExitWatcher> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let stop = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        epoll.add(&stop, EpollEvent::new(EpollFlags::EPOLLIN, STOP_TOKEN))?;
        Ok(ExitWatcher {
            cfg,
            epoll,
            stop,
            next: AtomicU64::new(1),
            watched: Mutex::new(HashMap::new()),
            events: Mutex::new(events),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Watched>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts
        // and removes), so a poisoned lock is still usable.
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn watch(
        &self,
        meta: &ContainerMeta,
        dir: PathBuf,
        pidfd: OwnedFd,
    ) -> Result<(), RuntimeError> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lock();
        self.epoll
            .add(&pidfd, EpollEvent::new(EpollFlags::EPOLLIN, token))
            .map_err(|e| RuntimeError::Io {
                what: "watch monitor of",
                path: dir.clone(),
                source: e.into(),
            })?;
        map.insert(
            token,
            Watched {
                id: meta.id.clone(),
                pod_uid: meta.pod_uid.clone(),
                dir,
                pidfd,
            },
        );
        Ok(())
    }

    fn is_watched(&self, id: &str) -> bool {
        self.lock().values().any(|w| w.id == id)
    }

    /// Stops watching `id`; returns its pidfd.
    fn forget(&self, id: &str) -> Option<OwnedFd> {
        let mut map = self.lock();
        let token = map.iter().find(|(_, w)| w.id == id).map(|(t, _)| *t)?;
        let w = map.remove(&token)?;
        let _ = self.epoll.delete(&w.pidfd);
        Some(w.pidfd)
    }

    fn shutdown(&self) {
        let _ = self.stop.arm();
    }

    fn run(&self) {
        let mut events = [EpollEvent::empty(); 32];
        loop {
            let n = match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(n) => n,
                Err(nix::Error::EINTR) => continue,
                Err(e) => {
                    log::error!("exit watcher: epoll_wait: {e}");
                    return;
                }
            };
            for ev in &events[..n] {
                let token = ev.data();
                if token == STOP_TOKEN {
                    return;
                }
                let w = {
                    let mut map = self.lock();
                    match map.remove(&token) {
                        Some(w) => {
                            let _ = self.epoll.delete(&w.pidfd);
                            w
                        }
                        None => continue,
                    }
                };
                procfs::reap_pidfd(&w.pidfd);
                self.report(w);
            }
        }
    }

    fn report(&self, w: Watched) {
        let paths = ContainerPaths::new(&w.dir);
        if !paths.cleaned().exists() {
            if let Err(e) = run_cleanup(&self.cfg.shim_binary, &paths) {
                log::error!("container {}: {e}", w.id);
            }
        }
        let exit = match shim::read_json::<ExitRecord>(&paths.exit()) {
            Ok(e) => e,
            Err(e) => {
                log::error!("container {}: {e}", w.id);
                ExitRecord {
                    exit_code: 137,
                    signal: None,
                    oom_killed: false,
                    started_at: String::new(),
                    finished_at: super::now_rfc3339(),
                    reason: "ContainerStatusUnknown".into(),
                    message: Some(e.to_string()),
                }
            }
        };
        let tx = self.events.lock().unwrap_or_else(|p| p.into_inner());
        // The receiver may be gone while shutting down: nothing left to tell.
        let _ = tx.send(RuntimeEvent::ContainerExited {
            id: w.id,
            pod_uid: w.pod_uid,
            exit,
        });
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
