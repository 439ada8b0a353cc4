//! idmap: idmapped mounts (`open_tree(2)` + `mount_setattr(2)` with `MOUNT_ATTR_IDMAP` +
//! `move_mount(2)`, Linux 5.12; tmpfs only from 6.3), what `hostUsers: false` pods see their
//! volumes and image layers through.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` (linux/mount.h).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Mounts a clone of the tree at `source` (recursively) on `target` (an existing directory or
/// file of the same kind), with its IDs mapped through the user namespace `userns`: a file
/// owned by uid N on disk is seen as owned by the uid the namespace maps N to.
pub fn mount_idmapped(source: &Path, userns: BorrowedFd<'_>, target: &Path) -> io::Result<()> {
    let src = c_path(source)?;
    let dst = c_path(target)?;
    // SAFETY: open_tree reads the NUL-terminated path and returns a new descriptor we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            src.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by open_tree and is owned by nobody else.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns.as_raw_fd() as u64,
    };
    let empty = c"";
    // SAFETY: mount_setattr reads `attr` (size passed) and the empty path; the fds are live.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: move_mount reads the two NUL-terminated paths; the tree fd is live.
    let r = unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_FDCWD,
            dst.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
