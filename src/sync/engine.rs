//! sync::engine: the pod lifecycle engine, wired the one way `podvisor run` and `podvisor
//! play` both use: the Linux runtime (its exit events forwarded into the loop's channel), the
//! executor's pool of four workers (image pulls per imagePullPolicy, starts, hooks, removals)
//! over the image store and the registry files, the prober thread with its four probe
//! workers, and the [`SyncLoop`] that owns every pod. The daemon adds its sources, API and
//! image GC; `play` adds its one pod (`SyncConfig::only_pod`), its signals and its output.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread;

use super::executor::{ImageError, ImageService, PulledImage, ThreadPool};
use super::{SyncConfig, SyncEvent, SyncLoop, SystemClock};
use crate::images::{ImageStore, RegistryConfig, RegistryConfigError};
use crate::prober::scheduler::Prober;
use crate::runtime::daemon::{LinuxRuntime, RuntimeConfig};
use crate::runtime::{Runtime, RuntimeError, RuntimeEvent};
use crate::status::SnapshotCell;

/// Executor workers (the kubelet runs one pod worker per pod; four bound the parallel pulls).
const WORKERS: usize = 4;
/// Probe workers of the prober thread.
const PROBE_WORKERS: usize = 4;

/// Errors that stop the engine from starting.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("runtime: {0}")]
    Runtime(#[from] RuntimeError),
    #[error("registry configuration: {0}")]
    Registries(#[from] RegistryConfigError),
    #[error("{what}: {source}")]
    Spawn {
        what: &'static str,
        source: std::io::Error,
    },
}

/// The image store and registries as the workers see them. The registry files are read again
/// for every pull, so rotated credentials and new mirrors apply without a restart (as the
/// kubelet reads its credential files lazily).
pub struct StoreImageService {
    pub store: Arc<ImageStore>,
    pub registry_config: Option<PathBuf>,
    pub docker_config: Option<PathBuf>,
}

impl StoreImageService {
    fn registries(&self) -> Result<RegistryConfig, RegistryConfigError> {
        RegistryConfig::load(
            self.registry_config.as_deref(),
            self.docker_config.as_deref(),
        )
    }
}

impl ImageService for StoreImageService {
    fn is_present(&self, image: &str) -> Result<bool, ImageError> {
        self.store
            .resolve(image)
            .map(|r| r.is_some())
            .map_err(|e| ImageError::Lookup {
                image: image.to_string(),
                message: e.to_string(),
            })
    }

    fn pull(&self, image: &str) -> Result<PulledImage, ImageError> {
        let cfg = self.registries().map_err(|e| ImageError::Registries {
            image: image.to_string(),
            message: e.to_string(),
        })?;
        let rec = self
            .store
            .pull(image, &cfg, &mut |_| {})
            .map_err(|e| ImageError::Pull {
                image: image.to_string(),
                message: e.to_string(),
            })?;
        Ok(PulledImage {
            digest: rec.digest,
            size: rec.size,
        })
    }
}

/// Forwards every event of `rx` into the loop's channel, wrapped by `wrap`, on a thread.
pub fn forward<T: Send + 'static>(
    name: &str,
    rx: Receiver<T>,
    tx: Sender<SyncEvent>,
    wrap: fn(T) -> SyncEvent,
) -> Result<thread::JoinHandle<()>, EngineError> {
    thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for ev in rx {
                if tx.send(wrap(ev)).is_err() {
                    return;
                }
            }
        })
        .map_err(|source| EngineError::Spawn {
            what: "spawn forwarder",
            source,
        })
}

/// A started engine: the loop, and its channel (send it sources and signals, then run it).
pub struct Engine {
    pub sync: SyncLoop,
    /// The runtime the loop and its workers use (container GC removes through it too).
    pub runtime: Arc<dyn Runtime>,
    pub tx: Sender<SyncEvent>,
    pub rx: Receiver<SyncEvent>,
}

/// Starts the runtime, the workers and the prober, and builds the loop over them (which
/// re-adopts what is on disk). A broken registry file is refused here rather than failing
/// every pull later.
pub fn start(
    cfg: SyncConfig,
    runtime_cfg: RuntimeConfig,
    images: StoreImageService,
    snapshots: SnapshotCell,
) -> Result<Engine, EngineError> {
    images.registries()?;
    let (tx, rx) = mpsc::channel::<SyncEvent>();
    let (rt_tx, rt_rx) = mpsc::channel::<RuntimeEvent>();
    let runtime: Arc<dyn Runtime> = Arc::new(LinuxRuntime::new(
        runtime_cfg,
        Arc::clone(&images.store),
        rt_tx,
    )?);
    forward("runtime-events", rt_rx, tx.clone(), SyncEvent::Runtime)?;
    let work_tx = tx.clone();
    let pool = ThreadPool::new(WORKERS, Arc::clone(&runtime), Arc::new(images), move |r| {
        // The sync loop outlives the pool; a failed send means it is shutting down.
        let _ = work_tx.send(SyncEvent::Work(Box::new(r)));
    })
    .map_err(|source| EngineError::Spawn {
        what: "start workers",
        source,
    })?;
    let probe_tx = tx.clone();
    let metrics = cfg.metrics.clone();
    let prober = Prober::start(Arc::clone(&runtime), PROBE_WORKERS, metrics, move |u| {
        // A failed send means the sync loop is shutting down.
        let _ = probe_tx.send(SyncEvent::Probe(Box::new(u)));
    })
    .map_err(|source| EngineError::Spawn {
        what: "start prober",
        source,
    })?;
    let mut sync = SyncLoop::new(
        cfg,
        Arc::clone(&runtime),
        Box::new(pool),
        Box::new(SystemClock),
        snapshots,
    )?;
    sync.set_prober(Box::new(prober));
    Ok(Engine {
        sync,
        runtime,
        tx,
        rx,
    })
}
