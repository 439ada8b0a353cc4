//! store: the desired static pods persisted on disk (`<root>/static-pods/<uid>.json`).
//!
//! A restarted daemon seeds its configuration from here, so a pod whose source is broken or
//! unreachable at start (invalid file, URL down) keeps its running containers instead of being
//! stopped. Records are written atomically when a pod is first adopted or started and when its
//! metadata changes, and deleted once the pod has been removed.

use std::fs;
use std::io;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use crate::fsutil;
use crate::pod::static_pod::StaticPod;

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
        let path = self.path(&uid);
        fs::create_dir_all(&self.dir).map_err(|source| StoreError::Write {
            path: self.dir.clone(),
            source,
        })?;
        let rec = Record {
            source: p.source.clone(),
            full_name: p.full_name.clone(),
            spec_hash: p.spec_hash.clone(),
            meta_hash: p.meta_hash.clone(),
            pod: p.pod.clone(),
        };
        fsutil::write_json_atomic(&path, &rec).map_err(|source| StoreError::Write { path, source })
    }

    pub fn remove(&self, uid: &str) -> Result<(), StoreError> {
        let path = self.path(uid);
        match fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Remove { path, source }),
        }
    }

    /// Every readable record; unreadable ones are logged and skipped.
    pub fn load_all(&self) -> Vec<StaticPod> {
        let mut out = Vec::new();
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return out;
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for path in paths {
            let rec: Result<Record, String> = fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|d| serde_json::from_slice(&d).map_err(|e| e.to_string()));
            match rec {
                Ok(r) => out.push(StaticPod {
                    pod: r.pod,
                    source: r.source,
                    full_name: r.full_name,
                    spec_hash: r.spec_hash,
                    meta_hash: r.meta_hash,
                }),
                Err(e) => log::warn!("ignoring unreadable pod record {}: {e}", path.display()),
            }
        }
        out
    }
}
