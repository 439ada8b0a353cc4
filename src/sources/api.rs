//! sources::api: the push source — v1 Pods PUT to and DELETEd from the node API's secure port
//! at `/api/v1/namespaces/{namespace}/pods/{name}` (podvisor's addition; the kubelet's "api"
//! source is an API server's watch).
//!
//! Unlike the file and URL sources this one has no thread: the secure port's connection
//! thread sends an [`ApiPodRequest`] to the sync loop (a typed event, through a
//! [`PushSink`]) and waits for the [`ApiPodReply`], so validation errors reach the client
//! (422 with the field and line:column). The sync loop validates the manifest exactly as a
//! file's (the same decoding, validation, hashes and last-known-good), writes it durably into
//! the [`ApiPodStore`] (`<root>/api-pods/<namespace>_<name>.yaml`, the bytes as received)
//! before it answers, and reads that directory back at start, so pushed pods survive restarts
//! and reboots. Pods of this source carry `kubernetes.io/config.source: api`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;

use crate::fsutil;

/// The prefix of the source keys (and `PodView::source`) of pushed pods: `api:<ns>/<name>`.
pub const API_SOURCE_PREFIX: &str = "api:";

/// Largest pushed manifest: 1 MiB (the node API reads a whole body into memory on one of its
/// bounded connection threads; kube-apiserver's own limit is 3 MiB).
pub const MAX_PUSH_BYTES: usize = 1024 * 1024;

/// The source key of the pushed pod `namespace/name`.
pub fn source_key(namespace: &str, name: &str) -> String {
    format!("{API_SOURCE_PREFIX}{namespace}/{name}")
}

/// Whether `s` is a DNS-1123 subdomain (a pod name) or, with `label`, a DNS-1123 label (a
/// namespace): what makes a name safe as a file name too (no `/`, no `_`, no `..`).
pub fn valid_name(s: &str, label: bool) -> bool {
    let max = if label { 63 } else { 253 };
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !p.starts_with('-')
            && !p.ends_with('-')
    };
    !s.is_empty()
        && s.len() <= max
        && if label {
            part_ok(s)
        } else {
            s.split('.').all(part_ok)
        }
}

/// What a request asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiPodOp {
    /// Create or replace the pod with this manifest (YAML or JSON, one Pod).
    Put {
        data: Vec<u8>,
    },
    Delete,
}

/// How a PUT changed the pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Created,
    /// Labels, annotations or spec changed (a spec change replaces the pod, as a file edit).
    Configured,
    Unchanged,
}

/// One field a manifest got wrong, where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldCause {
    pub field: String,
    pub message: String,
    /// line:column in the manifest as sent.
    pub position: Option<(u64, u64)>,
}

/// The sync loop's answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiPodReply {
    /// PUT accepted: the pod as it will run (defaulted, with its annotations).
    Applied { outcome: Applied, pod: Box<Pod> },
    /// DELETE accepted: the pod as it was.
    Deleted { pod: Box<Pod> },
    /// The manifest does not parse (YAML/JSON syntax, not UTF-8, empty): 400.
    Malformed { message: String },
    /// The manifest is refused by validation: 422, every field named.
    Invalid {
        message: String,
        causes: Vec<FieldCause>,
    },
    /// No pushed pod of that name: 404.
    NotFound,
    /// Another source defines that pod, or it cannot be pushed now: 409.
    Conflict { message: String },
    /// The manifest could not be stored (a full disk): 500; nothing changed.
    StorageFailed { message: String },
}

/// One push, for the sync loop.
#[derive(Debug)]
pub struct ApiPodRequest {
    pub namespace: String,
    pub name: String,
    pub op: ApiPodOp,
    /// Where the answer goes (a one-slot channel; the connection thread waits on it).
    pub reply: SyncSender<ApiPodReply>,
}

/// How the node API hands a request to the sync loop: false when the loop is gone.
pub type PushSink = Arc<dyn Fn(ApiPodRequest) -> bool + Send + Sync>;

/// Errors of the pushed-pod store, naming the path.
#[derive(Debug, thiserror::Error)]
pub enum ApiStoreError {
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot remove {path}: {source}")]
    Remove { path: PathBuf, source: io::Error },
}

/// The accepted manifests, one file per pod: `<dir>/<namespace>_<name>.yaml` (a namespace
/// and a pod name never contain `_`).
#[derive(Debug, Clone)]
pub struct ApiPodStore {
    dir: PathBuf,
}

/// One stored manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredPod {
    pub namespace: String,
    pub name: String,
    pub data: Vec<u8>,
}

impl ApiPodStore {
    pub fn new(dir: PathBuf) -> ApiPodStore {
        ApiPodStore { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, namespace: &str, name: &str) -> PathBuf {
        self.dir.join(format!("{namespace}_{name}.yaml"))
    }

    /// Stores `data` durably (file and directory fsynced) before the pod is applied.
    pub fn save(&self, namespace: &str, name: &str, data: &[u8]) -> Result<(), ApiStoreError> {
        fs::create_dir_all(&self.dir).map_err(|source| ApiStoreError::Write {
            path: self.dir.clone(),
            source,
        })?;
        let path = self.path(namespace, name);
        fsutil::write_atomic(&path, data).map_err(|source| ApiStoreError::Write { path, source })
    }

    /// Removes a stored manifest durably; a missing one is not an error.
    pub fn remove(&self, namespace: &str, name: &str) -> Result<(), ApiStoreError> {
        let path = self.path(namespace, name);
        let removed = match fs::remove_file(&path) {
            Ok(()) => fs::File::open(&self.dir).and_then(|d| d.sync_all()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        };
        removed.map_err(|source| ApiStoreError::Remove { path, source })
    }

    /// Every stored manifest, at daemon start (temporary files of interrupted writes are
    /// removed; a file whose name is not `<namespace>_<name>.yaml` is logged and left alone).
    pub fn load(&self) -> Vec<StoredPod> {
        let temps = fsutil::remove_atomic_temps(&self.dir);
        if temps > 0 {
            log::info!(
                "{}: removed {temps} temporary file(s) of interrupted writes",
                self.dir.display()
            );
        }
        let Ok(entries) = fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let file = e.file_name();
            let parsed = file
                .to_str()
                .and_then(|f| f.strip_suffix(".yaml"))
                .and_then(|f| f.split_once('_'))
                .filter(|(ns, name)| valid_name(ns, true) && valid_name(name, false));
            let Some((ns, name)) = parsed else {
                log::warn!(
                    "{}: not a pushed pod's manifest (<namespace>_<name>.yaml): ignored",
                    e.path().display()
                );
                continue;
            };
            match fs::read(e.path()) {
                Ok(data) => out.push(StoredPod {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    data,
                }),
                Err(err) => log::warn!("{}: {err}", e.path().display()),
            }
        }
        out.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_safe_for_files() {
        for ok in ["default", "kube-system", "a1"] {
            assert!(valid_name(ok, true), "{ok}");
        }
        for ok in ["web", "web.v2", "a-b.c-d"] {
            assert!(valid_name(ok, false), "{ok}");
        }
        for bad in ["", "a_b", "a/b", "..", "A", "-a", "a-", "a.b"] {
            assert!(!valid_name(bad, true), "{bad}");
        }
        for bad in ["", "a_b", "a/b", "..", ".a", "a..b", "Web"] {
            assert!(!valid_name(bad, false), "{bad}");
        }
        assert!(!valid_name(&"a".repeat(64), true));
        assert!(valid_name(&"a".repeat(63), true));
    }

    #[test]
    fn store_round_trip() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ApiPodStore::new(dir.path().join("api-pods"));
        assert!(store.load().is_empty());
        store.save("default", "web", b"kind: Pod\n").expect("save");
        store.save("kube-system", "dns", b"{}").expect("save");
        fs::write(dir.path().join("api-pods/stray.txt"), b"x").expect("stray");
        fs::write(dir.path().join("api-pods/.default_x.yaml.tmp-1"), b"x").expect("temp");
        let all = store.load();
        assert_eq!(
            all.iter()
                .map(|p| format!("{}/{}", p.namespace, p.name))
                .collect::<Vec<_>>(),
            ["default/web", "kube-system/dns"]
        );
        assert_eq!(all[0].data, b"kind: Pod\n");
        assert!(!dir.path().join("api-pods/.default_x.yaml.tmp-1").exists());
        store.remove("default", "web").expect("remove");
        store.remove("default", "web").expect("again");
        assert_eq!(store.load().len(), 1);
        assert_eq!(source_key("default", "web"), "api:default/web");
    }
}
