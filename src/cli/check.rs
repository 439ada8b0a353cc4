//! cli::check: `podvisor check [--dry-run]`, the consistency check of the persistent state
//! (see [`crate::check`]) printed as one line per finding and a summary.

use std::path::Path;

use crate::check::CheckError;
use crate::images::FindingKind;

/// `podvisor check`: one line per finding, a summary, exit 1 if something inconsistent is left.
pub fn check(root_dir: &Path, dry_run: bool) -> Result<i32, CheckError> {
    let report = crate::check::check(root_dir, !dry_run)?;
    for f in report.all_findings() {
        let kind = match f.kind {
            FindingKind::Interrupted => "interrupted",
            FindingKind::Inconsistent => "INCONSISTENT",
        };
        let action = match &f.repaired {
            Some(what) => what.as_str(),
            None if dry_run => "not repaired (dry run)",
            None => "not repaired",
        };
        println!("{kind}: {}: {action}", f.message);
    }
    let consistent = report.consistent();
    println!(
        "checked {} blob(s), {} layer(s), {} image record(s), {} desired pod(s), {} container \
         record(s): {} finding(s); {}",
        report.images.blobs,
        report.images.layers,
        report.images.records,
        report.desired_pods,
        report.containers,
        report.all_findings().count(),
        if consistent {
            "consistent"
        } else {
            "NOT consistent"
        }
    );
    Ok(if consistent { 0 } else { 1 })
}
