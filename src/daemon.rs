//! daemon: `podvisor run`, the supervisor users install. Wires the managers together and owns
//! no pod state itself.
//!
//! Threads: the main thread runs the sync loop (the only owner of pod state); the file source
//! and URL source threads; the runtime's exit watcher; a pool of workers for slow runtime work;
//! the API server; the node API's ports (healthz, the authenticated HTTPS server:
//! [`crate::nodeapi`]); the prober thread (one timer heap for every probe) with its pool of four
//! probe workers; the image GC thread; the container GC thread ([`crate::gc`], asked for a
//! pass at every resync, `syncFrequency`); a signal thread; and two small forwarders that
//! wrap source and runtime events into sync-loop events. The runtime, workers, prober and loop are started by
//! [`crate::sync::engine`], as for `podvisor play`. SIGTERM/SIGINT end the daemon and leave
//! every container running under its monitor: the next daemon re-adopts them.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, SystemTime};

use nix::sys::signal::{SigSet, Signal};

use crate::api;
use crate::config::{DaemonConfig, RunFlags};
use crate::images::{ImageGcPolicy, ImageStore, PinnedImages, Statvfs};
use crate::runtime::daemon::RuntimeConfig;
use crate::security::apparmor::{AppArmorHost, DefaultProfile};
use crate::security::NodeSecurity;
use crate::sources::{self, FileSourceConfig, SourceEvent, UrlSourceConfig};
use crate::status::SnapshotCell;
use crate::sync::engine::{self, Engine, StoreImageService};
use crate::sync::{SyncConfig, SyncEvent};

/// Errors that stop the daemon from starting.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    #[error("image store: {0}")]
    Images(#[from] crate::images::ImageError),
    #[error(transparent)]
    Engine(#[from] crate::sync::engine::EngineError),
    #[error("sources: {0}")]
    Sources(#[from] crate::sources::SourceError),
    #[error("api: {0}")]
    Api(#[from] crate::api::ApiError),
    #[error("node api: {0}")]
    NodeApi(#[from] crate::nodeapi::NodeApiError),
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("signal setup: {0}")]
    Signals(nix::Error),
    #[error("{0}")]
    Kernel(#[from] crate::kernel::KernelError),
    #[error("api server: {0}")]
    ApiServer(#[from] crate::apiserver::ApiServerError),
}

/// Settings that come from the global command line rather than the KubeletConfiguration.
#[derive(Debug, Clone)]
pub struct DaemonPaths {
    pub root_dir: std::path::PathBuf,
    /// `--runtime-dir`: per-boot state (tmpfs).
    pub run_dir: std::path::PathBuf,
    /// `--boot-id-file`: where the boot ID is read (tests change it to simulate a reboot).
    pub boot_id_file: std::path::PathBuf,
    /// `--log-dir`: overrides podLogsDir.
    pub log_dir: Option<std::path::PathBuf>,
    /// `--cgroup-parent`: overrides cgroupRoot.
    pub cgroup_parent: Option<String>,
}

/// Test hook: a file whose appearance wedges the sync loop (tests of the systemd watchdog).
pub const TEST_WEDGE_ENV: &str = "PODVISOR_TEST_WEDGE_FILE";
/// Test hook: a directory with `proc/` (meminfo, loadavg, sys/kernel/pid_max) and `cgroup/`
/// (a v2 root `memory.stat`) the eviction manager reads the memory and pid signals from
/// instead of the host's, so tests can put the node under memory pressure safely.
pub const TEST_NODE_SIGNALS_ENV: &str = "PODVISOR_TEST_NODE_SIGNALS";

/// Default `--registry-config` when that file exists.
const DEFAULT_REGISTRY_CONFIG: &str = "/etc/podvisor/registries.yaml";

/// How often image GC checks the image filesystem (the kubelet's ImageGCPeriod).
const IMAGE_GC_PERIOD: Duration = Duration::from_secs(300);

/// Starts the image GC thread: every [`IMAGE_GC_PERIOD`] it collects unused, unpinned images
/// when the image filesystem is above the high threshold. Images of every pod in the published
/// snapshot (running, pending or being removed) are pinned.
fn spawn_image_gc(
    store: Arc<ImageStore>,
    policy: ImageGcPolicy,
    snapshots: SnapshotCell,
    metrics: crate::metrics::KubeletMetrics,
) -> Result<thread::JoinHandle<()>, DaemonError> {
    thread::Builder::new()
        .name("image-gc".into())
        .spawn(move || {
            let mut last_shortfall = None;
            loop {
                thread::sleep(IMAGE_GC_PERIOD);
                let snap = snapshots.get();
                let pinned = PinnedImages::from_pods(snap.pods.iter().map(|v| &v.pod));
                match store.garbage_collect(&policy, &pinned, &Statvfs, SystemTime::now()) {
                    Ok(report) => {
                        metrics.record_images_collected(report.removed.len() as u64);
                        // Said once per change, not every period (flash storage).
                        if report.shortfall != last_shortfall {
                            if let Some(s) = &report.shortfall {
                                log::warn!("image GC: {s}");
                            }
                            last_shortfall = report.shortfall;
                        }
                    }
                    Err(e) => log::warn!("image GC: {e}"),
                }
            }
        })
        .map_err(|source| DaemonError::Io {
            what: "spawn image GC",
            source,
        })
}

/// Where the eviction manager measures.
struct EvictionPaths {
    root_dir: PathBuf,
    log_dir: PathBuf,
    cgroups: crate::cgroups::CgroupRoot,
    cgroup_parent: String,
    /// Where the pods' ephemeral storage is published for `/stats`.
    storage_usage: crate::status::StorageUsageCell,
    /// Where the reason for evicting nothing under pressure is published for `/node`.
    not_evicting: crate::status::NotEvictingCell,
}

/// Starts the eviction manager (and its memory notifier): signals from the host (or the
/// [`TEST_NODE_SIGNALS_ENV`] directory), pods from the published snapshot, node-level reclaim
/// through the container GC thread and the image store; its events go to the sync loop.
fn spawn_eviction_manager(
    cfg: &DaemonConfig,
    p: EvictionPaths,
    images: Arc<ImageStore>,
    snapshots: SnapshotCell,
    metrics: crate::metrics::KubeletMetrics,
    tx: mpsc::Sender<SyncEvent>,
) -> Result<(), DaemonError> {
    use crate::eviction::{manager, node, notifier, signals, Signal};
    let io = |source| DaemonError::Io {
        what: "spawn the eviction manager",
        source,
    };
    let (proc_dir, cgroup_dir) = match std::env::var_os(TEST_NODE_SIGNALS_ENV) {
        Some(d) => {
            let d = PathBuf::from(d);
            log::warn!(
                "{TEST_NODE_SIGNALS_ENV}={}: test hook: memory and pid signals are read from there",
                d.display()
            );
            (d.join("proc"), d.join("cgroup"))
        }
        None => (PathBuf::from("/proc"), p.cgroups.path().to_path_buf()),
    };
    let node_signals = signals::NodeSignals {
        proc_dir: proc_dir.clone(),
        cgroup_dir: cgroup_dir.clone(),
        nodefs: vec![p.root_dir.clone(), p.log_dir],
        imagefs: p.root_dir.join("images"),
    };
    let (wake_tx, wake_rx) = mpsc::sync_channel(1);
    // The notifier watches the highest memory.available threshold (soft ones are above the
    // hard one): crossing it is what the manager must see at once.
    let memory = cfg
        .eviction
        .thresholds
        .iter()
        .filter(|t| t.signal == Signal::MemoryAvailable)
        .map(|t| t.value)
        .max_by_key(|v| crate::eviction::threshold::resolve(*v, 1 << 40));
    match memory {
        Some(threshold) => {
            notifier::MemoryNotifier {
                proc_dir,
                cgroup_dir,
                threshold,
            }
            .spawn(wake_tx)
            .map_err(io)?;
        }
        None => drop(wake_tx),
    }
    manager::spawn(
        cfg.eviction.clone(),
        Box::new(node_signals),
        Box::new(node::SnapshotPods {
            snapshots: snapshots.clone(),
            cgroups: p.cgroups,
            parent: p.cgroup_parent,
            storage: Arc::new(crate::eviction::storage::LocalStorage::new(
                &p.root_dir,
                p.storage_usage,
            )),
            root_dir: p.root_dir,
        }),
        Box::new(node::NodeReclaim {
            images,
            snapshots,
            image_minimum_age: cfg.image_gc.minimum_age,
            metrics,
        }),
        wake_rx,
        Box::new(move |e| tx.send(SyncEvent::Eviction(e)).is_ok()),
        p.not_evicting,
    )
    .map_err(io)?;
    Ok(())
}

/// Runs the daemon until SIGTERM/SIGINT.
pub fn run(paths: &DaemonPaths, flags: &RunFlags) -> Result<(), DaemonError> {
    // First, while this is the only thread: the environment is read and cleaned here.
    let (notify_socket, watchdog) = crate::systemd::notify::take_from_env();
    limit_malloc_arenas();
    let wedge_file = std::env::var_os(TEST_WEDGE_ENV).map(PathBuf::from);
    // Before anything is created: an old kernel stops here with every missing feature named,
    // instead of failing later in the middle of a pod.
    let kernel = crate::kernel::verify()?;
    log::info!("kernel {}: every required feature present", kernel.release);
    let cfg: DaemonConfig = crate::config::load(flags, &paths.root_dir)?;
    if !cfg.unimplemented_fields.is_empty() {
        log::warn!(
            "KubeletConfiguration fields podvisor does not implement (ignored): {}",
            cfg.unimplemented_fields.join(", ")
        );
    }
    // A kubeconfig that cannot be used stops the start here, before any pod is touched.
    let kubeconfig = match &cfg.api_server {
        Some(a) => Some(crate::apiserver::load_kubeconfig(a, &cfg.node_name)?),
        None => None,
    };
    // Block the stop signals before any thread exists: every thread inherits the mask and one
    // thread waits for them. Monitors reset the mask before starting containers.
    let mut mask = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        mask.add(s);
    }
    mask.thread_block().map_err(DaemonError::Signals)?;

    let images = Arc::new(ImageStore::open(&paths.root_dir.join("images"))?);
    for r in images.import_preload()? {
        log::info!("preloaded image {} {}", r.reference, r.digest);
    }
    let log_dir = paths
        .log_dir
        .clone()
        .unwrap_or_else(|| cfg.pod_logs_dir.clone());
    let mut rcfg = RuntimeConfig::new(paths.root_dir.clone(), paths.run_dir.clone(), log_dir)
        .map_err(|source| DaemonError::Io {
            what: "locate the podvisor binary",
            source,
        })?;
    rcfg.boot_id_file = paths.boot_id_file.clone();
    if std::env::var_os(crate::runtime::daemon::EXEC_HELPERS_ENV).is_some_and(|v| v == "1") {
        log::warn!(
            "{}=1: test hook: a monitor and a sandbox helper are fork+exec'd each",
            crate::runtime::daemon::EXEC_HELPERS_ENV
        );
        rcfg.helpers = crate::runtime::daemon::HelperMode::Exec;
    }
    rcfg.cgroup_parent = paths
        .cgroup_parent
        .clone()
        .unwrap_or_else(|| cfg.cgroup_root.clone());
    rcfg.cgroup_driver = cfg.cgroup_driver;
    rcfg.pod_pids_limit = cfg.pod_pids_limit;
    rcfg.log_max_size = cfg.container_log_max_size;
    rcfg.log_max_files = cfg.container_log_max_files;
    rcfg.node.name = cfg.node_name.clone();
    rcfg.dns = crate::runtime::dns::DnsSettings {
        resolv_conf: cfg.resolv_conf.clone(),
        cluster_dns: cfg.cluster_dns.clone(),
        cluster_domain: cfg.cluster_domain.clone(),
    };
    rcfg.network = cfg.network.clone();
    let apparmor = AppArmorHost::detect_and_load();
    match &apparmor {
        AppArmorHost::Enabled {
            default_profile: DefaultProfile::Unavailable(_),
            ..
        } => log::warn!("{}", apparmor.describe()),
        _ => log::info!("{}", apparmor.describe()),
    }
    rcfg.security = NodeSecurity::for_host(
        &paths.root_dir,
        &cfg.allowed_unsafe_sysctls,
        cfg.seccomp_default,
        apparmor,
    );
    let security = rcfg.security.clone();
    // Where Localhost seccomp profiles go (root only; profiles must be root's and not
    // writable by others, see security::seccomp).
    if !security.seccomp_root.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&security.seccomp_root)
            .map_err(|source| DaemonError::Io {
                what: "create the seccomp profile directory",
                source,
            })?;
    }
    let host_ip = rcfg.node.host_ip.clone();
    let internal_ip = host_ip.clone();
    let allocatable = node_allocatable(&cfg);
    let ephemeral_storage = node_ephemeral_storage(&cfg, &paths.root_dir);
    let (stats_root, stats_parent) = (rcfg.cgroup_root.clone(), rcfg.cgroup_parent.clone());
    let rcfg_driver = rcfg.cgroup_driver;
    log_degraded_cgroup_features(&rcfg.cgroup_root);

    let registry_config = cfg.registry_config.clone().or_else(|| {
        let p = PathBuf::from(DEFAULT_REGISTRY_CONFIG);
        p.exists().then_some(p)
    });
    let image_service = StoreImageService {
        store: Arc::clone(&images),
        registry_config,
        docker_config: cfg.docker_config.clone(),
    };
    let snapshots = SnapshotCell::default();
    // The kubelet's counters: the sync loop, the prober and image GC record, the node API reads.
    let metrics = crate::metrics::KubeletMetrics::new();
    let log_root = rcfg.log_dir.clone();
    let eviction_log_dir = log_root.clone();
    let log_max_files = rcfg.log_max_files;
    let Engine {
        mut sync,
        tx,
        rx,
        runtime,
    } = engine::start(
        SyncConfig {
            node_name: cfg.node_name.clone(),
            expect_file_source: cfg.static_pod_path.is_some(),
            expect_url_source: cfg.static_pod_url.is_some(),
            sources_ready_timeout: Duration::from_secs(30),
            store_dir: paths.root_dir.join("static-pods"),
            host_ip,
            allocatable,
            allocatable_ephemeral_storage: ephemeral_storage.map(|(_, a)| a),
            hugepages_dir: Some(PathBuf::from("/sys/kernel/mm/hugepages")),
            security,
            only_pod: None,
            rollback_after: cfg.rollback_after,
            pod_network: rcfg.network.is_some(),
            metrics: metrics.clone(),
        },
        rcfg,
        image_service,
        snapshots.clone(),
    )?;
    let gc = crate::gc::spawn(
        runtime,
        crate::gc::GcSettings {
            policy: cfg.container_gc,
            log_root,
            log_max_files,
        },
    )
    .map_err(|source| DaemonError::Io {
        what: "spawn container GC",
        source,
    })?;
    sync.set_periodic_resync(cfg.sync_frequency, Some(gc));
    sync.set_housekeeping(idle_memory_release());
    match notify_socket {
        Ok(Some(socket)) => {
            if let Some(w) = watchdog {
                log::info!(
                    "systemd watchdog: {} s, pinged by the sync loop",
                    w.as_secs_f64()
                );
            }
            sync.set_service(crate::systemd::ServiceReporter::new(
                Box::new(socket),
                watchdog,
            ));
        }
        Ok(None) => {}
        Err(e) => log::warn!("NOTIFY_SOCKET: {e}: systemd is not told about readiness"),
    }
    if let Some(f) = wedge_file {
        log::warn!(
            "{TEST_WEDGE_ENV}={}: test hook armed, the sync loop wedges once that file exists",
            f.display()
        );
        sync.set_wedge_file(f);
    }

    let (src_tx, src_rx) = mpsc::channel::<SourceEvent>();
    let _src_forwarder = engine::forward("source-events", src_rx, tx.clone(), SyncEvent::Source)?;
    let mut handles = Vec::new();
    if let Some(dir) = &cfg.static_pod_path {
        log::info!("watching {}", dir.display());
        handles.push(sources::start_file_source(
            FileSourceConfig {
                dir: dir.clone(),
                check_frequency: cfg.file_check_frequency,
                debounce: Duration::from_millis(30),
            },
            src_tx.clone(),
        )?);
    }
    if let Some(url) = &cfg.static_pod_url {
        log::info!("polling {url}");
        handles.push(sources::start_url_source(
            UrlSourceConfig {
                url: url.clone(),
                headers: cfg.static_pod_url_header.clone(),
                check_frequency: cfg.http_check_frequency,
                timeout: Duration::from_secs(10),
                tls: cfg.static_pod_url_tls.clone(),
            },
            src_tx,
        )?);
    }
    spawn_image_gc(
        Arc::clone(&images),
        cfg.image_gc,
        snapshots.clone(),
        metrics.clone(),
    )?;
    let storage_usage = crate::status::StorageUsageCell::default();
    let not_evicting = crate::status::NotEvictingCell::default();
    spawn_eviction_manager(
        &cfg,
        EvictionPaths {
            root_dir: paths.root_dir.clone(),
            log_dir: eviction_log_dir,
            cgroups: stats_root.clone(),
            cgroup_parent: stats_parent.clone(),
            storage_usage: storage_usage.clone(),
            not_evicting: not_evicting.clone(),
        },
        Arc::clone(&images),
        snapshots.clone(),
        metrics.clone(),
        tx.clone(),
    )?;
    // The plain healthz port reads the sync loop's turnover, as the watchdog pings do.
    let healthz = match cfg.healthz {
        Some(addr) => Some(crate::nodeapi::serve_healthz(
            addr,
            crate::nodeapi::healthz::HealthChecks {
                monitor: sync.monitor(),
                deadline: crate::nodeapi::healthz::sync_loop_deadline(cfg.sync_frequency),
            },
        )?),
        None => None,
    };
    let node_source = api::node::NodeSource {
        capacity: crate::cgroups::allocatable::host_capacity().ok(),
        allocatable,
        ephemeral_storage,
        storage: storage_usage,
        eviction_policy: cfg.eviction.policy.to_string(),
        not_evicting,
        images_dir: Some(paths.root_dir.join("images")),
        api_server: crate::status::ApiServerCell::default(),
    };
    let stats = api::stats::StatsSource {
        root: stats_root,
        parent: stats_parent,
        driver: rcfg_driver,
        node: node_source.clone(),
    };
    let node_server = match &cfg.node_server {
        Some(ns) => {
            // Pushed pods reach the sync loop as typed events; the connection thread waits.
            let push_tx = tx.clone();
            let push: crate::sources::api::PushSink =
                Arc::new(move |r| push_tx.send(SyncEvent::ApiPod(r)).is_ok());
            Some(crate::nodeapi::serve_node_server(
                ns,
                &paths.root_dir,
                &cfg.node_name,
                crate::nodeapi::NodeSources {
                    snapshots: snapshots.clone(),
                    health: crate::nodeapi::healthz::HealthChecks {
                        monitor: sync.monitor(),
                        deadline: crate::nodeapi::healthz::sync_loop_deadline(cfg.sync_frequency),
                    },
                    stats: stats.clone(),
                    metrics: metrics.clone(),
                    push: Some(push),
                },
            )?)
        }
        None => None,
    };
    // The API server link (`--kubeconfig`): reads snapshots, owns no pod state.
    let api_link = match (&cfg.api_server, &kubeconfig) {
        (Some(a), Some(kc)) => Some(crate::apiserver::start(
            crate::apiserver::Context {
                cfg: a.clone(),
                node_name: cfg.node_name.clone(),
                facts: crate::apiserver::node::NodeFacts::gather(
                    &cfg.node_name,
                    &internal_ip,
                    cfg.node_server.as_ref().map_or(0, |n| n.addr.port()),
                ),
                node_source: node_source.clone(),
                snapshots: snapshots.clone(),
                monitor: sync.monitor(),
                monitor_deadline: crate::nodeapi::healthz::sync_loop_deadline(cfg.sync_frequency),
                events: tx.clone(),
            },
            kc,
            node_source.api_server.clone(),
        )?),
        _ => None,
    };
    let server = api::server::serve_with_stats(
        &cfg.api_socket,
        snapshots,
        api::server::Limits::default(),
        Some(stats),
    )?;
    log::info!(
        "podvisor running as node {}; API on {}",
        cfg.node_name,
        cfg.api_socket.display()
    );

    let sig_tx = tx.clone();
    thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Ok(sig) = mask.wait() {
                log::info!("received {sig}: exiting; containers keep running");
            }
            let _ = sig_tx.send(SyncEvent::Shutdown);
        })
        .map_err(|source| DaemonError::Io {
            what: "spawn signal thread",
            source,
        })?;
    drop(tx);
    sync.run(rx);
    drop(api_link);
    drop(node_server);
    drop(healthz);
    drop(server);
    drop(handles);
    Ok(())
}

/// At most two malloc arenas (glibc makes one per thread that allocates at the same time,
/// up to 8 per core, each a heap of its own): the daemon's threads mostly sleep, and every
/// arena keeps freed pages of its own. Must run before the first thread.
fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; called before any thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

/// The daemon's memory housekeeping, at every periodic resync (`syncFrequency`) on the sync
/// loop's thread (the main thread): freed heap back to the kernel, and the binary's code and
/// read-only data pages unmapped (mapped back by minor faults when used: what a minute of
/// running pods, probes and API requests uses stays mapped; start-up, configuration and rare
/// paths do not), and the main stack below the loop's depth. Planned here, on the main thread
/// once start-up is done, where the code is also cut into one-page mappings, so that only the
/// pages used come back (`sys::pages::IdleRelease`), and released a first time.
fn idle_memory_release() -> Box<dyn FnMut()> {
    let planned = match crate::sys::pages::IdleRelease::new(true) {
        Ok(p) => {
            match &p.confined {
                Ok(n) => log::info!("code and read-only data cut into one-page mappings ({n} pages marked): pages released at resyncs come back one by one"),
                Err(e) => log::warn!("code not cut into one-page mappings ({e}): pages released at resyncs come back with the kernel's fault-around"),
            }
            // Start-up's pages (configuration, recovery, re-adoption) go now, not at the
            // first resync: from here on only what runs is mapped back.
            let _ = p.release();
            Some(p)
        }
        Err(e) => {
            log::warn!("the daemon's code pages are not released at resyncs: {e}");
            None
        }
    };
    Box::new(move || {
        #[cfg(target_env = "gnu")]
        // SAFETY: malloc_trim only returns free memory of the heaps to the kernel (it takes
        // each arena's lock).
        unsafe {
            libc::malloc_trim(0);
        }
        if let Some(p) = &planned {
            let _ = p.release();
        }
    })
}

/// The root dir's filesystem (nodefs) as the kubelet's `ephemeral-storage`: (capacity,
/// allocatable: minus the reservations and the hard `nodefs.available` threshold); `None`
/// (every pod admitted, logged) when it cannot be read.
fn node_ephemeral_storage(cfg: &DaemonConfig, root_dir: &std::path::Path) -> Option<(u64, u64)> {
    use crate::eviction::{signals::fs_observations, threshold::resolve, Signal};
    let Some((space, _)) = fs_observations(root_dir) else {
        log::warn!(
            "ephemeral-storage capacity of {} unknown: pods are admitted without checking their ephemeral-storage requests",
            root_dir.display()
        );
        return None;
    };
    let hard = cfg
        .eviction
        .thresholds
        .iter()
        .find(|t| t.hard && t.signal == Signal::NodeFsAvailable)
        .map_or(0, |t| resolve(t.value, space.capacity));
    let a = crate::cgroups::allocatable::allocatable_ephemeral_storage(
        space.capacity,
        cfg.reservation.ephemeral_storage,
        hard,
    );
    log::info!(
        "node ephemeral-storage capacity {}; allocatable {}",
        space.capacity,
        a
    );
    Some((space.capacity, a))
}

/// Node allocatable from this host's capacity and the configured reservations; `None` (every
/// pod admitted, logged) when the capacity cannot be read.
fn node_allocatable(cfg: &DaemonConfig) -> Option<crate::pod::resources::Amounts> {
    match crate::cgroups::allocatable::host_capacity() {
        Ok(capacity) => {
            let a = crate::cgroups::allocatable::allocatable(capacity, &cfg.reservation);
            log::info!(
                "node capacity cpu {}m memory {}; allocatable cpu {}m memory {}",
                capacity.cpu_millis,
                capacity.memory_bytes,
                a.cpu_millis,
                a.memory_bytes
            );
            Some(a)
        }
        Err(e) => {
            log::warn!("node capacity unknown, pods are admitted without a resource check: {e}");
            None
        }
    }
}

/// One line at start naming what does not work as on a pure cgroup v2 host.
fn log_degraded_cgroup_features(root: &crate::cgroups::CgroupRoot) {
    if root.mode() == crate::cgroups::CgroupMode::Unified {
        return;
    }
    log::warn!(
        "cgroup v1/hybrid host ({}): pod and container limits use the v1 files (cpu.shares, \
         cpu.cfs_quota_us, memory.limit_in_bytes, pids.max); degraded: swap is not disabled \
         (no memory.swap.max), OOM kills are read from memory.oom_control instead of \
         memory.events (needs kernel >= 4.13), no pod-level cpuset/io/hugetlb controllers",
        root.path().display()
    );
}
