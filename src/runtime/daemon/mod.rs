//! daemon: what the runtime runs in the daemon (multi-threaded). [`LinuxRuntime`], the real
//! [`Runtime`]: containers through per-container monitor processes ([`super::monitor`]), forked
//! by the spawner ([`super::spawner`]); sandboxes through [`super::sandbox`].
//!
//! Owns the container directories (runtime part `<runtime-dir>/containers/<id>/`, records
//! `<root-dir>/containers/<id>/`) and one thread, the exit watcher, which waits on the pidfds of
//! every monitor with epoll, and with inotify for the exit records their monitors write, and
//! turns each exit into a [`RuntimeEvent::ContainerExited`] (reading the `exit.json` the
//! monitor wrote). The daemon's threads never call libcontainer: they have the spawner
//! fork monitors and send signals through pidfds. At start it makes the runtime dir this
//! boot's ([`super::rundir`]); containers of an earlier boot are reported exited with
//! containerd's unknown status (255, `Unknown`), their records and logs kept, everything else
//! of them removed.
//!
//! One file per verb, as youki's `libcontainer/src/container/`; the [`Runtime`] impl below
//! only hands each call to its file:
//! - `start` (preparing a container: directories, image, spec, monitor config), `launch`
//!   (spawning its monitor and reading its start report), `staged` (a pod's first
//!   container prepared while its sandbox is made), `signal`, `remove`, `list` (a
//!   container's two directories and what a listing finds in them: complete, interrupted,
//!   monitor dead, lost with an earlier boot), `exec` (the caller of `shim exec`);
//! - `pod_sandbox` (create, remove, list pod sandboxes), `pod_cgroups` (pod cgroup records and
//!   the Burstable tier's weight), `network` (CHECK and GC of pod network attachments);
//! - `config` (the runtime's settings and directories), `node` (node facts for specs),
//!   `watcher` (the exit watcher thread).

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use super::rundir;
use super::userns::UsernsManager;
use super::{
    ContainerInfo, ContainerRequest, ExecOutput, Runtime, RuntimeError, RuntimeEvent, SandboxInfo,
};
use crate::cgroups;
use crate::images::ImageStore;
use crate::network::PodNetwork;
use spawner::Spawner;

mod config;
mod exec;
mod launch;
mod list;
mod network;
mod node;
mod pod_cgroups;
mod pod_sandbox;
mod remove;
mod signal;
pub mod spawner;
mod staged;
mod start;
mod watcher;

use config::spread_churned_dirs;
pub use config::{HelperMode, RuntimeConfig, EXEC_HELPERS_ENV};
use launch::run_cleanup;
pub use node::detect_node_info;

use list::remove_orphan_runtime_dirs;
pub use list::UNKNOWN_EXIT_CODE;
use watcher::ExitWatcher;

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
        self.create_sandbox(pod)
    }

    fn remove_pod_sandbox(&self, pod_uid: &str) -> Result<(), RuntimeError> {
        self.remove_sandbox(pod_uid)
    }

    fn list_pod_sandboxes(&self) -> Result<Vec<SandboxInfo>, RuntimeError> {
        self.list_sandboxes()
    }

    fn update_pod_volumes(&self, pod: &Pod) -> Result<(), RuntimeError> {
        self.refresh_volumes(pod)
    }

    fn list_pod_data(&self) -> Result<Vec<String>, RuntimeError> {
        self.list_data()
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
        self.network_namespace(pod_uid)
    }

    fn start_container(&self, req: &ContainerRequest<'_>) -> Result<ContainerInfo, RuntimeError> {
        self.start(req)
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
        self.signal(id, signal)
    }

    fn remove_container(&self, id: &str) -> Result<(), RuntimeError> {
        self.remove(id)
    }

    fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        self.list()
    }

    fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        self.exec(id, cmd, timeout)
    }
}
