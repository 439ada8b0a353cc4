//! Messages with file descriptors over a `SOCK_SEQPACKET` unix socket pair (`SCM_RIGHTS`):
//! how the runtime hands a container's lock, ready pipe and log to the spawner
//! (`runtime::spawner`) and gets a pidfd back. One `send` is one message and one `recv`
//! returns exactly one message, with its descriptors (close-on-exec in the receiver).

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::cmsg_space;
use nix::sys::socket::{
    recvmsg, sendmsg, socketpair, AddressFamily, ControlMessage, ControlMessageOwned, MsgFlags,
    SockFlag, SockType,
};

/// The most descriptors one message carries.
pub const MAX_FDS: usize = 4;

/// A connected `SOCK_SEQPACKET` pair, both ends close-on-exec.
pub fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(io::Error::from)
}

/// Sends `data` and `fds` as one message. `MSG_NOSIGNAL`: a peer that is gone is `EPIPE`,
/// never a SIGPIPE.
pub fn send(sock: impl AsFd, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let iov = [IoSlice::new(data)];
    let cmsg = [ControlMessage::ScmRights(fds)];
    let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsg };
    loop {
        match sendmsg::<()>(
            sock.as_fd().as_raw_fd(),
            &iov,
            cmsgs,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(n) if n == data.len() => return Ok(()),
            Ok(n) => {
                return Err(io::Error::other(format!(
                    "short message: {n} of {} bytes sent",
                    data.len()
                )))
            }
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Receives one message into `buf`: its length (0 when the peer closed its end) and its
/// descriptors. A message longer than `buf`, or with more than [`MAX_FDS`] descriptors, is
/// an error (what arrived of it is dropped and its descriptors closed).
pub fn recv(sock: impl AsFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    let mut space = cmsg_space!([RawFd; MAX_FDS]);
    loop {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = match recvmsg::<()>(
            sock.as_fd().as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(m) => m,
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let mut fds = Vec::new();
        for c in msg.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = c {
                // SAFETY: the kernel installed these descriptors in this process for this
                // message; nothing else owns them.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        if msg.flags.contains(MsgFlags::MSG_CTRUNC) {
            return Err(io::Error::other("too many descriptors in one message"));
        }
        if msg.flags.contains(MsgFlags::MSG_TRUNC) {
            return Err(io::Error::other("message longer than the buffer"));
        }
        return Ok((msg.bytes, fds));
    }
}

/// dup2 `from` onto `to`, clearing close-on-exec (also when they are already equal).
pub fn move_fd(from: RawFd, to: RawFd) -> io::Result<()> {
    // SAFETY: plain fd syscalls, async-signal-safe; called between fork and exec.
    unsafe {
        if from == to {
            let flags = libc::fcntl(to, libc::F_GETFD);
            if flags < 0 || libc::fcntl(to, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                return Err(io::Error::last_os_error());
            }
        } else if libc::dup2(from, to) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn move_fd_clears_cloexec_when_already_in_place() {
        let (r, _w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let fd = r.as_raw_fd();
        move_fd(fd, fd).expect("move");
        // SAFETY: F_GETFD on an fd we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, 0);
    }
    use std::io::{Read, Write};

    #[test]
    fn one_message_carries_its_descriptors_and_eof_is_zero() {
        let (a, b) = seqpacket_pair().expect("pair");
        let (r, w) = nix::unistd::pipe().expect("pipe");
        send(&a, b"hello", &[w.as_raw_fd()]).expect("send");
        send(&a, b"second", &[]).expect("send");
        drop(w);
        let mut buf = [0u8; 64];
        let (n, fds) = recv(&b, &mut buf).expect("recv");
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 1);
        // The received descriptor is the pipe's write end.
        let mut w2 = std::fs::File::from(fds.into_iter().next().expect("fd"));
        w2.write_all(b"x").expect("write");
        drop(w2);
        let mut got = String::new();
        std::fs::File::from(r)
            .read_to_string(&mut got)
            .expect("read");
        assert_eq!(got, "x");
        let (n, fds) = recv(&b, &mut buf).expect("recv");
        assert_eq!((&buf[..n], fds.len()), (&b"second"[..], 0));
        drop(a);
        let (n, _) = recv(&b, &mut buf).expect("eof");
        assert_eq!(n, 0);
        // A peer that is gone: EPIPE, no signal.
        let err = send(&b, b"x", &[]).expect_err("peer gone");
        assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
    }

    #[test]
    fn a_message_longer_than_the_buffer_is_refused() {
        let (a, b) = seqpacket_pair().expect("pair");
        send(&a, &[7u8; 100], &[]).expect("send");
        let mut buf = [0u8; 10];
        assert!(recv(&b, &mut buf).is_err());
    }
}
