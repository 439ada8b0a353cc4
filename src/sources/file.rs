//! sources::file: the manifest directory source — an inotify watch plus a periodic full
//! re-read, debounced, with changes detected by content hash.
//!
//! Design:
//! - One thread owns all state. The inotify watcher (notify's `RecommendedWatcher`,
//!   non-recursive) forwards its events into the thread's channel; the thread turns an event
//!   on a manifest name into a pending read of that name, and reads it once the name has
//!   been quiet for `debounce` (at most [`DEBOUNCE_MAX_WAIT`] after its first event, so a
//!   steady stream of writes cannot starve it). An editor's write-temp-then-rename is thus
//!   one read of the final content.
//! - Every `check_frequency` the whole directory is re-read (this catches missed events,
//!   queue overflows and changes behind symbolic links); files vanished since are
//!   `FileRemoved`. The same scan re-establishes the watch when the directory was replaced.
//! - Events are only sent when the content hash (SHA-256) changes, so re-reads and spurious
//!   events are silent.
//! - The periodic re-read opens only files whose stat identity (device, inode, size, mtime,
//!   ctime) changed since they were read, or was not settled then (ctime within
//!   [`STAMP_SETTLE`] of the read, where a write in the same timestamp tick could hide). An
//!   open is an inotify event of the watched directory: re-reading every file every 20 s woke
//!   the watcher and this thread 0.75 times a second with 20 idle pods (issue 47) for
//!   nothing. Event-driven reads, and every read after a failed scan, always open the file.
//! - Symbolic links to regular files are followed (friendlier to configuration management
//!   that links manifests into place); a link to a directory is ignored like a directory, a
//!   dangling link is a `FileError`. The watch sees changes of the link itself; changes of
//!   the target's content are seen by the periodic re-read, or sooner when something else in
//!   the directory changes (any event there triggers a debounced full re-read while links
//!   are present, which covers the atomic `..data` link swap used by Kubernetes volumes).
//! - Non-regular files (fifo, socket, device) are never opened: `FileError`. Files are
//!   opened with `O_NONBLOCK` and checked again after opening, so a file swapped for a fifo
//!   in between cannot block the source.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};

use super::{is_manifest_name, Gate, SourceError, SourceEvent, SourceHandle, MAX_MANIFEST_BYTES};

/// The kubelet's `fileCheckFrequency`.
pub const DEFAULT_FILE_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
/// Quiet time after the last event for a file before it is read.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(30);
/// A file with events is read at the latest this long after its first event, even if the
/// events keep coming. Also the largest accepted `debounce`.
pub const DEBOUNCE_MAX_WAIT: Duration = Duration::from_millis(200);
/// First retry delay after the directory could not be read or watched.
pub const DIR_RETRY_MIN: Duration = Duration::from_secs(1);
/// The retry delay doubles up to this.
pub const DIR_RETRY_MAX: Duration = Duration::from_secs(20);

/// Configuration of [`start_file_source`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileSourceConfig {
    /// The manifest directory (not read recursively). A relative path is made absolute
    /// against the current directory at start.
    pub dir: PathBuf,
    /// Period of the full re-read ([`DEFAULT_FILE_CHECK_FREQUENCY`]).
    pub check_frequency: Duration,
    /// Quiet time before reading a changed file ([`DEFAULT_DEBOUNCE`]); at most
    /// [`DEBOUNCE_MAX_WAIT`].
    pub debounce: Duration,
}

impl FileSourceConfig {
    /// A configuration with the default frequency and debounce.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        FileSourceConfig {
            dir: dir.into(),
            check_frequency: DEFAULT_FILE_CHECK_FREQUENCY,
            debounce: DEFAULT_DEBOUNCE,
        }
    }
}

/// Starts watching `cfg.dir` on a new thread. The first scan happens at once and sends
/// `FileChanged` for every manifest (or `DirError` if the directory is missing — not fatal:
/// the source retries and picks the directory up when it appears).
pub fn start_file_source(
    cfg: FileSourceConfig,
    tx: Sender<SourceEvent>,
) -> Result<SourceHandle, SourceError> {
    start(cfg, tx, true)
}

/// [`start_file_source`], with the inotify watch optionally left out (tests of the periodic
/// re-read).
fn start(
    cfg: FileSourceConfig,
    tx: Sender<SourceEvent>,
    use_inotify: bool,
) -> Result<SourceHandle, SourceError> {
    if cfg.check_frequency.is_zero() {
        return Err(SourceError::InvalidConfig {
            field: "check_frequency",
            reason: "must be greater than zero".to_string(),
        });
    }
    if cfg.debounce > DEBOUNCE_MAX_WAIT {
        return Err(SourceError::InvalidConfig {
            field: "debounce",
            reason: format!(
                "{:?} is longer than the {:?} maximum",
                cfg.debounce, DEBOUNCE_MAX_WAIT
            ),
        });
    }
    let dir = if cfg.dir.is_absolute() {
        cfg.dir.clone()
    } else {
        std::env::current_dir()
            .map_err(|source| SourceError::CurrentDir {
                dir: cfg.dir.clone(),
                source,
            })?
            .join(&cfg.dir)
    };
    let gate = Gate::new();
    let (msg_tx, msg_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut worker = Worker {
        check_frequency: cfg.check_frequency,
        debounce: cfg.debounce,
        scanner: Scanner::new(dir),
        tx,
        gate: Arc::clone(&gate),
        msg_tx: msg_tx.clone(),
        msg_rx,
        use_inotify,
        watcher: None,
        pending: HashMap::new(),
        pending_full: None,
        next_scan: Instant::now(),
        retry: DIR_RETRY_MIN,
        alive: true,
        initial_scan_reported: false,
    };
    let thread = std::thread::Builder::new()
        .name("source-file".to_string())
        .spawn(move || {
            let _done = done_tx;
            worker.run();
        })
        .map_err(|source| SourceError::Spawn {
            what: "file",
            source,
        })?;
    let wake = Box::new(move || {
        // The thread may already have ended; nothing to wake then.
        let _ = msg_tx.send(Msg::Stop);
    });
    Ok(SourceHandle::new(gate, wake, done_rx, thread))
}

/// Messages to the source thread.
enum Msg {
    Notify(notify::Result<notify::Event>),
    Stop,
}

/// Device and inode of the watched directory, to notice it being replaced.
type DirId = (u64, u64);

/// Events seen for a name (or for the whole directory) and not yet acted on.
#[derive(Debug, Clone, Copy)]
struct Pending {
    first: Instant,
    last: Instant,
    /// The last event finished a write (a rename into place, or the close of a file opened
    /// for writing): the content is complete and can be read without waiting.
    complete: bool,
}

impl Pending {
    fn new(now: Instant) -> Self {
        Pending {
            first: now,
            last: now,
            complete: false,
        }
    }

    fn due(&self, debounce: Duration) -> Instant {
        if self.complete {
            return self.last;
        }
        (self.last + debounce).min(self.first + DEBOUNCE_MAX_WAIT)
    }
}

/// Whether an event marks a write as finished (see [`Pending::complete`]).
fn completes_write(kind: &EventKind) -> bool {
    use notify::event::{ModifyKind, RenameMode};
    matches!(
        kind,
        EventKind::Access(AccessKind::Close(AccessMode::Write))
            | EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
    )
}

struct Worker {
    check_frequency: Duration,
    debounce: Duration,
    scanner: Scanner,
    tx: Sender<SourceEvent>,
    gate: Arc<Gate>,
    /// Cloned into each watcher's event handler.
    msg_tx: Sender<Msg>,
    msg_rx: Receiver<Msg>,
    use_inotify: bool,
    watcher: Option<(RecommendedWatcher, DirId)>,
    pending: HashMap<OsString, Pending>,
    /// An event on a non-manifest name while symbolic links are present: re-read all.
    pending_full: Option<Pending>,
    next_scan: Instant,
    retry: Duration,
    /// False once the receiver is gone or the source is stopped.
    alive: bool,
    /// `FileScanComplete` was sent (after the first successful scan).
    initial_scan_reported: bool,
}

impl Worker {
    fn run(&mut self) {
        while self.alive {
            let now = Instant::now();
            if now >= self.next_scan {
                self.full_scan();
                continue;
            }
            self.read_due(now);
            if !self.alive {
                return;
            }
            let mut deadline = self.next_scan;
            for p in self.pending.values().chain(self.pending_full.iter()) {
                deadline = deadline.min(p.due(self.debounce));
            }
            match self
                .msg_rx
                .recv_timeout(deadline.saturating_duration_since(now))
            {
                Ok(Msg::Notify(event)) => self.on_notify(event),
                Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => {}
            }
            self.alive = self.alive && self.gate.is_open();
        }
    }

    fn emit(&mut self, events: Vec<SourceEvent>) {
        if !events.is_empty() {
            crate::tp!("src.emit");
        }
        for event in events {
            if !self.alive || !self.gate.send(&self.tx, event) {
                self.alive = false;
                return;
            }
        }
    }

    /// Reads the names whose debounce has expired; starts a full re-read if one is due.
    fn read_due(&mut self, now: Instant) {
        if let Some(p) = self.pending_full {
            if p.due(self.debounce) <= now {
                self.pending_full = None;
                self.next_scan = now;
                return;
            }
        }
        let debounce = self.debounce;
        let due: Vec<OsString> = self
            .pending
            .iter()
            .filter(|(_, p)| p.due(debounce) <= now)
            .map(|(name, _)| name.clone())
            .collect();
        let mut out = Vec::new();
        for name in due {
            self.pending.remove(&name);
            self.scanner.reconcile(&name, false, &mut out);
        }
        self.emit(out);
    }

    fn on_notify(&mut self, event: notify::Result<notify::Event>) {
        crate::tp!("src.notify");
        let now = Instant::now();
        let event = match event {
            Ok(event) => event,
            Err(err) => {
                // The full re-read repairs whatever the watcher missed.
                log::debug!(
                    "manifest directory {} watch error: {err}",
                    self.scanner.dir.display()
                );
                self.next_scan = now;
                return;
            }
        };
        if event.need_rescan() {
            self.next_scan = now;
            return;
        }
        // Opens and read-only closes are our own reads (and anyone else's): not changes.
        if matches!(event.kind, EventKind::Access(kind) if kind != AccessKind::Close(AccessMode::Write))
        {
            return;
        }
        // After a directory error, the recovery scan settles everything; late events from
        // the old watcher are moot.
        if self.scanner.resync {
            return;
        }
        for path in &event.paths {
            if *path == self.scanner.dir {
                // The directory itself was deleted, moved, or its attributes changed.
                self.next_scan = now;
                continue;
            }
            if path.parent() != Some(self.scanner.dir.as_path()) {
                continue;
            }
            let Some(name) = path.file_name() else {
                continue;
            };
            let slot = if is_manifest_name(name) {
                Some(
                    self.pending
                        .entry(name.to_os_string())
                        .or_insert(Pending::new(now)),
                )
            } else if self.scanner.has_symlinks {
                Some(self.pending_full.get_or_insert(Pending::new(now)))
            } else {
                None
            };
            if let Some(p) = slot {
                p.last = now;
                p.complete = completes_write(&event.kind);
            }
        }
    }

    /// Re-establishes the watch if needed, re-reads the directory, and schedules the next
    /// scan (or the next retry after a failure).
    fn full_scan(&mut self) {
        let now = Instant::now();
        let watch_problem = if self.use_inotify {
            self.ensure_watch().err()
        } else {
            None
        };
        let mut out = Vec::new();
        let skip: HashSet<OsString> = self.pending.keys().cloned().collect();
        let result = self.scanner.scan(&skip, &mut out);
        if result.is_ok() && !self.initial_scan_reported {
            self.initial_scan_reported = true;
            out.push(SourceEvent::FileScanComplete {
                dir: self.scanner.dir.clone(),
            });
        }
        self.emit(out);
        let problem = match result {
            Ok(()) => watch_problem,
            Err(problem) => {
                self.pending.clear();
                self.pending_full = None;
                self.watcher = None;
                Some(problem)
            }
        };
        match problem {
            None => {
                self.retry = DIR_RETRY_MIN;
                self.next_scan = now + self.check_frequency;
            }
            Some(problem) => {
                let dir = self.scanner.dir.clone();
                let message = problem.to_string();
                self.emit(vec![SourceEvent::DirError { dir, message }]);
                self.next_scan = now + self.retry.min(self.check_frequency);
                self.retry = (self.retry * 2).min(DIR_RETRY_MAX);
            }
        }
    }

    /// Makes sure the inotify watch is on the directory currently at the configured path.
    fn ensure_watch(&mut self) -> Result<(), DirProblem> {
        let dir = &self.scanner.dir;
        // Identify the directory before watching it: if it is replaced in between, the next
        // scan sees a different identity and watches again.
        let meta = fs::metadata(dir).map_err(|source| DirProblem::Stat { source })?;
        let id = (meta.dev(), meta.ino());
        if matches!(&self.watcher, Some((_, watched)) if *watched == id) {
            return Ok(());
        }
        self.watcher = None;
        let forward = self.msg_tx.clone();
        let mut watcher = RecommendedWatcher::new(
            move |event| {
                // The source thread may be gone; then nobody needs the event.
                let _ = forward.send(Msg::Notify(event));
            },
            notify::Config::default(),
        )
        .map_err(|source| DirProblem::Watcher { source })?;
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|source| DirProblem::Watch { source })?;
        self.watcher = Some((watcher, id));
        Ok(())
    }
}

/// Why the directory could not be read or watched; sent as [`SourceEvent::DirError`]'s
/// message, which names the directory.
#[derive(Debug, thiserror::Error)]
enum DirProblem {
    #[error("cannot stat directory: {source}")]
    Stat { source: io::Error },
    #[error("cannot create an inotify watcher: {source}")]
    Watcher { source: notify::Error },
    #[error("cannot watch directory: {source}")]
    Watch { source: notify::Error },
    #[error("cannot read directory: {source}")]
    Read { source: io::Error },
}

/// How long after a file's last change its stat identity is trusted to tell a later change:
/// timestamps have the kernel's coarse clock tick (a few ms), so two writes of the same size
/// within one tick leave the same stamp; a file read this long after its ctime cannot have
/// had a second write in that tick after the read.
pub const STAMP_SETTLE: Duration = Duration::from_secs(1);

/// A file's stat identity: changes with any write, truncate, rename over or chmod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Stamp {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of a file read at `read_at` (wall clock), if the file had been unchanged
    /// for `settle` by then.
    fn settled(self, read_at: std::time::SystemTime, settle: Duration) -> Option<Stamp> {
        let ctime = std::time::UNIX_EPOCH.checked_add(Duration::new(
            u64::try_from(self.ctime.0).ok()?,
            u32::try_from(self.ctime.1).ok()?,
        ))?;
        let age = read_at.duration_since(ctime).ok()?;
        (age >= settle).then_some(self)
    }
}

/// What the source last reported for a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Known {
    /// `FileChanged` with content of this SHA-256; the file's stamp when read, if it had
    /// settled (a regular file, not through a symbolic link).
    Content([u8; 32], Option<Stamp>),
    /// `FileError`.
    Error,
}

/// The directory's known state and the reads that update it; no threads, no watcher.
#[derive(Debug)]
struct Scanner {
    dir: PathBuf,
    known: BTreeMap<OsString, Known>,
    /// [`STAMP_SETTLE`]; shorter in tests.
    settle: Duration,
    /// The last scan failed: the next successful one re-sends every file.
    resync: bool,
    /// The last scan saw a symbolic link with a manifest name.
    has_symlinks: bool,
}

impl Scanner {
    fn new(dir: PathBuf) -> Self {
        Scanner {
            dir,
            known: BTreeMap::new(),
            settle: STAMP_SETTLE,
            resync: false,
            has_symlinks: false,
        }
    }

    /// Re-reads the whole directory, leaving out the names in `skip` (they have a debounced
    /// read pending). `Err` is the directory's problem.
    fn scan(
        &mut self,
        skip: &HashSet<OsString>,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), DirProblem> {
        let result = self.scan_inner(skip, out);
        if result.is_err() {
            self.resync = true;
        }
        result
    }

    fn scan_inner(
        &mut self,
        skip: &HashSet<OsString>,
        out: &mut Vec<SourceEvent>,
    ) -> Result<(), DirProblem> {
        let mut entries = Vec::new();
        let read = |source| DirProblem::Read { source };
        for entry in fs::read_dir(&self.dir).map_err(read)? {
            let entry = entry.map_err(read)?;
            let name = entry.file_name();
            if is_manifest_name(&name) {
                let is_symlink = entry.file_type().is_ok_and(|t| t.is_symlink());
                entries.push((name, is_symlink));
            }
        }
        // In name order, so that events are reproducible.
        entries.sort();
        let force = self.resync;
        let mut seen = HashSet::new();
        let mut has_symlinks = false;
        for (name, is_symlink) in entries {
            has_symlinks |= is_symlink;
            seen.insert(name.clone());
            if !skip.contains(&name) {
                if !force && !is_symlink && self.unchanged_since_read(&name) {
                    continue;
                }
                self.reconcile(&name, force, out);
            }
        }
        let vanished: Vec<OsString> = self
            .known
            .keys()
            .filter(|name| !seen.contains(*name))
            .cloned()
            .collect();
        for name in vanished {
            self.known.remove(&name);
            out.push(SourceEvent::FileRemoved {
                path: self.dir.join(&name),
            });
        }
        self.resync = false;
        self.has_symlinks = has_symlinks;
        Ok(())
    }

    /// Whether `name` is a regular file whose settled stamp is the one it had when it was
    /// read (a stat, no open).
    fn unchanged_since_read(&self, name: &OsStr) -> bool {
        let Some(Known::Content(_, Some(stamp))) = self.known.get(name) else {
            return false;
        };
        match fs::symlink_metadata(self.dir.join(name)) {
            Ok(meta) => meta.is_file() && Stamp::of(&meta) == *stamp,
            Err(_) => false,
        }
    }

    /// Reads one name and reports what changed since the last report; `force` re-sends an
    /// unchanged content.
    fn reconcile(&mut self, name: &OsStr, force: bool, out: &mut Vec<SourceEvent>) {
        let path = self.dir.join(name);
        let read_at = std::time::SystemTime::now();
        match read_manifest(&path) {
            ReadOutcome::Absent => {
                if self.known.remove(name).is_some() {
                    out.push(SourceEvent::FileRemoved { path });
                }
            }
            ReadOutcome::Error(message) => {
                self.known.insert(name.to_os_string(), Known::Error);
                out.push(SourceEvent::FileError { path, message });
            }
            ReadOutcome::Data { data, stamp } => {
                let hash: [u8; 32] = Sha256::digest(&data).into();
                let stamp = stamp.and_then(|s| s.settled(read_at, self.settle));
                let changed =
                    !matches!(self.known.get(name), Some(Known::Content(h, _)) if *h == hash);
                self.known
                    .insert(name.to_os_string(), Known::Content(hash, stamp));
                if force || changed {
                    out.push(SourceEvent::FileChanged { path, data });
                }
            }
        }
    }
}

/// The outcome of reading one manifest path.
#[derive(Debug)]
enum ReadOutcome {
    /// Nothing there, or a directory (ignored).
    Absent,
    /// The content, and the stamp of the open file when the path is not a symbolic link.
    Data {
        data: Vec<u8>,
        stamp: Option<Stamp>,
    },
    Error(String),
}

fn describe_type(t: fs::FileType) -> &'static str {
    if t.is_fifo() {
        "a fifo"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// Reads a manifest file, following a symbolic link to a regular file.
fn read_manifest(path: &Path) -> ReadOutcome {
    let meta = match fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return ReadOutcome::Absent,
        Err(e) => return ReadOutcome::Error(format!("cannot stat: {e}")),
    };
    let is_symlink = meta.file_type().is_symlink();
    let meta = if is_symlink {
        match fs::metadata(path) {
            Ok(target) => target,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return ReadOutcome::Error(
                    "broken symbolic link: the target does not exist".to_string(),
                )
            }
            Err(e) => {
                return ReadOutcome::Error(format!("cannot stat the symbolic link's target: {e}"))
            }
        }
    } else {
        meta
    };
    if meta.is_dir() {
        return ReadOutcome::Absent;
    }
    if !meta.is_file() {
        return ReadOutcome::Error(format!(
            "not a regular file: it is {}",
            describe_type(meta.file_type())
        ));
    }
    let file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return ReadOutcome::Absent,
        Err(e) => return ReadOutcome::Error(format!("cannot open: {e}")),
    };
    match read_open_file(file) {
        ReadOutcome::Data { data, stamp } => ReadOutcome::Data {
            data,
            stamp: stamp.filter(|_| !is_symlink),
        },
        other => other,
    }
}

fn too_large(size: u64) -> ReadOutcome {
    ReadOutcome::Error(format!(
        "file is {size} bytes, larger than the {MAX_MANIFEST_BYTES}-byte (10 MiB) limit"
    ))
}

fn read_open_file(file: File) -> ReadOutcome {
    // Checked again on the open file: the path may have been replaced since the stat.
    let meta = match file.metadata() {
        Ok(meta) => meta,
        Err(e) => return ReadOutcome::Error(format!("cannot stat: {e}")),
    };
    if meta.is_dir() {
        return ReadOutcome::Absent;
    }
    if !meta.is_file() {
        return ReadOutcome::Error(format!(
            "not a regular file: it is {}",
            describe_type(meta.file_type())
        ));
    }
    if meta.len() > MAX_MANIFEST_BYTES {
        return too_large(meta.len());
    }
    // The length fits in usize: it is at most MAX_MANIFEST_BYTES.
    let mut data = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    if let Err(e) = file.take(MAX_MANIFEST_BYTES + 1).read_to_end(&mut data) {
        return ReadOutcome::Error(format!("cannot read: {e}"));
    }
    if data.len() as u64 > MAX_MANIFEST_BYTES {
        // It grew while being read.
        return too_large(data.len() as u64);
    }
    // The stamp from before the read: a write during the read changes the file's stamp
    // after it, so the next scan reads it again.
    ReadOutcome::Data {
        data,
        stamp: Some(Stamp::of(&meta)),
    }
}

#[cfg(test)]
mod tests;
