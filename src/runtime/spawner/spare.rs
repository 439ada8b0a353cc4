//! Spare pod namespaces: one set of IPC, network and UTS namespaces (loopback up) the spawner
//! has made ahead of time, while it was quiet, and holds as three open namespace files. The
//! next pod that wants exactly those (not `hostNetwork`, not `hostUsers: false`) gets them:
//! - without a shared PID namespace, the runtime takes them (`Request::TakeSpare`): the
//!   spawner sets the pod's hostname in them ([`SpareNamespaces::set_hostname`]) and sends the
//!   files, which the runtime pins itself (`sandbox::pin_spare`), with no helper process;
//! - with one, the pod's forked helper joins them (`setns`, [`SpareNamespaces::enter`])
//!   instead of making new ones, then does the rest as always (`sandbox::pin_unshared`).
//!
//! Why: making a network namespace is the kernel's slowest step of a pod's start (0.76 ms of
//! the helper's 1.3 ms on the development VM, `docs/history/start-timeline.md`), and every pod's start
//! waited for it; joining one takes microseconds.
//!
//! How they are made: the spawner forks a short-lived child ([`SpareMaker`]) that unshares
//! the namespaces, brings loopback up, sends their files back over a socket pair and exits.
//! This happens [`SPARE_AFTER`] after the spawner last forked anything, never between the
//! requests of a burst. Where the namespaces cannot be made (a namespace limit, a sandboxed
//! test), the spawner says why once and goes on making them per pod, as before.
//!
//! What they cost: three descriptors and one idle network namespace with only `lo` (kernel
//! memory, no process, no mount). They live exactly as long as the spawner's descriptors:
//! nothing is left behind when it exits or is killed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::time::Duration;

use nix::sched::{setns, CloneFlags};
use nix::unistd::{fork, ForkResult, Pid};

use super::child::{check_single_threaded, prepare_helper};
use crate::runtime::protocol::Request;
use crate::runtime::sandbox;
use crate::sys::fdpass;

/// Quiet time after the spawner's last fork before it makes spare namespaces: a burst of
/// starts is not slowed by them being made beside it.
pub(super) const SPARE_AFTER: Duration = Duration::from_millis(50);

/// What the maker names itself in errors and on its command line.
const MAKER: &str = "spare pod namespaces";

/// The namespace kinds a spare holds, in the order they are sent and joined (the order of
/// `sandbox::SPARE_KINDS`).
const KINDS: [(&str, CloneFlags); 3] = [
    (sandbox::SPARE_KINDS[0], CloneFlags::CLONE_NEWIPC),
    (sandbox::SPARE_KINDS[1], CloneFlags::CLONE_NEWNET),
    (sandbox::SPARE_KINDS[2], CloneFlags::CLONE_NEWUTS),
];
/// Where the UTS namespace's file is among a spare's.
const UTS: usize = 2;

/// Why a pod's hostname could not be set in spare namespaces.
#[derive(Debug, PartialEq)]
pub(super) enum HostnameError {
    /// Not set: the spare namespaces are dropped and the pod's helper makes its own.
    NotSet,
    /// Set or not, the spawner could not return to its own UTS namespace: it must exit, or its
    /// children would be born in the pod's.
    Stranded,
}

/// A child of the spawner making spare namespaces.
pub(super) struct SpareMaker {
    pid: Pid,
    sock: OwnedFd,
}

/// Spare namespaces, ready: their files, in the order of [`KINDS`].
pub(super) struct SpareNamespaces {
    files: Vec<OwnedFd>,
}

impl SpareMaker {
    /// Forks the maker (the caller is the single-threaded spawner).
    pub(super) fn fork() -> io::Result<SpareMaker> {
        check_single_threaded()?;
        let (ours, theirs) = fdpass::seqpacket_pair()?;
        // SAFETY: this process is single-threaded (checked just above): the child inherits no
        // lock held by another thread; it only runs `maker_main`, which ends in _exit.
        match unsafe { fork() }.map_err(io::Error::from)? {
            ForkResult::Child => {
                drop(ours);
                maker_main(theirs)
            }
            ForkResult::Parent { child } => Ok(SpareMaker {
                pid: child,
                sock: ours,
            }),
        }
    }

    /// The socket to poll for the maker's answer.
    pub(super) fn socket(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }

    /// The maker's pid (it is reaped with the spawner's other children).
    pub(super) fn pid(&self) -> Pid {
        self.pid
    }

    /// Reads the maker's answer (its socket polled readable): the namespaces, or why there
    /// are none.
    pub(super) fn finish(self) -> Result<SpareNamespaces, String> {
        let mut buf = [0u8; 512];
        match fdpass::recv(&self.sock, &mut buf) {
            Ok((n, files)) if n > 0 && &buf[..n] == b"ready" && files.len() == KINDS.len() => {
                Ok(SpareNamespaces { files })
            }
            Ok((0, _)) => Err(format!("{MAKER}: the maker exited without an answer")),
            Ok((n, _)) => Err(format!("{MAKER}: {}", String::from_utf8_lossy(&buf[..n]))),
            Err(e) => Err(format!("{MAKER}: reading the answer: {e}")),
        }
    }
}

impl SpareNamespaces {
    /// Whether a request can have them: exactly the namespaces a spare holds.
    pub(super) fn fits(req: &Request) -> bool {
        matches!(
            req,
            Request::Sandbox {
                host_network: false,
                user_ns_base: None,
                ..
            }
        )
    }

    /// Sets `hostname` in their UTS namespace: the spawner joins it and returns to its own
    /// (`own_uts`) at once.
    pub(super) fn set_hostname(
        &self,
        hostname: &str,
        own_uts: &OwnedFd,
    ) -> Result<(), HostnameError> {
        let uts = self.files.get(UTS).ok_or(HostnameError::NotSet)?;
        setns(uts, CloneFlags::CLONE_NEWUTS).map_err(|_| HostnameError::NotSet)?;
        let set = nix::unistd::sethostname(hostname);
        setns(own_uts, CloneFlags::CLONE_NEWUTS).map_err(|_| HostnameError::Stranded)?;
        set.map_err(|_| HostnameError::NotSet)
    }

    /// Their files, to hand over to the runtime (`Request::TakeSpare`).
    pub(super) fn into_files(self) -> Vec<OwnedFd> {
        self.files
    }

    /// No files at all (tests of the spawner's loop state).
    #[cfg(test)]
    pub(super) fn empty_for_tests() -> SpareNamespaces {
        SpareNamespaces { files: Vec::new() }
    }

    /// Joins them (in the forked helper, before anything else).
    pub(super) fn enter(&self) -> nix::Result<()> {
        for ((_, kind), file) in KINDS.iter().zip(&self.files) {
            setns(file, *kind)?;
        }
        Ok(())
    }
}

/// The forked maker: makes the namespaces, sends their files, `_exit`s (never returns into
/// the spawner's loop).
fn maker_main(sock: OwnedFd) -> ! {
    let code = match make(&sock) {
        Ok(()) => 0,
        Err(message) => {
            let _ = fdpass::send(&sock, message.as_bytes(), &[]);
            1
        }
    };
    // SAFETY: ends the forked child without returning into the spawner's code.
    unsafe { libc::_exit(code) }
}

fn make(sock: &OwnedFd) -> Result<(), String> {
    let what = Path::new(MAKER);
    prepare_helper(what, sock.as_raw_fd()).map_err(|e| e.to_string())?;
    sandbox::unshare_pod_namespaces(what, false).map_err(|e| e.to_string())?;
    let mut files = Vec::with_capacity(KINDS.len());
    for (kind, _) in KINDS {
        let path = format!("/proc/self/ns/{kind}");
        let file = std::fs::File::open(&path).map_err(|e| format!("open {path}: {e}"))?;
        files.push(OwnedFd::from(file));
    }
    let raw: Vec<_> = files.iter().map(|f| f.as_raw_fd()).collect();
    fdpass::send(sock, b"ready", &raw).map_err(|e| e.to_string())
}
