//! health: "has the sync loop turned over recently?", the one liveness signal of the daemon
//! (the kubelet's `syncLoopMonitor` behind `/healthz/syncloop`).
//!
//! The sync loop records every turnover ([`SyncLoopMonitor::record`]); anyone may read how
//! long ago that was from another thread. The systemd watchdog pings come from the same
//! turnover (see `systemd::service`), and a health endpoint reads this monitor, so both
//! judge the same thing: a wedged loop fails both.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The time of the sync loop's latest turnover, shared between threads (cheap to clone).
#[derive(Debug, Clone)]
pub struct SyncLoopMonitor {
    base: Instant,
    /// Milliseconds after `base` of the latest turnover; 0 before the first one.
    latest_ms: Arc<AtomicU64>,
}

impl SyncLoopMonitor {
    pub fn new(base: Instant) -> SyncLoopMonitor {
        SyncLoopMonitor {
            base,
            latest_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The loop turned over at `now`.
    pub fn record(&self, now: Instant) {
        // +1 so a turnover at `base` is told apart from "never".
        let ms = now.saturating_duration_since(self.base).as_millis() as u64 + 1;
        self.latest_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// How long ago the latest turnover was, as of `now`; `None` before the first one.
    pub fn since_latest(&self, now: Instant) -> Option<Duration> {
        let ms = self.latest_ms.load(Ordering::Relaxed);
        if ms == 0 {
            return None;
        }
        let at = self.base + Duration::from_millis(ms - 1);
        Some(now.saturating_duration_since(at))
    }

    /// Whether the loop turned over within `max` before `now` (the healthz verdict).
    pub fn healthy(&self, now: Instant, max: Duration) -> bool {
        self.since_latest(now).is_some_and(|d| d <= max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turnover_age_seen_from_another_handle() {
        let t0 = Instant::now();
        let m = SyncLoopMonitor::new(t0);
        let reader = m.clone();
        assert_eq!(reader.since_latest(t0), None);
        assert!(!reader.healthy(t0, Duration::from_secs(10)));
        m.record(t0);
        assert_eq!(
            reader.since_latest(t0 + Duration::from_secs(3)),
            Some(Duration::from_secs(3))
        );
        m.record(t0 + Duration::from_secs(5));
        // An older turnover recorded late never moves the time back.
        m.record(t0 + Duration::from_secs(4));
        assert_eq!(
            reader.since_latest(t0 + Duration::from_secs(6)),
            Some(Duration::from_secs(1))
        );
        assert!(reader.healthy(t0 + Duration::from_secs(15), Duration::from_secs(10)));
        assert!(!reader.healthy(t0 + Duration::from_secs(16), Duration::from_secs(10)));
    }
}
