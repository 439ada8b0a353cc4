//! executor: slow runtime work off the sync loop's thread.
//!
//! Creating a sandbox, starting a container (spawning its monitor and waiting for its start
//! report) and removing a pod's leftovers can take from milliseconds to seconds. The sync loop
//! turns them into [`Job`]s; a small pool of worker threads runs them against the runtime and
//! sends each [`JobResult`] back as an event, so one slow pod never delays another.
//!
//! A container start first makes sure its image is there, following `imagePullPolicy` as the
//! kubelet's image manager does (`Never`: only the local store; `IfNotPresent`: pull if
//! missing; `Always`: pull before every start). A pull reports `ImagePulling` and
//! `ImagePulled` on the way; a failed pull ends the job with reason `ErrImagePull`.
//!
//! Lifecycle hooks (postStart, preStop) run here too: they can take as long as the grace
//! period and must never block the sync loop.

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::prober::{run_action, Action, HookKind, ProbeResult, Target};
use crate::reason::WaitingReason;
use crate::runtime::{
    ContainerInfo, ContainerKind, ContainerRequest, ContainerState, Runtime, RuntimeError,
    SandboxInfo,
};

/// Work for the pool.
#[derive(Debug, Clone)]
pub enum Job {
    /// Creates the pod's sandbox, then starts `first` in it (the container the loop would
    /// start next), in the same job.
    CreateSandbox {
        uid: String,
        pod: Arc<Pod>,
        first: Option<ContainerStart>,
    },
    StartContainer {
        uid: String,
        pod: Arc<Pod>,
        container: Box<Container>,
        kind: ContainerKind,
        restart_count: u32,
    },
    /// Removes every container record of the pod, then its sandbox (and cgroups).
    RemovePod { uid: String },
    /// Writes the pod's downwardAPI and projected volumes again (new labels or annotations).
    UpdatePodVolumes { uid: String, pod: Arc<Pod> },
    /// Removes an evicted pod's sandbox, cgroups and emptyDir volumes; its container records
    /// (exits, logs) stay.
    RemoveSandbox { uid: String },
    /// Runs a lifecycle hook (postStart/preStop) of a running container.
    Hook {
        uid: String,
        name: String,
        container_id: String,
        hook: HookKind,
        action: Action,
        timeout: Duration,
        /// The pod's own network namespace (httpGet hooks connect from it).
        netns: Option<std::path::PathBuf>,
    },
}

/// A container to start, as the loop asks for it: in a start job, or in a sandbox job once
/// the sandbox is made (its slot shows it being created from the submission on).
#[derive(Debug, Clone)]
pub struct ContainerStart {
    pub container: Box<Container>,
    pub kind: ContainerKind,
    pub restart_count: u32,
}

/// What a pull brought in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulledImage {
    /// Manifest digest of the stored image.
    pub digest: String,
    /// Compressed size of its blobs.
    pub size: u64,
}

/// Why the image service failed, with the image and the store's or registry's message (shown
/// after `failed to pull image "<image>": `, as the kubelet's ErrImagePull message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The local store could not be read.
    #[error("{message}")]
    Lookup { image: String, message: String },
    /// The registry configuration could not be read.
    #[error("{message}")]
    Registries { image: String, message: String },
    /// The pull failed.
    #[error("{message}")]
    Pull { image: String, message: String },
}

/// How the workers reach the image store and registries (a seam for tests).
pub trait ImageService: Send + Sync {
    /// Whether `image` (as written in a manifest) is in the local store.
    fn is_present(&self, image: &str) -> Result<bool, ImageError>;
    /// Pulls `image` for this machine into the store.
    fn pull(&self, image: &str) -> Result<PulledImage, ImageError>;
}

/// How a start got its image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageOutcome {
    AlreadyPresent,
    Pulled { image: PulledImage, took: Duration },
}

/// The pull policy of `c`: as written, or the API server's default (`Always` for `:latest`
/// or no tag, otherwise `IfNotPresent`) when a manifest leaves it out.
pub fn pull_policy(c: &Container) -> &str {
    match c.image_pull_policy.as_deref() {
        Some(p) if !p.is_empty() => p,
        _ => crate::staticpod::default_pull_policy(c.image.as_deref().unwrap_or("")),
    }
}

/// Whether `c`'s image must be pulled before it starts: never under `Never`, when
/// `is_present` says it is missing under `IfNotPresent`, always under `Always`.
pub fn needs_pull<E>(
    c: &Container,
    is_present: impl FnOnce() -> Result<bool, E>,
) -> Result<bool, E> {
    match pull_policy(c) {
        "Never" => Ok(false),
        "IfNotPresent" => Ok(!is_present()?),
        _ => Ok(true),
    }
}

/// Why a start failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFailureReason {
    /// The container's waiting reason, in the kubelet's vocabulary: ErrImagePull,
    /// ErrImageNeverPull, CreateContainerConfigError, CreateContainerError or
    /// RunContainerError.
    Waiting(WaitingReason),
    /// The pod's sandbox is missing or not live; the sync loop creates it again (never shown
    /// as a container's reason).
    SandboxNotReady,
}

/// A start that failed, and why. The message is the one the container's status shows
/// (the runtime's whole error chain, or the pull's failure), in the kubelet's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct StartFailure {
    pub reason: StartFailureReason,
    pub message: String,
}

/// Which runtime call of a job failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStep {
    CreateSandbox,
    UpdatePodVolumes,
    RemoveSandbox,
    RemovePod,
}

/// A job's runtime call that failed: the step, the pod, and the runtime's message (shown as
/// it is in events, the pod's status and logs). The message is kept rather than the
/// [`RuntimeError`] itself: a result is cloned on its way to the loop, the runtime hands a
/// sandbox's result to the job by reference, and a `RuntimeError` is not `Clone`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct JobError {
    pub step: JobStep,
    pub uid: String,
    pub message: String,
}

impl JobError {
    fn new(step: JobStep, uid: &str, error: &RuntimeError) -> JobError {
        JobError {
            step,
            uid: uid.to_string(),
            message: error.to_string(),
        }
    }
}

/// A `RemovePod` that failed; the sync loop retries it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct RemovePodFailure {
    pub error: JobError,
    /// The pod's containers that are still live (id, stop signal), listed by the worker after
    /// the failure so the loop stops them again before the next attempt (the loop thread
    /// never lists containers: a listing can spawn and wait for `shim cleanup`).
    pub running: Vec<(String, i32)>,
}

/// The outcome of a [`Job`].
#[derive(Debug, Clone)]
pub enum JobResult {
    /// A pull of the container's image began (sent before the job's final result).
    ImagePulling {
        uid: String,
        name: String,
        image: String,
    },
    /// The container's image is there (sent before the job's final result).
    ImageReady {
        uid: String,
        name: String,
        image: String,
        outcome: ImageOutcome,
    },
    SandboxCreated {
        uid: String,
        result: Result<SandboxInfo, JobError>,
    },
    ContainerStarted {
        uid: String,
        name: String,
        result: Result<Box<ContainerInfo>, StartFailure>,
    },
    PodRemoved {
        uid: String,
        result: Result<(), RemovePodFailure>,
    },
    PodVolumesUpdated {
        uid: String,
        result: Result<(), JobError>,
    },
    SandboxRemoved {
        uid: String,
        result: Result<(), JobError>,
    },
    HookDone {
        uid: String,
        name: String,
        container_id: String,
        hook: HookKind,
        /// The hook as the kubelet names it in events: `Exec lifecycle hook ([drain])`.
        what: String,
        result: ProbeResult,
    },
}

/// Where the sync loop sends jobs.
pub trait Executor: Send {
    fn submit(&self, job: Job);
}

/// Makes sure the image of `container` is in the store according to its pull policy, and
/// reports how (nothing under `Never`).
fn ensure_image(
    images: &dyn ImageService,
    uid: &str,
    container: &Container,
    emit: &dyn Fn(JobResult),
) -> Result<(), StartFailure> {
    let image = container.image.clone().unwrap_or_default();
    let failed = |e: ImageError| StartFailure {
        reason: StartFailureReason::Waiting(WaitingReason::ErrImagePull),
        message: format!("failed to pull image {image:?}: {e}"),
    };
    if pull_policy(container) == "Never" {
        // The runtime reports a missing image as ErrImageNeverPull; no Pulled event.
        return Ok(());
    }
    let pull = needs_pull(container, || images.is_present(&image)).map_err(failed)?;
    report_image(uid, container, pull, images, emit).map_err(failed)
}

/// Pulls the image of `container` when `pull`, and reports it ready (`ImagePulling` first
/// for a pull).
fn report_image(
    uid: &str,
    container: &Container,
    pull: bool,
    images: &dyn ImageService,
    emit: &dyn Fn(JobResult),
) -> Result<(), ImageError> {
    let image = container.image.clone().unwrap_or_default();
    let outcome = if pull {
        emit(JobResult::ImagePulling {
            uid: uid.to_string(),
            name: container.name.clone(),
            image: image.clone(),
        });
        let t = Instant::now();
        let pulled = images.pull(&image)?;
        ImageOutcome::Pulled {
            image: pulled,
            took: t.elapsed(),
        }
    } else {
        ImageOutcome::AlreadyPresent
    };
    emit(JobResult::ImageReady {
        uid: uid.to_string(),
        name: container.name.clone(),
        image,
        outcome,
    });
    Ok(())
}

/// Runs one job to completion (on whatever thread calls it); `emit` receives the progress
/// results a job sends before its final one.
pub fn run_job(
    runtime: &dyn Runtime,
    images: &dyn ImageService,
    job: Job,
    emit: &dyn Fn(JobResult),
) -> JobResult {
    match job {
        Job::CreateSandbox {
            uid,
            pod,
            first: None,
        } => JobResult::SandboxCreated {
            result: runtime
                .run_pod_sandbox(&pod)
                .map_err(|e| JobError::new(JobStep::CreateSandbox, &uid, &e)),
            uid,
        },
        Job::CreateSandbox {
            uid,
            pod,
            first: Some(first),
        } => create_sandbox_and_start(runtime, images, uid, pod, first, emit),
        Job::StartContainer {
            uid,
            pod,
            container,
            kind,
            restart_count,
        } => {
            if let Err(f) = ensure_image(images, &uid, &container, emit) {
                return JobResult::ContainerStarted {
                    uid,
                    name: container.name.clone(),
                    result: Err(f),
                };
            }
            let req = ContainerRequest {
                pod: &pod,
                container: &container,
                kind,
                restart_count,
            };
            let result = runtime
                .start_container(&req)
                .map(Box::new)
                .map_err(classify);
            JobResult::ContainerStarted {
                uid,
                name: container.name.clone(),
                result,
            }
        }
        Job::UpdatePodVolumes { uid, pod } => JobResult::PodVolumesUpdated {
            result: runtime
                .update_pod_volumes(&pod)
                .map_err(|e| JobError::new(JobStep::UpdatePodVolumes, &uid, &e)),
            uid,
        },
        Job::RemovePod { uid } => JobResult::PodRemoved {
            result: remove_pod(runtime, &uid).map_err(|e| RemovePodFailure {
                error: JobError::new(JobStep::RemovePod, &uid, &e),
                running: live_containers(runtime, &uid),
            }),
            uid,
        },
        Job::RemoveSandbox { uid } => JobResult::SandboxRemoved {
            result: runtime
                .remove_pod_sandbox(&uid)
                .map_err(|e| JobError::new(JobStep::RemoveSandbox, &uid, &e)),
            uid,
        },
        Job::Hook {
            uid,
            name,
            container_id,
            hook,
            action,
            timeout,
            netns,
        } => {
            let target = Target {
                runtime,
                container_id: &container_id,
                netns: netns.as_deref(),
            };
            let result = run_action(&action, &target, timeout);
            let what = match &action {
                Action::Exec { command } => {
                    format!("Exec lifecycle hook ([{}])", command.join(" "))
                }
                Action::Http(h) => format!("HTTP lifecycle hook ({})", h.path),
                Action::Sleep { duration } => {
                    format!("Sleep lifecycle hook ({}s)", duration.as_secs())
                }
                Action::Tcp { .. } | Action::Grpc { .. } => "lifecycle hook".to_string(),
            };
            JobResult::HookDone {
                uid,
                name,
                container_id,
                hook,
                what,
                result,
            }
        }
    }
}

/// A sandbox job that starts the pod's first container too. The sandbox's result is sent as
/// soon as it is known (the loop then starts the pod's other containers that are due), and
/// the start's as the job's own. A container whose image is in the store, and needs no pull
/// under its policy, goes to the runtime with the sandbox, which may prepare it meanwhile;
/// one whose image is to be pulled is pulled and started after the sandbox, as its own start
/// job would. When the sandbox fails the container is not started: the start's result says
/// so (never a container's waiting reason), and the slot waits for the next sandbox.
fn create_sandbox_and_start(
    runtime: &dyn Runtime,
    images: &dyn ImageService,
    uid: String,
    pod: Arc<Pod>,
    first: ContainerStart,
    emit: &dyn Fn(JobResult),
) -> JobResult {
    let sandbox_result = |r: &Result<SandboxInfo, RuntimeError>| JobResult::SandboxCreated {
        uid: uid.clone(),
        result: match r {
            Ok(info) => Ok(info.clone()),
            Err(e) => Err(JobError::new(JobStep::CreateSandbox, &uid, e)),
        },
    };
    let name = first.container.name.clone();
    let not_started = |uid: String| JobResult::ContainerStarted {
        uid,
        name: name.clone(),
        result: Err(StartFailure {
            reason: StartFailureReason::SandboxNotReady,
            message: "the pod's sandbox could not be created".into(),
        }),
    };
    let image = first.container.image.clone().unwrap_or_default();
    let present = matches!(
        needs_pull(&first.container, || images.is_present(&image)),
        Ok(false)
    );
    if !present {
        let sandbox = runtime.run_pod_sandbox(&pod);
        emit(sandbox_result(&sandbox));
        if sandbox.is_err() {
            return not_started(uid);
        }
        let job = Job::StartContainer {
            uid,
            pod,
            container: first.container,
            kind: first.kind,
            restart_count: first.restart_count,
        };
        return run_job(runtime, images, job, emit);
    }
    let req = ContainerRequest {
        pod: &pod,
        container: &first.container,
        kind: first.kind,
        restart_count: first.restart_count,
    };
    let started = runtime.run_pod_sandbox_and_start(&pod, &req, &mut |sandbox| {
        emit(sandbox_result(sandbox));
        // The image is there: reported as a start job reports it, after the sandbox.
        if sandbox.is_ok() && pull_policy(&first.container) != "Never" {
            let _ = report_image(&uid, &first.container, false, images, emit);
        }
    });
    match started {
        None => not_started(uid),
        Some(result) => JobResult::ContainerStarted {
            uid,
            name,
            result: result.map(Box::new).map_err(classify),
        },
    }
}

fn classify(e: RuntimeError) -> StartFailure {
    let reason = match &e {
        RuntimeError::SandboxNotReady { .. } => StartFailureReason::SandboxNotReady,
        RuntimeError::ImageNotPresent { .. } => {
            StartFailureReason::Waiting(WaitingReason::ErrImageNeverPull)
        }
        RuntimeError::Spec { .. } | RuntimeError::Image { .. } => {
            StartFailureReason::Waiting(WaitingReason::CreateContainerConfigError)
        }
        RuntimeError::Start { .. } => StartFailureReason::Waiting(WaitingReason::RunContainerError),
        _ => StartFailureReason::Waiting(WaitingReason::CreateContainerError),
    };
    StartFailure {
        reason,
        message: crate::runtime::container::error_chain(&e),
    }
}

fn remove_pod(runtime: &dyn Runtime, uid: &str) -> Result<(), RuntimeError> {
    for c in runtime.list_containers()? {
        if c.meta.pod_uid != uid {
            continue;
        }
        if !matches!(c.state, ContainerState::Exited(_)) {
            // The sync loop only removes pods whose containers exited; a straggler is killed.
            runtime.signal_container(&c.meta.id, libc::SIGKILL)?;
            continue;
        }
        runtime.remove_container(&c.meta.id)?;
    }
    runtime.remove_pod_sandbox(uid)
}

/// The live containers of pod `uid` (id, stop signal); none when they cannot be listed.
fn live_containers(runtime: &dyn Runtime, uid: &str) -> Vec<(String, i32)> {
    runtime
        .list_containers()
        .map(|list| {
            list.into_iter()
                .filter(|c| c.meta.pod_uid == uid && !matches!(c.state, ContainerState::Exited(_)))
                .map(|c| (c.meta.id, c.meta.stop_signal))
                .collect()
        })
        .unwrap_or_default()
}

/// A fixed pool of worker threads.
pub struct ThreadPool {
    tx: Mutex<Option<Sender<Job>>>,
    workers: Vec<thread::JoinHandle<()>>,
}

impl ThreadPool {
    /// Starts `n` workers that run jobs against `runtime` and `images` and hand results to
    /// `done`.
    pub fn new(
        n: usize,
        runtime: Arc<dyn Runtime>,
        images: Arc<dyn ImageService>,
        done: impl Fn(JobResult) + Send + Sync + 'static,
    ) -> std::io::Result<ThreadPool> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let done = Arc::new(done);
        let mut workers = Vec::new();
        for i in 0..n.max(1) {
            let rx: Arc<Mutex<Receiver<Job>>> = Arc::clone(&rx);
            let runtime = Arc::clone(&runtime);
            let images = Arc::clone(&images);
            let done = Arc::clone(&done);
            workers.push(
                thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || loop {
                        let job = {
                            // Only one worker waits on the queue at a time; a poisoned lock
                            // (a worker panicked while waiting) still guards a valid receiver.
                            let guard = rx.lock().unwrap_or_else(|p| p.into_inner());
                            guard.recv()
                        };
                        match job {
                            Ok(job) => {
                                crate::tp!(
                                    "{}",
                                    match &job {
                                        Job::CreateSandbox { .. } => "job.pick.sandbox",
                                        Job::StartContainer { .. } => "job.pick.start",
                                        _ => "job.pick.other",
                                    }
                                );
                                let emit = |r| done(r);
                                let r = run_job(runtime.as_ref(), images.as_ref(), job, &emit);
                                crate::tp!("job.done");
                                done(r)
                            }
                            Err(_) => return,
                        }
                    })?,
            );
        }
        Ok(ThreadPool {
            tx: Mutex::new(Some(tx)),
            workers,
        })
    }
}

impl Executor for ThreadPool {
    fn submit(&self, job: Job) {
        let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = guard.as_ref() {
            // Workers only exit once the sender is dropped, so sending cannot fail before.
            let _ = tx.send(job);
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}
