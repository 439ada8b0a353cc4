//! Interactive mode of `shim exec`: stdio passed through, or a pseudo-terminal opened inside
//! the container whose master is copied to and from this process's stdio (raw mode, window
//! size kept in sync, signals forwarded).

use super::super::container::ContainerPaths;
use super::exit_code;
use super::io_err;
use super::kill_tree;
use super::poll_ready;
use super::poll_timeout;
use super::set_nonblocking;
use super::signal_fd;
use super::sys;
use super::tenant::spawn_tenant;
use super::tenant::TenantIo;
use super::try_reap;
use super::ExecError;
use super::DRAIN;
use crate::sys::tty;
use nix::poll::poll;
use nix::poll::PollFd;
use nix::poll::PollFlags;
use nix::poll::PollTimeout;
use nix::sys::signal;
use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::unistd::Pid;
use std::fs;
use std::io;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::Instant;

/// Signals forwarded to the command in interactive mode.
pub(super) const FORWARDED: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// A close-on-exec duplicate of one of our standard fds (F_DUPFD_CLOEXEC, above 2).
pub(super) fn dup_fd(fd: BorrowedFd<'_>, what: &'static str) -> Result<OwnedFd, ExecError> {
    fd.try_clone_to_owned().map_err(|e| ExecError::Sys {
        what,
        source: nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
    })
}

pub(super) fn interactive(
    dir: &Path,
    cmd: &[String],
    tty: bool,
    stdin: bool,
) -> Result<i32, ExecError> {
    if tty {
        return interactive_tty(dir, cmd, stdin);
    }
    let input = if stdin {
        dup_fd(io::stdin().as_fd(), "dup stdin")?
    } else {
        let null = Path::new("/dev/null");
        fs::File::open(null).map_err(io_err(null))?.into()
    };
    let tio = TenantIo::Fds {
        stdin: input,
        stdout: dup_fd(io::stdout().as_fd(), "dup stdout")?,
        stderr: dup_fd(io::stderr().as_fd(), "dup stderr")?,
    };
    let pid = spawn_tenant(dir, cmd, tio)?;
    let sigfd = signal_fd(&FORWARDED)?;
    loop {
        if let Some(s) = try_reap(pid)? {
            return Ok(exit_code(s));
        }
        let mut fds = [PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(source) => {
                return Err(ExecError::Sys {
                    what: "poll",
                    source,
                })
            }
        }
        while let Ok(Some(info)) = sigfd.read_signal() {
            forward(pid, info.ssi_signo as i32);
        }
    }
}

pub(super) fn forward(pid: Pid, signo: i32) {
    if signo == libc::SIGCHLD || signo == libc::SIGWINCH {
        return;
    }
    if let Ok(sig) = Signal::try_from(signo) {
        let _ = signal::kill(pid, sig);
    }
}

/// The local terminal (stdin) in raw mode for as long as this lives.
pub struct RawMode {
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    pub fn enter() -> Option<RawMode> {
        use nix::sys::termios;
        let stdin = io::stdin();
        let saved = termios::tcgetattr(stdin.as_fd()).ok()?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(stdin.as_fd(), termios::SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = nix::sys::termios::tcsetattr(
            io::stdin().as_fd(),
            nix::sys::termios::SetArg::TCSAFLUSH,
            &self.saved,
        );
    }
}

/// The window size of our terminal (stdin, else stdout), if we have one.
pub fn local_window_size() -> Option<tty::Winsize> {
    [
        tty::window_size(io::stdin()),
        tty::window_size(io::stdout()),
    ]
    .into_iter()
    .flatten()
    .find(|ws| ws.ws_row > 0)
}

/// Copies the window size of our terminal onto the pty.
pub(super) fn sync_window_size(master: &OwnedFd) {
    if let Some(ws) = local_window_size() {
        // A failure leaves the old size; the next SIGWINCH tries again.
        let _ = tty::set_window_size(master, ws);
    }
}

/// Receives the pty master libcontainer sends over the console socket.
fn receive_master(listener: &UnixListener) -> Result<OwnedFd, ExecError> {
    crate::runtime::console::receive_master(listener).map_err(|e| ExecError::Terminal {
        reason: e.to_string(),
    })
}

pub(super) fn interactive_tty(dir: &Path, cmd: &[String], stdin: bool) -> Result<i32, ExecError> {
    let (_, cfg) = ContainerPaths::open(dir)?;
    let state_dir = cfg.youki_root.join(&cfg.id);
    // Unix socket paths are limited to 108 bytes: bind by a name relative to the state
    // directory; libcontainer reaches it through a symlink it makes there.
    let name = format!("podvisor-console-{}.sock", std::process::id());
    let sock_path = state_dir.join(&name);
    std::env::set_current_dir(&state_dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ExecError::NotRunning { id: cfg.id.clone() },
        _ => ExecError::Io {
            path: state_dir.clone(),
            source: e,
        },
    })?;
    let bound = UnixListener::bind(&name);
    let _ = std::env::set_current_dir("/");
    let listener = bound.map_err(io_err(&sock_path))?;
    let size = local_window_size().map(|ws| (ws.ws_row, ws.ws_col));
    let spawned = spawn_tenant(dir, cmd, TenantIo::Console(sock_path.clone(), size));
    let master = spawned.and_then(|pid| match receive_master(&listener) {
        Ok(m) => Ok((pid, m)),
        Err(e) => {
            kill_tree(pid);
            let _ = waitpid(pid, None);
            Err(e)
        }
    });
    drop(listener);
    let _ = fs::remove_file(&sock_path);
    let (pid, master) = master?;
    sync_window_size(&master);
    let raw = RawMode::enter();
    let result = copy_tty(pid, &master, stdin);
    drop(raw);
    result
}

/// Writes all of `data` to `fd`, waiting for room when it is non-blocking.
pub(super) fn write_all_fd(fd: BorrowedFd<'_>, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        match rustix::io::write(fd, data) {
            Ok(n) => data = &data[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => {
                let mut fds = [PollFd::new(fd, PollFlags::POLLOUT)];
                let _ = poll(&mut fds, PollTimeout::from(100u8));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One read(2) from `fd`, retried when a signal interrupts it.
pub(super) fn read_fd(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match rustix::io::read(fd, &mut *buf) {
            Err(rustix::io::Errno::INTR) => {}
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Copies stdin to the pty and the pty to stdout until the command exits and the pty drains.
pub(super) fn copy_tty(pid: Pid, master: &OwnedFd, mut stdin: bool) -> Result<i32, ExecError> {
    let mut extra = FORWARDED.to_vec();
    extra.push(Signal::SIGWINCH);
    let sigfd = signal_fd(&extra)?;
    set_nonblocking(master.as_fd())?;
    let mut buf = vec![0u8; 32 * 1024];
    let mut status = try_reap(pid)?;
    let mut master_open = true;
    let mut drain_until: Option<Instant> = None;
    // Input read but not yet taken by the pty: stdin is only read again once it is empty, so
    // a command that does not read never makes this loop stop copying its output.
    let mut pending: Vec<u8> = Vec::new();
    loop {
        if status.is_some() && !master_open {
            break;
        }
        if drain_until.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let local_in = io::stdin();
        let fd0 = local_in.as_fd();
        let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
        let master_flags = if pending.is_empty() {
            PollFlags::POLLIN
        } else {
            PollFlags::POLLIN | PollFlags::POLLOUT
        };
        let master_idx = master_open.then(|| {
            fds.push(PollFd::new(master.as_fd(), master_flags));
            fds.len() - 1
        });
        let stdin_idx = (stdin && pending.is_empty() && status.is_none()).then(|| {
            fds.push(PollFd::new(fd0, PollFlags::POLLIN));
            fds.len() - 1
        });
        match poll(&mut fds, poll_timeout(drain_until)) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(source) => {
                return Err(ExecError::Sys {
                    what: "poll",
                    source,
                })
            }
        }
        let sig_ev = poll_ready(&fds[0]);
        let master_ev = master_idx.is_some_and(|i| poll_ready(&fds[i]));
        let stdin_ev = stdin_idx.is_some_and(|i| poll_ready(&fds[i]));
        if master_ev && !pending.is_empty() {
            // Non-blocking: whatever the pty takes now.
            if let Ok(n) = rustix::io::write(master, &pending) {
                pending.drain(..n);
            }
        }
        if master_ev {
            match read_fd(master.as_fd(), &mut buf) {
                // EIO: every slave fd is closed (the command and its children are gone).
                Ok(0) => master_open = false,
                Ok(n) => {
                    if write_all_fd(io::stdout().as_fd(), &buf[..n]).is_err() {
                        master_open = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => master_open = false,
            }
        }
        if stdin_ev {
            match read_fd(io::stdin().as_fd(), &mut buf) {
                Ok(0) | Err(_) => {
                    // End of input: the terminal's end-of-file character, as a terminal would.
                    pending.push(4);
                    stdin = false;
                }
                Ok(n) => pending.extend_from_slice(&buf[..n]),
            }
        }
        if sig_ev {
            while let Ok(Some(info)) = sigfd.read_signal() {
                let signo = info.ssi_signo as i32;
                if signo == libc::SIGWINCH {
                    sync_window_size(master);
                } else {
                    forward(pid, signo);
                }
            }
            if status.is_none() {
                status = try_reap(pid)?;
            }
        }
        if status.is_some() && drain_until.is_none() {
            drain_until = Some(Instant::now() + DRAIN);
        }
    }
    let status = match status {
        Some(s) => s,
        None => waitpid(pid, None).map_err(sys("waitpid"))?,
    };
    Ok(exit_code(status))
}
