//! Safe extraction of one layer tar stream into a directory. The `tar` crate only parses
//! headers and PAX records; every filesystem change is made here with `*at` syscalls relative
//! to a parent directory opened with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) below the
//! layer root, and final components are never followed. OCI whiteouts become overlayfs
//! whiteouts (0/0 character devices) and opaque markers become `trusted.overlay.opaque=y`.

use std::ffi::OsStr;
use std::ffi::{CStr, CString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{FileType, OFlags, ResolveFlags};

pub use crate::sys::at::syncfs;
use crate::sys::at::{
    self, chmod_nofollow, chown_at, fchmod, fchown, fsetxattr, futimens, link_at, lsetxattr_at,
    mkdir_at, mknod_at, open_at, symlink_at, utimens_at,
};

/// Prefix of OCI whiteout entries.
const WHITEOUT_PREFIX: &[u8] = b".wh.";
/// Name of the OCI opaque-directory marker.
const OPAQUE_MARKER: &[u8] = b".wh..wh..opq";
/// The xattr overlayfs reads to treat a directory as opaque.
pub(super) const OPAQUE_XATTR: &CStr = c"trusted.overlay.opaque";
/// Xattrs under this prefix steer overlayfs; they are never taken from an archive.
const OVERLAY_XATTR_PREFIX: &str = "trusted.overlay.";

/// Errors of layer extraction; `entry` is the path as written in the archive.
#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("reading layer tar stream: {source}")]
    Tar {
        #[source]
        source: io::Error,
    },
    #[error("layer entry {entry:?} has a `..` path component")]
    DotDot { entry: String },
    #[error("layer entry {entry:?} has an empty name")]
    EmptyName { entry: String },
    #[error("layer entry {entry:?} has unsupported type {kind}")]
    Unsupported { entry: String, kind: String },
    #[error("layer entry {entry:?} is truncated: {got} of {want} bytes")]
    Truncated { entry: String, got: u64, want: u64 },
    #[error("layer entry {entry:?}: invalid header field {field}: {detail}")]
    BadHeader {
        entry: String,
        field: &'static str,
        detail: String,
    },
    #[error("layer entry {entry:?}: {op}: {source}")]
    Fs {
        entry: String,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("opening layer root {path}: {source}")]
    Root {
        path: std::path::PathBuf,
        #[source]
        source: io::Error,
    },
}

/// Metadata applied to a created entry.
#[derive(Debug, Clone)]
struct Meta {
    uid: u32,
    gid: u32,
    mode: u32,
    mtime: (i64, i64),
    xattrs: Vec<(CString, Vec<u8>)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Symlink,
    Hardlink,
    Char,
    Block,
    Fifo,
}

/// Extracts the tar stream `reader` into the existing directory `root`. The caller consumes
/// whatever trails the archive (for hashing) via the returned reader.
pub fn unpack<R: Read>(reader: R, root: &Path) -> Result<R, UnpackError> {
    let root_fd = open_root(root)?;
    let mut archive = tar::Archive::new(reader);
    let mut dir_times: Vec<DirTime> = Vec::new();
    {
        let entries = archive
            .entries()
            .map_err(|source| UnpackError::Tar { source })?;
        for entry in entries {
            let mut entry = entry.map_err(|source| UnpackError::Tar { source })?;
            if let Some(t) = unpack_entry(&root_fd, &mut entry)? {
                dir_times.push(t);
            }
        }
    }
    // Directory mtimes last: creating entries inside a directory changes its mtime.
    for (comps, mtime) in dir_times {
        let shown = display(&comps.join(&b'/'));
        let fs = |op, source| UnpackError::Fs {
            entry: shown.clone(),
            op,
            source,
        };
        match comps.split_last() {
            None => futimens(root_fd.as_fd(), mtime).map_err(|e| fs("set mtime", e))?,
            Some((name, parent)) => {
                let p = match open_dir_in_root(&root_fd, parent) {
                    Ok(p) => p,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(fs("open parent", e)),
                };
                let name = cstring(name, &shown)?;
                utimens_at(p.as_fd(), &name, mtime).map_err(|e| fs("set mtime", e))?;
            }
        }
    }
    Ok(archive.into_inner())
}

fn open_root(root: &Path) -> Result<OwnedFd, UnpackError> {
    File::open(root)
        .map(OwnedFd::from)
        .map_err(|source| UnpackError::Root {
            path: root.to_path_buf(),
            source,
        })
}

fn display(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Splits an archive path into components: leading `/` and `.` components dropped, `..`
/// rejected (containerd treats names as archive-relative).
fn components(raw: &[u8], shown: &str) -> Result<Vec<Vec<u8>>, UnpackError> {
    let mut out = Vec::new();
    for c in raw.split(|b| *b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                return Err(UnpackError::DotDot {
                    entry: shown.to_string(),
                })
            }
            c => out.push(c.to_vec()),
        }
    }
    Ok(out)
}

fn cstring(b: &[u8], shown: &str) -> Result<CString, UnpackError> {
    CString::new(b).map_err(|_| UnpackError::BadHeader {
        entry: shown.to_string(),
        field: "name",
        detail: "contains a nul byte".into(),
    })
}

type DirTime = (Vec<Vec<u8>>, (i64, i64));

fn unpack_entry<R: Read>(
    root: &OwnedFd,
    entry: &mut tar::Entry<'_, R>,
) -> Result<Option<DirTime>, UnpackError> {
    let raw_path = entry.path_bytes().into_owned();
    let shown = display(&raw_path);
    let bad = |field: &'static str, detail: String| UnpackError::BadHeader {
        entry: shown.clone(),
        field,
        detail,
    };
    let kind = match entry.header().entry_type() {
        tar::EntryType::Regular | tar::EntryType::Continuous => Kind::File,
        tar::EntryType::Directory => Kind::Dir,
        tar::EntryType::Symlink => Kind::Symlink,
        tar::EntryType::Link => Kind::Hardlink,
        tar::EntryType::Char => Kind::Char,
        tar::EntryType::Block => Kind::Block,
        tar::EntryType::Fifo => Kind::Fifo,
        tar::EntryType::XGlobalHeader => return Ok(None),
        other => {
            return Err(UnpackError::Unsupported {
                entry: shown,
                kind: format!("{other:?}"),
            })
        }
    };
    let comps = components(&raw_path, &shown)?;
    let meta = read_meta(entry, &shown)?;
    let fs = |op: &'static str| {
        let shown = shown.clone();
        move |source| UnpackError::Fs {
            entry: shown,
            op,
            source,
        }
    };

    let Some((name, parent)) = comps.split_last() else {
        // The layer root itself ("./").
        if kind != Kind::Dir {
            return Err(UnpackError::EmptyName { entry: shown });
        }
        let fd = root.as_fd();
        fchown(fd, meta.uid, meta.gid).map_err(fs("chown"))?;
        fchmod(fd, meta.mode).map_err(fs("chmod"))?;
        for (k, v) in &meta.xattrs {
            fsetxattr(fd, k, v).map_err(fs("set xattr"))?;
        }
        return Ok(Some((comps, meta.mtime)));
    };

    // Whiteouts.
    if name.as_slice() == OPAQUE_MARKER {
        let dir = open_dir_creating(root, parent).map_err(fs("open opaque directory"))?;
        fsetxattr(dir.as_fd(), OPAQUE_XATTR, b"y").map_err(fs("set opaque xattr"))?;
        return Ok(None);
    }
    if let Some(target) = name.strip_prefix(WHITEOUT_PREFIX) {
        if target.is_empty() || target == b"." || target == b".." {
            return Err(bad("name", "invalid whiteout".into()));
        }
        let p = open_dir_creating(root, parent).map_err(fs("open parent"))?;
        let n = cstring(target, &shown)?;
        remove_existing(p.as_fd(), &n, false).map_err(fs("remove existing"))?;
        mknod_at(p.as_fd(), &n, libc::S_IFCHR, 0).map_err(fs("create whiteout"))?;
        chown_at(p.as_fd(), &n, meta.uid, meta.gid).map_err(fs("chown whiteout"))?;
        return Ok(None);
    }

    let p = open_dir_creating(root, parent).map_err(fs("open parent"))?;
    let pfd = p.as_fd();
    let n = cstring(name, &shown)?;
    let kept_dir = remove_existing(pfd, &n, kind == Kind::Dir).map_err(fs("remove existing"))?;

    match kind {
        Kind::Dir => {
            if !kept_dir {
                mkdir_at(pfd, &n, 0o700).map_err(fs("mkdir"))?;
            }
        }
        Kind::File => {
            let fd = open_at(
                pfd,
                &n,
                OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::WRONLY | OFlags::CLOEXEC,
                0o600,
            )
            .map_err(fs("create file"))?;
            let mut file = File::from(fd);
            let want = entry.size();
            let got = io::copy(entry, &mut file).map_err(fs("write file"))?;
            if got != want {
                return Err(UnpackError::Truncated {
                    entry: shown,
                    got,
                    want,
                });
            }
        }
        Kind::Symlink => {
            let target = entry
                .link_name_bytes()
                .ok_or_else(|| bad("linkname", "missing".into()))?
                .into_owned();
            let target = cstring(&target, &shown)?;
            symlink_at(&target, pfd, &n).map_err(fs("create symlink"))?;
        }
        Kind::Hardlink => {
            let target = entry
                .link_name_bytes()
                .ok_or_else(|| bad("linkname", "missing".into()))?
                .into_owned();
            let tcomps = components(&target, &shown)?;
            let Some((tname, tparent)) = tcomps.split_last() else {
                return Err(bad("linkname", "hardlink to the layer root".into()));
            };
            let tp = open_dir_in_root(root, tparent).map_err(fs("open hardlink target parent"))?;
            let tn = cstring(tname, &shown)?;
            link_at(tp.as_fd(), &tn, pfd, &n).map_err(fs("create hardlink"))?;
            // A hardlink shares the target's inode and metadata.
            return Ok(None);
        }
        Kind::Char | Kind::Block | Kind::Fifo => {
            let (fmt, dev) = match kind {
                Kind::Fifo => (libc::S_IFIFO, 0),
                _ => {
                    let major = entry
                        .header()
                        .device_major()
                        .map_err(|e| bad("devmajor", e.to_string()))?
                        .unwrap_or(0);
                    let minor = entry
                        .header()
                        .device_minor()
                        .map_err(|e| bad("devminor", e.to_string()))?
                        .unwrap_or(0);
                    let fmt = if kind == Kind::Char {
                        libc::S_IFCHR
                    } else {
                        libc::S_IFBLK
                    };
                    (fmt, libc::makedev(major, minor))
                }
            };
            mknod_at(pfd, &n, fmt | 0o600, dev).map_err(fs("mknod"))?;
        }
    }

    // Ownership first (chown clears setuid/setgid and file capabilities), then mode, then
    // xattrs, then times.
    chown_at(pfd, &n, meta.uid, meta.gid).map_err(fs("chown"))?;
    if kind != Kind::Symlink {
        chmod_nofollow(pfd, &n, meta.mode).map_err(fs("chmod"))?;
    }
    for (k, v) in &meta.xattrs {
        lsetxattr_at(pfd, &n, k, v).map_err(fs("set xattr"))?;
    }
    if kind == Kind::Dir {
        return Ok(Some((comps, meta.mtime)));
    }
    utimens_at(pfd, &n, meta.mtime).map_err(fs("set mtime"))?;
    Ok(None)
}

fn read_meta<R: Read>(entry: &mut tar::Entry<'_, R>, shown: &str) -> Result<Meta, UnpackError> {
    let bad = |field: &'static str, detail: String| UnpackError::BadHeader {
        entry: shown.to_string(),
        field,
        detail,
    };
    let h = entry.header();
    let old = h.as_old();
    let mut uid = numeric(h.uid(), &old.uid).map_err(|e| bad("uid", e.to_string()))?;
    let mut gid = numeric(h.gid(), &old.gid).map_err(|e| bad("gid", e.to_string()))?;
    let mode = numeric(h.mode().map(u64::from), &old.mode)
        .map_err(|e| bad("mode", e.to_string()))? as u32
        & 0o7777;
    let mtime = numeric(h.mtime(), &old.mtime).map_err(|e| bad("mtime", e.to_string()))?;
    let mut mtime = (
        i64::try_from(mtime).map_err(|e| bad("mtime", e.to_string()))?,
        0i64,
    );
    let mut xattrs = Vec::new();
    if let Some(pax) = entry
        .pax_extensions()
        .map_err(|source| UnpackError::Tar { source })?
    {
        for ext in pax {
            let ext = ext.map_err(|source| UnpackError::Tar { source })?;
            let key = ext.key().map_err(|e| bad("pax key", e.to_string()))?;
            let value = ext.value_bytes();
            let text = || String::from_utf8_lossy(value).into_owned();
            match key {
                "uid" => uid = text().parse().map_err(|_| bad("pax uid", text()))?,
                "gid" => gid = text().parse().map_err(|_| bad("pax gid", text()))?,
                "mtime" => {
                    mtime = parse_pax_time(&text()).ok_or_else(|| bad("pax mtime", text()))?
                }
                k => {
                    if let Some(name) = k.strip_prefix("SCHILY.xattr.") {
                        if name.starts_with(OVERLAY_XATTR_PREFIX) {
                            log::warn!("layer entry {shown:?}: ignoring xattr {name}");
                            continue;
                        }
                        let cname = CString::new(name).map_err(|_| bad("xattr", name.into()))?;
                        xattrs.push((cname, value.to_vec()));
                    }
                }
            }
        }
    }
    Ok(Meta {
        uid: u32::try_from(uid).map_err(|_| bad("uid", uid.to_string()))?,
        gid: u32::try_from(gid).map_err(|_| bad("gid", gid.to_string()))?,
        mode,
        mtime,
        xattrs,
    })
}

/// A numeric header field; an empty field (only NULs and spaces, as some writers leave
/// uid/gid) counts as 0.
fn numeric(parsed: io::Result<u64>, raw: &[u8]) -> io::Result<u64> {
    match parsed {
        Err(_) if raw.iter().all(|b| *b == 0 || *b == b' ') => Ok(0),
        other => other,
    }
}

/// Parses a PAX time `secs[.frac]` into (seconds, nanoseconds).
fn parse_pax_time(s: &str) -> Option<(i64, i64)> {
    let (secs, frac) = s.split_once('.').unwrap_or((s, ""));
    let secs: i64 = secs.parse().ok()?;
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut digits: String = frac.chars().take(9).collect();
    while digits.len() < 9 {
        digits.push('0');
    }
    let nanos: i64 = digits.parse().ok()?;
    // A negative time means "secs" is rounded towards zero; keep it simple and exact enough.
    Some((secs, if secs < 0 { -nanos } else { nanos }))
}

/// Opens `comps` (a directory path below `root`) with openat2, resolving every symlink as if
/// `root` were `/`. An empty path yields a duplicate of the root fd.
fn open_dir_in_root(root: &OwnedFd, comps: &[Vec<u8>]) -> io::Result<OwnedFd> {
    if comps.is_empty() {
        return root.try_clone();
    }
    let path = comps.join(&b'/');
    at::openat2_in_root(
        root,
        Path::new(OsStr::from_bytes(&path)),
        OFlags::DIRECTORY | OFlags::RDONLY,
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
}

/// Like [`open_dir_in_root`], creating missing directories (mode 0755, like containerd).
fn open_dir_creating(root: &OwnedFd, comps: &[Vec<u8>]) -> io::Result<OwnedFd> {
    match open_dir_in_root(root, comps) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        other => return other,
    }
    let mut dir = root.try_clone()?;
    for i in 0..comps.len() {
        match open_dir_in_root(root, &comps[..=i]) {
            Ok(d) => dir = d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                let name = CString::new(comps[i].clone()).map_err(io::Error::other)?;
                match mkdir_at(dir.as_fd(), &name, 0o755) {
                    Ok(()) => {}
                    // Exists but does not resolve (e.g. a dangling symlink): give up below.
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Err(e),
                }
                dir = open_dir_in_root(root, &comps[..=i])?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(dir)
}

/// Removes whatever is at `dir/name` unless both it and the new entry are directories.
/// Returns true when an existing directory was kept.
fn remove_existing(dir: BorrowedFd<'_>, name: &CStr, new_is_dir: bool) -> io::Result<bool> {
    match at::lstat_at(dir, name)? {
        None => Ok(false),
        Some(FileType::Directory) if new_is_dir => Ok(true),
        Some(FileType::Directory) => {
            // std's remove_dir_all never follows symlinks below the top directory; the top is
            // reached through our own fd's /proc entry, the final component is a real
            // directory.
            let path = Path::new("/proc/self/fd")
                .join(dir.as_raw_fd().to_string())
                .join(OsStr::from_bytes(name.to_bytes()));
            std::fs::remove_dir_all(path)?;
            Ok(false)
        }
        Some(_) => {
            at::unlink_at(dir, name)?;
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests;
