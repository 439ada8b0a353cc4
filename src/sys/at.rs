//! Path operations relative to directory descriptors: `openat2` confined below a root, and
//! the `*at` calls (mkdir, open, symlink, link, mknod, chown, chmod, xattrs, timestamps) the
//! image layer unpacker makes on the directory it has already resolved safely.
//!
//! None of these follow a final symlink unless the caller's flags say so; the unpacker never
//! passes a path with a `/` to them, only names inside a resolved parent.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, Dev, FileType, Gid, Mode, OFlags, ResolveFlags, Timestamps, Uid};
use rustix::io::Errno;

/// How many times [`openat2_in_root`] retries when the kernel answers EAGAIN.
///
/// openat2(2): with `RESOLVE_IN_ROOT` or `RESOLVE_BENEATH`, "a concurrent rename(2) or
/// mount(2) ... may cause the resolution to fail with EAGAIN; the caller should retry". The
/// bound keeps a container that renames in a loop from pinning the caller forever (libpathrs
/// bounds its retries the same way).
const OPENAT2_RETRIES: usize = 128;

/// Opens `path` (relative; a leading `/` is ignored, empty means `.`) below the directory
/// `root` with `openat2`, confined by `resolve` (typically `RESOLVE_IN_ROOT` or
/// `RESOLVE_BENEATH`, with `RESOLVE_NO_MAGICLINKS`). `O_CLOEXEC` is always added. EAGAIN
/// (a concurrent rename or mount raced the lookup) is retried as the kernel documents.
pub fn openat2_in_root(
    root: impl AsFd,
    path: &Path,
    flags: OFlags,
    resolve: ResolveFlags,
) -> io::Result<OwnedFd> {
    let rel = path.strip_prefix("/").unwrap_or(path);
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let mut tries = 0;
    loop {
        match rustix::fs::openat2(
            root.as_fd(),
            rel,
            flags | OFlags::CLOEXEC,
            Mode::empty(),
            resolve,
        ) {
            Err(Errno::AGAIN) if tries < OPENAT2_RETRIES => tries += 1,
            other => return other.map_err(io::Error::from),
        }
    }
}

/// Opens a directory as an `O_PATH` root for [`openat2_in_root`].
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    rustix::fs::open(
        path,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(io::Error::from)
}

/// Opens `dir/name` with open(2) `flags` and, for a new file, `mode`.
pub fn open_at(dir: BorrowedFd<'_>, name: &CStr, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        flags,
        Mode::from_raw_mode(mode),
    )?)
}

/// The status of `dir/name`, not following a final symlink; `None` when it does not exist.
pub fn lstat_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<FileType>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(FileType::from_raw_mode(st.st_mode))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The file type of an open descriptor.
pub fn file_type(fd: BorrowedFd<'_>) -> io::Result<FileType> {
    Ok(FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode))
}

/// Removes the non-directory `dir/name`.
pub fn unlink_at(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    Ok(rustix::fs::unlinkat(dir, name, AtFlags::empty())?)
}

pub fn mkdir_at(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(mode))?)
}

/// Creates the symlink `dir/name` pointing at `target`.
pub fn symlink_at(target: &CStr, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    Ok(rustix::fs::symlinkat(target, dir, name)?)
}

/// Hard-links `odir/oname` as `ndir/nname`; a symlink source is linked, not followed.
pub fn link_at(
    odir: BorrowedFd<'_>,
    oname: &CStr,
    ndir: BorrowedFd<'_>,
    nname: &CStr,
) -> io::Result<()> {
    Ok(rustix::fs::linkat(
        odir,
        oname,
        ndir,
        nname,
        AtFlags::empty(),
    )?)
}

/// Creates the node `dir/name`; `mode` carries the file type bits (`S_IFCHR`, ...).
pub fn mknod_at(dir: BorrowedFd<'_>, name: &CStr, mode: u32, dev: u64) -> io::Result<()> {
    Ok(rustix::fs::mknodat(
        dir,
        name,
        FileType::from_raw_mode(mode),
        Mode::from_raw_mode(mode),
        Dev::from(dev),
    )?)
}

/// chown of `dir/name`, not following a final symlink.
pub fn chown_at(dir: BorrowedFd<'_>, name: &CStr, uid: u32, gid: u32) -> io::Result<()> {
    Ok(rustix::fs::chownat(
        dir,
        name,
        Some(Uid::from_raw_unchecked(uid)),
        Some(Gid::from_raw_unchecked(gid)),
        AtFlags::SYMLINK_NOFOLLOW,
    )?)
}

pub fn fchown(fd: BorrowedFd<'_>, uid: u32, gid: u32) -> io::Result<()> {
    Ok(rustix::fs::fchown(
        fd,
        Some(Uid::from_raw_unchecked(uid)),
        Some(Gid::from_raw_unchecked(gid)),
    )?)
}

pub fn fchmod(fd: BorrowedFd<'_>, mode: u32) -> io::Result<()> {
    Ok(rustix::fs::fchmod(fd, Mode::from_raw_mode(mode))?)
}

/// chmod of `dir/name` without following a final symlink: open it O_PATH|O_NOFOLLOW, leave a
/// symlink alone (Linux has no symlink modes), and chmod through its /proc/self/fd entry.
pub fn chmod_nofollow(dir: BorrowedFd<'_>, name: &CStr, mode: u32) -> io::Result<()> {
    let fd = open_at(
        dir,
        name,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        0,
    )?;
    if file_type(fd.as_fd())? == FileType::Symlink {
        return Ok(());
    }
    let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    Ok(rustix::fs::chmod(path.as_str(), Mode::from_raw_mode(mode))?)
}

pub fn fsetxattr(fd: BorrowedFd<'_>, key: &CStr, value: &[u8]) -> io::Result<()> {
    Ok(rustix::fs::fsetxattr(
        fd,
        key,
        value,
        rustix::fs::XattrFlags::empty(),
    )?)
}

/// lsetxattr on `dir/name`, reached through `/proc/self/fd/<dir>/<name>`: the directory fd's
/// magic link resolves to the real directory and the final component is not followed.
pub fn lsetxattr_at(dir: BorrowedFd<'_>, name: &CStr, key: &CStr, value: &[u8]) -> io::Result<()> {
    let mut path = format!("/proc/self/fd/{}/", dir.as_raw_fd()).into_bytes();
    path.extend_from_slice(name.to_bytes());
    let path = std::ffi::OsStr::from_bytes(&path);
    Ok(rustix::fs::lsetxattr(
        path,
        key,
        value,
        rustix::fs::XattrFlags::empty(),
    )?)
}

fn timestamps(mtime: (i64, i64)) -> Timestamps {
    let ts = rustix::fs::Timespec {
        tv_sec: mtime.0,
        tv_nsec: mtime.1 as _,
    };
    Timestamps {
        last_access: ts,
        last_modification: ts,
    }
}

/// Sets the access and modification times of `dir/name` to `mtime` (seconds, nanoseconds),
/// not following a final symlink.
pub fn utimens_at(dir: BorrowedFd<'_>, name: &CStr, mtime: (i64, i64)) -> io::Result<()> {
    Ok(rustix::fs::utimensat(
        dir,
        name,
        &timestamps(mtime),
        AtFlags::SYMLINK_NOFOLLOW,
    )?)
}

/// Sets the access and modification times of an open file to `mtime`.
pub fn futimens(fd: BorrowedFd<'_>, mtime: (i64, i64)) -> io::Result<()> {
    Ok(rustix::fs::futimens(fd, &timestamps(mtime))?)
}

/// Flushes the filesystem holding `dir` (one syncfs instead of an fsync per file).
pub fn syncfs(dir: &Path) -> io::Result<()> {
    let f = std::fs::File::open(dir)?;
    Ok(rustix::fs::syncfs(&f)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openat2_in_root_stays_below_the_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("a")).expect("mkdir");
        std::fs::write(dir.path().join("a/f"), b"x").expect("write");
        std::os::unix::fs::symlink("/etc", dir.path().join("out")).expect("symlink");
        std::os::unix::fs::symlink("../../..", dir.path().join("a/up")).expect("symlink");
        let root = open_root(dir.path()).expect("root");
        let rd = OFlags::RDONLY;
        let beneath = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let in_root = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
        openat2_in_root(&root, Path::new("/a/f"), rd, beneath).expect("plain path");
        openat2_in_root(&root, Path::new(""), OFlags::PATH, beneath).expect("the root");
        let e = openat2_in_root(&root, Path::new("out"), OFlags::PATH, beneath).expect_err("x");
        assert_eq!(e.raw_os_error(), Some(libc::EXDEV), "{e}");
        // IN_ROOT resolves the escape inside the root: `a/up` is the root itself.
        let up = openat2_in_root(&root, Path::new("a/up/a/f"), rd, in_root).expect("in root");
        assert_eq!(file_type(up.as_fd()).expect("type"), FileType::RegularFile);
    }
}
