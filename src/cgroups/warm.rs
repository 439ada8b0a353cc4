//! cgroups::warm: the first move of a process into a cgroup after a quiet spell stalls.
//!
//! Writing a pid to `cgroup.procs` takes the kernel's `cgroup_threadgroup_rwsem` for writing
//! (one lock for every hierarchy, v1 and v2 alike). It is a per-cpu rwsem: a writer first
//! waits for an RCU grace period (`rcu_sync_enter`), unless another writer passed one within
//! the last one or two grace periods. So the first container placement after ~20 ms without one
//! waits a whole grace period: 8-16 ms measured on the development machine (HZ=250, v1 and
//! the v2 mount alike), 15 ms after 100 ms of idle and 23 ms after 1 s in the cgroup v2 VM
//! (Debian's 6.1, software emulation), against 0.2-0.7 ms warm. libcontainer's container
//! init pays it, inside every start that follows a quiet spell; raw libcontainer pays it too.
//!
//! Two ways out. The `favordynmods` mount option (Linux >= 6.0; on any cgroup mount: the lock
//! is global) keeps the lock in its writer-friendly state for good (6.1: 0.7 ms in the VM),
//! making forks and exits a little more expensive; it is a node setting, documented, never
//! changed by podvisor. Without it, the grace period can at least start earlier: a write of
//! the daemon's own pid into its own cgroup (a move that changes nothing) takes the same
//! lock, and a container placement that comes during or soon after it waits only for what is
//! left (measured in the VM: 13.5 / 10.6 / 7.1 / 0.7 ms for a warm-up 2 / 5 / 10 / 20 ms
//! earlier). The runtime asks for one ([`AttachWarmer`], on a thread that sleeps between
//! them) when a pod's sandbox or a container start begins and when a container's exit is
//! recorded (a restart follows), at most once per 20 ms, and not at all under `favordynmods`.
//!
//! With the cgroupfs driver there is nothing to warm, on any host: the vendored libcgroups
//! and libcontainer place a container without that lock (vendor/README.md). On v1 and
//! hybrid hosts libcontainer's single-threaded intermediate process moves itself into each
//! hierarchy by writing "0" to `tasks`, a move of the calling thread that the kernel makes
//! without it (0.12 ms against 7.8 ms after idle, measured on a 6.18 kernel); on v2 the
//! intermediate is created in the container's cgroup (`clone3` with `CLONE_INTO_CGROUP`:
//! 0.5 ms against 7.5 ms). A warm-up there would only hold the cgroup mutex through its
//! grace period, and with it the container's cgroup mkdirs and that clone. The warm-up stays
//! for the systemd driver on v2, where systemd moves the container's process into its scope.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{CgroupDriver, CgroupMode, CgroupRoot};

/// A warm-up more recent than this leaves the lock warm (about two grace periods).
const WARM_FOR: Duration = Duration::from_millis(20);

/// The `cgroup.procs` file of the cgroup `cgroup_file` (the contents of `/proc/self/cgroup`)
/// puts this process in, in the unified tree, for the systemd driver; `None` where container
/// placements do not take the lock (module docs).
fn own_procs_file(root: &CgroupRoot, driver: CgroupDriver, cgroup_file: &str) -> Option<PathBuf> {
    if driver != CgroupDriver::Systemd {
        return None;
    }
    match root.mode() {
        CgroupMode::Unified => {
            let rel = super::process_cgroup_path(cgroup_file, "")?.trim_start_matches('/');
            Some(root.path().join(rel).join("cgroup.procs"))
        }
        CgroupMode::Legacy => None,
    }
}

/// Whether a cgroup filesystem is mounted with `favordynmods` (`mounts`: `/proc/self/mounts`).
fn favors_dynmods(mounts: &str) -> bool {
    mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[2].starts_with("cgroup") && f[3].split(',').any(|o| o == "favordynmods")
    })
}

/// Takes the kernel's cgroup attach lock by writing this process's pid into `procs`, the
/// `cgroup.procs` of the cgroup it is in (a move that changes nothing). Blocks for a grace
/// period when the lock was idle.
pub fn warm_attach_lock(procs: &Path) -> io::Result<()> {
    fs::write(procs, std::process::id().to_string())
}

/// Starts the attach lock's grace period ahead of a container placement (module docs).
#[derive(Debug)]
pub struct AttachWarmer {
    /// `None`: nothing to do (`favordynmods`, or no own cgroup found).
    procs: Option<PathBuf>,
    /// The last warm-up asked for, and the channel to the `cgroup-warm` thread (started at
    /// the first warm-up, so never before the spawner is forked).
    state: Mutex<WarmState>,
}

#[derive(Debug, Default)]
struct WarmState {
    last: Option<Instant>,
    thread: Option<mpsc::SyncSender<()>>,
}

impl AttachWarmer {
    /// For the cgroup tree at `root` and `driver`, from this process's `/proc/self/cgroup`
    /// and mounts.
    pub fn new(root: &CgroupRoot, driver: CgroupDriver) -> AttachWarmer {
        let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
        let procs = if favors_dynmods(&mounts) {
            None
        } else {
            fs::read_to_string("/proc/self/cgroup")
                .ok()
                .and_then(|c| own_procs_file(root, driver, &c))
                .filter(|p| p.exists())
        };
        AttachWarmer {
            procs,
            state: Mutex::default(),
        }
    }

    /// Asks the `cgroup-warm` thread for a warm-up unless one was asked for within the last
    /// 20 ms. Never blocks; a failure (a read-only cgroup filesystem) is not worth a word.
    ///
    /// The thread lives as long as the warmer and sleeps between warm-ups. A thread made for
    /// each warm-up (as before) started its write late when both cores were busy with the
    /// start it was for: a new thread waits its turn behind the runnable ones, while a woken
    /// sleeper runs at once. A write that lands just as the placement comes costs more than
    /// none (the placement then waits for the warm-up's whole grace period and then some:
    /// 11.6 ms against 7.9 ms with no warm-up on a 6.18 kernel, where a write 2 ms ahead
    /// left 5.3 ms; docs/history/start-timeline.md, round ten), so it must start early.
    pub fn warm(&self) {
        let Some(procs) = &self.procs else { return };
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        if st.last.is_some_and(|t| now.duration_since(t) < WARM_FOR) {
            return;
        }
        st.last = Some(now);
        if st.thread.is_none() {
            let (tx, rx) = mpsc::sync_channel::<()>(1);
            let procs = procs.clone();
            let spawned = thread::Builder::new()
                .name("cgroup-warm".into())
                .stack_size(64 * 1024)
                .spawn(move || {
                    // Ends when the warmer (the runtime) is dropped.
                    for () in rx {
                        crate::tp!("warm.woken");
                        let _ = warm_attach_lock(&procs);
                        crate::tp!("warm.done");
                    }
                });
            if spawned.is_err() {
                return;
            }
            st.thread = Some(tx);
        }
        if let Some(tx) = &st.thread {
            // Full: a warm-up is still waiting to be made, which serves this one too.
            crate::tp!("warm.asked");
            let _ = tx.try_send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_systemd_driver_on_v2_has_a_cgroup_to_warm() {
        let v1 = tempfile::tempdir().expect("tempdir");
        let root = CgroupRoot::new(v1.path());
        let cgroup = "12:pids:/system.slice/podvisor.service\n11:cpu,cpuacct:/x\n0::/system.slice/podvisor.service\n";
        assert_eq!(
            own_procs_file(&root, CgroupDriver::Systemd, cgroup),
            None,
            "v1: nothing to warm"
        );
        let v2 = tempfile::tempdir().expect("tempdir");
        fs::write(v2.path().join("cgroup.controllers"), "cpu memory\n").expect("write");
        let root = CgroupRoot::new(v2.path());
        let own = "0::/system.slice/podvisor.service\n";
        assert_eq!(
            own_procs_file(&root, CgroupDriver::Systemd, own),
            Some(v2.path().join("system.slice/podvisor.service/cgroup.procs"))
        );
        assert_eq!(
            own_procs_file(&root, CgroupDriver::Cgroupfs, own),
            None,
            "cgroupfs on v2: created in its cgroup, nothing to warm"
        );
        assert_eq!(
            own_procs_file(&root, CgroupDriver::Systemd, "3:pids:/a\n"),
            None
        );
    }

    #[test]
    fn favordynmods_on_any_cgroup_mount_is_seen() {
        let plain =
            "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0\n";
        assert!(!favors_dynmods(plain));
        let v2 = "cgroup2 /sys/fs/cgroup cgroup2 rw,relatime,nsdelegate,favordynmods 0 0\n";
        assert!(favors_dynmods(v2));
        let hybrid = "cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime,favordynmods 0 0\n";
        assert!(favors_dynmods(hybrid));
        assert!(!favors_dynmods(
            "tmpfs /favordynmods tmpfs rw,favordynmods 0 0\n"
        ));
    }

    #[test]
    fn warm_ups_are_rate_limited_and_nothing_without_a_cgroup() {
        let dir = tempfile::tempdir().expect("tempdir");
        let procs = dir.path().join("cgroup.procs");
        let w = AttachWarmer {
            procs: Some(procs.clone()),
            state: Mutex::default(),
        };
        w.warm();
        let first = w.state.lock().expect("lock").last;
        w.warm();
        assert_eq!(
            w.state.lock().expect("lock").last,
            first,
            "within 20 ms: no second one"
        );
        // The thread wrote this process's pid (a plain file here).
        let deadline = Instant::now() + Duration::from_secs(5);
        while fs::read_to_string(&procs).unwrap_or_default() != std::process::id().to_string() {
            assert!(Instant::now() < deadline, "no warm-up write");
            thread::sleep(Duration::from_millis(5));
        }
        // A second warm-up, past the 20 ms, is made as well (the thread sleeps between them).
        fs::write(&procs, "").expect("clear");
        w.state.lock().expect("lock").last = Instant::now().checked_sub(2 * WARM_FOR);
        w.warm();
        while fs::read_to_string(&procs).unwrap_or_default() != std::process::id().to_string() {
            assert!(Instant::now() < deadline, "no second warm-up write");
            thread::sleep(Duration::from_millis(5));
        }
        let none = AttachWarmer {
            procs: None,
            state: Mutex::default(),
        };
        none.warm();
        let st = none.state.lock().expect("lock");
        assert!(st.last.is_none() && st.thread.is_none());
    }
}
