//! The sd_notify(3) protocol: one datagram of `KEY=value` lines to the unix socket named by
//! `$NOTIFY_SOCKET` (a path, or an abstract name written with a leading `@`), and the
//! watchdog interval systemd passes in `$WATCHDOG_USEC` / `$WATCHDOG_PID`.
//!
//! Written here (about 40 lines) rather than taken from the `sd-notify` crate: the protocol
//! is a single `send_to` on a socket kept for the daemon's life. The daemon reads the
//! variables once, before it starts any thread, and removes them from its environment, so no
//! monitor, helper or hook inherits them ([`take_from_env`]).

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// How long one notification may wait for room in systemd's socket.
const SEND_TIMEOUT: Duration = Duration::from_millis(500);

/// Where service state goes. A trait so the sync loop is tested with a recording fake.
pub trait Notify: Send {
    /// Sends one notification (`READY=1`, `STATUS=...`, `WATCHDOG=1`, newline-separated).
    fn notify(&mut self, state: &str) -> io::Result<()>;
}

/// The service manager's notification socket.
#[derive(Debug)]
pub struct NotifySocket {
    socket: UnixDatagram,
    addr: SocketAddr,
}

impl NotifySocket {
    /// The socket named by `$NOTIFY_SOCKET`; `None` when not started by systemd with
    /// `Type=notify` (or `NotifyAccess=`).
    pub fn from_env() -> io::Result<Option<NotifySocket>> {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(path) if !path.is_empty() => NotifySocket::connect(&path.to_string_lossy()),
            _ => Ok(None),
        }
    }

    fn connect(path: &str) -> io::Result<Option<NotifySocket>> {
        let addr = if let Some(name) = path.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        } else if path.starts_with('/') {
            SocketAddr::from_pathname(path)?
        } else {
            // vsock: and other schemes are for VMs and containers talking to a host manager.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("NOTIFY_SOCKET {path:?}: only unix socket paths and @abstract names"),
            ));
        };
        let socket = UnixDatagram::unbound()?;
        // The sync loop sends; a systemd too busy to read its socket must not stop it turning
        // over (the notification is sent again, `ServiceReporter`).
        socket.set_write_timeout(Some(SEND_TIMEOUT))?;
        Ok(Some(NotifySocket { socket, addr }))
    }
}

impl Notify for NotifySocket {
    fn notify(&mut self, state: &str) -> io::Result<()> {
        self.socket
            .send_to_addr(state.as_bytes(), &self.addr)
            .map(drop)
    }
}

/// The watchdog interval systemd asks for (`WatchdogSec=`), when it is meant for this
/// process: `$WATCHDOG_USEC` set and `$WATCHDOG_PID` absent or our pid.
pub fn watchdog_from_env() -> Option<Duration> {
    watchdog_interval(
        std::env::var("WATCHDOG_USEC").ok().as_deref(),
        std::env::var("WATCHDOG_PID").ok().as_deref(),
        std::process::id(),
    )
}

fn watchdog_interval(usec: Option<&str>, pid: Option<&str>, me: u32) -> Option<Duration> {
    if let Some(pid) = pid {
        if pid.trim().parse::<u32>().ok()? != me {
            return None;
        }
    }
    let usec: u64 = usec?.trim().parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// The variables a child must not inherit: a helper notifying as the daemon would confuse
/// systemd's view of the service.
const NOTIFY_ENV: [&str; 3] = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// Reads the notification socket and the watchdog interval, then removes their variables
/// from the environment. Call it before the process starts any thread: `remove_var` races
/// with concurrent readers of the environment.
pub fn take_from_env() -> (io::Result<Option<NotifySocket>>, Option<Duration>) {
    let socket = NotifySocket::from_env();
    let watchdog = watchdog_from_env();
    for v in NOTIFY_ENV {
        std::env::remove_var(v);
    }
    (socket, watchdog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_interval_only_for_this_process() {
        let cases = [
            (Some("30000000"), None, Some(Duration::from_secs(30))),
            (Some("30000000"), Some("42"), Some(Duration::from_secs(30))),
            (Some("30000000"), Some("43"), None),
            (Some("0"), None, None),
            (Some("x"), None, None),
            (None, Some("42"), None),
        ];
        for (usec, pid, want) in cases {
            assert_eq!(watchdog_interval(usec, pid, 42), want, "{usec:?} {pid:?}");
        }
    }

    #[test]
    fn notifies_a_path_socket_and_an_abstract_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("notify");
        let server = UnixDatagram::bind(&path).expect("bind");
        let mut n = NotifySocket::connect(&path.to_string_lossy())
            .expect("connect")
            .expect("socket");
        n.notify("READY=1\nSTATUS=1 pod running").expect("send");
        let mut buf = [0u8; 128];
        let len = server.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..len], b"READY=1\nSTATUS=1 pod running");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("podvisor-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).expect("addr");
        let server = UnixDatagram::bind_addr(&addr).expect("bind abstract");
        let mut n = NotifySocket::connect(&format!("@{name}"))
            .expect("connect")
            .expect("socket");
        n.notify("WATCHDOG=1").expect("send");
        let len = server.recv(&mut buf).expect("recv");
        assert_eq!(&buf[..len], b"WATCHDOG=1");

        assert!(NotifySocket::connect("vsock:2:1234").is_err());
    }
}
