//! eviction::notifier: the `memory-notifier` thread, which wakes the eviction manager at once
//! when memory runs short instead of at its next 10 s pass (the kubelet's
//! `memory_threshold_notifier.go`, and more):
//!
//! - **cgroup v1**: a memcg usage threshold on the root memory cgroup (`cgroup.event_control`
//!   and an eventfd) at capacity − threshold + inactive_file, where memory.available crosses
//!   the threshold; re-armed every pass, as inactive_file moves (the kubelet's notifier);
//! - **PSI** (`/proc/pressure/memory`, cgroup v1 and v2, Linux 5.2+): a trigger on 50 ms of
//!   memory stall within 1 s — the kernel is already reclaiming;
//! - **near the threshold**: while memory.available is within twice the threshold it is
//!   re-read every 200 ms (one read of /proc/meminfo and memory.stat), so crossing it on a
//!   cgroup v2 host, which has no root usage threshold, is seen within 200 ms. Far from it,
//!   the thread sleeps in poll for the housekeeping interval.
//!
//! A wake-up is sent when memory.available goes below the threshold and on each kernel event;
//! the manager itself decides, and after an eviction it ignores wake-ups for one housekeeping
//! interval (at most one pod per interval, as the kubelet).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::mpsc::{SyncSender, TrySendError};
use std::thread;
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::decisions::Observation;
use super::signals::memory_available;
use super::threshold::{resolve, ThresholdValue};

/// Re-read period while memory.available is near the threshold.
const NEAR_PERIOD: Duration = Duration::from_millis(200);
/// Re-arm period otherwise.
const FAR_PERIOD: Duration = Duration::from_secs(10);
/// The PSI trigger: 50 ms of "some" stall in a 1 s window.
const PSI_TRIGGER: &[u8] = b"some 50000 1000000\0";

/// Where the notifier reads memory.
#[derive(Debug, Clone)]
pub struct MemoryNotifier {
    pub proc_dir: PathBuf,
    pub cgroup_dir: PathBuf,
    /// The lowest memory.available threshold (hard or soft).
    pub threshold: ThresholdValue,
}

impl MemoryNotifier {
    fn v1_dir(&self) -> Option<PathBuf> {
        let d = self.cgroup_dir.join("memory");
        d.join("cgroup.event_control").exists().then_some(d)
    }

    /// memory.available now, and the root cgroup's inactive_file (v1) for the usage threshold.
    fn observe(&self) -> Option<(Observation, u64)> {
        let meminfo = fs::read_to_string(self.proc_dir.join("meminfo")).ok()?;
        match self.v1_dir() {
            Some(d) => {
                let stat = fs::read_to_string(d.join("memory.stat")).unwrap_or_default();
                let usage = fs::read_to_string(d.join("memory.usage_in_bytes"))
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?;
                let inactive = stat
                    .lines()
                    .find_map(|l| l.strip_prefix("total_inactive_file "))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                Some((memory_available(&meminfo, &stat, Some(usage))?, inactive))
            }
            None => {
                let stat =
                    fs::read_to_string(self.cgroup_dir.join("memory.stat")).unwrap_or_default();
                Some((memory_available(&meminfo, &stat, None)?, 0))
            }
        }
    }

    /// A memcg usage threshold at `bytes` on the v1 root memory cgroup: the eventfd to poll
    /// (closing it removes the registration).
    fn arm_v1(&self, bytes: u64) -> std::io::Result<(EventFd, File)> {
        let d = self
            .v1_dir()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
        let usage = File::open(d.join("memory.usage_in_bytes"))?;
        let efd = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        let line = format!("{} {} {bytes}", efd.as_fd().as_raw_fd(), usage.as_raw_fd());
        fs::write(d.join("cgroup.event_control"), line)?;
        Ok((efd, usage))
    }

    fn psi(&self) -> Option<File> {
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(self.proc_dir.join("pressure/memory"))
            .ok()?;
        f.write_all(PSI_TRIGGER).ok()?;
        Some(f)
    }

    /// Starts the thread; it sends `()` on `wake` when memory runs short and ends when the
    /// receiver is gone.
    pub fn spawn(self, wake: SyncSender<()>) -> std::io::Result<thread::JoinHandle<()>> {
        thread::Builder::new()
            .name("memory-notifier".into())
            .spawn(move || self.run(wake))
    }

    fn run(self, wake: SyncSender<()>) {
        let psi = self.psi();
        let mut was_below = false;
        let mut v1_failed_logged = false;
        loop {
            let Some((obs, inactive)) = self.observe() else {
                thread::sleep(FAR_PERIOD);
                continue;
            };
            let thr = resolve(self.threshold, obs.capacity);
            let below = obs.available < thr;
            let near = obs.available < thr.saturating_mul(2);
            if below && !was_below && !send(&wake) {
                return;
            }
            was_below = below;
            // Usage at which available = threshold: capacity - threshold + inactive_file.
            let v1 = if below {
                None
            } else {
                match self.arm_v1(obs.capacity.saturating_sub(thr).saturating_add(inactive)) {
                    Ok(armed) => Some(armed),
                    Err(e) => {
                        if self.v1_dir().is_some() && !v1_failed_logged {
                            log::warn!("memory notifier: memcg threshold: {e}");
                            v1_failed_logged = true;
                        }
                        None
                    }
                }
            };
            let mut fds = Vec::new();
            if let Some((efd, _)) = &v1 {
                fds.push(PollFd::new(efd.as_fd(), PollFlags::POLLIN));
            }
            if let Some(p) = &psi {
                fds.push(PollFd::new(p.as_fd(), PollFlags::POLLPRI));
            }
            let period = if near { NEAR_PERIOD } else { FAR_PERIOD };
            let timeout = PollTimeout::try_from(period).unwrap_or(PollTimeout::MAX);
            let fired = match poll(&mut fds, timeout) {
                Ok(n) => n > 0,
                Err(_) => {
                    thread::sleep(NEAR_PERIOD);
                    false
                }
            };
            drop(fds);
            if fired && !send(&wake) {
                return;
            }
            if fired && psi.is_some() && v1.is_none() {
                // A PSI trigger fires at most once per window: no busy loop, but do not
                // spin either should it keep firing.
                thread::sleep(NEAR_PERIOD);
            }
        }
    }
}

/// False when the manager is gone.
fn send(wake: &SyncSender<()>) -> bool {
    !matches!(wake.try_send(()), Err(TrySendError::Disconnected(())))
}
