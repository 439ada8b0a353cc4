//! play: `podvisor play FILE`, one Pod manifest run in the foreground (like `podman kube
//! play`), on the daemon's engine.
//!
//! The pod runs on the same lifecycle engine as `podvisor run` ([`crate::sync::engine`]: the
//! sync loop, its workers and the prober), scoped to this one pod (`SyncConfig::only_pod`):
//! init containers to completion in order, then the app containers, restartPolicy with the
//! kubelet's crash-loop backoff (the first restart immediate, then 10 s doubling to 300 s,
//! reset after 10 min of running), imagePullPolicy before every start with the image pull
//! backoff, probes, postStart and preStop hooks, and the kubelet's events (logged on stderr).
//! What play adds: each container's output is followed from its CRI log and printed on
//! stdout (stderr for the container's stderr) prefixed with its name; the pod is stopped and
//! removed when it finishes (phase Succeeded or Failed) or on SIGINT/SIGTERM, as the daemon
//! removes a pod whose manifest is deleted: preStop, the stop signal, SIGKILL after
//! terminationGracePeriodSeconds (a second signal kills at once). Then its sandbox and
//! (unless `--keep-logs`) its logs are gone. Nothing of other pods on the same root is
//! touched, and the pod is not persisted: a daemon never adopts it.
//!
//! The exit status is 0 when every container that ended last exited 0, 1 otherwise (or when
//! the pod failed).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::images::ImageStore;
use crate::logs::{FollowStart, LogFollower, Stream};
use crate::pod::manifest;
use crate::runtime::daemon::RuntimeConfig;
use crate::runtime::RuntimeEvent;
use crate::security::apparmor::AppArmorHost;
use crate::sources::SourceEvent;
use crate::staticpod::{self, StaticPod};
use crate::status::{PodView, Snapshot, SnapshotCell};
use crate::sync::engine::{self, Engine, StoreImageService};
use crate::sync::{SyncConfig, SyncEvent};

/// Errors of `podvisor play`.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    #[error(transparent)]
    Image(#[from] crate::images::ImageError),
    #[error(transparent)]
    Engine(#[from] crate::sync::engine::EngineError),
    #[error("signal setup: {0}")]
    Signals(nix::Error),
    #[error(transparent)]
    Kernel(#[from] crate::kernel::KernelError),
}

/// What `play` needs.
#[derive(Debug, Clone)]
pub struct PlayOptions {
    pub manifest: PathBuf,
    pub runtime: RuntimeConfig,
    pub keep_logs: bool,
    /// `--registry-config` (registries.yaml) for pulls.
    pub registry_config: Option<PathBuf>,
    /// `--docker-config` (config.json credentials) for pulls.
    pub docker_config: Option<PathBuf>,
}

/// How often container logs are read while nothing else happens.
const OUTPUT_PERIOD: Duration = Duration::from_millis(50);

/// Runs the pod in the foreground; returns the process exit code.
pub fn play(opts: &PlayOptions) -> Result<i32, PlayError> {
    crate::kernel::verify()?;
    let mut runtime_cfg = opts.runtime.clone();
    // Load the default AppArmor profile now, so that a failure is known before validation.
    runtime_cfg.security.apparmor = AppArmorHost::detect_and_load();
    let data = manifest::read_manifest_file(&opts.manifest)?;
    let pod = staticpod::load_manifest_for_play(
        &data,
        &opts.manifest.display().to_string(),
        &runtime_cfg.security,
    )?;
    let images = Arc::new(ImageStore::open(&opts.runtime.root_dir.join("images"))?);
    // Air-gapped devices ship images in images/preload/*.tar: import them (pinned) first.
    // A bad archive is logged by the store and does not stop the others.
    for r in images.import_preload()? {
        say(&format!("preloaded image {} {}", r.reference, r.digest));
    }
    // Block the stop signals before any thread exists so they all inherit the mask; they are
    // read from a signalfd in the loop below (monitors reset their mask).
    let mut mask = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        mask.add(s);
    }
    mask.thread_block().map_err(PlayError::Signals)?;
    let result = run(opts, runtime_cfg, images, &pod, &mask);
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&mask), None);
    result
}

fn run(
    opts: &PlayOptions,
    runtime_cfg: RuntimeConfig,
    images: Arc<ImageStore>,
    pod: &StaticPod,
    mask: &SigSet,
) -> Result<i32, PlayError> {
    let sigfd = SignalFd::with_flags(mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(PlayError::Signals)?;
    let log_dir = runtime_cfg.log_dir.clone();
    let snapshots = SnapshotCell::default();
    let cfg = SyncConfig {
        node_name: runtime_cfg.node.name.clone(),
        expect_file_source: false,
        expect_url_source: false,
        sources_ready_timeout: Duration::ZERO,
        store_dir: PathBuf::new(),
        host_ip: runtime_cfg.node.host_ip.clone(),
        allocatable: None,
        allocatable_ephemeral_storage: None,
        hugepages_dir: None,
        security: runtime_cfg.security.clone(),
        only_pod: Some(pod.clone()),
        // The one pod never changes: nothing to roll back.
        rollback_after: Duration::ZERO,
        pod_network: runtime_cfg.network.is_some(),
        metrics: Default::default(),
    };
    let images = StoreImageService {
        store: images,
        registry_config: opts.registry_config.clone(),
        docker_config: opts.docker_config.clone(),
    };
    let Engine {
        mut sync, tx, rx, ..
    } = engine::start(cfg, runtime_cfg, images, snapshots.clone())?;
    let grace = pod
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30)
        .max(0);
    let remove = || {
        SyncEvent::Source(SourceEvent::FileRemoved {
            path: PathBuf::from(&pod.source),
        })
    };
    let mut out = Output::default();
    let mut stopping = false;
    let mut killing = false;
    loop {
        // Signals: the first one stops the pod gracefully, a second one kills.
        while let Ok(Some(info)) = sigfd.read_signal() {
            if !stopping {
                say(&format!(
                    "received signal {}, stopping pod (grace period {grace}s)",
                    info.ssi_signo
                ));
                stopping = true;
                sync.handle(remove());
            } else if !killing {
                say("second signal: killing containers");
                killing = true;
                sync.kill_removals_now();
            }
        }
        let now = Instant::now();
        let deadline = sync.next_deadline();
        let timeout = deadline
            .map_or(OUTPUT_PERIOD, |d| d.saturating_duration_since(now))
            .min(OUTPUT_PERIOD);
        match rx.recv_timeout(timeout) {
            Ok(SyncEvent::Runtime(RuntimeEvent::ContainerExited { id, pod_uid, exit })) => {
                out.exited(&id, exit.exit_code, &exit.reason, stopping);
                sync.handle(SyncEvent::Runtime(RuntimeEvent::ContainerExited {
                    id,
                    pod_uid,
                    exit,
                }));
            }
            Ok(ev) => sync.handle(ev),
            Err(RecvTimeoutError::Timeout) => {
                if deadline.is_some_and(|d| d <= Instant::now()) {
                    sync.tick();
                }
            }
            // The engine holds senders of its own: this does not happen while it runs.
            Err(RecvTimeoutError::Disconnected) => break,
        }
        let snap = snapshots.get();
        out.follow(&snap);
        match snap.pods.first() {
            None if stopping => break,
            Some(v) if !stopping => {
                let phase = v.pod.status.as_ref().and_then(|s| s.phase.as_deref());
                if let Some(phase @ ("Succeeded" | "Failed")) = phase {
                    say(&format!(
                        "pod {} finished ({phase}): removing it",
                        pod.full_name
                    ));
                    out.failed = phase == "Failed";
                    stopping = true;
                    sync.handle(remove());
                }
            }
            _ => {}
        }
    }
    out.finish();
    drop(sync);
    drop(tx);
    if !opts.keep_logs {
        let meta = &pod.pod.metadata;
        let dir = crate::logs::pod_log_dir(
            &log_dir,
            meta.namespace.as_deref().unwrap_or("default"),
            meta.name.as_deref().unwrap_or_default(),
            pod.uid(),
        );
        let _ = std::fs::remove_dir_all(dir);
    }
    say(&format!("pod {} removed", pod.full_name));
    let failed = out.failed || out.last_exit.values().any(|c| *c != 0);
    Ok(if failed { 1 } else { 0 })
}

fn say(msg: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "podvisor: {msg}");
}

/// What play prints and remembers of the pod's containers.
#[derive(Default)]
struct Output {
    /// Followed logs, in the order their containers started: (path, container, follower).
    followers: Vec<(PathBuf, String, LogFollower)>,
    /// Container id -> name, from the published statuses.
    names: BTreeMap<String, String>,
    /// The last exit code of each container.
    last_exit: BTreeMap<String, i32>,
    /// The pod ended in phase Failed.
    failed: bool,
    /// Said: the sandbox is ready.
    sandbox_ready: bool,
    /// Containers said to have started, by id.
    started: BTreeSet<String>,
}

impl Output {
    /// A container exited. While the pod is being stopped the sync loop records no event for
    /// it, so play says it.
    fn exited(&mut self, id: &str, code: i32, reason: &str, stopping: bool) {
        let name = self
            .names
            .get(id)
            .cloned()
            .unwrap_or_else(|| id.to_string());
        if stopping {
            say(&format!(
                "container {name} exited with code {code} ({reason})"
            ));
        }
        self.last_exit.insert(name, code);
    }

    /// Follows the log of every container instance the snapshot shows, prints what is new,
    /// and stops following logs no longer shown (after reading them to the end).
    fn follow(&mut self, snap: &Snapshot) {
        let view: Option<&PodView> = snap.pods.first();
        if let Some(st) = view.and_then(|v| v.pod.status.as_ref()) {
            let ready = st
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "PodReadyToStartContainers" && c.status == "True");
            if ready && !self.sandbox_ready {
                let name = view.and_then(|v| v.pod.metadata.name.as_deref());
                say(&format!("pod {} sandbox ready", name.unwrap_or_default()));
            }
            self.sandbox_ready = ready;
            for c in st
                .init_container_statuses
                .iter()
                .flatten()
                .chain(st.container_statuses.iter().flatten())
            {
                let Some(id) = c.container_id.as_deref() else {
                    continue;
                };
                let id = id.trim_start_matches("podvisor://");
                self.names.insert(id.to_string(), c.name.clone());
                let running = c.state.as_ref().is_some_and(|s| s.running.is_some());
                if running && self.started.insert(id.to_string()) {
                    say(&format!("container {} started ({id})", c.name));
                }
            }
        }
        let shown: Vec<(&String, &PathBuf)> = view
            .map(|v| {
                v.log_paths
                    .iter()
                    .chain(v.previous_log_paths.iter())
                    .collect()
            })
            .unwrap_or_default();
        for (name, path) in view.map(|v| v.log_paths.iter()).into_iter().flatten() {
            if self.followers.iter().any(|(p, _, _)| p == path) {
                continue;
            }
            // Not there yet (the start is being reported): tried again next time.
            if let Ok(f) = LogFollower::new(path, FollowStart::Beginning) {
                self.followers.push((path.clone(), name.clone(), f));
            }
        }
        for (_, name, f) in self.followers.iter_mut() {
            print_lines(name, f);
        }
        self.followers
            .retain(|(p, _, _)| shown.iter().any(|(_, s)| *s == p));
    }

    /// Prints what is left in every log.
    fn finish(&mut self) {
        for (_, name, f) in self.followers.iter_mut() {
            print_lines(name, f);
        }
        self.followers.clear();
    }
}

fn print_lines(name: &str, follower: &mut LogFollower) {
    let lines = match follower.poll() {
        Ok(l) => l,
        Err(e) => {
            say(&format!("container {name}: reading log: {e}"));
            return;
        }
    };
    if lines.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    for line in lines {
        let text = String::from_utf8_lossy(&line.content);
        let _ = match line.stream {
            Stream::Stdout => writeln!(out, "{name} | {text}"),
            Stream::Stderr => writeln!(err, "{name} | {text}"),
        };
    }
    let _ = out.flush();
}
