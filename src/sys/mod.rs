//! sys: podvisor's raw OS calls in one place, on top of rustix (safe wrappers over the raw
//! syscalls; already in the dependency tree through libcontainer's `pathrs`).
//!
//! Everything here is a thin, documented wrapper with `io::Result`: the callers keep their
//! own error types and context (path, container, layer). What lives here:
//! - [`at`]: `openat2` below a root (with the kernel's EAGAIN retry) and the `*at` calls the
//!   layer unpacker makes relative to directory descriptors;
//! - [`lock`]: `flock` advisory locks (exclusive, shared, blocking or not);
//! - [`tty`]: the terminal window size ioctls;
//! - [`pidfd`]: process file descriptors (open, signal, reap);
//! - [`prctl`]: process attributes (name, no_new_privs);
//! - [`kernel`]: what the running kernel offers (its version, recursive read-only mounts);
//! - [`idmap`]: idmapped mounts (hostUsers: false pods);
//! - [`fdpass`]: messages with file descriptors over a unix socket pair (the spawner's);
//! - [`proctitle`]: the command line a process forked without exec shows;
//! - [`pages`]: a long-lived process's code pages given back after its busy start;
//! - [`mountpoint`]: whether a path is the root of a mount (statx, Linux 5.8);
//! - [`topdir`]: ext4's hint to spread a directory's children over the file system;
//! - [`stop`]: a stop request a thread polls beside its sockets (an eventfd), instead of a tick.
//!
//! Calls that must run between fork and exec (async-signal-safe only) stay where the
//! `pre_exec` closure is: rustix's calls are raw syscalls without allocation, so they may be
//! used there too.

pub mod at;
pub mod fdpass;
pub mod idmap;
pub mod kernel;
pub mod lock;
pub mod mountpoint;
pub mod pages;
pub mod pidfd;
pub mod prctl;
pub mod proctitle;
pub mod stop;
pub mod topdir;
pub mod tty;
