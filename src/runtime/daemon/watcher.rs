//! watcher: the exit watcher thread, epoll over the pidfds of every monitor and one inotify
//! instance watching their record directories. A container's exit becomes a
//! [`RuntimeEvent::ContainerExited`] carrying the exit record the monitor wrote as soon as
//! that record is renamed into place (`exit.json`, durable by then): the monitor's own
//! clean-up (the log's fsync, libcontainer's delete, the rootfs unmount, the writable layer's
//! removal) runs after it, off the restart's path, as containerd reports a task's exit before
//! the container is deleted. A monitor that dies without recording the exit is reported when
//! its pidfd says so, with the `shim cleanup` helper's record.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Mutex;

use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};

use super::super::container::{self, ContainerPaths};
use super::super::procfs;
use super::super::{ContainerMeta, ExitRecord, RuntimeError, RuntimeEvent};
use super::{run_cleanup, RuntimeConfig};
use crate::reason::TerminatedReason;

struct Watched {
    id: String,
    pod_uid: String,
    paths: ContainerPaths,
    pidfd: OwnedFd,
    /// The inotify watch on the record directory (none if it could not be added: the exit
    /// is then reported when the monitor ends).
    wd: Option<WatchDescriptor>,
    /// The exit was reported (its record appeared before the monitor ended).
    reported: bool,
}

/// The exit-watcher: epoll over monitor pidfds.
pub(super) struct ExitWatcher {
    cfg: RuntimeConfig,
    epoll: Epoll,
    stop: EventFd,
    inotify: Inotify,
    next: AtomicU64,
    watched: Mutex<HashMap<u64, Watched>>,
    events: Mutex<Sender<RuntimeEvent>>,
    /// A recorded exit is usually followed by a restart: its cgroup placement comes soon.
    warmer: std::sync::Arc<crate::cgroups::warm::AttachWarmer>,
}

const STOP_TOKEN: u64 = 0;
const INOTIFY_TOKEN: u64 = u64::MAX;

impl ExitWatcher {
    pub(super) fn new(
        cfg: RuntimeConfig,
        events: Sender<RuntimeEvent>,
        warmer: std::sync::Arc<crate::cgroups::warm::AttachWarmer>,
    ) -> io::Result<ExitWatcher> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
        let stop = EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?;
        epoll.add(&stop, EpollEvent::new(EpollFlags::EPOLLIN, STOP_TOKEN))?;
        let inotify = Inotify::init(InitFlags::IN_CLOEXEC | InitFlags::IN_NONBLOCK)?;
        epoll.add(
            &inotify,
            EpollEvent::new(EpollFlags::EPOLLIN, INOTIFY_TOKEN),
        )?;
        Ok(ExitWatcher {
            cfg,
            epoll,
            stop,
            inotify,
            next: AtomicU64::new(1),
            watched: Mutex::new(HashMap::new()),
            events: Mutex::new(events),
            warmer,
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
        let exit_path = paths.exit();
        {
            let mut map = self.lock();
            self.epoll
                .add(&pidfd, EpollEvent::new(EpollFlags::EPOLLIN, token))
                .map_err(|e| RuntimeError::Io {
                    what: "watch monitor of",
                    path: paths.dir.clone(),
                    source: e.into(),
                })?;
            let wd = match self
                .inotify
                .add_watch(&paths.record, AddWatchFlags::IN_MOVED_TO)
            {
                Ok(wd) => Some(wd),
                Err(e) => {
                    log::warn!(
                        "container {}: watch {}: {e}: its exit is reported when its monitor ends",
                        meta.id,
                        paths.record.display()
                    );
                    None
                }
            };
            map.insert(
                token,
                Watched {
                    id: meta.id.clone(),
                    pod_uid: meta.pod_uid.clone(),
                    paths,
                    pidfd,
                    wd,
                    reported: false,
                },
            );
        }
        // The record may predate the watch (a re-adopted monitor cleaning up).
        if exit_path.exists() {
            self.exit_recorded(|(t, _)| *t == token);
        }
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
        self.unwatch(&w);
        Some(w.pidfd)
    }

    fn unwatch(&self, w: &Watched) {
        let _ = self.epoll.delete(&w.pidfd);
        if let Some(wd) = w.wd {
            // Gone already when the directory was removed (IN_IGNORED): EINVAL, harmless.
            let _ = self.inotify.rm_watch(wd);
        }
    }

    /// Reports the exit of the first watched container `pick` selects whose exit record is
    /// readable and that was not reported yet.
    fn exit_recorded(&self, pick: impl Fn((&u64, &Watched)) -> bool) {
        let found = {
            let mut map = self.lock();
            let Some((_, w)) = map.iter_mut().find(|(t, w)| !w.reported && pick((t, w))) else {
                return;
            };
            // Written atomically and durably before the rename: complete, or not there yet.
            match container::read_json::<ExitRecord>(&w.paths.exit()) {
                Ok(exit) => {
                    w.reported = true;
                    Some((w.id.clone(), w.pod_uid.clone(), exit))
                }
                Err(_) => None,
            }
        };
        if let Some((id, pod_uid, exit)) = found {
            self.send(id, pod_uid, exit);
        }
    }

    /// Reads the inotify events: an `exit.json` renamed into a watched record directory.
    fn on_inotify(&self) {
        loop {
            let events = match self.inotify.read_events() {
                Ok(ev) if !ev.is_empty() => ev,
                // EAGAIN: drained.
                _ => return,
            };
            for ev in events {
                if ev.name.as_deref() == Some(std::ffi::OsStr::new(container::EXIT_RECORD)) {
                    crate::tp!("watch.exit");
                    self.exit_recorded(|(_, w)| w.wd == Some(ev.wd));
                }
            }
        }
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
                if token == INOTIFY_TOKEN {
                    self.on_inotify();
                    continue;
                }
                let w = {
                    let mut map = self.lock();
                    match map.remove(&token) {
                        Some(w) => {
                            self.unwatch(&w);
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

    /// The monitor ended: finishes what it left (`shim cleanup` when it did not write
    /// `cleaned`) and reports the exit unless its record was reported already.
    fn report(&self, w: Watched) {
        let paths = &w.paths;
        if !paths.cleaned().exists() {
            if let Err(e) = run_cleanup(&self.cfg.shim_binary, paths) {
                log::error!("container {}: {e}", w.id);
            }
        }
        if w.reported {
            return;
        }
        let exit = match container::read_json::<ExitRecord>(&paths.exit()) {
            Ok(e) => e,
            Err(e) => {
                log::error!("container {}: {e}", w.id);
                ExitRecord {
                    exit_code: 137,
                    signal: None,
                    oom_killed: false,
                    started_at: String::new(),
                    finished_at: crate::runtime::now_rfc3339(),
                    reason: TerminatedReason::ContainerStatusUnknown.into(),
                    message: Some(e.to_string()),
                }
            }
        };
        self.send(w.id, w.pod_uid, exit);
    }

    fn send(&self, id: String, pod_uid: String, exit: ExitRecord) {
        self.warmer.warm();
        let tx = self.events.lock().unwrap_or_else(|p| p.into_inner());
        // The receiver may be gone while shutting down: nothing left to tell.
        let _ = tx.send(RuntimeEvent::ContainerExited { id, pod_uid, exit });
    }
}
