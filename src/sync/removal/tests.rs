//! Table tests of [`compute_removal_actions`]: stop signals, preStop hooks, sidecars in their
//! turn, SIGKILL at the deadline, then the removal job.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::{compute_removal_actions, Removal, RemovalAction};

fn at(now: Instant, secs: i64) -> Instant {
    if secs >= 0 {
        now + Duration::from_secs(secs as u64)
    } else {
        now - Duration::from_secs((-secs) as u64)
    }
}

fn removal(running: &[&str], hooks: &[&str], kill_at: Option<i64>, now: Instant) -> Removal {
    Removal {
        running: running
            .iter()
            .map(|id| (id.to_string(), libc::SIGTERM))
            .collect(),
        pending_starts: 0,
        sandbox_pending: false,
        grace: Duration::from_secs(30),
        kill_at: kill_at.map(|s| at(now, s)),
        killed: false,
        remove_submitted: false,
        remove_failures: 0,
        remove_retry_at: None,
        view: None,
        forget_store: true,
        name: "default/pod".into(),
        hooks_pending: hooks.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>(),
        sidecars: Vec::new(),
        waiting_turn: BTreeSet::new(),
        probe_series: Vec::new(),
    }
}

/// A removal whose running `sidecars` (in declaration order) wait for their turn.
fn with_sidecars(mut r: Removal, sidecars: &[&str], waiting: &[&str]) -> Removal {
    r.sidecars = sidecars.iter().map(|s| s.to_string()).collect();
    r.waiting_turn = waiting.iter().map(|s| s.to_string()).collect();
    r
}

#[test]
fn compute_removal_actions_table() {
    let now = Instant::now() + Duration::from_secs(3600);
    let term = |ids: &[&str]| {
        ids.iter()
            .map(|id| (id.to_string(), libc::SIGTERM))
            .collect::<Vec<_>>()
    };
    let mut killed = removal(&["a"], &[], Some(-1), now);
    killed.killed = true;
    let mut starting = removal(&[], &[], None, now);
    starting.pending_starts = 1;
    let mut sandbox = removal(&[], &[], None, now);
    sandbox.sandbox_pending = true;
    let mut submitted = removal(&[], &[], None, now);
    submitted.remove_submitted = true;
    let mut backing_off = removal(&[], &[], None, now);
    backing_off.remove_retry_at = Some(at(now, 1));
    let mut backed_off = removal(&[], &[], None, now);
    backed_off.remove_retry_at = Some(at(now, 0));
    let mut failed_with_stragglers = removal(&["a"], &[], None, now);
    failed_with_stragglers.remove_retry_at = Some(at(now, 1));
    let table: Vec<(&str, Removal, Option<RemovalAction>)> = vec![
        (
            "stop signal to every container",
            removal(&["a", "b"], &[], None, now),
            Some(RemovalAction::Stop {
                ids: term(&["a", "b"]),
            }),
        ),
        (
            "containers running preStop get their stop signal after it",
            removal(&["a", "b"], &["a"], None, now),
            Some(RemovalAction::Stop { ids: term(&["b"]) }),
        ),
        (
            "within the grace period: wait",
            removal(&["a"], &[], Some(5), now),
            None,
        ),
        (
            "preStop used the grace period: stop signal now",
            removal(&["a", "b"], &["a"], Some(0), now),
            Some(RemovalAction::StopAfterPreStop { ids: term(&["a"]) }),
        ),
        (
            "grace period over: SIGKILL",
            removal(&["a", "b"], &[], Some(-1), now),
            Some(RemovalAction::Kill {
                ids: vec!["a".into(), "b".into()],
            }),
        ),
        ("SIGKILL sent: wait for the exits", killed, None),
        ("a start in flight: wait for it", starting, None),
        ("a sandbox creation in flight: wait for it", sandbox, None),
        ("removal submitted: wait for it", submitted, None),
        (
            "a failed removal: wait for its retry time",
            backing_off,
            None,
        ),
        (
            "a failed removal: retry when due",
            backed_off,
            Some(RemovalAction::RemovePod),
        ),
        (
            "containers found running are stopped without waiting for the retry",
            failed_with_stragglers,
            Some(RemovalAction::Stop { ids: term(&["a"]) }),
        ),
        (
            "sidecars wait for the app containers",
            with_sidecars(
                removal(&["app", "s1", "s2"], &[], None, now),
                &["s1", "s2"],
                &["s1", "s2"],
            ),
            Some(RemovalAction::Stop {
                ids: term(&["app"]),
            }),
        ),
        (
            "app still running: the sidecars wait",
            with_sidecars(removal(&["app", "s1"], &[], Some(5), now), &["s1"], &["s1"]),
            None,
        ),
        (
            "apps exited: the last-declared sidecar's turn",
            with_sidecars(
                removal(&["s1", "s2"], &[], Some(5), now),
                &["s1", "s2"],
                &["s1", "s2"],
            ),
            Some(RemovalAction::StopInTurn { ids: term(&["s2"]) }),
        ),
        (
            "the later sidecar is stopping: the earlier one waits",
            with_sidecars(
                removal(&["s1", "s2"], &[], Some(5), now),
                &["s1", "s2"],
                &["s1"],
            ),
            None,
        ),
        (
            "the later sidecar exited: the earlier one's turn",
            with_sidecars(removal(&["s1"], &[], Some(5), now), &["s1", "s2"], &["s1"]),
            Some(RemovalAction::StopInTurn { ids: term(&["s1"]) }),
        ),
        (
            "a sidecar's turn waits for its preStop hook",
            with_sidecars(removal(&["s1"], &["s1"], Some(5), now), &["s1"], &["s1"]),
            None,
        ),
        (
            "no app container at all: the last sidecar stops at once",
            with_sidecars(
                removal(&["s1", "s2"], &[], None, now),
                &["s1", "s2"],
                &["s1", "s2"],
            ),
            Some(RemovalAction::Stop { ids: term(&["s2"]) }),
        ),
        (
            "grace period over, sidecars still waiting: stop signal now, SIGKILL soon",
            with_sidecars(removal(&["app", "s1"], &[], Some(0), now), &["s1"], &["s1"]),
            Some(RemovalAction::StopAfterPreStop { ids: term(&["s1"]) }),
        ),
        (
            "everything exited: remove",
            removal(&[], &[], Some(-10), now),
            Some(RemovalAction::RemovePod),
        ),
    ];
    for (name, r, want) in table {
        assert_eq!(compute_removal_actions(now, &r), want, "{name}");
    }
}
