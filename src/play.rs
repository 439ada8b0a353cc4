//! play: `podvisor play FILE`, one Pod manifest run in the foreground (like `podman kube
//! play`), through the same [`Runtime`] the daemon uses.
//!
//! Init containers run to completion in order, then the app containers; each container's
//! output is followed from its CRI log and printed prefixed with its name; restartPolicy and
//! a crash-loop backoff (10 s doubling to 300 s, reset after 10 min of running; unlike the daemon,
//! which follows the kubelet, even the first restart waits)
//! apply. SIGINT/SIGTERM stops the pod gracefully: the stop signal, then SIGKILL after
//! terminationGracePeriodSeconds (a second Ctrl-C kills at once). On the way out every
//! container, the sandbox and (unless `--keep-logs`) the pod's logs are removed.
//!
//! Images are made present once, before the pod starts, following each container's
//! `imagePullPolicy` (Never: the store only; IfNotPresent: pull when missing; Always: pull);
//! unlike the daemon, restarts do not pull again.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use crate::images::ImageStore;
use crate::logs::{FollowStart, LogFollower, Stream};
use crate::pod::manifest;
use crate::runtime::linux::{LinuxRuntime, RuntimeConfig};
use crate::runtime::{
    ContainerKind, ContainerRequest, ContainerState, ExitRecord, Runtime, RuntimeEvent,
};
use crate::security::apparmor::AppArmorHost;
use crate::sync::backoff::should_restart;

/// Errors of `podvisor play`.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    #[error(transparent)]
    Manifest(#[from] manifest::ManifestError),
    #[error(transparent)]
    Image(#[from] crate::images::ImageError),
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
    #[error("signal setup: {0}")]
    Signals(nix::Error),
    #[error(transparent)]
    Registries(#[from] crate::images::RegistryConfigError),
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

/// Pulls the images of `pod` its containers' pull policies ask for.
fn ensure_images(images: &ImageStore, pod: &Pod, opts: &PlayOptions) -> Result<(), PlayError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(());
    };
    let mut registries = None;
    let mut done = std::collections::BTreeSet::new();
    for c in spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
    {
        let image = c.image.clone().unwrap_or_default();
        let pull =
            crate::sync::executor::needs_pull(c, || images.resolve(&image).map(|r| r.is_some()))?;
        if !pull || !done.insert(image.clone()) {
            continue;
        }
        let cfg = match &registries {
            Some(cfg) => cfg,
            None => registries.insert(crate::images::RegistryConfig::load(
                opts.registry_config.as_deref(),
                opts.docker_config.as_deref(),
            )?),
        };
        say(&format!("pulling image {image}"));
        let rec = images.pull(&image, cfg, &mut |_| {})?;
        say(&format!("pulled image {} {}", rec.reference, rec.digest));
    }
    Ok(())
}

const BACKOFF_START: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
const BACKOFF_RESET: Duration = Duration::from_secs(600);

/// play's crash-loop backoff for one container (the daemon uses sync::backoff).
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    next: Option<Duration>,
}

impl Backoff {
    /// Delay before the next restart, given how long the last run lasted.
    pub fn next_delay(&mut self, ran_for: Duration) -> Duration {
        if ran_for >= BACKOFF_RESET {
            self.next = None;
        }
        let d = self.next.unwrap_or(BACKOFF_START);
        self.next = Some((d * 2).min(BACKOFF_MAX));
        d
    }
}

struct Slot {
    container: Container,
    kind: ContainerKind,
    restarts: u32,
    backoff: Backoff,
    running: Option<Running>,
    restart_at: Option<Instant>,
    last_exit: Option<ExitRecord>,
    done: bool,
}

struct Running {
    id: String,
    stop_signal: i32,
    started: Instant,
    follower: LogFollower,
}

/// Runs the pod in the foreground; returns the process exit code (0 when every container
/// that ended last exited 0).
pub fn play(opts: &PlayOptions) -> Result<i32, PlayError> {
    crate::kernel::verify()?;
    let mut runtime_cfg = opts.runtime.clone();
    // Load the default AppArmor profile now, so that a failure is known before validation.
    runtime_cfg.security.apparmor = AppArmorHost::detect_and_load();
    let pod = manifest::load_pod_file(&opts.manifest, &runtime_cfg.security)?;
    let images = Arc::new(ImageStore::open(&opts.runtime.root_dir.join("images"))?);
    // Air-gapped devices ship images in images/preload/*.tar: import them (pinned) first.
    // A bad archive is logged by the store and does not stop the others.
    for r in images.import_preload()? {
        say(&format!("preloaded image {} {}", r.reference, r.digest));
    }
    ensure_images(&images, &pod, opts)?;
    // Block the stop signals before any thread exists so they all inherit the mask; they are
    // read from a signalfd in the loop below (monitors reset their mask).
    let mut mask = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        mask.add(s);
    }
    mask.thread_block().map_err(PlayError::Signals)?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(PlayError::Signals)?;
    let (tx, rx) = mpsc::channel();
    let runtime = LinuxRuntime::new(runtime_cfg, images, tx)?;
    let result = run_pod(&runtime, &pod, &rx, &sigfd);
    let code = match result {
        Ok(code) => code,
        Err(e) => {
            // Tear down what exists, then report the original error.
            teardown(&runtime, &pod, &rx, opts.keep_logs);
            let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&mask), None);
            return Err(e);
        }
    };
    teardown(&runtime, &pod, &rx, opts.keep_logs);
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&mask), None);
    Ok(code)
}

fn pod_name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn say(msg: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "podvisor: {msg}");
}

fn run_pod(
    runtime: &LinuxRuntime,
    pod: &Pod,
    rx: &Receiver<RuntimeEvent>,
    sigfd: &SignalFd,
) -> Result<i32, PlayError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let policy = spec
        .restart_policy
        .clone()
        .unwrap_or_else(|| "Always".into());
    let grace =
        Duration::from_secs(spec.termination_grace_period_seconds.unwrap_or(30).max(0) as u64);
    runtime.run_pod_sandbox(pod)?;
    say(&format!("pod {} sandbox ready", pod_name(pod)));

    let mut slots: Vec<Slot> = Vec::new();
    for c in spec.init_containers.clone().unwrap_or_default() {
        slots.push(new_slot(c, ContainerKind::Init));
    }
    for c in spec.containers.clone() {
        slots.push(new_slot(c, ContainerKind::App));
    }
    let mut stopping: Option<Instant> = None;
    let mut killed = false;
    let mut failed_init = false;

    loop {
        // Signals: first one stops gracefully, a second one kills.
        while let Ok(Some(info)) = sigfd.read_signal() {
            if stopping.is_none() {
                say(&format!(
                    "received signal {}, stopping pod (grace period {}s)",
                    info.ssi_signo,
                    grace.as_secs()
                ));
                stopping = Some(Instant::now() + grace);
                signal_all(runtime, &slots, None);
            } else if !killed {
                say("second signal: killing containers");
                killed = true;
                signal_all(runtime, &slots, Some(libc::SIGKILL));
            }
        }
        if let Some(deadline) = stopping {
            if !killed && Instant::now() >= deadline {
                say("grace period over: killing containers");
                killed = true;
                signal_all(runtime, &slots, Some(libc::SIGKILL));
            }
        }

        // Start what is due: init containers one at a time, in order; app containers after.
        if stopping.is_none() && !failed_init {
            let init_pending = slots
                .iter()
                .position(|s| s.kind == ContainerKind::Init && !s.done);
            let candidates: Vec<usize> = match init_pending {
                Some(i) => vec![i],
                None => (0..slots.len())
                    .filter(|i| slots[*i].kind == ContainerKind::App)
                    .collect(),
            };
            for i in candidates {
                let slot = &mut slots[i];
                let due = slot.restart_at.is_none_or(|t| Instant::now() >= t);
                if slot.running.is_none() && !slot.done && due {
                    start_slot(runtime, pod, slot)?;
                }
            }
        }

        // Follow output.
        for slot in slots.iter_mut() {
            if let Some(r) = slot.running.as_mut() {
                print_lines(&slot.container.name, &mut r.follower);
            }
        }

        // Exits.
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(RuntimeEvent::ContainerExited { id, exit, .. }) => {
                let Some(slot) = slots
                    .iter_mut()
                    .find(|s| s.running.as_ref().is_some_and(|r| r.id == id))
                else {
                    continue;
                };
                let Some(mut run) = slot.running.take() else {
                    continue;
                };
                print_lines(&slot.container.name, &mut run.follower);
                say(&format!(
                    "container {} exited with code {} ({})",
                    slot.container.name, exit.exit_code, exit.reason
                ));
                if let Err(e) = runtime.remove_container(&id) {
                    say(&format!("container {}: {e}", slot.container.name));
                }
                let restart =
                    stopping.is_none() && should_restart(slot.kind, &policy, exit.exit_code);
                if restart {
                    let delay = slot.backoff.next_delay(run.started.elapsed());
                    slot.restarts += 1;
                    slot.restart_at = Some(Instant::now() + delay);
                    say(&format!(
                        "container {}: back-off {}s before restart {}",
                        slot.container.name,
                        delay.as_secs(),
                        slot.restarts
                    ));
                } else {
                    slot.done = true;
                    if slot.kind == ContainerKind::Init && exit.exit_code != 0 {
                        failed_init = true;
                        say(&format!(
                            "init container {} failed; the pod cannot start",
                            slot.container.name
                        ));
                    }
                }
                slot.last_exit = Some(exit);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }

        let any_running = slots.iter().any(|s| s.running.is_some());
        let all_done = slots
            .iter()
            .filter(|s| s.kind == ContainerKind::App)
            .all(|s| s.done);
        if !any_running && (stopping.is_some() || failed_init || all_done) {
            break;
        }
        // While stopping, containers waiting for a restart are simply not restarted.
        if stopping.is_some() {
            for s in slots.iter_mut().filter(|s| s.running.is_none()) {
                s.done = true;
            }
        }
    }
    let failed = failed_init
        || slots
            .iter()
            .filter_map(|s| s.last_exit.as_ref())
            .any(|e| e.exit_code != 0);
    Ok(if failed { 1 } else { 0 })
}

fn new_slot(container: Container, kind: ContainerKind) -> Slot {
    Slot {
        container,
        kind,
        restarts: 0,
        backoff: Backoff::default(),
        running: None,
        restart_at: None,
        last_exit: None,
        done: false,
    }
}

fn start_slot(runtime: &LinuxRuntime, pod: &Pod, slot: &mut Slot) -> Result<(), PlayError> {
    let req = ContainerRequest {
        pod,
        container: &slot.container,
        kind: slot.kind,
        restart_count: slot.restarts,
    };
    match runtime.start_container(&req) {
        Ok(info) => {
            if let ContainerState::Running { pid, .. } = info.state {
                say(&format!(
                    "container {} started (pid {pid})",
                    slot.container.name
                ));
            }
            let follower =
                LogFollower::new(&info.meta.log_path, FollowStart::Beginning).map_err(|e| {
                    crate::runtime::RuntimeError::Start {
                        id: info.meta.id.clone(),
                        message: format!("cannot follow log: {e}"),
                    }
                })?;
            slot.running = Some(Running {
                id: info.meta.id.clone(),
                stop_signal: info.meta.stop_signal,
                started: Instant::now(),
                follower,
            });
            slot.restart_at = None;
            Ok(())
        }
        Err(e @ crate::runtime::RuntimeError::Start { .. }) => {
            // The container could not run (bad command, bad user...): like the kubelet,
            // count it as a failed attempt and back off.
            say(&format!("container {}: {e}", slot.container.name));
            let delay = slot.backoff.next_delay(Duration::ZERO);
            slot.restarts += 1;
            slot.restart_at = Some(Instant::now() + delay);
            say(&format!(
                "container {}: back-off {}s before retrying",
                slot.container.name,
                delay.as_secs()
            ));
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

fn signal_all(runtime: &LinuxRuntime, slots: &[Slot], force: Option<i32>) {
    for s in slots {
        if let Some(r) = &s.running {
            let sig = force.unwrap_or(r.stop_signal);
            if let Err(e) = runtime.signal_container(&r.id, sig) {
                say(&format!("container {}: {e}", s.container.name));
            }
        }
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

/// Removes every container of the pod, its sandbox and (unless asked to keep them) its logs.
fn teardown(runtime: &LinuxRuntime, pod: &Pod, rx: &Receiver<RuntimeEvent>, keep_logs: bool) {
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    // Anything still running (an error path) is killed and waited for.
    let mut waiting: BTreeMap<String, ()> = BTreeMap::new();
    if let Ok(list) = runtime.list_containers() {
        for c in list.iter().filter(|c| c.meta.pod_uid == uid) {
            if !matches!(c.state, ContainerState::Exited(_)) {
                let _ = runtime.signal_container(&c.meta.id, libc::SIGKILL);
                waiting.insert(c.meta.id.clone(), ());
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while !waiting.is_empty() && Instant::now() < deadline {
        if let Ok(RuntimeEvent::ContainerExited { id, .. }) =
            rx.recv_timeout(Duration::from_millis(100))
        {
            waiting.remove(&id);
        }
    }
    if let Ok(list) = runtime.list_containers() {
        for c in list.iter().filter(|c| c.meta.pod_uid == uid) {
            if let Err(e) = runtime.remove_container(&c.meta.id) {
                say(&format!("container {}: {e}", c.meta.container_name));
            }
        }
    }
    if let Err(e) = runtime.remove_pod_sandbox(&uid) {
        say(&format!("pod {}: {e}", pod_name(pod)));
    }
    if !keep_logs {
        let dir = crate::logs::pod_log_dir(
            &runtime.config().log_dir,
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            &pod_name(pod),
            &uid,
        );
        let _ = std::fs::remove_dir_all(dir);
    }
    say(&format!("pod {} removed", pod_name(pod)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_five_minutes_and_resets_after_ten() {
        let mut b = Backoff::default();
        let short = Duration::from_secs(1);
        let got: Vec<u64> = (0..7).map(|_| b.next_delay(short).as_secs()).collect();
        assert_eq!(got, vec![10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.next_delay(Duration::from_secs(600)).as_secs(), 10);
        assert_eq!(b.next_delay(short).as_secs(), 20);
    }
}
