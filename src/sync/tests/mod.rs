//! Sync-loop unit tests against a recording fake runtime, an inline executor and a fake clock.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;

use super::executor::{run_job, Executor, ImageError, ImageService, Job, JobResult, PulledImage};
use super::{Clock, SyncConfig, SyncEvent, SyncLoop};
use crate::prober::scheduler::{ProbeControl, ProbeTarget};
use crate::runtime::{
    ContainerInfo, ContainerMeta, ContainerRequest, ContainerState, ExecOutput, ExitRecord,
    Runtime, RuntimeError, RuntimeEvent, SandboxInfo,
};
use crate::sources::SourceEvent;
use crate::status::{Snapshot, SnapshotCell};

/// What the fake runtime was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    RunSandbox(String),
    RemoveSandbox(String),
    Start {
        pod: String,
        container: String,
        restart: u32,
    },
    Signal {
        id: String,
        signal: i32,
    },
    Remove(String),
    Exec {
        id: String,
        cmd: Vec<String>,
    },
}

#[derive(Default)]
struct FakeState {
    calls: Vec<Call>,
    sandboxes: BTreeSet<String>,
    containers: BTreeMap<String, ContainerInfo>,
    next: u32,
    /// Images that "exist"; anything else fails with ImageNotPresent.
    missing_images: BTreeSet<String>,
    /// Exit code of exec'd commands by their first word (0 when absent).
    exec_exit: BTreeMap<String, i32>,
    /// Pods with data on disk (emptyDir volumes).
    pod_data: BTreeSet<String>,
    /// Sandboxes whose namespaces died: starts into them fail until they are created again.
    dead_sandboxes: BTreeSet<String>,
    /// Highest log file restart count by container name.
    log_counts: BTreeMap<String, u32>,
    /// Sandbox removals that fail before one succeeds.
    failing_sandbox_removals: u32,
    /// Images whose containers the runtime refuses to start (RunContainerError).
    refused_images: BTreeSet<String>,
    /// Images whose pods' sandboxes cannot be created.
    refused_sandbox_images: BTreeSet<String>,
    /// The IPs every sandbox gets from its (fake) pod network.
    pod_ips: Vec<String>,
    /// The containers handed to the runtime with their pod's sandbox, in one job.
    with_sandbox: Vec<String>,
}

#[derive(Clone, Default)]
struct FakeRuntime {
    state: Arc<Mutex<FakeState>>,
}

impl FakeRuntime {
    fn calls(&self) -> Vec<Call> {
        self.state.lock().expect("lock").calls.clone()
    }
    fn starts(&self) -> Vec<(String, u32)> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Start {
                    container, restart, ..
                } => Some((container, restart)),
                _ => None,
            })
            .collect()
    }
    /// How many times the sandbox of pod `uid` was asked to be removed.
    fn sandbox_removals(&self, uid: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| matches!(c, Call::RemoveSandbox(u) if u == uid))
            .count()
    }
    fn running_ids(&self) -> Vec<String> {
        let st = self.state.lock().expect("lock");
        st.containers
            .values()
            .filter(|c| matches!(c.state, ContainerState::Running { .. }))
            .map(|c| c.meta.id.clone())
            .collect()
    }
    /// What a reboot leaves: no sandbox, every container exited (the live ones with
    /// containerd's unknown status, as `LinuxRuntime` reports containers of an earlier boot),
    /// and the pods' data on disk.
    fn reboot(&self) {
        let mut st = self.state.lock().expect("lock");
        let uids: Vec<String> = st.sandboxes.iter().cloned().collect();
        st.pod_data.extend(uids);
        st.sandboxes.clear();
        for c in st.containers.values_mut() {
            if !matches!(c.state, ContainerState::Exited(_)) {
                c.state = ContainerState::Exited(ExitRecord {
                    exit_code: 255,
                    signal: None,
                    oom_killed: false,
                    started_at: "2026-01-01T00:00:00Z".into(),
                    finished_at: "2026-01-01T00:10:00Z".into(),
                    reason: "Unknown".into(),
                    message: Some("the node rebooted".into()),
                });
            }
        }
    }
    /// Marks a container exited and returns the event the watcher would send.
    fn exit(&self, id: &str, code: i32) -> SyncEvent {
        let mut st = self.state.lock().expect("lock");
        let c = st.containers.get_mut(id).expect("container");
        let exit = ExitRecord {
            exit_code: code,
            signal: None,
            oom_killed: false,
            started_at: "2026-01-01T00:00:00Z".into(),
            finished_at: "2026-01-01T00:00:01Z".into(),
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
        };
        c.state = ContainerState::Exited(exit.clone());
        SyncEvent::Runtime(RuntimeEvent::ContainerExited {
            id: id.to_string(),
            pod_uid: c.meta.pod_uid.clone(),
            exit,
        })
    }
}

impl Runtime for FakeRuntime {
    fn run_pod_sandbox(&self, pod: &Pod) -> Result<SandboxInfo, RuntimeError> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let mut st = self.state.lock().expect("lock");
        st.calls.push(Call::RunSandbox(uid.clone()));
        let images = pod.spec.iter().flat_map(|s| &s.containers);
        if let Some(image) = images
            .filter_map(|c| c.image.clone())
            .find(|i| st.refused_sandbox_images.contains(i))
        {
            return Err(RuntimeError::Start {
                id: String::new(),
                message: format!("volume of a pod of {image}: mount: permission denied"),
            });
        }
        st.sandboxes.insert(uid.clone());
        st.dead_sandboxes.remove(&uid);
        st.pod_data.insert(uid.clone());
        Ok(SandboxInfo {
            id: String::new(),
            pod_ips: st.pod_ips.clone(),
            pod_uid: uid,
            pod_namespace: String::new(),
            pod_name: String::new(),
            host_network: false,
            hostname: String::new(),
            created_at: String::new(),
            volumes: BTreeMap::new(),
        })
    }
    fn remove_pod_sandbox(&self, pod_uid: &str) -> Result<(), RuntimeError> {
        let mut st = self.state.lock().expect("lock");
        st.calls.push(Call::RemoveSandbox(pod_uid.to_string()));
        if st.failing_sandbox_removals > 0 {
            st.failing_sandbox_removals -= 1;
            return Err(RuntimeError::NotFound {
                id: format!("sandbox {pod_uid}"),
            });
        }
        st.sandboxes.remove(pod_uid);
        st.pod_data.remove(pod_uid);
        Ok(())
    }
    fn list_pod_data(&self) -> Result<Vec<String>, RuntimeError> {
        Ok(self
            .state
            .lock()
            .expect("lock")
            .pod_data
            .iter()
            .cloned()
            .collect())
    }
    fn restart_count_from_logs(&self, _pod: &Pod, container: &str) -> Option<u32> {
        self.state
            .lock()
            .expect("lock")
            .log_counts
            .get(container)
            .copied()
    }
    fn list_pod_sandboxes(&self) -> Result<Vec<SandboxInfo>, RuntimeError> {
        let st = self.state.lock().expect("lock");
        Ok(st
            .sandboxes
            .iter()
            .map(|u| SandboxInfo {
                id: String::new(),
                pod_ips: st.pod_ips.clone(),
                pod_uid: u.clone(),
                pod_namespace: String::new(),
                pod_name: String::new(),
                host_network: false,
                hostname: String::new(),
                created_at: String::new(),
                volumes: BTreeMap::new(),
            })
            .collect())
    }
    fn run_pod_sandbox_and_start(
        &self,
        pod: &Pod,
        first: &ContainerRequest<'_>,
        sandbox_done: &mut dyn FnMut(&Result<SandboxInfo, RuntimeError>),
    ) -> Option<Result<ContainerInfo, RuntimeError>> {
        let name = first.container.name.clone();
        self.state.lock().expect("lock").with_sandbox.push(name);
        crate::runtime::sandbox_then_start(self, pod, first, sandbox_done)
    }
    fn start_container(&self, req: &ContainerRequest<'_>) -> Result<ContainerInfo, RuntimeError> {
        let mut st = self.state.lock().expect("lock");
        let uid = req.pod.metadata.uid.clone().unwrap_or_default();
        st.calls.push(Call::Start {
            pod: uid.clone(),
            container: req.container.name.clone(),
            restart: req.restart_count,
        });
        if st.dead_sandboxes.contains(&uid) {
            return Err(RuntimeError::SandboxNotReady {
                pod: String::new(),
                message: "ns/net is not a live namespace".into(),
            });
        }
        let image = req.container.image.clone().unwrap_or_default();
        if st.missing_images.contains(&image) {
            return Err(RuntimeError::ImageNotPresent {
                pod: String::new(),
                image,
            });
        }
        if st.refused_images.contains(&image) {
            return Err(RuntimeError::Start {
                id: String::new(),
                message: format!("exec of {image}'s command: permission denied"),
            });
        }
        st.next += 1;
        let id = format!("c{}", st.next);
        let info = ContainerInfo {
            meta: ContainerMeta {
                id: id.clone(),
                pod_uid: uid,
                pod_namespace: "default".into(),
                pod_name: String::new(),
                container_name: req.container.name.clone(),
                kind: req.kind,
                restart_count: req.restart_count,
                image,
                image_digest: String::new(),
                log_path: PathBuf::from(format!("/logs/{id}.log")),
                stop_signal: libc::SIGTERM,
                created_at: format!("{:08}", st.next),
                boot_id: "boot-1".into(),
            },
            state: ContainerState::Running {
                pid: 1000 + st.next as i32,
                started_at: "2026-01-01T00:00:00Z".into(),
            },
        };
        st.containers.insert(id, info.clone());
        Ok(info)
    }
    fn signal_container(&self, id: &str, signal: i32) -> Result<(), RuntimeError> {
        self.state.lock().expect("lock").calls.push(Call::Signal {
            id: id.to_string(),
            signal,
        });
        Ok(())
    }
    fn remove_container(&self, id: &str) -> Result<(), RuntimeError> {
        let mut st = self.state.lock().expect("lock");
        st.calls.push(Call::Remove(id.to_string()));
        st.containers.remove(id);
        Ok(())
    }
    fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        let st = self.state.lock().expect("lock");
        let mut v: Vec<ContainerInfo> = st.containers.values().cloned().collect();
        v.sort_by(|a, b| a.meta.created_at.cmp(&b.meta.created_at));
        Ok(v)
    }
    fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        _timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        let mut st = self.state.lock().expect("lock");
        st.calls.push(Call::Exec {
            id: id.to_string(),
            cmd: cmd.to_vec(),
        });
        let code = cmd
            .first()
            .and_then(|c| st.exec_exit.get(c))
            .copied()
            .unwrap_or(0);
        Ok(ExecOutput {
            exit_code: code,
            stdout: format!("exit {code}").into_bytes(),
            stderr: Vec::new(),
            timed_out: false,
        })
    }
}

#[derive(Default)]
struct FakeImagesState {
    /// Images already in the store.
    present: BTreeSet<String>,
    /// Images whose pull fails, with the error.
    failing: BTreeMap<String, String>,
    /// Every pull asked for, in order.
    pulls: Vec<String>,
}

/// An image service whose pulls succeed unless the image is listed as failing.
#[derive(Clone, Default)]
struct FakeImages {
    state: Arc<Mutex<FakeImagesState>>,
}

impl FakeImages {
    fn pulls(&self) -> Vec<String> {
        self.state.lock().expect("lock").pulls.clone()
    }
}

impl ImageService for FakeImages {
    fn is_present(&self, image: &str) -> Result<bool, ImageError> {
        Ok(self.state.lock().expect("lock").present.contains(image))
    }
    fn pull(&self, image: &str) -> Result<PulledImage, ImageError> {
        let mut st = self.state.lock().expect("lock");
        st.pulls.push(image.to_string());
        if let Some(e) = st.failing.get(image) {
            return Err(ImageError::Pull {
                image: image.to_string(),
                message: e.clone(),
            });
        }
        st.present.insert(image.to_string());
        Ok(PulledImage {
            digest: format!("sha256:{:064x}", st.pulls.len()),
            size: 1234,
        })
    }
}

/// Runs jobs at once and queues their results for the test to feed back. Hook jobs are held
/// instead while `hold_hooks` is set (a hook that is still running).
struct InlineExecutor {
    runtime: FakeRuntime,
    images: FakeImages,
    done: Arc<Mutex<VecDeque<JobResult>>>,
    hold_hooks: Arc<Mutex<Option<Vec<Job>>>>,
}

impl Executor for InlineExecutor {
    fn submit(&self, job: Job) {
        if matches!(job, Job::Hook { .. }) {
            if let Some(held) = self.hold_hooks.lock().expect("lock").as_mut() {
                held.push(job);
                return;
            }
        }
        let emit = |r| self.done.lock().expect("lock").push_back(r);
        let r = run_job(&self.runtime, &self.images, job, &emit);
        self.done.lock().expect("lock").push_back(r);
    }
}

/// Records what the sync loop asks the prober.
#[derive(Clone, Default)]
struct FakeProber {
    log: Arc<Mutex<Vec<String>>>,
}

impl ProbeControl for FakeProber {
    fn add(&self, target: ProbeTarget) {
        self.log
            .lock()
            .expect("lock")
            .push(format!("add {}", target.container_id));
    }
    fn remove(&self, container_id: &str) {
        self.log
            .lock()
            .expect("lock")
            .push(format!("remove {container_id}"));
    }
}

#[derive(Clone)]
struct FakeClock {
    base: Instant,
    offset: Arc<Mutex<Duration>>,
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.base + *self.offset.lock().expect("lock")
    }
    fn wall(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
            + Duration::from_secs(1_767_225_600)
            + *self.offset.lock().expect("lock")
    }
}

struct Harness {
    sync: SyncLoop,
    rt: FakeRuntime,
    images: FakeImages,
    done: Arc<Mutex<VecDeque<JobResult>>>,
    hold_hooks: Arc<Mutex<Option<Vec<Job>>>>,
    prober: FakeProber,
    clock: FakeClock,
    snapshots: SnapshotCell,
    store_dir: PathBuf,
    _dir: Option<tempfile::TempDir>,
}

fn harness_with(rt: FakeRuntime, store_dir: PathBuf) -> Harness {
    harness_full(rt, FakeImages::default(), store_dir, None)
}

fn harness_with_images(rt: FakeRuntime, images: FakeImages, store_dir: PathBuf) -> Harness {
    harness_full(rt, images, store_dir, None)
}

fn harness_allocatable(
    rt: FakeRuntime,
    store_dir: PathBuf,
    allocatable: Option<crate::pod::resources::Amounts>,
) -> Harness {
    harness_full(rt, FakeImages::default(), store_dir, allocatable)
}

fn harness_full(
    rt: FakeRuntime,
    images: FakeImages,
    store_dir: PathBuf,
    allocatable: Option<crate::pod::resources::Amounts>,
) -> Harness {
    let done = Arc::new(Mutex::new(VecDeque::new()));
    let clock = FakeClock {
        base: Instant::now(),
        offset: Arc::new(Mutex::new(Duration::ZERO)),
    };
    let snapshots = SnapshotCell::default();
    let hold_hooks = Arc::new(Mutex::new(None));
    let prober = FakeProber::default();
    let mut sync = SyncLoop::new(
        SyncConfig {
            node_name: "node1".into(),
            expect_file_source: true,
            expect_url_source: false,
            sources_ready_timeout: Duration::from_secs(30),
            store_dir: store_dir.clone(),
            host_ip: "10.0.0.1".into(),
            allocatable,
            allocatable_ephemeral_storage: None,
            // A fixture next to the store: absent (no huge pages) unless a test writes one.
            hugepages_dir: Some(store_dir.with_file_name("hugepages")),
            security: crate::security::NodeSecurity::default(),
            only_pod: None,
            rollback_after: Duration::from_secs(300),
            pod_network: false,
            metrics: Default::default(),
        },
        Arc::new(rt.clone()),
        Box::new(InlineExecutor {
            runtime: rt.clone(),
            images: images.clone(),
            done: Arc::clone(&done),
            hold_hooks: Arc::clone(&hold_hooks),
        }),
        Box::new(clock.clone()),
        snapshots.clone(),
    )
    .expect("sync loop");
    sync.set_prober(Box::new(prober.clone()));
    let mut h = Harness {
        sync,
        rt,
        images,
        done,
        hold_hooks,
        prober,
        clock,
        snapshots,
        store_dir,
        _dir: None,
    };
    h.pump();
    h
}

fn harness() -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with(FakeRuntime::default(), dir.path().join("static-pods"));
    h._dir = Some(dir);
    h
}

impl Harness {
    /// Feeds queued job results back until none are left.
    fn pump(&mut self) {
        loop {
            let next = self.done.lock().expect("lock").pop_front();
            match next {
                Some(r) => self.sync.handle(SyncEvent::Work(Box::new(r))),
                None => break,
            }
        }
        // The records are written on the store's thread: the tests read them as the loop
        // left them.
        self.sync.flush_desired();
    }
    fn send(&mut self, ev: SyncEvent) {
        self.sync.handle(ev);
        self.pump();
    }
    fn file(&mut self, name: &str, data: &str) {
        self.send(SyncEvent::Source(SourceEvent::FileChanged {
            path: PathBuf::from(format!("/m/{name}")),
            data: data.as_bytes().to_vec(),
        }));
    }
    fn remove_file(&mut self, name: &str) {
        self.send(SyncEvent::Source(SourceEvent::FileRemoved {
            path: PathBuf::from(format!("/m/{name}")),
        }));
    }
    fn scan_done(&mut self) {
        self.send(SyncEvent::Source(SourceEvent::FileScanComplete {
            dir: PathBuf::from("/m"),
        }));
    }
    fn advance(&mut self, d: Duration) {
        *self.clock.offset.lock().expect("lock") += d;
        self.sync.tick();
        self.pump();
    }
    fn snap(&self) -> Arc<Snapshot> {
        self.snapshots.get()
    }
    fn uid(&self, pod: &str) -> String {
        self.snap()
            .find_pod(pod)
            .and_then(|v| v.pod.metadata.uid.clone())
            .expect("uid")
    }
    fn waiting_reason(&self, pod: &str, container: &str) -> Option<String> {
        let snap = self.snap();
        let v = snap.find_pod(pod)?;
        let st = v.pod.status.as_ref()?;
        st.container_statuses
            .iter()
            .flatten()
            .chain(st.init_container_statuses.iter().flatten())
            .find(|c| c.name == container)?
            .state
            .as_ref()?
            .waiting
            .as_ref()?
            .reason
            .clone()
    }
}

fn pod_yaml(name: &str, image: &str, extra: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels: {{app: {name}}}\nspec:\n{extra}  containers:\n  - name: main\n    image: {image}\n"
    )
}

mod admission;
mod apipods;
mod eviction;
mod images;
mod lifecycle;
mod probes;
mod restart;
mod resync;
mod rollback;
