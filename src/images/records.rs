//! Image records (`images/refs/<sha256 of the normalized reference>`, one JSON file per
//! image name, written atomically and last during an import) and leases
//! (`images/leases/<holder>` holding an image digest) that keep an image's content alive.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil;

use super::digest::Digest;

/// Errors of record and lease storage.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("image record i/o on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("image record {path} is invalid: {source}")]
    Json {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "invalid lease holder {holder:?}: use letters, digits, '.', '_' or '-' (not only dots)"
    )]
    InvalidHolder { holder: String },
}

/// One layer of an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerRecord {
    /// Digest of the (possibly compressed) layer blob.
    pub digest: String,
    /// Digest of the uncompressed tar stream; names the unpacked directory.
    pub diff_id: String,
    /// Size of the blob in bytes.
    pub size: u64,
    pub media_type: String,
}

/// A named image in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRecord {
    /// Normalized reference, e.g. `docker.io/library/busybox:latest`.
    pub reference: String,
    /// Manifest digest `sha256:..` (the image's identity).
    pub digest: String,
    pub config_digest: String,
    /// Layers, bottom first.
    pub layers: Vec<LayerRecord>,
    /// Sum of the compressed layer sizes and the config size.
    pub size: u64,
    /// `created` from the image config.
    pub created: Option<String>,
    /// RFC 3339 UTC time of the import.
    pub imported_at: String,
    /// Pinned images (preloaded) are exempt from image garbage collection by size.
    pub pinned: bool,
}

/// Typed digests of a record, checked when the record is loaded.
#[derive(Debug, Clone)]
pub struct RecordDigests {
    pub manifest: Digest,
    pub config: Digest,
    /// (blob digest, diff_id) per layer, bottom first.
    pub layers: Vec<(Digest, Digest)>,
}

impl ImageRecord {
    /// Parses the digests; `None` when one of them is malformed.
    pub fn digests(&self) -> Option<RecordDigests> {
        let layers = self
            .layers
            .iter()
            .map(|l| {
                Some((
                    Digest::parse(&l.digest).ok()?,
                    Digest::parse(&l.diff_id).ok()?,
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(RecordDigests {
            manifest: Digest::parse(&self.digest).ok()?,
            config: Digest::parse(&self.config_digest).ok()?,
            layers,
        })
    }
}

/// The `refs` directory.
#[derive(Debug, Clone)]
pub struct Records {
    dir: PathBuf,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> RecordError + '_ {
    move |source| RecordError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Records {
    pub fn open(dir: PathBuf) -> Result<Records, RecordError> {
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(Records { dir })
    }

    /// The file of a normalized reference.
    pub fn path(&self, reference: &str) -> PathBuf {
        self.dir.join(Digest::of(reference.as_bytes()).hex())
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Written durably (fsync of the file and the directory): a record is the last step of an
    /// import or pull, after its content was made durable, so it never names missing content.
    pub fn write(&self, rec: &ImageRecord) -> Result<(), RecordError> {
        let path = self.path(&rec.reference);
        fsutil::write_json_atomic(&path, rec).map_err(io_err(&path))
    }

    /// Record files that are empty or do not parse: (path, why).
    pub fn torn(&self) -> Result<Vec<(PathBuf, String)>, RecordError> {
        torn_files::<ImageRecord>(&self.dir, |name| Digest::from_hex(name).is_some())
    }

    pub fn read(&self, reference: &str) -> Result<Option<ImageRecord>, RecordError> {
        let path = self.path(reference);
        match fs::read(&path) {
            Ok(data) => serde_json::from_slice(&data)
                .map(Some)
                .map_err(|source| RecordError::Json { path, source }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(RecordError::Io { path, source }),
        }
    }

    pub fn remove(&self, reference: &str) -> Result<(), RecordError> {
        let path = self.path(reference);
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => return Err(RecordError::Io { path, source }),
        }
        fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io_err(&self.dir))
    }

    /// Every readable record; unreadable ones are returned as errors next to the good ones so
    /// the caller decides (list() logs and skips them).
    pub fn all(&self) -> Result<Vec<Result<ImageRecord, RecordError>>, RecordError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            let name = entry.file_name();
            if name.to_str().and_then(Digest::from_hex).is_none() {
                continue; // temp files of write_atomic and strangers
            }
            let path = entry.path();
            out.push(match fs::read(&path) {
                Ok(data) => serde_json::from_slice(&data)
                    .map_err(|source| RecordError::Json { path, source }),
                Err(source) => Err(RecordError::Io { path, source }),
            });
        }
        Ok(out)
    }
}

/// The `leases` directory.
#[derive(Debug, Clone)]
pub struct Leases {
    dir: PathBuf,
}

fn valid_holder(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 255
        && !h.bytes().all(|b| b == b'.')
        && h.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

impl Leases {
    pub fn open(dir: PathBuf) -> Result<Leases, RecordError> {
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(Leases { dir })
    }

    fn path(&self, holder: &str) -> Result<PathBuf, RecordError> {
        if !valid_holder(holder) {
            return Err(RecordError::InvalidHolder {
                holder: holder.to_string(),
            });
        }
        Ok(self.dir.join(holder))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Written without fsync (atomic against crashes, not power cuts): a lease is held by a
    /// container, and no container survives a power cut. One that a power cut left empty is
    /// removed when the store is opened ([`Leases::torn`]).
    pub fn add(&self, holder: &str, digest: &Digest) -> Result<(), RecordError> {
        let path = self.path(holder)?;
        fsutil::write_atomic_volatile(&path, digest.to_string().as_bytes()).map_err(io_err(&path))
    }

    /// Lease files that do not hold a digest: (path, why).
    pub fn torn(&self) -> Result<Vec<(PathBuf, String)>, RecordError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            if entry
                .file_name()
                .to_str()
                .is_none_or(|n| n.starts_with('.'))
            {
                continue;
            }
            let path = entry.path();
            let text = fs::read_to_string(&path).map_err(io_err(&path))?;
            if let Err(e) = Digest::parse(text.trim()) {
                out.push((path, e.to_string()));
            }
        }
        Ok(out)
    }

    pub fn remove(&self, holder: &str) -> Result<(), RecordError> {
        let path = self.path(holder)?;
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(RecordError::Io { path, source }),
        }
    }

    /// (holder, digest) of every lease; unparsable lease files are logged and ignored.
    pub fn all(&self) -> Result<Vec<(String, Digest)>, RecordError> {
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let entry = entry.map_err(io_err(&self.dir))?;
            let Some(holder) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if holder.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let text = fs::read_to_string(&path).map_err(io_err(&path))?;
            match Digest::parse(text.trim()) {
                Ok(d) => out.push((holder, d)),
                Err(e) => log::warn!("ignoring lease {}: {e}", path.display()),
            }
        }
        Ok(out)
    }
}

/// Files of `dir` whose name passes `wanted` and whose content is empty or not a `T`.
fn torn_files<T: serde::de::DeserializeOwned>(
    dir: &Path,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<(PathBuf, String)>, RecordError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(io_err(dir))? {
        let entry = entry.map_err(io_err(dir))?;
        if !entry.file_name().to_str().is_some_and(&wanted) {
            continue;
        }
        let path = entry.path();
        if let fsutil::Loaded::Torn(why) = fsutil::load_json::<T>(&path).map_err(io_err(&path))? {
            out.push((path, why));
        }
    }
    Ok(out)
}

/// The current time as RFC 3339 UTC with seconds precision (no date crate needed).
pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    rfc3339(secs)
}

fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_known_values() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }

    #[test]
    fn lease_holder_validation() {
        assert!(valid_holder("pod_abc-1.c"));
        for bad in ["", ".", "..", "a/b", "a b"] {
            assert!(!valid_holder(bad), "{bad}");
        }
    }
}
