//! topdir: ext4's hint that a directory's children are the tops of directory trees.
//!
//! Why: every container start makes a directory tree on the state disk (its record with the
//! writable layer's `upper/` and `work/`, overlayfs's own `work/work` and its checks, the
//! pod's and the container's log directories) and every removal deletes it again. ext4
//! puts a new directory in its parent's block group, and the files and directories below it
//! follow, so all that churn lands in one group. On an ext4 *without a journal* (some flash
//! installations turn it off; so does this project's development machine) every inode
//! allocation then skips each inode of the group deleted within the last 1-6 minutes
//! (`fs/ext4/ialloc.c`: `find_inode_bit` calls `recently_deleted` for every free bit from the
//! start of the group while `s_journal` is NULL): a start pays for every deletion of the
//! minutes before it. Measured with `cargo bench --bench daemon` run four times back to back
//! (about 1,500 inodes deleted a run): the start went 8.57 -> 10.20 ms and ten at once
//! 73 -> 98 ms.
//!
//! With `FS_TOPDIR_FL` (`chattr +T`) on the parent, ext4's Orlov allocator places each new
//! child directory as it places the file system root's children: in a block group chosen
//! across the whole file system, away from the last one's deletions. Measured the same way,
//! interleaved with the runs above: 7.96-8.29 ms and 66-75 ms, flat. A journaled ext4 has no
//! such scan and measured the same with and without the flag. The flag is an allocation
//! hint only (not inherited, nothing else reads it; `lsattr -d` shows it as `T`); other file
//! systems refuse it (`EOPNOTSUPP`, or `ENOTTY` where they have no inode flags), and then
//! nothing is changed.

use std::io;
use std::path::Path;

use rustix::fs::{ioctl_getflags, ioctl_setflags, IFlags, Mode, OFlags, CWD};
use rustix::io::Errno;

/// What [`spread_subdirectories`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    /// The flag was set now.
    Set,
    /// The directory had it already.
    AlreadySet,
    /// The file system has no such flag (not ext2/3/4): nothing to do.
    Unsupported,
}

/// Sets `FS_TOPDIR_FL` on the directory `dir`, keeping its other inode flags.
pub fn spread_subdirectories(dir: &Path) -> io::Result<Spread> {
    let fd = rustix::fs::openat(
        CWD,
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?;
    let flags = match ioctl_getflags(&fd) {
        Ok(f) => f,
        Err(e) if unsupported(e) => return Ok(Spread::Unsupported),
        Err(e) => return Err(e.into()),
    };
    if flags.contains(IFlags::TOPDIR) {
        return Ok(Spread::AlreadySet);
    }
    match ioctl_setflags(&fd, flags | IFlags::TOPDIR) {
        Ok(()) => Ok(Spread::Set),
        Err(e) if unsupported(e) => Ok(Spread::Unsupported),
        Err(e) => Err(e.into()),
    }
}

/// The answers of a file system without inode flags (`ENOTTY`), or without this one
/// (`EOPNOTSUPP`; `EINVAL` from some that check the flags they know).
fn unsupported(e: Errno) -> bool {
    e == Errno::NOTTY || e == Errno::OPNOTSUPP || e == Errno::INVAL
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ext2, ext3 and ext4 share this superblock magic.
    const EXT_SUPER_MAGIC: i64 = 0xEF53;

    /// tmpfs's magic.
    const TMPFS_MAGIC: i64 = 0x0102_1994;

    /// The file system type of `dir` (`f_type` is an i32 on 32-bit targets).
    #[allow(clippy::unnecessary_cast)]
    fn fs_type(dir: &Path) -> Option<i64> {
        rustix::fs::statfs(dir).ok().map(|s| s.f_type as i64)
    }

    fn is_ext(dir: &Path) -> bool {
        fs_type(dir) == Some(EXT_SUPER_MAGIC)
    }

    #[test]
    fn sets_the_flag_once_and_keeps_the_others_on_ext4() {
        let t = tempfile::tempdir().expect("tempdir");
        let dir = t.path().join("containers");
        std::fs::create_dir(&dir).expect("mkdir");
        if !is_ext(&dir) {
            assert_eq!(
                spread_subdirectories(&dir).expect("spread"),
                Spread::Unsupported,
                "not ext4: nothing is changed"
            );
            return;
        }
        // A flag the owner may set, to see that it is kept.
        let fd = std::fs::File::open(&dir).expect("open");
        let before = ioctl_getflags(&fd).expect("getflags");
        ioctl_setflags(&fd, before | IFlags::NODUMP).expect("setflags");
        assert_eq!(spread_subdirectories(&dir).expect("spread"), Spread::Set);
        assert_eq!(
            spread_subdirectories(&dir).expect("spread"),
            Spread::AlreadySet
        );
        let after = ioctl_getflags(&fd).expect("getflags");
        assert!(after.contains(IFlags::TOPDIR), "{after:?}");
        assert!(
            after.contains(IFlags::NODUMP),
            "other flags kept: {after:?}"
        );
        // Not inherited: a child directory is an ordinary one.
        let child = dir.join("c1");
        std::fs::create_dir(&child).expect("mkdir child");
        let child_flags =
            ioctl_getflags(std::fs::File::open(&child).expect("open child")).expect("getflags");
        assert!(!child_flags.contains(IFlags::TOPDIR), "{child_flags:?}");
    }

    #[test]
    fn a_tmpfs_has_no_such_flag() {
        // /dev/shm is a tmpfs on Linux systems with a /dev (the test machines).
        let shm = Path::new("/dev/shm");
        if fs_type(shm) != Some(TMPFS_MAGIC) {
            return;
        }
        let t = tempfile::tempdir_in(shm).expect("tempdir in /dev/shm");
        assert_eq!(
            spread_subdirectories(t.path()).expect("spread"),
            Spread::Unsupported
        );
    }

    #[test]
    fn a_missing_directory_or_a_file_is_an_error() {
        let t = tempfile::tempdir().expect("tempdir");
        let missing = spread_subdirectories(&t.path().join("missing")).expect_err("missing");
        assert_eq!(missing.kind(), io::ErrorKind::NotFound);
        let file = t.path().join("f");
        std::fs::write(&file, "").expect("write");
        assert!(spread_subdirectories(&file).is_err(), "a file is refused");
    }
}
