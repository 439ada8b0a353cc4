//! store: the desired static pods persisted on disk (`<root>/static-pods/<uid>.json`).
//!
//! A restarted daemon seeds its configuration from here, so a pod whose source is broken or
//! unreachable at start (invalid file, URL down) keeps its running containers instead of being
//! stopped, and pods come back after a reboot even before their source answers. Records are
//! written atomically and durably (fsync of the file and the directory) when a pod is first
//! adopted or started and when its metadata changes, and deleted once the pod has been removed.
//! The sync loop hands both to the `desired-store` thread ([`super::record_writer`]), in order,
//! so it never waits for a disk while a pod starts (two fsyncs: 6-12 ms on the development machine's virtio disk, tens of
//! ms on an SD card, paid before every first start when the loop wrote them itself). The
//! pod-generation records go through the same thread, for the same reason: a burst of pods
//! proving Ready at once made the loop wait for one record's fsyncs after another.
//! A record a power cut left empty or torn is an interrupted write: the daemon removes it at
//! start and says so once ([`DesiredStore::recover`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::fsutil::{self, Loaded};
use crate::staticpod::StaticPod;

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    source: String,
    full_name: String,
    spec_hash: String,
    meta_hash: String,
    pod: Pod,
}

/// Errors of the desired-pod store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("failed to write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("failed to remove {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },
    #[error("pod {full_name} has no uid")]
    NoUid { full_name: String },
}

/// The directory of records.
#[derive(Debug, Clone)]
pub struct DesiredStore {
    dir: PathBuf,
}

impl DesiredStore {
    pub fn new(dir: PathBuf) -> DesiredStore {
        DesiredStore { dir }
    }

    fn path(&self, uid: &str) -> PathBuf {
        self.dir.join(format!("{uid}.json"))
    }

    /// Whether pod `uid` has a record (a save that failed, on a full disk, has none).
    pub fn contains(&self, uid: &str) -> bool {
        self.path(uid).exists()
    }

    pub fn save(&self, p: &StaticPod) -> Result<(), StoreError> {
        let uid = p
            .pod
            .metadata
            .uid
            .clone()
            .filter(|u| crate::runtime::sandbox::validate_uid(u).is_ok())
            .ok_or_else(|| StoreError::NoUid {
                full_name: p.full_name.clone(),
            })?;
        let rec = Record {
            source: p.source.clone(),
            full_name: p.full_name.clone(),
            spec_hash: p.spec_hash.clone(),
            meta_hash: p.meta_hash.clone(),
            pod: p.pod.clone(),
        };
        write_record(&self.dir, self.path(&uid), &rec)
    }

    pub fn remove(&self, uid: &str) -> Result<(), StoreError> {
        remove_record(self.path(uid))
    }

    /// Every readable record; unreadable ones are skipped (the daemon's [`DesiredStore::recover`]
    /// removes and reports them). Safe to call while a daemon writes the directory.
    pub fn load_all(&self) -> Vec<StaticPod> {
        self.read_all(false)
    }

    /// The daemon's load at start, before anything else writes the directory: removes the
    /// temporary files of interrupted writes and torn records (each said once, as it is gone
    /// afterwards), then returns every good record.
    pub fn recover(&self) -> Vec<StaticPod> {
        let temps = fsutil::remove_atomic_temps(&self.dir);
        if temps > 0 {
            log::info!(
                "{}: removed {temps} temporary file(s) of interrupted writes",
                self.dir.display()
            );
        }
        self.read_all(true)
    }

    /// (record files, those that are empty or torn with why), for `podvisor check`.
    pub fn scan(&self) -> (usize, Vec<(PathBuf, String)>) {
        scan_records::<Record>(&self.dir)
    }

    fn read_all(&self, remove_torn: bool) -> Vec<StaticPod> {
        read_records::<Record>(&self.dir, remove_torn, "desired-pod record")
            .into_iter()
            .map(|r| StaticPod {
                pod: r.pod,
                source: r.source,
                full_name: r.full_name,
                spec_hash: r.spec_hash,
                meta_hash: r.meta_hash,
                warnings: Vec::new(),
            })
            .collect()
    }
}

/// Writes `rec` to `path` in `dir` atomically and durably (creating `dir`). Also used by
/// [`super::generations`].
pub(super) fn write_record<T: Serialize>(
    dir: &Path,
    path: PathBuf,
    rec: &T,
) -> Result<(), StoreError> {
    fs::create_dir_all(dir).map_err(|source| StoreError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    fsutil::write_json_atomic(&path, rec).map_err(|source| StoreError::Write { path, source })
}

/// Removes a record; one already gone is fine.
pub(super) fn remove_record(path: PathBuf) -> Result<(), StoreError> {
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(StoreError::Remove { path, source }),
    }
}

/// (record files in `dir`, those that are empty or torn with why), for `podvisor check`.
pub(super) fn scan_records<T: DeserializeOwned>(dir: &Path) -> (usize, Vec<(PathBuf, String)>) {
    let mut n = 0;
    let mut torn = Vec::new();
    for path in record_paths(dir) {
        n += 1;
        if let Ok(Loaded::Torn(why)) = load_record::<T>(&path) {
            torn.push((path, why));
        }
    }
    (n, torn)
}

/// The `*.json` files of a record directory, sorted.
fn record_paths(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
}

/// Every good record of `dir` (`what` names them in logs); torn ones are removed when
/// `remove_torn` (the daemon's start: its manifest defines the pod again once the sources
/// report), skipped otherwise. Also read by [`super::generations`].
pub(super) fn read_records<T: DeserializeOwned>(
    dir: &Path,
    remove_torn: bool,
    what: &str,
) -> Vec<T> {
    let mut out = Vec::new();
    for path in record_paths(dir) {
        match load_record(&path) {
            Ok(Loaded::Ok(r)) => out.push(r),
            Ok(Loaded::Missing) => {}
            Ok(Loaded::Torn(why)) if remove_torn => {
                log::warn!(
                    "{}: torn {what} ({why}): an interrupted write, removing it",
                    path.display()
                );
                if let Err(e) = fs::remove_file(&path) {
                    log::warn!("{}: {e}", path.display());
                }
            }
            Ok(Loaded::Torn(why)) => log::debug!("skipping torn {}: {why}", path.display()),
            Err(e) => log::warn!("ignoring unreadable {what} {}: {e}", path.display()),
        }
    }
    out
}

/// Reads a record like [`fsutil::load_json`], decoding the pod with the manifest decoder
/// (JSON -> tree -> the record type): a second `serde_json` deserializer of the Kubernetes
/// types would cost the binary about 200 KB (docs/history/benchmarks.md, binary size). A file that is JSON but
/// not a record is torn as well.
fn load_record<T: DeserializeOwned>(path: &Path) -> io::Result<Loaded<T>> {
    Ok(match fsutil::load_json::<serde_json::Value>(path)? {
        Loaded::Ok(v) => {
            match crate::pod::manifest::from_tree(&crate::pod::manifest::tree_of_json(v)) {
                Ok(r) => Loaded::Ok(r),
                Err(e) => Loaded::Torn(format!("not a pod record{e}")),
            }
        }
        Loaded::Missing => Loaded::Missing,
        Loaded::Torn(why) => Loaded::Torn(why),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recover_removes_torn_records_and_temp_files_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = DesiredStore::new(dir.path().to_path_buf());
        fs::write(dir.path().join("u1.json"), b"").expect("empty record");
        fs::write(dir.path().join("u2.json"), b"{\"source\": \"/m/a.yaml\"").expect("torn");
        fs::write(dir.path().join(".u3.json.tmp-77"), b"{").expect("temp");
        // A reader (the CLI) skips them and changes nothing.
        assert!(store.load_all().is_empty());
        assert_eq!(fs::read_dir(dir.path()).expect("dir").count(), 3);
        // The daemon's start removes them.
        assert!(store.recover().is_empty());
        assert_eq!(fs::read_dir(dir.path()).expect("dir").count(), 0);
    }
}
