//! The sandbox helper's part for `hostUsers: false` pods: the pod's namespaces created inside
//! a user namespace of its own, so that they belong to it (a container's root may then set
//! its hostname, mount proc, sysfs and mqueue, and configure its network).
//!
//! The helper (single-threaded) forks. The child unshares the user namespace and waits; the
//! helper, still root of the host, writes the child's `uid_map` and `gid_map` (`0 <base>
//! 65536`); the child becomes root of the namespace, unshares the IPC, network, UTS (and with
//! `share_pid` PID) namespaces, sets the hostname, brings loopback up, starts the pod init
//! and reports its pid; the helper pins every namespace from `/proc/<child>/ns/*` (a mount in
//! the host's mount namespace, which the child may not make) and lets the child exit.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use nix::sched::{unshare, CloneFlags};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult, Gid, Pid, Uid};

use super::steps::{loopback_up, pin, spawn_pod_init_process};
use super::{io_err, SandboxError, SandboxPaths};
use crate::fsutil;
use crate::runtime::procfs::ProcessId;

/// IDs in a pod's user namespace (`0..65536`).
const IDS: u32 = 65536;

fn helper_err(message: impl Into<String>) -> SandboxError {
    SandboxError::Helper {
        message: message.into(),
    }
}

fn pipe() -> Result<(fs::File, fs::File), SandboxError> {
    let (r, w) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|source| SandboxError::Sys {
            what: "pipe for",
            path: PathBuf::from("the user namespace helper"),
            source,
        })?;
    Ok((fs::File::from(r), fs::File::from(w)))
}

/// Creates the pod's namespaces in a new user namespace mapping `0..65536` to
/// `base..base+65536` and pins them (`ns/user`, `ns/ipc`, `ns/net`, `ns/uts`, with
/// `share_pid` `ns/pid` and the pod init's record).
pub(super) fn pin_in_user_namespace(
    paths: &SandboxPaths,
    hostname: &str,
    share_pid: bool,
    base: u32,
) -> Result<(), SandboxError> {
    let (mut from_child, to_parent) = pipe()?;
    let (from_parent, mut to_child) = pipe()?;
    // SAFETY: the sandbox helper is single-threaded; the child only makes syscalls, writes
    // to its pipes and exits with _exit.
    match unsafe { fork() }.map_err(|source| SandboxError::Sys {
        what: "fork in",
        path: paths.dir.clone(),
        source,
    })? {
        ForkResult::Child => {
            drop(from_child);
            drop(to_child);
            let code = match child(to_parent, from_parent, &paths.dir, hostname, share_pid) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("{e}");
                    1
                }
            };
            // SAFETY: _exit ends the forked child without running the parent's destructors.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => {
            drop(to_parent);
            drop(from_parent);
            let result = parent(
                paths,
                child,
                &mut from_child,
                &mut to_child,
                share_pid,
                base,
            );
            drop(to_child);
            let status = waitpid(child, None);
            result?;
            match status {
                Ok(WaitStatus::Exited(_, 0)) => Ok(()),
                other => Err(helper_err(format!(
                    "user namespace child ended with {other:?}"
                ))),
            }
        }
    }
}

fn parent(
    paths: &SandboxPaths,
    child: Pid,
    from_child: &mut fs::File,
    to_child: &mut fs::File,
    share_pid: bool,
    base: u32,
) -> Result<(), SandboxError> {
    let mut b = [0u8; 1];
    from_child
        .read_exact(&mut b)
        .map_err(|_| helper_err("the user namespace child failed before unsharing"))?;
    let map = format!("0 {base} {IDS}\n");
    for file in ["uid_map", "gid_map"] {
        let p = PathBuf::from(format!("/proc/{child}/{file}"));
        fs::write(&p, &map).map_err(io_err(&p))?;
    }
    to_child.write_all(b"m").map_err(io_err(&paths.dir))?;
    let mut pid = [0u8; 4];
    from_child
        .read_exact(&mut pid)
        .map_err(|_| helper_err("the user namespace child failed to create the namespaces"))?;
    for kind in ["user", "ipc", "net", "uts"] {
        pin(
            Path::new(&format!("/proc/{child}/ns/{kind}")),
            &paths.ns(kind),
        )?;
    }
    if share_pid {
        let init = i32::from_ne_bytes(pid);
        let id = ProcessId::of(init).map_err(|e| helper_err(format!("pod init {init}: {e}")))?;
        fsutil::write_json_atomic_volatile(&paths.pod_init(), &id)
            .map_err(io_err(&paths.pod_init()))?;
        pin(Path::new(&format!("/proc/{init}/ns/pid")), &paths.ns("pid"))?;
    }
    Ok(())
}

fn child(
    mut to_parent: fs::File,
    mut from_parent: fs::File,
    dir: &Path,
    hostname: &str,
    share_pid: bool,
) -> Result<(), SandboxError> {
    let sys = |what: &'static str| {
        move |source| SandboxError::Sys {
            what,
            path: PathBuf::from("the pod's user namespace"),
            source,
        }
    };
    unshare(CloneFlags::CLONE_NEWUSER).map_err(sys("unshare the user namespace for"))?;
    let lost = |_| helper_err("the sandbox helper went away");
    to_parent.write_all(b"u").map_err(lost)?;
    let mut b = [0u8; 1];
    from_parent.read_exact(&mut b).map_err(lost)?;
    // Root of the namespace from here: the pod init runs as the pod's root, not the host's.
    nix::unistd::setresgid(Gid::from_raw(0), Gid::from_raw(0), Gid::from_raw(0))
        .map_err(sys("setresgid in"))?;
    nix::unistd::setgroups(&[]).map_err(sys("setgroups in"))?;
    nix::unistd::setresuid(Uid::from_raw(0), Uid::from_raw(0), Uid::from_raw(0))
        .map_err(sys("setresuid in"))?;
    let mut flags = CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWUTS;
    if share_pid {
        flags |= CloneFlags::CLONE_NEWPID;
    }
    unshare(flags).map_err(sys("unshare namespaces in"))?;
    nix::unistd::sethostname(hostname).map_err(sys("sethostname in"))?;
    loopback_up().map_err(|source| SandboxError::Io {
        path: PathBuf::from("lo"),
        source,
    })?;
    let init = if share_pid {
        spawn_pod_init_process(dir)?
    } else {
        0
    };
    to_parent.write_all(&init.to_ne_bytes()).map_err(lost)?;
    // Wait until the namespaces are pinned (the parent closes its end).
    let _ = from_parent.read(&mut b);
    Ok(())
}
