//! Sync-loop unit tests against a recording fake runtime, an inline executor and a fake clock.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::Pod;

use super::executor::{run_job, Executor, ImageService, Job, JobResult, PulledImage};
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
        st.sandboxes.insert(uid.clone());
        st.dead_sandboxes.remove(&uid);
        st.pod_data.insert(uid.clone());
        Ok(SandboxInfo {
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
    fn is_present(&self, image: &str) -> Result<bool, String> {
        Ok(self.state.lock().expect("lock").present.contains(image))
    }
    fn pull(&self, image: &str) -> Result<PulledImage, String> {
        let mut st = self.state.lock().expect("lock");
        st.pulls.push(image.to_string());
        if let Some(e) = st.failing.get(image) {
            return Err(e.clone());
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
    allocatable: Option<crate::cgroups::resources::Amounts>,
) -> Harness {
    harness_full(rt, FakeImages::default(), store_dir, allocatable)
}

fn harness_full(
    rt: FakeRuntime,
    images: FakeImages,
    store_dir: PathBuf,
    allocatable: Option<crate::cgroups::resources::Amounts>,
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
            security: crate::security::NodeSecurity::default(),
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
                None => return,
            }
        }
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

#[test]
fn add_starts_sandbox_then_container() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let calls = h.rt.calls();
    assert!(matches!(calls[0], Call::RunSandbox(_)), "{calls:?}");
    assert_eq!(h.rt.starts(), vec![("main".to_string(), 0)]);
    let snap = h.snap();
    let v = snap.find_pod("web").expect("pod");
    assert_eq!(v.pod.metadata.name.as_deref(), Some("web-node1"));
    let st = v.pod.status.as_ref().expect("status");
    assert_eq!(st.phase.as_deref(), Some("Running"));
    let ready = st
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == "Ready")
        .expect("ready");
    assert_eq!(ready.status, "True");
}

#[test]
fn metadata_only_edit_restarts_nothing() {
    let mut h = harness();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let before = h.rt.calls().len();
    h.file(
        "web.yaml",
        &pod_yaml("web", "busybox", "").replace("app: web", "app: web, tier: front"),
    );
    assert_eq!(h.rt.calls().len(), before, "{:?}", h.rt.calls());
    let snap = h.snap();
    let labels = snap
        .find_pod("web")
        .expect("pod")
        .pod
        .metadata
        .labels
        .clone()
        .expect("labels");
    assert_eq!(labels.get("tier").map(String::as_str), Some("front"));
}

#[test]
fn spec_edit_replaces_the_pod_after_the_old_one_stopped() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let old_id = h.rt.running_ids()[0].clone();
    h.file("web.yaml", &pod_yaml("web", "busybox:v2", ""));
    // The old container got its stop signal; the new one waits for it.
    assert!(h.rt.calls().contains(&Call::Signal {
        id: old_id.clone(),
        signal: libc::SIGTERM
    }));
    assert_eq!(h.rt.starts().len(), 1);
    let ev = h.rt.exit(&old_id, 143);
    h.send(ev);
    let starts = h.rt.starts();
    assert_eq!(starts.len(), 2, "{:?}", h.rt.calls());
    assert!(h.rt.calls().contains(&Call::Remove(old_id)));
    let snap = h.snap();
    assert!(snap.events.iter().any(|e| e.reason == "Replaced"));
}

/// A manifest edited back to an earlier content gets that content's uid again, maybe while
/// that generation is still stopping. The removal of a uid kills and deletes every container
/// and the sandbox of that uid, so the new generation must wait for it: otherwise its new
/// container is killed by the removal (and its exit taken for the old one's), or its sandbox
/// and cgroups deleted under it.
#[test]
fn edit_back_to_a_uid_still_being_removed_waits_for_that_removal() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let old_id = h.rt.running_ids()[0].clone();
    h.file("web.yaml", &pod_yaml("web", "busybox:v2", ""));
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    assert_eq!(h.rt.starts().len(), 1, "{:?}", h.rt.calls());
    let ev = h.rt.exit(&old_id, 143);
    h.send(ev);
    let calls = h.rt.calls();
    assert_eq!(h.rt.starts().len(), 2, "{calls:?}");
    let removed = calls
        .iter()
        .position(|c| *c == Call::Remove(old_id.clone()))
        .expect("old container removed");
    let started = calls
        .iter()
        .rposition(|c| matches!(c, Call::Start { .. }))
        .expect("new start");
    assert!(removed < started, "{calls:?}");
    let new_id = h.rt.running_ids()[0].clone();
    assert!(!calls
        .iter()
        .any(|c| matches!(c, Call::Signal { id, .. } if *id == new_id)));
    // The new generation keeps its record in the store.
    assert_eq!(std::fs::read_dir(&h.store_dir).expect("store").count(), 1);
}

#[test]
fn removal_stops_with_grace_then_kills() {
    let mut h = harness();
    h.scan_done();
    h.file(
        "web.yaml",
        &pod_yaml("web", "busybox", "  terminationGracePeriodSeconds: 5\n"),
    );
    let id = h.rt.running_ids()[0].clone();
    h.remove_file("web.yaml");
    assert!(h.rt.calls().contains(&Call::Signal {
        id: id.clone(),
        signal: libc::SIGTERM
    }));
    h.advance(Duration::from_secs(4));
    assert!(!h.rt.calls().contains(&Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL
    }));
    h.advance(Duration::from_secs(2));
    assert!(h.rt.calls().contains(&Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL
    }));
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    let calls = h.rt.calls();
    assert!(
        calls.iter().any(|c| matches!(c, Call::RemoveSandbox(_))),
        "{calls:?}"
    );
    assert!(h.snap().pods.is_empty());
    assert_eq!(std::fs::read_dir(&h.store_dir).expect("store").count(), 0);
}

#[test]
fn crash_loop_backoff_steps_and_reset() {
    let mut h = harness();
    h.file("crash.yaml", &pod_yaml("crash", "busybox", ""));
    // Crash 1: immediate restart.
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 1);
    h.send(ev);
    assert_eq!(h.rt.starts().len(), 2);
    let mut expected = 2;
    for delay in [10u64, 20, 40, 80, 160, 300, 300] {
        h.advance(Duration::from_secs(1));
        let id = h.rt.running_ids()[0].clone();
        let ev = h.rt.exit(&id, 1);
        h.send(ev);
        assert_eq!(
            h.waiting_reason("crash", "main").as_deref(),
            Some("CrashLoopBackOff")
        );
        h.advance(Duration::from_secs(delay - 1));
        assert_eq!(
            h.rt.starts().len(),
            expected,
            "still backing off before {delay}s"
        );
        h.advance(Duration::from_secs(1));
        expected += 1;
        assert_eq!(h.rt.starts().len(), expected, "restarted after {delay}s");
    }
    let restart_counts: Vec<u32> = h.rt.starts().iter().map(|(_, r)| *r).collect();
    assert_eq!(restart_counts, (0..expected as u32).collect::<Vec<_>>());
    // Ten minutes of clean running reset the backoff: the next crash restarts at once.
    h.advance(Duration::from_secs(601));
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 1);
    h.send(ev);
    assert_eq!(h.rt.starts().len(), expected + 1);
    let snap = h.snap();
    let st = snap
        .find_pod("crash")
        .expect("pod")
        .pod
        .status
        .clone()
        .expect("status");
    let cs = &st.container_statuses.expect("cs")[0];
    assert_eq!(cs.restart_count, expected as i32);
    assert!(cs
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .is_some());
}

#[test]
fn restart_policies() {
    for (policy, code, restarts) in [
        ("Always", 0, true),
        ("OnFailure", 0, false),
        ("OnFailure", 2, true),
        ("Never", 2, false),
    ] {
        let mut h = harness();
        h.file(
            "p.yaml",
            &pod_yaml("p", "busybox", &format!("  restartPolicy: {policy}\n")),
        );
        let id = h.rt.running_ids()[0].clone();
        let ev = h.rt.exit(&id, code);
        h.send(ev);
        assert_eq!(h.rt.starts().len() == 2, restarts, "{policy} exit {code}");
        if !restarts {
            let snap = h.snap();
            let phase = snap
                .find_pod("p")
                .expect("pod")
                .pod
                .status
                .clone()
                .expect("st")
                .phase;
            let want = if code == 0 { "Succeeded" } else { "Failed" };
            assert_eq!(phase.as_deref(), Some(want), "{policy} exit {code}");
        }
    }
}

#[test]
fn init_containers_run_in_order_before_apps() {
    let mut h = harness();
    h.file(
        "i.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: i}\nspec:\n  initContainers:\n  - {name: one, image: busybox}\n  - {name: two, image: busybox}\n  containers:\n  - {name: app, image: busybox}\n",
    );
    assert_eq!(h.rt.starts(), vec![("one".to_string(), 0)]);
    assert_eq!(
        h.waiting_reason("i", "app").as_deref(),
        Some("PodInitializing")
    );
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 1);
    h.send(ev);
    // A failed init container is retried (restartPolicy Always).
    assert_eq!(h.rt.starts().len(), 2);
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 0);
    h.send(ev);
    let names: Vec<String> = h.rt.starts().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["one", "one", "two", "app"]);
}

#[test]
fn last_known_good_for_every_bad_input() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let calls = h.rt.calls().len();
    for bad in [
        String::new(),
        "apiVersion: v1\nkind: Pod\nmetadata: [".to_string(),
        pod_yaml("web", "", ""),
        pod_yaml("Web_Bad", "busybox", ""),
    ] {
        h.file("web.yaml", &bad);
        assert_eq!(h.rt.calls().len(), calls, "nothing stopped for {bad:?}");
        let snap = h.snap();
        let v = snap.find_pod("web").expect("still there");
        assert!(v.source_error.is_some(), "error shown for {bad:?}");
        assert!(snap.events.iter().any(|e| e.reason == "SourceError"));
    }
    h.send(SyncEvent::Source(SourceEvent::FileError {
        path: PathBuf::from("/m/web.yaml"),
        message: "file is over 10 MB".into(),
    }));
    assert_eq!(h.rt.calls().len(), calls);
    h.remove_file("web.yaml");
    assert!(
        h.rt.calls().len() > calls,
        "removing the file stops the pod"
    );
}

#[test]
fn url_errors_keep_pods() {
    let mut h = harness();
    let url = "http://127.0.0.1:9/pods".to_string();
    h.send(SyncEvent::Source(SourceEvent::UrlChanged {
        url: url.clone(),
        data: pod_yaml("u", "busybox", "").into_bytes(),
    }));
    let calls = h.rt.calls().len();
    h.send(SyncEvent::Source(SourceEvent::UrlError {
        url,
        message: "timed out".into(),
    }));
    assert_eq!(h.rt.calls().len(), calls);
    assert!(h.snap().find_pod("u").expect("pod").source_error.is_some());
}

#[test]
fn duplicate_names_refuse_the_second_file() {
    let mut h = harness();
    h.file("a.yaml", &pod_yaml("web", "busybox", ""));
    h.file("b.yaml", &pod_yaml("web", "nginx", ""));
    assert_eq!(h.rt.starts().len(), 1);
    let snap = h.snap();
    let e = snap
        .events
        .iter()
        .find(|e| e.reason == "DuplicatePod")
        .expect("event");
    assert!(
        e.message.contains("/m/a.yaml") && e.message.contains("/m/b.yaml"),
        "{}",
        e.message
    );
}

#[test]
fn missing_image_is_err_image_never_pull_with_backoff() {
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .missing_images
        .insert("ghost".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with(rt, dir.path().join("static-pods"));
    let yaml = pod_yaml("g", "ghost", "").replace(
        "    image: ghost\n",
        "    image: ghost\n    imagePullPolicy: Never\n",
    );
    h.file("g.yaml", &yaml);
    assert_eq!(
        h.waiting_reason("g", "main").as_deref(),
        Some("ErrImageNeverPull")
    );
    assert_eq!(h.rt.starts().len(), 1);
    h.advance(Duration::from_secs(11));
    assert_eq!(h.rt.starts().len(), 2);
    assert!(h.images.pulls().is_empty(), "Never never pulls");
}

fn events_of(h: &Harness, reason: &str) -> Vec<String> {
    h.snap()
        .events
        .iter()
        .filter(|e| e.reason == reason)
        .map(|e| e.message.clone())
        .collect()
}

#[test]
fn failed_pulls_are_err_image_pull_then_image_pull_backoff() {
    let images = FakeImages::default();
    images
        .state
        .lock()
        .expect("lock")
        .failing
        .insert("reg.local/app:1".into(), "connection refused".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with_images(
        FakeRuntime::default(),
        images.clone(),
        dir.path().join("static-pods"),
    );
    h.file("a.yaml", &pod_yaml("a", "reg.local/app:1", ""));
    assert_eq!(images.pulls().len(), 1);
    assert_eq!(
        h.waiting_reason("a", "main").as_deref(),
        Some("ErrImagePull")
    );
    assert!(h.rt.starts().is_empty(), "nothing starts without its image");
    let failed = events_of(&h, "Failed");
    assert!(
        failed
            .iter()
            .any(|m| m.contains("failed to pull image \"reg.local/app:1\": connection refused")),
        "{failed:?}"
    );
    assert!(
        failed.iter().any(|m| m == "Error: ErrImagePull"),
        "{failed:?}"
    );
    assert_eq!(
        events_of(&h, "Pulling"),
        vec!["Pulling image \"reg.local/app:1\""]
    );
    // Between attempts it shows ImagePullBackOff; attempts come 10 s, then 20 s apart.
    h.advance(Duration::from_secs(5));
    assert_eq!(
        h.waiting_reason("a", "main").as_deref(),
        Some("ImagePullBackOff")
    );
    assert_eq!(
        events_of(&h, "BackOff"),
        vec!["Back-off pulling image \"reg.local/app:1\""]
    );
    h.advance(Duration::from_secs(5));
    assert_eq!(images.pulls().len(), 2);
    assert_eq!(
        h.waiting_reason("a", "main").as_deref(),
        Some("ErrImagePull")
    );
    h.advance(Duration::from_secs(19));
    assert_eq!(images.pulls().len(), 2, "second backoff is 20 s");
    // The registry comes back: the pull succeeds and the container starts as the first
    // instance (failed pulls are not restarts).
    images.state.lock().expect("lock").failing.clear();
    h.advance(Duration::from_secs(1));
    assert_eq!(images.pulls().len(), 3);
    assert_eq!(h.rt.starts(), vec![("main".to_string(), 0)]);
    let pulled = events_of(&h, "Pulled");
    assert!(
        pulled.iter().any(
            |m| m.starts_with("Successfully pulled image \"reg.local/app:1\" in ")
                && m.ends_with("Image size: 1234 bytes.")
        ),
        "{pulled:?}"
    );
    let snap = h.snap();
    let st = snap
        .find_pod("a")
        .and_then(|v| v.pod.status.clone())
        .expect("status");
    assert_eq!(st.container_statuses.expect("statuses")[0].restart_count, 0);
}

#[test]
fn if_not_present_uses_the_local_image_and_always_pulls_every_start() {
    let images = FakeImages::default();
    images
        .state
        .lock()
        .expect("lock")
        .present
        .insert("busybox:1.36".into());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with_images(
        FakeRuntime::default(),
        images.clone(),
        dir.path().join("static-pods"),
    );
    h.file("p.yaml", &pod_yaml("p", "busybox:1.36", ""));
    assert!(images.pulls().is_empty());
    assert_eq!(
        events_of(&h, "Pulled"),
        vec!["Container image \"busybox:1.36\" already present on machine"]
    );
    // No tag: Always, so every start pulls, restarts included.
    h.file("l.yaml", &pod_yaml("l", "busybox", ""));
    assert_eq!(images.pulls(), vec!["busybox"]);
    assert_eq!(h.rt.starts().len(), 2);
    // Crash the "l" pod's container (the one started last): its restart pulls again.
    let ids = h.rt.running_ids();
    let l_id = ids
        .iter()
        .find(|i| {
            !h.rt.state.lock().expect("lock").containers[*i]
                .meta
                .image
                .contains("1.36")
        })
        .expect("l container")
        .clone();
    let ev = h.rt.exit(&l_id, 1);
    h.send(ev);
    assert_eq!(h.rt.starts().len(), 3);
    assert_eq!(images.pulls(), vec!["busybox", "busybox"]);
}

#[test]
fn restart_reconciles_with_what_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    // First daemon: two pods run.
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("keep.yaml", &pod_yaml("keep", "busybox", ""));
    h1.file("gone.yaml", &pod_yaml("gone", "busybox", ""));
    let keep_uid = h1.uid("keep");
    let running_before = rt.running_ids();
    assert_eq!(running_before.len(), 2);
    // The daemon dies; containers and the store stay. A second daemon starts: keep.yaml is
    // still there, gone.yaml was deleted meanwhile.
    drop(h1);
    let mut h2 = harness_with(rt.clone(), store);
    let starts_before = rt.starts().len();
    h2.file("keep.yaml", &pod_yaml("keep", "busybox", ""));
    h2.scan_done();
    assert_eq!(
        rt.starts().len(),
        starts_before,
        "nothing started again: {:?}",
        rt.calls()
    );
    let (keep_id, gone_id) = {
        let st = rt.state.lock().expect("lock");
        let keep = running_before
            .iter()
            .find(|id| st.containers[*id].meta.pod_uid == keep_uid)
            .cloned()
            .expect("keep container");
        let gone = running_before
            .iter()
            .find(|id| **id != keep)
            .cloned()
            .expect("gone container");
        (keep, gone)
    };
    assert!(rt.calls().contains(&Call::Signal {
        id: gone_id,
        signal: libc::SIGTERM
    }));
    assert!(!rt
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Signal { id, .. } if *id == keep_id)));
    // The re-adopted container's exit is handled like any other: restarted.
    let ev = rt.exit(&keep_id, 1);
    h2.send(ev);
    assert_eq!(rt.starts().len(), starts_before + 1);
}

/// What a crash can leave next to a pod's running container: a second live container of the
/// same slot, and an exited one with a higher restart count.
fn leftovers_of_a_crash(rt: &FakeRuntime, running: &str) -> (String, String) {
    let mut st = rt.state.lock().expect("lock");
    let orig = st.containers[running].clone();
    let mut dup = orig.clone();
    dup.meta.id = "dup".into();
    dup.meta.created_at = "99999998".into();
    let mut dead = orig;
    dead.meta.id = "dead".into();
    dead.meta.restart_count = 5;
    dead.meta.created_at = "99999999".into();
    dead.state = ContainerState::Exited(ExitRecord {
        exit_code: 137,
        signal: None,
        oom_killed: false,
        started_at: String::new(),
        finished_at: String::new(),
        reason: "ContainerStatusUnknown".into(),
        message: None,
    });
    st.containers.insert("dup".into(), dup);
    st.containers.insert("dead".into(), dead);
    ("dup".into(), "dead".into())
}

#[test]
fn restart_with_two_live_containers_of_one_slot_keeps_one_and_stops_the_other() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let first = rt.running_ids();
    assert_eq!(first.len(), 1);
    drop(h1);
    let (dup, dead) = leftovers_of_a_crash(&rt, &first[0]);
    let mut h2 = harness_with(rt.clone(), store);
    let starts = rt.starts().len();
    h2.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h2.scan_done();
    assert_eq!(rt.starts().len(), starts, "nothing new: {:?}", rt.calls());
    let killed: Vec<String> = rt
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Signal { id, .. } => Some(id),
            _ => None,
        })
        .collect();
    assert_eq!(
        killed,
        vec![first[0].clone()],
        "only the older duplicate is stopped"
    );
    let snap = h2.snap();
    let v = snap.find_pod("web").expect("pod");
    let cs = &v
        .pod
        .status
        .as_ref()
        .expect("status")
        .container_statuses
        .as_ref()
        .expect("cs")[0];
    assert_eq!(
        cs.container_id.as_deref(),
        Some(&*format!("podvisor://{dup}"))
    );
    assert!(cs.state.as_ref().and_then(|s| s.running.as_ref()).is_some());
    // The stopped duplicate's exit changes nothing; the kept one still restarts when it ends.
    let ev = rt.exit(&first[0], 137);
    h2.send(ev);
    assert_eq!(rt.starts().len(), starts);
    let ev = rt.exit(&dup, 1);
    h2.send(ev);
    h2.advance(Duration::from_secs(300));
    assert_eq!(rt.starts().len(), starts + 1);
    assert!(rt
        .state
        .lock()
        .expect("lock")
        .containers
        .contains_key(&dead));
}

#[test]
fn broken_source_at_restart_keeps_the_persisted_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    drop(h1);
    let mut h2 = harness_with(rt.clone(), store);
    let calls = rt.calls().len();
    h2.file("web.yaml", "not: [valid");
    h2.scan_done();
    assert_eq!(rt.calls().len(), calls, "{:?}", rt.calls());
    assert!(h2.snap().find_pod("web").is_some());
}

fn small_node(rt: FakeRuntime, dir: &tempfile::TempDir) -> Harness {
    harness_allocatable(
        rt,
        dir.path().join("static-pods"),
        Some(crate::cgroups::resources::Amounts {
            cpu_millis: 1000,
            memory_bytes: 1 << 30,
        }),
    )
}

fn requests(cpu: &str, memory: &str) -> String {
    format!("    resources: {{requests: {{cpu: {cpu}, memory: {memory}}}}}\n")
}

fn status_of(h: &Harness, pod: &str) -> k8s_openapi::api::core::v1::PodStatus {
    h.snap()
        .find_pod(pod)
        .and_then(|v| v.pod.status.clone())
        .expect("status")
}

#[test]
fn pod_that_does_not_fit_is_rejected_not_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("600m", "100Mi")),
    );
    assert_eq!(h.rt.starts().len(), 1);
    let calls_before = h.rt.calls().len();
    h.file(
        "b.yaml",
        &(pod_yaml("b", "busybox", "") + &requests("500m", "100Mi")),
    );
    assert_eq!(
        h.rt.calls().len(),
        calls_before,
        "no sandbox, no container: {:?}",
        h.rt.calls()
    );
    let st = status_of(&h, "b");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(st.container_statuses, None);
    let view = h.snap().find_pod("b").cloned().expect("view");
    let summary = crate::cli::pod_summary(&view.pod, k8s_openapi::jiff::Timestamp::now());
    assert_eq!(summary.status, "OutOfcpu");
    assert_eq!(
        st.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
        )
    );
    let ev = h
        .snap()
        .events
        .iter()
        .find(|e| e.reason == "OutOfcpu")
        .cloned()
        .expect("event");
    assert_eq!(ev.type_, crate::status::EventType::Warning);
    assert!(ev.pod.ends_with("b-node1"), "{}", ev.pod);
    // A pod without requests always fits.
    h.file("c.yaml", &pod_yaml("c", "busybox", ""));
    assert_eq!(status_of(&h, "c").phase.as_deref(), Some("Running"));
}

#[test]
fn memory_is_checked_with_init_containers_by_the_max_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    // The init container alone asks for more memory than the node has.
    let init = "  initContainers:\n  - name: init\n    image: busybox\n    resources: {requests: {memory: 2Gi}}\n";
    h.file("big.yaml", &pod_yaml("big", "busybox", init));
    let st = status_of(&h, "big");
    assert_eq!(st.reason.as_deref(), Some("OutOfmemory"));
    assert!(h.rt.starts().is_empty());
}

#[test]
fn rejected_pod_is_admitted_again_when_its_manifest_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("2", "100Mi")),
    );
    assert_eq!(status_of(&h, "a").reason.as_deref(), Some("OutOfcpu"));
    assert!(h.rt.starts().is_empty());
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("500m", "100Mi")),
    );
    let st = status_of(&h, "a");
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(st.reason, None);
    assert_eq!(h.rt.starts().len(), 1);
}

#[test]
fn removed_pods_free_their_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    h.scan_done();
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("800m", "100Mi")),
    );
    h.remove_file("a.yaml");
    h.file(
        "b.yaml",
        &(pod_yaml("b", "busybox", "") + &requests("800m", "100Mi")),
    );
    assert_eq!(status_of(&h, "b").reason, None);
    assert_eq!(h.rt.starts().len(), 2);
}

#[test]
fn after_a_restart_running_pods_are_counted_before_new_ones_are_admitted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = FakeRuntime::default();
    let mut h1 = small_node(rt.clone(), &dir);
    h1.scan_done();
    h1.file(
        "z.yaml",
        &(pod_yaml("z", "busybox", "") + &requests("800m", "100Mi")),
    );
    h1.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("800m", "100Mi")),
    );
    assert_eq!(status_of(&h1, "a").reason.as_deref(), Some("OutOfcpu"));
    drop(h1);
    // Both pods are persisted; "a" sorts first but "z" runs: z must be counted first.
    let starts = rt.starts().len();
    let h2 = small_node(rt.clone(), &dir);
    assert_eq!(status_of(&h2, "a").reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(status_of(&h2, "z").phase.as_deref(), Some("Running"));
    assert_eq!(rt.starts().len(), starts, "{:?}", rt.calls());
}

// ---- probes and lifecycle hooks ----

use crate::prober::scheduler::ProbeUpdate;
use crate::prober::{ProbeKind, ProbeResult};

impl Harness {
    fn probe(&mut self, id: &str, kind: ProbeKind, result: ProbeResult, changed: Option<bool>) {
        let uid = {
            let st = self.rt.state.lock().expect("lock");
            st.containers[id].meta.pod_uid.clone()
        };
        self.send(SyncEvent::Probe(Box::new(ProbeUpdate {
            pod_uid: uid,
            container: "main".into(),
            container_id: id.to_string(),
            kind,
            result,
            changed,
        })));
    }
    fn status(&self, pod: &str) -> k8s_openapi::api::core::v1::PodStatus {
        self.snap()
            .find_pod(pod)
            .and_then(|v| v.pod.status.clone())
            .expect("status")
    }
    fn condition(&self, pod: &str, t: &str) -> (String, String) {
        let st = self.status(pod);
        let c = st
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == t)
            .cloned()
            .expect("condition");
        (
            c.status,
            c.last_transition_time
                .map(|t| t.0.to_string())
                .unwrap_or_default(),
        )
    }
    fn event_count(&self, reason: &str) -> u32 {
        self.snap()
            .events
            .iter()
            .filter(|e| e.reason == reason)
            .map(|e| e.count)
            .sum()
    }
    fn prober_log(&self) -> Vec<String> {
        self.prober.log.lock().expect("lock").clone()
    }
    fn release_hooks(&mut self) {
        let held = self
            .hold_hooks
            .lock()
            .expect("lock")
            .replace(Vec::new())
            .unwrap_or_default();
        for j in held {
            let emit = |r| self.done.lock().expect("lock").push_back(r);
            let r = run_job(&self.rt, &self.images, j, &emit);
            self.done.lock().expect("lock").push_back(r);
        }
        self.pump();
    }
}

fn fail(msg: &str) -> ProbeResult {
    ProbeResult::Failure {
        message: msg.into(),
    }
}

fn with_container_fields(name: &str, extra_pod: &str, fields: &str) -> String {
    let mut y = pod_yaml(name, "busybox", extra_pod);
    y.push_str(fields);
    y
}

#[test]
fn readiness_drives_ready_flag_and_conditions_with_transition_times() {
    let mut h = harness();
    h.file(
        "r.yaml",
        &with_container_fields(
            "r",
            "",
            "    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    assert_eq!(h.prober_log(), vec![format!("add {id}")]);
    let cs = h.status("r").container_statuses.expect("cs")[0].clone();
    assert_eq!((cs.ready, cs.started), (false, Some(true)));
    assert_eq!(h.condition("r", "ContainersReady").0, "False");
    assert_eq!(h.condition("r", "Ready").0, "False");
    assert_eq!(h.condition("r", "PodReadyToStartContainers").0, "True");
    assert_eq!(h.condition("r", "Initialized").0, "True");
    h.advance(Duration::from_secs(3));
    h.probe(&id, ProbeKind::Readiness, ProbeResult::Success, Some(true));
    let (ready, t1) = h.condition("r", "Ready");
    assert_eq!(ready, "True");
    assert!(h.status("r").container_statuses.expect("cs")[0].ready);
    h.advance(Duration::from_secs(5));
    h.probe(
        &id,
        ProbeKind::Readiness,
        fail("connection refused"),
        Some(false),
    );
    let (ready, t2) = h.condition("r", "Ready");
    assert_eq!(ready, "False");
    assert_ne!(t1, t2, "transition time moves on a change");
    // Another failure: no transition, the event is counted.
    h.advance(Duration::from_secs(1));
    h.probe(&id, ProbeKind::Readiness, fail("connection refused"), None);
    assert_eq!(h.condition("r", "Ready"), ("False".to_string(), t2));
    assert_eq!(h.event_count("Unhealthy"), 2);
    let ev = h
        .snap()
        .events
        .iter()
        .find(|e| e.reason == "Unhealthy")
        .cloned()
        .expect("event");
    assert_eq!(ev.message, "Readiness probe failed: connection refused");
    assert_ne!(ev.first_timestamp, ev.last_timestamp);
    // Readiness never kills.
    assert!(!h
        .rt
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Signal { .. })));
}

#[test]
fn startup_probe_gates_started_and_ready() {
    let mut h = harness();
    h.file(
        "s.yaml",
        &with_container_fields(
            "s",
            "",
            "    startupProbe: {tcpSocket: {port: 1}, failureThreshold: 30}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    let cs = h.status("s").container_statuses.expect("cs")[0].clone();
    assert_eq!((cs.ready, cs.started), (false, Some(false)));
    h.probe(&id, ProbeKind::Startup, ProbeResult::Success, Some(true));
    let cs = h.status("s").container_statuses.expect("cs")[0].clone();
    assert_eq!((cs.ready, cs.started), (true, Some(true)));
    assert_eq!(h.condition("s", "Ready").0, "True");
}

#[test]
fn liveness_failure_runs_prestop_then_stops_then_kills_at_probe_grace() {
    let mut h = harness();
    h.file(
        "l.yaml",
        &with_container_fields(
            "l",
            "  terminationGracePeriodSeconds: 60\n",
            "    livenessProbe: {httpGet: {port: 80}, terminationGracePeriodSeconds: 10}\n    lifecycle:\n      preStop: {exec: {command: [drain]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    h.probe(
        &id,
        ProbeKind::Liveness,
        fail("HTTP probe failed with statuscode: 500"),
        Some(false),
    );
    let calls = h.rt.calls();
    let exec = calls
        .iter()
        .position(|c| matches!(c, Call::Exec { cmd, .. } if cmd == &vec!["drain".to_string()]))
        .expect("preStop ran");
    let term = calls
        .iter()
        .position(|c| {
            *c == Call::Signal {
                id: id.clone(),
                signal: libc::SIGTERM,
            }
        })
        .expect("stop signal");
    assert!(exec < term, "preStop before the stop signal: {calls:?}");
    let snap = h.snap();
    let killing = snap
        .events
        .iter()
        .find(|e| e.reason == "Killing")
        .expect("Killing");
    assert_eq!(
        killing.message,
        "Container main failed liveness probe, will be restarted"
    );
    assert!(snap.events.iter().any(|e| e.reason == "Unhealthy"));
    assert!(h.prober_log().contains(&format!("remove {id}")));
    // Being killed: no longer ready.
    assert!(!h.status("l").container_statuses.expect("cs")[0].ready);
    assert_eq!(h.condition("l", "Ready").0, "False");
    let sigkill = Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL,
    };
    h.advance(Duration::from_secs(9));
    assert!(!h.rt.calls().contains(&sigkill));
    h.advance(Duration::from_secs(2));
    assert!(
        h.rt.calls().contains(&sigkill),
        "killed at the probe's grace"
    );
    let ev = h.rt.exit(&id, 137);
    h.send(ev);
    // restartPolicy Always: restarted (first restart is immediate), restartCount 1.
    assert_eq!(h.rt.starts().len(), 2);
    let cs = h.status("l").container_statuses.expect("cs")[0].clone();
    assert_eq!(cs.restart_count, 1);
    let new_id = h.rt.running_ids()[0].clone();
    assert!(h.prober_log().contains(&format!("add {new_id}")));
}

#[test]
fn post_start_gates_started_and_failure_kills() {
    let mut h = harness();
    *h.hold_hooks.lock().expect("lock") = Some(Vec::new());
    h.file(
        "p.yaml",
        &with_container_fields(
            "p",
            "",
            "    readinessProbe: {tcpSocket: {port: 1}}\n    lifecycle:\n      postStart: {exec: {command: [warmup]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    assert_eq!(
        h.waiting_reason("p", "main").as_deref(),
        Some("ContainerCreating")
    );
    let cs = h.status("p").container_statuses.expect("cs")[0].clone();
    assert_eq!(cs.started, Some(false));
    assert_eq!(h.event_count("Created"), 1);
    assert_eq!(h.event_count("Started"), 0);
    assert!(
        h.prober_log().is_empty(),
        "no probes before postStart returns"
    );
    h.release_hooks();
    assert_eq!(h.event_count("Started"), 1);
    assert_eq!(h.waiting_reason("p", "main"), None);
    assert_eq!(h.prober_log(), vec![format!("add {id}")]);

    // A failing postStart hook kills the container.
    let mut h = harness();
    h.rt.state
        .lock()
        .expect("lock")
        .exec_exit
        .insert("warmup".into(), 3);
    h.file(
        "p.yaml",
        &with_container_fields(
            "p",
            "",
            "    lifecycle:\n      postStart: {exec: {command: [warmup]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    assert_eq!(h.event_count("FailedPostStartHook"), 1);
    let ev = h
        .snap()
        .events
        .iter()
        .find(|e| e.reason == "FailedPostStartHook")
        .cloned()
        .expect("event");
    assert_eq!(
        ev.message,
        "Exec lifecycle hook ([warmup]) for Container \"main\" in Pod \"default/p-node1\" failed - error: exit 3"
    );
    assert_eq!(h.event_count("Started"), 0);
    assert!(h.rt.calls().contains(&Call::Signal {
        id,
        signal: libc::SIGTERM
    }));
}

#[test]
fn pod_removal_waits_for_prestop_within_the_grace_period() {
    let mut h = harness();
    h.scan_done();
    h.file(
        "g.yaml",
        &with_container_fields(
            "g",
            "  terminationGracePeriodSeconds: 5\n",
            "    lifecycle:\n      preStop: {exec: {command: [hang]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    *h.hold_hooks.lock().expect("lock") = Some(Vec::new());
    h.remove_file("g.yaml");
    let term = Call::Signal {
        id: id.clone(),
        signal: libc::SIGTERM,
    };
    let kill = Call::Signal {
        id: id.clone(),
        signal: libc::SIGKILL,
    };
    assert!(
        !h.rt.calls().contains(&term),
        "stop signal waits for preStop"
    );
    h.advance(Duration::from_secs(4));
    assert!(!h.rt.calls().contains(&term));
    // The hook is still running at the end of the grace period: stop now, kill 2 s later.
    h.advance(Duration::from_secs(1));
    assert!(h.rt.calls().contains(&term));
    assert!(!h.rt.calls().contains(&kill));
    h.advance(Duration::from_secs(2));
    assert!(h.rt.calls().contains(&kill));

    // A preStop that finishes in time: stop signal right after it, failure is reported.
    let mut h = harness();
    h.scan_done();
    h.rt.state
        .lock()
        .expect("lock")
        .exec_exit
        .insert("drain".into(), 1);
    h.file(
        "g.yaml",
        &with_container_fields(
            "g",
            "",
            "    lifecycle:\n      preStop: {exec: {command: [drain]}}\n",
        ),
    );
    let id = h.rt.running_ids()[0].clone();
    h.remove_file("g.yaml");
    let calls = h.rt.calls();
    let exec = calls
        .iter()
        .position(|c| matches!(c, Call::Exec { .. }))
        .expect("preStop");
    let term = calls
        .iter()
        .position(|c| {
            *c == Call::Signal {
                id: id.clone(),
                signal: libc::SIGTERM,
            }
        })
        .expect("term");
    assert!(exec < term);
    assert_eq!(h.event_count("FailedPreStopHook"), 1);
}

/// Restart count and last state of a container in the snapshot.
fn restarts_and_last(h: &Harness, pod: &str, container: &str) -> (i32, Option<(i32, String)>) {
    let snap = h.snap();
    let st = snap
        .find_pod(pod)
        .and_then(|v| v.pod.status.clone())
        .expect("status");
    let cs = st
        .container_statuses
        .iter()
        .flatten()
        .chain(st.init_container_statuses.iter().flatten())
        .find(|c| c.name == container)
        .expect("container status")
        .clone();
    let last = cs
        .last_state
        .and_then(|s| s.terminated)
        .map(|t| (t.exit_code, t.reason.unwrap_or_default()));
    (cs.restart_count, last)
}

#[test]
fn after_a_reboot_every_pod_starts_again_with_kubelet_restart_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let init_pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: i}\nspec:\n  initContainers:\n  - {name: setup, image: busybox}\n  containers:\n  - {name: app, image: busybox}\n";
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h1.file("i.yaml", init_pod);
    // The init container completes, the app runs; web crashed once and runs again.
    let setup = h1.rt.running_ids().into_iter().find(|id| {
        h1.rt.state.lock().expect("lock").containers[id]
            .meta
            .container_name
            == "setup"
    });
    let ev = h1.rt.exit(&setup.expect("setup running"), 0);
    h1.send(ev);
    let web = h1
        .rt
        .running_ids()
        .into_iter()
        .find(|id| {
            h1.rt.state.lock().expect("lock").containers[id]
                .meta
                .container_name
                == "main"
        })
        .expect("web running");
    let ev = h1.rt.exit(&web, 1);
    h1.send(ev);
    assert_eq!(restarts_and_last(&h1, "web", "main").0, 1);
    drop(h1);

    // Power cut: the sandboxes and processes are gone; records, store and pod data stay.
    rt.reboot();
    let starts_before = rt.starts().len();
    let mut h2 = harness_with(rt.clone(), store);
    // Pods start from the persisted records before the sources answer.
    let after: Vec<(String, u32)> = rt.starts()[starts_before..].to_vec();
    assert!(after.contains(&("main".to_string(), 2)), "{after:?}");
    assert!(after.contains(&("setup".to_string(), 1)), "{after:?}");
    let calls = rt.calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| matches!(c, Call::RunSandbox(_)))
            .count(),
        4,
        "each pod got a new sandbox: {calls:?}"
    );
    // The kubelet's view: restartCount = previous + 1, lastState = the lost instance.
    assert_eq!(
        restarts_and_last(&h2, "web", "main"),
        (2, Some((255, "Unknown".to_string())))
    );
    // Init containers run again in the new sandbox; the app waits for them.
    assert!(!after.iter().any(|(n, _)| n == "app"), "{after:?}");
    let setup = rt
        .running_ids()
        .into_iter()
        .find(|id| {
            rt.state.lock().expect("lock").containers[id]
                .meta
                .container_name
                == "setup"
        })
        .expect("setup runs again");
    let ev = rt.exit(&setup, 0);
    h2.send(ev);
    assert!(
        rt.starts().contains(&("app".to_string(), 1)),
        "{:?}",
        rt.starts()
    );
    assert_eq!(
        restarts_and_last(&h2, "i", "app"),
        (1, Some((255, "Unknown".to_string())))
    );
    assert!(h2
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "SandboxChanged"));
    // The sources report the same manifests: nothing else happens.
    let n = rt.starts().len();
    h2.file("web.yaml", &pod_yaml("web", "busybox", ""));
    h2.file("i.yaml", init_pod);
    h2.scan_done();
    assert_eq!(rt.starts().len(), n, "{:?}", rt.calls());
}

#[test]
fn restart_count_follows_log_files_when_records_are_lost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .log_counts
        .insert("main".into(), 4);
    let mut h = harness_with(rt.clone(), dir.path().join("static-pods"));
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    assert_eq!(rt.starts(), vec![("main".to_string(), 5)]);
    assert_eq!(restarts_and_last(&h, "web", "main").0, 5);
}

#[test]
fn data_of_pods_no_source_defines_is_removed_after_a_reboot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = FakeRuntime::default();
    rt.state
        .lock()
        .expect("lock")
        .pod_data
        .insert("gone-uid".into());
    let mut h = harness_with(rt.clone(), dir.path().join("static-pods"));
    assert!(!rt.calls().contains(&Call::RemoveSandbox("gone-uid".into())));
    h.scan_done();
    assert!(
        rt.calls().contains(&Call::RemoveSandbox("gone-uid".into())),
        "{:?}",
        rt.calls()
    );
}

#[test]
fn a_dead_sandbox_is_created_again_once_the_pod_stopped() {
    let mut h = harness();
    h.file(
        "two.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: two}\nspec:\n  terminationGracePeriodSeconds: 5\n  containers:\n  - {name: a, image: busybox}\n  - {name: b, image: busybox}\n",
    );
    let uid = h.uid("two");
    let ids = h.rt.running_ids();
    assert_eq!(ids.len(), 2);
    let name_of = |rt: &FakeRuntime, id: &str| {
        rt.state.lock().expect("lock").containers[id]
            .meta
            .container_name
            .clone()
    };
    let (a, b) = if name_of(&h.rt, &ids[0]) == "a" {
        (ids[0].clone(), ids[1].clone())
    } else {
        (ids[1].clone(), ids[0].clone())
    };
    // The sandbox's namespaces die; b exits and its restart finds the sandbox dead.
    h.rt.state
        .lock()
        .expect("lock")
        .dead_sandboxes
        .insert(uid.clone());
    let sandboxes_before =
        h.rt.calls()
            .iter()
            .filter(|c| matches!(c, Call::RunSandbox(_)))
            .count();
    let ev = h.rt.exit(&b, 1);
    h.send(ev);
    // Never joined: a is stopped first, no sandbox is made while it runs.
    assert!(h.rt.calls().contains(&Call::Signal {
        id: a.clone(),
        signal: libc::SIGTERM
    }));
    let sandboxes = |h: &Harness| {
        h.rt.calls()
            .iter()
            .filter(|c| matches!(c, Call::RunSandbox(_)))
            .count()
    };
    assert_eq!(sandboxes(&h), sandboxes_before);
    assert!(h.snap().events.iter().any(|e| e.reason == "SandboxChanged"));
    let ev = h.rt.exit(&a, 143);
    h.send(ev);
    assert_eq!(sandboxes(&h), sandboxes_before + 1, "{:?}", h.rt.calls());
    h.advance(Duration::from_secs(30));
    let running: Vec<String> =
        h.rt.running_ids()
            .iter()
            .map(|id| name_of(&h.rt, id))
            .collect();
    assert_eq!(
        running.len(),
        2,
        "both run again in the new sandbox: {running:?}"
    );
}

#[test]
fn a_replaced_generation_left_in_the_store_is_dropped_once_the_sources_report() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h1 = harness_with(rt.clone(), store.clone());
    h1.scan_done();
    h1.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let old = h1.uid("web");
    // The spec is edited; a power cut comes before the old generation's record was removed.
    let old_record = fs::read(store.join(format!("{old}.json"))).expect("old record");
    h1.file("web.yaml", &pod_yaml("web", "busybox:1.36", ""));
    h1.advance(Duration::from_secs(60));
    drop(h1);
    fs::write(store.join(format!("{old}.json")), old_record).expect("restore old record");
    rt.reboot();
    {
        let mut st = rt.state.lock().expect("lock");
        st.containers.retain(|_, c| c.meta.pod_uid != old);
        st.pod_data.remove(&old);
    }
    let mut h2 = harness_with(rt.clone(), store.clone());
    assert!(store.join(format!("{old}.json")).exists());
    h2.file("web.yaml", &pod_yaml("web", "busybox:1.36", ""));
    h2.scan_done();
    assert!(
        !store.join(format!("{old}.json")).exists(),
        "stale record left"
    );
    assert_eq!(fs::read_dir(&store).expect("store").count(), 1);
    assert!(h2.snap().find_pod("web").is_some());
}
