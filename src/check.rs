//! check: `podvisor check`, the consistency check of podvisor's persistent state under the
//! root dir, for after a power cut or on storage that is suspect.
//!
//! - The image store, verified and repaired by [`ImageStore::check`].
//! - Desired-pod records (`static-pods/*.json`, durable): a torn one is inconsistent; the
//!   repair removes it (its manifest defines the pod again, as the daemon's start does).
//!   Pod generation records (`pod-generations/*.json`, safe updates) the same way.
//! - Container records (`containers/<id>/`): a torn identity is an interrupted creation (it is
//!   made durable right after the container starts); a torn exit record is inconsistent (it is
//!   written durably). The daemon owns these and cleans them at its start; the check reports.
//!
//! The check takes the image store's lock and touches container records not at all, so it is
//! safe to run next to a daemon.

use std::fs;
use std::path::{Path, PathBuf};

use crate::fsutil::{self, Loaded};
use crate::images::{CheckReport, Finding, FindingKind, ImageError, ImageStore};
use crate::runtime::{ContainerMeta, ExitRecord};
use crate::sync::generations::GenerationStore;
use crate::sync::store::DesiredStore;

/// Errors of `podvisor check`.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("image store: {0}")]
    Images(#[from] ImageError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Everything `podvisor check` found.
#[derive(Debug, Clone, Default)]
pub struct StateReport {
    pub images: CheckReport,
    pub desired_pods: usize,
    pub containers: usize,
    /// Findings outside the image store.
    pub findings: Vec<Finding>,
}

impl StateReport {
    /// True when nothing inconsistent is left unrepaired.
    pub fn consistent(&self) -> bool {
        self.images.consistent()
            && !self
                .findings
                .iter()
                .any(|f| f.kind == FindingKind::Inconsistent && f.repaired.is_none())
    }

    /// Every finding, the image store's first.
    pub fn all_findings(&self) -> impl Iterator<Item = &Finding> {
        self.images.findings.iter().chain(&self.findings)
    }
}

fn entries(dir: &Path) -> Result<Vec<PathBuf>, CheckError> {
    match fs::read_dir(dir) {
        Ok(r) => {
            let mut v: Vec<PathBuf> = r.flatten().map(|e| e.path()).collect();
            v.sort();
            Ok(v)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(source) => Err(CheckError::Io {
            path: dir.to_path_buf(),
            source,
        }),
    }
}

/// Why the record at `path` is torn, `None` when it is missing or good.
fn torn<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<String>, CheckError> {
    match fsutil::load_json::<T>(path) {
        Ok(Loaded::Torn(why)) => Ok(Some(why)),
        Ok(_) => Ok(None),
        Err(source) => Err(CheckError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn finding(kind: FindingKind, message: String, repaired: Option<String>) -> Finding {
    Finding {
        kind,
        message,
        repaired,
    }
}

/// Checks the state under `root_dir`; with `repair`, repairs what it can.
pub fn check(root_dir: &Path, repair: bool) -> Result<StateReport, CheckError> {
    let store = ImageStore::open_as_is(&root_dir.join("images"))?;
    let mut report = StateReport {
        images: store.check(repair)?,
        ..StateReport::default()
    };
    let store_dir = root_dir.join("static-pods");
    for path in entries(&store_dir)? {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if fsutil::is_atomic_temp_name(&name) {
            report.findings.push(finding(
                FindingKind::Interrupted,
                format!(
                    "{}: temporary file of an interrupted write (the daemon removes it at start)",
                    path.display()
                ),
                None,
            ));
        }
    }
    let (n, torn_desired) = DesiredStore::new(store_dir).scan();
    report.desired_pods = n;
    let (_, torn_generations) = GenerationStore::new(root_dir.join("pod-generations")).scan();
    let torn_records = [
        (
            "desired-pod",
            "its manifest defines the pod again",
            torn_desired,
        ),
        (
            "pod generation",
            "the pod's Ready generation is recorded again when Ready",
            torn_generations,
        ),
    ];
    for (what, then, records) in torn_records {
        for (path, why) in records {
            let repaired = if repair {
                fs::remove_file(&path).map_err(|source| CheckError::Io {
                    path: path.clone(),
                    source,
                })?;
                Some(format!("removed ({then})"))
            } else {
                None
            };
            report.findings.push(finding(
                FindingKind::Inconsistent,
                format!("{what} record {} is torn ({why})", path.display()),
                repaired,
            ));
        }
    }
    for dir in entries(&root_dir.join("containers"))? {
        if !dir.is_dir() {
            continue;
        }
        report.containers += 1;
        if let Some(why) = torn::<ContainerMeta>(&dir.join("meta.json"))? {
            report.findings.push(finding(
                FindingKind::Interrupted,
                format!(
                    "{}: torn identity of a container whose start a power cut interrupted \
                     ({why}; the daemon removes it at start)",
                    dir.join("meta.json").display()
                ),
                None,
            ));
        }
        if let Some(why) = torn::<ExitRecord>(&dir.join("exit.json"))? {
            report.findings.push(finding(
                FindingKind::Inconsistent,
                format!(
                    "{}: torn exit record ({why}; the daemon reports the container's status as \
                     unknown, or removes the record, at start)",
                    dir.join("exit.json").display()
                ),
                None,
            ));
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_state_records_are_reported_and_desired_pods_repaired() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        fs::create_dir_all(root.join("static-pods")).expect("mkdir");
        fs::write(root.join("static-pods/u1.json"), b"").expect("torn record");
        fs::write(root.join("static-pods/.u2.json.tmp-5"), b"{").expect("temp");
        fs::create_dir_all(root.join("pod-generations")).expect("mkdir");
        fs::write(
            root.join("pod-generations/default_web-n.json"),
            b"{\"source\"",
        )
        .expect("torn");
        fs::create_dir_all(root.join("containers/c1")).expect("mkdir");
        fs::write(root.join("containers/c1/meta.json"), b"").expect("torn identity");
        fs::write(root.join("containers/c1/exit.json"), b"{\"exit_code\"").expect("torn exit");
        let r = check(root, false).expect("check");
        assert!(!r.consistent());
        assert_eq!((r.desired_pods, r.containers), (1, 1));
        let kinds: Vec<(FindingKind, bool)> = r
            .all_findings()
            .map(|f| (f.kind, f.repaired.is_some()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (FindingKind::Interrupted, false),
                (FindingKind::Inconsistent, false),
                (FindingKind::Inconsistent, false),
                (FindingKind::Interrupted, false),
                (FindingKind::Inconsistent, false),
            ],
            "{:#?}",
            r.findings
        );
        assert!(root.join("static-pods/u1.json").exists(), "dry run");
        let r = check(root, true).expect("check");
        assert!(
            !root.join("static-pods/u1.json").exists(),
            "torn record removed"
        );
        assert!(!root.join("pod-generations/default_web-n.json").exists());
        // The torn exit record is the daemon's to handle: still inconsistent.
        assert!(!r.consistent());
    }
}
