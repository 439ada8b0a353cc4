//! prober::scheduler: the prober thread — one timer heap for every probe of every container,
//! a bounded pool that runs due probes, and the kubelet worker's counters (pkg/kubelet/prober
//! worker.go semantics, without a goroutine per probe).
//!
//! [`Schedules`] is the pure state machine (time passed in, unit-tested): first run at
//! container start + initialDelaySeconds, then every periodSeconds; a probe still running when
//! due again is skipped (the kubelet's worker would be blocked in it); liveness and readiness
//! wait until the startup probe passed; successThreshold/failureThreshold runs turn raw
//! results into a state, and only a change of state (plus every failure and warning, for
//! events) is reported; a failed liveness or startup probe is put on hold until the container
//! is replaced, as the kubelet does. [`Prober`] is the thread around it: it alone reads the
//! timer heap and starts due probes (coalescing those due within [`COALESCE`]), and takes
//! add/remove commands on a channel; probes run on `workers` threads, each bounded by its own
//! timeout, so a slow probe only ever occupies one worker; a worker records its result in the
//! schedules (one short lock) and hands updates to the sink itself, so results never wake the
//! scheduler thread.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{run_action, Action, ProbeKind, ProbeResult, ProbeSpec, Target};
use crate::runtime::Runtime;

/// A running container whose probes should be scheduled.
#[derive(Debug, Clone)]
pub struct ProbeTarget {
    pub pod_uid: String,
    /// The pod's name and namespace (`prober_probe_total`'s labels).
    pub pod_name: String,
    pub namespace: String,
    pub container: String,
    pub container_id: String,
    /// When the container started (initialDelaySeconds counts from here).
    pub started_at: Instant,
    /// The pod's own network namespace, if it has one (network probes connect from it).
    pub netns: Option<std::path::PathBuf>,
    pub probes: Vec<ProbeSpec>,
}

/// What the sync loop hears from the prober.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeUpdate {
    pub pod_uid: String,
    pub container: String,
    pub container_id: String,
    pub kind: ProbeKind,
    /// This run's raw result (Failure/Warning are reported every time, for events).
    pub result: ProbeResult,
    /// The thresholded state when it changed with this run: Some(true) passing,
    /// Some(false) failing.
    pub changed: Option<bool>,
}

type Key = (String, ProbeKind);

/// A heap entry: (due, insertion order, container id, probe, generation of the schedule).
type Timer = (Instant, u64, String, ProbeKind, u64);

#[derive(Debug)]
struct Entry {
    target: Arc<ProbeTarget>,
    spec: ProbeSpec,
    generation: u64,
    in_flight: bool,
    /// Last raw result (passed?) and how many times in a row.
    last_raw: Option<bool>,
    run: u32,
    /// The thresholded state the sync loop knows (None: unknown yet).
    state: Option<bool>,
    on_hold: bool,
}

/// A probe that is due: run `action` within `timeout` in `container_id`.
#[derive(Debug, Clone)]
pub struct Due {
    pub container_id: String,
    /// Whose probe it is.
    pub target: Arc<ProbeTarget>,
    pub netns: Option<std::path::PathBuf>,
    pub kind: ProbeKind,
    pub generation: u64,
    pub action: Action,
    pub timeout: Duration,
}

/// All probe schedules (pure: time is a parameter).
#[derive(Debug, Default)]
pub struct Schedules {
    heap: BinaryHeap<Reverse<Timer>>,
    entries: HashMap<Key, Entry>,
    /// Containers whose startup probe passed (or that have none).
    started: HashMap<String, bool>,
    seq: u64,
    generation: u64,
    /// Probes skipped because the previous run was still going.
    pub skipped_busy: u64,
}

impl Schedules {
    fn push(&mut self, at: Instant, key: &Key, generation: u64) {
        self.seq += 1;
        self.heap
            .push(Reverse((at, self.seq, key.0.clone(), key.1, generation)));
    }

    /// Whether a heap entry still belongs to a live schedule (not removed or replaced).
    fn live(&self, id: &str, kind: ProbeKind, generation: u64) -> bool {
        self.entries
            .get(&(id.to_string(), kind))
            .is_some_and(|e| e.generation == generation)
    }

    /// Starts probing a container (replacing any schedule of the same id).
    pub fn add(&mut self, target: ProbeTarget, now: Instant) {
        self.remove(&target.container_id);
        let target = Arc::new(target);
        let has_startup = target.probes.iter().any(|p| p.kind == ProbeKind::Startup);
        self.started
            .insert(target.container_id.clone(), !has_startup);
        for spec in &target.probes {
            self.generation += 1;
            let key = (target.container_id.clone(), spec.kind);
            let first = (target.started_at + spec.initial_delay).max(now);
            self.entries.insert(
                key.clone(),
                Entry {
                    target: Arc::clone(&target),
                    spec: spec.clone(),
                    generation: self.generation,
                    in_flight: false,
                    last_raw: None,
                    run: 0,
                    // The kubelet's initial values: liveness passes, readiness fails,
                    // startup is unknown.
                    state: match spec.kind {
                        ProbeKind::Liveness => Some(true),
                        ProbeKind::Readiness => Some(false),
                        ProbeKind::Startup => None,
                    },
                    on_hold: false,
                },
            );
            self.push(first, &key, self.generation);
        }
    }

    /// Stops probing a container; results still in flight are dropped.
    pub fn remove(&mut self, container_id: &str) {
        self.started.remove(container_id);
        for kind in [
            ProbeKind::Startup,
            ProbeKind::Liveness,
            ProbeKind::Readiness,
        ] {
            self.entries.remove(&(container_id.to_string(), kind));
        }
    }

    /// Number of scheduled probes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// When the next probe is due. Stale heap entries (removed containers) are dropped here.
    pub fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((at, _, id, kind, generation))) = self.heap.peek() {
            if self.live(id, *kind, *generation) {
                return Some(*at);
            }
            self.heap.pop();
        }
        None
    }

    /// Pops every probe due at `now`, schedules its next period and returns those to run.
    pub fn take_due(&mut self, now: Instant) -> Vec<Due> {
        let mut out = Vec::new();
        while let Some(Reverse((at, _, _, _, _))) = self.heap.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, _, id, kind, generation))) = self.heap.pop() else {
                break;
            };
            let key = (id, kind);
            let started = self.started.get(&key.0).copied().unwrap_or(false);
            let Some(e) = self
                .entries
                .get_mut(&key)
                .filter(|e| e.generation == generation)
            else {
                continue;
            };
            // Next tick on the period grid; a late scheduler does not burst to catch up.
            let mut next = at + e.spec.period;
            if next <= now {
                next = now + e.spec.period;
            }
            let run = if e.in_flight {
                self.skipped_busy += 1;
                false
            } else {
                // The startup probe runs until the container started, the others after.
                !e.on_hold && ((kind == ProbeKind::Startup) != started)
            };
            if run {
                e.in_flight = true;
                out.push(Due {
                    container_id: key.0.clone(),
                    target: Arc::clone(&e.target),
                    netns: e.target.netns.clone(),
                    kind,
                    generation: e.generation,
                    action: e.spec.action.clone(),
                    timeout: e.spec.timeout,
                });
            }
            // A passed startup probe is never run again.
            if !(kind == ProbeKind::Startup && started) {
                self.push(next, &key, generation);
            }
        }
        out
    }

    /// Records a finished probe; returns what the sync loop must hear, if anything.
    pub fn complete(
        &mut self,
        container_id: &str,
        kind: ProbeKind,
        generation: u64,
        result: ProbeResult,
    ) -> Option<ProbeUpdate> {
        let key = (container_id.to_string(), kind);
        let e = self.entries.get_mut(&key)?;
        if e.generation != generation {
            return None;
        }
        e.in_flight = false;
        let passed = result.passed();
        if e.last_raw == Some(passed) {
            e.run = e.run.saturating_add(1);
        } else {
            e.last_raw = Some(passed);
            e.run = 1;
        }
        let threshold = if passed {
            e.spec.success_threshold
        } else {
            e.spec.failure_threshold
        };
        let mut changed = None;
        if e.run >= threshold && e.state != Some(passed) {
            e.state = Some(passed);
            changed = Some(passed);
        }
        if !passed && e.run >= threshold && kind != ProbeKind::Readiness {
            // The container is killed; nothing more to learn until it is replaced.
            e.on_hold = true;
            e.run = 0;
        }
        if kind == ProbeKind::Startup && changed == Some(true) {
            self.started.insert(container_id.to_string(), true);
        }
        let target = Arc::clone(&e.target);
        if changed.is_none() && result == ProbeResult::Success {
            return None;
        }
        Some(ProbeUpdate {
            pod_uid: target.pod_uid.clone(),
            container: target.container.clone(),
            container_id: container_id.to_string(),
            kind,
            result,
            changed,
        })
    }
}

/// `prober_probe_total`'s `result`: a warning is a success, as the kubelet counts it.
fn probe_result_label(r: &ProbeResult) -> &'static str {
    match r {
        ProbeResult::Success | ProbeResult::Warning { .. } => "successful",
        ProbeResult::Failure { .. } => "failed",
    }
}

/// The metrics' name of a probe kind.
pub fn metrics_probe_type(kind: ProbeKind) -> crate::metrics::ProbeType {
    match kind {
        ProbeKind::Liveness => crate::metrics::ProbeType::Liveness,
        ProbeKind::Readiness => crate::metrics::ProbeType::Readiness,
        ProbeKind::Startup => crate::metrics::ProbeType::Startup,
    }
}

/// `prober_probe_total`'s labels of a target's container.
pub fn probe_subject(t: &ProbeTarget) -> crate::metrics::ProbeSubject {
    crate::metrics::ProbeSubject {
        container: t.container.clone(),
        pod: t.pod_name.clone(),
        namespace: t.namespace.clone(),
        pod_uid: t.pod_uid.clone(),
    }
}

/// How the sync loop drives the prober.
pub trait ProbeControl: Send {
    fn add(&self, target: ProbeTarget);
    fn remove(&self, container_id: &str);
}

enum Msg {
    Add(ProbeTarget),
    Remove(String),
    Stop,
}

/// Counters for benchmarks and debugging.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProberStats {
    pub probes_run: u64,
    pub skipped_busy: u64,
}

/// Probes due within this much of the earliest one are started together: one wake-up of the
/// scheduler per batch instead of one per probe (a probe runs at most this much early).
pub const COALESCE: Duration = Duration::from_millis(20);

type Sink = Arc<dyn Fn(ProbeUpdate) + Send + Sync>;

struct Shared {
    schedules: Mutex<Schedules>,
    probes_run: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Schedules> {
        // Nothing panics while holding the lock (pure bookkeeping), so a poisoned lock still
        // guards consistent schedules.
        self.schedules.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The prober thread and its pool. Dropping it stops both.
pub struct Prober {
    tx: Mutex<Sender<Msg>>,
    shared: Arc<Shared>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Prober {
    /// Starts the prober thread and `workers` probe threads; updates go to `sink` (called on
    /// a probe thread), and every probe run is counted in `metrics` (`prober_probe_total`,
    /// by the probe thread that ran it).
    pub fn start(
        runtime: Arc<dyn Runtime>,
        workers: usize,
        metrics: crate::metrics::KubeletMetrics,
        sink: impl Fn(ProbeUpdate) + Send + Sync + 'static,
    ) -> std::io::Result<Prober> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let (job_tx, job_rx) = mpsc::channel::<Due>();
        let job_rx = Arc::new(Mutex::new(job_rx));
        let shared = Arc::new(Shared {
            schedules: Mutex::new(Schedules::default()),
            probes_run: std::sync::atomic::AtomicU64::new(0),
        });
        let sink: Sink = Arc::new(sink);
        let mut pool = Vec::new();
        for i in 0..workers.max(1) {
            let job_rx = Arc::clone(&job_rx);
            let runtime = Arc::clone(&runtime);
            let shared = Arc::clone(&shared);
            let sink = Arc::clone(&sink);
            let metrics = metrics.clone();
            pool.push(
                thread::Builder::new()
                    .name(format!("probe-{i}"))
                    .spawn(move || loop {
                        let job = {
                            // A poisoned lock still guards a valid receiver.
                            let guard = job_rx.lock().unwrap_or_else(|p| p.into_inner());
                            guard.recv()
                        };
                        let Ok(job) = job else { return };
                        let target = Target {
                            runtime: runtime.as_ref(),
                            container_id: &job.container_id,
                            netns: job.netns.as_deref(),
                        };
                        let result = run_action(&job.action, &target, job.timeout);
                        let label = probe_result_label(&result);
                        // Recorded here, under the schedules' lock: the scheduler thread is
                        // not woken for every result.
                        let (live, update) = {
                            let mut s = shared.lock();
                            let live = s.live(&job.container_id, job.kind, job.generation);
                            let u = s.complete(&job.container_id, job.kind, job.generation, result);
                            (live, u)
                        };
                        // A probe whose container is no longer probed is not counted.
                        if live {
                            metrics.record_probe(
                                metrics_probe_type(job.kind),
                                label,
                                &probe_subject(&job.target),
                            );
                        }
                        if let Some(u) = update {
                            sink(u);
                        }
                    })?,
            );
        }
        let thread_shared = Arc::clone(&shared);
        let thread = thread::Builder::new()
            .name("prober".into())
            .spawn(move || run(rx, job_tx, thread_shared, pool))?;
        Ok(Prober {
            tx: Mutex::new(tx),
            shared,
            thread: Some(thread),
        })
    }

    pub fn stats(&self) -> ProberStats {
        ProberStats {
            probes_run: self
                .shared
                .probes_run
                .load(std::sync::atomic::Ordering::Relaxed),
            skipped_busy: self.shared.lock().skipped_busy,
        }
    }

    fn send(&self, m: Msg) {
        // The thread only ends when the Prober is dropped.
        let _ = self.tx.lock().unwrap_or_else(|p| p.into_inner()).send(m);
    }
}

impl ProbeControl for Prober {
    fn add(&self, target: ProbeTarget) {
        self.send(Msg::Add(target));
    }
    fn remove(&self, container_id: &str) {
        self.send(Msg::Remove(container_id.to_string()));
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The scheduler thread: starts due probes, sleeps until the next one or a command.
fn run(
    rx: Receiver<Msg>,
    jobs: Sender<Due>,
    shared: Arc<Shared>,
    pool: Vec<thread::JoinHandle<()>>,
) {
    loop {
        let (due, next) = {
            let mut s = shared.lock();
            let due = s.take_due(Instant::now() + COALESCE);
            (due, s.next_due())
        };
        shared
            .probes_run
            .fetch_add(due.len() as u64, std::sync::atomic::Ordering::Relaxed);
        for d in due {
            if jobs.send(d).is_err() {
                return;
            }
        }
        // Sleep until the earliest probe is due; everything due within COALESCE after it
        // then starts in the same batch.
        let wait = next
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(3600));
        match rx.recv_timeout(wait) {
            Ok(Msg::Add(t)) => shared.lock().add(t, Instant::now()),
            Ok(Msg::Remove(id)) => shared.lock().remove(&id),
            Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
    drop(jobs);
    for w in pool {
        let _ = w.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: ProbeKind, period: u64, success: u32, failure: u32) -> ProbeSpec {
        ProbeSpec {
            kind,
            action: Action::Tcp {
                host: "127.0.0.1".into(),
                port: 1,
            },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(period),
            timeout: Duration::from_secs(1),
            success_threshold: success,
            failure_threshold: failure,
            termination_grace: None,
        }
    }

    fn target(id: &str, at: Instant, probes: Vec<ProbeSpec>) -> ProbeTarget {
        ProbeTarget {
            pod_uid: "u".into(),
            pod_name: "p".into(),
            namespace: "default".into(),
            container: "c".into(),
            container_id: id.into(),
            started_at: at,
            netns: None,
            probes,
        }
    }

    fn fail() -> ProbeResult {
        ProbeResult::Failure {
            message: "no".into(),
        }
    }

    /// Runs every due probe with `result`; returns the updates.
    fn step(
        s: &mut Schedules,
        now: Instant,
        result: impl Fn(ProbeKind) -> ProbeResult,
    ) -> Vec<ProbeUpdate> {
        s.take_due(now)
            .into_iter()
            .filter_map(|d| s.complete(&d.container_id, d.kind, d.generation, result(d.kind)))
            .collect()
    }

    #[test]
    fn initial_delay_period_and_failure_threshold() {
        let t0 = Instant::now();
        let mut s = Schedules::default();
        let mut live = spec(ProbeKind::Liveness, 10, 1, 3);
        live.initial_delay = Duration::from_secs(5);
        s.add(target("c1", t0, vec![live]), t0);
        assert!(s.take_due(t0 + Duration::from_secs(4)).is_empty());
        assert_eq!(s.next_due(), Some(t0 + Duration::from_secs(5)));
        // Two failures: below the threshold, reported (for events) but no state change.
        for i in 0..2 {
            let u = step(&mut s, t0 + Duration::from_secs(5 + 10 * i), |_| fail());
            assert_eq!(u.len(), 1);
            assert_eq!(u[0].changed, None);
        }
        let u = step(&mut s, t0 + Duration::from_secs(25), |_| fail());
        assert_eq!(u[0].changed, Some(false));
        // On hold afterwards: nothing runs until the container is replaced.
        assert!(s.take_due(t0 + Duration::from_secs(35)).is_empty());
        s.add(
            target(
                "c2",
                t0 + Duration::from_secs(40),
                vec![spec(ProbeKind::Liveness, 10, 1, 3)],
            ),
            t0 + Duration::from_secs(40),
        );
        s.remove("c1");
        assert_eq!(s.len(), 1);
        assert_eq!(s.take_due(t0 + Duration::from_secs(40)).len(), 1);
    }

    #[test]
    fn readiness_success_threshold_and_flapping() {
        let t0 = Instant::now();
        let mut s = Schedules::default();
        s.add(
            target("c", t0, vec![spec(ProbeKind::Readiness, 1, 2, 1)]),
            t0,
        );
        let ok = |_| ProbeResult::Success;
        assert!(step(&mut s, t0, ok).is_empty(), "1 of 2 successes");
        let u = step(&mut s, t0 + Duration::from_secs(1), ok);
        assert_eq!(u[0].changed, Some(true));
        assert!(step(&mut s, t0 + Duration::from_secs(2), ok).is_empty());
        let u = step(&mut s, t0 + Duration::from_secs(3), |_| fail());
        assert_eq!(u[0].changed, Some(false));
        // Readiness keeps probing after a failure.
        assert!(step(&mut s, t0 + Duration::from_secs(4), ok).is_empty());
        let u = step(&mut s, t0 + Duration::from_secs(5), ok);
        assert_eq!(u[0].changed, Some(true));
    }

    #[test]
    fn startup_gates_liveness_and_readiness() {
        let t0 = Instant::now();
        let mut s = Schedules::default();
        s.add(
            target(
                "c",
                t0,
                vec![
                    spec(ProbeKind::Startup, 1, 1, 30),
                    spec(ProbeKind::Liveness, 1, 1, 1),
                    spec(ProbeKind::Readiness, 1, 1, 1),
                ],
            ),
            t0,
        );
        for i in 0..3 {
            let due = s.take_due(t0 + Duration::from_secs(i));
            let kinds: Vec<ProbeKind> = due.iter().map(|d| d.kind).collect();
            assert_eq!(kinds, vec![ProbeKind::Startup], "second {i}");
            for d in due {
                s.complete(&d.container_id, d.kind, d.generation, fail());
            }
        }
        let u = step(&mut s, t0 + Duration::from_secs(3), |_| {
            ProbeResult::Success
        });
        assert_eq!(u[0].kind, ProbeKind::Startup);
        assert_eq!(u[0].changed, Some(true));
        let mut kinds: Vec<ProbeKind> = s
            .take_due(t0 + Duration::from_secs(4))
            .iter()
            .map(|d| d.kind)
            .collect();
        kinds.sort();
        assert_eq!(kinds, vec![ProbeKind::Liveness, ProbeKind::Readiness]);
    }

    #[test]
    fn re_adding_a_container_does_not_double_its_schedule() {
        let t0 = Instant::now();
        let mut s = Schedules::default();
        s.add(
            target("c", t0, vec![spec(ProbeKind::Readiness, 1, 1, 1)]),
            t0,
        );
        s.add(
            target("c", t0, vec![spec(ProbeKind::Readiness, 1, 1, 1)]),
            t0,
        );
        assert_eq!(s.take_due(t0).len(), 1);
    }

    #[test]
    fn busy_probe_is_skipped_not_queued() {
        let t0 = Instant::now();
        let mut s = Schedules::default();
        s.add(
            target("c", t0, vec![spec(ProbeKind::Readiness, 1, 1, 1)]),
            t0,
        );
        let first = s.take_due(t0);
        assert_eq!(first.len(), 1);
        // Still running one and two periods later.
        assert!(s.take_due(t0 + Duration::from_secs(1)).is_empty());
        assert!(s.take_due(t0 + Duration::from_secs(2)).is_empty());
        assert_eq!(s.skipped_busy, 2);
        let d = &first[0];
        s.complete(&d.container_id, d.kind, d.generation, ProbeResult::Success);
        assert_eq!(s.take_due(t0 + Duration::from_secs(3)).len(), 1);
        // A result of a removed container is dropped.
        s.remove("c");
        assert_eq!(
            s.complete(&d.container_id, d.kind, d.generation, fail()),
            None
        );
    }

    #[test]
    fn hanging_probes_do_not_stall_others() {
        // An exec of "hang" hangs until the test releases it (or its timeout); "ok" returns
        // at once.
        let released = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let gate = Arc::clone(&released);
        let hanging_exec =
            move |_: &str,
                  cmd: &[String],
                  timeout: Duration|
                  -> Result<crate::runtime::ExecOutput, crate::runtime::RuntimeError> {
                let hang = cmd.first().is_some_and(|c| c == "hang");
                if hang {
                    let (lock, cv) = &*gate;
                    let guard = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let _ = cv.wait_timeout_while(guard, timeout, |released| !*released);
                }
                Ok(crate::runtime::ExecOutput {
                    exit_code: i32::from(hang),
                    stdout: Vec::new(),
                    stderr: Vec::new(),
                    timed_out: hang,
                })
            };
        let (tx, rx) = mpsc::channel();
        let prober = Prober::start(
            Arc::new(super::super::ExecOnlyRuntime(hanging_exec)),
            4,
            Default::default(),
            move |u| {
                let _ = tx.send(u);
            },
        )
        .expect("prober");
        let exec = |cmd: &str, kind: ProbeKind, timeout: u64| ProbeSpec {
            kind,
            action: Action::Exec {
                command: vec![cmd.to_string()],
            },
            initial_delay: Duration::ZERO,
            period: Duration::from_secs(1),
            timeout: Duration::from_secs(timeout),
            success_threshold: 1,
            failure_threshold: 1,
            termination_grace: None,
        };
        let t0 = Instant::now();
        // Three containers whose readiness hangs (until released, at most an hour), one
        // healthy one.
        for i in 0..3 {
            prober.add(target(
                &format!("hang{i}"),
                t0,
                vec![exec("hang", ProbeKind::Readiness, 3600)],
            ));
        }
        prober.add(target(
            "fast",
            t0,
            vec![exec("ok", ProbeKind::Readiness, 1)],
        ));
        // Order of events: the healthy container's result arrives while the three hanging
        // probes still hang (they only return once released below).
        let first = rx.recv_timeout(Duration::from_secs(30));
        {
            let (lock, cv) = &*released;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
            cv.notify_all();
        }
        let u = first.expect("an update while the hanging probes hang");
        assert_eq!(u.container_id, "fast");
        assert_eq!(u.changed, Some(true));
        drop(prober);
    }
}
