//! procfs: process identity that survives pid reuse, and pidfds.
//!
//! A pid alone is not an identity: after a daemon restart the pid recorded on disk may belong
//! to another process. A [`ProcessId`] pairs the pid with the process start time (field 22 of
//! `/proc/<pid>/stat`, clock ticks since boot); [`ProcessId::is_alive`] checks both. Signals go
//! through a pidfd opened after that check, so they cannot reach a recycled pid.
//!
//! Also the small process helpers the monitor and the exec helper share: effective
//! capabilities, a non-blocking reap, non-blocking fds.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A process identity: pid plus start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessId {
    pub pid: i32,
    pub start_time: u64,
}

/// Errors reading process information.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("failed to read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("malformed {path}")]
    Malformed { path: PathBuf },
}

impl ProcessId {
    /// The identity of a live process.
    pub fn of(pid: i32) -> Result<ProcessId, ProcError> {
        Ok(ProcessId {
            pid,
            start_time: start_time(pid)?,
        })
    }

    /// The identity of the calling process.
    pub fn current() -> Result<ProcessId, ProcError> {
        ProcessId::of(std::process::id() as i32)
    }

    /// True if a process with this pid and this start time exists (zombies count as dead).
    pub fn is_alive(&self) -> bool {
        match stat_fields(self.pid) {
            Ok((state, start)) => start == self.start_time && state != 'Z' && state != 'X',
            Err(_) => false,
        }
    }

    /// Opens a pidfd for this process after checking its identity. `Ok(None)` if it is gone.
    pub fn open_pidfd(&self) -> io::Result<Option<OwnedFd>> {
        let fd = match pidfd_open(self.pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Ok(None),
            Err(e) => return Err(e),
        };
        // The pidfd now pins the process; check it is still the one we mean.
        if self.is_alive() {
            Ok(Some(fd))
        } else {
            Ok(None)
        }
    }

    /// Sends `signal` if the process is still the one identified. Returns false if it is gone.
    pub fn signal(&self, signal: i32) -> io::Result<bool> {
        match self.open_pidfd()? {
            Some(fd) => match pidfd_send_signal(&fd, signal) {
                Ok(()) => Ok(true),
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(false),
                Err(e) => Err(e),
            },
            None => Ok(false),
        }
    }
}

/// Start time of `pid` in clock ticks since boot.
pub fn start_time(pid: i32) -> Result<u64, ProcError> {
    stat_fields(pid).map(|(_, start)| start)
}

fn stat_fields(pid: i32) -> Result<(char, u64), ProcError> {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    let text = fs::read_to_string(&path).map_err(|source| ProcError::Read {
        path: path.clone(),
        source,
    })?;
    parse_stat(&text).ok_or(ProcError::Malformed { path })
}

/// Parses (state, starttime) from a /proc/<pid>/stat line. The command name may contain spaces
/// and parentheses, so fields are counted after the last ')'.
fn parse_stat(text: &str) -> Option<(char, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After the comm: field 3 is the state, field 22 the start time.
    let state = fields.next()?.chars().next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

pub use crate::sys::pidfd::{pidfd_open, pidfd_send_signal, reap_pidfd};

/// Whether this process's effective capability set holds capability number `cap`
/// (linux/capability.h), from `/proc/self/status`.
pub fn has_effective_cap(cap: u32) -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("CapEff:"))
                .and_then(|l| u64::from_str_radix(l[7..].trim(), 16).ok())
        })
        .is_some_and(|mask| mask & (1u64 << cap) != 0)
}

/// Reaps `pid` if it has exited or was killed; `None` while it runs (or only stopped).
pub fn try_reap(pid: nix::unistd::Pid) -> nix::Result<Option<nix::sys::wait::WaitStatus>> {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    match waitpid(pid, Some(WaitPidFlag::WNOHANG))? {
        s @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..)) => Ok(Some(s)),
        _ => Ok(None),
    }
}

/// Sets O_NONBLOCK on `fd`.
pub fn set_nonblocking(fd: std::os::fd::BorrowedFd<'_>) -> nix::Result<()> {
    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    let flags = fcntl(fd.as_raw_fd(), FcntlArg::F_GETFL)?;
    fcntl(
        fd.as_raw_fd(),
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_handles_parentheses_and_spaces_in_comm() {
        let line = "1234 (my (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(line), Some(('S', 987654)));
    }

    #[test]
    fn current_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessId::current().expect("self");
        assert!(me.is_alive());
        let other = ProcessId {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        assert!(!other.is_alive());
        assert!(other.open_pidfd().expect("pidfd").is_none());
    }

    #[test]
    fn signal_zero_reaches_live_process_only() {
        let me = ProcessId::current().expect("self");
        assert!(me.signal(0).expect("signal"));
        let gone = ProcessId {
            pid: i32::MAX - 7,
            start_time: 1,
        };
        assert!(!gone.signal(0).expect("signal"));
    }
}
