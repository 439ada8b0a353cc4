//! mountpoint: whether a path is the root of a mount, from the path alone.
//!
//! `statx` reports `STATX_ATTR_MOUNT_ROOT` since Linux 5.8. The alternative, reading
//! `/proc/self/mountinfo`, makes the kernel print every mount of the namespace on each read.
//! With a few dozen pods that is hundreds of lines, and the runtime asks several times per
//! container start and removal: in a burst of ten starts it was 11 % of the workers' CPU and
//! 15 % of libcontainer's intermediate process's (docs/history/start-timeline.md, round eight).

use std::path::Path;

use rustix::fs::{AtFlags, StatxAttributes, StatxFlags, CWD};

/// `Some(true)` when `path` is the root of a mount (not following a final symlink),
/// `Some(false)` when it is not or does not exist, `None` when the kernel cannot say
/// (before Linux 5.8, or no `statx`): the caller then reads mountinfo.
pub fn is_mount_root(path: &Path) -> Option<bool> {
    match rustix::fs::statx(
        CWD,
        path,
        AtFlags::NO_AUTOMOUNT | AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::empty(),
    ) {
        Ok(st) => st
            .stx_attributes_mask
            .contains(StatxAttributes::MOUNT_ROOT)
            .then(|| st.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)),
        Err(rustix::io::Errno::NOENT) | Err(rustix::io::Errno::NOTDIR) => Some(false),
        // Permission or I/O trouble: mountinfo answers, as before.
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_of_mounts_and_plain_directories() {
        let Some(root) = is_mount_root(Path::new("/")) else {
            // A kernel before 5.8: the callers fall back to mountinfo.
            return;
        };
        assert!(root, "/ is the root of a mount");
        assert_eq!(is_mount_root(Path::new("/proc")), Some(true));
        let t = tempfile::tempdir().expect("tempdir");
        assert_eq!(is_mount_root(t.path()), Some(false));
        assert_eq!(is_mount_root(&t.path().join("missing")), Some(false));
        let file = t.path().join("f");
        std::fs::write(&file, "x").expect("write");
        assert_eq!(is_mount_root(&file.join("below-a-file")), Some(false));
        // A symlink to a mount point is not itself one.
        let link = t.path().join("to-proc");
        std::os::unix::fs::symlink("/proc", &link).expect("symlink");
        assert_eq!(is_mount_root(&link), Some(false));
    }
}
