//! Signalling a container ([`crate::runtime::Runtime::signal_container`], the stop's SIGTERM
//! and SIGKILL): through a pidfd of its init, opened after the init's identity (pid and start
//! time, in the monitor's `state.json`) was checked, so a recycled pid is never signalled.
//!
//! The one system call is behind [`Signaller`] (youki's `Syscall` seam, narrowed to what this
//! verb does): [`Pidfd`] is the real one, and the unit tests below record the calls of a fake
//! instead, so what the verb signals (and when it refuses) is tested without root, a
//! `LinuxRuntime` or a live process.

use std::io;

use super::LinuxRuntime;
use crate::runtime::container::{self, ContainerPaths};
use crate::runtime::procfs::ProcessId;
use crate::runtime::protocol::ShimState;
use crate::runtime::RuntimeError;

/// Sends a signal to a process known by its identity.
pub(super) trait Signaller {
    /// Signals `process` if it is still the process it was (pid and start time); `Ok(false)`
    /// when it is gone.
    fn signal(&self, process: &ProcessId, signal: i32) -> io::Result<bool>;
}

/// The real [`Signaller`]: a pidfd opened after the identity check ([`ProcessId::signal`]).
pub(super) struct Pidfd;

impl Signaller for Pidfd {
    fn signal(&self, process: &ProcessId, signal: i32) -> io::Result<bool> {
        process.signal(signal)
    }
}

impl LinuxRuntime {
    /// [`crate::runtime::Runtime::signal_container`]: a no-op once the init is gone.
    pub(super) fn signal(&self, id: &str, signal: i32) -> Result<(), RuntimeError> {
        let paths = self.container_paths(id)?;
        signal_init(&paths, id, signal, &Pidfd)
    }
}

/// Signals the init recorded in the container's `state.json` through `sys`. Not found without
/// the container's identity; nothing to do before the init is recorded or once it is gone.
pub(super) fn signal_init(
    paths: &ContainerPaths,
    id: &str,
    signal: i32,
    sys: &dyn Signaller,
) -> Result<(), RuntimeError> {
    if !paths.meta().exists() {
        return Err(RuntimeError::NotFound { id: id.to_string() });
    }
    let state: ShimState = container::read_json_opt(&paths.state())
        .map_err(|source| RuntimeError::Shim {
            id: id.to_string(),
            source: Box::new(source),
        })?
        .unwrap_or_default();
    if let Some(init) = state.init {
        sys.signal(&init, signal)
            .map_err(|source| RuntimeError::Signal {
                id: id.to_string(),
                source,
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::fs;

    use super::*;

    /// Records every signal asked for; answers with `result`.
    struct Recording {
        calls: RefCell<Vec<(ProcessId, i32)>>,
        result: fn() -> io::Result<bool>,
    }

    impl Recording {
        fn new(result: fn() -> io::Result<bool>) -> Recording {
            Recording {
                calls: RefCell::new(Vec::new()),
                result,
            }
        }
    }

    impl Signaller for Recording {
        fn signal(&self, process: &ProcessId, signal: i32) -> io::Result<bool> {
            self.calls.borrow_mut().push((*process, signal));
            (self.result)()
        }
    }

    /// A container's directories with `meta.json` when `complete`, and `state.json` when given.
    fn container(complete: bool, state: Option<&ShimState>) -> (tempfile::TempDir, ContainerPaths) {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = ContainerPaths::new(dir.path().join("run"), dir.path().join("record"));
        fs::create_dir_all(&paths.dir).expect("run dir");
        fs::create_dir_all(&paths.record).expect("record dir");
        if complete {
            fs::write(paths.meta(), b"{}").expect("meta");
        }
        if let Some(st) = state {
            fs::write(paths.state(), serde_json::to_vec(st).expect("json")).expect("state");
        }
        (dir, paths)
    }

    fn init(pid: i32, start_time: u64) -> ShimState {
        ShimState {
            shim: Some(ProcessId {
                pid: 1,
                start_time: 1,
            }),
            init: Some(ProcessId { pid, start_time }),
            started_at: Some("2026-01-01T00:00:00Z".into()),
        }
    }

    #[test]
    fn the_recorded_init_gets_the_signal_and_nothing_else_does() {
        let (_d, paths) = container(true, Some(&init(4242, 99)));
        let sys = Recording::new(|| Ok(true));
        signal_init(&paths, "c1", libc::SIGTERM, &sys).expect("signalled");
        let want = ProcessId {
            pid: 4242,
            start_time: 99,
        };
        assert_eq!(*sys.calls.borrow(), vec![(want, libc::SIGTERM)]);
    }

    #[test]
    fn an_init_that_is_gone_is_not_an_error() {
        let (_d, paths) = container(true, Some(&init(4242, 99)));
        let sys = Recording::new(|| Ok(false));
        signal_init(&paths, "c1", libc::SIGKILL, &sys).expect("no-op");
        assert_eq!(sys.calls.borrow().len(), 1);
    }

    #[test]
    fn before_the_init_is_recorded_nothing_is_signalled() {
        let sys = Recording::new(|| Ok(true));
        // No state.json yet (the monitor has not written it), or one without the init.
        let (_d, paths) = container(true, None);
        signal_init(&paths, "c1", libc::SIGTERM, &sys).expect("nothing to signal");
        let (_d, paths) = container(true, Some(&ShimState::default()));
        signal_init(&paths, "c1", libc::SIGTERM, &sys).expect("nothing to signal");
        assert!(sys.calls.borrow().is_empty());
    }

    #[test]
    fn a_container_without_identity_is_not_found_and_a_failed_signal_names_it() {
        let sys = Recording::new(|| Ok(true));
        let (_d, paths) = container(false, Some(&init(4242, 99)));
        let e = signal_init(&paths, "c1", libc::SIGTERM, &sys).expect_err("not found");
        assert!(
            matches!(e, RuntimeError::NotFound { ref id } if id == "c1"),
            "{e}"
        );
        assert!(sys.calls.borrow().is_empty());

        let sys = Recording::new(|| Err(io::Error::from_raw_os_error(libc::EPERM)));
        let (_d, paths) = container(true, Some(&init(4242, 99)));
        let e = signal_init(&paths, "c2", libc::SIGTERM, &sys).expect_err("refused");
        assert!(
            matches!(e, RuntimeError::Signal { ref id, .. } if id == "c2"),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("container c2: failed to signal"),
            "{e}"
        );
    }
}
