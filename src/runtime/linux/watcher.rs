//! watcher: the exit watcher thread, epoll over the pidfds of every monitor; each monitor
//! exit becomes a [`RuntimeEvent::ContainerExited`] carrying the exit record the monitor wrote
//! (or, when it died without one, the `shim cleanup` helper's).

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Mutex;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::super::procfs;
use super::super::shim::{self, ContainerPaths};
use super::super::{ContainerMeta, ExitRecord, RuntimeError, RuntimeEvent};
use super::{run_cleanup, RuntimeConfig};

struct Watched {
    id: String,
    pod_uid: String,
    paths: ContainerPaths,
    pidfd: OwnedFd,
}

/// The exit-watcher: epoll over monitor pidfds.
pub(super) struct ExitWatcher {
    cfg: RuntimeConfig,
    epoll: Epoll,
    stop: EventFd,
    next: AtomicU64,
    watched: Mutex<HashMap<u64, Watched>>,
    events: Mutex<Sender<RuntimeEvent>>,
}

const STOP_TOKEN: u64 = 0;

impl ExitWatcher {
    pub(super) fn new(cfg: RuntimeConfig, events: Sender<RuntimeEvent>) -> io::Result<ExitWatcher> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let stop = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        epoll.add(&stop, EpollEvent::new(EpollFlags::EPOLLIN, STOP_TOKEN))?;
        Ok(ExitWatcher {
            cfg,
            epoll,
            stop,
            next: AtomicU64::new(1),
            watched: Mutex::new(HashMap::new()),
            events: Mutex::new(events),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Watched>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts
        // and removes), so a poisoned lock is still usable.
        self.watched.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn watch(
        &self,
        meta: &ContainerMeta,
        paths: ContainerPaths,
        pidfd: OwnedFd,
    ) -> Result<(), RuntimeError> {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        let mut map = self.lock();
        self.epoll
            .add(&pidfd, EpollEvent::new(EpollFlags::EPOLLIN, token))
            .map_err(|e| RuntimeError::Io {
                what: "watch monitor of",
                path: paths.dir.clone(),
                source: e.into(),
            })?;
        map.insert(
            token,
            Watched {
                id: meta.id.clone(),
                pod_uid: meta.pod_uid.clone(),
                paths,
                pidfd,
            },
        );
        Ok(())
    }

    pub(super) fn is_watched(&self, id: &str) -> bool {
        self.lock().values().any(|w| w.id == id)
    }

    /// Stops watching `id`; returns its pidfd.
    pub(super) fn forget(&self, id: &str) -> Option<OwnedFd> {
        let mut map = self.lock();
        let token = map.iter().find(|(_, w)| w.id == id).map(|(t, _)| *t)?;
        let w = map.remove(&token)?;
        let _ = self.epoll.delete(&w.pidfd);
        Some(w.pidfd)
    }

    pub(super) fn shutdown(&self) {
        let _ = self.stop.arm();
    }

    pub(super) fn run(&self) {
        let mut events = [EpollEvent::empty(); 32];
        loop {
            let n = match self.epoll.wait(&mut events, EpollTimeout::NONE) {
                Ok(n) => n,
                Err(nix::Error::EINTR) => continue,
                Err(e) => {
                    log::error!("exit watcher: epoll_wait: {e}");
                    return;
                }
            };
            for ev in &events[..n] {
                let token = ev.data();
                if token == STOP_TOKEN {
                    return;
                }
                let w = {
                    let mut map = self.lock();
                    match map.remove(&token) {
                        Some(w) => {
                            let _ = self.epoll.delete(&w.pidfd);
                            w
                        }
                        None => continue,
                    }
                };
                procfs::reap_pidfd(&w.pidfd);
                self.report(w);
            }
        }
    }

    fn report(&self, w: Watched) {
        let paths = &w.paths;
        if !paths.cleaned().exists() {
            if let Err(e) = run_cleanup(&self.cfg.shim_binary, paths) {
                log::error!("container {}: {e}", w.id);
            }
        }
        let exit = match shim::read_json::<ExitRecord>(&paths.exit()) {
            Ok(e) => e,
            Err(e) => {
                log::error!("container {}: {e}", w.id);
                ExitRecord {
                    exit_code: 137,
                    signal: None,
                    oom_killed: false,
                    started_at: String::new(),
                    finished_at: crate::runtime::now_rfc3339(),
                    reason: "ContainerStatusUnknown".into(),
                    message: Some(e.to_string()),
                }
            }
        };
        let tx = self.events.lock().unwrap_or_else(|p| p.into_inner());
        // The receiver may be gone while shutting down: nothing left to tell.
        let _ = tx.send(RuntimeEvent::ContainerExited {
            id: w.id,
            pod_uid: w.pod_uid,
            exit,
        });
    }
}
