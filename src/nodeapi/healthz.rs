//! nodeapi::healthz: the kubelet's `/healthz` — the `ping` and `syncloop` checks, answered on
//! the plain healthz port (`healthzBindAddress:healthzPort`, 127.0.0.1:10248) and, behind
//! authentication, on the secure port.
//!
//! `syncloop` fails when the sync loop has not turned over within [`sync_loop_deadline`]: the
//! same [`SyncLoopMonitor`] the systemd watchdog pings come from, so a wedged loop fails the
//! health check and stops the pings alike. As in the kubelet, a loop that has not turned
//! over yet (the first seconds after start) passes.
//!
//! Shapes (k8s.io/apiserver `healthz`): `/healthz` answers `ok` (200) or the list of checks
//! with `[-]syncloop failed: reason withheld` and `healthz check failed` (500); `?verbose`
//! lists the checks on success too; `?exclude=NAME` skips one; `/healthz/ping` and
//! `/healthz/syncloop` run one check (`internal server error: <reason>` on failure).

use std::time::{Duration, Instant};

use crate::health::SyncLoopMonitor;
use crate::httpserver::{query_param, Response};

/// The shortest `syncloop` deadline, however short `syncFrequency` is.
pub const MIN_SYNC_LOOP_DEADLINE: Duration = Duration::from_secs(10);

/// How long the sync loop may go without turning over before `syncloop` fails: twice
/// `syncFrequency` (the loop wakes at least once per `syncFrequency` for the resync), at
/// least [`MIN_SYNC_LOOP_DEADLINE`]. The kubelet uses the same factor with a 5-minute floor
/// because its loop does housekeeping inline; podvisor's loop hands slow work to workers,
/// so a loop silent for 2 x `syncFrequency` is wedged.
pub fn sync_loop_deadline(sync_frequency: Duration) -> Duration {
    (sync_frequency * 2).max(MIN_SYNC_LOOP_DEADLINE)
}

/// The checks `/healthz` runs, in the kubelet's order.
const CHECKS: [&str; 2] = ["ping", "syncloop"];

/// What the health endpoints read.
#[derive(Debug, Clone)]
pub struct HealthChecks {
    pub monitor: SyncLoopMonitor,
    pub deadline: Duration,
}

/// Why a health check fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckFailed {
    #[error("sync Loop took longer than expected: last turnover {} s ago, deadline {} s", since.as_secs(), deadline.as_secs())]
    SyncLoop { since: Duration, deadline: Duration },
}

impl HealthChecks {
    /// The result of check `name` at `now`; `Err` carries the reason.
    fn check(&self, name: &str, now: Instant) -> Result<(), CheckFailed> {
        match name {
            "syncloop" => match self.monitor.since_latest(now) {
                Some(d) if d > self.deadline => Err(CheckFailed::SyncLoop {
                    since: d,
                    deadline: self.deadline,
                }),
                _ => Ok(()),
            },
            _ => Ok(()),
        }
    }

    /// Answers a path below `/healthz` (`path` is the full path, `query` the query), or
    /// `None` when the path is not a health path.
    pub fn answer(&self, path: &str, query: &str, now: Instant) -> Option<Response> {
        if path == "/healthz" || path == "/healthz/" {
            return Some(self.overall(query, now));
        }
        let name = path.strip_prefix("/healthz/")?;
        if !CHECKS.contains(&name) {
            return Some(Response::not_found());
        }
        Some(match self.check(name, now) {
            Ok(()) => Response::plain(200, "ok"),
            Err(reason) => Response::text(500, &format!("internal server error: {reason}")),
        })
    }

    fn overall(&self, query: &str, now: Instant) -> Response {
        let excluded: Vec<&str> = query
            .split('&')
            .filter_map(|kv| kv.strip_prefix("exclude="))
            .collect();
        let mut failed = false;
        let mut lines = String::new();
        for name in CHECKS {
            if excluded.contains(&name) {
                lines.push_str(&format!("[+]{name} excluded: ok\n"));
                continue;
            }
            match self.check(name, now) {
                Ok(()) => lines.push_str(&format!("[+]{name} ok\n")),
                Err(reason) => {
                    failed = true;
                    log::warn!("healthz check {name} failed: {reason}");
                    lines.push_str(&format!("[-]{name} failed: reason withheld\n"));
                }
            }
        }
        if failed {
            lines.push_str("healthz check failed");
            return Response::text(500, &lines);
        }
        if query_param(query, "verbose").is_some() {
            lines.push_str("healthz check passed\n");
            return Response::plain(200, lines);
        }
        Response::plain(200, "ok")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(r: &Response) -> &str {
        std::str::from_utf8(&r.body).expect("utf8")
    }

    #[test]
    fn deadline_is_twice_the_sync_frequency_with_a_floor() {
        assert_eq!(
            sync_loop_deadline(Duration::from_secs(60)),
            Duration::from_secs(120)
        );
        assert_eq!(
            sync_loop_deadline(Duration::from_secs(1)),
            MIN_SYNC_LOOP_DEADLINE
        );
    }

    #[test]
    fn healthz_follows_the_sync_loop() {
        let t0 = Instant::now();
        let monitor = SyncLoopMonitor::new(t0);
        let h = HealthChecks {
            monitor: monitor.clone(),
            deadline: Duration::from_secs(10),
        };
        // Before the first turnover: passing, as the kubelet's.
        let r = h.answer("/healthz", "", t0).expect("route");
        assert_eq!((r.status, body(&r)), (200, "ok"));
        monitor.record(t0);
        let at = |s| t0 + Duration::from_secs(s);
        let r = h.answer("/healthz", "verbose", at(10)).expect("route");
        assert_eq!(
            (r.status, body(&r)),
            (200, "[+]ping ok\n[+]syncloop ok\nhealthz check passed\n")
        );
        let r = h.answer("/healthz", "", at(11)).expect("route");
        assert_eq!(
            (r.status, body(&r)),
            (
                500,
                "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n"
            )
        );
        let r = h
            .answer("/healthz", "exclude=syncloop", at(11))
            .expect("route");
        assert_eq!((r.status, body(&r)), (200, "ok"));
        let r = h.answer("/healthz/syncloop", "", at(11)).expect("route");
        assert_eq!(r.status, 500);
        assert!(body(&r).starts_with("internal server error: sync Loop took longer"));
        let r = h.answer("/healthz/ping", "", at(11)).expect("route");
        assert_eq!((r.status, body(&r)), (200, "ok"));
        assert_eq!(
            h.answer("/healthz/nope", "", at(1)).expect("route").status,
            404
        );
        assert!(h.answer("/pods", "", at(1)).is_none());
        monitor.record(at(12));
        assert_eq!(h.answer("/healthz", "", at(12)).expect("route").status, 200);
    }
}
