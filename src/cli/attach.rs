//! cli::attach: `podvisor attach [-i] [-t] POD [-c C]` (kubectl attach): finds the running
//! container through the API, then connects to its monitor's attach socket
//! (`<runtime-dir>/containers/<id>/attach.sock`, see [`crate::runtime::monitor::attach`]) and
//! copies the container's output to this terminal and, with `-i`, this terminal's input to the
//! container's stdin (`stdin: true`). With `-t` on a `tty: true` container the local terminal
//! goes to raw mode and its window size follows SIGWINCH. As for `exec`, the daemon is only
//! asked where the container is: the bytes never pass through it.

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

use super::exec::{target, ExecCliError};
use crate::api::{client, percent_encode};
use crate::runtime::exec::{local_window_size, RawMode};
use crate::runtime::monitor::attach::{
    encode, FrameReader, ATTACH_SOCKET, ERROR, HELLO, RESIZE, STDERR, STDIN, STDOUT,
};
use crate::status::PodView;

/// What `podvisor attach` is asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttachRequest {
    pub pod: String,
    pub container: Option<String>,
    pub stdin: bool,
    pub tty: bool,
}

/// Errors of `podvisor attach`.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(transparent)]
    Api(#[from] crate::api::ApiError),
    #[error(transparent)]
    Target(#[from] ExecCliError),
    #[error("cannot attach to container {container} of pod {pod} through {path}: {source}")]
    Connect {
        pod: String,
        container: String,
        path: PathBuf,
        source: io::Error,
    },
    #[error("container {container} of pod {pod}: {message}")]
    Refused {
        pod: String,
        container: String,
        message: String,
    },
    #[error("attach session: {0}")]
    Io(#[from] io::Error),
    #[error("attach session: {what}: {source}")]
    Sys {
        what: &'static str,
        source: nix::Error,
    },
}

/// Connects to the socket `name` in `dir` by a relative path (socket paths are limited to 108
/// bytes and runtime dirs can be long).
fn connect_in(dir: &Path, name: &str) -> io::Result<UnixStream> {
    let back = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    std::env::set_current_dir(dir)?;
    let conn = UnixStream::connect(name);
    let _ = std::env::set_current_dir(back);
    conn
}

/// Reads one frame (blocking).
fn read_frame(
    sock: &mut UnixStream,
    frames: &mut FrameReader,
) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match frames.next_frame() {
            Ok(Some(f)) => return Ok(Some(f)),
            Ok(None) => {}
            Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        }
        match sock.read(&mut buf) {
            Ok(0) => return Ok(None),
            Ok(n) => frames.push(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

fn resize_frame() -> Option<Vec<u8>> {
    let ws = local_window_size()?;
    let mut p = ws.ws_row.to_be_bytes().to_vec();
    p.extend_from_slice(&ws.ws_col.to_be_bytes());
    Some(encode(RESIZE, &p))
}

/// Runs the session until the container's output ends; returns the exit code (0).
pub fn attach(socket: &Path, runtime_dir: &Path, req: &AttachRequest) -> Result<i32, AttachError> {
    let view: PodView =
        client::get_pod_json(socket, &format!("/pods/{}", percent_encode(&req.pod)))?;
    let (name, id) = target(&view, req.container.as_deref())?;
    let pod = crate::status::full_name(&view.pod);
    let dir = runtime_dir.join("containers").join(&id);
    let mut sock = connect_in(&dir, ATTACH_SOCKET).map_err(|source| AttachError::Connect {
        pod: pod.clone(),
        container: name.clone(),
        path: dir.join(ATTACH_SOCKET),
        source,
    })?;
    let refused = |message: String| AttachError::Refused {
        pod: pod.clone(),
        container: name.clone(),
        message,
    };
    let mut frames = FrameReader::default();
    let (tty, stdin_open) = match read_frame(&mut sock, &mut frames)? {
        Some((HELLO, p)) if p.len() == 2 => (p[0] == 1, p[1] == 1),
        Some((ERROR, m)) => return Err(refused(String::from_utf8_lossy(&m).into_owned())),
        _ => return Err(refused("the monitor closed the attach session".into())),
    };
    if req.stdin && !stdin_open {
        return Err(refused(
            "stdin is not open (the container has no `stdin: true`, or `stdinOnce` closed it)"
                .into(),
        ));
    }
    let use_tty = req.tty && tty;
    if req.tty && !tty {
        eprintln!("Unable to use a TTY - container {name} did not allocate one");
    }
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGWINCH);
    mask.thread_block().map_err(|source| AttachError::Sys {
        what: "block SIGWINCH",
        source,
    })?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|source| AttachError::Sys {
            what: "signalfd",
            source,
        })?;
    let raw = if use_tty && req.stdin {
        RawMode::enter()
    } else {
        None
    };
    if use_tty {
        if let Some(f) = resize_frame() {
            sock.write_all(&f)?;
        }
    }
    let result = copy(&mut sock, &mut frames, &sigfd, req.stdin, use_tty);
    drop(raw);
    let _ = nix::sys::signal::sigprocmask(SigmaskHow::SIG_UNBLOCK, Some(&mask), None);
    result
}

fn copy(
    sock: &mut UnixStream,
    frames: &mut FrameReader,
    sigfd: &SignalFd,
    mut stdin_open: bool,
    tty: bool,
) -> Result<i32, AttachError> {
    let stdin = io::stdin();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // Frames already buffered (after the hello) first.
        while let Some((kind, data)) = frames
            .next_frame()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
        {
            match kind {
                STDOUT => {
                    let mut out = io::stdout().lock();
                    out.write_all(&data)?;
                    out.flush()?;
                }
                STDERR => {
                    let mut err = io::stderr().lock();
                    err.write_all(&data)?;
                    err.flush()?;
                }
                ERROR => {
                    eprintln!("{}", String::from_utf8_lossy(&data));
                    return Ok(1);
                }
                _ => {}
            }
        }
        let (sock_ev, in_ev, sig_ev) = {
            let mut fds = vec![
                PollFd::new(sock.as_fd(), PollFlags::POLLIN),
                PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
            ];
            if stdin_open {
                fds.push(PollFd::new(stdin.as_fd(), PollFlags::POLLIN));
            }
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::Error::EINTR) => continue,
                Err(source) => {
                    return Err(AttachError::Sys {
                        what: "poll",
                        source,
                    })
                }
            }
            let ev = |p: &PollFd| p.revents().is_some_and(|r| !r.is_empty());
            (ev(&fds[0]), fds.get(2).is_some_and(ev), ev(&fds[1]))
        };
        if sig_ev {
            while let Ok(Some(_)) = sigfd.read_signal() {}
            if tty {
                if let Some(f) = resize_frame() {
                    sock.write_all(&f)?;
                }
            }
        }
        if in_ev {
            let n = match stdin.lock().read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if n == 0 {
                // Our input ended: tell the monitor (stdinOnce closes the container's stdin);
                // its output keeps coming until the container ends.
                stdin_open = false;
                sock.shutdown(std::net::Shutdown::Write)?;
            } else {
                sock.write_all(&encode(STDIN, &buf[..n]))?;
            }
        }
        if sock_ev {
            match sock.read(&mut buf) {
                Ok(0) => return Ok(0),
                Ok(n) => frames.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(0),
                Err(e) => return Err(e.into()),
            }
        }
    }
}
