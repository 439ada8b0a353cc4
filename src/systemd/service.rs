//! What the daemon tells systemd about itself (`Type=notify`), decided at each turnover of
//! the sync loop:
//!
//! - `READY=1` once, when the sources have reported (or their wait timed out) and the pods
//!   of the previous run are re-adopted: `systemctl start` and units ordered after podvisor
//!   wait for that, and a restart or upgrade is "done" only when the old pods are back under
//!   supervision.
//! - `STATUS=12 pods running, 1 failing` whenever that line changes (`systemctl status`).
//! - `WATCHDOG=1` at most every quarter of `WatchdogSec=` and at least every half of it. It
//!   is sent from the sync loop itself, never from a timer thread, so a wedged loop stops
//!   the pings and systemd restarts the daemon (containers keep running under their
//!   monitors and are re-adopted). The loop wakes up in time for the next ping
//!   ([`ServiceReporter::next_ping`]) even when nothing else is due.
//! - `STOPPING=1` when the daemon exits on a signal.

use std::time::{Duration, Instant};

use super::notify::Notify;
use crate::reason::WaitingReason;
use crate::status::Snapshot;

/// The one-line summary for `STATUS=`: `N pods running, M failing`, then pods still
/// starting and manifest errors when there are any.
pub fn status_line(snap: &Snapshot) -> String {
    let (mut running, mut failing, mut starting) = (0, 0, 0);
    for v in &snap.pods {
        let status = v.pod.status.as_ref();
        let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        let waiting_failed = status
            .into_iter()
            .flat_map(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
            })
            .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.as_deref())
            .any(|r| {
                r.parse::<WaitingReason>()
                    .is_ok_and(WaitingReason::is_failure)
            });
        if phase == "Failed" || waiting_failed {
            failing += 1;
        } else if phase == "Running" {
            running += 1;
        } else if phase == "Pending" {
            starting += 1;
        }
    }
    let errors = snap.source_errors.len()
        + snap
            .pods
            .iter()
            .filter(|v| v.source_error.is_some())
            .count();
    let mut line = format!(
        "{running} pod{} running, {failing} failing",
        if running == 1 { "" } else { "s" }
    );
    if starting > 0 {
        line.push_str(&format!(", {starting} starting"));
    }
    if errors > 0 {
        line.push_str(&format!(
            "; {errors} manifest error{}",
            if errors == 1 { "" } else { "s" }
        ));
    }
    line
}

/// Sends READY, STATUS and WATCHDOG notifications as the sync loop turns over.
pub struct ServiceReporter {
    notify: Box<dyn Notify>,
    /// `WatchdogSec=`, when systemd asked for pings.
    watchdog: Option<Duration>,
    last_ping: Option<Instant>,
    ready_sent: bool,
    last_status: String,
    /// Send failures are logged once: a vanished socket would otherwise log every retry.
    failed: bool,
    /// When a failed notification is sent again. What it said is not marked sent, so a
    /// READY=1 lost to a busy or restarting systemd is repeated instead of leaving
    /// `systemctl start` waiting for `TimeoutStartSec=`.
    retry_at: Option<Instant>,
}

/// How soon a failed notification is sent again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

impl ServiceReporter {
    pub fn new(notify: Box<dyn Notify>, watchdog: Option<Duration>) -> ServiceReporter {
        ServiceReporter {
            notify,
            watchdog,
            last_ping: None,
            ready_sent: false,
            last_status: String::new(),
            failed: false,
            retry_at: None,
        }
    }

    /// Sends `state`; false when it could not be sent.
    fn send(&mut self, state: &str) -> bool {
        match self.notify.notify(state) {
            Ok(()) => true,
            Err(e) => {
                if !self.failed {
                    log::warn!("systemd notification {state:?} failed (sent again until it is received): {e}");
                    self.failed = true;
                }
                false
            }
        }
    }

    /// One turnover of the sync loop at `now`: `ready` says whether the sources have
    /// reported and re-adoption is done, `status` is the current [`status_line`].
    /// What is sent is marked sent only once systemd has it; a failed send is repeated
    /// [`RETRY_AFTER`] later ([`ServiceReporter::next_ping`] wakes the loop for it).
    pub fn turnover(&mut self, now: Instant, ready: bool, status: &str) {
        let mut msg = Vec::new();
        let send_ready = ready && !self.ready_sent;
        if send_ready {
            msg.push("READY=1".to_string());
        }
        let send_status = status != self.last_status;
        if send_status {
            msg.push(format!("STATUS={status}"));
        }
        let ping = self.watchdog.is_some_and(|interval| {
            self.last_ping
                .is_none_or(|t| now.saturating_duration_since(t) >= interval / 4)
        });
        if ping {
            msg.push("WATCHDOG=1".to_string());
        }
        if msg.is_empty() || self.retry_at.is_some_and(|t| now < t) {
            return;
        }
        if !self.send(&msg.join("\n")) {
            self.retry_at = Some(now + RETRY_AFTER);
            return;
        }
        self.retry_at = None;
        self.ready_sent |= send_ready;
        if send_status {
            self.last_status = status.to_string();
        }
        if ping {
            self.last_ping = Some(now);
        }
    }

    /// The latest time the loop must turn over again: to keep the watchdog fed, or to send
    /// again what systemd did not receive.
    pub fn next_ping(&self) -> Option<Instant> {
        // While a retry is pending nothing is sent before it, not even a ping that is due:
        // waking earlier would only spin the loop (the ping's own time may have passed).
        if self.retry_at.is_some() {
            return self.retry_at;
        }
        let interval = self.watchdog?;
        self.last_ping.map(|t| t + interval / 2)
    }

    /// The daemon is exiting (`systemctl stop`, a signal).
    pub fn stopping(&mut self) {
        self.send("STOPPING=1\nSTATUS=stopping; containers keep running");
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use k8s_openapi::api::core::v1::{
        ContainerState, ContainerStateWaiting, ContainerStatus, Pod, PodStatus,
    };

    use super::*;
    use crate::status::{PodView, SourceErrorView};

    #[derive(Clone, Default)]
    struct Recorder(Arc<Mutex<Vec<String>>>);

    impl Notify for Recorder {
        fn notify(&mut self, state: &str) -> std::io::Result<()> {
            self.0.lock().expect("lock").push(state.to_string());
            Ok(())
        }
    }

    impl Recorder {
        fn take(&self) -> Vec<String> {
            std::mem::take(&mut *self.0.lock().expect("lock"))
        }
    }

    fn pod(phase: &str, waiting: Option<&str>) -> PodView {
        let statuses = waiting.map(|r| {
            vec![ContainerStatus {
                name: "main".into(),
                state: Some(ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some(r.into()),
                        message: None,
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]
        });
        PodView {
            pod: Pod {
                status: Some(PodStatus {
                    phase: Some(phase.into()),
                    container_statuses: statuses,
                    ..Default::default()
                }),
                ..Default::default()
            },
            source: "/etc/kubernetes/manifests/x.yaml".into(),
            source_error: None,
            rolled_back: None,
            log_paths: Default::default(),
            previous_log_paths: Default::default(),
            mirror: None,
        }
    }

    #[test]
    fn status_line_counts_running_failing_starting() {
        let err = SourceErrorView {
            source: "/m/bad.yaml".into(),
            message: "bad.yaml:1:1: ...".into(),
            since: String::new(),
        };
        let cases: Vec<(Vec<PodView>, Vec<SourceErrorView>, &str)> = vec![
            (vec![], vec![], "0 pods running, 0 failing"),
            (
                vec![pod("Running", None)],
                vec![],
                "1 pod running, 0 failing",
            ),
            (
                vec![
                    pod("Running", None),
                    pod("Running", Some("CrashLoopBackOff")),
                    pod("Pending", Some("ImagePullBackOff")),
                    pod("Pending", Some("ContainerCreating")),
                    pod("Failed", None),
                    pod("Succeeded", None),
                ],
                vec![],
                "1 pod running, 3 failing, 1 starting",
            ),
            (
                vec![pod("Running", None), pod("Running", None)],
                vec![err.clone(), err],
                "2 pods running, 0 failing; 2 manifest errors",
            ),
        ];
        for (pods, errors, want) in cases {
            let snap = Snapshot {
                pods,
                source_errors: errors,
                ..Default::default()
            };
            assert_eq!(status_line(&snap), want);
        }
    }

    #[test]
    fn ready_once_status_on_change_watchdog_paced() {
        let rec = Recorder::default();
        let mut r = ServiceReporter::new(Box::new(rec.clone()), Some(Duration::from_secs(20)));
        let t0 = Instant::now();
        r.turnover(t0, false, "0 pods running, 0 failing");
        assert_eq!(rec.take(), ["STATUS=0 pods running, 0 failing\nWATCHDOG=1"]);
        assert_eq!(r.next_ping(), Some(t0 + Duration::from_secs(10)));
        // Busy loop: no ping before a quarter of the interval, nothing to say.
        r.turnover(
            t0 + Duration::from_secs(1),
            false,
            "0 pods running, 0 failing",
        );
        assert!(rec.take().is_empty());
        r.turnover(
            t0 + Duration::from_secs(2),
            true,
            "2 pods running, 0 failing",
        );
        assert_eq!(rec.take(), ["READY=1\nSTATUS=2 pods running, 0 failing"]);
        r.turnover(
            t0 + Duration::from_secs(5),
            true,
            "2 pods running, 0 failing",
        );
        assert_eq!(rec.take(), ["WATCHDOG=1"]);
        assert_eq!(r.next_ping(), Some(t0 + Duration::from_secs(15)));
        // READY is never repeated.
        r.turnover(
            t0 + Duration::from_secs(6),
            true,
            "1 pod running, 1 failing",
        );
        assert_eq!(rec.take(), ["STATUS=1 pod running, 1 failing"]);
        r.stopping();
        assert_eq!(
            rec.take(),
            ["STOPPING=1\nSTATUS=stopping; containers keep running"]
        );
    }

    /// Fails the sends it is told to, records the rest.
    #[derive(Clone, Default)]
    struct Flaky {
        rec: Recorder,
        fail: Arc<Mutex<bool>>,
    }

    impl Notify for Flaky {
        fn notify(&mut self, state: &str) -> std::io::Result<()> {
            if *self.fail.lock().expect("lock") {
                return Err(std::io::Error::from(std::io::ErrorKind::WouldBlock));
            }
            self.rec.notify(state)
        }
    }

    #[test]
    fn a_failed_ready_is_sent_again_not_lost() {
        let n = Flaky::default();
        let mut r = ServiceReporter::new(Box::new(n.clone()), Some(Duration::from_secs(20)));
        let t0 = Instant::now();
        let s = Duration::from_secs;
        *n.fail.lock().expect("lock") = true;
        r.turnover(t0, true, "1 pod running, 0 failing");
        assert!(n.rec.take().is_empty());
        // The loop is woken for the retry, not only for the next ping.
        assert_eq!(r.next_ping(), Some(t0 + RETRY_AFTER));
        // Before the retry is due: nothing is tried (no busy loop on a full socket).
        r.turnover(t0 + RETRY_AFTER / 2, true, "1 pod running, 0 failing");
        *n.fail.lock().expect("lock") = false;
        r.turnover(t0 + RETRY_AFTER / 2, true, "1 pod running, 0 failing");
        assert!(n.rec.take().is_empty());
        // Due: everything that was lost goes, in one notification.
        r.turnover(t0 + RETRY_AFTER, true, "2 pods running, 0 failing");
        assert_eq!(
            n.rec.take(),
            ["READY=1\nSTATUS=2 pods running, 0 failing\nWATCHDOG=1"]
        );
        assert_eq!(r.next_ping(), Some(t0 + RETRY_AFTER + s(10)));
        // Sent once: not repeated.
        r.turnover(t0 + s(3), true, "2 pods running, 0 failing");
        assert!(n.rec.take().is_empty());
        // Failing past the ping's own time (systemd gone): the loop is woken for the next
        // retry, never for a time already passed (it would spin until the retry).
        *n.fail.lock().expect("lock") = true;
        let late = t0 + RETRY_AFTER + s(12);
        r.turnover(late, true, "2 pods running, 0 failing");
        assert_eq!(r.next_ping(), Some(late + RETRY_AFTER));
    }

    #[test]
    fn no_watchdog_no_pings_and_no_wakeups() {
        let rec = Recorder::default();
        let mut r = ServiceReporter::new(Box::new(rec.clone()), None);
        r.turnover(Instant::now(), true, "s");
        assert_eq!(rec.take(), ["READY=1\nSTATUS=s"]);
        assert_eq!(r.next_ping(), None);
    }
}
