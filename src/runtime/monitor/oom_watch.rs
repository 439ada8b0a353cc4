//! oom_watch: the monitor's inotify watch on a container cgroup's `memory.events` (cgroup
//! v2), so that an OOM kill is counted while the cgroup still exists.
//!
//! With `cgroupDriver: systemd` the container's cgroup is a scope that systemd stops and
//! removes as soon as it is empty, which may be before the monitor, woken by SIGCHLD, reads
//! the counter after the exit. The kernel notifies `memory.events` when an event is counted
//! (an OOM kill happens before the killed process exits), so the monitor re-reads the counter
//! on every notification and keeps the highest value seen (containerd's v2 OOM watcher works
//! the same way).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::cgroups::{CgroupMode, CgroupRoot};

/// A watch on one cgroup's OOM-kill counter.
pub struct OomWatch {
    fd: OwnedFd,
    root: CgroupRoot,
    cgroup: String,
    seen: u64,
}

impl OomWatch {
    /// Watches the cgroup `cgroup` below `root`; `None` on cgroup v1 or when the cgroup has no
    /// `memory.events` (no memory controller).
    pub fn new(root: &Path, cgroup: &str) -> io::Result<Option<OomWatch>> {
        let root = CgroupRoot::new(root);
        if root.mode() != CgroupMode::Unified {
            return Ok(None);
        }
        let file = root.dir("memory", cgroup).join("memory.events");
        if !file.exists() {
            return Ok(None);
        }
        let path = std::ffi::CString::new(file.as_os_str().as_encoded_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: inotify_init1 takes no pointers; the result is checked below.
        let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: `path` is a NUL-terminated string living across the call.
        let wd = unsafe { libc::inotify_add_watch(raw, path.as_ptr(), libc::IN_MODIFY) };
        if wd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut watch = OomWatch {
            fd,
            root,
            cgroup: cgroup.to_string(),
            seen: 0,
        };
        watch.read_counter();
        Ok(Some(watch))
    }

    /// The descriptor to poll for readability.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Drains the pending notifications and re-reads the counter.
    pub fn on_event(&mut self) {
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: `buf` is writable for its length; the descriptor is open.
            let n = unsafe {
                libc::read(
                    std::os::fd::AsRawFd::as_raw_fd(&self.fd),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            if n <= 0 {
                break;
            }
        }
        self.read_counter();
    }

    fn read_counter(&mut self) {
        // Gone (the scope was removed) or unreadable: keep what was seen.
        if let Ok(n) = self.root.oom_kill_count(&self.cgroup) {
            self.seen = self.seen.max(n);
        }
    }

    /// The highest OOM-kill count seen, the cgroup's current one included when it is still
    /// there.
    pub fn count(&mut self) -> u64 {
        self.on_event();
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::fs;

    fn events(oom_kill: u64) -> String {
        format!("low 0\nhigh 0\nmax 1\noom 1\noom_kill {oom_kill}\noom_group_kill 0\n")
    }

    #[test]
    fn the_count_survives_the_cgroup_being_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("cgroup.controllers"), "memory\n").expect("write");
        let cg = dir.path().join("p.slice/podvisor-c.scope");
        fs::create_dir_all(&cg).expect("mkdir");
        fs::write(cg.join("memory.events"), events(0)).expect("write");
        let mut w = OomWatch::new(dir.path(), "/p.slice/podvisor-c.scope")
            .expect("watch")
            .expect("v2 with memory.events");
        fs::write(cg.join("memory.events"), events(2)).expect("write");
        let mut fds = [PollFd::new(w.fd(), PollFlags::POLLIN)];
        let n = poll(&mut fds, PollTimeout::from(10_000u16)).expect("poll");
        assert_eq!(n, 1, "the write is notified");
        w.on_event();
        fs::remove_dir_all(&cg).expect("rm");
        assert_eq!(w.count(), 2);
    }

    #[test]
    fn no_watch_on_v1_or_without_memory_events() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::create_dir_all(dir.path().join("memory/c")).expect("mkdir");
        assert!(OomWatch::new(dir.path(), "/c").expect("v1").is_none());
        fs::write(dir.path().join("cgroup.controllers"), "cpu\n").expect("write");
        assert!(OomWatch::new(dir.path(), "/c").expect("absent").is_none());
    }
}
