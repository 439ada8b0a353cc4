//! sys::stop: a stop request that a thread blocks on beside what it serves. An eventfd
//! becomes readable when [`StopSignal::stop`] is called, so an accept loop polls its socket
//! and the stop together with no timeout: idle, it is never woken (issue 47 measured the API
//! socket's 100 ms tick at 10 wakeups a second, the node API's and healthz's 1 s ticks at 1
//! each), and it still stops at once.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

/// A one-way stop flag with a descriptor to poll.
#[derive(Debug)]
pub struct StopSignal {
    stopped: AtomicBool,
    efd: EventFd,
}

impl StopSignal {
    pub fn new() -> io::Result<StopSignal> {
        Ok(StopSignal {
            stopped: AtomicBool::new(false),
            efd: EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?,
        })
    }

    /// Requests the stop; the descriptor stays readable from now on.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        // EAGAIN only when the counter is at its maximum: it is readable then anyway.
        let _ = self.efd.write(1);
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Readable once stopped: poll it beside the descriptors the thread waits for.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.efd.as_fd()
    }

    /// Sleeps up to `timeout` or until the stop; true if stopped.
    pub fn wait(&self, timeout: Duration) -> bool {
        if self.is_stopped() {
            return true;
        }
        let mut fds = [PollFd::new(self.fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
        match nix::poll::poll(&mut fds, timeout) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            // A poll that cannot run at all: sleep the time instead, the flag still decides.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
        self.is_stopped()
    }
}

/// Polls `fd` for input and `stop` together, without a timeout. `Ok(true)`: `fd` is
/// readable; `Ok(false)`: stopped (or interrupted: look at the flag again).
pub fn wait_readable(fd: BorrowedFd<'_>, stop: &StopSignal) -> nix::Result<bool> {
    if stop.is_stopped() {
        return Ok(false);
    }
    let mut fds = [
        PollFd::new(fd, PollFlags::POLLIN),
        PollFd::new(stop.fd(), PollFlags::POLLIN),
    ];
    match nix::poll::poll(&mut fds, PollTimeout::NONE) {
        Ok(_) => {}
        Err(nix::errno::Errno::EINTR) => return Ok(false),
        Err(e) => return Err(e),
    }
    if stop.is_stopped() {
        return Ok(false);
    }
    Ok(fds[0]
        .revents()
        .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLERR | PollFlags::POLLHUP)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_blocked_waiter_ends_at_the_stop_and_not_before() {
        let dir = tempfile::tempdir().expect("tempdir");
        let listener = UnixListener::bind(dir.path().join("s")).expect("bind");
        let stop = Arc::new(StopSignal::new().expect("eventfd"));
        let s = Arc::clone(&stop);
        let t0 = Instant::now();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            s.stop();
        });
        let readable = wait_readable(listener.as_fd(), &stop).expect("poll");
        stopper.join().expect("stopper");
        assert!(!readable);
        assert!(stop.is_stopped());
        assert!(t0.elapsed() >= Duration::from_millis(200));
        assert!(
            stop.wait(Duration::from_secs(60)),
            "stays stopped, returns at once"
        );
    }

    #[test]
    fn a_connection_makes_the_listener_readable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("s");
        let listener = UnixListener::bind(&path).expect("bind");
        let stop = StopSignal::new().expect("eventfd");
        let _client = std::os::unix::net::UnixStream::connect(&path).expect("connect");
        assert!(wait_readable(listener.as_fd(), &stop).expect("poll"));
        assert!(
            !stop.wait(Duration::from_millis(10)),
            "not stopped: times out"
        );
    }
}
