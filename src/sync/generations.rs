//! generations: each pod's last Ready generation and the generation rolled back from it,
//! persisted as `<root>/pod-generations/<namespace>_<name>.json` (safe updates).
//!
//! A record is written when a new generation of a pod first becomes Ready (once per
//! generation, not per readiness change: flash storage) and when an edit is rolled back; it
//! holds the whole Ready pod (as the desired-pod records of [`super::store`] do), so a daemon
//! restarted while a new generation is still on probation can still roll back to it, and the
//! spec hash of the generation that was rolled back, so a restarted daemon does not retry it.
//! Records are written atomically and durably ([`fsutil::write_json_atomic`]) by the
//! `desired-store` thread ([`super::record_writer`]), so the sync loop never waits for them;
//! a torn one is an interrupted write, removed at start. A record whose pod no source defines
//! once the sources reported is deleted.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::store::{read_records, remove_record, scan_records, write_record, StoreError};
use crate::fsutil;
use crate::staticpod::StaticPod;

/// A generation rolled back from: not started again while the manifest keeps its spec hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolledBack {
    /// `spec_hash` of the bad generation.
    pub spec_hash: String,
    /// Its uid (for events and logs).
    pub uid: String,
    /// Why it was rolled back ("container main is crash-looping (exit code 1)").
    pub why: String,
    /// RFC 3339 time of the rollback.
    pub at: String,
}

/// A pod's last Ready generation, and the edit rolled back to it, if any.
#[derive(Debug, Clone)]
pub struct LastReady {
    pub pod: StaticPod,
    pub rolled_back: Option<RolledBack>,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    source: String,
    full_name: String,
    spec_hash: String,
    meta_hash: String,
    pod: Pod,
    #[serde(default)]
    rolled_back: Option<RolledBack>,
}

/// The directory of generation records.
#[derive(Debug, Clone)]
pub struct GenerationStore {
    dir: PathBuf,
}

impl GenerationStore {
    pub fn new(dir: PathBuf) -> GenerationStore {
        GenerationStore { dir }
    }

    /// `namespace/name` -> `namespace_name.json` (`_` is in no DNS name, so it is unique).
    fn path(&self, full_name: &str) -> PathBuf {
        self.dir
            .join(format!("{}.json", full_name.replace('/', "_")))
    }

    pub fn save(&self, r: &LastReady) -> Result<(), StoreError> {
        let rec = Record {
            source: r.pod.source.clone(),
            full_name: r.pod.full_name.clone(),
            spec_hash: r.pod.spec_hash.clone(),
            meta_hash: r.pod.meta_hash.clone(),
            pod: r.pod.pod.clone(),
            rolled_back: r.rolled_back.clone(),
        };
        write_record(&self.dir, self.path(&r.pod.full_name), &rec)
    }

    pub fn remove(&self, full_name: &str) -> Result<(), StoreError> {
        remove_record(self.path(full_name))
    }

    /// (record files, those that are empty or torn with why), for `podvisor check`.
    pub fn scan(&self) -> (usize, Vec<(PathBuf, String)>) {
        scan_records::<Record>(&self.dir)
    }

    /// The daemon's load at start: every good record; temporary files of interrupted writes
    /// and torn records are removed (and said once).
    pub fn recover(&self) -> Vec<LastReady> {
        fsutil::remove_atomic_temps(&self.dir);
        read_records::<Record>(&self.dir, true, "pod generation record")
            .into_iter()
            .map(|r| LastReady {
                pod: StaticPod {
                    pod: r.pod,
                    source: r.source,
                    full_name: r.full_name,
                    spec_hash: r.spec_hash,
                    meta_hash: r.meta_hash,
                    warnings: Vec::new(),
                },
                rolled_back: r.rolled_back,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::NodeSecurity;

    #[test]
    fn a_record_round_trips_and_a_torn_one_is_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = GenerationStore::new(dir.path().join("g"));
        let m = b"apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - {name: c, image: busybox}\n";
        let pod = crate::staticpod::load_manifest_on(
            m,
            "/m/web.yaml",
            crate::staticpod::SourceKind::File,
            "n",
            "2026-01-01T00:00:00Z",
            &NodeSecurity::default(),
        )
        .expect("manifest")
        .remove(0);
        let rb = RolledBack {
            spec_hash: "abc".into(),
            uid: "u".into(),
            why: "crash".into(),
            at: "2026-01-01T00:00:00Z".into(),
        };
        store
            .save(&LastReady {
                pod: pod.clone(),
                rolled_back: Some(rb.clone()),
            })
            .expect("save");
        std::fs::write(dir.path().join("g/x_y.json"), b"{\"source\":").expect("torn");
        let got = store.recover();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].pod.uid(), pod.uid());
        assert_eq!(got[0].pod.spec_hash, pod.spec_hash);
        assert_eq!(got[0].rolled_back, Some(rb));
        assert!(!dir.path().join("g/x_y.json").exists());
        store.remove(&pod.full_name).expect("remove");
        assert!(store.recover().is_empty());
    }
}
