//! runtime::monitor::attach: a container's stdin and terminal in the monitor (`tty`, `stdin`,
//! `stdinOnce`) and the attach socket `podvisor attach` connects to.
//!
//! With `tty: true` the container's process gets a pty (libcontainer's console socket, as
//! runc's `--console-socket`); the monitor keeps the master for the container's life and
//! copies its output into the CRI log as `stdout` (containerd logs tty output so), whether
//! anyone is attached or not. With `stdin: true` the container's stdin stays open: the pty
//! master's input side, or a pipe whose write end the monitor holds.
//!
//! `attach.sock` in the container's runtime directory (0700, root) takes one session at a
//! time. Frames both ways are `[kind u8][length u32 BE][payload]`: the monitor sends `HELLO`
//! (payload `[tty, stdin open]`) then `STDOUT`/`STDERR` as the container writes; the client
//! sends `STDIN`, `RESIZE` (`[rows u16 BE][cols u16 BE]`) and `STDIN_CLOSE`. The monitor never
//! blocks on a client: output for a client that does not read (more than 1 MiB queued) ends
//! its session, and input is only read while the container's stdin takes it. With
//! `stdinOnce` the container's stdin is closed when the first session ends (kubelet
//! semantics); on a pty "closed" is the terminal's end-of-file character (`VEOF`, ^D), which is
//! what a shell reading the terminal sees as the end of its input.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};

use nix::poll::PollFlags;

use crate::logs::Stream;
use crate::sys::tty;

/// The attach socket's name in the container's runtime directory.
pub const ATTACH_SOCKET: &str = "attach.sock";
/// The console socket's name (only during the start of a tty container).
pub const CONSOLE_SOCKET: &str = "console.sock";

pub const HELLO: u8 = 0;
pub const STDOUT: u8 = 1;
pub const STDERR: u8 = 2;
pub const ERROR: u8 = 3;
pub const STDIN: u8 = 16;
pub const RESIZE: u8 = 17;
pub const STDIN_CLOSE: u8 = 18;
/// Largest payload accepted.
pub const MAX_FRAME: usize = 64 * 1024;
/// Output queued for a client that is not reading before its session is ended.
const MAX_QUEUED: usize = 1 << 20;
/// The terminal's end-of-file character (termios' default VEOF, ^D).
const VEOF: u8 = 4;

/// One frame.
pub fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + payload.len());
    out.push(kind);
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a byte stream into frames.
#[derive(Debug, Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

/// A frame longer than [`MAX_FRAME`].
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("attach frame of {0} bytes is over the limit")]
pub struct FrameTooLong(pub usize);

impl FrameReader {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }
    /// The next complete frame, if any.
    pub fn next_frame(&mut self) -> Result<Option<(u8, Vec<u8>)>, FrameTooLong> {
        if self.buf.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if len > MAX_FRAME {
            return Err(FrameTooLong(len));
        }
        if self.buf.len() < 5 + len {
            return Ok(None);
        }
        let kind = self.buf[0];
        let payload = self.buf[5..5 + len].to_vec();
        self.buf.drain(..5 + len);
        Ok(Some((kind, payload)))
    }
}

struct Client {
    sock: UnixStream,
    frames: FrameReader,
    queued: Vec<u8>,
    /// False once the client shut its sending side (its stdin ended): output still flows.
    reading: bool,
}

/// The monitor's side of a container's stdin, terminal and attach sessions.
pub struct ContainerIo {
    pub id: String,
    pub tty: bool,
    pub stdin_once: bool,
    /// The pty master (tty containers), for window sizes and ^D.
    master: Option<OwnedFd>,
    /// Where attach input goes: the pty master or the stdin pipe; `None` without stdin or
    /// once it was closed.
    input: Option<OwnedFd>,
    pending: Vec<u8>,
    listener: Option<UnixListener>,
    client: Option<Client>,
}

impl ContainerIo {
    pub fn new(
        id: String,
        tty: bool,
        stdin_once: bool,
        master: Option<OwnedFd>,
        input: Option<OwnedFd>,
        listener: Option<UnixListener>,
    ) -> ContainerIo {
        if let Some(l) = &listener {
            let _ = l.set_nonblocking(true);
        }
        ContainerIo {
            id,
            tty,
            stdin_once,
            master,
            input,
            pending: Vec::new(),
            listener,
            client: None,
        }
    }

    /// What to poll for, in this order: the listener (new sessions), the client (input while
    /// [`Self::reads_client`], room for queued output), the container's stdin (room for
    /// pending input).
    pub fn poll_fds(&self) -> [Option<(BorrowedFd<'_>, PollFlags)>; 3] {
        let client = self.client.as_ref().map(|c| {
            let mut flags = PollFlags::empty();
            if self.reads_client() {
                flags |= PollFlags::POLLIN;
            }
            if !c.queued.is_empty() {
                flags |= PollFlags::POLLOUT;
            }
            (c.sock.as_fd(), flags)
        });
        [
            self.listener
                .as_ref()
                .map(|l| (l.as_fd(), PollFlags::POLLIN)),
            client,
            self.input
                .as_ref()
                .filter(|_| !self.pending.is_empty())
                .map(|i| (i.as_fd(), PollFlags::POLLOUT)),
        ]
    }

    /// Whether the client's input should be read now (it still sends, and the container's
    /// stdin takes more).
    pub fn reads_client(&self) -> bool {
        self.pending.is_empty() && self.client.as_ref().is_some_and(|c| c.reading)
    }

    pub fn on_listener(&mut self) {
        let Some(l) = &self.listener else { return };
        while let Ok((sock, _)) = l.accept() {
            if self.client.is_some() {
                let mut s = sock;
                let _ = s.write_all(&encode(ERROR, b"another attach session is active"));
                continue;
            }
            if sock.set_nonblocking(true).is_err() {
                continue;
            }
            let mut c = Client {
                sock,
                frames: FrameReader::default(),
                queued: encode(HELLO, &[self.tty as u8, self.input.is_some() as u8]),
                reading: true,
            };
            if flush(&mut c).is_ok() {
                self.client = Some(c);
            }
        }
    }

    /// The client's socket is readable and/or writable; `hangup`: the client is gone (closed
    /// both ways), not just done sending.
    pub fn on_client(&mut self, readable: bool, writable: bool, hangup: bool) {
        let Some(c) = self.client.as_mut() else {
            return;
        };
        if writable && flush(c).is_err() {
            return self.end_session();
        }
        if !readable {
            return;
        }
        if !c.reading {
            // Not polled for input any more: this is a hangup or an error.
            return self.end_session();
        }
        if hangup && !self.reads_client() {
            return self.end_session();
        }
        let Some(c) = self.client.as_mut() else {
            return;
        };
        let mut buf = [0u8; 16 * 1024];
        match c.sock.read(&mut buf) {
            Ok(0) if hangup => return self.end_session(),
            Ok(0) => {
                // The client's input ended; its output keeps flowing until it goes away.
                c.reading = false;
                if self.stdin_once {
                    self.close_input();
                }
                return;
            }
            Ok(n) => c.frames.push(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return,
            Err(_) => return self.end_session(),
        }
        loop {
            let Some(c) = self.client.as_mut() else {
                return;
            };
            match c.frames.next_frame() {
                Ok(Some((STDIN, data))) => {
                    if self.input.is_some() {
                        self.pending.extend_from_slice(&data);
                        self.flush_input();
                    }
                }
                Ok(Some((RESIZE, p))) if p.len() == 4 => {
                    if let Some(m) = &self.master {
                        let ws = tty::Winsize {
                            ws_row: u16::from_be_bytes([p[0], p[1]]),
                            ws_col: u16::from_be_bytes([p[2], p[3]]),
                            ws_xpixel: 0,
                            ws_ypixel: 0,
                        };
                        let _ = tty::set_window_size(m, ws);
                    }
                }
                Ok(Some((STDIN_CLOSE, _))) => self.close_input(),
                Ok(Some((kind, _))) => {
                    log::warn!("container {}: attach: unknown frame {kind}", self.id);
                    return self.end_session();
                }
                Ok(None) => return,
                Err(e) => {
                    log::warn!("container {}: attach: {e}", self.id);
                    return self.end_session();
                }
            }
        }
    }

    /// The container's stdin has room again.
    pub fn flush_input(&mut self) {
        let Some(input) = &self.input else {
            self.pending.clear();
            return;
        };
        while !self.pending.is_empty() {
            match rustix::io::write(input, &self.pending) {
                Ok(n) => {
                    self.pending.drain(..n);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => return,
                Err(_) => {
                    // The container closed its stdin.
                    self.input = None;
                    self.pending.clear();
                    return;
                }
            }
        }
    }

    /// Output of the container, for the attached client.
    pub fn output(&mut self, stream: Stream, data: &[u8]) {
        let Some(c) = self.client.as_mut() else {
            return;
        };
        let kind = if stream == Stream::Stderr {
            STDERR
        } else {
            STDOUT
        };
        for chunk in data.chunks(MAX_FRAME) {
            c.queued.extend_from_slice(&encode(kind, chunk));
        }
        if c.queued.len() > MAX_QUEUED {
            log::warn!(
                "container {}: attach client does not read its output: session ended",
                self.id
            );
            return self.end_session();
        }
        if flush(c).is_err() {
            self.end_session();
        }
    }

    fn end_session(&mut self) {
        self.client = None;
        if self.stdin_once {
            self.close_input();
        }
    }

    fn close_input(&mut self) {
        let Some(input) = self.input.take() else {
            return;
        };
        if self.tty {
            self.pending.push(VEOF);
            self.input = Some(input);
            self.flush_input();
            self.input = None;
        }
        self.pending.clear();
    }
}

/// Writes what is queued for the client without blocking.
fn flush(c: &mut Client) -> io::Result<()> {
    while !c.queued.is_empty() {
        match c.sock.write(&c.queued) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                c.queued.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_split_anywhere_and_refuse_oversize() {
        let mut bytes = encode(STDIN, b"hello");
        bytes.extend(encode(RESIZE, &[0, 24, 0, 80]));
        let mut r = FrameReader::default();
        for b in &bytes {
            r.push(&[*b]);
        }
        assert_eq!(r.next_frame(), Ok(Some((STDIN, b"hello".to_vec()))));
        assert_eq!(r.next_frame(), Ok(Some((RESIZE, vec![0, 24, 0, 80]))));
        assert_eq!(r.next_frame(), Ok(None));
        let mut r = FrameReader::default();
        r.push(&[STDIN, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(r.next_frame(), Err(FrameTooLong(0xffff_ffff)));
    }

    #[test]
    fn stdin_once_closes_the_pipe_when_the_first_session_ends() {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        let (a, b) = UnixStream::pair().expect("pair");
        a.set_nonblocking(false).expect("blocking");
        let mut io = ContainerIo::new("c".into(), false, true, None, Some(w), None);
        b.set_nonblocking(true).expect("nb");
        io.client = Some(Client {
            sock: b,
            frames: FrameReader::default(),
            queued: Vec::new(),
            reading: true,
        });
        let mut a = a;
        a.write_all(&encode(STDIN, b"line\n")).expect("write");
        io.on_client(true, false, false);
        a.shutdown(std::net::Shutdown::Write).expect("shutdown");
        io.on_client(true, false, false);
        // The input ended: stdin is closed at once, the session stays for output.
        assert!(io.input.is_none());
        assert!(io.client.is_some() && !io.reads_client());
        io.output(Stream::Stdout, b"out");
        let mut got = vec![0u8; 64];
        let n = a.read(&mut got).expect("read");
        let mut r2 = FrameReader::default();
        r2.push(&got[..n]);
        assert_eq!(r2.next_frame(), Ok(Some((STDOUT, b"out".to_vec()))));
        drop(a);
        io.on_client(true, false, true);
        assert!(io.client.is_none());
        let mut got = String::new();
        std::fs::File::from(r)
            .read_to_string(&mut got)
            .expect("read to EOF");
        assert_eq!(got, "line\n");
    }
}
