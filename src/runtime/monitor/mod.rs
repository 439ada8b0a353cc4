//! monitor: the per-container monitor process, forked by the runtime's spawner (or podvisor's
//! own binary re-executed as the hidden subcommand `podvisor shim run <container-dir>`; it
//! shows that command line either way), like containerd-shim or conmon.
//!
//! Why a process per container (see docs/design.md): libcontainer creates containers by
//! cloning the calling process without exec, which is unsafe from the multi-threaded daemon;
//! and a container, its log stream and its exit status must survive the daemon being killed.
//! The monitor is single-threaded for its whole life. It:
//! 1. records its own identity in `state.json` (the daemon holds nothing it needs),
//! 2. mounts the overlay rootfs, resolves the image user against it,
//! 3. creates and starts the container through libcontainer, so it is the init's parent,
//! 4. reports "started" (or the error) on fd 3 to whoever spawned it, then makes the
//!    container's identity (`meta.json`) durable, off the spawner's start path,
//! 5. copies the container's stdout/stderr into the CRI log until the init exits (SIGCHLD via
//!    signalfd: the exit is seen within microseconds, never polled),
//! 6. writes `exit.json` atomically and durably (exit code, signal, OOM kill, times),
//! 7. deletes the container (cgroup, state), unmounts the rootfs, removes the writable layer,
//!    writes `cleaned`, removes its runtime directory, exits.
//!
//! A container's two directories and the files in them are [`super::container`]'s; what the
//! monitor is told and tells ([`ShimConfig`], [`StartReport`], [`ShimState`]) is
//! [`super::protocol`]'s.
//!
//! The monitor holds an exclusive flock on `shim.lock` (fd 4, taken by the spawner before the
//! exec) for its whole life: a free lock means the monitor is gone. `podvisor shim cleanup`
//! finishes the job of a monitor that died (SIGKILL): it kills what is left of the container
//! and records its status as unknown.
//!
//! One file per verb: `create` (steps 2-3), `supervise` (step 5: the log, the wait),
//! `attach` (stdin, the terminal and attach sessions), `delete` (steps 6-7, and `shim
//! cleanup`); `oom_watch` and `libct_trace` are what the monitor watches while it does so.

use std::fs;
use std::io::Write;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::Path;

pub mod attach;
mod create;
mod delete;
pub mod libct_trace;
pub mod oom_watch;
mod supervise;
use create::create_and_start;
pub use delete::{cleanup, exit_record};
use delete::{cleanup_container, finish};
use supervise::supervise;

use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::sys::wait::WaitStatus;
use nix::unistd::Pid;

use super::container::{
    error_chain, io_err, sync_identity, write_exit_record, ContainerPaths, ShimError,
};
use super::procfs::ProcessId;
use super::protocol::{ShimState, StartReport, READY_FD};
use super::ExitRecord;
use crate::cgroups::CgroupRoot;
use crate::fsutil;
use crate::reason::TerminatedReason;
use oom_watch::OomWatch;

/// Entry point of `podvisor shim run <dir>`. Returns the process exit code.
pub fn run(dir: &Path) -> i32 {
    // Name the process so `ps` (and a reaper looking at zombies) can tell monitors apart.
    let _ = crate::sys::prctl::set_name(c"podvisor-shim");
    crate::tp!("mon.run");
    // SAFETY: fd 3 was set up by the spawner as the write end of the ready pipe; we own it.
    let ready = unsafe { fs::File::from_raw_fd(READY_FD) };
    match run_inner(dir, ready) {
        Ok(()) => 0,
        Err(e) => {
            log::error!("container {}: {e}", dir.display());
            1
        }
    }
}

fn send_report(ready: &mut Option<fs::File>, report: &StartReport) {
    // SIGPIPE's default action was restored for the container's sake; the container is cloned
    // by now. A spawner killed before reading the report (daemon SIGKILLed mid-start) makes
    // this write fail with EPIPE, and the default action would kill the monitor, leaving its
    // container unwatched until the next daemon's cleanup kills it (ContainerStatusUnknown).
    // SAFETY: setting a signal disposition in a single-threaded process.
    unsafe {
        let _ = signal::signal(Signal::SIGPIPE, signal::SigHandler::SigIgn);
    }
    if let Some(mut f) = ready.take() {
        if let Ok(mut line) = serde_json::to_vec(report) {
            line.push(b'\n');
            // The spawner may be gone (daemon killed): nothing to do about it.
            let _ = f.write_all(&line);
        }
    }
}

fn run_inner(dir: &Path, ready: fs::File) -> Result<(), ShimError> {
    let mut ready = Some(ready);
    // A spawner that blocks signals (play, the daemon) passes its mask on through exec; the
    // container must start with none blocked.
    let _ = signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None);
    let (paths, mut cfg) = ContainerPaths::open(dir)?;
    let paths = &paths;
    let me = ProcessId::current()?;
    let mut state = ShimState {
        shim: Some(me),
        ..Default::default()
    };
    fsutil::write_json_atomic_volatile(&paths.state(), &state).map_err(io_err(&paths.state()))?;
    crate::tp!("mon.state");
    // Rust ignores SIGPIPE at startup; ignored dispositions survive exec, so restore the
    // default before the container process is cloned from us.
    // SAFETY: setting a signal disposition to SIG_DFL in a single-threaded process.
    unsafe {
        let _ = signal::signal(Signal::SIGPIPE, signal::SigHandler::SigDfl);
    }

    // libcontainer's account of a failed setup (the mount, path or syscall), see libct_trace.
    let trace = paths.dir.join("libcontainer-errors.log");
    if let Err(e) = libct_trace::install(&trace) {
        log::warn!("container {}: {}: {e}", cfg.id, trace.display());
    }
    let started = match create_and_start(paths, &mut cfg, &mut state, ready.as_ref()) {
        Ok(started) => started,
        Err(ShimError::CalledOff) => {
            // Nobody waits for a report: the runtime removes the directories.
            cleanup_container(paths, &cfg);
            return finish(paths);
        }
        Err(e) => {
            let mut message = error_chain(&e);
            let detail = libct_trace::detail(&trace);
            if !detail.is_empty() && matches!(e, ShimError::Container(_)) {
                message.push_str(": ");
                message.push_str(&detail);
            }
            send_report(
                &mut ready,
                &StartReport::Failed {
                    message: message.clone(),
                },
            );
            let exit = ExitRecord {
                exit_code: 128,
                signal: None,
                oom_killed: false,
                started_at: String::new(),
                finished_at: super::now_rfc3339(),
                reason: TerminatedReason::StartError.into(),
                message: Some(message),
            };
            write_exit_record(paths, &exit).map_err(io_err(&paths.exit()))?;
            cleanup_container(paths, &cfg);
            finish(paths)?;
            return Err(e);
        }
    };
    crate::tp!("mon.started");
    send_report(
        &mut ready,
        &StartReport::Started {
            pid: started.init.as_raw(),
            started_at: started.started_at.clone(),
        },
    );
    // Durable identity, now that the spawner has its answer: a power cut before this point
    // loses the record of a container that ran for milliseconds (its log file still counts
    // for the next restart count); after it, the container is reported lost with its node.
    if let Err(e) = sync_identity(paths) {
        log::warn!("container {}: sync {}: {e}", cfg.id, paths.meta().display());
    }
    // From here on the monitor must not be stopped by signals meant for the daemon or a
    // terminal (Ctrl-C, hangup); only SIGKILL ends it early.
    // SAFETY: ignoring signals in a single-threaded process; the container is already exec'd.
    unsafe {
        for s in [
            Signal::SIGINT,
            Signal::SIGTERM,
            Signal::SIGHUP,
            Signal::SIGQUIT,
        ] {
            let _ = signal::signal(s, signal::SigHandler::SigIgn);
        }
    }
    // A systemd scope's cgroup goes as soon as it is empty: count OOM kills while it exists.
    let mut oom_watch = if cfg.systemd_cgroup {
        OomWatch::new(&cfg.cgroup_root, &cfg.cgroup_path).unwrap_or_else(|e| {
            log::warn!("container {}: watch memory.events: {e}", cfg.id);
            None
        })
    } else {
        None
    };
    let (status, mut log) = supervise(
        &cfg,
        started.init,
        started.stdout,
        started.stderr,
        started.io,
        oom_watch.as_mut(),
    )?;
    let oom = match oom_watch.as_mut() {
        Some(w) => w.count() > 0,
        None => CgroupRoot::new(&cfg.cgroup_root)
            .oom_kill_count(&cfg.cgroup_path)
            .map(|n| n > 0)
            .unwrap_or_else(|e| {
                log::warn!("container {}: {e}", cfg.id);
                false
            }),
    };
    crate::tp!("mon.exit_seen");
    let exit = exit_record(status, oom, started.started_at);
    // The exit record's rename is what the runtime waits for (an inotify watch on the record
    // directory): from here on the container may be restarted, while this monitor syncs the
    // log and takes the old container apart.
    write_exit_record(paths, &exit).map_err(io_err(&paths.exit()))?;
    crate::tp!("mon.exit_recorded");
    if let Err(e) = log.sync() {
        log::warn!("container {}: {}", cfg.id, error_chain(&e));
    }
    drop(log);
    cleanup_container(paths, &cfg);
    finish(paths)
}

/// Plans giving the pages of the container's creation back once the monitor settles into its
/// copy loop (applied by the loop right before it first waits): the heap it freed (the spec, libcontainer's state, the rootfs set-up), the code and
/// read-only data it ran (most of libcontainer and serde, mapped from the binary) and the
/// stack its deep calls used. The monitor then lives on in the few pages the loop touches;
/// what it runs again later (the exit record, the container's deletion) is mapped back from
/// the page cache by minor faults.
fn release_idle_memory(id: &str) -> Option<crate::sys::pages::Release> {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only returns free memory of this process's heap to the kernel; the
    // monitor is single-threaded.
    unsafe {
        libc::malloc_trim(0);
    }
    crate::sys::pages::Release::plan(true)
        .map_err(|e| log::warn!("container {id}: release idle pages: {e}"))
        .ok()
}

fn try_reap(init: Pid) -> Result<Option<WaitStatus>, ShimError> {
    super::procfs::try_reap(init).map_err(|source| ShimError::Sys {
        what: "waitpid",
        source,
    })
}

fn set_nonblocking(fd: &OwnedFd) -> Result<(), ShimError> {
    super::procfs::set_nonblocking(fd.as_fd()).map_err(|source| ShimError::Sys {
        what: "fcntl",
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_to_a_spawner_that_is_gone_does_not_kill_the_monitor() {
        let (r, w) = nix::unistd::pipe().expect("pipe");
        drop(r);
        // SAFETY: the child only restores SIGPIPE, writes to the pipe and _exits; glibc's
        // fork keeps malloc usable in the child.
        match unsafe { nix::unistd::fork() }.expect("fork") {
            nix::unistd::ForkResult::Child => {
                // SAFETY: as in the monitor, before its container is cloned.
                unsafe {
                    let _ = signal::signal(Signal::SIGPIPE, signal::SigHandler::SigDfl);
                }
                let mut ready = Some(fs::File::from(w));
                send_report(
                    &mut ready,
                    &StartReport::Started {
                        pid: 1,
                        started_at: String::new(),
                    },
                );
                // SAFETY: leaving the forked child without running the test harness.
                unsafe { libc::_exit(7) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                drop(w);
                let st = nix::sys::wait::waitpid(child, None).expect("wait");
                assert_eq!(st, nix::sys::wait::WaitStatus::Exited(child, 7));
            }
        }
    }
}
