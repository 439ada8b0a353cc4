//! network: pod networking through CNI, the kubelet's network plugin and containerd's CNI
//! manager in one: which network a pod joins (the lexically first configuration of the CNI
//! directory, or the default podvisor writes there when it has none: [`default_conf`]), the
//! attachment of a sandbox's pinned network namespace to it (ADD), its removal (DEL), CHECK
//! of re-adopted sandboxes, STATUS before an ADD, and GC of attachments nobody owns.
//!
//! Owns `<root-dir>/network/` (durable attachment records, [`attachments`]; the default
//! network's host-local allocations under `ipam/`) and `<runtime-dir>/network/` (a lock file
//! per attachment). The plugins are executed from the caller's thread (an executor worker of
//! the daemon, or the start-up listing); libcontainer is never involved.
//!
//! Crash safety: the record is durable before the first plugin runs and goes only after a
//! DEL succeeded; each plugin's result is recorded as it arrives (beside the sandbox, per
//! boot), so a DEL after a crash gets the latest `prevResult`; every plugin inherits the
//! attachment's lock file, so a daemon restarted after a SIGKILL waits for the plugins the
//! old one left running before it DELs their attachment. A DEL runs while the namespace is
//! still pinned (the bridge plugin finds the container's addresses there to remove its
//! masquerade rule); after a reboot the namespace is gone and the DEL releases what outlives
//! a boot (host-local's files).
//!
//! Submodules: [`cni`] (the CNI runtime), [`hostport`] (the NodePorts admission check),
//! [`default_conf`], [`attachments`]; CNI_ARGS and the capability arguments of a pod are
//! [`crate::pod::netargs`] (validation checks the annotations with the same code).

pub mod attachments;
pub mod cni;
pub mod default_conf;
pub mod hostport;

use std::fs::{self, File, OpenOptions};
use std::io;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde_json::Value;

use crate::pod::netargs::{self as capabilities, CapabilityError, DnsArgs};
use attachments::{AttachmentRecord, AttachmentStore, ResultRecord};
use cni::conf::ConfError;
use cni::{Attachment, Cni, CniError, NetworkList};
pub use default_conf::DefaultNetwork;

/// Default `--cni-conf-dir`.
pub const DEFAULT_CONF_DIR: &str = "/etc/cni/net.d";
/// Default `--cni-bin-dir` (Debian's containernetworking-plugins, then the upstream place).
pub const DEFAULT_BIN_DIRS: &[&str] = &["/usr/lib/cni", "/opt/cni/bin"];
/// Default `--cni-plugin-timeout`.
pub const DEFAULT_PLUGIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The pod's interface (the kubelet's and containerd's).
pub const IFNAME: &str = "eth0";

/// How pods are networked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkConfig {
    /// Where CNI configurations are read (and the default one written).
    pub conf_dir: PathBuf,
    /// Where plugin binaries are looked up, in order (CNI_PATH).
    pub bin_dirs: Vec<PathBuf>,
    /// How long one plugin call may take before it is killed.
    pub plugin_timeout: Duration,
    /// The network written when `conf_dir` has none.
    pub default_network: DefaultNetwork,
}

impl NetworkConfig {
    /// The defaults, with `root_dir`'s IPAM directory.
    pub fn new(root_dir: &Path) -> NetworkConfig {
        NetworkConfig {
            conf_dir: PathBuf::from(DEFAULT_CONF_DIR),
            bin_dirs: DEFAULT_BIN_DIRS.iter().map(PathBuf::from).collect(),
            plugin_timeout: DEFAULT_PLUGIN_TIMEOUT,
            default_network: DefaultNetwork::new(root_dir),
        }
    }
}

/// Errors of pod networking; each names the configuration file, plugin or record.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("CNI configuration {0}")]
    Conf(#[from] ConfError),
    #[error("cannot write the default CNI configuration into {dir}: {source}")]
    DefaultConf { dir: PathBuf, source: io::Error },
    #[error(transparent)]
    Cni(#[from] CniError),
    #[error(transparent)]
    Capability(#[from] CapabilityError),
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("network {network:?} ({file}): the result has no IP address for {ifname}")]
    NoAddress {
        network: String,
        file: PathBuf,
        ifname: String,
    },
    #[error("{error}; undoing it failed too (retried later): {cleanup}")]
    Cleanup {
        error: Box<NetworkError>,
        cleanup: Box<NetworkError>,
    },
    #[error("attachment {id}: no recorded result to CHECK against")]
    NoResult { id: String },
    /// A chained plugin's CHECK failed (port mappings, firewall rules, shaping): the pod's
    /// interface and addresses are there, a feature may not be.
    #[error("{0}")]
    Degraded(CniError),
}

/// What a pod got from its network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodNetworkStatus {
    /// The sandbox ID (CNI_CONTAINERID).
    pub id: String,
    pub network: String,
    /// The pod's IPs, IPv4 first.
    pub ips: Vec<IpAddr>,
}

/// What setting a pod up needs.
pub struct SetupRequest<'a> {
    pub pod: &'a Pod,
    /// The pod's pinned network namespace.
    pub netns: &'a Path,
    /// Where the latest result is kept (beside the sandbox, per boot).
    pub result_path: &'a Path,
    /// The pod's resolver settings (the `dns` capability).
    pub dns: DnsArgs,
}

/// The pod network manager of one runtime.
pub struct PodNetwork {
    cfg: NetworkConfig,
    cni: Cni,
    store: AttachmentStore,
    locks: PathBuf,
    boot_id: String,
}

/// containerd's loopback network, run for `lo` beside the pod's network.
const LOOPBACK_CONF: &str =
    r#"{"cniVersion": "1.0.0", "name": "cni-loopback", "plugins": [{"type": "loopback"}]}"#;

impl PodNetwork {
    /// The manager for `cfg`, its records under `root_dir`, its locks under `run_dir`.
    pub fn new(cfg: NetworkConfig, root_dir: &Path, run_dir: &Path, boot_id: &str) -> PodNetwork {
        PodNetwork {
            cni: Cni {
                bin_dirs: cfg.bin_dirs.clone(),
                timeout: cfg.plugin_timeout,
            },
            cfg,
            store: AttachmentStore::new(root_dir.join("network").join("attachments")),
            locks: run_dir.join("network"),
            boot_id: boot_id.to_string(),
        }
    }

    pub fn config(&self) -> &NetworkConfig {
        &self.cfg
    }

    pub fn store(&self) -> &AttachmentStore {
        &self.store
    }

    /// At start: leftovers of interrupted record writes removed, the default configuration
    /// written when there is none, and what the chosen network lacks logged (a missing plugin
    /// binary, a plugin that does not speak the list's version).
    pub fn prepare(&self) {
        let n = self.store.remove_temps();
        if n > 0 {
            log::info!(
                "{}: removed {n} leftover(s) of interrupted writes",
                self.store.dir().display()
            );
        }
        let list = match self.load() {
            Ok(l) => l,
            Err(e) => {
                log::warn!("pod network: {e}");
                return;
            }
        };
        if let Some(e) = self.cni.missing_plugin(&list) {
            log::warn!("pod network: {e}: pods without hostNetwork will not start");
            return;
        }
        for p in &list.plugins {
            match self.cni.versions(&list, p) {
                Ok(v) if !v.contains(&list.cni_version) => log::warn!(
                    "pod network {:?} ({}): plugin {:?} does not support cniVersion {} (it supports {})",
                    list.name,
                    list.path.display(),
                    p.plugin_type,
                    list.cni_version,
                    v.join(", ")
                ),
                Ok(_) => {}
                Err(e) => log::warn!("pod network: {e}"),
            }
        }
        log::info!(
            "pod network {:?} from {} ({} plugins, cniVersion {})",
            list.name,
            list.path.display(),
            list.plugins.len(),
            list.cni_version
        );
    }

    /// The network pods join now: the lexically first configuration, the default one
    /// written first when there is none.
    pub fn load(&self) -> Result<NetworkList, NetworkError> {
        if let Some(l) = cni::conf::load_first(&self.cfg.conf_dir)? {
            return Ok(l);
        }
        let path = self
            .cfg
            .default_network
            .write(&self.cfg.conf_dir)
            .map_err(|source| NetworkError::DefaultConf {
                dir: self.cfg.conf_dir.clone(),
                source,
            })?;
        log::info!(
            "{} had no CNI configuration: wrote the default network to {}",
            self.cfg.conf_dir.display(),
            path.display()
        );
        Ok(cni::conf::load_file(&path)?)
    }

    fn loopback_available(&self) -> bool {
        cni::exec::find_plugin(&self.cfg.bin_dirs, "loopback").is_some()
    }

    /// Attaches the pod's network namespace: the record first (durably), then ADD of the
    /// loopback network and of the pod's network, side by side. A failed ADD is undone with
    /// a DEL (the record stays when that fails too, for a later attempt).
    pub fn setup(&self, req: &SetupRequest<'_>) -> Result<PodNetworkStatus, NetworkError> {
        let list = self.load()?;
        // Nothing is done for a list that cannot work: the error names the missing binary.
        if let Some(e) = self.cni.missing_plugin(&list) {
            return Err(e.into());
        }
        self.cni.status(&list)?;
        let capability_args = capabilities::capability_args(req.pod, &req.dns)?;
        let uid = req.pod.metadata.uid.clone().unwrap_or_default();
        let id = new_sandbox_id(&uid, &self.boot_id);
        let rec = AttachmentRecord {
            id: id.clone(),
            pod_uid: uid,
            pod_namespace: req
                .pod
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            pod_name: req.pod.metadata.name.clone().unwrap_or_default(),
            boot_id: self.boot_id.clone(),
            netns: req.netns.to_path_buf(),
            ifname: IFNAME.to_string(),
            args: capabilities::cni_args(req.pod, &id),
            capability_args,
            conf_file: list.path.clone(),
            conf: list.bytes.clone(),
            loopback: self.loopback_available(),
            created_at: crate::logs::timestamp::now_rfc3339(),
        };
        self.store.save(&rec).map_err(|source| NetworkError::Io {
            path: self.store.dir().join(format!("{id}.json")),
            source,
        })?;
        let lock = self.lock(&id)?;
        let fd = lock.as_raw_fd();
        let att = Attachment {
            container_id: &id,
            netns: req.netns,
            ifname: IFNAME,
            args: &rec.args,
            capability_args: &rec.capability_args,
        };
        let record_progress = |r: &Value, complete: bool| {
            let rr = ResultRecord {
                id: id.clone(),
                result: r.clone(),
                complete,
            };
            if let Err(e) = attachments::save_result(req.result_path, &rr) {
                log::warn!("{}: {e}", req.result_path.display());
            }
        };
        let t0 = Instant::now();
        let mut took: Vec<String> = Vec::with_capacity(list.plugins.len());
        let (lo, added) = std::thread::scope(|s| {
            let lo = rec.loopback.then(|| {
                s.spawn(|| {
                    let lo_list = loopback_list();
                    let lo_att = Attachment {
                        ifname: "lo",
                        ..att
                    };
                    let t0 = Instant::now();
                    self.cni
                        .add(&lo_list, &lo_att, Some(fd), |_, _, _| {})
                        .map(|_| t0.elapsed())
                })
            });
            let added = self.cni.add(&list, &att, Some(fd), |p, r, d| {
                record_progress(r, false);
                took.push(format!("{} {}", p.plugin_type, ms(d)));
            });
            let lo = lo.map(|h| h.join());
            (lo, added)
        });
        let lo_took = match &lo {
            Some(Ok(Ok(d))) => format!("; loopback {} beside", ms(*d)),
            _ => String::new(),
        };
        let outcome = added.map_err(NetworkError::from).and_then(|result| {
            record_progress(&result, true);
            match lo {
                Some(Ok(Err(e))) => return Err(e.into()),
                Some(Err(_)) => log::warn!("pod {}: the loopback ADD panicked", rec.pod_name),
                _ => {}
            }
            let ips = cni::result::pod_ips(&result, IFNAME);
            // Where a pod start's time goes (the plugins' own work dominates: iptables).
            log::info!(
                "pod {}/{}: network {:?} ADD in {} ({}{lo_took})",
                rec.pod_namespace,
                rec.pod_name,
                list.name,
                ms(t0.elapsed()),
                took.join(", ")
            );
            if ips.is_empty() {
                return Err(NetworkError::NoAddress {
                    network: list.name.clone(),
                    file: list.path.clone(),
                    ifname: IFNAME.into(),
                });
            }
            Ok(ips)
        });
        drop(lock);
        match outcome {
            Ok(ips) => Ok(PodNetworkStatus {
                id,
                network: list.name,
                ips,
            }),
            Err(error) => match self.del(&rec, Some(req.result_path)) {
                Ok(()) => Err(error),
                Err(cleanup) => Err(NetworkError::Cleanup {
                    error: Box::new(error),
                    cleanup: Box::new(cleanup),
                }),
            },
        }
    }

    /// DEL of every attachment of pod `uid` (of any boot), each with its recorded
    /// configuration; records go once their DEL succeeded. `result_path` is where the
    /// current boot's result is kept.
    pub fn teardown_pod(&self, uid: &str, result_path: &Path) -> Result<(), NetworkError> {
        let recs = self.store.for_pod(uid).map_err(|source| NetworkError::Io {
            path: self.store.dir().to_path_buf(),
            source,
        })?;
        for r in recs {
            self.del(&r, Some(result_path))?;
        }
        Ok(())
    }

    /// DEL of one attachment, then its record and result removed.
    fn del(&self, r: &AttachmentRecord, result_path: Option<&Path>) -> Result<(), NetworkError> {
        let is_list = r.conf_file.extension().is_some_and(|e| e == "conflist");
        let list = cni::conf::parse(&r.conf, &r.conf_file, is_list)?;
        let same_boot = r.boot_id == self.boot_id;
        let netns_live = same_boot && is_nsfs(&r.netns);
        let prev = result_path
            .filter(|_| same_boot)
            .and_then(attachments::load_result)
            .filter(|x| x.id == r.id)
            .map(|x| x.result);
        let empty = PathBuf::new();
        let att = Attachment {
            container_id: &r.id,
            netns: if netns_live { &r.netns } else { &empty },
            ifname: &r.ifname,
            args: &r.args,
            capability_args: &r.capability_args,
        };
        let lock = self.lock(&r.id)?;
        let fd = Some(lock.as_raw_fd());
        if r.loopback && netns_live {
            let lo_att = Attachment {
                ifname: "lo",
                ..att
            };
            if let Err(e) = self.cni.del(&loopback_list(), &lo_att, None, fd) {
                log::warn!("pod {}/{}: {e}", r.pod_namespace, r.pod_name);
            }
        }
        self.cni.del(&list, &att, prev.as_ref(), fd)?;
        self.store
            .remove(&r.id)
            .map_err(|source| NetworkError::Io {
                path: self.store.dir().join(format!("{}.json", r.id)),
                source,
            })?;
        if let Some(p) = result_path {
            if attachments::load_result(p).is_some_and(|x| x.id == r.id) {
                let _ = fs::remove_file(p);
            }
        }
        drop(lock);
        let _ = fs::remove_file(self.locks.join(format!("{}.lock", r.id)));
        Ok(())
    }

    /// CHECK of attachment `id` against its recorded result (a re-adopted sandbox); Ok when
    /// the network's version or configuration does not allow CHECK. A failure of the first
    /// plugin (the one that made the interface) is an error; of a chained one,
    /// [`NetworkError::Degraded`].
    pub fn check(&self, id: &str, result_path: &Path) -> Result<(), NetworkError> {
        let Some(r) = self
            .store
            .list()
            .map_err(|source| NetworkError::Io {
                path: self.store.dir().to_path_buf(),
                source,
            })?
            .into_iter()
            .find(|r| r.id == id)
        else {
            return Err(NetworkError::NoResult { id: id.to_string() });
        };
        let is_list = r.conf_file.extension().is_some_and(|e| e == "conflist");
        let list = cni::conf::parse(&r.conf, &r.conf_file, is_list)?;
        if !Cni::can_check(&list) {
            return Ok(());
        }
        let prev = attachments::load_result(result_path)
            .filter(|x| x.id == r.id && x.complete)
            .ok_or_else(|| NetworkError::NoResult { id: id.to_string() })?;
        let att = Attachment {
            container_id: &r.id,
            netns: &r.netns,
            ifname: &r.ifname,
            args: &r.args,
            capability_args: &r.capability_args,
        };
        let lock = self.lock(&r.id)?;
        match self
            .cni
            .check(&list, &att, &prev.result, Some(lock.as_raw_fd()))
        {
            Ok(()) => Ok(()),
            // The first plugin made the interface and its addresses.
            Err((0, e)) => Err(e.into()),
            Err((_, e)) => Err(NetworkError::Degraded(e)),
        }
    }

    /// The GC pass at start: DEL of every attachment whose sandbox is not live (`keep` says
    /// which ones are: live sandboxes, or being created or removed right now), with
    /// `result_path` for its pod's result; then the GC verb (1.1 networks) with the kept
    /// attachments as the valid ones. Returns how many attachments were released.
    pub fn collect(
        &self,
        keep: impl Fn(&AttachmentRecord) -> bool,
        result_path: impl Fn(&AttachmentRecord) -> PathBuf,
        gc_verb: bool,
    ) -> usize {
        let recs = match self.store.list() {
            Ok(r) => r,
            Err(e) => {
                log::warn!("{}: {e}", self.store.dir().display());
                return 0;
            }
        };
        let mut released = 0;
        let mut valid = Vec::new();
        for r in recs {
            if keep(&r) {
                valid.push((r.id.clone(), r.ifname.clone()));
                continue;
            }
            let why = if r.boot_id == self.boot_id {
                "its sandbox is gone"
            } else {
                "it belongs to an earlier boot"
            };
            match self.del(&r, Some(&result_path(&r))) {
                Ok(()) => {
                    released += 1;
                    log::info!(
                        "pod {}/{} (uid {}): released network attachment {} ({why})",
                        r.pod_namespace,
                        r.pod_name,
                        r.pod_uid,
                        r.id
                    );
                }
                Err(e) => log::warn!(
                    "pod {}/{} (uid {}): network attachment {} ({why}) not released, retried at the next start: {e}",
                    r.pod_namespace,
                    r.pod_name,
                    r.pod_uid,
                    r.id
                ),
            }
        }
        // The network pods join now (never written here): its plugins release what no
        // attachment of this node holds. Not with networking off (the directory may be
        // another runtime's).
        if gc_verb {
            if let Ok(Some(list)) = cni::conf::load_first(&self.cfg.conf_dir) {
                if Cni::can_gc(&list) {
                    if let Err(e) = self.cni.gc(&list, &valid) {
                        log::warn!("pod network GC: {e}");
                    }
                }
            }
        }
        released
    }

    /// The lock of attachment `id`, held (and inherited by its plugins) while it is worked
    /// on. Waits for plugins a killed daemon left running, at most twice the plugin timeout.
    fn lock(&self, id: &str) -> Result<File, NetworkError> {
        let path = self.locks.join(format!("{id}.lock"));
        let io = |source| NetworkError::Io {
            path: path.clone(),
            source,
        };
        fs::create_dir_all(&self.locks).map_err(io)?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        let deadline = Instant::now() + self.cfg.plugin_timeout * 2;
        loop {
            if crate::sys::lock::try_lock_exclusive(&f).map_err(io)? {
                return Ok(f);
            }
            if Instant::now() >= deadline {
                log::warn!(
                    "{}: still held by a plugin of an earlier run after {:?}: going on",
                    path.display(),
                    self.cfg.plugin_timeout * 2
                );
                return Ok(f);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A duration in milliseconds, for a log line.
fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn loopback_list() -> NetworkList {
    // A constant that parses.
    cni::conf::parse(LOOPBACK_CONF, Path::new("(loopback)"), true)
        .unwrap_or_else(|_| unreachable!("the loopback configuration is a constant"))
}

/// A new sandbox ID: 64 hex characters (as containerd's), unique per pod, boot and moment.
pub fn new_sandbox_id(uid: &str, boot_id: &str) -> String {
    use sha2::{Digest, Sha256};
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let mut h = Sha256::new();
    h.update(uid.as_bytes());
    h.update(boot_id.as_bytes());
    h.update(now.to_le_bytes());
    h.update(std::process::id().to_le_bytes());
    h.update(SEQ.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    hex::encode(h.finalize())
}

/// Whether `path` is a live namespace file (an nsfs mount).
pub fn is_nsfs(path: &Path) -> bool {
    const NSFS_MAGIC: i64 = 0x6e73_6673;
    // The type is a c_long on 64-bit and a c_int on 32-bit targets (armhf): widened there.
    #[allow(clippy::useless_conversion)]
    rustix::fs::statfs(path).is_ok_and(|s| i64::from(s.f_type) == NSFS_MAGIC)
}

#[cfg(test)]
mod tests;
