//! Capture mode of `shim exec`: stdout and stderr through pipes, each capped at
//! [`OUTPUT_CAP`], the command and its descendants killed on timeout.

use super::super::protocol::CaptureReport;
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
use super::OUTPUT_CAP;
use nix::poll::poll;
use nix::poll::PollFd;
use nix::poll::PollFlags;
use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use std::fs;
use std::io;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::Duration;
use std::time::Instant;

/// A pipe read into a capped buffer.
pub(crate) struct Captured {
    pub(crate) pipe: Option<fs::File>,
    pub(crate) kept: Vec<u8>,
}

impl Captured {
    pub(crate) fn new(fd: OwnedFd) -> Result<Captured, ExecError> {
        set_nonblocking(fd.as_fd())?;
        Ok(Captured {
            pipe: Some(fs::File::from(fd)),
            kept: Vec::new(),
        })
    }

    /// Reads what is there; keeps up to the cap and drops the rest.
    pub(crate) fn pump(&mut self, buf: &mut [u8], cap: usize) {
        let Some(f) = self.pipe.as_mut() else {
            return;
        };
        loop {
            match f.read(buf) {
                Ok(0) => {
                    self.pipe = None;
                    return;
                }
                Ok(n) => {
                    let room = cap.saturating_sub(self.kept.len());
                    self.kept.extend_from_slice(&buf[..n.min(room)]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    self.pipe = None;
                    return;
                }
            }
        }
    }
}

pub(super) fn capture(
    dir: &Path,
    cmd: &[String],
    timeout: Duration,
) -> Result<CaptureReport, ExecError> {
    let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("pipe"))?;
    let (err_r, err_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(sys("pipe"))?;
    let null = Path::new("/dev/null");
    let devnull = fs::File::open(null).map_err(io_err(null))?;
    let deadline = Instant::now() + timeout;
    let pid = spawn_tenant(
        dir,
        cmd,
        TenantIo::Fds {
            stdin: devnull.into(),
            stdout: out_w,
            stderr: err_w,
        },
    )?;
    let forwarded = [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP];
    let sigfd = match signal_fd(&forwarded) {
        Ok(fd) => fd,
        Err(e) => {
            kill_tree(pid);
            let _ = waitpid(pid, None);
            return Err(e);
        }
    };
    let mut out = Captured::new(out_r)?;
    let mut err = Captured::new(err_r)?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut status = try_reap(pid)?;
    let mut timed_out = false;
    let mut drain_until: Option<Instant> = None;
    loop {
        if status.is_some() && out.pipe.is_none() && err.pipe.is_none() {
            break;
        }
        let now = Instant::now();
        if status.is_none() && !timed_out && now >= deadline {
            kill_tree(pid);
            timed_out = true;
        }
        if drain_until.is_some_and(|d| now >= d) {
            break;
        }
        let wake = match (status, timed_out) {
            (Some(_), _) => drain_until,
            (None, false) => Some(deadline),
            (None, true) => None,
        };
        let (sig_ev, out_ev, err_ev) = {
            let mut fds = vec![PollFd::new(sigfd.as_fd(), PollFlags::POLLIN)];
            let mut idx = [None, None];
            for (i, c) in [&out, &err].into_iter().enumerate() {
                if let Some(f) = &c.pipe {
                    idx[i] = Some(fds.len());
                    fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
                }
            }
            match poll(&mut fds, poll_timeout(wake)) {
                Ok(_) | Err(nix::Error::EINTR) => {}
                Err(source) => {
                    kill_tree(pid);
                    let _ = waitpid(pid, None);
                    return Err(ExecError::Sys {
                        what: "poll",
                        source,
                    });
                }
            }
            let at = |i: Option<usize>| i.is_some_and(|i| poll_ready(&fds[i]));
            (poll_ready(&fds[0]), at(idx[0]), at(idx[1]))
        };
        if out_ev {
            out.pump(&mut buf, OUTPUT_CAP);
        }
        if err_ev {
            err.pump(&mut buf, OUTPUT_CAP);
        }
        if sig_ev {
            while let Ok(Some(info)) = sigfd.read_signal() {
                let signo = info.ssi_signo as i32;
                if signo != libc::SIGCHLD && status.is_none() {
                    // The spawner gives up on us: the command must not outlive the helper.
                    kill_tree(pid);
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
    Ok(CaptureReport::Finished {
        exit_code: exit_code(status),
        stdout: hex::encode(&out.kept),
        stderr: hex::encode(&err.kept),
        timed_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn captured_output_is_capped_and_the_rest_drained() {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let mut c = Captured::new(r).expect("captured");
        let mut wf = fs::File::from(w);
        let mut buf = vec![0u8; 1000];
        wf.write_all(&[b'x'; 3000]).expect("write");
        c.pump(&mut buf, 2500);
        assert_eq!(c.kept.len(), 2500);
        wf.write_all(b"more").expect("write");
        drop(wf);
        c.pump(&mut buf, 2500);
        assert_eq!(c.kept.len(), 2500);
        assert!(c.pipe.is_none(), "EOF closes the pipe");
    }
}
