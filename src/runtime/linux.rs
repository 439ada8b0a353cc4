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

use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
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
use super::rundir;
use super::sandbox::{self, SandboxDirs, SandboxPaths};
use super::shim::{self, ContainerPaths, ShimConfig, ShimState, StartReport};
use super::spec::{self, NodeInfo, SandboxMounts, SpecRequest};
use super::{
    ContainerInfo, ContainerMeta, ContainerRequest, ContainerState, ExecOutput, ExitRecord,
    Runtime, RuntimeError, RuntimeEvent, SandboxInfo,
};
use crate::cgroups::resources::PodCgroupConfig;
use crate::cgroups::{self, CgroupRoot};
use crate::fsutil::{self, Loaded};
use crate::images::ImageStore;

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
    /// How long a monitor may take to report that its container started.
    pub start_timeout: Duration,
}

impl RuntimeConfig {
    /// Defaults for a node: the current executable as monitor, kubelet log defaults.
    pub fn new(root_dir: PathBuf, run_dir: PathBuf, log_dir: PathBuf) -> io::Result<RuntimeConfig> {
        Ok(RuntimeConfig {
            root_dir,
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
        rundir::prepare(&cfg.run_dir, &boot_id)?;
        let sandbox_dirs = cfg.sandbox_dirs();
        for d in [
            cfg.containers_dir(),
            cfg.records_dir(),
            sandbox_dirs.run,
            sandbox_dirs.data,
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&d)
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

    /// Whether a monitor of pod `uid` still runs (read from the container records).
    fn pod_has_live_container(&self, uid: &str) -> bool {
        let Ok(entries) = fs::read_dir(self.cfg.records_dir()) else {
            return false;
        };
        entries.flatten().any(|e| {
            let Ok(paths) = self.container_paths(&e.file_name().to_string_lossy()) else {
                return false;
            };
            matches!(fsutil::load_json::<ContainerMeta>(&paths.meta()),
                Ok(Loaded::Ok(m)) if m.pod_uid == uid)
                && shim::monitor_alive(&paths)
        })
    }

    fn container_paths(&self, id: &str) -> Result<ContainerPaths, RuntimeError> {
        if id.is_empty() || id.contains('/') || id == "." || id == ".." {
            return Err(RuntimeError::NotFound { id: id.to_string() });
        }
        let (run, record) = (
            self.cfg.containers_dir().join(id),
            self.cfg.records_dir().join(id),
        );
        // A container of podvisor's earlier single-directory layout (all files in the record
        // directory) is handled in place: its monitor, of the earlier version, may still run.
        if !run.exists() && record.join("shim.json").exists() {
            return Ok(ContainerPaths::new(record.clone(), record));
        }
        Ok(ContainerPaths::new(run, record))
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
        })
        .map_err(|source| RuntimeError::Spec {
            pod: pod_name.clone(),
            container: cname.clone(),
            source: Box::new(source),
        })?;
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

    /// Removes what is left of a container whose creation never completed (no identity, or a
    /// torn one: a power cut before the monitor made it durable).
    fn remove_incomplete(&self, paths: &ContainerPaths, name: &str) {
        if let Err(e) = remove_container_dirs(paths) {
            log::warn!("container dir {}: {e}", paths.record.display());
        }
        let _ = self.images.remove_lease(name);
    }

    /// Finishes a container whose monitor is gone without having cleaned up, when nothing of
    /// it can live any more: one of an earlier boot (lost with its node), or one whose runtime
    /// directory vanished. Keeps its own exit record if it has one, else records containerd's
    /// status for a container whose task is gone (exit code 255, reason `Unknown`); removes
    /// the runtime directory and the writable layer; marks it cleaned. Its identity, exit
    /// record and logs stay: restart counts and `logs --previous` follow it.
    fn finish_lost(
        &self,
        paths: &ContainerPaths,
        meta: &ContainerMeta,
        why: &str,
    ) -> Result<ExitRecord, RuntimeError> {
        let io = |what: &'static str, path: &Path| {
            let path = path.to_path_buf();
            move |source| RuntimeError::Io { what, path, source }
        };
        let exit = match fsutil::load_json::<ExitRecord>(&paths.exit())
            .map_err(io("read", &paths.exit()))?
        {
            Loaded::Ok(exit) => exit,
            Loaded::Missing | Loaded::Torn(_) => {
                let exit = ExitRecord {
                    exit_code: UNKNOWN_EXIT_CODE,
                    signal: None,
                    oom_killed: false,
                    started_at: meta.created_at.clone(),
                    finished_at: super::now_rfc3339(),
                    reason: UNKNOWN_EXIT_REASON.into(),
                    message: Some(why.to_string()),
                };
                fsutil::write_json_atomic(&paths.exit(), &exit)
                    .map_err(io("write", &paths.exit()))?;
                exit
            }
        };
        // (A container of the earlier single-directory layout keeps its runtime files with its
        // records; only the writable layer goes below.)
        if paths.dir != paths.record && paths.dir.exists() {
            let rootfs = paths.rootfs();
            super::rootfs::unmount_if_mounted(&rootfs.rootfs).map_err(|e| RuntimeError::Io {
                what: "unmount",
                path: rootfs.rootfs.clone(),
                source: io::Error::other(e),
            })?;
            shim::remove_runtime_dir(paths).map_err(io("remove", &paths.dir))?;
        }
        super::rootfs::remove_rootfs(&paths.rootfs()).map_err(|e| RuntimeError::Io {
            what: "remove the writable layer of",
            path: paths.record.clone(),
            source: io::Error::other(e),
        })?;
        fs::write(paths.cleaned(), b"").map_err(io("write", &paths.cleaned()))?;
        log::info!(
            "pod {}/{} container {} ({}, restart {}): {why}: reported exited with {} ({}); \
             its log is kept",
            meta.pod_namespace,
            meta.pod_name,
            meta.container_name,
            meta.id,
            meta.restart_count,
            exit.exit_code,
            exit.reason
        );
        Ok(exit)
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
            .record
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let alive = shim::monitor_alive(paths);
        let meta = match fsutil::load_json::<ContainerMeta>(&paths.meta()) {
            Ok(Loaded::Ok(m)) => m,
            // Crashed while being created: nothing was started from it.
            Ok(Loaded::Missing) if !alive => {
                self.remove_incomplete(paths, &name);
                return Ok(None);
            }
            // A torn identity: a power cut before the monitor made it durable. The container
            // ran for milliseconds at most; its log file still counts for restart counts.
            Ok(Loaded::Torn(why)) if !alive => {
                log::warn!(
                    "{}: torn identity record ({why}): an interrupted creation, removing it",
                    paths.meta().display()
                );
                self.remove_incomplete(paths, &name);
                return Ok(None);
            }
            Ok(Loaded::Missing) => return Ok(None),
            Ok(Loaded::Torn(why)) => {
                return Err(RuntimeError::Start {
                    id: name,
                    message: format!("{} is torn ({why})", paths.meta().display()),
                })
            }
            Err(source) => {
                return Err(RuntimeError::Io {
                    what: "read",
                    path: paths.meta(),
                    source,
                })
            }
        };
        if alive {
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
                        self.watcher.watch(&meta, paths.clone(), fd)?;
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
            if let Ok(Loaded::Ok(exit)) = fsutil::load_json::<ExitRecord>(&paths.exit()) {
                return Ok(Some(ContainerInfo {
                    meta,
                    state: ContainerState::Exited(exit),
                }));
            }
        }
        let exit = if paths.cleaned().exists() {
            match fsutil::load_json::<ExitRecord>(&paths.exit()) {
                Ok(Loaded::Ok(exit)) => exit,
                // `cleaned` is written after the (durable) exit record: only a removal
                // interrupted half-way by an older version, or damage, leaves one without the
                // other.
                other => {
                    log::warn!(
                        "{}: cleaned container without a readable exit record ({}): removing it",
                        paths.record.display(),
                        match other {
                            Ok(Loaded::Torn(why)) => why,
                            Err(e) => e.to_string(),
                            _ => "missing".to_string(),
                        }
                    );
                    self.remove_incomplete(paths, &name);
                    return Ok(None);
                }
            }
        } else if paths.shim_config().exists()
            && (meta.boot_id == self.boot_id || meta.boot_id.is_empty())
        {
            // This boot (or an earlier layout's record, whose boot is unknown): its monitor
            // died; the helper kills what is left of the container.
            self.run_cleanup(paths)?;
            shim::read_json::<ExitRecord>(&paths.exit()).map_err(shim_err(&meta.id))?
        } else if meta.boot_id != self.boot_id {
            self.finish_lost(
                paths,
                &meta,
                "the node rebooted or lost power while the container ran (it belongs to an \
                 earlier boot)",
            )?
        } else {
            self.finish_lost(
                paths,
                &meta,
                "its runtime state was removed while its monitor was gone",
            )?
        };
        Ok(Some(ContainerInfo {
            meta,
            state: ContainerState::Exited(exit),
        }))
    }
}

/// containerd's exit code for a container whose task is gone (node reboot): `unknownExitCode`.
pub const UNKNOWN_EXIT_CODE: i32 = 255;
/// containerd's reason for it: `unknownExitReason`.
pub const UNKNOWN_EXIT_REASON: &str = "Unknown";

/// Removes runtime directories of containers that have no record (a removal interrupted
/// between the two), unless a monitor still holds them. Runs at start, before any worker.
fn remove_orphan_runtime_dirs(cfg: &RuntimeConfig) {
    let Ok(entries) = fs::read_dir(cfg.containers_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let id = e.file_name().to_string_lossy().into_owned();
        let paths = ContainerPaths::new(e.path(), cfg.records_dir().join(&id));
        if paths.record.exists() || shim::monitor_alive(&paths) {
            continue;
        }
        let rootfs = paths.rootfs().rootfs;
        let r = super::rootfs::unmount_if_mounted(&rootfs)
            .map_err(io::Error::other)
            .and_then(|()| shim::remove_runtime_dir(&paths));
        match r {
            Ok(()) => log::info!(
                "container {id}: removed runtime state without a record (interrupted removal)"
            ),
            Err(e) => log::warn!("container {id}: runtime state without a record: {e}"),
        }
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

/// Removes a container's two directories without descending into mount points.
fn remove_container_dirs(paths: &ContainerPaths) -> io::Result<()> {
    let rootfs = paths.rootfs().rootfs;
    if super::rootfs::is_mounted(&rootfs) {
        return Err(io::Error::other(format!(
            "{} is still mounted",
            rootfs.display()
        )));
    }
    // meta.json first: a removal interrupted below (daemon killed) then looks like an
    // interrupted creation, which the next listing removes. Deleted in directory order, a
    // half-removed directory could keep meta.json but lose exit.json, and stay forever as an
    // unreadable container.
    match fs::remove_file(paths.meta()) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    fsutil::remove_tree_no_mounts(&paths.dir)?;
    fsutil::remove_tree_no_mounts(&paths.record)
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

struct Watched {
    id: String,
    pod_uid: String,
    paths: ContainerPaths,
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
        paths: ContainerPaths,
        pidfd: OwnedFd,
    ) -> Result<(), RuntimeError> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lock();
        self.epoll
            .add(&pidfd, EpollEvent::new(EpollFlags::EPOLLIN, token))
            .map_err(|e| RuntimeError::Io {
                what: "watch monitor of",
                path: paths.dir.clone(),
                source: e.into(),
            })?;
        map.insert(
            token,
            Watched {
                id: meta.id.clone(),
                pod_uid: meta.pod_uid.clone(),
                paths,
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
        let paths = &w.paths;
        if !paths.cleaned().exists() {
            if let Err(e) = run_cleanup(&self.cfg.shim_binary, paths) {
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
