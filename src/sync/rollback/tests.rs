//! Table tests of the rollback decision: a generation on probation in, the verdict out.

use std::time::{Duration, Instant};

use super::*;

const DEADLINE: Duration = Duration::from_secs(300);

fn c(name: &str, waiting: Option<WaitingReason>, last_exit: Option<i32>) -> ContainerProbation {
    ContainerProbation {
        name: name.into(),
        waiting: waiting.map(|r| (r, format!("{r} message"))),
        last_exit,
    }
}

/// A generation on probation since `now - age`, with a Ready generation to go back to.
fn probation(now: Instant, age: Duration, containers: Vec<ContainerProbation>) -> Probation {
    Probation {
        has_ready_generation: true,
        was_ready: false,
        ready: false,
        waiting_for_previous: false,
        since: now - age,
        deadline: DEADLINE,
        rejected: None,
        sandbox_failed: None,
        init_failed: None,
        containers,
    }
}

#[test]
fn when_a_new_generation_is_rolled_back() {
    let now = Instant::now() + Duration::from_secs(3600);
    let young = Duration::from_secs(10);
    let old = DEADLINE;
    let running = || vec![c("main", None, None)];
    let crash = |code| vec![c("main", Some(WaitingReason::CrashLoopBackOff), Some(code))];
    type Edit = fn(&mut Probation);
    let cases: Vec<(&str, Probation, Edit, Option<RollbackCause>)> = vec![
        (
            "running, not Ready yet, before the deadline: wait",
            probation(now, young, running()),
            |_| {},
            None,
        ),
        (
            "not Ready at the deadline: rolled back",
            probation(now, old, running()),
            |_| {},
            Some(RollbackCause::NotReady {
                after: DEADLINE,
                waiting: None,
            }),
        ),
        (
            "Ready at the deadline: proven, not rolled back",
            probation(now, old, running()),
            |p| p.ready = true,
            None,
        ),
        (
            "crash-looping: at once",
            probation(now, young, crash(1)),
            |_| {},
            Some(RollbackCause::CrashLoop {
                container: "main".into(),
                exit_code: 1,
            }),
        ),
        (
            "start refused by the runtime: at once",
            probation(
                now,
                young,
                vec![
                    c("a", None, None),
                    c("b", Some(WaitingReason::RunContainerError), None),
                ],
            ),
            |_| {},
            Some(RollbackCause::StartRefused {
                container: "b".into(),
                reason: WaitingReason::RunContainerError,
                message: "RunContainerError message".into(),
            }),
        ),
        (
            "config error: at once",
            probation(
                now,
                young,
                vec![c(
                    "a",
                    Some(WaitingReason::CreateContainerConfigError),
                    None,
                )],
            ),
            |_| {},
            Some(RollbackCause::StartRefused {
                container: "a".into(),
                reason: WaitingReason::CreateContainerConfigError,
                message: "CreateContainerConfigError message".into(),
            }),
        ),
        (
            "image pull failing before the deadline: wait (a registry may come back)",
            probation(
                now,
                young,
                vec![c("main", Some(WaitingReason::ImagePullBackOff), None)],
            ),
            |_| {},
            None,
        ),
        (
            "image pull failing at the deadline: rolled back, naming it",
            probation(
                now,
                old,
                vec![
                    c("a", None, None),
                    c("main", Some(WaitingReason::ErrImagePull), None),
                ],
            ),
            |_| {},
            Some(RollbackCause::NotReady {
                after: DEADLINE,
                waiting: Some(("main".into(), WaitingReason::ErrImagePull)),
            }),
        ),
        (
            "still creating or initializing: wait",
            probation(
                now,
                young,
                vec![
                    c("i", Some(WaitingReason::ContainerCreating), None),
                    c("main", Some(WaitingReason::PodInitializing), None),
                ],
            ),
            |_| {},
            None,
        ),
        (
            "not admitted: at once",
            probation(now, young, running()),
            |p| p.rejected = Some("OutOfcpu: no room".into()),
            Some(RollbackCause::Rejected {
                message: "OutOfcpu: no room".into(),
            }),
        ),
        (
            "sandbox refused: at once",
            probation(now, young, running()),
            |p| p.sandbox_failed = Some("mount /x: ENOENT".into()),
            Some(RollbackCause::SandboxFailed {
                message: "mount /x: ENOENT".into(),
            }),
        ),
        (
            "init container failed under restartPolicy Never: at once",
            probation(now, young, running()),
            |p| p.init_failed = Some(("setup".into(), 3)),
            Some(RollbackCause::InitFailed {
                container: "setup".into(),
                exit_code: 3,
            }),
        ),
        (
            "never Ready before: nothing to roll back to",
            probation(now, old, crash(1)),
            |p| p.has_ready_generation = false,
            None,
        ),
        (
            "this generation was Ready: it is the good one now",
            probation(now, old, crash(1)),
            |p| p.was_ready = true,
            None,
        ),
        (
            "rollbacks off (rollback-after 0)",
            probation(now, old, crash(1)),
            |p| p.deadline = Duration::ZERO,
            None,
        ),
        (
            "previous generation still stopping: not started, not judged",
            probation(now, old, crash(1)),
            |p| p.waiting_for_previous = true,
            None,
        ),
    ];
    for (name, mut p, edit, want) in cases {
        edit(&mut p);
        assert_eq!(compute_rollback(now, &p), want, "{name}");
        // The deadline is only reported while the generation is judged.
        let judged = p.has_ready_generation
            && !p.was_ready
            && !p.deadline.is_zero()
            && !p.waiting_for_previous;
        assert_eq!(
            probation_deadline(&p),
            judged.then(|| p.since + p.deadline),
            "{name}"
        );
    }
}

#[test]
fn when_a_generation_counts_as_the_last_ready_one() {
    let now = Instant::now() + Duration::from_secs(3600);
    type Edit = fn(&mut Probation);
    let cases: Vec<(&str, Duration, Edit, bool)> = vec![
        (
            "Ready during probation: not yet",
            Duration::from_secs(10),
            |p| p.ready = true,
            false,
        ),
        ("Ready at the deadline", DEADLINE, |p| p.ready = true, true),
        ("not Ready at the deadline", DEADLINE, |_| {}, false),
        (
            "nothing to roll back to: Ready is enough",
            Duration::from_secs(1),
            |p| {
                p.ready = true;
                p.has_ready_generation = false;
            },
            true,
        ),
        (
            "rollbacks off: Ready is enough",
            Duration::from_secs(1),
            |p| {
                p.ready = true;
                p.deadline = Duration::ZERO;
            },
            true,
        ),
        (
            "already proven: nothing new",
            DEADLINE,
            |p| {
                p.ready = true;
                p.was_ready = true;
            },
            false,
        ),
    ];
    for (name, age, edit, want) in cases {
        let mut p = probation(now, age, vec![c("main", None, None)]);
        edit(&mut p);
        assert_eq!(proven_ready(now, &p), want, "{name}");
    }
}

#[test]
fn causes_read_as_the_why_of_rolled_back() {
    let cases = [
        (
            RollbackCause::NotReady {
                after: Duration::from_secs(300),
                waiting: None,
            },
            "not Ready within 5m0s",
        ),
        (
            RollbackCause::NotReady {
                after: Duration::from_secs(3),
                waiting: Some(("web".into(), WaitingReason::ImagePullBackOff)),
            },
            "not Ready within 3s (container web: ImagePullBackOff)",
        ),
        (
            RollbackCause::NotReady {
                after: Duration::from_secs(3725),
                waiting: None,
            },
            "not Ready within 1h2m5s",
        ),
        (
            RollbackCause::CrashLoop {
                container: "main".into(),
                exit_code: 1,
            },
            "container main is crash-looping (last exit code 1)",
        ),
        (
            RollbackCause::StartRefused {
                container: "main".into(),
                reason: WaitingReason::RunContainerError,
                message: "exec: \"nope\": not found".into(),
            },
            "container main cannot start: RunContainerError: exec: \"nope\": not found",
        ),
    ];
    for (cause, want) in cases {
        assert_eq!(cause.to_string(), want);
    }
}
