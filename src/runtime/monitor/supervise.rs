//! runtime::monitor::supervise: the monitor's main loop once the container runs: its output into
//! the CRI log (and to an attached client), attach sessions, and the wait for its exit on a
//! signalfd.

use super::super::container::error_chain;
use super::super::container::ShimError;
use super::super::protocol::ShimConfig;
use super::attach;
use super::oom_watch::OomWatch;
use super::release_idle_memory;
use super::set_nonblocking;
use super::try_reap;
use crate::logs::CriLogWriter;
use crate::logs::LogOptions;
use crate::logs::Stream;
use nix::poll::poll;
use nix::poll::PollFd;
use nix::poll::PollFlags;
use nix::poll::PollTimeout;
use nix::sys::signal;
use nix::sys::signal::SigSet;
use nix::sys::signal::SigmaskHow;
use nix::sys::signal::Signal;
use nix::sys::signalfd::SfdFlags;
use nix::sys::signalfd::SignalFd;
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;
use std::fs;
use std::io;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::time::Duration;
use std::time::Instant;
use std::time::SystemTime;

/// Copies output into the log (and to an attached client) until the init exits and the
/// output is drained; serves attach sessions meanwhile. Returns the exit status and the log,
/// not yet synced: the exit record comes first (the runtime restarts the container as soon as
/// it is durable).
pub(super) fn supervise(
    cfg: &ShimConfig,
    init: Pid,
    stdout: OwnedFd,
    stderr: Option<OwnedFd>,
    mut attached: attach::ContainerIo,
    mut oom_watch: Option<&mut OomWatch>,
) -> Result<(WaitStatus, CriLogWriter), ShimError> {
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None).map_err(|source| {
        ShimError::Sys {
            what: "sigprocmask",
            source,
        }
    })?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(|source| ShimError::Sys {
            what: "signalfd",
            source,
        })?;
    set_nonblocking(&stdout)?;
    if let Some(fd) = &stderr {
        set_nonblocking(fd)?;
    }
    // A log that cannot be opened (disk full) drops output until it can: the container runs
    // on either way.
    let (mut writer, open_err) = CriLogWriter::open_or_drop(
        &cfg.log_path,
        LogOptions {
            max_size: cfg.log_max_size,
            max_files: cfg.log_max_files,
            ..LogOptions::default()
        },
    )?;
    if let Some(e) = open_err {
        log::warn!("container {}: {}", cfg.id, error_chain(&e));
    }
    let mut out = Some(fs::File::from(stdout));
    let mut err = stderr.map(fs::File::from);
    let mut status: Option<WaitStatus> = None;
    let mut drain_deadline: Option<Instant> = None;
    // 16 KiB: a pipe holds 64 KiB, read in a few rounds; a bigger buffer is memory every
    // monitor keeps for its life (calloc'd pages), for the few containers that write fast.
    let mut buf = vec![0u8; 16 * 1024];
    let mut released = false;
    // The init may have exited before the signalfd existed: check once up front.
    status = status.or(try_reap(init)?);
    let ready = |pfd: &PollFd| pfd.revents().unwrap_or(PollFlags::empty());
    loop {
        if status.is_some() && out.is_none() && err.is_none() {
            break;
        }
        if let Some(deadline) = drain_deadline {
            if Instant::now() >= deadline {
                // Pipes held open by something outside the container's pid namespace:
                // stop copying rather than wait forever.
                log::warn!("container {}: output still open after exit", cfg.id);
                break;
            }
        }
        let timeout = match drain_deadline {
            Some(d) => PollTimeout::try_from(d.saturating_duration_since(Instant::now()))
                .unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        };
        // Set up, about to wait for the first time: the container's creation is over. The
        // release is planned here and applied right before the poll, so that little code
        // runs (and is mapped back) in between.
        let release = if !released && status.is_none() {
            released = true;
            release_idle_memory(&cfg.id)
        } else {
            None
        };
        // Indices into `fds` of what is polled this round.
        let (mut out_i, mut err_i) = (None, None);
        let mut attach_i: [Option<usize>; 3] = [None; 3];
        let mut oom_i = None;
        let events = {
            let mut fds = Vec::with_capacity(7);
            fds.push(PollFd::new(sigfd.as_fd(), PollFlags::POLLIN));
            if let Some(f) = &out {
                out_i = Some(fds.len());
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
            }
            if let Some(f) = &err {
                err_i = Some(fds.len());
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
            }
            for (k, entry) in attached.poll_fds().into_iter().enumerate() {
                if let Some((fd, flags)) = entry {
                    attach_i[k] = Some(fds.len());
                    fds.push(PollFd::new(fd, flags));
                }
            }
            if let Some(w) = &oom_watch {
                oom_i = Some(fds.len());
                fds.push(PollFd::new(w.fd(), PollFlags::POLLIN));
            }
            if let Some(r) = &release {
                if let Err(e) = r.apply() {
                    log::warn!("container {}: release idle pages: {e}", cfg.id);
                }
            }
            match poll(&mut fds, timeout) {
                Ok(_) => {}
                Err(nix::Error::EINTR) => continue,
                Err(source) => {
                    return Err(ShimError::Sys {
                        what: "poll",
                        source,
                    })
                }
            }
            fds.iter().map(ready).collect::<Vec<_>>()
        };
        let has = |i: Option<usize>| i.map(|i| !events[i].is_empty()).unwrap_or(false);
        if has(oom_i) {
            if let Some(w) = oom_watch.as_mut() {
                w.on_event();
            }
        }
        if has(out_i) {
            pump(
                &mut out,
                Stream::Stdout,
                &mut writer,
                &mut buf,
                &mut attached,
            )?;
        }
        if has(err_i) {
            pump(
                &mut err,
                Stream::Stderr,
                &mut writer,
                &mut buf,
                &mut attached,
            )?;
        }
        if let Some(i) = attach_i[1] {
            let ev = events[i];
            let readable =
                ev.intersects(PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR);
            let writable = ev.contains(PollFlags::POLLOUT);
            let hangup = ev.intersects(PollFlags::POLLHUP | PollFlags::POLLERR);
            if readable || writable {
                attached.on_client(readable, writable, hangup);
            }
        }
        if has(attach_i[2]) {
            attached.flush_input();
        }
        // After the client's events: a session that just ended frees the place for a new one.
        if has(attach_i[0]) {
            attached.on_listener();
        }
        if !events[0].is_empty() {
            while let Ok(Some(_)) = sigfd.read_signal() {}
            if status.is_none() {
                status = try_reap(init)?;
            }
        }
        if status.is_some() && drain_deadline.is_none() {
            drain_deadline = Some(Instant::now() + Duration::from_secs(2));
        }
    }
    // Unreachable without a status: the loop only breaks once the init was reaped or after
    // the drain deadline, which is only armed once a status exists.
    let status = status.ok_or(ShimError::Sys {
        what: "container exit status missing",
        source: nix::Error::ECHILD,
    })?;
    Ok((status, writer))
}

fn pump(
    pipe: &mut Option<fs::File>,
    stream: Stream,
    writer: &mut CriLogWriter,
    buf: &mut [u8],
    attached: &mut attach::ContainerIo,
) -> Result<(), ShimError> {
    let Some(f) = pipe.as_mut() else {
        return Ok(());
    };
    loop {
        match f.read(buf) {
            Ok(0) => {
                writer.finish(stream, SystemTime::now())?;
                *pipe = None;
                return Ok(());
            }
            Ok(n) => {
                writer.write(stream, &buf[..n], SystemTime::now())?;
                attached.output(stream, &buf[..n]);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // A pty master reads EIO once the container closed its terminal: its end.
                if e.raw_os_error() != Some(libc::EIO) {
                    log::warn!("reading container {stream:?}: {e}");
                }
                writer.finish(stream, SystemTime::now())?;
                *pipe = None;
                return Ok(());
            }
        }
    }
}
