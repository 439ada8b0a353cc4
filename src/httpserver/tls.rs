//! httpserver::tls: a rustls server stream over a [`DeadlineStream`] as a [`Conn`] — the
//! handshake under the connection's deadline, a quiet client's hang-up seen through its TLS
//! records (a close_notify, an end of stream), and a proper close_notify at the end.
//! Certificates, versions and client authentication are the caller's (`nodeapi::tls`).

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use rustls::{ServerConnection, StreamOwned};

use super::conn::{wait_input, Conn, DeadlineStream, Input, Socket};

/// A server-side TLS connection over TCP.
pub type TlsConn = StreamOwned<ServerConnection, DeadlineStream<TcpStream>>;

/// Completes the handshake of `tls` (within its socket's deadline).
pub fn handshake(tls: &mut TlsConn) -> io::Result<()> {
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(())
}

impl Conn for TlsConn {
    fn set_deadline(&mut self, deadline: Instant) {
        self.sock.set_deadline(deadline);
    }

    fn client_gone(&mut self, timeout: Duration) -> bool {
        match wait_input(self.sock.socket().as_fd(), timeout) {
            Input::Nothing => return false,
            Input::Gone => return true,
            Input::Some => {}
        }
        // Bytes from the client: a close_notify, an end of stream, or something to ignore.
        self.sock
            .set_deadline(Instant::now() + Duration::from_secs(1));
        match self.conn.read_tls(&mut self.sock) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
        match self.conn.process_new_packets() {
            Err(_) => true,
            Ok(state) => {
                if state.peer_has_closed() {
                    return true;
                }
                let mut scratch = vec![0u8; state.plaintext_bytes_to_read()];
                let _ = self.conn.reader().read(&mut scratch);
                false
            }
        }
    }

    fn finish(&mut self, clean: bool) {
        if clean {
            self.sock
                .set_deadline(Instant::now() + Duration::from_secs(1));
            self.conn.send_close_notify();
            // The client may already be gone: nothing to do about it.
            let _ = self.conn.complete_io(&mut self.sock);
        }
        let _ = self.sock.socket().shut_down();
    }
}
