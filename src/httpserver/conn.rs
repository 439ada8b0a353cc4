//! httpserver::conn: the connection under a request — a socket (TCP or unix) wrapped in a
//! [`DeadlineStream`], or a rustls stream over one ([`super::tls`]) — seen through [`Conn`]:
//! its deadline, whether a quiet client hung up, and how it ends.
//!
//! The deadline covers a whole exchange, not each read: a slowloris client that trickles its
//! head byte by byte is cut when the deadline passes, however often it sends. A streamed answer
//! (a followed log) moves the deadline before each write instead. The socket stays visible to
//! the server (for `poll`), which is what noticing a hung-up follower needs.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{recv, MsgFlags};

/// A connected socket: what [`DeadlineStream`] needs of it.
pub trait Socket: Read + Write + AsFd {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()>;
    /// Shuts both directions down (the peer sees the end of the response now, even while
    /// another handle to the socket is open).
    fn shut_down(&self) -> io::Result<()>;
}

impl Socket for TcpStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, timeout)
    }
    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        TcpStream::set_write_timeout(self, timeout)
    }
    fn shut_down(&self) -> io::Result<()> {
        TcpStream::shutdown(self, std::net::Shutdown::Both)
    }
}

impl Socket for UnixStream {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_read_timeout(self, timeout)
    }
    fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        UnixStream::set_write_timeout(self, timeout)
    }
    fn shut_down(&self) -> io::Result<()> {
        UnixStream::shutdown(self, std::net::Shutdown::Both)
    }
}

/// A socket whose reads and writes fail with `TimedOut` once `deadline` has passed, however
/// the bytes trickle in (the socket timeout is set to what is left before each call).
#[derive(Debug)]
pub struct DeadlineStream<S = TcpStream> {
    sock: S,
    deadline: Instant,
}

impl<S: Socket> DeadlineStream<S> {
    pub fn new(sock: S, deadline: Instant) -> DeadlineStream<S> {
        DeadlineStream { sock, deadline }
    }

    /// Moves the deadline (for the response after the request was read).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    /// The socket, for socket options and `poll`.
    pub fn socket(&self) -> &S {
        &self.sock
    }

    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection deadline passed",
            ));
        }
        Ok(left)
    }
}

impl<S: Socket> Read for DeadlineStream<S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.sock.set_read_timeout(Some(left))?;
        self.sock.read(buf)
    }
}

impl<S: Socket> Write for DeadlineStream<S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.sock.set_write_timeout(Some(left))?;
        self.sock.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.sock.flush()
    }
}

/// One client connection as the exchange and streamed answers use it.
pub trait Conn: Read + Write {
    /// Reads and writes from now on must complete by `deadline`.
    fn set_deadline(&mut self, deadline: Instant);
    /// The next writes must complete within `limit` from now (a stream that outlives one
    /// whole-exchange deadline gives each write its own).
    fn extend_deadline(&mut self, limit: Duration) {
        self.set_deadline(Instant::now() + limit);
    }
    /// Waits up to `timeout` for the client to hang up; true if it did. Bytes the client sends
    /// meanwhile are read and ignored.
    fn client_gone(&mut self, timeout: Duration) -> bool;
    /// Ends the connection: `clean` after a complete exchange (TLS sends its close_notify),
    /// not after a failed write. The socket is shut down either way.
    fn finish(&mut self, clean: bool);
}

impl<S: Socket> Conn for DeadlineStream<S> {
    fn set_deadline(&mut self, deadline: Instant) {
        DeadlineStream::set_deadline(self, deadline);
    }

    fn client_gone(&mut self, timeout: Duration) -> bool {
        match wait_input(self.sock.as_fd(), timeout) {
            Input::Nothing => false,
            Input::Gone => true,
            Input::Some => {
                // Bytes after the request: read and ignore them; 0 means end of stream.
                let mut scratch = [0u8; 512];
                match recv(
                    self.sock.as_fd().as_raw_fd(),
                    &mut scratch,
                    MsgFlags::MSG_DONTWAIT,
                ) {
                    Ok(0) => true,
                    Ok(_) | Err(nix::errno::Errno::EAGAIN) | Err(nix::errno::Errno::EINTR) => false,
                    Err(_) => true,
                }
            }
        }
    }

    fn finish(&mut self, _clean: bool) {
        // The client may already be gone: nothing to do about it.
        let _ = self.sock.shut_down();
    }
}

/// What a client's socket showed within a wait.
pub(super) enum Input {
    /// Nothing (or the wait was interrupted).
    Nothing,
    /// A hang-up, an error, or a socket that cannot be polled.
    Gone,
    /// Bytes to read (possibly an end of stream).
    Some,
}

/// Waits up to `timeout` for input on `fd`. A hang-up shows as POLLHUP, or as POLLIN with an
/// end of stream the caller reads (nix 0.29 has no POLLRDHUP).
pub(super) fn wait_input(fd: BorrowedFd<'_>, timeout: Duration) -> Input {
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    // Ticks are well within PollTimeout's i32 milliseconds; a longer wait is capped.
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    match nix::poll::poll(&mut fds, timeout) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => Input::Nothing,
        Err(_) => Input::Gone,
        Ok(_) => {
            let revents = fds[0].revents().unwrap_or(PollFlags::empty());
            if revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR) {
                Input::Gone
            } else {
                Input::Some
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_cut_reads_and_hang_ups_are_seen() {
        let (a, mut b) = UnixStream::pair().expect("pair");
        let mut s = DeadlineStream::new(a, Instant::now() + Duration::from_millis(50));
        let started = Instant::now();
        let err = s.read(&mut [0u8; 8]).expect_err("nothing to read");
        assert!(started.elapsed() < Duration::from_secs(2), "{err}");
        let err = s.read(&mut [0u8; 8]).expect_err("deadline passed");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);

        s.extend_deadline(Duration::from_secs(5));
        assert!(!s.client_gone(Duration::from_millis(10)));
        b.write_all(b"ignored").expect("send");
        assert!(!s.client_gone(Duration::from_millis(10)));
        drop(b);
        assert!(s.client_gone(Duration::from_millis(100)));
    }
}
