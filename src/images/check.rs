//! check: verifies the image store the way `fsck` verifies a filesystem, for `podvisor check`
//! after a power cut or on a device whose storage is suspect, and repairs what it can.
//!
//! What is verified (safe next to a running daemon: blobs are hashed without the store lock,
//! since a committed blob never changes, and everything else under it):
//! - every blob's content against its digest (a full read of the store);
//! - every image record parses, is filed under its own name, and its manifest blob lists the
//!   record's config and layers;
//! - every record's manifest, config and layer blobs exist, and its unpacked layer directories;
//! - leases hold digests.
//!
//! Findings are either [`FindingKind::Interrupted`], what the store's crash protocol leaves by
//! design when a write is cut short (temporary files and directories, a torn lease, content
//! that no record references yet), or [`FindingKind::Inconsistent`], what that protocol must
//! never produce (a torn record, a blob whose content does not match its digest, a record
//! naming missing content). Repairs: leftovers and unreferenced content are removed, a torn
//! record and a corrupt blob are removed, a missing layer directory is unpacked again from its
//! blob. A record whose content is gone is reported, not removed: it names what to import or
//! pull again.

use std::collections::HashSet;
use std::fs;
use std::path::PathBuf;

use super::digest::{Digest, HashingReader};
use super::layer::TMP_LAYER_PREFIX;
use super::manifest::RawManifest;
use super::records::ImageRecord;
use super::store::{ImageError, ImageStore};
use crate::fsutil::{self, Loaded};

/// Whether a finding is a normal leftover of an interrupted write or a broken invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingKind {
    /// Left by an interrupted write, as the crash protocol allows.
    Interrupted,
    /// Never produced by the crash protocol: damage, or a bug.
    Inconsistent,
}

/// One thing `check` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    /// What is wrong, naming the file or image.
    pub message: String,
    /// What was done about it; `None` when nothing was (dry run, or not repairable).
    pub repaired: Option<String>,
}

/// The outcome of [`ImageStore::check`].
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub blobs: usize,
    pub layers: usize,
    pub records: usize,
    pub findings: Vec<Finding>,
}

impl CheckReport {
    /// True when nothing inconsistent is left (interrupted leftovers do not count).
    pub fn consistent(&self) -> bool {
        !self
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::Inconsistent && f.repaired.is_none())
    }
}

/// A repair: what it does, and the action.
type Repair<'r> = (&'r str, &'r mut dyn FnMut() -> Result<(), String>);

struct Checker<'a> {
    store: &'a ImageStore,
    repair: bool,
    report: CheckReport,
}

impl Checker<'_> {
    /// Records a finding; runs `fix` when repairing and records what it did (or its error).
    fn found(&mut self, kind: FindingKind, message: String, fix: Option<Repair<'_>>) {
        let repaired = match fix {
            Some((what, f)) if self.repair => match f() {
                Ok(()) => Some(what.to_string()),
                Err(e) => {
                    self.report.findings.push(Finding {
                        kind,
                        message: format!("{message} (repair failed: {e})"),
                        repaired: None,
                    });
                    return;
                }
            },
            _ => None,
        };
        self.report.findings.push(Finding {
            kind,
            message,
            repaired,
        });
    }
}

fn remove_path(p: &PathBuf) -> Result<(), String> {
    let r = if p.is_dir() {
        fs::remove_dir_all(p)
    } else {
        fs::remove_file(p)
    };
    r.map_err(|e| e.to_string())
}

impl ImageStore {
    /// Verifies the store and, with `repair`, repairs what it can (see the module doc).
    pub fn check(&self, repair: bool) -> Result<CheckReport, ImageError> {
        // The long part (reading every blob) does not hold up container starts.
        let (hashed, suspects) = hash_blobs(self)?;
        let _lock = self.lock()?;
        let mut c = Checker {
            store: self,
            repair,
            report: CheckReport::default(),
        };
        c.report.blobs = hashed;
        check_leftovers(&mut c)?;
        let bad_blobs = check_blobs(&mut c, suspects)?;
        check_records(&mut c, &bad_blobs)?;
        check_leases(&mut c)?;
        c.report.layers = self.layers.list()?.len();
        let unused = self.unreferenced_locked()?;
        let n = unused.blobs.len() + unused.layers.len();
        if n > 0 {
            c.found(
                FindingKind::Interrupted,
                format!(
                    "{} blob(s) and {} layer(s) no image or lease references",
                    unused.blobs.len(),
                    unused.layers.len()
                ),
                Some(("removed (garbage collection)", &mut || {
                    self.gc_locked().map_err(|e| e.to_string())
                })),
            );
        }
        Ok(c.report)
    }
}

/// Temporary files and directories of interrupted imports, pulls' work areas excepted.
fn check_leftovers(c: &mut Checker<'_>) -> Result<(), ImageError> {
    let s = c.store;
    let mut leftovers: Vec<PathBuf> = Vec::new();
    let list = |dir: &std::path::Path, pick: &dyn Fn(&str) -> bool| -> Vec<PathBuf> {
        fs::read_dir(dir)
            .map(|r| {
                r.flatten()
                    .filter(|e| e.file_name().to_str().is_some_and(pick))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    leftovers.extend(list(&s.tmp, &|n| n != "pulls"));
    leftovers.extend(list(s.layers.dir(), &|n| n.starts_with(TMP_LAYER_PREFIX)));
    for dir in [s.records.dir(), s.leases.dir()] {
        leftovers.extend(list(dir, &fsutil::is_atomic_temp_name));
    }
    for p in leftovers {
        c.found(
            FindingKind::Interrupted,
            format!("{}: temporary file of an interrupted write", p.display()),
            Some(("removed", &mut || remove_path(&p))),
        );
    }
    Ok(())
}

fn blob_digest(store: &ImageStore, d: &Digest) -> Result<Option<Digest>, ImageError> {
    let path = store.blobs.path(d);
    match fs::File::open(&path) {
        Ok(f) => HashingReader::new(f)
            .finish()
            .map(|(digest, _)| Some(digest))
            .map_err(|source| ImageError::Io { path, source }),
        // Collected meanwhile.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ImageError::Io { path, source }),
    }
}

/// Hashes every blob without the store lock: (blobs read, those whose content did not match).
fn hash_blobs(store: &ImageStore) -> Result<(usize, Vec<Digest>), ImageError> {
    let mut n = 0;
    let mut suspects = Vec::new();
    for d in store.blobs.list()? {
        if let Some(actual) = blob_digest(store, &d)? {
            n += 1;
            if actual != d {
                suspects.push(d);
            }
        }
    }
    Ok((n, suspects))
}

/// Confirms the suspects under the lock; returns the digests of blobs whose content does not
/// match (removed when repairing).
fn check_blobs(c: &mut Checker<'_>, suspects: Vec<Digest>) -> Result<HashSet<Digest>, ImageError> {
    let mut bad = HashSet::new();
    for d in suspects {
        let Some(actual) = blob_digest(c.store, &d)? else {
            continue;
        };
        if actual == d {
            continue;
        }
        bad.insert(d.clone());
        let store = c.store;
        c.found(
            FindingKind::Inconsistent,
            format!("blob {d}: content does not match its digest (content is {actual})"),
            Some(("removed", &mut || {
                store.blobs.remove(&d).map_err(|e| e.to_string())
            })),
        );
    }
    Ok(bad)
}

fn check_records(c: &mut Checker<'_>, bad_blobs: &HashSet<Digest>) -> Result<(), ImageError> {
    let s = c.store;
    let dir = s.records.dir().to_path_buf();
    let entries = fs::read_dir(&dir).map_err(|source| ImageError::Io {
        path: dir.clone(),
        source,
    })?;
    for entry in entries.flatten() {
        let Some(name) = entry.file_name().to_str().map(str::to_string) else {
            continue;
        };
        if Digest::from_hex(&name).is_none() {
            continue;
        }
        let path = entry.path();
        c.report.records += 1;
        let rec = match fsutil::load_json::<ImageRecord>(&path) {
            Ok(Loaded::Ok(rec)) => rec,
            Ok(Loaded::Missing) => continue,
            Ok(Loaded::Torn(why)) => {
                c.found(
                    FindingKind::Inconsistent,
                    format!("image record {} is torn ({why})", path.display()),
                    Some(("removed", &mut || remove_path(&path))),
                );
                continue;
            }
            Err(source) => return Err(ImageError::Io { path, source }),
        };
        if s.records.path(&rec.reference) != path {
            c.found(
                FindingKind::Inconsistent,
                format!(
                    "image record {} holds {}, which belongs in {}",
                    path.display(),
                    rec.reference,
                    s.records.path(&rec.reference).display()
                ),
                None,
            );
            continue;
        }
        check_record_content(c, &rec, bad_blobs);
    }
    Ok(())
}

/// The content one record names: blobs present and intact, the manifest agreeing with the
/// record, layer directories unpacked.
fn check_record_content(c: &mut Checker<'_>, rec: &ImageRecord, bad_blobs: &HashSet<Digest>) {
    let s = c.store;
    let again = format!("import or pull {} again", rec.reference);
    let Some(d) = rec.digests() else {
        c.found(
            FindingKind::Inconsistent,
            format!("image {}: malformed digests in its record", rec.reference),
            None,
        );
        return;
    };
    let mut missing = Vec::new();
    let blobs = std::iter::once(&d.manifest)
        .chain(std::iter::once(&d.config))
        .chain(d.layers.iter().map(|(b, _)| b));
    for b in blobs {
        if bad_blobs.contains(b) || !s.blobs.exists(b) {
            missing.push(b.to_string());
        }
    }
    if !missing.is_empty() {
        c.found(
            FindingKind::Inconsistent,
            format!(
                "image {}: content missing or corrupt: {}; {again}",
                rec.reference,
                missing.join(", ")
            ),
            None,
        );
        return;
    }
    let agrees = s
        .blobs
        .read_json_blob(&d.manifest)
        .ok()
        .and_then(|data| serde_json::from_slice::<RawManifest>(&data).ok())
        .is_some_and(|m| {
            m.config.digest == rec.config_digest
                && m.layers.len() == rec.layers.len()
                && m.layers
                    .iter()
                    .zip(&rec.layers)
                    .all(|(a, b)| a.digest == b.digest)
        });
    if !agrees {
        c.found(
            FindingKind::Inconsistent,
            format!(
                "image {}: its manifest {} does not list the record's config and layers; {again}",
                rec.reference, rec.digest
            ),
            None,
        );
        return;
    }
    for (blob, diff_id) in &d.layers {
        if s.layers.exists(diff_id) {
            continue;
        }
        c.found(
            FindingKind::Inconsistent,
            format!("image {}: layer {diff_id} is not unpacked", rec.reference),
            Some(("unpacked again from its blob", &mut || {
                s.layers
                    .ensure(&s.blobs.path(blob), blob, diff_id)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })),
        );
    }
}

fn check_leases(c: &mut Checker<'_>) -> Result<(), ImageError> {
    for (path, why) in c.store.leases.torn()? {
        c.found(
            FindingKind::Interrupted,
            format!("lease {} is torn ({why})", path.display()),
            Some(("removed", &mut || remove_path(&path))),
        );
    }
    Ok(())
}
