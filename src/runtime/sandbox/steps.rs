//! The steps both ways of building a pod's namespaces take ([`super::helper`] as root of the
//! host, [`super::in_userns`] inside a user namespace of the pod's own): bring loopback up,
//! start the pod init, pin a namespace file.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::mount::{mount, MsFlags};

use super::{io_err, SandboxError};

/// Starts `podvisor shim pod-init <dir>` (its own session, no stdio) and returns its pid;
/// it is never waited for here (it outlives the helper).
pub(super) fn spawn_pod_init_process(dir: &Path) -> Result<i32, SandboxError> {
    use std::os::unix::process::CommandExt;
    let exe = PathBuf::from("/proc/self/exe");
    let mut cmd = Command::new(&exe);
    cmd.arg0("podvisor")
        .arg("shim")
        .arg("pod-init")
        .arg(dir)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe; this helper is single-threaded anyway. The init
    // leads its own session so no terminal signal of ours reaches it.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(io_err(&exe))?;
    let pid = child.id() as i32;
    // The init outlives this helper (re-parented to PID 1 or a subreaper): never waited here.
    drop(child);
    Ok(pid)
}

/// Pins the namespace file `ns` by bind-mounting it on `target` (created empty).
pub(super) fn pin(ns: &Path, target: &Path) -> Result<(), SandboxError> {
    fs::File::create(target).map_err(io_err(target))?;
    mount(
        Some(ns),
        target,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(|source| SandboxError::Sys {
        what: "bind-mount namespace on",
        path: target.to_path_buf(),
        source,
    })
}

/// `ip link set lo up` in the current network namespace.
pub(super) fn loopback_up() -> io::Result<()> {
    // SAFETY: plain socket(2); the fd is owned and closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own.
    let sock = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    use std::os::fd::AsRawFd;
    // SAFETY: ifreq is plain old data; zero is a valid initial value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo".iter().enumerate() {
        req.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the ifreq we pass.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
