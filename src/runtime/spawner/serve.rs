//! The spawner process (`podvisor shim spawner`): reads requests from fd 3, forks each
//! monitor or sandbox helper, answers with its pid and a pidfd, reaps its children, and exits
//! when the runtime's end of the socket closes. Single-threaded for its whole life, which is
//! checked, not assumed: fork without exec is only safe so.

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{self, SigSet, SigmaskHow, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{fork, ForkResult, Pid};

use super::child::{check_single_threaded, close_from, prepare_helper, run_monitor};
use super::spare::{HostnameError, SpareMaker, SpareNamespaces, SPARE_AFTER};
use super::spare_monitor::SpareMonitor;
use crate::runtime::protocol::{Reply, Request, HELPER_OK, MAX_MESSAGE, SOCKET_FD};
use crate::runtime::sandbox;
use crate::sys::fdpass;

/// How long the spawner waits without a request before it gives its pages back.
const IDLE_RELEASE_MS: u16 = 1000;

/// Entry point of `podvisor shim spawner` (dispatched before argument parsing: the process
/// touches as little as it can, so its children share clean pages). Never returns.
pub fn serve() -> ! {
    let code = match run() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("podvisor spawner: {e}");
            1
        }
    };
    std::process::exit(code)
}

fn run() -> io::Result<()> {
    let _ = crate::sys::prctl::set_name(c"podvisor-shim");
    check_single_threaded()?;
    // SAFETY: fd 3 is the socket the runtime passed (`Spawner::start`); nothing else in this
    // fresh process owns it. Checked to be a socket below.
    let sock = unsafe { OwnedFd::from_raw_fd(SOCKET_FD) };
    let st = rustix::fs::fstat(&sock).map_err(io::Error::from)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::Socket {
        return Err(io::Error::other("fd 3 is not the runtime's socket"));
    }
    // Nothing exec'd from here on (a pod init) may hold it, and nothing else inherited may
    // reach the monitors.
    rustix::io::fcntl_setfd(&sock, rustix::io::FdFlags::CLOEXEC).map_err(io::Error::from)?;
    close_from(SOCKET_FD + 1);
    // Monitors log warnings and errors to their shim.log (their stderr); the logger is
    // initialised here once, its pages shared by every child.
    let _ = env_logger::Builder::new()
        .filter_level(log::LevelFilter::Warn)
        .format_target(false)
        .try_init();
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&mask), None).map_err(io::Error::from)?;
    let sigfd = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC | SfdFlags::SFD_NONBLOCK)
        .map_err(io::Error::from)?;
    let mut buf = vec![0u8; MAX_MESSAGE];
    let mut state = SpawnerState::default();
    match fs::File::open("/proc/self/ns/uts") {
        Ok(f) => state.own_uts = Some(f.into()),
        Err(e) => {
            eprintln!("podvisor spawner: no spare pod namespaces: /proc/self/ns/uts: {e}");
            state.spares_off = true;
        }
    }
    let outcome = serve_requests(&sock, &sigfd, &mut buf, &mut state);
    // A maker still at work goes with its spawner (spare namespaces go with our descriptors).
    if let Some(maker) = state.maker.take() {
        let _ = signal::kill(maker.pid(), Signal::SIGKILL);
        let _ = waitpid(maker.pid(), None);
    }
    // So does the spare monitor, which holds nothing yet.
    if let Some(spare) = state.spare_monitor.take() {
        spare.retire();
    }
    outcome
}

/// What the spawner's loop keeps between requests.
struct SpawnerState {
    /// Whether pages were mapped since the last release (start-up, requests).
    busy: bool,
    /// When the spawner last forked (or started).
    last_fork: Instant,
    /// The child making spare namespaces, while it works.
    maker: Option<SpareMaker>,
    /// Spare namespaces for the next pod that fits (`spare`).
    spare: Option<SpareNamespaces>,
    /// Spare namespaces could not be made: none are made again in this spawner's life.
    spares_off: bool,
    /// A monitor forked ahead, for the next container (`spare_monitor`).
    spare_monitor: Option<SpareMonitor>,
    /// A spare monitor could not be forked: none is forked again in this spawner's life.
    spare_monitors_off: bool,
    /// The spawner's own UTS namespace, to return to after setting a pod's hostname in spare
    /// namespaces (none: no spares).
    own_uts: Option<OwnedFd>,
}

impl Default for SpawnerState {
    fn default() -> Self {
        SpawnerState {
            busy: true,
            last_fork: Instant::now(),
            maker: None,
            spare: None,
            spares_off: false,
            spare_monitor: None,
            spare_monitors_off: std::env::var_os(super::spare_monitor::NO_SPARE_ENV)
                .is_some_and(|v| v == "1"),
            own_uts: None,
        }
    }
}

impl SpawnerState {
    fn wants_spare(&self) -> bool {
        self.maker.is_none() && self.spare.is_none() && !self.spares_off
    }

    fn wants_spare_monitor(&self) -> bool {
        self.spare_monitor.is_none() && !self.spare_monitors_off
    }

    /// How long to wait for the next request before the idle work (a spare, the release).
    fn timeout(&self) -> PollTimeout {
        let since = self.last_fork.elapsed();
        let mut wait: Option<Duration> = None;
        if self.wants_spare() || self.wants_spare_monitor() {
            wait = Some(SPARE_AFTER.saturating_sub(since));
        }
        if self.busy {
            let release = Duration::from_millis(u64::from(IDLE_RELEASE_MS)).saturating_sub(since);
            wait = Some(wait.map_or(release, |w| w.min(release)));
        }
        match wait {
            Some(w) => PollTimeout::try_from(w).unwrap_or(PollTimeout::MAX),
            None => PollTimeout::NONE,
        }
    }

    /// The idle work that is due: new spare namespaces first, then a spare monitor. Returns
    /// whether the pages are to be released now (the caller does it, [`release_and_wait`]).
    fn on_idle(&mut self) -> bool {
        let since = self.last_fork.elapsed();
        if self.wants_spare() && since >= SPARE_AFTER {
            match SpareMaker::fork() {
                Ok(maker) => self.maker = Some(maker),
                Err(e) => {
                    eprintln!("podvisor spawner: no spare pod namespaces: fork: {e}");
                    self.spares_off = true;
                }
            }
            return false;
        }
        if self.wants_spare_monitor() && since >= SPARE_AFTER {
            match SpareMonitor::fork() {
                Ok(spare) => self.spare_monitor = Some(spare),
                Err(e) => {
                    eprintln!("podvisor spawner: no spare monitor: fork: {e}");
                    self.spare_monitors_off = true;
                }
            }
            return false;
        }
        if self.busy && since >= Duration::from_millis(u64::from(IDLE_RELEASE_MS)) {
            self.busy = false;
            return true;
        }
        false
    }
}

/// Idle: the pages of start-up and of the last requests go (children map what they run
/// themselves; fork copies no page of code), then the spawner waits until one of `fds` is
/// readable. Not between the requests of a burst, which would fault them in again. The wait
/// is here, a `poll(2)` straight after the release, because every page of code that runs
/// between the two is mapped back with its neighbours (the kernel maps up to 64 KiB around a
/// faulting file page): the loop's own code would bring back ~0.4 MB.
#[inline(never)]
fn release_and_wait(fds: &mut [libc::pollfd]) {
    if let Ok(r) = crate::sys::pages::Release::plan(true) {
        let _ = r.apply();
    }
    // SAFETY: poll(2) reads and writes only the `fds.len()` pollfd entries it is given;
    // the result is not needed (the loop polls again).
    unsafe {
        libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1);
    }
}

fn serve_requests(
    sock: &OwnedFd,
    sigfd: &SignalFd,
    buf: &mut [u8],
    state: &mut SpawnerState,
) -> io::Result<()> {
    loop {
        let maker_sock = state.maker.as_ref().map(SpareMaker::socket);
        let mut fds = vec![
            PollFd::new(sock.as_fd(), PollFlags::POLLIN),
            PollFd::new(sigfd.as_fd(), PollFlags::POLLIN),
        ];
        if let Some(s) = &maker_sock {
            fds.push(PollFd::new(s.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, state.timeout()) {
            Ok(0) => {
                drop(fds);
                if state.on_idle() {
                    let watched = [
                        Some(sock.as_raw_fd()),
                        Some(sigfd.as_raw_fd()),
                        state.maker.as_ref().map(|m| m.socket().as_raw_fd()),
                    ];
                    let mut raw: Vec<libc::pollfd> = watched
                        .into_iter()
                        .flatten()
                        .map(|fd| libc::pollfd {
                            fd,
                            events: libc::POLLIN,
                            revents: 0,
                        })
                        .collect();
                    release_and_wait(&mut raw);
                }
                continue;
            }
            Ok(_) => {}
            Err(nix::Error::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
        let ready = |i: usize| {
            fds.get(i)
                .is_some_and(|f| !f.revents().unwrap_or(PollFlags::empty()).is_empty())
        };
        let (sock_ready, sig_ready, maker_ready) = (ready(0), ready(1), ready(2));
        drop(fds);
        if maker_ready {
            if let Some(maker) = state.maker.take() {
                match maker.finish() {
                    Ok(spare) => state.spare = Some(spare),
                    Err(why) => {
                        eprintln!("podvisor spawner: no spare pod namespaces: {why}");
                        state.spares_off = true;
                    }
                }
            }
        }
        if sig_ready {
            while let Ok(Some(_)) = sigfd.read_signal() {}
            reap_children();
        }
        if !sock_ready {
            continue;
        }
        let (n, received) = match fdpass::recv(sock, buf) {
            Ok(r) => r,
            // The runtime's end is gone (ECONNRESET) or a bad message (its descriptors are
            // closed already): a bad message is answered, a dead peer ends the spawner.
            Err(e) if e.raw_os_error() == Some(libc::ECONNRESET) => return Ok(()),
            Err(e) => {
                answer(
                    sock,
                    &Reply::Failed {
                        message: e.to_string(),
                    },
                    &[],
                )?;
                continue;
            }
        };
        if n == 0 {
            // The runtime closed its end (daemon exited or killed): children run on.
            return Ok(());
        }
        crate::tp!("spw.recv");
        state.busy = true;
        state.last_fork = Instant::now();
        let (reply, files) = match serde_json::from_slice::<Request>(&buf[..n]) {
            Ok(Request::TakeSpare { hostname }) => take_spare(state, &hostname)?,
            Ok(req) => handle(req, received, state),
            Err(e) => (
                Reply::Failed {
                    message: format!("malformed request: {e}"),
                },
                Vec::new(),
            ),
        };
        crate::tp!("spw.forked");
        // Our copies of handed-over descriptors close once sent.
        answer(sock, &reply, &files)?;
    }
}

/// The answer to `TakeSpare`: the spare namespaces with `hostname` set, or none. An error
/// when the spawner is stranded in a pod's UTS namespace (it must exit).
fn take_spare(state: &mut SpawnerState, hostname: &str) -> io::Result<(Reply, Vec<OwnedFd>)> {
    let (Some(spare), Some(own_uts)) = (state.spare.take(), &state.own_uts) else {
        return Ok((Reply::NoSpare, Vec::new()));
    };
    match spare.set_hostname(hostname, own_uts) {
        Ok(()) => Ok((Reply::Spare, spare.into_files())),
        // The namespaces go (the pod's helper makes its own).
        Err(HostnameError::NotSet) => Ok((Reply::NoSpare, Vec::new())),
        Err(HostnameError::Stranded) => Err(io::Error::other(
            "could not return to its own UTS namespace after setting a pod's hostname",
        )),
    }
}

fn answer(sock: &OwnedFd, reply: &Reply, files: &[OwnedFd]) -> io::Result<()> {
    let data = serde_json::to_vec(reply).map_err(io::Error::other)?;
    let fds: Vec<RawFd> = files.iter().map(|f| f.as_raw_fd()).collect();
    // An error here means the runtime went away meanwhile: the child runs on; we end.
    fdpass::send(sock, &data, &fds)
}

/// Reaps every child that has ended (monitors, helpers, the spare namespaces' maker). Their
/// exits are read by the runtime through pidfds and exit records, never from here.
fn reap_children() {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

fn handle(req: Request, fds: Vec<OwnedFd>, state: &mut SpawnerState) -> (Reply, Vec<OwnedFd>) {
    let failed = |message: String| (Reply::Failed { message }, Vec::new());
    let want = match &req {
        Request::Monitor { .. } => 3,
        Request::Sandbox { .. } => 1,
        Request::TakeSpare { .. } => 0,
    };
    if fds.len() != want {
        return failed(format!(
            "{} descriptors with the request, {want} expected",
            fds.len()
        ));
    }
    // A monitor the spare becomes, when there is one (a spare that died gives the
    // descriptors back, and one is forked as without it).
    let mut fds = fds;
    if let (Request::Monitor { dir }, Some(monitor)) = (&req, state.spare_monitor.take()) {
        match monitor.hand_over(dir, fds) {
            Ok((pid, pidfd)) => return (Reply::Forked { pid: pid.as_raw() }, vec![pidfd]),
            Err(back) => fds = back,
        }
    }
    if let Err(e) = check_single_threaded() {
        return failed(e.to_string());
    }
    // The spare namespaces go to the first pod that fits; the child holds them from the fork.
    let spare = if SpareNamespaces::fits(&req) {
        state.spare.take()
    } else {
        None
    };
    // SAFETY: this process is single-threaded (checked just above), so the child inherits no
    // lock held by another thread; the child only runs `child_main`, which ends in _exit.
    match unsafe { fork() } {
        Err(e) => failed(format!("fork: {e}")),
        Ok(ForkResult::Child) => child_main(req, fds, spare),
        Ok(ForkResult::Parent { child }) => {
            // Our copies go: the child's are the only ones now (EOF and the lock follow it).
            drop(fds);
            drop(spare);
            // Our unreaped child: the pid cannot be recycled before this pidfd pins it.
            match crate::sys::pidfd::pidfd_open(child.as_raw()) {
                Ok(fd) => (
                    Reply::Forked {
                        pid: child.as_raw(),
                    },
                    vec![fd],
                ),
                Err(e) => failed(format!("pidfd_open {child}: {e}")),
            }
        }
    }
}

/// The forked child: becomes the monitor or the sandbox helper, then `_exit`s (never returns
/// into the spawner's loop, never runs its destructors).
fn child_main(req: Request, fds: Vec<OwnedFd>, spare: Option<SpareNamespaces>) -> ! {
    let code = match req {
        // Answered by the spawner itself, never forked for.
        Request::TakeSpare { .. } => 1,
        Request::Monitor { dir } => run_monitor(&dir, fds),
        Request::Sandbox {
            dir,
            hostname,
            host_network,
            share_pid,
            user_ns_base,
        } => {
            let mut fds = fds;
            let result = fds.pop().map(fs::File::from);
            let keep = result.as_ref().map_or(-1, |f| f.as_raw_fd());
            crate::tp!("hlp.start");
            // Spare namespaces are joined first (their descriptors close with the rest); where
            // that fails, new ones are made as without them.
            let joined = spare.is_some_and(|ns| ns.enter().is_ok());
            let outcome = prepare_helper(&dir, keep)
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    if joined {
                        sandbox::pin_unshared(&dir, &hostname, host_network, share_pid)
                    } else {
                        sandbox::pin_namespaces(
                            &dir,
                            &hostname,
                            host_network,
                            share_pid,
                            user_ns_base,
                        )
                    }
                    .map_err(|e| e.to_string())
                });
            let (code, text) = match &outcome {
                Ok(()) => (0, HELPER_OK.to_vec()),
                Err(e) => (1, format!("{e}\n").into_bytes()),
            };
            crate::tp!("hlp.done");
            if let Some(mut f) = result {
                let _ = f.write_all(&text);
            }
            code
        }
    };
    // SAFETY: ends the forked child without returning into the spawner's code.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state whose last fork was `ago` ago.
    /// A spawner's state; no spare monitor is wanted (none can be made in a test binary,
    /// which has threads), except where a test says so.
    fn state(busy: bool, ago: Duration, spare: bool, spares_off: bool) -> SpawnerState {
        SpawnerState {
            busy,
            last_fork: Instant::now() - ago,
            spare: spare.then(SpareNamespaces::empty_for_tests),
            spares_off,
            spare_monitors_off: true,
            ..SpawnerState::default()
        }
    }

    fn millis(t: PollTimeout) -> Option<u128> {
        (t != PollTimeout::NONE).then(|| u128::from(t.as_millis().unwrap_or(0)))
    }

    #[test]
    fn the_idle_work_comes_in_order_spare_first_then_the_release() {
        let ms = Duration::from_millis;
        // (busy, since the last fork, holds a spare, spares off) -> next timeout (ms, at most)
        let cases: [(bool, Duration, bool, bool, Option<u128>); 5] = [
            // Right after a fork: the spare is due first.
            (true, ms(0), false, false, Some(50)),
            // A spare held: only the release is due.
            (true, ms(0), true, false, Some(1000)),
            // No spare can be made: the release is due all the same.
            (true, ms(0), false, true, Some(1000)),
            // Released and a spare held: nothing is due, wait for a request.
            (false, ms(0), true, false, None),
            // Past both: due now.
            (true, ms(2000), false, false, Some(0)),
        ];
        for (i, (busy, ago, spare, off, want)) in cases.into_iter().enumerate() {
            let got = millis(state(busy, ago, spare, off).timeout());
            match (got, want) {
                (None, None) => {}
                (Some(g), Some(w)) => assert!(
                    g <= w && g + 40 >= w,
                    "case {i}: {g} ms, want {w} ms (within the test's own 40 ms)"
                ),
                _ => panic!("case {i}: {got:?}, want {want:?}"),
            }
        }
        // Idle past the release with a spare held: release now, once.
        let mut st = state(true, ms(1500), true, false);
        assert!(st.on_idle());
        assert!(!st.busy);
        assert!(!st.on_idle());
        // Idle before the release: nothing yet.
        let mut st = state(true, ms(100), true, false);
        assert!(!st.on_idle());
        assert!(st.busy);
        // Spare namespaces held, a spare monitor wanted: it is due with them, 50 ms after
        // the fork; released or not.
        for busy in [true, false] {
            let mut st = state(busy, ms(0), true, false);
            st.spare_monitors_off = false;
            let got = millis(st.timeout()).expect("a timeout");
            assert!(got <= 50 && got + 40 >= 50, "busy {busy}: {got} ms");
        }
        // Due, in a process that cannot fork one (threads): tried once, then off for good,
        // and the release comes next as without it.
        let mut st = state(true, ms(60), true, false);
        st.spare_monitors_off = false;
        assert!(!st.on_idle(), "the fork is the idle work of this round");
        assert!(st.spare_monitors_off && st.spare_monitor.is_none());
        let left = millis(st.timeout()).expect("the release is due");
        assert!(left <= 940 && left + 40 >= 940, "{left} ms to the release");
    }
}
