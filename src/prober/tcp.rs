//! prober::tcp: the tcpSocket handler — the probe passes when a TCP connection to host:port
//! is established within the timeout (the kubelet's pkg/probe/tcp); the connection is closed
//! at once.

use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::ProbeResult;

/// `host:port`, with an IPv6 literal in brackets (Go's `net.JoinHostPort`, as the kubelet).
pub(crate) fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// Connects to `host:port` within `timeout`.
pub fn probe(host: &str, port: u16, timeout: Duration) -> ProbeResult {
    let addr = authority(host, port);
    match connect(&addr, timeout) {
        Ok(_) => ProbeResult::Success,
        Err(e) => ProbeResult::Failure {
            message: format!("dial tcp {addr}: {e}"),
        },
    }
}

/// Opens a TCP connection to the first address of `addr` that accepts within `timeout`.
pub(crate) fn connect(addr: &str, timeout: Duration) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Instant;

    #[test]
    fn open_port_passes_closed_port_fails() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        assert_eq!(
            probe("127.0.0.1", port, Duration::from_secs(1)),
            ProbeResult::Success
        );
        drop(l);
        match probe("127.0.0.1", port, Duration::from_secs(1)) {
            ProbeResult::Failure { message } => {
                assert!(message.contains("refused"), "{message}")
            }
            r => panic!("closed port: {r:?}"),
        }
    }

    #[test]
    fn unroutable_address_times_out() {
        // TEST-NET-1 is never routed: the SYN goes unanswered (or the network is unreachable,
        // which fails even faster); either way within about the timeout.
        let t = Instant::now();
        let r = probe("192.0.2.1", 80, Duration::from_millis(300));
        assert!(!r.passed(), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    }
}
