//! What a child of the spawner does to become a clean process, as if it had been exec'd: the
//! single-thread check fork without exec needs, its own session, stdio, only its own
//! descriptors, no blocked signal, its command line; and a child (forked on request, or the
//! spare monitor) becoming a container's monitor ([`run_monitor`]).

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use nix::sys::signal::{self, SigSet, SigmaskHow};

use crate::runtime::monitor;
use crate::runtime::protocol::{LOCK_FD, READY_FD};

/// Threads of this process, from `/proc/self/task`.
fn thread_count() -> io::Result<usize> {
    Ok(fs::read_dir("/proc/self/task")?.count())
}

/// Fails unless this process has exactly one thread.
pub(super) fn check_single_threaded() -> io::Result<()> {
    match thread_count()? {
        1 => Ok(()),
        n => Err(io::Error::other(format!(
            "the spawner has {n} threads: fork without exec needs exactly one"
        ))),
    }
}

/// stdin and stdout to /dev/null.
fn null_stdio() -> io::Result<()> {
    let null = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for target in [0, 1] {
        dup_to(null.as_raw_fd(), target)?;
    }
    Ok(())
}

fn dup_to(from: RawFd, to: RawFd) -> io::Result<()> {
    crate::sys::fdpass::move_fd(from, to)
}

/// A forked child (or the spare monitor) as the monitor of `dir`: set up as one, then
/// `monitor::run`. Returns its exit code.
pub(super) fn run_monitor(dir: &Path, fds: Vec<OwnedFd>) -> i32 {
    match become_monitor(dir, fds) {
        Ok(()) => monitor::run(dir),
        Err(e) => {
            // Stderr is shim.log when the descriptors made it, the spawner's otherwise.
            eprintln!("monitor for {}: setting up: {e}", dir.display());
            1
        }
    }
}

/// The process state a monitor had when it was exec'd with its descriptors: its own session,
/// /dev/null as stdin and stdout, `shim.log` as stderr, the ready pipe as fd 3, the lock as
/// fd 4, nothing else open, no signal blocked, its command line `podvisor shim run <dir>`.
fn become_monitor(dir: &Path, fds: Vec<OwnedFd>) -> io::Result<()> {
    let mut fds = fds.into_iter();
    let (Some(ready), Some(lock), Some(log)) = (fds.next(), fds.next(), fds.next()) else {
        return Err(io::Error::other("missing descriptors"));
    };
    nix::unistd::setsid().map_err(io::Error::from)?;
    // Park them above every target first so that no dup2 clobbers another; every copy is
    // closed below (`close_from`), so none is dropped here.
    let raw = [ready, lock, log].map(std::os::fd::IntoRawFd::into_raw_fd);
    let mut parked = [0; 3];
    for (p, fd) in parked.iter_mut().zip(raw) {
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor this process owns.
        *p = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        if *p < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let [ready, lock, log] = parked;
    null_stdio()?;
    dup_to(log, 2)?;
    dup_to(ready, READY_FD)?;
    dup_to(lock, LOCK_FD)?;
    // The received and parked copies, the spawner's socket and signalfd, everything else.
    close_from(LOCK_FD + 1);
    unblock_signals();
    set_title(&["shim", "run"], dir);
    Ok(())
}

/// The sandbox helper's state: its own session, no stdio (it reports on its result pipe,
/// `keep`, close-on-exec so that the pod init it may exec never holds it), nothing else open,
/// no signal blocked, its command line `podvisor shim sandbox <dir>`.
pub(super) fn prepare_helper(dir: &Path, keep: RawFd) -> io::Result<()> {
    nix::unistd::setsid().map_err(io::Error::from)?;
    null_stdio()?;
    close_except(keep);
    unblock_signals();
    set_title(&["shim", "sandbox"], dir);
    Ok(())
}

/// Closes every descriptor above stdio but `keep`: the spawner's socket, signalfd and
/// anything else a child inherited.
pub(super) fn close_except(keep: RawFd) {
    if keep > 3 {
        close_range(3, keep - 1);
    }
    close_from(keep.max(2) + 1);
}

fn unblock_signals() {
    let _ = signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
}

fn set_title(args: &[&str], dir: &Path) {
    let dir = dir.to_string_lossy();
    let mut all: Vec<&str> = args.to_vec();
    all.push(&dir);
    let _ = crate::sys::proctitle::set_args(&all);
}

/// Closes every descriptor from `first` up.
pub(super) fn close_from(first: RawFd) {
    close_range(first, RawFd::MAX);
}

/// Closes the descriptors `first..=last` (`close_range(2)`, Linux >= 5.9; a loop over
/// `/proc/self/fd` where it is missing).
fn close_range(first: RawFd, last: RawFd) {
    // SAFETY: close_range with no flags only closes descriptors; whatever this process
    // owned at those numbers is not used again (callers hand over or forget their copies).
    let r = unsafe { libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32) };
    if r == 0 {
        return;
    }
    let fds: Vec<RawFd> = fs::read_dir("/proc/self/fd")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .filter(|fd| (first..=last).contains(fd))
                .collect()
        })
        .unwrap_or_default();
    for fd in fds {
        // SAFETY: as above; the directory's own descriptor may be among them and is closed
        // already (EBADF is harmless).
        unsafe {
            libc::close(fd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fork_without_exec_is_refused_in_a_multi_threaded_process() {
        // The test harness runs this test on a thread of its own: at least two threads.
        let t = std::thread::spawn(|| std::thread::sleep(std::time::Duration::from_millis(200)));
        let e = check_single_threaded().expect_err("more than one thread");
        assert!(e.to_string().contains("threads"), "{e}");
        t.join().expect("join");
    }
}
