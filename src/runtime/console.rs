//! runtime::console: the receiving end of an OCI console socket. libcontainer opens a pty
//! inside the container and sends its master over a unix socket (runc's `--console-socket`);
//! the monitor (`tty: true` containers) and `shim exec -t` both receive it here.

use std::io::{self, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixListener;

/// Receives the pty master libcontainer sends over the console socket `listener`; the
/// error says which step failed.
pub fn receive_master(listener: &UnixListener) -> io::Result<OwnedFd> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let ctx = |what: &str, e: &dyn std::fmt::Display| io::Error::other(format!("{what}: {e}"));
    listener.set_nonblocking(true)?;
    let (conn, _) = listener
        .accept()
        .map_err(|e| ctx("no console connection from the container", &e))?;
    conn.set_nonblocking(false)?;
    let mut name = [0u8; 256];
    let mut iov = [IoSliceMut::new(&mut name)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        conn.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|e| ctx("receiving the pty master", &e))?;
    let cmsgs = msg
        .cmsgs()
        .map_err(|e| ctx("receiving the pty master", &e))?;
    for c in cmsgs {
        if let ControlMessageOwned::ScmRights(fds) = c {
            if let Some(fd) = fds.first() {
                // SAFETY: the kernel installed this fd in our table for us (SCM_RIGHTS), and
                // nothing else owns it.
                return Ok(unsafe { OwnedFd::from_raw_fd(*fd) });
            }
        }
    }
    Err(io::Error::other("the console message carried no fd"))
}
