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
