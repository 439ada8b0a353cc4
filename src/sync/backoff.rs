//! backoff: whether a container that ended is started again (restartPolicy) and when (the
//! kubelet's crash-loop backoff), for the sync loop (which `podvisor play` runs too).
//!
//! As in pkg/kubelet (flowcontrol.Backoff used by kuberuntime): the first restart after a
//! crash is immediate; each further restart waits 10 s, 20 s, 40 s, ... up to 300 s after the
//! container finished; a container that ran for 10 minutes (twice the maximum) since its last
//! start resets the backoff.

use std::time::{Duration, Instant};

use crate::runtime::ContainerKind;

pub const INITIAL: Duration = Duration::from_secs(10);
pub const MAX: Duration = Duration::from_secs(300);

/// Whether a container of `kind` that exited with `exit_code` is started again under the
/// pod's `restartPolicy`. A successful init container is done; a failed one is retried unless
/// the pod never restarts; app containers follow the policy table.
pub fn should_restart(kind: ContainerKind, policy: &str, exit_code: i32) -> bool {
    match (kind, policy) {
        (ContainerKind::Init, _) if exit_code == 0 => false,
        (_, "Never") => false,
        (ContainerKind::Init, _) => true,
        (ContainerKind::App, "OnFailure") => exit_code != 0,
        (ContainerKind::App, _) => true,
    }
}

/// Backoff state of one container.
#[derive(Debug, Clone, Default)]
pub struct CrashLoopBackoff {
    /// (current delay, time of the last start) once a restart happened.
    entry: Option<(Duration, Instant)>,
}

impl CrashLoopBackoff {
    /// When the container that finished at `finished` may start again.
    pub fn restart_at(&self, finished: Instant) -> Instant {
        match self.entry {
            Some((delay, last_start)) if !expired(finished, last_start) => finished + delay,
            _ => finished,
        }
    }

    /// True if a start at `now` for a container that finished at `finished` is held back.
    pub fn in_backoff(&self, finished: Instant, now: Instant) -> bool {
        now < self.restart_at(finished)
    }

    /// Records a (re)start at `now` after a crash that finished at `finished`.
    pub fn started(&mut self, finished: Instant, now: Instant) {
        self.entry = match self.entry {
            Some((delay, last_start)) if !expired(finished, last_start) => {
                Some(((delay * 2).min(MAX), now))
            }
            _ => Some((INITIAL, now)),
        };
    }

    /// The delay the next crash would get (for messages).
    pub fn current_delay(&self) -> Duration {
        self.entry.map(|(d, _)| d).unwrap_or(Duration::ZERO)
    }
}

/// The kubelet's image pull backoff (flowcontrol.Backoff keyed by pod and image): 10 s after
/// the first failure, doubling up to 300 s; forgotten after 600 s without a failure or on a
/// successful pull.
#[derive(Debug, Clone, Default)]
pub struct ImagePullBackoff {
    /// (current delay, time of the last failure).
    entry: Option<(Duration, Instant)>,
}

impl ImagePullBackoff {
    /// Records a failed pull at `now`; returns how long to wait before the next attempt.
    pub fn failed(&mut self, now: Instant) -> Duration {
        let delay = match self.entry {
            Some((d, last)) if now.saturating_duration_since(last) <= MAX * 2 => (d * 2).min(MAX),
            _ => INITIAL,
        };
        self.entry = Some((delay, now));
        delay
    }

    /// A pull succeeded: the next failure starts over at 10 s.
    pub fn reset(&mut self) {
        self.entry = None;
    }
}

fn expired(finished: Instant, last_start: Instant) -> bool {
    finished.saturating_duration_since(last_start) > MAX * 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pull_backoff_doubles_to_five_minutes_and_resets() {
        let t0 = Instant::now();
        let mut b = ImagePullBackoff::default();
        let secs: Vec<u64> = (0..7)
            .map(|i| b.failed(t0 + Duration::from_secs(i)).as_secs())
            .collect();
        assert_eq!(secs, vec![10, 20, 40, 80, 160, 300, 300]);
        assert_eq!(b.failed(t0 + Duration::from_secs(7 + 601)).as_secs(), 10);
        b.failed(t0 + Duration::from_secs(700));
        b.reset();
        assert_eq!(b.failed(t0 + Duration::from_secs(701)).as_secs(), 10);
    }

    #[test]
    fn restart_policy_table() {
        use ContainerKind::{App, Init};
        assert!(should_restart(App, "Always", 0));
        assert!(should_restart(App, "Always", 1));
        assert!(!should_restart(App, "OnFailure", 0));
        assert!(should_restart(App, "OnFailure", 2));
        assert!(!should_restart(App, "Never", 1));
        assert!(!should_restart(Init, "Always", 0));
        assert!(should_restart(Init, "OnFailure", 1));
        assert!(!should_restart(Init, "Never", 1));
    }

    #[test]
    fn first_restart_is_immediate_then_doubles_to_five_minutes() {
        let t0 = Instant::now();
        let mut b = CrashLoopBackoff::default();
        let mut now = t0;
        let mut delays = Vec::new();
        for _ in 0..8 {
            // The container runs 1 s, then crashes.
            let finished = now + Duration::from_secs(1);
            let at = b.restart_at(finished);
            delays.push((at - finished).as_secs());
            b.started(finished, at);
            now = at;
        }
        assert_eq!(delays, vec![0, 10, 20, 40, 80, 160, 300, 300]);
    }

    #[test]
    fn ten_minutes_of_running_resets_the_backoff() {
        let t0 = Instant::now();
        let mut b = CrashLoopBackoff::default();
        b.started(t0, t0);
        let f1 = t0 + Duration::from_secs(5);
        assert_eq!(b.restart_at(f1) - f1, Duration::from_secs(10));
        b.started(f1, f1 + Duration::from_secs(10));
        // Runs for 11 minutes, then crashes: back to an immediate restart.
        let f2 = f1 + Duration::from_secs(10 + 660);
        assert_eq!(b.restart_at(f2), f2);
        assert!(!b.in_backoff(f2, f2));
    }
}
