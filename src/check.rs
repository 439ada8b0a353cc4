//! check: `podvisor check`, the consistency check of podvisor's persistent state under the
//! root dir, for after a power cut or on storage that is suspect.
//!
//! - The image store, verified and repaired by [`ImageStore::check`].
//! - Desired-pod records (`static-pods/*.json`, durable): a torn one is inconsistent; the
//!   repair removes it (its manifest defines the pod again, as the daemon's start does).
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
    for path in entries(&root_dir.join("static-pods"))? {
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
            continue;
        }
        if !name.ends_with(".json") {
            continue;
        }
        report.desired_pods += 1;
        let loaded =
            fsutil::load_json::<serde_json::Value>(&path).map_err(|source| CheckError::Io {
                path: path.clone(),
                source,
            })?;
        if let Loaded::Torn(why) = loaded {
            let repaired = if repair {
                fs::remove_file(&path).map_err(|source| CheckError::Io {
                    path: path.clone(),
                    source,
                })?;
                Some("removed (its manifest defines the pod again)".to_string())
            } else {
                None
            };
            report.findings.push(finding(
                FindingKind::Inconsistent,
                format!("desired-pod record {} is torn ({why})", path.display()),
                repaired,
            ));
        }
    }
    for dir in entries(&root_dir.join("containers"))? {
        if !dir.is_dir() {
            continue;
        }
        report.containers += 1;
        let load = |name: &str| {
            let p = dir.join(name);
            match name {
                "meta.json" => fsutil::load_json::<ContainerMeta>(&p).map(|l| match l {
                    Loaded::Torn(w) => Some(w),
                    _ => None,
                }),
                _ => fsutil::load_json::<ExitRecord>(&p).map(|l| match l {
                    Loaded::Torn(w) => Some(w),
                    _ => None,
                }),
            }
            .map_err(|source| CheckError::Io { path: p, source })
        };
        if let Some(why) = load("meta.json")? {
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
        if let Some(why) = load("exit.json")? {
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
