//! volumes: a pod's volumes on the node, as the kubelet's volume plugins and containerd
//! prepare them (pkg/volume/hostpath, emptydir, downwardapi, projected; containerd's CRI
//! mounts), called by [`super::sandbox`] when it creates the pod's sandbox.
//!
//! - `hostPath`: the kubelet's type checks (`Directory`, `DirectoryOrCreate`, `File`,
//!   `FileOrCreate`, `Socket`, `CharDevice`, `BlockDevice`); `DirectoryOrCreate` makes the
//!   missing directories 0755, `FileOrCreate` makes the file 0644 but never its parents (the
//!   kubelet's `os.OpenFile(O_CREATE)`); an untyped path that does not exist is created as a
//!   directory (0755, with parents), as containerd does for every bind-mount source. These
//!   depend on the host at start time, so they are checked here (and retried with the
//!   sandbox), not by validation.
//! - `emptyDir`: `<root-dir>/pods/<uid>/volumes/<name>`, 0777; `medium: Memory` is a tmpfs
//!   (`size=` from `sizeLimit`), `medium: HugePages[-<size>]` a hugetlbfs.
//! - `downwardAPI` and `projected` (downwardAPI sources): files written with the kubelet's
//!   atomic writer ([`write_atomic`]): the payload goes to a fresh `..<timestamp>` directory,
//!   `..data` is switched to it by renaming a symlink, and the visible names are symlinks
//!   through `..data`, so a reader never sees half an update.
//! - `fsGroup` ([`apply_fs_group`]): the kubelet's `SetVolumeOwnership` for the volumes that
//!   support ownership (emptyDir, downwardAPI, projected; not hostPath).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod, PodSecurityContext, Volume};
use nix::mount::{mount, MsFlags};

use super::rootfs::is_mounted;
use super::spec::{self, NodeInfo};

/// Why a volume could not be prepared; `field` is the volume's manifest path
/// (`spec.volumes[2].hostPath`).
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("{field}: hostPath type check failed: {path} {problem}")]
    HostPathType {
        field: String,
        path: PathBuf,
        problem: String,
    },
    #[error("{field}: {what} {path}: {source}")]
    Io {
        field: String,
        what: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    #[error("{field}: mount {fstype} on {path}: {source}")]
    Mount {
        field: String,
        fstype: &'static str,
        path: PathBuf,
        source: nix::Error,
    },
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    #[error("{0}")]
    Spec(#[from] spec::SpecError),
}

/// What a prepared volume is, for the sandbox record and ownership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeKind {
    HostPath,
    EmptyDir,
    /// downwardAPI or projected: read-only content podvisor writes.
    Projected,
}

/// What preparing a volume will do, decided from the pod and the node alone: every refusal
/// of a volume is made here, before anything on the host is touched, so that the static-pod
/// loader refuses what [`prepare`] would ([`plan`] is the one function both call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumePlan {
    /// A host path, checked against its `type` when the sandbox is made (host state).
    HostPath {
        field: String,
        path: PathBuf,
        kind: String,
    },
    /// downwardAPI or projected files, written with the atomic writer.
    Projected {
        field: String,
        payload: BTreeMap<String, (Vec<u8>, u32)>,
    },
    /// An emptyDir: a directory, or a tmpfs / hugetlbfs (`fstype`) mounted with `options`.
    EmptyDir {
        field: String,
        fstype: &'static str,
        options: Option<String>,
    },
}

/// Plans volume `v` (`spec.volumes[index]`) of `pod`; pure.
pub fn plan(
    pod: &Pod,
    node: &NodeInfo,
    v: &Volume,
    index: usize,
) -> Result<VolumePlan, VolumeError> {
    let field = format!("spec.volumes[{index}]");
    if let Some(key) = unsupported_source(v) {
        return Err(VolumeError::Invalid {
            field: format!("{field}.{key}"),
            message: format!(
                "{key} volumes are not supported by podvisor (static pods cannot reference API objects; supported: hostPath, emptyDir, downwardAPI, projected)"
            ),
        });
    }
    if let Some(hp) = &v.host_path {
        let field = format!("{field}.hostPath");
        let p = PathBuf::from(&hp.path);
        if !p.is_absolute() || p.components().any(|c| c == Component::ParentDir) {
            return Err(VolumeError::Invalid {
                field: format!("{field}.path"),
                message: format!("{:?} must be an absolute path without '..'", hp.path),
            });
        }
        let kind = hp.type_.clone().unwrap_or_default();
        host_path_kind(&kind, &field)?;
        return Ok(VolumePlan::HostPath {
            field,
            path: p,
            kind,
        });
    }
    if let Some(d) = &v.downward_api {
        let field = format!("{field}.downwardAPI");
        let mode = file_mode(d.default_mode, &format!("{field}.defaultMode"))?;
        let payload = downward_payload(pod, node, d.items.as_deref().unwrap_or(&[]), mode, &field)?;
        return Ok(VolumePlan::Projected { field, payload });
    }
    if let Some(p) = &v.projected {
        let field = format!("{field}.projected");
        let mode = file_mode(p.default_mode, &format!("{field}.defaultMode"))?;
        let mut payload = BTreeMap::new();
        for (j, src) in p.sources.iter().flatten().enumerate() {
            let sf = format!("{field}.sources[{j}]");
            let Some(d) = &src.downward_api else {
                let key = set_keys(src).into_iter().next().unwrap_or_default();
                return Err(VolumeError::Invalid {
                    field: format!("{sf}.{key}"),
                    message: "only downwardAPI sources can be projected in a static pod".into(),
                });
            };
            let items = d.items.as_deref().unwrap_or(&[]);
            payload.extend(downward_payload(
                pod,
                node,
                items,
                mode,
                &format!("{sf}.downwardAPI"),
            )?);
        }
        return Ok(VolumePlan::Projected { field, payload });
    }
    // The API server's SetDefaults_Volume: a volume without a source is an emptyDir (the
    // manifest loader has already set it and warned about the key it did not know).
    let default_empty_dir = Default::default();
    let ed = v.empty_dir.as_ref().unwrap_or(&default_empty_dir);
    let field = format!("{field}.emptyDir");
    let (fstype, options) = empty_dir_medium(ed, &field)?;
    Ok(VolumePlan::EmptyDir {
        field,
        fstype,
        options,
    })
}

/// Prepares volume `v` (`spec.volumes[index]`) of `pod` whose data directory is `data_dir`
/// (`<root-dir>/pods/<uid>/volumes/<name>`); returns the host path to bind-mount.
pub fn prepare(
    pod: &Pod,
    node: &NodeInfo,
    v: &Volume,
    index: usize,
    data_dir: &Path,
) -> Result<(PathBuf, VolumeKind), VolumeError> {
    match plan(pod, node, v, index)? {
        VolumePlan::HostPath { field, path, kind } => {
            check_host_path(&path, &kind, &field)?;
            Ok((path, VolumeKind::HostPath))
        }
        VolumePlan::Projected { field, payload } => {
            make_dir(data_dir, 0o755, &field)?;
            write_atomic(data_dir, &payload).map_err(|source| VolumeError::Io {
                field,
                what: "write",
                path: data_dir.to_path_buf(),
                source,
            })?;
            Ok((data_dir.to_path_buf(), VolumeKind::Projected))
        }
        VolumePlan::EmptyDir {
            field,
            fstype,
            options,
        } => {
            prepare_empty_dir(fstype, options, data_dir, &field)?;
            Ok((data_dir.to_path_buf(), VolumeKind::EmptyDir))
        }
    }
}

/// The JSON names of the fields set on `v`.
fn set_keys<T: serde::Serialize>(v: &T) -> Vec<String> {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::Object(m)) => m
            .into_iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, _)| k)
            .collect(),
        _ => Vec::new(),
    }
}

/// The first source of `v` podvisor does not prepare.
fn unsupported_source(v: &Volume) -> Option<String> {
    set_keys(v).into_iter().find(|k| {
        !matches!(
            k.as_str(),
            "name" | "hostPath" | "emptyDir" | "downwardAPI" | "projected"
        )
    })
}

fn file_mode(mode: Option<i32>, field: &str) -> Result<u32, VolumeError> {
    match mode {
        None => Ok(0o644),
        Some(m) if (0..=0o777).contains(&m) => Ok(m as u32),
        Some(m) => Err(VolumeError::Invalid {
            field: field.to_string(),
            message: format!("{m} must be between 0 and 0777 (511)"),
        }),
    }
}

fn make_dir(p: &Path, mode: u32, field: &str) -> Result<(), VolumeError> {
    fs::create_dir_all(p).map_err(|source| VolumeError::Io {
        field: field.to_string(),
        what: "create directory",
        path: p.to_path_buf(),
        source,
    })?;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).map_err(|source| VolumeError::Io {
        field: field.to_string(),
        what: "chmod",
        path: p.to_path_buf(),
        source,
    })
}

/// The filesystem and mount options of an emptyDir's medium (none: a plain directory).
fn empty_dir_medium(
    ed: &k8s_openapi::api::core::v1::EmptyDirVolumeSource,
    field: &str,
) -> Result<(&'static str, Option<String>), VolumeError> {
    let medium = ed.medium.as_deref().filter(|m| !m.is_empty());
    Ok(match medium {
        None => ("", None),
        Some("Memory") => {
            let mut opts = String::from("mode=1777");
            if let Some(limit) = &ed.size_limit {
                let bytes =
                    crate::pod::quantity::parse_bytes(limit).map_err(|e| VolumeError::Invalid {
                        field: format!("{field}.sizeLimit"),
                        message: e.to_string(),
                    })?;
                if bytes > 0 {
                    opts.push_str(&format!(",size={bytes}"));
                }
            }
            ("tmpfs", Some(opts))
        }
        Some(m) => match crate::pod::validation::hugepage_size(m) {
            Some(size) => ("hugetlbfs", Some(format!("mode=1777,pagesize={size}"))),
            None => {
                return Err(VolumeError::Invalid {
                    field: format!("{field}.medium"),
                    message: format!(
                        "{m:?} is not one of \"\", Memory, HugePages, HugePages-<size>"
                    ),
                })
            }
        },
    })
}

fn prepare_empty_dir(
    fstype: &'static str,
    options: Option<String>,
    p: &Path,
    field: &str,
) -> Result<(), VolumeError> {
    // A memory volume still mounted (a sandbox created again without a reboot) is reused.
    if options.is_some() && is_mounted(p) {
        return Ok(());
    }
    make_dir(p, 0o777, field)?;
    if let Some(opts) = options {
        mount(
            Some(fstype),
            p,
            Some(fstype),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(opts.as_str()),
        )
        .map_err(|source| VolumeError::Mount {
            field: field.to_string(),
            fstype,
            path: p.to_path_buf(),
            source,
        })?;
    }
    Ok(())
}

/// The kubelet's hostPath type checks (pkg/volume/hostpath `checkType`), plus containerd's
/// directory creation for an untyped path that does not exist.
/// The hostPath types the kubelet knows (`""` is untyped); any other is refused before the
/// host is looked at.
fn host_path_kind(kind: &str, field: &str) -> Result<(), VolumeError> {
    match kind {
        "" | "Directory" | "DirectoryOrCreate" | "File" | "FileOrCreate" | "Socket"
        | "CharDevice" | "BlockDevice" => Ok(()),
        other => Err(VolumeError::Invalid {
            field: format!("{field}.type"),
            message: format!("unknown hostPath type {other:?}"),
        }),
    }
}

pub fn check_host_path(p: &Path, kind: &str, field: &str) -> Result<(), VolumeError> {
    host_path_kind(kind, field)?;
    let problem = |what: &str| VolumeError::HostPathType {
        field: field.to_string(),
        path: p.to_path_buf(),
        problem: what.to_string(),
    };
    let io = |what: &'static str| {
        move |source| VolumeError::Io {
            field: field.to_string(),
            what,
            path: p.to_path_buf(),
            source,
        }
    };
    // stat(2), as the kubelet: a symlink to the right kind of file is that kind of file.
    let md = match fs::metadata(p) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io("stat")(e)),
    };
    let ft = md.as_ref().map(|m| m.file_type());
    let mkdir = || {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(p)
            .map_err(io("create directory"))
    };
    // What the type requires of an existing path, and how the kubelet says it is not that.
    let (is_kind, not_kind): (fn(&fs::FileType) -> bool, &str) = match kind {
        // containerd (CRI WithMounts): a missing bind-mount source becomes a directory.
        "" => return if ft.is_none() { mkdir() } else { Ok(()) },
        "Directory" | "DirectoryOrCreate" => (fs::FileType::is_dir, "is not a directory"),
        "File" | "FileOrCreate" => (fs::FileType::is_file, "is not a file"),
        "Socket" => (FileTypeExt::is_socket, "is not a socket file"),
        "CharDevice" => (FileTypeExt::is_char_device, "is not a character device"),
        "BlockDevice" => (FileTypeExt::is_block_device, "is not a block device"),
        other => {
            return Err(VolumeError::Invalid {
                field: format!("{field}.type"),
                message: format!("unknown hostPath type {other:?}"),
            })
        }
    };
    match (ft, kind) {
        (Some(t), _) if is_kind(&t) => Ok(()),
        (Some(_), _) => Err(problem(not_kind)),
        (None, "DirectoryOrCreate") => mkdir(),
        // The kubelet opens with O_CREAT only: a missing parent is an error.
        (None, "FileOrCreate") => fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o644)
            .open(p)
            .map(drop)
            .map_err(io("create file")),
        (None, _) => Err(problem("does not exist")),
    }
}

/// The files of a downwardAPI volume (or projected source): path -> (content, mode).
fn downward_payload(
    pod: &Pod,
    node: &NodeInfo,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    field: &str,
) -> Result<BTreeMap<String, (Vec<u8>, u32)>, VolumeError> {
    let mut out = BTreeMap::new();
    for (k, item) in items.iter().enumerate() {
        let f = format!("{field}.items[{k}]");
        check_item_path(&item.path, &format!("{f}.path"))?;
        let mode = match item.mode {
            None => default_mode,
            Some(m) => file_mode(Some(m), &format!("{f}.mode"))?,
        };
        let value = spec::downward_volume_value(pod, node, item, &f)?;
        out.insert(item.path.clone(), (value.into_bytes(), mode));
    }
    Ok(out)
}

/// A payload path: relative, no `..` component, not starting with `..`, not empty.
pub fn check_item_path(path: &str, field: &str) -> Result<(), VolumeError> {
    let p = Path::new(path);
    let bad = path.is_empty()
        || p.is_absolute()
        || path.starts_with("..")
        || p.components().any(|c| c == Component::ParentDir);
    if bad {
        return Err(VolumeError::Invalid {
            field: field.to_string(),
            message: format!(
                "{path:?} must be a relative path without '..' that does not start with '..'"
            ),
        });
    }
    Ok(())
}

const DATA_DIR: &str = "..data";
const DATA_TMP: &str = "..data_tmp";

/// The kubelet's AtomicWriter: writes `payload` (relative path -> content, mode) below
/// `dir` so that readers see either the old or the new set of files, never a mix. Nothing is
/// rewritten when the payload is what `..data` already holds.
pub fn write_atomic(dir: &Path, payload: &BTreeMap<String, (Vec<u8>, u32)>) -> io::Result<()> {
    let current = fs::read_link(dir.join(DATA_DIR)).ok();
    if let Some(cur) = &current {
        if payload_matches(&dir.join(cur), payload) {
            return Ok(());
        }
    }
    // `..2006_01_02_15_04_05.000000000`, the kubelet's name for a payload directory.
    let stamp = crate::logs::timestamp::format_timestamp(std::time::SystemTime::now());
    let ts = format!(
        "..{}",
        stamp.trim_end_matches('Z').replace(['-', 'T', ':'], "_")
    );
    let ts_dir = dir.join(&ts);
    fs::create_dir(&ts_dir)?;
    fs::set_permissions(&ts_dir, fs::Permissions::from_mode(0o755))?;
    for (rel, (content, mode)) in payload {
        let target = ts_dir.join(rel);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&target, content)?;
        fs::set_permissions(&target, fs::Permissions::from_mode(*mode))?;
    }
    let tmp = dir.join(DATA_TMP);
    let _ = fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&ts, &tmp)?;
    fs::rename(&tmp, dir.join(DATA_DIR))?;
    // The visible names: one symlink per top-level entry, through ..data.
    let mut top: Vec<String> = payload
        .keys()
        .filter_map(|k| Path::new(k).components().next())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    top.dedup();
    for name in &top {
        let link = dir.join(name);
        if fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new(DATA_DIR).join(name), &link)?;
        }
    }
    // Remove what the old payload had and the new one has not, then the old directory.
    for entry in fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("..") {
            if name != ts && name != DATA_DIR && name.starts_with("..") && entry.path().is_dir() {
                fs::remove_dir_all(entry.path())?;
            }
            continue;
        }
        if !top.contains(&name) {
            let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
            if is_link {
                fs::remove_file(entry.path())?;
            }
        }
    }
    Ok(())
}

fn payload_matches(dir: &Path, payload: &BTreeMap<String, (Vec<u8>, u32)>) -> bool {
    payload.iter().all(|(rel, (content, mode))| {
        let p = dir.join(rel);
        fs::read(&p).is_ok_and(|c| &c == content)
            && fs::metadata(&p).is_ok_and(|m| m.permissions().mode() & 0o7777 == *mode)
    }) && count_files(dir) == payload.len()
}

fn count_files(dir: &Path) -> usize {
    fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        count_files(&e.path())
                    } else {
                        1
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}

/// The kubelet's `SetVolumeOwnership` for a volume that supports ownership management:
/// every file and directory gets group `fs_group`, group read (and write unless the volume
/// is read-only content) and, for directories, group execute and setgid. With
/// `fsGroupChangePolicy: OnRootMismatch` nothing is walked when the volume's root already
/// has that group and those bits.
pub fn apply_fs_group(
    root: &Path,
    sc: &PodSecurityContext,
    read_only: bool,
    field: &str,
) -> Result<(), VolumeError> {
    let Some(gid) = sc.fs_group else {
        return Ok(());
    };
    let gid = u32::try_from(gid).map_err(|_| VolumeError::Invalid {
        field: "spec.securityContext.fsGroup".into(),
        message: format!("{gid} is not a valid group ID"),
    })?;
    let file_mask: u32 = if read_only { 0o440 } else { 0o660 };
    let dir_mask = file_mask | 0o110 | 0o2000;
    let io = |path: &Path, what: &'static str| {
        let path = path.to_path_buf();
        move |source| VolumeError::Io {
            field: field.to_string(),
            what,
            path,
            source,
        }
    };
    if sc.fs_group_change_policy.as_deref() == Some("OnRootMismatch") {
        let md = fs::metadata(root).map_err(io(root, "stat"))?;
        if md.gid() == gid && md.mode() & dir_mask == dir_mask {
            return Ok(());
        }
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let md = fs::symlink_metadata(&p).map_err(io(&p, "stat"))?;
        if md.file_type().is_symlink() {
            // The atomic writer's links: their targets are walked themselves.
            continue;
        }
        std::os::unix::fs::lchown(&p, None, Some(gid)).map_err(io(&p, "chown"))?;
        let mask = if md.is_dir() { dir_mask } else { file_mask };
        let mode = (md.mode() & 0o7777) | mask;
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).map_err(io(&p, "chmod"))?;
        if md.is_dir() {
            for e in fs::read_dir(&p)
                .map_err(io(&p, "read directory"))?
                .flatten()
            {
                stack.push(e.path());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
