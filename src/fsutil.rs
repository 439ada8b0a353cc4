//! Small filesystem helpers shared by every manager: atomic file replacement (write to a
//! temporary file in the same directory, fsync, rename, fsync the directory) so that a power
//! cut or SIGKILL never leaves a half-written state file visible — and opening paths below a
//! directory with `openat2`, so that symlinks and `..` never leave it.

use std::ffi::CString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `data` to `path` atomically: readers see either the old content or the new one.
/// The data and the rename are made durable (fsync of the file and of the directory).
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic_with(path, data, true)
}

/// Like [`write_atomic`] but without the fsyncs: atomic against crashes of the process, not
/// against power loss. For state that is worthless after a reboot anyway (a container's
/// runtime files: no container survives a power cut) on the latency-sensitive start path.
pub fn write_atomic_volatile(path: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic_with(path, data, false)
}

/// Serializes `value` as pretty JSON and writes it with [`write_atomic_volatile`].
pub fn write_json_atomic_volatile<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let data = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    write_atomic_volatile(path, &data)
}

fn write_atomic_with(path: &Path, data: &[u8], durable: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(data)?;
        if durable {
            f.sync_all()?;
        }
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if durable {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Serializes `value` as pretty JSON and writes it atomically.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let data = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    write_atomic(path, &data)
}

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Opens `path` (relative; a leading `/` is ignored) below the directory `root` with
/// `openat2`, resolving every symlink and `..` as if `root` were `/`. Magic links
/// (`/proc/self/...`) are refused. `flags` are `open(2)` flags; `O_CLOEXEC` is always added.
pub fn openat2_in_root(
    root: &OwnedFd,
    path: &Path,
    flags: libc::c_int,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let rel = path.strip_prefix("/").unwrap_or(path);
    let rel = if rel.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rel
    };
    let c_path = CString::new(rel.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    let how = OpenHow {
        flags: u64::try_from(flags | libc::O_CLOEXEC)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "negative open flags"))?,
        mode: 0,
        resolve,
    };
    // SAFETY: the pointers are valid for the duration of the call (c_path and how live on
    // this frame) and the size passed matches the struct, laid out as `struct open_how`.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            root.as_raw_fd(),
            c_path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        )
    };
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(ret)
        .map_err(|_| io::Error::other("openat2 returned an out-of-range descriptor"))?;
    // SAFETY: openat2 succeeded, so fd is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens a directory as an `O_PATH` root for [`openat2_in_root`].
pub fn open_root(path: &Path) -> io::Result<OwnedFd> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains a NUL byte"))?;
    // SAFETY: c_path is a valid NUL-terminated string.
    let fd = unsafe {
        libc::open(
            c_path.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open succeeded, so fd is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one").expect("first write");
        write_atomic(&p, b"two").expect("second write");
        assert_eq!(fs::read(&p).expect("read"), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }
}
