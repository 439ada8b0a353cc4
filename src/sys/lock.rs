//! `flock(2)` advisory locks on open files: the runtime dir lock, container and exec locks,
//! the image store's and the registry client's locks. A lock lives as long as the open file
//! description (every duplicate of the descriptor, across fork and exec).

use std::io;
use std::os::fd::AsFd;

use rustix::fs::{flock, FlockOperation};

/// Blocks until `fd` holds an exclusive lock (retried when a signal interrupts the wait).
pub fn lock_exclusive(fd: impl AsFd) -> io::Result<()> {
    lock_retrying(fd, FlockOperation::LockExclusive)
}

/// Takes an exclusive lock without waiting: `Ok(false)` when another holder has it.
pub fn try_lock_exclusive(fd: impl AsFd) -> io::Result<bool> {
    try_lock(fd, FlockOperation::NonBlockingLockExclusive)
}

/// Takes a shared lock without waiting: `Ok(false)` when an exclusive holder has it.
pub fn try_lock_shared(fd: impl AsFd) -> io::Result<bool> {
    try_lock(fd, FlockOperation::NonBlockingLockShared)
}

fn lock_retrying(fd: impl AsFd, op: FlockOperation) -> io::Result<()> {
    loop {
        match flock(fd.as_fd(), op) {
            Err(rustix::io::Errno::INTR) => continue,
            other => return other.map_err(io::Error::from),
        }
    }
}

fn try_lock(fd: impl AsFd, op: FlockOperation) -> io::Result<bool> {
    loop {
        match flock(fd.as_fd(), op) {
            Ok(()) => return Ok(true),
            Err(rustix::io::Errno::WOULDBLOCK) => return Ok(false),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclusive_excludes_and_shared_shares() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        let open = || std::fs::File::create(&path).expect("open");
        let (a, b, c) = (open(), open(), open());
        assert!(try_lock_shared(&a).expect("shared a"));
        assert!(try_lock_shared(&b).expect("shared b"));
        assert!(!try_lock_exclusive(&c).expect("exclusive c"));
        drop((a, b));
        assert!(try_lock_exclusive(&c).expect("exclusive c after"));
        let d = open();
        assert!(!try_lock_shared(&d).expect("shared d"));
        drop(c);
        lock_exclusive(&d).expect("blocking exclusive");
    }
}
