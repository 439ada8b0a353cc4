//! nodeapi::listener: one TCP port served by one accept thread and at most `max_connections`
//! short connection threads. Every connection carries a whole-exchange deadline
//! ([`crate::httpserver::DeadlineStream`]), so a thread always ends and the bound always frees up;
//! a connection over the bound is closed at once (`refuse`).
//!
//! A port that cannot be bound (taken, address not on this host) is logged and retried every
//! 5 s, as the kubelet retries its healthz port: the node API must never stop the daemon from
//! keeping pods running.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sys::stop::{wait_readable, StopSignal};

/// The pause after an accept or poll error (the accept loop otherwise blocks on the socket
/// and the stop signal together: an idle port's thread is never woken).
const TICK: Duration = Duration::from_secs(1);
/// Bind retry period.
const RETRY: Duration = Duration::from_secs(5);

/// What to do with one accepted connection (runs on its own thread).
pub type Handler = Arc<dyn Fn(TcpStream) + Send + Sync>;
/// What to do with a connection over the bound (runs on the accept thread: must be quick).
pub type Refuse = Arc<dyn Fn(TcpStream) + Send + Sync>;

/// A port being served. Dropping it stops accepting and waits (a bounded time) for the
/// connections in flight.
pub struct Listener {
    name: &'static str,
    stop: Arc<StopSignal>,
    active: Arc<AtomicUsize>,
    accept: Option<JoinHandle<()>>,
    bound: Arc<std::sync::Mutex<Option<SocketAddr>>>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Holds one connection slot; released when the connection thread ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Listener {
    /// Starts the accept thread `name` for `addr`. The first bind is tried here: its error is
    /// returned so a caller can report it; later attempts happen on the thread.
    pub fn start(
        name: &'static str,
        addr: SocketAddr,
        max_connections: usize,
        handler: Handler,
        refuse: Refuse,
    ) -> io::Result<(Listener, Option<io::Error>)> {
        let stop = Arc::new(StopSignal::new()?);
        let active = Arc::new(AtomicUsize::new(0));
        let bound = Arc::new(std::sync::Mutex::new(None));
        let (first, first_err) = match bind(addr) {
            Ok(l) => (Some(l), None),
            Err(e) => (None, Some(e)),
        };
        if let Some(l) = &first {
            *lock(&bound) = l.local_addr().ok();
        }
        let (s, a, b) = (Arc::clone(&stop), Arc::clone(&active), Arc::clone(&bound));
        let accept = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let Some(listener) = first.or_else(|| bind_retrying(name, addr, &s)) else {
                    return;
                };
                *lock(&b) = listener.local_addr().ok();
                accept_loop(name, &listener, &s, &a, max_connections, &handler, &refuse);
            })?;
        Ok((
            Listener {
                name,
                stop,
                active,
                accept: Some(accept),
                bound,
            },
            first_err,
        ))
    }

    /// The address bound, once it is (port 0 resolved).
    pub fn local_addr(&self) -> Option<SocketAddr> {
        *lock(&self.bound)
    }

    /// Connections being served.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(h) = self.accept.take() {
            if h.join().is_err() {
                log::error!("{}: accept thread panicked", self.name);
            }
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Only an address is stored under this lock: a panic cannot leave it half-written.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let l = TcpListener::bind(addr)?;
    l.set_nonblocking(true)?;
    Ok(l)
}

fn bind_retrying(name: &str, addr: SocketAddr, stop: &StopSignal) -> Option<TcpListener> {
    let mut last: Option<String> = None;
    loop {
        if stop.wait(RETRY) {
            return None;
        }
        match bind(addr) {
            Ok(l) => {
                log::info!("{name}: listening on {addr}");
                return Some(l);
            }
            Err(e) => {
                // Logged when the error changes, not every 5 s (flash storage).
                let msg = e.to_string();
                if last.as_deref() != Some(&msg) {
                    log::error!("{name}: cannot listen on {addr}: {msg}; retrying every 5 s");
                    last = Some(msg);
                }
            }
        }
    }
}

fn accept_loop(
    name: &'static str,
    listener: &TcpListener,
    stop: &StopSignal,
    active: &Arc<AtomicUsize>,
    max_connections: usize,
    handler: &Handler,
    refuse: &Refuse,
) {
    while !stop.is_stopped() {
        match wait_readable(listener.as_fd(), stop) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                log::error!("{name}: cannot poll the listening socket: {e}");
                stop.wait(TICK);
                continue;
            }
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                log::warn!("{name}: cannot accept a connection: {e}");
                stop.wait(TICK);
                continue;
            }
        };
        // Accepted sockets inherit O_NONBLOCK from the listener on some systems: undo it.
        if stream.set_nonblocking(false).is_err() {
            continue;
        }
        let taken = active.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < max_connections).then_some(n + 1)
        });
        if taken.is_err() {
            refuse(stream);
            continue;
        }
        let slot = Slot(Arc::clone(active));
        let h = Arc::clone(handler);
        let spawned = std::thread::Builder::new()
            .name(format!("{name}-conn"))
            .spawn(move || {
                let _slot = slot;
                h(stream);
            });
        if let Err(e) = spawned {
            // The closure (and its slot) was dropped with the error.
            log::warn!("{name}: cannot start a connection thread: {e}");
        }
    }
}
