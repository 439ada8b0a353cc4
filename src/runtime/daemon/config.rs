//! The real runtime's settings ([`RuntimeConfig`]: directories, cgroups, logs, node facts,
//! confinement, DNS, user namespaces, network, how helpers are made) and the directories it
//! derives from them.

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::detect_node_info;
use crate::cgroups::{self, CgroupRoot};
use crate::runtime::dns::DnsSettings;
use crate::runtime::rundir;
use crate::runtime::sandbox::SandboxDirs;
use crate::runtime::spec::NodeInfo;
use crate::security::apparmor::AppArmorHost;
use crate::security::NodeSecurity;

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
    pub user_ns_range: crate::runtime::userns::IdRange,
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
    /// Forked without exec by the runtime's spawner ([`crate::runtime::spawner`]).
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
            user_ns_range: crate::runtime::userns::read_id_range(
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
pub(super) fn spread_churned_dirs(cfg: &RuntimeConfig) {
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
