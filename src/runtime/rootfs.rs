//! rootfs: a container's root filesystem, an overlayfs of the image's unpacked layers (shared,
//! read-only) plus a per-container upper and work directory; and the container's pinned
//! `subPath` sources (`<container-dir>/subpaths/<n>`, see [`pin_sub_path`]), unmounted with
//! the rootfs.
//!
//! Layer directories are passed to overlayfs as paths RELATIVE to the layers directory (the
//! caller's working directory is switched there for the mount syscall), because the mount
//! option string is limited to one page and absolute paths would cap the layer count.
//! Only the single-threaded monitor process mounts; the working-directory switch is therefore
//! safe.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use nix::mount::{mount, umount2, MntFlags, MsFlags};

/// Errors of rootfs handling.
#[derive(Debug, thiserror::Error)]
pub enum RootfsError {
    #[error("failed to create {path}: {source}")]
    Create { path: PathBuf, source: io::Error },
    #[error("overlay mount option string for {target} is {len} bytes, over the {max}-byte limit ({layers} layers)")]
    OptionsTooLong {
        target: PathBuf,
        len: usize,
        max: usize,
        layers: usize,
    },
    #[error("failed to mount overlay on {target}: {source}")]
    Mount { target: PathBuf, source: nix::Error },
    #[error("failed to unmount {target}: {source}")]
    Unmount { target: PathBuf, source: nix::Error },
    #[error("failed to enter layers directory {path}: {source}")]
    Chdir { path: PathBuf, source: io::Error },
    #[error("idmapped mount of {source_path} on {target} (hostUsers: false): {source}")]
    IdMap {
        source_path: PathBuf,
        target: PathBuf,
        source: io::Error,
    },
}

/// Paths of a container's writable layer.
#[derive(Debug, Clone)]
pub struct RootfsPaths {
    pub rootfs: PathBuf,
    pub upper: PathBuf,
    pub work: PathBuf,
    /// An empty lower layer for images without layers.
    pub empty: PathBuf,
    /// Mount points of the container's pinned subPath sources.
    pub sub_paths: PathBuf,
    /// `hostUsers: false`: idmapped clones of the layers directory (`layers`) and of every
    /// bind mount's source (`<n>`), which the overlay and the container use instead.
    pub idmapped: PathBuf,
}

/// The user namespace a `hostUsers: false` container's rootfs and volumes are seen through.
#[derive(Debug, Clone, Copy)]
pub struct IdMap<'a> {
    pub userns: BorrowedFd<'a>,
    /// The host ID of the namespace's root (its writable layer's owner).
    pub base: u32,
}

impl RootfsPaths {
    pub fn in_dir(container_dir: &Path) -> RootfsPaths {
        RootfsPaths {
            rootfs: container_dir.join("rootfs"),
            upper: container_dir.join("upper"),
            work: container_dir.join("work"),
            empty: container_dir.join("empty"),
            sub_paths: container_dir.join("subpaths"),
            idmapped: container_dir.join("idmapped"),
        }
    }
}

const MAX_OPTIONS: usize = 4095;

/// Builds the overlay option string. `lower_top_first` are layer directory names relative to
/// the layers directory, topmost layer first.
pub fn overlay_options(
    lower_top_first: &[String],
    upper: &Path,
    work: &Path,
    volatile: bool,
) -> String {
    format!(
        "lowerdir={},upperdir={},workdir={}{}",
        lower_top_first.join(":"),
        upper.display(),
        work.display(),
        if volatile { ",volatile" } else { "" }
    )
}

const MOUNT_TARGETS_LAYER: &str = crate::images::mount_targets::LAYER_NAME;

/// The overlay option string for `lowers`; the shared mount-targets layer on top is an
/// optimisation, so an image at the page-size limit goes without it (its init then creates
/// the mount points in the writable layer). `Err(len)`: too long even so.
fn options_within_limit(
    lowers: &[String],
    upper: &Path,
    work: &Path,
    volatile: bool,
) -> Result<String, usize> {
    let opts = overlay_options(lowers, upper, work, volatile);
    if opts.len() <= MAX_OPTIONS {
        return Ok(opts);
    }
    match lowers.split_first() {
        Some((first, rest)) if first == MOUNT_TARGETS_LAYER && !rest.is_empty() => {
            let opts = overlay_options(rest, upper, work, volatile);
            if opts.len() <= MAX_OPTIONS {
                Ok(opts)
            } else {
                Err(opts.len())
            }
        }
        _ => Err(opts.len()),
    }
}

/// Mounts the overlay rootfs. Must only be called from a single-threaded process (it changes
/// the working directory for the duration of the mount call).
///
/// With `idmap` (`hostUsers: false`, containerd 2's idmapped lower layers) the layers are
/// seen through one idmapped clone of their directory (`idmapped/layers`), so the image's
/// root-owned files belong to the namespace's root, and the writable layer is owned by it.
pub fn mount_rootfs(
    paths: &RootfsPaths,
    layers_dir: &Path,
    lower_top_first: &[String],
    idmap: Option<IdMap<'_>>,
) -> Result<(), RootfsError> {
    for dir in [&paths.rootfs, &paths.upper, &paths.work] {
        fs::create_dir_all(dir).map_err(|source| RootfsError::Create {
            path: dir.clone(),
            source,
        })?;
    }
    let (base, lowers) = if lower_top_first.is_empty() {
        fs::create_dir_all(&paths.empty).map_err(|source| RootfsError::Create {
            path: paths.empty.clone(),
            source,
        })?;
        (paths.empty.clone(), vec![".".to_string()])
    } else {
        (layers_dir.to_path_buf(), lower_top_first.to_vec())
    };
    let base = match idmap {
        None => base,
        Some(m) => {
            let target = paths.idmapped.join("layers");
            create_traversable(&target)?;
            if !is_mounted(&target) {
                crate::sys::idmap::mount_idmapped(&base, m.userns, &target).map_err(|source| {
                    RootfsError::IdMap {
                        source_path: base.clone(),
                        target: target.clone(),
                        source,
                    }
                })?;
            }
            for dir in [&paths.upper, &paths.work] {
                let id = Some(nix::unistd::Uid::from_raw(m.base));
                nix::unistd::chown(dir, id, Some(nix::unistd::Gid::from_raw(m.base))).map_err(
                    |e| RootfsError::Create {
                        path: dir.clone(),
                        source: io::Error::from(e),
                    },
                )?;
            }
            target
        }
    };
    // `volatile` (Linux 5.10): the writable layer is never synced, not when the container
    // calls fsync and not at unmount, where overlayfs would otherwise sync the whole
    // filesystem under it (measured here: 9-670 ms per unmount on a busy disk, 2-38 ms with
    // the option). A writable layer never outlives a reboot in podvisor (a container of an
    // earlier boot is finished and its layer removed, never mounted again), so there is
    // nothing to keep: containerd's snapshots and the kubelet give a container's own
    // writes no durability either, only volumes do.
    let volatile = crate::sys::kernel::supports_volatile_overlay();
    let opts =
        options_within_limit(&lowers, &paths.upper, &paths.work, volatile).map_err(|len| {
            RootfsError::OptionsTooLong {
                target: paths.rootfs.clone(),
                len,
                max: MAX_OPTIONS,
                layers: lower_top_first
                    .iter()
                    .filter(|l| l.as_str() != MOUNT_TARGETS_LAYER)
                    .count(),
            }
        })?;
    let previous = std::env::current_dir().ok();
    std::env::set_current_dir(&base).map_err(|source| RootfsError::Chdir {
        path: base.clone(),
        source,
    })?;
    let result = mount(
        Some("overlay"),
        &paths.rootfs,
        Some("overlay"),
        MsFlags::empty(),
        Some(opts.as_str()),
    );
    let _ = std::env::set_current_dir(previous.unwrap_or_else(|| PathBuf::from("/")));
    result.map_err(|source| RootfsError::Mount {
        target: paths.rootfs.clone(),
        source,
    })
}

/// Replaces the source of every bind mount in `mounts` by an idmapped clone of it on
/// `<dir>/<n>` (`hostUsers: false`: the kubelet and containerd 2 mount every volume idmapped,
/// so the pod's IDs meet the files' IDs as they are on disk).
pub fn idmap_bind_sources(
    dir: &Path,
    mounts: &mut [oci_spec::runtime::Mount],
    idmap: IdMap<'_>,
) -> Result<(), RootfsError> {
    create_traversable(dir)?;
    for (n, m) in mounts.iter_mut().enumerate() {
        let is_bind = m.typ().as_deref() == Some("bind")
            || m.options()
                .as_ref()
                .is_some_and(|o| o.iter().any(|o| o == "bind" || o == "rbind"));
        let Some(source) = m.source().clone().filter(|s| is_bind && s.is_absolute()) else {
            continue;
        };
        let target = dir.join(n.to_string());
        let create = |is_dir: bool| {
            let made = if is_dir {
                fs::DirBuilder::new().mode(0o711).create(&target)
            } else {
                fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o600)
                    .open(&target)
                    .map(drop)
            };
            match made {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
                other => other,
            }
        };
        let idmap_err = |source| RootfsError::IdMap {
            source_path: source_path_of(m),
            target: target.clone(),
            source,
        };
        let is_dir = fs::metadata(&source).map_err(idmap_err)?.is_dir();
        create(is_dir).map_err(idmap_err)?;
        if !is_mounted(&target) {
            crate::sys::idmap::mount_idmapped(&source, idmap.userns, &target).map_err(idmap_err)?;
        }
        m.set_source(Some(target.clone()));
    }
    Ok(())
}

/// Creates `dir` and its missing parents 0711: the pod's root passes through, never lists.
fn create_traversable(dir: &Path) -> Result<(), RootfsError> {
    fs::DirBuilder::new()
        .mode(0o711)
        .recursive(true)
        .create(dir)
        .map_err(|source| RootfsError::Create {
            path: dir.to_path_buf(),
            source,
        })
}

fn source_path_of(m: &oci_spec::runtime::Mount) -> PathBuf {
    m.source().clone().unwrap_or_default()
}

/// True if `path` is a mount point: statx's mount-root attribute where the kernel has it
/// (see `sys::mountpoint`), else /proc/self/mountinfo.
pub fn is_mounted(path: &Path) -> bool {
    if let Some(root) = crate::sys::mountpoint::is_mount_root(path) {
        return root;
    }
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let wanted = path.to_string_lossy();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| unescape_mountinfo(mp) == wanted)
}

/// mountinfo escapes space, tab, newline and backslash as octal.
pub fn unescape_mountinfo(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 4 <= bytes.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(v as char);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i] as char);
        i += 1;
    }
    out
}

/// Bind-mounts the file or directory open as `target` (an `O_PATH` descriptor from a
/// resolution that stayed below its volume) on `<dir>/<index>`, through `/proc/self/fd`: the
/// kubelet's way of pinning a subPath. Whatever happens to the path afterwards (a container
/// swapping a directory for a symlink), the container mounts what was checked.
pub fn pin_sub_path(dir: &Path, index: usize, target: &OwnedFd) -> io::Result<PathBuf> {
    fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(dir)?;
    let pin = dir.join(index.to_string());
    let is_dir = nix::sys::stat::fstat(target.as_raw_fd())
        .map(|st| st.st_mode & libc::S_IFMT == libc::S_IFDIR)
        .map_err(io::Error::from)?;
    if is_dir {
        fs::DirBuilder::new().mode(0o700).create(&pin)?;
    } else {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&pin)?;
    }
    let source = PathBuf::from(format!("/proc/self/fd/{}", target.as_raw_fd()));
    mount(
        Some(&source),
        &pin,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REC,
        None::<&str>,
    )
    .map_err(io::Error::from)?;
    Ok(pin)
}

/// Unmounts and removes the pinned subPath sources in `dir` (lazily when busy). Fails, leaving
/// them, when one cannot be unmounted: removing it would delete the volume's content.
pub fn unpin_sub_paths(dir: &Path) -> Result<(), RootfsError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(RootfsError::Create {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    for e in entries.flatten() {
        let pin = e.path();
        unmount_if_mounted(&pin)?;
        // Not recursive: an empty directory or file once unmounted.
        let _ = fs::remove_dir(&pin).or_else(|_| fs::remove_file(&pin));
    }
    let _ = fs::remove_dir(dir);
    Ok(())
}

/// Unmounts the rootfs if mounted (lazily if busy) and the pinned subPaths, and removes the
/// writable layer.
pub fn remove_rootfs(paths: &RootfsPaths) -> Result<(), RootfsError> {
    unpin_sub_paths(&paths.sub_paths)?;
    unmount_if_mounted(&paths.rootfs)?;
    // After the overlay, which uses the idmapped layers.
    unpin_sub_paths(&paths.idmapped)?;
    for dir in [&paths.upper, &paths.work, &paths.empty] {
        remove_dir_all_quiet(dir);
    }
    // rootfs is an empty mount point once unmounted; never recurse into it in case a mount
    // survived.
    let _ = fs::remove_dir(&paths.rootfs);
    Ok(())
}

/// Unmounts `target` if it is a mount point; falls back to a lazy unmount when busy.
pub fn unmount_if_mounted(target: &Path) -> Result<(), RootfsError> {
    while is_mounted(target) {
        match umount2(target, MntFlags::empty()) {
            Ok(()) => {}
            Err(nix::Error::EBUSY) => {
                umount2(target, MntFlags::MNT_DETACH).map_err(|source| RootfsError::Unmount {
                    target: target.to_path_buf(),
                    source,
                })?
            }
            Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => break,
            Err(source) => {
                return Err(RootfsError::Unmount {
                    target: target.to_path_buf(),
                    source,
                })
            }
        }
    }
    Ok(())
}

fn remove_dir_all_quiet(dir: &Path) {
    if let Err(e) = fs::remove_dir_all(dir) {
        if e.kind() != io::ErrorKind::NotFound {
            log::warn!("failed to remove {}: {e}", dir.display());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_list_layers_top_first_relative() {
        let o = overlay_options(
            &["b".into(), "a".into()],
            Path::new("/c/upper"),
            Path::new("/c/work"),
            false,
        );
        assert_eq!(o, "lowerdir=b:a,upperdir=/c/upper,workdir=/c/work");
        let o = overlay_options(&["a".into()], Path::new("/u"), Path::new("/w"), true);
        assert_eq!(o, "lowerdir=a,upperdir=/u,workdir=/w,volatile");
    }

    #[test]
    fn the_mount_targets_layer_gives_way_at_the_limit() {
        let w = Path::new("/c/work");
        let hex = |i: usize| format!("{i:064x}");
        let with = |n: usize| {
            let mut l = vec![MOUNT_TARGETS_LAYER.to_string()];
            l.extend((0..n).map(hex));
            l
        };
        // Room for all: kept on top.
        let u = Path::new("/c/upper");
        let o = options_within_limit(&with(3), u, w, true).expect("fits");
        assert!(o.starts_with("lowerdir=mount-targets:"), "{o}");
        // An image whose own option string is exactly at the limit (the upper path padded to
        // it): it fits only without the layer.
        let n = (1..200)
            .take_while(|&n| overlay_options(&with(n)[1..], u, w, true).len() <= MAX_OPTIONS)
            .last()
            .expect("some image fits");
        let pad = MAX_OPTIONS - overlay_options(&with(n)[1..], u, w, true).len();
        let u = PathBuf::from(format!("/c/upper{}", "x".repeat(pad)));
        let o = options_within_limit(&with(n), &u, w, true).expect("fits without the layer");
        assert_eq!(o.len(), MAX_OPTIONS);
        assert!(o.starts_with(&format!("lowerdir={}", hex(0))), "{o}");
        // One layer more is too long either way, and the length said is the image's own.
        let too_long = options_within_limit(&with(n + 1), &u, w, true).expect_err("too long");
        assert_eq!(
            too_long,
            overlay_options(&with(n + 1)[1..], &u, w, true).len()
        );
        // An image's own layers are never dropped.
        let plain: Vec<String> = (0..n + 1).map(hex).collect();
        assert!(options_within_limit(&plain, &u, w, true).is_err());
    }

    #[test]
    fn mountinfo_unescape() {
        assert_eq!(unescape_mountinfo("/a\\040b"), "/a b");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }
}
