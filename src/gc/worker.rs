//! The `container-gc` thread: runs one collection pass ([`collect`]) per request of the sync
//! loop, off the loop's thread. It owns nothing: it lists containers through the runtime
//! (whose busy set keeps it off containers being created or removed elsewhere), removes dead
//! ones through it, and deletes and compresses files under the log root. Requests arriving
//! while a pass runs are dropped (the next resync asks again).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread;
use std::time::SystemTime;

use super::logs::{self, LogGcReason, PodLogDir};
use super::{parse_rfc3339, plan_container_gc, ContainerGcPolicy, DeadContainer, GcRequest};
use crate::logs::rotation::list_rotated;
use crate::runtime::{ContainerState, Runtime};

/// What the collector works with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcSettings {
    pub policy: ContainerGcPolicy,
    /// The CRI log root (`podLogsDir`).
    pub log_root: PathBuf,
    /// `containerLogMaxFiles`.
    pub log_max_files: u32,
}

/// What one pass freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GcReport {
    pub containers_removed: usize,
    pub dirs_removed: usize,
    /// Files deleted (log files, and every file of a removed container or directory).
    pub files_removed: u64,
    /// Bytes those files held.
    pub bytes_freed: u64,
    pub files_compressed: usize,
    /// Bytes compression saved (before minus after).
    pub bytes_compressed_saved: u64,
}

/// One pass asked of the `container-gc` thread.
#[derive(Debug)]
pub struct GcPass {
    pub request: GcRequest,
    /// Where the report goes (the eviction manager's node-level reclaim waits for it).
    pub reply: Option<SyncSender<GcReport>>,
}

/// Asks the `container-gc` thread for a pass.
#[derive(Debug, Clone)]
pub struct GcHandle {
    tx: SyncSender<GcPass>,
}

impl GcHandle {
    /// A handle and the receiving end of its requests (the thread's, or a test's).
    pub fn channel() -> (GcHandle, mpsc::Receiver<GcPass>) {
        let (tx, rx) = mpsc::sync_channel::<GcPass>(1);
        (GcHandle { tx }, rx)
    }

    /// Queues a pass with the loop's current view; dropped if one is already queued.
    pub fn request(&self, req: GcRequest) {
        self.request_with_reply(req, None);
    }

    /// Queues a pass whose report goes to `reply`; dropped if one is already queued (the
    /// waiter then sees its sender gone).
    pub fn request_with_reply(&self, request: GcRequest, reply: Option<SyncSender<GcReport>>) {
        match self.tx.try_send(GcPass { request, reply }) {
            Ok(()) | Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// Starts the `container-gc` thread.
pub fn spawn(runtime: Arc<dyn Runtime>, settings: GcSettings) -> io::Result<GcHandle> {
    let (handle, rx) = GcHandle::channel();
    thread::Builder::new()
        .name("container-gc".into())
        .spawn(move || {
            let mut errors = ErrorLog::default();
            while let Ok(pass) = rx.recv() {
                let report = collect(
                    runtime.as_ref(),
                    &settings,
                    &pass.request,
                    SystemTime::now(),
                    &mut errors,
                );
                errors.end_pass();
                if let Some(reply) = pass.reply {
                    let _ = reply.try_send(report);
                }
            }
        })?;
    Ok(handle)
}

/// Warnings of one pass; one that the previous pass already logged is not logged again (the
/// same failure every minute would fill a flash card).
#[derive(Debug, Default)]
pub struct ErrorLog {
    seen: BTreeSet<String>,
    this_pass: BTreeSet<String>,
}

impl ErrorLog {
    fn warn(&mut self, msg: String) {
        if !self.seen.contains(&msg) {
            log::warn!("container GC: {msg}");
        }
        self.this_pass.insert(msg);
    }

    fn end_pass(&mut self) {
        self.seen = std::mem::take(&mut self.this_pass);
    }
}

/// Files and bytes under `path` (a file or a tree; symlinks not followed).
fn usage(path: &Path) -> (u64, u64) {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return (0, 0);
    };
    if !meta.is_dir() {
        return (1, meta.len());
    }
    let mut total = (0, 0);
    if let Ok(entries) = fs::read_dir(path) {
        for e in entries.flatten() {
            let (f, b) = usage(&e.path());
            total.0 += f;
            total.1 += b;
        }
    }
    total
}

/// Deletes one file, counting it; a file already gone (the log writer prunes too) is fine.
fn delete_file(path: &Path, report: &mut GcReport, errors: &mut ErrorLog) -> bool {
    let size = fs::symlink_metadata(path).map(|m| m.len()).unwrap_or(0);
    match fs::remove_file(path) {
        Ok(()) => {
            report.files_removed += 1;
            report.bytes_freed += size;
            true
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => {
            errors.warn(format!("remove {}: {e}", path.display()));
            false
        }
    }
}

/// The current log file and its rotated (and compressed) files.
fn delete_log_files(log_path: &Path, report: &mut GcReport, errors: &mut ErrorLog) -> (u64, u64) {
    let before = (report.files_removed, report.bytes_freed);
    delete_file(log_path, report, errors);
    if let Ok(rotated) = list_rotated(log_path) {
        for r in rotated {
            delete_file(&r.path, report, errors);
            if !r.compressed {
                // Its compressed twin, should a compression have been interrupted.
                let gz = PathBuf::from(format!("{}.gz", r.path.display()));
                delete_file(&gz, report, errors);
            }
        }
    }
    (
        report.files_removed - before.0,
        report.bytes_freed - before.1,
    )
}

/// Log-file deletions of one pass, summarized per reason (one line each, not one per file).
#[derive(Default)]
struct Deleted(BTreeMap<String, (u64, u64, Vec<PathBuf>)>);

impl Deleted {
    /// Deletes one log file and notes it under `reason`.
    fn delete(
        &mut self,
        path: &Path,
        reason: &LogGcReason,
        report: &mut GcReport,
        errors: &mut ErrorLog,
    ) {
        let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        if delete_file(path, report, errors) {
            self.add(reason, path, size);
        }
    }

    fn add(&mut self, reason: &LogGcReason, path: &Path, bytes: u64) {
        let e = self.0.entry(reason.to_string()).or_default();
        e.0 += 1;
        e.1 += bytes;
        if e.2.len() < 3 {
            e.2.push(path.to_path_buf());
        }
    }

    fn log(self) {
        for (reason, (n, bytes, examples)) in self.0 {
            let names: Vec<String> = examples.iter().map(|p| p.display().to_string()).collect();
            let more = if n > names.len() as u64 {
                format!(" and {} more", n - names.len() as u64)
            } else {
                String::new()
            };
            log::info!(
                "container GC: deleted {n} log file(s), {bytes} bytes ({reason}): {}{more}",
                names.join(", ")
            );
        }
    }
}

/// One collection pass: dead containers and their logs, gone pods' log directories, old
/// rotated files (deleted or compressed), logs of collected instances.
pub fn collect(
    runtime: &dyn Runtime,
    settings: &GcSettings,
    req: &GcRequest,
    now: SystemTime,
    errors: &mut ErrorLog,
) -> GcReport {
    let mut report = GcReport::default();
    let listed = match runtime.list_containers() {
        Ok(l) => l,
        Err(e) => {
            errors.warn(format!("list containers: {e}"));
            return report;
        }
    };
    let dead: Vec<DeadContainer> = listed
        .iter()
        .filter(|c| matches!(c.state, ContainerState::Exited(_)))
        .map(|c| DeadContainer {
            id: c.meta.id.clone(),
            pod_uid: c.meta.pod_uid.clone(),
            pod: format!("{}/{}", c.meta.pod_namespace, c.meta.pod_name),
            container_name: c.meta.container_name.clone(),
            restart_count: c.meta.restart_count,
            // An unreadable time: old, as far as the minimum age goes.
            created: parse_rfc3339(&c.meta.created_at).unwrap_or(SystemTime::UNIX_EPOCH),
            log_path: c.meta.log_path.clone(),
        })
        .collect();
    let mut removed = BTreeSet::new();
    for r in plan_container_gc(&dead, req, &settings.policy, now) {
        let c = &r.container;
        let before = report.bytes_freed;
        // Its record directory holds a few KB (the monitor removed the writable layer at the
        // exit): the report counts log files only.
        if let Err(e) = runtime.remove_container(&c.id) {
            errors.warn(format!("remove container {} of pod {}: {e}", c.id, c.pod));
            continue;
        }
        report.containers_removed += 1;
        let (files, _) = delete_log_files(&c.log_path, &mut report, errors);
        removed.insert(c.id.clone());
        log::info!(
            "container GC: removed dead container {} of pod {} ({}, restart {}) and {files} \
             log file(s), {} bytes: {}",
            c.container_name,
            c.pod,
            c.id,
            c.restart_count,
            report.bytes_freed - before,
            r.reason
        );
    }
    let remaining: Vec<_> = listed
        .iter()
        .filter(|c| !removed.contains(&c.meta.id))
        .collect();
    let uids_with_containers: BTreeSet<String> =
        remaining.iter().map(|c| c.meta.pod_uid.clone()).collect();
    let referenced: BTreeSet<PathBuf> = remaining.iter().map(|c| c.meta.log_path.clone()).collect();
    collect_logs(
        settings,
        req,
        &uids_with_containers,
        &referenced,
        &mut report,
        errors,
    );
    report
}

fn collect_logs(
    settings: &GcSettings,
    req: &GcRequest,
    uids_with_containers: &BTreeSet<String>,
    referenced: &BTreeSet<PathBuf>,
    report: &mut GcReport,
    errors: &mut ErrorLog,
) {
    let entries = match fs::read_dir(&settings.log_root) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => {
            errors.warn(format!("read {}: {e}", settings.log_root.display()));
            return;
        }
    };
    let mut dirs = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(uid) = logs::pod_uid_of_log_dir(&name) else {
            continue;
        };
        let Ok(meta) = e.metadata() else { continue };
        if !meta.is_dir() {
            continue;
        }
        dirs.push(PodLogDir {
            path: e.path(),
            uid: uid.to_string(),
            modified: meta.modified().unwrap_or(SystemTime::now()),
        });
    }
    let gone: BTreeSet<PathBuf> = logs::plan_log_dirs(&dirs, req, uids_with_containers)
        .into_iter()
        .collect();
    for path in &gone {
        let (files, bytes) = usage(path);
        match fs::remove_dir_all(path) {
            Ok(()) => {
                report.dirs_removed += 1;
                report.files_removed += files;
                report.bytes_freed += bytes;
                log::info!(
                    "container GC: removed pod log directory {} ({files} file(s), {bytes} \
                     bytes): {}",
                    path.display(),
                    LogGcReason::PodGone
                );
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => errors.warn(format!("remove {}: {e}", path.display())),
        }
    }
    let mut deleted = Deleted::default();
    let (mut compressed, mut before_total, mut after_total) = (0usize, 0u64, 0u64);
    for d in dirs.iter().filter(|d| !gone.contains(&d.path)) {
        if req.removing.contains(&d.uid) {
            continue;
        }
        let Ok(containers) = fs::read_dir(&d.path) else {
            continue;
        };
        for c in containers.flatten() {
            if !c.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let dir = c.path();
            let Ok(files) = fs::read_dir(&dir) else {
                continue;
            };
            let names: Vec<String> = files
                .flatten()
                .map(|f| f.file_name().to_string_lossy().into_owned())
                .collect();
            // Compressions a killed daemon or a full disk interrupted.
            for n in names.iter().filter(|n| logs::is_compress_tmp(n)) {
                deleted.delete(
                    &dir.join(n),
                    &LogGcReason::InterruptedCompression,
                    report,
                    errors,
                );
            }
            let refs: BTreeSet<String> = referenced
                .iter()
                .filter(|p| p.parent() == Some(dir.as_path()))
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .collect();
            let unreferenced = logs::plan_unreferenced(&names, &refs);
            let unreferenced_set: BTreeSet<&String> = unreferenced.iter().collect();
            for n in &unreferenced {
                deleted.delete(
                    &dir.join(n),
                    &LogGcReason::NoContainerRecord,
                    report,
                    errors,
                );
            }
            let bases: BTreeSet<String> = names
                .iter()
                .filter(|n| !unreferenced_set.contains(n))
                .filter_map(|n| logs::log_base(n).map(|(_, b)| b))
                .collect();
            for base in bases {
                let current = dir.join(&base);
                let rotated = match list_rotated(&current) {
                    Ok(r) => r,
                    Err(e) => {
                        errors.warn(e.to_string());
                        continue;
                    }
                };
                let plan = logs::plan_rotated(&rotated, settings.log_max_files);
                for (p, reason) in &plan.delete {
                    deleted.delete(p, reason, report, errors);
                }
                for p in &plan.compress {
                    match logs::compress(p) {
                        Ok((before, after)) => {
                            compressed += 1;
                            before_total += before;
                            after_total += after;
                        }
                        // Pruned by the log writer meanwhile.
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                        Err(e) => errors.warn(format!("compress {}: {e}", p.display())),
                    }
                }
            }
        }
    }
    deleted.log();
    if compressed > 0 {
        log::info!(
            "container GC: compressed {compressed} rotated log file(s), {before_total} -> \
             {after_total} bytes"
        );
    }
    report.files_compressed += compressed;
    report.bytes_compressed_saved += before_total.saturating_sub(after_total);
}
