//! Log GC decisions: rotated files beyond `containerLogMaxFiles` and which ones to compress
//! (the kubelet's container log manager: `removeExcessLogs`, `compressLog`,
//! `cleanupUnusedLogs`), pod log directories of gone pods (`evictPodLogsDirectories`), and
//! log files of instances whose record is gone. Pure functions over listings; the worker
//! lists and applies them. Also the one effect with some logic of its own: [`compress`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::GcRequest;
use crate::logs::rotation::{RotatedFile, COMPRESSED_SUFFIX};

/// Suffix of a compression in progress (`<rotated>.gz.tmp`, the kubelet's `tmpSuffix`).
pub const COMPRESS_TMP_SUFFIX: &str = ".gz.tmp";

/// Why log GC deletes a file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogGcReason {
    /// A rotated file beyond `containerLogMaxFiles` (the current file counts as one).
    TooManyFiles { max_files: u32 },
    /// A compression that was interrupted (daemon killed, disk full) left it.
    InterruptedCompression,
    /// The pod log directory of a pod no source defines any more.
    PodGone,
    /// The log of an instance whose container record is gone (older than the newest).
    NoContainerRecord,
}

impl fmt::Display for LogGcReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogGcReason::TooManyFiles { max_files } => {
                write!(f, "beyond containerLogMaxFiles ({max_files})")
            }
            LogGcReason::InterruptedCompression => {
                f.write_str("left by an interrupted compression")
            }
            LogGcReason::PodGone => f.write_str("its pod no longer exists"),
            LogGcReason::NoContainerRecord => {
                f.write_str("the container instance it belongs to was collected")
            }
        }
    }
}

/// What to do with the rotated files of one log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RotatedPlan {
    pub delete: Vec<(PathBuf, LogGcReason)>,
    pub compress: Vec<PathBuf>,
}

/// The rotated files of one current log (`rotated` oldest first, as `list_rotated` returns
/// them): the oldest beyond `max_files - 1` go, the rest but the newest are compressed.
pub fn plan_rotated(rotated: &[RotatedFile], max_files: u32) -> RotatedPlan {
    let keep = max_files.saturating_sub(1) as usize;
    let excess = rotated.len().saturating_sub(keep);
    let mut plan = RotatedPlan::default();
    for r in &rotated[..excess] {
        plan.delete
            .push((r.path.clone(), LogGcReason::TooManyFiles { max_files }));
    }
    let kept = &rotated[excess..];
    if let Some((_newest, older)) = kept.split_last() {
        plan.compress.extend(
            older
                .iter()
                .filter(|r| !r.compressed)
                .map(|r| r.path.clone()),
        );
    }
    plan
}

/// The uid a pod log directory belongs to (`<namespace>_<name>_<uid>`: the part after the
/// last `_`, as the kubelet's `parsePodUIDFromLogsDirectory`).
pub fn pod_uid_of_log_dir(name: &str) -> Option<&str> {
    let (_, uid) = name.rsplit_once('_')?;
    (!uid.is_empty()).then_some(uid)
}

/// A pod log directory found under the log root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLogDir {
    pub path: PathBuf,
    pub uid: String,
    /// Last modification: a directory changed after the request may be a new pod's.
    pub modified: SystemTime,
}

/// Pod log directories to remove: those of gone pods that no listed container still uses.
pub fn plan_log_dirs(
    dirs: &[PodLogDir],
    req: &GcRequest,
    uids_with_containers: &BTreeSet<String>,
) -> Vec<PathBuf> {
    dirs.iter()
        .filter(|d| req.pod_gone(&d.uid, d.modified) && !uids_with_containers.contains(&d.uid))
        .map(|d| d.path.clone())
        .collect()
}

/// The restart count of a log file name (`<n>.log`, or a rotated `<n>.log.<suffix>`), and
/// the current log's name it belongs to.
pub fn log_base(name: &str) -> Option<(u32, String)> {
    let (n, rest) = name.split_once(".log")?;
    if !(rest.is_empty() || rest.starts_with('.')) {
        return None;
    }
    let n: u32 = n.parse().ok()?;
    Some((n, format!("{n}.log")))
}

/// Log files of one container directory (`<pod log dir>/<container>/`) that belong to no
/// listed container: every file of a `<n>.log` group whose current log no record names,
/// except the group with the highest `n`. `names` are the directory's file names;
/// `referenced` the current log files (names) of this container's records.
pub fn plan_unreferenced(names: &[String], referenced: &BTreeSet<String>) -> Vec<String> {
    let mut groups: BTreeMap<u32, (String, Vec<&String>)> = BTreeMap::new();
    for name in names {
        if let Some((n, base)) = log_base(name) {
            groups
                .entry(n)
                .or_insert_with(|| (base, Vec::new()))
                .1
                .push(name);
        }
    }
    let Some(&highest) = groups.keys().next_back() else {
        return Vec::new();
    };
    groups
        .into_iter()
        .filter(|(n, (base, _))| *n != highest && !referenced.contains(base))
        .flat_map(|(_, (_, files))| files.into_iter().cloned())
        .collect()
}

/// Compresses a rotated log file in place: `<path>.gz.tmp` written and flushed to disk, renamed
/// to `<path>.gz`, then `path` removed. On error nothing but the temporary file can be left,
/// and it is removed. Returns (size before, size after).
pub fn compress(path: &Path) -> io::Result<(u64, u64)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?
        .to_string_lossy()
        .into_owned();
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let tmp = dir.join(format!("{name}{COMPRESS_TMP_SUFFIX}"));
    let out = dir.join(format!("{name}{COMPRESSED_SUFFIX}"));
    let result = (|| {
        let mut input = File::open(path)?;
        let before = input.metadata()?.len();
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o640)
            .open(&tmp)?;
        let mut enc =
            flate2::write::GzEncoder::new(BufWriter::new(file), flate2::Compression::default());
        io::copy(&mut input, &mut enc)?;
        let file = enc.finish()?.into_inner().map_err(|e| e.into_error())?;
        // The plain file is removed below: its compressed copy must not be lost to a power cut.
        file.sync_all()?;
        let after = file.metadata()?.len();
        fs::rename(&tmp, &out)?;
        Ok((before, after))
    })();
    match result {
        Ok(sizes) => {
            fs::remove_file(path)?;
            Ok(sizes)
        }
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Whether `name` is a compression's temporary file.
pub fn is_compress_tmp(name: &str) -> bool {
    name.ends_with(COMPRESS_TMP_SUFFIX)
}
