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
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    use std::path::PathBuf;

    /// Builds layer tars with raw (unvalidated) names.
    struct Tb {
        b: tar::Builder<Vec<u8>>,
    }

    fn header(kind: tar::EntryType, name: &str, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        let raw = name.as_bytes();
        assert!(raw.len() < 100, "test names must fit the header");
        h.as_old_mut().name[..raw.len()].copy_from_slice(raw);
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(1_600_000_000);
        h.set_uid(0);
        h.set_gid(0);
        h
    }

    impl Tb {
        fn new() -> Tb {
            Tb {
                b: tar::Builder::new(Vec::new()),
            }
        }
        fn push(&mut self, mut h: tar::Header, data: &[u8]) -> &mut Self {
            h.set_cksum();
            self.b.append(&h, data).expect("append");
            self
        }
        fn file(&mut self, name: &str, data: &[u8]) -> &mut Self {
            let h = header(tar::EntryType::Regular, name, 0o644, data.len() as u64);
            self.push(h, data)
        }
        fn dir(&mut self, name: &str) -> &mut Self {
            let h = header(tar::EntryType::Directory, name, 0o755, 0);
            self.push(h, b"")
        }
        fn link(&mut self, kind: tar::EntryType, name: &str, target: &str) -> &mut Self {
            let mut h = header(kind, name, 0o777, 0);
            h.set_link_name_literal(target).expect("link name");
            self.push(h, b"")
        }
        fn symlink(&mut self, name: &str, target: &str) -> &mut Self {
            self.link(tar::EntryType::Symlink, name, target)
        }
        fn hardlink(&mut self, name: &str, target: &str) -> &mut Self {
            self.link(tar::EntryType::Link, name, target)
        }
        fn pax(&mut self, kv: &[(&str, &[u8])]) -> &mut Self {
            self.b
                .append_pax_extensions(kv.iter().copied())
                .expect("pax");
            self
        }
        fn bytes(&mut self) -> Vec<u8> {
            self.b.finish().expect("finish");
            self.b.get_ref().clone()
        }
    }

    /// A layer dir and a sentinel dir next to it holding `keep` = "orig".
    struct Fixture {
        t: tempfile::TempDir,
    }

    impl Fixture {
        fn new() -> Fixture {
            let t = tempfile::tempdir().expect("tempdir");
            fs::create_dir(t.path().join("layer")).expect("layer");
            fs::create_dir(t.path().join("sentinel")).expect("sentinel");
            fs::write(t.path().join("sentinel/keep"), b"orig").expect("keep");
            fs::set_permissions(
                t.path().join("sentinel/keep"),
                fs::Permissions::from_mode(0o640),
            )
            .expect("chmod");
            Fixture { t }
        }
        fn layer(&self) -> PathBuf {
            self.t.path().join("layer")
        }
        fn sentinel(&self) -> PathBuf {
            self.t.path().join("sentinel")
        }
        /// The sentinel's absolute path without the leading '/'.
        fn sentinel_abs(&self) -> String {
            self.sentinel().to_string_lossy().into_owned()
        }
        fn run(&self, tar: &[u8]) -> Result<(), UnpackError> {
            unpack(tar, &self.layer()).map(|_| ())
        }
        fn assert_sentinel_untouched(&self) {
            let mut names: Vec<_> = fs::read_dir(self.sentinel())
                .expect("read sentinel")
                .map(|e| e.expect("entry").file_name())
                .collect();
            names.sort();
            assert_eq!(names, vec![std::ffi::OsString::from("keep")]);
            let keep = self.sentinel().join("keep");
            assert_eq!(fs::read(&keep).expect("keep"), b"orig");
            let m = fs::symlink_metadata(&keep).expect("meta");
            assert_eq!(m.nlink(), 1, "no hardlink to the sentinel");
            assert_eq!(m.mode() & 0o7777, 0o640, "sentinel mode untouched");
            assert_eq!((m.uid(), m.gid()), (0, 0), "sentinel owner untouched");
            let mut top: Vec<_> = fs::read_dir(self.t.path())
                .expect("read top")
                .map(|e| e.expect("entry").file_name())
                .collect();
            top.sort();
            assert_eq!(top, vec!["layer", "sentinel"]);
            let mut xattr = [0u8; 8];
            let p = CString::new(self.sentinel().to_string_lossy().as_bytes()).expect("c");
            // SAFETY: valid C strings and buffer.
            let n = unsafe {
                libc::lgetxattr(
                    p.as_ptr(),
                    OPAQUE_XATTR.as_ptr(),
                    xattr.as_mut_ptr().cast(),
                    8,
                )
            };
            assert!(n < 0, "sentinel must not become opaque");
        }
    }

    fn xattr(path: &Path, key: &str) -> Option<Vec<u8>> {
        let p = CString::new(path.to_string_lossy().as_bytes()).expect("c");
        let k = CString::new(key).expect("c");
        let mut buf = [0u8; 256];
        // SAFETY: valid C strings and buffer.
        let n = unsafe { libc::lgetxattr(p.as_ptr(), k.as_ptr(), buf.as_mut_ptr().cast(), 256) };
        (n >= 0).then(|| buf[..n as usize].to_vec())
    }

    #[test]
    fn hostile_dotdot_entry_rejected() {
        let f = Fixture::new();
        for name in ["../sentinel/pwned", "a/../../sentinel/pwned", "./.."] {
            let tar = Tb::new().file(name, b"x").bytes();
            let err = f.run(&tar).expect_err(name);
            assert!(matches!(err, UnpackError::DotDot { .. }), "{err}");
            assert!(err.to_string().contains(name), "{err} names {name}");
        }
        f.assert_sentinel_untouched();
    }

    #[test]
    fn hostile_absolute_path_stays_inside() {
        let f = Fixture::new();
        let name = format!("{}/pwned", f.sentinel_abs());
        let tar = Tb::new().file(&name, b"x").bytes();
        f.run(&tar).expect("absolute names are archive-relative");
        let inside = f.layer().join(name.trim_start_matches('/'));
        assert_eq!(fs::read(inside).expect("inside"), b"x");
        f.assert_sentinel_untouched();
    }

    #[test]
    fn hostile_symlink_escape_then_write_through_it() {
        let f = Fixture::new();
        let tar = Tb::new()
            .symlink("evil", "../sentinel")
            .file("evil/pwned", b"x")
            .bytes();
        let _ = f.run(&tar);
        let tar = Tb::new()
            .symlink("deep", "../../../../../../../../sentinel")
            .file("deep/pwned", b"x")
            .bytes();
        let _ = f.run(&tar);
        f.assert_sentinel_untouched();
        // The link itself is kept verbatim.
        assert_eq!(
            fs::read_link(f.layer().join("evil")).expect("link"),
            Path::new("../sentinel")
        );
    }

    #[test]
    fn hostile_absolute_symlink_then_write_through_it() {
        let f = Fixture::new();
        let target = f.sentinel_abs();
        let tar = Tb::new()
            .symlink("evil", &target)
            .file("evil/pwned", b"x")
            .file("evil/keep", b"overwritten")
            .bytes();
        let _ = f.run(&tar);
        f.assert_sentinel_untouched();
    }

    #[test]
    fn hostile_file_over_symlink_replaces_the_link() {
        let f = Fixture::new();
        let keep = format!("{}/keep", f.sentinel_abs());
        let tar = Tb::new()
            .symlink("evil", &keep)
            .file("evil", b"new")
            .symlink("evil2", "../sentinel")
            .dir("evil2")
            .bytes();
        f.run(&tar).expect("unpack");
        assert_eq!(fs::read(f.layer().join("evil")).expect("file"), b"new");
        assert!(fs::symlink_metadata(f.layer().join("evil2"))
            .expect("dir")
            .is_dir());
        f.assert_sentinel_untouched();
    }

    #[test]
    fn hostile_hardlink_to_outside_file() {
        let f = Fixture::new();
        let tar = Tb::new().hardlink("h", "../sentinel/keep").bytes();
        let err = f.run(&tar).expect_err("dotdot target");
        assert!(matches!(err, UnpackError::DotDot { .. }), "{err}");
        let abs = format!("{}/keep", f.sentinel_abs());
        let tar = Tb::new().hardlink("h2", &abs).bytes();
        f.run(&tar)
            .expect_err("absolute target resolves inside the layer and is missing");
        f.assert_sentinel_untouched();
    }

    #[test]
    fn hostile_hardlink_through_symlink_dir() {
        let f = Fixture::new();
        let tar = Tb::new()
            .symlink("d", &f.sentinel_abs())
            .hardlink("h", "d/keep")
            .bytes();
        f.run(&tar).expect_err("target resolves inside the layer");
        let tar = Tb::new()
            .symlink("up", "../../../..")
            .hardlink("h3", &format!("up{}/keep", f.sentinel_abs()))
            .bytes();
        f.run(&tar).expect_err("target resolves inside the layer");
        // A hardlink to a symlink links the symlink itself, never its target.
        let tar = Tb::new()
            .symlink("s", &format!("{}/keep", f.sentinel_abs()))
            .hardlink("h4", "s")
            .bytes();
        f.run(&tar).expect("link to symlink");
        assert!(fs::symlink_metadata(f.layer().join("h4"))
            .expect("h4")
            .file_type()
            .is_symlink());
        f.assert_sentinel_untouched();
    }

    #[test]
    fn hostile_symlink_parent_dir_chain() {
        let f = Fixture::new();
        let tar = Tb::new()
            .symlink("a", "b")
            .symlink("b", "c/x")
            .dir("c")
            .symlink("c/x", "../../sentinel")
            .file("a/pwned", b"x")
            .symlink("up", "..")
            .dir("sentinel")
            .file("up/up/up/sentinel/ok", b"inside")
            .bytes();
        let _ = f.run(&tar);
        f.assert_sentinel_untouched();
        // `up` resolves to the layer root, so the file lands inside the layer.
        if let Ok(data) = fs::read(f.layer().join("sentinel/ok")) {
            assert_eq!(data, b"inside");
        }
    }

    #[test]
    fn hostile_whiteouts_through_symlinks() {
        let f = Fixture::new();
        let tar = Tb::new()
            .symlink("s", "../sentinel")
            .file("s/.wh.keep", b"")
            .bytes();
        let _ = f.run(&tar);
        let tar = Tb::new()
            .symlink("t", &f.sentinel_abs())
            .file("t/.wh..wh..opq", b"")
            .bytes();
        let _ = f.run(&tar);
        f.assert_sentinel_untouched();
    }

    #[test]
    fn whiteouts_and_opaque_dirs() {
        let f = Fixture::new();
        let tar = Tb::new()
            .dir("d")
            .file("d/.wh.gone", b"")
            .file("d/.wh..wh..opq", b"")
            .file("e/.wh..wh..opq", b"")
            .file(".wh.top", b"")
            .bytes();
        f.run(&tar).expect("unpack");
        for p in ["d/gone", "top"] {
            let m = fs::symlink_metadata(f.layer().join(p)).expect(p);
            assert!(m.file_type().is_char_device(), "{p}");
            assert_eq!(m.rdev(), 0, "{p}");
        }
        assert_eq!(
            xattr(&f.layer().join("d"), "trusted.overlay.opaque"),
            Some(b"y".to_vec())
        );
        assert_eq!(
            xattr(&f.layer().join("e"), "trusted.overlay.opaque"),
            Some(b"y".to_vec())
        );
        assert!(!f.layer().join("d/.wh..wh..opq").exists());
    }

    #[test]
    fn hardlinks_share_the_inode() {
        let f = Fixture::new();
        let tar = Tb::new()
            .dir("bin")
            .file("bin/busybox", b"elf")
            .hardlink("bin/sh", "bin/busybox")
            .hardlink("/bin/ls", "/bin/busybox")
            .bytes();
        f.run(&tar).expect("unpack");
        let a = fs::metadata(f.layer().join("bin/busybox")).expect("a");
        let b = fs::metadata(f.layer().join("bin/sh")).expect("b");
        assert_eq!(a.ino(), b.ino());
        assert_eq!(a.nlink(), 3);
    }

    #[test]
    fn device_nodes_and_fifos() {
        let f = Fixture::new();
        let mut c = header(tar::EntryType::Char, "dev/null", 0o666, 0);
        c.set_device_major(1).expect("major");
        c.set_device_minor(3).expect("minor");
        let mut b = header(tar::EntryType::Block, "dev/loop0", 0o660, 0);
        b.set_device_major(7).expect("major");
        b.set_device_minor(0).expect("minor");
        let p = header(tar::EntryType::Fifo, "run/fifo", 0o600, 0);
        let tar = Tb::new().push(c, b"").push(b, b"").push(p, b"").bytes();
        f.run(&tar).expect("unpack");
        let m = fs::symlink_metadata(f.layer().join("dev/null")).expect("null");
        assert!(m.file_type().is_char_device());
        assert_eq!(m.rdev(), libc::makedev(1, 3));
        assert_eq!(m.mode() & 0o7777, 0o666);
        let m = fs::symlink_metadata(f.layer().join("dev/loop0")).expect("loop");
        assert!(m.file_type().is_block_device());
        assert_eq!(m.rdev(), libc::makedev(7, 0));
        assert_eq!(m.mode() & 0o7777, 0o660);
        let m = fs::symlink_metadata(f.layer().join("run/fifo")).expect("fifo");
        assert!(m.file_type().is_fifo());
    }

    #[test]
    fn ownership_modes_xattrs_and_mtimes() {
        let f = Fixture::new();
        let mut d = header(tar::EntryType::Directory, "tmp/", 0o1777, 0);
        d.set_mtime(1_500_000_000);
        let mut s = header(tar::EntryType::Regular, "tmp/suid", 0o4755, 3);
        s.set_uid(1234);
        s.set_gid(5678);
        s.set_mtime(1_400_000_000);
        let mut g = header(tar::EntryType::Regular, "tmp/sgid", 0o2711, 0);
        g.set_uid(1);
        g.set_gid(2);
        let tar = Tb::new()
            .push(d, b"")
            .pax(&[
                ("SCHILY.xattr.user.test", b"value"),
                ("SCHILY.xattr.trusted.overlay.redirect", b"/etc"),
                ("mtime", b"1400000000.5"),
            ])
            .push(s, b"abc")
            .push(g, b"")
            .bytes();
        f.run(&tar).expect("unpack");
        let m = fs::metadata(f.layer().join("tmp/suid")).expect("suid");
        assert_eq!((m.uid(), m.gid()), (1234, 5678));
        assert_eq!(m.mode() & 0o7777, 0o4755, "setuid survives chown");
        assert_eq!((m.mtime(), m.mtime_nsec()), (1_400_000_000, 500_000_000));
        assert_eq!(
            xattr(&f.layer().join("tmp/suid"), "user.test"),
            Some(b"value".to_vec())
        );
        assert_eq!(
            xattr(&f.layer().join("tmp/suid"), "trusted.overlay.redirect"),
            None
        );
        let m = fs::metadata(f.layer().join("tmp/sgid")).expect("sgid");
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o7777), (1, 2, 0o2711));
        let m = fs::metadata(f.layer().join("tmp")).expect("dir");
        assert_eq!(m.permissions().mode() & 0o7777, 0o1777);
        assert_eq!(m.mtime(), 1_500_000_000, "dir mtime set after its entries");
    }

    #[test]
    fn symlinks_preserved_verbatim_with_owner() {
        let f = Fixture::new();
        let mut h = header(tar::EntryType::Symlink, "lib/ld.so", 0o777, 0);
        h.set_link_name_literal("../../x/../y//z").expect("link");
        h.set_uid(42);
        h.set_gid(43);
        let tar = Tb::new()
            .push(h, b"")
            .symlink("abs", "/usr/bin/env")
            .bytes();
        f.run(&tar).expect("unpack");
        assert_eq!(
            fs::read_link(f.layer().join("lib/ld.so")).expect("link"),
            Path::new("../../x/../y//z")
        );
        let m = fs::symlink_metadata(f.layer().join("lib/ld.so")).expect("meta");
        assert_eq!((m.uid(), m.gid()), (42, 43));
        assert_eq!(
            fs::read_link(f.layer().join("abs")).expect("abs"),
            Path::new("/usr/bin/env")
        );
    }

    #[test]
    fn later_entries_replace_earlier_ones() {
        let f = Fixture::new();
        let tar = Tb::new()
            .file("f", b"one")
            .file("f", b"two")
            .dir("d")
            .file("d/child", b"c")
            .dir("d")
            .dir("x")
            .file("x/y", b"")
            .file("x", b"now a file")
            .bytes();
        f.run(&tar).expect("unpack");
        assert_eq!(fs::read(f.layer().join("f")).expect("f"), b"two");
        assert_eq!(fs::read(f.layer().join("d/child")).expect("child"), b"c");
        assert_eq!(fs::read(f.layer().join("x")).expect("x"), b"now a file");
    }

    #[test]
    fn empty_numeric_fields_count_as_zero() {
        let f = Fixture::new();
        let mut h = header(tar::EntryType::Regular, "f", 0o600, 1);
        h.as_old_mut().uid = [0; 8];
        h.as_old_mut().gid = [b' '; 8];
        let tar = Tb::new().push(h, b"x").bytes();
        f.run(&tar).expect("unpack");
        let m = fs::metadata(f.layer().join("f")).expect("f");
        assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (0, 0, 0o600));
        let mut h = header(tar::EntryType::Regular, "g", 0o600, 1);
        h.as_old_mut().uid = *b"zz\0\0\0\0\0\0";
        let tar = Tb::new().push(h, b"x").bytes();
        let err = f.run(&tar).expect_err("garbage uid");
        assert!(err.to_string().contains("uid"), "{err}");
    }

    #[test]
    fn truncated_layer_is_an_error() {
        let f = Fixture::new();
        let tar = Tb::new().file("big", &[7u8; 4096]).bytes();
        let err = f.run(&tar[..1024]).expect_err("truncated");
        assert!(
            err.to_string().contains("big") || matches!(err, UnpackError::Tar { .. }),
            "{err}"
        );
    }
}
