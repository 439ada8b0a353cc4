//! A spare monitor: one child the spawner forked ahead of time, while it was quiet, blocked
//! on a socket pair until a container needs a monitor. The next `Request::Monitor` is sent to
//! it (the container's directory and the three descriptors) instead of forking: it becomes
//! that container's monitor exactly as a freshly forked child does (`child::run_monitor`:
//! `monitor::run`), and the runtime gets its pid and a pidfd opened when it was forked.
//!
//! Why: a monitor's fork was on the path of every start and restart. The spawner's `fork`
//! took 0.35 ms, and the child ran `monitor::run` 0.77 ms after it (copy-on-write faults and
//! waiting for a core the start's other work holds; `docs/history/start-timeline.md`, round twelve).
//! A spare that is already running answers in microseconds.
//!
//! When: [`super::spare::SPARE_AFTER`] after the spawner's last fork, as the spare
//! namespaces, so a burst of starts is not slowed by it; one at a time. Where one cannot be
//! forked, the spawner says why once and forks per request, as before.
//! `PODVISOR_TEST_NO_SPARE_MONITOR=1` (benchmarks comparing both) forks every monitor.
//!
//! What it costs: one sleeping process that shares the spawner's pages (its own are its
//! stack's and the few it wrote), counted with the supervisor's memory. It holds only its end
//! of the socket pair: when the spawner exits or is killed, that end reads EOF and the spare
//! exits; nothing is left behind. It is the spawner's child, reaped with the others.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::unistd::{fork, ForkResult, Pid};

use super::child::{check_single_threaded, close_except, run_monitor};
use crate::sys::fdpass;

/// Test hook: set to `1`, the spawner forks every monitor and keeps no spare.
pub(super) const NO_SPARE_ENV: &str = "PODVISOR_TEST_NO_SPARE_MONITOR";

/// The longest container directory a spare is sent (the runtime's paths are far shorter).
const MAX_DIR: usize = 4096;

/// A spare monitor waiting for a container: its pid, a pidfd of it, our end of its socket.
pub(super) struct SpareMonitor {
    pid: Pid,
    pidfd: OwnedFd,
    sock: OwnedFd,
}

impl SpareMonitor {
    /// Forks the spare (the caller is the single-threaded spawner).
    pub(super) fn fork() -> io::Result<SpareMonitor> {
        check_single_threaded()?;
        let (ours, theirs) = fdpass::seqpacket_pair()?;
        // SAFETY: this process is single-threaded (checked just above): the child inherits no
        // lock held by another thread; it only runs `spare_main`, which ends in _exit.
        match unsafe { fork() }.map_err(io::Error::from)? {
            ForkResult::Child => {
                drop(ours);
                spare_main(theirs)
            }
            ForkResult::Parent { child } => {
                drop(theirs);
                // Our unreaped child: the pid cannot be recycled before this pidfd pins it.
                match crate::sys::pidfd::pidfd_open(child.as_raw()) {
                    Ok(pidfd) => Ok(SpareMonitor {
                        pid: child,
                        pidfd,
                        sock: ours,
                    }),
                    // Our end closes here: the spare reads EOF and exits (reaped later).
                    Err(e) => Err(io::Error::other(format!("pidfd_open {child}: {e}"))),
                }
            }
        }
    }

    /// Hands the spare a container: `dir` and the monitor's descriptors (ready, lock, log).
    /// Returns its pid and pidfd, or the descriptors back when it cannot take them (it died).
    pub(super) fn hand_over(
        self,
        dir: &Path,
        fds: Vec<OwnedFd>,
    ) -> Result<(Pid, OwnedFd), Vec<OwnedFd>> {
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let bytes = dir.as_os_str().as_bytes();
        if bytes.len() > MAX_DIR || fdpass::send(&self.sock, bytes, &raw).is_err() {
            return Err(fds);
        }
        // Our copies close here, as after a fork; the spare has its own.
        drop(fds);
        Ok((self.pid, self.pidfd))
    }

    /// Ends the unused spare (the spawner exits) and reaps it: it holds nothing.
    pub(super) fn retire(self) {
        let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(self.pid, None);
    }
}

/// The spare's life: nothing open but its socket, then a wait for a container. EOF (the
/// spawner gone, or it dropped the spare) ends it.
fn spare_main(sock: OwnedFd) -> ! {
    close_except(sock.as_raw_fd());
    // What `ps` shows until it becomes a monitor (`shim run <dir>` then).
    let _ = crate::sys::proctitle::set_args(&["shim", "spare-monitor"]);
    let mut buf = vec![0u8; MAX_DIR];
    // The spawner's code and stack pages it was forked with go: kept, they would be its own
    // once the spawner gives its back (measured: 1.5 MB PSS, 1 MB USS for a waiting spare).
    // A monitor maps what it runs from the page cache, as a freshly forked one does.
    if let Ok(r) = crate::sys::pages::Release::plan(true) {
        let _ = r.apply();
    }
    // And the heap the plan's reading of /proc/self/smaps touched (copied from the spawner's
    // pages on write), as a monitor trims its own once its container runs.
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of this process's heap to the kernel; the
    // spare is single-threaded.
    unsafe {
        libc::malloc_trim(0);
    }
    let code = loop {
        match fdpass::recv(&sock, &mut buf) {
            Ok((0, _)) => break 0,
            Ok((n, fds)) => {
                drop(sock);
                let dir = Path::new(std::ffi::OsStr::from_bytes(&buf[..n])).to_path_buf();
                break run_monitor(&dir, fds);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break 1,
        }
    };
    // SAFETY: ends the forked child without returning into the spawner's code.
    unsafe { libc::_exit(code) }
}
