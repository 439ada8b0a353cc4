//! attachments: podvisor's record of every pod attachment to a CNI network, the one thing a
//! DEL needs (libcni keeps the same in its cache): the sandbox ID and interface, the network
//! namespace, CNI_ARGS, the capability arguments and the exact configuration the ADD used.
//!
//! Written durably (`fsutil`: temp + fsync + rename + directory fsync) to
//! `<root-dir>/network/attachments/<sandbox-id>.json` **before** the first plugin runs and
//! removed only after a DEL succeeded, so no crash point, power cut or reboot leaves an
//! allocation nobody knows: whatever a plugin did, the record says how to undo it. The
//! latest plugin result (the `prevResult` of a DEL and CHECK) lives beside the sandbox in the
//! runtime dir (per boot: the interfaces and rules it describes die with the boot).

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::fsutil::{self, Loaded};

/// One attachment of a sandbox to a network.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttachmentRecord {
    /// CNI_CONTAINERID: the sandbox's ID.
    pub id: String,
    pub pod_uid: String,
    pub pod_namespace: String,
    pub pod_name: String,
    /// The boot the attachment was made in: after a reboot its namespace, interfaces and
    /// rules are gone; its IPAM allocation is not.
    pub boot_id: String,
    /// The pod's pinned network namespace.
    pub netns: PathBuf,
    pub ifname: String,
    /// CNI_ARGS.
    pub args: String,
    pub capability_args: Map<String, Value>,
    /// The configuration file and its content, as the ADD read them.
    pub conf_file: PathBuf,
    pub conf: String,
    /// Whether the loopback plugin was run for `lo` as well.
    #[serde(default)]
    pub loopback: bool,
    pub created_at: String,
}

/// The attachment records of a node.
#[derive(Debug, Clone)]
pub struct AttachmentStore {
    dir: PathBuf,
}

impl AttachmentStore {
    pub fn new(dir: PathBuf) -> AttachmentStore {
        AttachmentStore { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes what interrupted writes left (at start, before anything writes).
    pub fn remove_temps(&self) -> usize {
        fsutil::remove_atomic_temps(&self.dir)
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes `r` durably.
    pub fn save(&self, r: &AttachmentRecord) -> io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        fsutil::write_json_atomic(&self.path(&r.id), r)
    }

    /// Removes the record of `id` (after its DEL succeeded).
    pub fn remove(&self, id: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(id)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Every record. A torn one cannot be (they are written durably); one that does not
    /// parse is logged and skipped, never deleted (it may be all that is known of an IP).
    pub fn list(&self) -> io::Result<Vec<AttachmentRecord>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            // Temporary files of writes in progress (or interrupted: removed at start).
            if name.starts_with('.') || !name.ends_with(".json") {
                continue;
            }
            match fsutil::load_json::<AttachmentRecord>(&p) {
                Ok(Loaded::Ok(r)) => out.push(r),
                Ok(Loaded::Missing) => {}
                Ok(Loaded::Torn(why)) => log::warn!("{}: unreadable record: {why}", p.display()),
                Err(e) => log::warn!("{}: {e}", p.display()),
            }
        }
        out.sort_by(|a, b| a.created_at.cmp(&b.created_at));
        Ok(out)
    }

    /// The records of pod `uid`.
    pub fn for_pod(&self, uid: &str) -> io::Result<Vec<AttachmentRecord>> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|r| r.pod_uid == uid)
            .collect())
    }
}

/// The latest result of an attachment, kept beside its sandbox (per boot). Read and
/// written as a plain JSON value (`{"id", "result", "complete"}`): no serde code of its own
/// in the binary.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultRecord {
    pub id: String,
    /// The last plugin result: the full ADD result once the ADD is complete.
    pub result: Value,
    /// Whether the whole list was run.
    pub complete: bool,
}

/// Writes a result record (no fsync: it describes what dies with the boot).
pub fn save_result(path: &Path, r: &ResultRecord) -> io::Result<()> {
    let v = serde_json::json!({"id": r.id, "result": r.result, "complete": r.complete});
    fsutil::write_json_atomic_volatile(path, &v)
}

/// Reads a result record; `None` when missing or unreadable.
pub fn load_result(path: &Path) -> Option<ResultRecord> {
    let Ok(Loaded::Ok(v)) = fsutil::load_json::<Value>(path) else {
        return None;
    };
    Some(ResultRecord {
        id: v.get("id")?.as_str()?.to_string(),
        result: v.get("result")?.clone(),
        complete: v.get("complete").and_then(Value::as_bool).unwrap_or(false),
    })
}
