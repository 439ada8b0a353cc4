//! mount_targets: the shared read-only layer `layers/mount-targets`, holding the three files
//! every container gets a bind mount on: `/etc/hosts`, `/etc/hostname` and `/etc/resolv.conf`.
//!
//! Without it, the container's init creates these files before mounting over them, as runc
//! does under containerd. It creates them in the container's writable layer: overlayfs copies
//! `/etc` up and makes three empty files, four new inodes on the state disk for every container
//! start, deleted again with the container. On flash that is wear, and on this machine class it
//! is a fifth of a monitor's CPU in a burst of starts (docs/history/start-timeline.md, round
//! eight).
//! Stacked as the topmost lower layer of an image that lacks the files, this layer makes them
//! exist below the writable layer. The bind mounts land on them, and the writable layer of an
//! image that has `/proc`, `/sys` and `/dev` stays empty until the workload writes.
//!
//! The layer is only stacked where the container cannot tell the difference:
//! - the image's merged `/etc` is a plain directory: root-owned, mode 0755, with no extended
//!   attributes but overlayfs's own. The layer's `/etc` is the same, and overlayfs shows the
//!   topmost layer's attributes for a merged directory;
//! - none of the three files exists in the image, in any form (a symlink, as some images have
//!   for `resolv.conf`, would be followed by the mount and must stay).
//!
//! Any other image gets no layer and behaves as before. The decision ([`fits`]) is a pure
//! function of what each layer holds at `/`, `etc` and `etc/<file>`, under overlayfs's rules:
//! the topmost entry wins, a whiteout or a non-directory hides everything below it, and an
//! opaque directory hides the directories below it.
//!
//! The layer is made on first use, under the store lock, and never garbage-collected: it is
//! three empty files, and a running container may have it as a lower layer. Each use checks
//! that it is still there and makes it again if not (`ImageStore::mount_targets_layer`).

use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::blobs::unique_tmp_name;
use super::layer::TMP_LAYER_PREFIX;
use super::unpack::OPAQUE_XATTR;

/// The layer's directory name under the layers directory (never a digest, so layer listing,
/// GC and `check` leave it alone).
pub const LAYER_NAME: &str = "mount-targets";

/// The files under `etc/` that every container has a mount on.
pub const TARGETS: [&str; 3] = ["hosts", "hostname", "resolv.conf"];

/// What one layer holds at one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    Absent,
    /// An overlayfs whiteout (a 0/0 character device).
    Whiteout,
    /// A directory. `plain`: owned by root:root, mode 0755, no xattrs but overlayfs's own.
    Dir {
        opaque: bool,
        plain: bool,
    },
    /// Anything else: a file, a symlink, a device.
    Other,
}

/// Reads what a layer holds at a path relative to its root (`""` is the root); a seam so
/// [`fits`] is table-tested without whiteouts on disk.
pub trait LayerEntries {
    fn entry(&self, layer: &Path, rel: &str) -> io::Result<Entry>;
}

/// Errors of making the layer.
#[derive(Debug, thiserror::Error)]
pub enum MountTargetsError {
    #[error("failed to {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{path} is owned by uid {uid}, not root: the layer is made by the daemon as root")]
    NotRoot { path: PathBuf, uid: u32 },
}

/// Whether the layer fits an image whose unpacked layers are `layers_top_first`.
pub fn fits(fs: &impl LayerEntries, layers_top_first: &[PathBuf]) -> io::Result<bool> {
    let Some(etc_layers) = merged_etc(fs, layers_top_first)? else {
        return Ok(false);
    };
    for name in TARGETS {
        let rel = format!("etc/{name}");
        for layer in &etc_layers {
            match fs.entry(layer, &rel)? {
                Entry::Whiteout => break,
                Entry::Absent => {}
                Entry::Dir { .. } | Entry::Other => return Ok(false),
            }
        }
    }
    Ok(true)
}

/// The layers whose `etc` directories make up the merged `/etc`, topmost first, when that is a
/// plain directory (the topmost one decides its attributes); `None` otherwise. The merge stops
/// below a whiteout or non-directory `etc`, and at an opaque `etc` or layer root.
fn merged_etc<'a>(
    fs: &impl LayerEntries,
    layers_top_first: &'a [PathBuf],
) -> io::Result<Option<Vec<&'a PathBuf>>> {
    let mut plain = None;
    let mut etc_layers = Vec::new();
    for layer in layers_top_first {
        match fs.entry(layer, "etc")? {
            Entry::Absent => {}
            Entry::Whiteout | Entry::Other => break,
            Entry::Dir { opaque, plain: p } => {
                plain.get_or_insert(p);
                etc_layers.push(layer);
                if opaque {
                    break;
                }
            }
        }
        if root_is_opaque(fs, layer)? {
            break;
        }
    }
    Ok((plain == Some(true)).then_some(etc_layers))
}

fn root_is_opaque(fs: &impl LayerEntries, layer: &Path) -> io::Result<bool> {
    Ok(matches!(
        fs.entry(layer, "")?,
        Entry::Dir { opaque: true, .. }
    ))
}

/// Layers as unpacked on disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct OnDisk;

impl LayerEntries for OnDisk {
    fn entry(&self, layer: &Path, rel: &str) -> io::Result<Entry> {
        let path = if rel.is_empty() {
            layer.to_path_buf()
        } else {
            layer.join(rel)
        };
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Entry::Absent),
            Err(e) => return Err(e),
        };
        let ft = meta.file_type();
        if ft.is_char_device() && meta.rdev() == 0 {
            return Ok(Entry::Whiteout);
        }
        if !ft.is_dir() {
            return Ok(Entry::Other);
        }
        let names = xattr_names(&path)?;
        let opaque = names
            .iter()
            .any(|n| n.as_bytes() == OPAQUE_XATTR.to_bytes())
            && xattr_value(&path, OPAQUE_XATTR)?.as_deref() == Some(b"y".as_slice());
        let plain = meta.uid() == 0
            && meta.gid() == 0
            && meta.mode() & 0o7777 == 0o755
            && names.iter().all(|n| n.starts_with("trusted.overlay."));
        Ok(Entry::Dir { opaque, plain })
    }
}

fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

/// The names of `path`'s extended attributes (not following a symlink).
fn xattr_names(path: &Path) -> io::Result<Vec<String>> {
    let p = c_path(path)?;
    let mut buf = vec![0u8; 1024];
    loop {
        // SAFETY: `p` is a NUL-terminated path and `buf` is writable for `buf.len()` bytes.
        let n = unsafe { libc::llistxattr(p.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            buf.truncate(n as usize);
            break;
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ERANGE) if buf.len() < 1 << 16 => buf.resize(buf.len() * 4, 0),
            // A file system without xattrs has none to show.
            Some(libc::ENOTSUP) => return Ok(Vec::new()),
            _ => return Err(e),
        }
    }
    Ok(buf
        .split(|b| *b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect())
}

/// The value of `path`'s extended attribute `name` (up to 256 bytes), `None` when unset.
fn xattr_value(path: &Path, name: &std::ffi::CStr) -> io::Result<Option<Vec<u8>>> {
    let p = c_path(path)?;
    let mut buf = [0u8; 256];
    // SAFETY: `p` and `name` are NUL-terminated and `buf` is writable for its length.
    let n = unsafe {
        libc::lgetxattr(
            p.as_ptr(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n >= 0 {
        return Ok(Some(buf[..n as usize].to_vec()));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENODATA) | Some(libc::ENOTSUP) => Ok(None),
        _ => Err(e),
    }
}

/// Whether `dir` is the layer as [`ensure`] makes it: a plain `etc` holding the three targets
/// as empty root-owned 0644 files, and nothing else.
fn is_complete(dir: &Path) -> bool {
    let etc = dir.join("etc");
    let Ok(Entry::Dir { plain: true, .. }) = OnDisk.entry(dir, "etc") else {
        return false;
    };
    let Ok(entries) = fs::read_dir(&etc) else {
        return false;
    };
    if entries.count() != TARGETS.len() {
        return false;
    }
    TARGETS.iter().all(|name| {
        fs::symlink_metadata(etc.join(name)).is_ok_and(|m| {
            m.file_type().is_file()
                && m.len() == 0
                && m.uid() == 0
                && m.gid() == 0
                && m.mode() & 0o7777 == 0o644
        })
    })
}

/// Makes `<layers_dir>/mount-targets` unless it is there and complete. It appears complete or
/// not at all (temp dir, fsync, rename); a damaged one is moved aside under a temp name, which
/// the store's next open removes. The caller holds the store lock.
pub fn ensure(layers_dir: &Path) -> Result<PathBuf, MountTargetsError> {
    let dest = layers_dir.join(LAYER_NAME);
    if is_complete(&dest) {
        return Ok(dest);
    }
    let io_err = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| MountTargetsError::Io { what, path, source }
    };
    if fs::symlink_metadata(&dest).is_ok() {
        let aside = unique_tmp_name(layers_dir, &format!("{TMP_LAYER_PREFIX}rm-{LAYER_NAME}-"));
        fs::rename(&dest, &aside).map_err(io_err("move aside", &dest))?;
    }
    let tmp = unique_tmp_name(layers_dir, &format!("{TMP_LAYER_PREFIX}{LAYER_NAME}-"));
    let result = (|| {
        let etc = tmp.join("etc");
        for dir in [&tmp, &etc] {
            fs::DirBuilder::new()
                .mode(0o755)
                .create(dir)
                .map_err(io_err("create", dir))?;
            // The umask must not narrow the mode the merged /etc shows.
            fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
                .map_err(io_err("chmod", dir))?;
        }
        let uid = fs::symlink_metadata(&etc)
            .map_err(io_err("stat", &etc))?
            .uid();
        if uid != 0 {
            return Err(MountTargetsError::NotRoot { path: etc, uid });
        }
        for name in TARGETS {
            let path = etc.join(name);
            let f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o644)
                .open(&path)
                .map_err(io_err("create", &path))?;
            f.set_permissions(fs::Permissions::from_mode(0o644))
                .map_err(io_err("chmod", &path))?;
        }
        for dir in [&etc, &tmp] {
            fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io_err("sync", dir))?;
        }
        fs::rename(&tmp, &dest).map_err(io_err("rename into place", &dest))?;
        fs::File::open(layers_dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err("sync", layers_dir))
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result.map(|()| dest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Layers as a table: (layer, path) -> entry; anything not listed is absent.
    #[derive(Default)]
    struct Table(HashMap<(String, String), Entry>);

    impl Table {
        fn with(mut self, layer: &str, rel: &str, e: Entry) -> Table {
            self.0.insert((layer.to_string(), rel.to_string()), e);
            self
        }
    }

    impl LayerEntries for Table {
        fn entry(&self, layer: &Path, rel: &str) -> io::Result<Entry> {
            let key = (layer.to_string_lossy().into_owned(), rel.to_string());
            Ok(self.0.get(&key).copied().unwrap_or(Entry::Absent))
        }
    }

    const PLAIN: Entry = Entry::Dir {
        opaque: false,
        plain: true,
    };
    const PLAIN_OPAQUE: Entry = Entry::Dir {
        opaque: true,
        plain: true,
    };
    const ODD: Entry = Entry::Dir {
        opaque: false,
        plain: false,
    };

    /// An image whose bottom layer has a plain /etc holding `hosts`.
    fn hosts_in_base() -> Table {
        Table::default()
            .with("base", "etc", PLAIN)
            .with("base", "etc/hosts", Entry::Other)
    }

    fn layers(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn fits_follows_overlayfs_lookup() {
        let top_first = layers(&["top", "mid", "base"]);
        let cases: Vec<(&str, Table, bool)> = vec![
            (
                "one plain /etc without the files",
                Table::default().with("base", "etc", PLAIN),
                true,
            ),
            ("no /etc at all", Table::default(), false),
            ("the image has /etc/hosts", hosts_in_base(), false),
            (
                "resolv.conf is a directory",
                Table::default()
                    .with("base", "etc", PLAIN)
                    .with("base", "etc/resolv.conf", ODD),
                false,
            ),
            (
                "a higher layer whites out the file",
                Table::default()
                    .with("base", "etc", PLAIN)
                    .with("base", "etc/hostname", Entry::Other)
                    .with("top", "etc", PLAIN)
                    .with("top", "etc/hostname", Entry::Whiteout),
                true,
            ),
            (
                "an opaque /etc above hides the file",
                hosts_in_base().with("mid", "etc", PLAIN_OPAQUE),
                true,
            ),
            (
                "an opaque root above hides the file",
                hosts_in_base()
                    .with("mid", "", PLAIN_OPAQUE)
                    .with("mid", "etc", PLAIN),
                true,
            ),
            (
                "a layer without /etc does not hide the file below",
                hosts_in_base().with("mid", "usr", PLAIN),
                false,
            ),
            (
                "the topmost /etc decides the attributes",
                Table::default()
                    .with("base", "etc", PLAIN)
                    .with("top", "etc", ODD),
                false,
            ),
            (
                "a plain /etc above an odd one",
                Table::default()
                    .with("base", "etc", ODD)
                    .with("mid", "etc", PLAIN),
                true,
            ),
            (
                "/etc is a symlink",
                Table::default().with("top", "etc", Entry::Other),
                false,
            ),
            (
                "/etc is whited out",
                Table::default()
                    .with("base", "etc", PLAIN)
                    .with("top", "etc", Entry::Whiteout),
                false,
            ),
            (
                "a file under a whited-out /etc is gone, and a new /etc above is plain",
                hosts_in_base()
                    .with("mid", "etc", Entry::Whiteout)
                    .with("top", "etc", PLAIN),
                true,
            ),
            (
                "the file is a symlink in a middle layer",
                Table::default()
                    .with("base", "etc", PLAIN)
                    .with("mid", "etc", PLAIN)
                    .with("mid", "etc/resolv.conf", Entry::Other),
                false,
            ),
        ];
        for (name, table, want) in cases {
            assert_eq!(fits(&table, &top_first).expect(name), want, "{name}");
        }
    }

    #[test]
    fn no_layers_do_not_fit() {
        assert!(!fits(&Table::default(), &[]).expect("fits"));
    }

    fn is_root() -> bool {
        nix::unistd::Uid::effective().is_root()
    }

    #[test]
    fn on_disk_entries_and_ensure() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layer = dir.path().join("l");
        fs::create_dir_all(layer.join("etc")).expect("mkdir");
        fs::set_permissions(layer.join("etc"), fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::write(layer.join("etc/passwd"), "root:x:0:0::/:/bin/sh\n").expect("write");
        std::os::unix::fs::symlink("../run/resolv.conf", layer.join("etc/resolv.conf"))
            .expect("symlink");
        assert_eq!(
            OnDisk.entry(&layer, "etc/hosts").expect("entry"),
            Entry::Absent
        );
        assert_eq!(
            OnDisk.entry(&layer, "etc/resolv.conf").expect("entry"),
            Entry::Other
        );
        let etc = OnDisk.entry(&layer, "etc").expect("entry");
        assert_eq!(
            etc,
            Entry::Dir {
                opaque: false,
                plain: is_root()
            }
        );
        // The symlinked resolv.conf must stay visible: no layer for this image.
        assert!(!fits(&OnDisk, std::slice::from_ref(&layer)).expect("fits"));
        fs::remove_file(layer.join("etc/resolv.conf")).expect("rm");
        assert_eq!(
            fits(&OnDisk, std::slice::from_ref(&layer)).expect("fits"),
            is_root()
        );

        let layers_dir = dir.path().join("layers");
        fs::create_dir_all(&layers_dir).expect("mkdir");
        if !is_root() {
            let err = ensure(&layers_dir).expect_err("not root");
            assert!(matches!(err, MountTargetsError::NotRoot { .. }), "{err}");
            return;
        }
        let made = ensure(&layers_dir).expect("ensure");
        assert_eq!(made, layers_dir.join(LAYER_NAME));
        assert!(is_complete(&made));
        // Its /etc is plain and it holds the three files: an image stacked with it has them.
        assert!(!fits(&OnDisk, &[made.clone(), layer.clone()]).expect("fits"));
        assert_eq!(
            OnDisk.entry(&made, "etc").expect("entry"),
            Entry::Dir {
                opaque: false,
                plain: true
            }
        );
        // A damaged layer is moved aside and made again.
        fs::write(made.join("etc/hosts"), "10.0.0.1 x\n").expect("write");
        assert!(!is_complete(&made));
        ensure(&layers_dir).expect("ensure again");
        assert!(is_complete(&made));
        let names: Vec<String> = fs::read_dir(&layers_dir)
            .expect("ls")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(
            names.iter().any(|n| n.starts_with(TMP_LAYER_PREFIX)),
            "the damaged copy is left for the next open to remove: {names:?}"
        );
    }
}
