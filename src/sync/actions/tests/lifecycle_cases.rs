//! Table cases of `compute_actions` for the pod lifecycles beyond the kubelet's basic sync:
//! eviction, native sidecars and `activeDeadlineSeconds`; `actions::tests` runs them with
//! its own cases.

use super::*;

/// An evicted pod: stopped, its sandbox removed, started again once its pressure cleared.
pub(super) fn eviction() -> Vec<Case> {
    let pending = || SandboxPhase::Pending;
    vec![
        Case {
            name: "an evicted pod whose container is stopping waits",
            evicted: Some((EvictedSandbox::Up, 10)),
            apps: vec![C::Killing {
                hook: false,
                killed: true,
                deadline: -1,
            }],
            ..Case::default()
        },
        Case {
            name: "an evicted pod is SIGKILLed at the end of its eviction grace",
            evicted: Some((EvictedSandbox::Up, 10)),
            apps: vec![C::Killing {
                hook: false,
                killed: false,
                deadline: -1,
            }],
            want: vec![Action::ForceKill { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "an evicted pod whose containers stopped: its sandbox goes, nothing restarts",
            evicted: Some((EvictedSandbox::Up, 10)),
            apps: vec![C::Exited(137)],
            want: vec![Action::RemoveEvictedSandbox],
            ..Case::default()
        },
        Case {
            name: "an evicted pod's sandbox removal failed: retried after its pause",
            evicted: Some((EvictedSandbox::Up, 10)),
            sandbox_retry: Some(5),
            apps: vec![C::Exited(137)],
            ..Case::default()
        },
        Case {
            name: "an evicted pod waits for its sandbox removal",
            evicted: Some((EvictedSandbox::Removing, -10)),
            apps: vec![C::Exited(137)],
            ..Case::default()
        },
        Case {
            name: "an evicted pod stays stopped while its pressure holds",
            evicted: Some((EvictedSandbox::Removed, -10)),
            pressure_active: true,
            sandbox: pending(),
            apps: vec![C::Exited(137)],
            ..Case::default()
        },
        Case {
            name: "an evicted pod waits for its eviction backoff",
            evicted: Some((EvictedSandbox::Removed, 10)),
            sandbox: pending(),
            apps: vec![C::Exited(137)],
            ..Case::default()
        },
        Case {
            name: "an evicted pod starts again once its pressure cleared and its backoff passed",
            evicted: Some((EvictedSandbox::Removed, -1)),
            sandbox: pending(),
            apps: vec![C::Exited(137)],
            want: vec![Action::RestartEvicted],
            ..Case::default()
        },
    ]
}

/// Native sidecars (init containers with restartPolicy Always), KEP-753.
pub(super) fn sidecars() -> Vec<Case> {
    vec![
        Case {
            name: "sidecar: started first, in init order",
            inits: vec![C::Fresh, C::Fresh],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "sidecar running, startup probe not passed: the next init container waits",
            inits: vec![C::Running, C::Fresh],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "sidecar started: recorded, the next init container starts",
            inits: vec![C::Started, C::Fresh],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            want: vec![SidecarStarted { slot: 0 }, StartContainer { slot: 1 }],
            ..Case::default()
        },
        Case {
            name: "last sidecar started: the app containers start",
            inits: vec![C::Succeeded, C::Started],
            sidecars: vec![1],
            apps: vec![C::Fresh, C::Fresh],
            want: vec![
                SidecarStarted { slot: 1 },
                StartContainer { slot: 2 },
                StartContainer { slot: 3 },
            ],
            ..Case::default()
        },
        Case {
            name: "sidecar crashed before it started: restarted after its backoff",
            inits: vec![C::Backoff(1, -1), C::Fresh],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "sidecar crashed before it started: the next init container waits its backoff",
            inits: vec![C::Backoff(1, 5), C::Fresh],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            ..Case::default()
        },
        Case {
            name: "sidecar exited under restartPolicy Never before it started: restarted",
            policy: "Never",
            inits: vec![C::Exited(1)],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "started sidecar exited during init: restarted, the init after it runs on",
            inits: vec![C::SidecarDown(-1), C::Running],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "started sidecar in backoff during init: the next init container starts",
            inits: vec![C::SidecarDown(5), C::Fresh],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 1 }],
            ..Case::default()
        },
        Case {
            name: "sidecar in backoff after the pod initialized: apps are not held",
            inits: vec![C::SidecarDown(5)],
            sidecars: vec![0],
            apps: vec![C::Running, C::Backoff(1, -1)],
            want: vec![StartContainer { slot: 2 }],
            ..Case::default()
        },
        Case {
            name: "sidecar exited after the pod initialized: restarted under restartPolicy Never",
            policy: "Never",
            inits: vec![C::SidecarDown(-1)],
            sidecars: vec![0],
            apps: vec![C::Running],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "a new sandbox runs the init containers again though the apps ran before",
            inits: vec![C::Fresh],
            sidecars: vec![0],
            apps: vec![C::Backoff(1, -1)],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "restartPolicy Never, apps done: the last-declared sidecar is stopped first",
            policy: "Never",
            inits: vec![C::SidecarUp, C::SidecarUp],
            sidecars: vec![0, 1],
            apps: vec![C::Exited(0)],
            want: vec![StopSidecar { slot: 1 }],
            ..Case::default()
        },
        Case {
            name: "restartPolicy Never, apps done, later sidecar gone: the earlier one stops",
            policy: "Never",
            inits: vec![C::SidecarUp, C::Exited(0)],
            sidecars: vec![0, 1],
            apps: vec![C::Exited(1)],
            want: vec![StopSidecar { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "restartPolicy Never, apps done: a sidecar in backoff is not restarted",
            policy: "Never",
            inits: vec![C::ExitedWaiting(1)],
            sidecars: vec![0],
            apps: vec![C::Exited(0)],
            want: vec![NotRestarted { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "restartPolicy OnFailure, app failed: it restarts, the sidecar runs on",
            policy: "OnFailure",
            inits: vec![C::SidecarUp],
            sidecars: vec![0],
            apps: vec![C::Exited(1)],
            want: vec![StartContainer { slot: 1 }],
            ..Case::default()
        },
        Case {
            name: "restartPolicy OnFailure, app succeeded: the sidecar is stopped",
            policy: "OnFailure",
            inits: vec![C::SidecarUp],
            sidecars: vec![0],
            apps: vec![C::Exited(0)],
            want: vec![StopSidecar { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "restartPolicy Always: app containers never finish, sidecars run on",
            inits: vec![C::SidecarUp],
            sidecars: vec![0],
            apps: vec![C::Exited(0)],
            want: vec![StartContainer { slot: 1 }],
            ..Case::default()
        },
        Case {
            name: "init container failed under Never: the pod's sidecars are stopped",
            policy: "Never",
            failed: true,
            inits: vec![C::SidecarUp, C::Exited(1)],
            sidecars: vec![0],
            apps: vec![C::Fresh],
            want: vec![StopSidecar { slot: 0 }],
            ..Case::default()
        },
    ]
}

/// activeDeadlineSeconds (the kubelet's active deadline handler).
pub(super) fn active_deadline() -> Vec<Case> {
    vec![
        Case {
            name: "active deadline not reached: nothing",
            deadline: Some(10),
            active: Some(9),
            apps: vec![C::Running],
            ..Case::default()
        },
        Case {
            name: "active deadline reached: the pod fails",
            deadline: Some(10),
            active: Some(10),
            apps: vec![C::Running],
            want: vec![DeadlineExceeded],
            ..Case::default()
        },
        Case {
            name: "active deadline reached while the sandbox is being created: the pod fails",
            sandbox: SandboxPhase::Creating,
            deadline: Some(2),
            active: Some(3),
            apps: vec![C::Fresh],
            want: vec![DeadlineExceeded],
            ..Case::default()
        },
        Case {
            name: "no start time yet: no deadline",
            deadline: Some(2),
            apps: vec![C::Fresh],
            want: vec![StartContainer { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "deadline exceeded once: not again, nothing restarts",
            failed: true,
            deadline: Some(2),
            active: Some(30),
            apps: vec![C::ExitedWaiting(137)],
            want: vec![NotRestarted { slot: 0 }],
            ..Case::default()
        },
        Case {
            name: "a pod already completed is not failed by its deadline",
            policy: "Never",
            deadline: Some(2),
            active: Some(30),
            apps: vec![C::Exited(0)],
            ..Case::default()
        },
        Case {
            name: "deadline exceeded: sidecars wait until the app containers are killed",
            failed: true,
            inits: vec![C::SidecarUp],
            sidecars: vec![0],
            apps: vec![C::Killing {
                hook: false,
                killed: false,
                deadline: 5,
            }],
            ..Case::default()
        },
        Case {
            name: "a sidecar being stopped is not stopped again",
            policy: "Never",
            inits: vec![C::Killing {
                hook: false,
                killed: false,
                deadline: 5,
            }],
            sidecars: vec![0],
            apps: vec![C::Exited(0)],
            ..Case::default()
        },
    ]
}
