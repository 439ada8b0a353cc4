//! Terminal window size (`TIOCGWINSZ` / `TIOCSWINSZ`), for `shim exec --tty` and the CLI.

use std::io;
use std::os::fd::AsFd;

pub use rustix::termios::Winsize;

/// The window size of the terminal `fd`.
pub fn window_size(fd: impl AsFd) -> io::Result<Winsize> {
    rustix::termios::tcgetwinsize(fd).map_err(io::Error::from)
}

/// Sets the window size of the terminal `fd` (a pty master or slave).
pub fn set_window_size(fd: impl AsFd, size: Winsize) -> io::Result<()> {
    rustix::termios::tcsetwinsize(fd, size).map_err(io::Error::from)
}
