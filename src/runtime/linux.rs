//! linux: [`LinuxRuntime`], the real [`Runtime`]: containers through per-container monitor
//! processes ([`super::shim`]), sandboxes through [`super::sandbox`].
//!
//! Owns the container directories (runtime part `<runtime-dir>/containers/<id>/`, records
//! `<root-dir>/containers/<id>/`) and one thread, the exit watcher, which waits on the pidfds of
//! every monitor with epoll, and with inotify for the exit records their monitors write, and
//! turns each exit into a [`RuntimeEvent::ContainerExited`] (reading the `exit.json` the
//! monitor wrote). The daemon's threads never call libcontainer: they have the spawner
//! ([`super::spawner`]) fork monitors and send signals through pidfds. At start it makes the runtime dir this boot's ([`super::rundir`]); containers of an
//! earlier boot are reported exited with containerd's unknown status (255, `Unknown`), their
//! records and logs kept, everything else of them removed.
//!
//! Submodules: `start` (preparing a container and spawning its monitor), `staged` (a pod's
//! first container prepared while its sandbox is made), `pod_cgroups`
//! (pod cgroup records and the Burstable tier's weight), `node` (node facts for specs),
//! `records` (a container's two directories and what a listing finds in them: complete,
//! interrupted, monitor dead, lost with an earlier boot), `watcher` (the exit watcher thread).

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
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

use super::dns::DnsSettings;
use super::procfs::{self, ProcessId};
use super::rundir;
use super::sandbox::{self, SandboxDirs, SandboxPaths};
use super::shim::{self, ContainerPaths, ShimConfig, ShimState, StartReport};
use super::spawner::Spawner;
use super::spec::{self, NodeInfo, SandboxMounts, SpecRequest};
use super::userns::UsernsManager;
use super::{
    ContainerInfo, ContainerMeta, ContainerRequest, ContainerState, ExecOutput, Runtime,
    RuntimeError, RuntimeEvent, SandboxInfo,
};
use crate::cgroups::resources::PodCgroupConfig;
use crate::cgroups::{self, CgroupRoot};
use crate::fsutil;
use crate::images::ImageStore;
use crate::network::PodNetwork;
use crate::security::apparmor::{self, AppArmorHost};
use crate::security::{self, NodeSecurity};

mod network;
mod node;
mod pod_cgroups;
mod records;
mod staged;
mod start;
mod watcher;

pub use node::detect_node_info;
use pod_cgroups::{PodCgroupRecord, POD_CGROUP_RECORD};
use start::{new_container_id, run_cleanup};

pub use records::UNKNOWN_EXIT_CODE;
use records::{remove_container_dirs, remove_orphan_runtime_dirs};
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
    /// The podvisor binary: the spawner (and, with [`HelperMode::Exec`], every monitor and
    /// helper) is exec'd from it.
    pub shim_binary: PathBuf,
    pub cgroup_root: CgroupRoot,
    /// Name of podvisor's top-level cgroup (default "podvisor"; a slice such as
    /// "podvisor.slice" with the systemd driver).
    pub cgroup_parent: String,
    /// `cgroupDriver`: podvisor's own cgroup tree, or systemd slices and scopes.
    pub cgroup_driver: cgroups::CgroupDriver,
    /// `podPidsLimit`: pids.max of every pod cgroup (`None` = unlimited).
    pub pod_pids_limit: Option<i64>,
    pub log_max_size: u64,
    pub log_max_files: u32,
    pub node: NodeInfo,
    /// The confinement this node offers (sysctls, seccomp, AppArmor).
    pub security: NodeSecurity,
    /// How long a monitor may take to report that its container started.
    pub start_timeout: Duration,
    /// Where pods' DNS settings come from (the configuration's `resolvConf`).
    pub dns: DnsSettings,
    /// The IDs `hostUsers: false` pods' user namespaces are allocated from (/etc/subuid).
    pub user_ns_range: super::userns::IdRange,
    /// The pod network (CNI); `None`: pods without hostNetwork have loopback only.
    pub network: Option<crate::network::NetworkConfig>,
    /// How monitors and sandbox helpers are made: forked by the spawner (default), or each
    /// its own fork+exec of `shim_binary` (the earlier way; a test hook for benchmarks that
    /// compare both, [`EXEC_HELPERS_ENV`]).
    pub helpers: HelperMode,
}

/// How the runtime makes its monitors and sandbox helpers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperMode {
    /// Forked without exec by the runtime's spawner ([`super::spawner`]).
    Spawner,
    /// A fork+exec of podvisor's binary for each.
    Exec,
}

/// Test hook: `PODVISOR_TEST_EXEC_HELPERS=1` makes a daemon fork+exec a monitor per container
/// and a helper per sandbox instead of forking them from its spawner (benchmarks compare both
/// in one run).
pub const EXEC_HELPERS_ENV: &str = "PODVISOR_TEST_EXEC_HELPERS";

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
            cgroup_driver: cgroups::CgroupDriver::Cgroupfs,
            pod_pids_limit: None,
            log_max_size: 10 * 1024 * 1024,
            log_max_files: 5,
            node: detect_node_info(),
            security: NodeSecurity::for_host(&root_dir, &[], false, AppArmorHost::detect()),
            root_dir,
            start_timeout: Duration::from_secs(60),
            dns: DnsSettings::default(),
            user_ns_range: super::userns::read_id_range(
                Path::new("/etc/subuid"),
                Path::new("/etc/subgid"),
            )
            .map_err(io::Error::other)?,
            network: None,
            helpers: HelperMode::Spawner,
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

/// Marks the parents of the directories every start makes and every removal deletes (the
/// containers' records with their writable layers, the pods' data, the pods' logs) so that
/// ext4 spreads their children over the file system (`sys::topdir`: on an ext4 without a
/// journal each start otherwise scans past the last minutes' deletions). The log root is made
/// here if missing, with the log writer's mode. A file system without the flag is
/// left as it is; nothing here stops the daemon.
fn spread_churned_dirs(cfg: &RuntimeConfig) {
    let mut dirs = vec![cfg.records_dir(), cfg.sandbox_dirs().data];
    match fs::DirBuilder::new()
        .recursive(true)
        .mode(crate::logs::writer::LOG_DIR_MODE)
        .create(&cfg.log_dir)
    {
        Ok(()) => dirs.push(cfg.log_dir.clone()),
        // The first container's log writer says why, with its pod and container.
        Err(e) => log::warn!("create {}: {e}", cfg.log_dir.display()),
    }
    for dir in dirs {
        match crate::sys::topdir::spread_subdirectories(&dir) {
            Ok(crate::sys::topdir::Spread::Set) => {
                log::info!(
                    "{}: its subdirectories spread over the file system (chattr +T)",
                    dir.display()
                )
            }
            Ok(_) => {}
            Err(e) => log::warn!("{}: chattr +T: {e}", dir.display()),
        }
    }
}

/// How long removing an exited container waits for its monitor to finish taking it apart.
const MONITOR_FINISH_WAIT: Duration = Duration::from_secs(30);

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

    /// Marks `name` busy unless it already is (another thread works on it).
    fn try_enter(&self, name: &str) -> Option<BusyGuard<'_>> {
        self.lock().insert(name.to_string()).then(|| BusyGuard {
            set: self,
            name: name.to_string(),
        })
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
    /// One runtime per root dir too (another runtime dir with the same root dir would take
    /// this one's pods for orphans).
    _root_dir_lock: rundir::RunDirLock,
    /// Pod sandboxes being created by this process (never torn down as partial).
    busy_sandboxes: BusySet,
    /// Serializes pod cgroup creation and removal (tiers are removed when empty, and the
    /// Burstable tier's weight is a sum over pods).
    cgroup_lock: Mutex<()>,
    /// systemd's units, with the systemd cgroup driver (pod slices).
    systemd_units: Option<Box<dyn cgroups::systemd::SystemdUnits>>,
    images: Arc<ImageStore>,
    watcher: Arc<ExitWatcher>,
    thread: Option<thread::JoinHandle<()>>,
    /// The user namespaces of `hostUsers: false` pods (allocated at sandbox creation,
    /// released at its removal).
    userns: Mutex<UsernsManager>,
    /// The pod network (CNI attachments of sandboxes). Present also with networking off:
    /// attachments recorded while it was on are still DELed when their sandboxes go.
    network: PodNetwork,
    /// Whether new sandboxes join the pod network.
    network_on: bool,
    /// Forks monitors and sandbox helpers (started on first use).
    spawner: Spawner,
    /// Starts the cgroup attach lock's grace period ahead of container placements.
    warmer: Arc<cgroups::warm::AttachWarmer>,
}

impl LinuxRuntime {
    /// Creates the runtime and starts its exit-watcher thread, which sends to `events`.
    pub fn new(
        cfg: RuntimeConfig,
        images: Arc<ImageStore>,
        events: Sender<RuntimeEvent>,
    ) -> Result<LinuxRuntime, RuntimeError> {
        cgroups::validate_parent(&cfg.cgroup_parent)?;
        let systemd_units = match cfg.cgroup_driver {
            cgroups::CgroupDriver::Cgroupfs => None,
            cgroups::CgroupDriver::Systemd => {
                cgroups::systemd::validate_slice(&cfg.cgroup_parent).map_err(|source| {
                    cgroups::CgroupError::from(cgroups::systemd::SystemdError::Slice { source })
                })?;
                Some(
                    cgroups::systemd::system_units(&cfg.cgroup_root)
                        .map_err(cgroups::CgroupError::from)?,
                )
            }
        };
        let boot_id = rundir::read_boot_id(&cfg.boot_id_file)?;
        let run_dir_lock = rundir::lock(&cfg.run_dir, rundir::LOCK_WAIT)?;
        let root_dir_lock = rundir::lock_dir("root dir", &cfg.root_dir, 0o700, rundir::LOCK_WAIT)?;
        rundir::prepare(&cfg.run_dir, &boot_id)?;
        let sandbox_dirs = cfg.sandbox_dirs();
        // root only, whatever existed: the state holds specs (environment values), images with
        // setuid binaries and container root filesystems (the kubelet's root dir is 0750
        // root:root; containerd keeps its snapshots 0700).
        // The containers' and the sandboxes' runtime parts are traversable (0711, never
        // listable): the root of a `hostUsers: false` pod's user namespace reaches its rootfs
        // mount point and pinned namespaces through them (its own directories are 0711 too;
        // every other one stays 0700).
        for (d, mode) in [
            (cfg.root_dir.clone(), 0o700),
            (cfg.containers_dir(), 0o711),
            (cfg.records_dir(), 0o700),
            (sandbox_dirs.run, 0o711),
            (sandbox_dirs.data, 0o700),
        ] {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(mode)
                .create(&d)
                .and_then(|()| fs::set_permissions(&d, fs::Permissions::from_mode(mode)))
                .map_err(|source| RuntimeError::Io {
                    what: "create",
                    path: d.clone(),
                    source,
                })?;
        }
        spread_churned_dirs(&cfg);
        remove_orphan_runtime_dirs(&cfg);
        let warmer = Arc::new(cgroups::warm::AttachWarmer::new(
            &cfg.cgroup_root,
            cfg.cgroup_driver,
        ));
        let watcher = Arc::new(
            ExitWatcher::new(cfg.clone(), events, Arc::clone(&warmer)).map_err(|source| {
                RuntimeError::Io {
                    what: "create exit watcher for",
                    path: cfg.containers_dir(),
                    source,
                }
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
        // Every persisted mapping is recorded before anything is allocated.
        let userns = Mutex::new(UsernsManager::load(
            &cfg.sandbox_dirs().data,
            cfg.user_ns_range,
        ));
        let network_on = cfg.network.is_some();
        let network = PodNetwork::new(
            cfg.network
                .clone()
                .unwrap_or_else(|| crate::network::NetworkConfig::new(&cfg.root_dir)),
            &cfg.root_dir,
            &cfg.run_dir,
            &boot_id,
        );
        if network_on {
            network.prepare();
        }
        // The longest command line a child gets: `shim run <containers dir>/<id>` (ids are
        // at most ~100 bytes: an 8-character uid prefix, a 63-character name, the restart
        // count and a hash) or `shim sandbox <pods dir>/<uid>` (uids <= 64).
        let longest = cfg
            .containers_dir()
            .as_os_str()
            .len()
            .max(cfg.pods_dir().as_os_str().len())
            + 128;
        let spawner = Spawner::new(cfg.shim_binary.clone(), longest);
        if cfg.helpers == HelperMode::Spawner {
            spawner.prestart();
        }
        Ok(LinuxRuntime {
            network,
            network_on,
            spawner,
            warmer,
            userns,
            cfg,
            boot_id,
            busy_containers: BusySet::default(),
            _run_dir_lock: run_dir_lock,
            _root_dir_lock: root_dir_lock,
            busy_sandboxes: BusySet::default(),
            cgroup_lock: Mutex::new(()),
            systemd_units,
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

    /// The pod network, when pods have one.
    pub fn network(&self) -> Option<&PodNetwork> {
        self.network_on.then_some(&self.network)
    }

    /// The pid of this runtime's spawner, while one runs (started on first use).
    pub fn spawner_pid(&self) -> Option<i32> {
        self.spawner.pid()
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

impl Runtime for LinuxRuntime {
    fn run_pod_sandbox(&self, pod: &Pod) -> Result<SandboxInfo, RuntimeError> {
        crate::tp!("sb.start");
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
        // The pod's cgroup before the warm-up: a cgroup mkdir waits for the cgroup lock, which
        // the warm-up's move holds for the whole grace period it waits for (~7 ms measured
        // here after idle: the mkdir then took 6 ms instead of 0.2). The namespaces, the
        // spec and the container's creation up to its placement then run inside that wait.
        let pod_cgroup = {
            let cgroup_path =
                self.cfg
                    .cgroup_driver
                    .pod_cgroup(&self.cfg.cgroup_parent, cg.qos, &uid);
            let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
            let existed = self.cfg.cgroup_root.dir("cpu", &cgroup_path).is_dir();
            let made = self.create_pod_cgroup(&uid, &cg)?;
            crate::tp!("sb.cgroup");
            (made, existed)
        };
        // The pod's first container is placed in its cgroup in a few ms.
        self.warmer.warm();
        let user_ns_base = if pod.spec.as_ref().and_then(|s| s.host_users) == Some(false) {
            let mapping = self
                .userns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_create(&uid)
                .map_err(|source| RuntimeError::Sandbox {
                    pod: name.clone(),
                    source: Box::new(source.into()),
                })?;
            Some(mapping.base())
        } else {
            None
        };
        let exec_helper = sandbox::ExecHelper(&self.cfg.shim_binary);
        let helper: &dyn sandbox::NamespaceHelper = match self.cfg.helpers {
            HelperMode::Spawner => &self.spawner,
            HelperMode::Exec => &exec_helper,
        };
        let created = sandbox::create(
            &self.cfg.sandbox_dirs(),
            pod,
            &sandbox::CreateOptions {
                node: &self.cfg.node,
                dns: &self.cfg.dns,
                helper,
                user_ns_base,
                network: Some(&self.network),
                join_network: self.network_on,
            },
        );
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        let (pod_cgroup, existed) = pod_cgroup;
        let info = match created {
            Ok(info) => {
                crate::tp!("sb.created");
                info
            }
            Err(source) => {
                // A failed sandbox leaves no pod cgroup it made (nothing else would remove
                // it if the pod went away).
                if !existed {
                    if let Err(e) = self.remove_pod_cgroup(&uid) {
                        log::warn!("pod {name}: {e}");
                    }
                }
                return Err(RuntimeError::Sandbox {
                    pod: name.clone(),
                    source: Box::new(source),
                });
            }
        };
        // The shared PID namespace's init lives in the pod cgroup, as the pause container.
        let sb_paths = SandboxPaths::new(&self.cfg.sandbox_dirs(), &uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: name.clone(),
                source: Box::new(source),
            }
        })?;
        if let Some(init) = sandbox::load_pod_init(&sb_paths).filter(|i| i.is_alive()) {
            self.cfg
                .cgroup_root
                .add_process(&format!("{pod_cgroup}/pod-init"), init.pid)?;
        }
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
        crate::tp!("sb.cgrec");
        self.update_burstable_tier()?;
        crate::tp!("sb.burst");
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
        // The pod init (shareProcessNamespace) lives in the pod cgroup: it goes first.
        sandbox::stop_pod_init(&self.cfg.sandbox_dirs(), pod_uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: pod_uid.to_string(),
                source: Box::new(source),
            }
        })?;
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        // All three QoS places are probed: the pod's class is not needed to find it.
        self.remove_pod_cgroup(pod_uid)?;
        sandbox::remove(&self.cfg.sandbox_dirs(), pod_uid, Some(&self.network)).map_err(
            |source| RuntimeError::Sandbox {
                pod: pod_uid.to_string(),
                source: Box::new(source),
            },
        )?;
        // The pod's files are gone: its user namespace range may go to another pod.
        self.userns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release(pod_uid);
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
        let live = self.check_networks(scan.live);
        self.collect_network_attachments(&live);
        Ok(live)
    }

    fn update_pod_volumes(&self, pod: &Pod) -> Result<(), RuntimeError> {
        sandbox::refresh_projected_volumes(&self.cfg.sandbox_dirs(), pod, &self.cfg.node).map_err(
            |source| RuntimeError::Sandbox {
                pod: pod.metadata.name.clone().unwrap_or_default(),
                source: Box::new(source),
            },
        )
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
        crate::tp!("st.start");
        let uid = req.pod.metadata.uid.clone().unwrap_or_default();
        sandbox::validate_uid(&uid).map_err(|source| RuntimeError::Sandbox {
            pod: req.pod.metadata.name.clone().unwrap_or_default(),
            source: Box::new(source),
        })?;
        self.warmer.warm();
        let id = new_container_id(&uid, &req.container.name, req.restart_count);
        let paths = self.container_paths(&id)?;
        // Until its start is reported the container is incomplete: listings leave it alone.
        let _busy = self.busy_containers.enter(&id);
        self.make_container_dirs(req, &paths)?;
        crate::tp!("st.dirs");
        let prepared = self.resolve_image(req).and_then(|image| {
            let (meta, _) = self.prepare(req, &id, &paths, &image, false)?;
            crate::tp!("st.prepared");
            self.add_lease(&id, &image)?;
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
        crate::tp!("st.leased");
        let r = self.spawn_monitor(&meta, &paths);
        crate::tp!("st.reported");
        r
    }

    fn run_pod_sandbox_and_start(
        &self,
        pod: &Pod,
        first: &ContainerRequest<'_>,
        sandbox_done: &mut dyn FnMut(&Result<SandboxInfo, RuntimeError>),
    ) -> Option<Result<ContainerInfo, RuntimeError>> {
        self.sandbox_and_first_start(pod, first, sandbox_done)
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
        // Another thread is removing it (a pod's removal and container GC): that one
        // finishes it.
        let Some(_busy) = self.busy_containers.try_enter(id) else {
            return Ok(());
        };
        if !paths.record.exists() && !paths.dir.exists() {
            return Ok(());
        }
        // A monitor that recorded the exit is still taking the container apart: wait for it.
        let finishing = paths.exit().exists();
        if shim::monitor_alive(&paths)
            && !(finishing && self.wait_monitor_done(&paths, MONITOR_FINISH_WAIT))
        {
            return Err(RuntimeError::Start {
                id: id.to_string(),
                message: if finishing {
                    format!(
                        "exited, but its monitor is still removing it after {}s",
                        MONITOR_FINISH_WAIT.as_secs()
                    )
                } else {
                    "still running; stop it before removing it".into()
                },
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
        // Its runtime directory goes with the container's end, after its exit record: once the
        // exit is recorded (and reported), the monitor may be taking the rest apart.
        if paths.exit().exists() || !paths.shim_config().exists() {
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
