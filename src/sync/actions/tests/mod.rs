//! Table tests of the sync loop's decisions: a pod's state in, the actions out.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::*;
use crate::prober::ProbeKind::{Liveness, Startup};
use crate::reason::{PodReason, WaitingReason};
use crate::runtime::ExitRecord;
use crate::sync::probes::{Health, Kill};
use crate::sync::{Finished, Instance, Slot};

/// A container's state in a case; times are seconds from now (negative: in the past).
#[derive(Debug, Clone, Copy)]
enum C {
    /// Never started.
    Fresh,
    /// Its start job is in flight.
    Starting,
    Running,
    /// Exited with this code, not waiting for a restart timer.
    Exited(i32),
    /// Exited with this code and shows a waiting reason (CrashLoopBackOff).
    ExitedWaiting(i32),
    /// Exited with this code; the crash-loop backoff lets it start again in this many s.
    Backoff(i32, i64),
    /// An init container that completed.
    Succeeded,
    /// Running, its liveness or startup probe failed.
    ProbeFailed(ProbeKind),
    /// Being killed: preStop still running, SIGKILL already sent, deadline in s.
    Killing {
        hook: bool,
        killed: bool,
        deadline: i64,
    },
    /// Running and started (startup probe passed, postStart returned), not yet recorded as
    /// such (a sidecar's first start).
    Started,
    /// A sidecar that started before in this sandbox and runs.
    SidecarUp,
    /// A sidecar that started before and exited (code 1); restart allowed in this many s.
    SidecarDown(i64),
    /// A failed pull: waiting with this reason, retry in s, ImagePullBackOff shown in s.
    PullFailed {
        reason: WaitingReason,
        retry: i64,
        backoff: i64,
    },
}

struct Case {
    name: &'static str,
    policy: &'static str,
    sandbox: SandboxPhase,
    sandbox_retry: Option<i64>,
    inits: Vec<C>,
    /// Indices of the init containers that are sidecars (`restartPolicy: Always`).
    sidecars: Vec<usize>,
    apps: Vec<C>,
    /// Some(still removing) when the worker waits for a previous generation.
    blocked: Option<bool>,
    same_uid_removing: bool,
    failed: bool,
    rejected: bool,
    /// `activeDeadlineSeconds`, and how long the pod has been active (s).
    deadline: Option<i64>,
    active: Option<i64>,
    /// Evicted: where its sandbox is, and when its eviction backoff ends (s).
    evicted: Option<(EvictedSandbox, i64)>,
    /// The pressure it was evicted for still holds.
    pressure_active: bool,
    want: Actions,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            policy: "Always",
            sandbox: SandboxPhase::Ready,
            sandbox_retry: None,
            inits: Vec::new(),
            sidecars: Vec::new(),
            apps: Vec::new(),
            blocked: None,
            same_uid_removing: false,
            failed: false,
            rejected: false,
            deadline: None,
            active: None,
            evicted: None,
            pressure_active: false,
            want: Vec::new(),
        }
    }
}

fn at(now: Instant, secs: i64) -> Instant {
    if secs >= 0 {
        now + Duration::from_secs(secs as u64)
    } else {
        now - Duration::from_secs((-secs) as u64)
    }
}

fn exit(code: i32) -> ExitRecord {
    ExitRecord {
        exit_code: code,
        signal: None,
        oom_killed: false,
        started_at: String::new(),
        finished_at: String::new(),
        reason: if code == 0 { "Completed" } else { "Error" }.into(),
        message: None,
    }
}

fn slot(now: Instant, name: String, kind: ContainerKind, c: C) -> Slot {
    let container = Container {
        name: name.clone(),
        image: Some("busybox".into()),
        ..Default::default()
    };
    let mut s = Slot::new(container, kind);
    let instance = |id: &str, health: Health| Instance {
        id: id.into(),
        started_at: String::new(),
        stop_signal: libc::SIGTERM,
        log_path: PathBuf::new(),
        health,
    };
    let finished = |code| Finished {
        id: format!("{name}-old"),
        exit: exit(code),
        at: at(now, -60),
        log_path: PathBuf::new(),
    };
    match c {
        C::Fresh => {}
        C::Starting => s.instance = Some(instance("", Health::default())),
        C::Running => s.instance = Some(instance(&name, Health::default())),
        C::Started | C::SidecarUp => {
            let health = Health {
                started: true,
                ready: true,
                ..Health::default()
            };
            s.instance = Some(instance(&name, health));
            s.succeeded = matches!(c, C::SidecarUp);
        }
        C::SidecarDown(secs) => {
            s.last = Some(finished(1));
            s.retry_at = Some(at(now, secs));
            s.succeeded = true;
        }
        C::Exited(code) => s.last = Some(finished(code)),
        C::ExitedWaiting(code) => {
            s.last = Some(finished(code));
            s.waiting = Some((WaitingReason::CrashLoopBackOff, String::new()));
        }
        C::Backoff(code, secs) => {
            s.last = Some(finished(code));
            s.retry_at = Some(at(now, secs));
        }
        C::Succeeded => {
            s.last = Some(finished(0));
            s.succeeded = true;
        }
        C::ProbeFailed(kind) => {
            let health = Health {
                probe_failed: Some(kind),
                ..Health::default()
            };
            s.instance = Some(instance(&name, health));
        }
        C::Killing {
            hook,
            killed,
            deadline,
        } => {
            let health = Health {
                kill: Some(Kill {
                    hook_pending: hook,
                    killed,
                    deadline: at(now, deadline),
                }),
                probe_failed: Some(Liveness),
                ..Health::default()
            };
            s.instance = Some(instance(&name, health));
        }
        C::PullFailed {
            reason,
            retry,
            backoff,
        } => {
            s.waiting = Some((reason, String::new()));
            s.retry_at = Some(at(now, retry));
            s.pull_backoff_at = Some(at(now, backoff));
        }
    }
    s
}

fn worker(now: Instant, case: &Case) -> PodWorker {
    let mut slots: Vec<Slot> = (case.inits.iter().enumerate())
        .map(|(i, c)| {
            let mut s = slot(now, format!("init{i}"), ContainerKind::Init, *c);
            if case.sidecars.contains(&i) {
                s.container.restart_policy = Some("Always".into());
            }
            s
        })
        .collect();
    slots.extend(
        (case.apps.iter().enumerate())
            .map(|(i, c)| slot(now, format!("app{i}"), ContainerKind::App, *c)),
    );
    let mut pod = Pod {
        spec: Some(PodSpec {
            restart_policy: Some(case.policy.into()),
            active_deadline_seconds: case.deadline,
            ..Default::default()
        }),
        ..Default::default()
    };
    pod.metadata.uid = Some("uid-1".into());
    PodWorker {
        sandbox_failures: 0,
        pod_ips: Vec::new(),
        spec: StaticPod {
            pod: pod.clone(),
            source: "/m/pod.yaml".into(),
            full_name: "default/pod".into(),
            spec_hash: String::new(),
            meta_hash: String::new(),
            warnings: Vec::new(),
        },
        uid: "uid-1".into(),
        pod: Arc::new(pod),
        sandbox: case.sandbox.clone(),
        sandbox_retry_at: case.sandbox_retry.map(|s| at(now, s)),
        slots,
        blocked_by: case.blocked.map(|_| "uid-0".into()),
        start_time: None,
        created: String::new(),
        conditions: BTreeMap::new(),
        failed: case.failed,
        rejected: case
            .rejected
            .then(|| (PodReason::OutOfMemory, String::new())),
        deadline_exceeded: false,
        since: now,
        was_ready: false,
        seen: now,
        start_recorded: false,
        evicted: case
            .evicted
            .map(|(sandbox, restart)| crate::sync::eviction::Evicted {
                message: String::new(),
                pressure: Some(crate::eviction::Pressure::Memory),
                grace: Duration::ZERO,
                sandbox,
                restart_at: at(now, restart),
                at: String::new(),
            }),
        evictions: u32::from(case.evicted.is_some()),
    }
}

use Action::*;

mod lifecycle_cases;

fn cases() -> Vec<Case> {
    let pending = || SandboxPhase::Pending;
    let mut cases = vec![
        // The sandbox comes first.
        Case {
            name: "new pod: create the sandbox, its container started in the same job",
            sandbox: pending(),
            apps: vec![C::Fresh],
            want: vec![CreateSandbox {
                then_start: Some(0),
            }],
            ..Case::default()
        },
        Case {
            name: "new pod of two app containers: the sandbox job starts the first",
            sandbox: pending(),
            apps: vec![C::Fresh, C::Fresh],
            want: vec![CreateSandbox {
                then_start: Some(0),
            }],
            ..Case::default()
        },
        Case {
            name: "new pod with an init container: the sandbox job starts the init container",
            sandbox: pending(),
            inits: vec![C::Fresh],
            apps: vec![C::Fresh],
            want: vec![CreateSandbox {
                then_start: Some(0),
            }],
            ..Case::default()
        },
        Case {
            name: "new sandbox, init done under Never: the sandbox job starts the app",
            policy: "Never",
            sandbox: pending(),
            inits: vec![C::Succeeded],
            apps: vec![C::Fresh],
            want: vec![CreateSandbox {
                then_start: Some(1),
            }],
            ..Case::default()
        },
        Case {
            name: "new sandbox, its container in crash-loop backoff: nothing started with it",
            sandbox: pending(),
            apps: vec![C::Backoff(1, 5)],
            want: vec![CreateSandbox { then_start: None }],
            ..Case::default()
        },
        Case {
            name: "new sandbox, its container waits for a pull retry: nothing started with it",
            sandbox: pending(),
            apps: vec![C::PullFailed {
                reason: WaitingReason::ErrImagePull,
                retry: 5,
                backoff: 2,
            }],
            want: vec![CreateSandbox { then_start: None }],
            ..Case::default()
        },
        Case {
            name: "new sandbox, the second container due: the sandbox job starts that one",
            sandbox: pending(),
            apps: vec![C::Backoff(1, 5), C::Fresh],
            want: vec![CreateSandbox {
                then_start: Some(1),
            }],
            ..Case::default()
        },
        Case {
            name: "new sandbox of a pod done under Never: nothing started with it",
            policy: "Never",
            sandbox: pending(),
            apps: vec![C::Exited(0)],
            want: vec![CreateSandbox { then_start: None }],
            ..Case::default()
        },
        Case {
            name: "sandbox creation in flight: nothing",
            sandbox: SandboxPhase::Creating,
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "failed sandbox: retried when its timer is due",
            sandbox: SandboxPhase::Failed {
                message: "x".into(),
            },
            sandbox_retry: Some(-1),
            apps: vec![C::Fresh],
            want: vec![CreateSandbox {
                then_start: Some(0),
            }],
            ..Case::default()
        },
        Case {
            name: "failed sandbox: not before its timer",
            sandbox: SandboxPhase::Failed {
                message: "x".into(),
            },
            sandbox_retry: Some(5),
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "sandbox changed: not re-created while a container of the old one runs",
            sandbox: pending(),
            apps: vec![C::Running],
            ..Case::default()
        },
        Case {
            name: "sandbox changed: not while a start into the old one is in flight",
            sandbox: pending(),
            apps: vec![C::Starting],
            ..Case::default()
        },
        // Init containers in order, then the apps.
        Case {
            name: "first init container starts alone",
            inits: vec![C::Fresh, C::Fresh],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "running init container: the others wait",
            inits: vec![C::Running, C::Fresh],
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "second init container after the first succeeded",
            inits: vec![C::Succeeded, C::Fresh],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 1 }],
            ..Case::default()
        },
        Case {
            name: "apps start together once every init container succeeded",
            inits: vec![C::Succeeded, C::Succeeded],
            apps: vec![C::Fresh, C::Fresh],
            want: vec![StartContainer { slot: 2 }, StartContainer { slot: 3 }],
            ..Case::default()
        },
        Case {
            name: "failed init container restarts under Always",
            inits: vec![C::Exited(1)],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "failed init container waits for its backoff under OnFailure",
            policy: "OnFailure",
            inits: vec![C::Backoff(1, 10)],
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "failed init container under Never fails the pod",
            policy: "Never",
            inits: vec![C::Exited(2)],
            apps: vec![C::Fresh],
            want: vec![PodFailed {
                slot: 0,
                exit_code: 2,
            }],
            ..Case::default()
        },
        Case {
            name: "failed pod: nothing more",
            policy: "Never",
            failed: true,
            inits: vec![C::Exited(2)],
            apps: vec![C::Fresh],
            ..Case::default()
        },
        // restartPolicy.
        Case {
            name: "Always restarts a container that succeeded",
            apps: vec![C::Exited(0)],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "OnFailure restarts a failed container",
            policy: "OnFailure",
            apps: vec![C::Exited(1)],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "OnFailure leaves a container that succeeded",
            policy: "OnFailure",
            apps: vec![C::Exited(0)],
            ..Case::default()
        },
        Case {
            name: "OnFailure: a container that succeeded loses its waiting reason",
            policy: "OnFailure",
            apps: vec![C::ExitedWaiting(0)],
            want: vec![NotRestarted { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "Never leaves a failed container",
            policy: "Never",
            apps: vec![C::ExitedWaiting(1), C::Running],
            want: vec![NotRestarted { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "running containers are left alone",
            apps: vec![C::Running, C::Starting],
            ..Case::default()
        },
        // Crash-loop backoff.
        Case {
            name: "crash-loop backoff holds the restart",
            apps: vec![C::Backoff(1, 20), C::Fresh],
            want: vec![StartContainer { slot: 1 }],
            ..Case::default()
        },
        Case {
            name: "crash-loop backoff over: restart",
            apps: vec![C::Backoff(1, 0)],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        // Image pulls.
        Case {
            name: "ErrImagePull turns into ImagePullBackOff before the next attempt",
            apps: vec![C::PullFailed {
                reason: WaitingReason::ErrImagePull,
                retry: 5,
                backoff: 0,
            }],
            want: vec![PullBackoffDue {
                slot: 0,
                show: true,
            }],
            ..Case::default()
        },
        Case {
            name: "the pull is tried again when its backoff is over",
            apps: vec![C::PullFailed {
                reason: WaitingReason::ErrImagePull,
                retry: -1,
                backoff: -6,
            }],
            want: vec![
                PullBackoffDue {
                    slot: 0,
                    show: true,
                },
                StartContainer { slot: 0 },
            ],
            ..Case::default()
        },
        Case {
            name: "a pull backoff timer of a container waiting for something else is dropped",
            apps: vec![C::PullFailed {
                reason: WaitingReason::CreateContainerConfigError,
                retry: 5,
                backoff: 0,
            }],
            want: vec![PullBackoffDue {
                slot: 0,
                show: false,
            }],
            ..Case::default()
        },
        Case {
            name: "an init container's pull backs off too",
            inits: vec![C::PullFailed {
                reason: WaitingReason::ErrImagePull,
                retry: 5,
                backoff: -1,
            }],
            apps: vec![C::Fresh],
            want: vec![PullBackoffDue {
                slot: 0,
                show: true,
            }],
            ..Case::default()
        },
        // Liveness and startup kills, and their timers.
        Case {
            name: "failed liveness probe kills the container",
            apps: vec![C::ProbeFailed(Liveness), C::Running],
            want: vec![KillContainer {
                slot: 0,
                probe: Liveness,
            }],
            ..Case::default()
        },
        Case {
            name: "failed startup probe kills the container",
            apps: vec![C::ProbeFailed(Startup)],
            want: vec![KillContainer {
                slot: 0,
                probe: Startup,
            }],
            ..Case::default()
        },
        Case {
            name: "a container being killed is not killed again before its deadline",
            apps: vec![C::Killing {
                hook: false,
                killed: false,
                deadline: 10,
            }],
            ..Case::default()
        },
        Case {
            name: "preStop used the grace period: stop signal now",
            apps: vec![C::Killing {
                hook: true,
                killed: false,
                deadline: 0,
            }],
            want: vec![StopAfterPreStop { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "grace period over: SIGKILL",
            apps: vec![C::Killing {
                hook: false,
                killed: false,
                deadline: -1,
            }],
            want: vec![ForceKill { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "SIGKILL is sent once",
            apps: vec![C::Killing {
                hook: false,
                killed: true,
                deadline: -5,
            }],
            ..Case::default()
        },
        Case {
            name: "kill timers run while the sandbox is being replaced",
            sandbox: pending(),
            apps: vec![C::Killing {
                hook: false,
                killed: false,
                deadline: -1,
            }],
            want: vec![ForceKill { slot: 0 }],
            ..Case::default()
        },
        // Spec edits and removals of the same pod: the new generation waits.
        Case {
            name: "a replacement waits until the previous generation is removed",
            sandbox: pending(),
            blocked: Some(true),
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "previous generation gone: the replacement starts",
            sandbox: pending(),
            blocked: Some(false),
            apps: vec![C::Fresh],
            want: vec![
                Unblock,
                CreateSandbox {
                    then_start: Some(0),
                },
            ],
            ..Case::default()
        },
        Case {
            name: "nothing is created while the same uid is being removed",
            sandbox: pending(),
            same_uid_removing: true,
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "a rejected pod starts nothing",
            sandbox: pending(),
            rejected: true,
            apps: vec![C::Fresh],
            ..Case::default()
        },
    ];
    cases.extend(lifecycle_cases::eviction());
    cases.extend(lifecycle_cases::sidecars());
    cases.extend(lifecycle_cases::active_deadline());
    cases
}

#[test]
fn compute_actions_table() {
    let now = Instant::now() + Duration::from_secs(3600);
    let cases = cases();
    assert!(cases.len() >= 30);
    for case in &cases {
        let w = worker(now, case);
        let state = PodState {
            worker: &w,
            previous_generation_removing: case.blocked == Some(true),
            same_uid_removing: case.same_uid_removing,
            active_for: case.active.map(|s| Duration::from_secs(s as u64)),
            pressure_active: case.pressure_active,
        };
        assert_eq!(compute_actions(now, &state), case.want, "{}", case.name);
    }
}

#[test]
fn compute_pod_change_table() {
    let sp = |uid: &str, meta: &str| {
        let mut pod = Pod::default();
        pod.metadata.uid = Some(uid.into());
        StaticPod {
            pod,
            source: "/m/pod.yaml".into(),
            full_name: "default/pod".into(),
            spec_hash: String::new(),
            meta_hash: meta.into(),
            warnings: Vec::new(),
        }
    };
    let same = sp("u1", "m1");
    let labels = sp("u1", "m2");
    let spec = sp("u2", "m1");
    let table: Vec<(&str, Option<&StaticPod>, bool, PodChange)> = vec![
        ("unchanged", Some(&same), true, PodChange::Unchanged),
        (
            "labels edited",
            Some(&labels),
            true,
            PodChange::UpdateMetadata,
        ),
        (
            "spec edited: new uid",
            Some(&spec),
            true,
            PodChange::Replace,
        ),
        (
            "spec edited before sources reported",
            Some(&spec),
            false,
            PodChange::Replace,
        ),
        ("manifest removed", None, true, PodChange::Remove),
        ("not reported yet: kept", None, false, PodChange::Unchanged),
    ];
    for (name, desired, ready, want) in table {
        assert_eq!(
            compute_pod_change("u1", "m1", desired, ready),
            want,
            "{name}"
        );
    }
}
