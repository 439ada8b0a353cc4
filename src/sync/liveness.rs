//! sync::liveness: what the loop tells the outside world at each turnover: the health
//! monitor (the daemon's liveness signal), systemd's readiness, `STATUS=` line and watchdog
//! pings (`Type=notify`), and the wedge test hook.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The loop's liveness and service reporting.
pub(super) struct Liveness {
    /// Every turnover is recorded here (the daemon's liveness signal).
    pub(super) monitor: crate::health::SyncLoopMonitor,
    /// systemd notifications (`Type=notify`), when started by systemd.
    pub(super) service: Option<crate::systemd::ServiceReporter>,
    /// The `STATUS=` line of the latest published snapshot.
    pub(super) status_line: String,
    /// Test hook: the loop stops turning over once this file exists.
    pub(super) wedge_file: Option<PathBuf>,
}

impl Liveness {
    pub(super) fn new(started: Instant) -> Liveness {
        Liveness {
            monitor: crate::health::SyncLoopMonitor::new(started),
            service: None,
            status_line: String::new(),
            wedge_file: None,
        }
    }

    /// One turnover at `now`: recorded for health checks, and told to systemd (readiness once
    /// the sources are `ready`, the status line, a watchdog ping).
    pub(super) fn turnover(&mut self, now: Instant, ready: bool) {
        if let Some(f) = &self.wedge_file {
            // One-shot: the file is removed, so the daemon systemd restarts runs normally.
            if std::fs::remove_file(f).is_ok() {
                log::error!(
                    "test hook: {} appeared: the sync loop stops turning over",
                    f.display()
                );
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
        }
        self.monitor.record(now);
        if let Some(s) = self.service.as_mut() {
            s.turnover(now, ready, &self.status_line);
        }
    }

    /// When systemd's watchdog wants its next ping.
    pub(super) fn next_ping(&self) -> Option<Instant> {
        self.service.as_ref().and_then(|s| s.next_ping())
    }

    /// The loop stops: told to systemd.
    pub(super) fn stopping(&mut self) {
        if let Some(s) = self.service.as_mut() {
            s.stopping();
        }
    }
}
