//! Process file descriptors: a stable handle on a process (a monitor, a container's init)
//! that a recycled pid can never alias. Signals and reaping go through the pidfd.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use rustix::process::{Pid, PidfdFlags, WaitId, WaitIdOptions};

/// pidfd_open(2).
pub fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    let pid = Pid::from_raw(pid).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
    Ok(rustix::process::pidfd_open(pid, PidfdFlags::empty())?)
}

/// pidfd_send_signal(2) with any signal number (rustix only takes the named ones, and
/// podvisor forwards real-time signals too).
pub fn pidfd_send_signal(fd: &OwnedFd, signal: i32) -> io::Result<()> {
    // SAFETY: plain syscall on a pidfd we borrow for the call, a null siginfo and no flags;
    // no memory is passed.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            fd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reaps the process behind `fd` if it is our child and has exited; ECHILD (not our child,
/// e.g. a monitor re-adopted after a restart) is not an error.
pub fn reap_pidfd(fd: &OwnedFd) {
    let _ = rustix::process::waitid(
        WaitId::PidFd(fd.as_fd()),
        WaitIdOptions::EXITED | WaitIdOptions::NOHANG,
    );
}
