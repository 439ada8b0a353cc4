//! The CRI log writer used by a container's monitor process: turns arbitrary chunks read from
//! the container's stdout and stderr pipes into CRI records (one line buffer per stream, long
//! lines split into `P` records of `max_line` bytes, each line ended by an `F` record), writes
//! each record with a single append, and rotates by size between records, keeping at most
//! `max_files` files (kubelet `containerLogMaxSize` / `containerLogMaxFiles`).
//!
//! A log that cannot be written (disk full, log directory gone) never stops the container or
//! its monitor: records are dropped and counted, as containerd drops output it cannot write,
//! and once writing works again a marker record says how much was lost and why. A record a
//! short write left half-written is cut off again, so the file never holds a torn record.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::rotation::{list_rotated, rotated_path, RotationKey};
use super::timestamp::format_timestamp;
use super::{LogError, Stream};

/// Limits of a container log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOptions {
    /// Rotate before a record would make the current file larger than this (bytes).
    pub max_size: u64,
    /// Files kept, the current one included (so `max_files - 1` rotated files).
    pub max_files: u32,
    /// Longest content of one record; longer lines are split into `P` records.
    pub max_line: usize,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            max_size: 10 * 1024 * 1024,
            max_files: 5,
            max_line: 16 * 1024,
        }
    }
}

impl LogOptions {
    fn validate(&self) -> Result<(), LogError> {
        let invalid = |field, reason| Err(LogError::InvalidOptions { field, reason });
        if self.max_size == 0 {
            return invalid("max_size", "must be at least 1 byte");
        }
        if self.max_files == 0 {
            return invalid("max_files", "must be at least 1 (the current file)");
        }
        if self.max_line == 0 {
            return invalid("max_line", "must be at least 1 byte");
        }
        Ok(())
    }
}

/// Writes one container's CRI log file, rotating it by size.
///
/// Meant for a single-threaded monitor that reads both pipes of a container. On a write error
/// the record being written and the rest of that chunk are dropped (the pipe must keep being
/// drained anyway); the writer stays usable. Pending partial lines are flushed as `F` records
/// by [`CriLogWriter::finish`], and on drop as a last resort.
#[derive(Debug)]
pub struct CriLogWriter {
    path: PathBuf,
    opts: LogOptions,
    /// `None` after a failed re-open during rotation; the next record opens the path again.
    file: Option<File>,
    /// Bytes in the current file.
    size: u64,
    /// Per-stream bytes of a line not yet ended; never longer than `max_line` between calls.
    pending: [Vec<u8>; 2],
    /// Scratch buffer holding the record being written.
    record: Vec<u8>,
    /// Set while rotation keeps failing, so the failure is logged once, not for every record.
    rotation_failing: bool,
    /// Output dropped since the last successful write, reported by a marker record.
    dropped: Option<Dropped>,
    /// A failed write left bytes after `size` that could not be cut off: the next write
    /// starts with a newline, ending that torn record (readers skip it with a warning).
    torn_tail: bool,
}

/// Output the writer could not write.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Dropped {
    records: u64,
    bytes: u64,
    /// The first error, as the marker names it.
    error: String,
}

/// Prefix of the marker record written after dropped output.
pub const DROP_MARKER: &str = "[podvisor] log output dropped:";

/// Log files may hold secrets a container prints: owner read-write, group read (as containerd).
const LOG_FILE_MODE: u32 = 0o640;
/// Mode of the log directories podvisor creates (the kubelet's).
pub const LOG_DIR_MODE: u32 = 0o755;

fn open_append(path: &Path) -> Result<(File, u64), LogError> {
    let open_err = |source| LogError::Open {
        path: path.to_owned(),
        source,
    };
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(LOG_FILE_MODE)
        .open(path)
        .map_err(open_err)?;
    let size = file.metadata().map_err(open_err)?.len();
    Ok((file, size))
}

impl CriLogWriter {
    /// Opens (creating parent directories) or appends to the current log file at `path`.
    pub fn open(path: &Path, opts: LogOptions) -> Result<CriLogWriter, LogError> {
        match Self::open_or_drop(path, opts)? {
            (w, None) => Ok(w),
            (_, Some(e)) => Err(e),
        }
    }

    /// Like [`CriLogWriter::open`], but a log that cannot be opened yet (disk full, no
    /// inodes) is not an error: output is dropped and counted until it can, and the error
    /// returned is for the caller to log.
    pub fn open_or_drop(
        path: &Path,
        opts: LogOptions,
    ) -> Result<(CriLogWriter, Option<LogError>), LogError> {
        opts.validate()?;
        if path.file_name().is_none() {
            return Err(LogError::NoFileName {
                path: path.to_owned(),
            });
        }
        let mut w = CriLogWriter {
            path: path.to_owned(),
            opts,
            file: None,
            size: 0,
            pending: [Vec::new(), Vec::new()],
            record: Vec::new(),
            rotation_failing: false,
            dropped: None,
            torn_tail: false,
        };
        let err = w.reopen().err();
        Ok((w, err))
    }

    /// Creates the log directory if needed and opens the current file for appending.
    fn reopen(&mut self) -> Result<(), LogError> {
        if let Some(dir) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            if !dir.is_dir() {
                // The kubelet's mode for pod log directories (log files are 0640).
                fs::DirBuilder::new()
                    .recursive(true)
                    .mode(LOG_DIR_MODE)
                    .create(dir)
                    .map_err(|source| LogError::CreateDir {
                        path: dir.to_owned(),
                        source,
                    })?;
            }
        }
        let (file, size) = open_append(&self.path)?;
        self.file = Some(file);
        self.size = size;
        Ok(())
    }

    /// Bytes of output dropped since the last successful write (0 when none).
    pub fn dropped_bytes(&self) -> u64 {
        self.dropped.as_ref().map_or(0, |d| d.bytes)
    }

    /// The current log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a chunk read from `stream`'s pipe. Every completed line becomes `F` record(s);
    /// an unfinished line is kept, and emitted as `P` records once it exceeds `max_line`.
    pub fn write(&mut self, stream: Stream, data: &[u8], now: SystemTime) -> Result<(), LogError> {
        if data.is_empty() {
            return Ok(());
        }
        let ts = format_timestamp(now);
        let mut pending = std::mem::take(&mut self.pending[stream.index()]);
        let result = self.consume(stream, &mut pending, data, &ts, now);
        self.pending[stream.index()] = pending;
        result
    }

    fn consume(
        &mut self,
        stream: Stream,
        pending: &mut Vec<u8>,
        data: &[u8],
        ts: &str,
        now: SystemTime,
    ) -> Result<(), LogError> {
        let mut rest = data;
        while let Some(pos) = rest.iter().position(|&b| b == b'\n') {
            let result = if pending.is_empty() {
                self.emit_line(stream, &rest[..pos], ts, now)
            } else {
                pending.extend_from_slice(&rest[..pos]);
                let r = self.emit_line(stream, pending, ts, now);
                pending.clear();
                r
            };
            result?;
            rest = &rest[pos + 1..];
        }
        pending.extend_from_slice(rest);
        let max = self.opts.max_line;
        let mut done = 0;
        let mut result = Ok(());
        // Keep up to max_line bytes: if the line ends right after them, they form an F record.
        while pending.len() - done > max {
            result = self.emit_record(stream, true, &pending[done..done + max], ts, now);
            done += max;
            if result.is_err() {
                break;
            }
        }
        pending.drain(..done);
        result
    }

    /// Writes a complete line (without its newline) as `P`* `F`.
    fn emit_line(
        &mut self,
        stream: Stream,
        mut line: &[u8],
        ts: &str,
        now: SystemTime,
    ) -> Result<(), LogError> {
        let max = self.opts.max_line;
        while line.len() > max {
            self.emit_record(stream, true, &line[..max], ts, now)?;
            line = &line[max..];
        }
        self.emit_record(stream, false, line, ts, now)
    }

    fn emit_record(
        &mut self,
        stream: Stream,
        partial: bool,
        content: &[u8],
        ts: &str,
        now: SystemTime,
    ) -> Result<(), LogError> {
        let mut record = std::mem::take(&mut self.record);
        record.clear();
        record.extend_from_slice(ts.as_bytes());
        record.push(b' ');
        record.extend_from_slice(stream.as_str().as_bytes());
        record.extend_from_slice(if partial { b" P " } else { b" F " });
        record.extend_from_slice(content);
        record.push(b'\n');
        let mut result = self.write_marker(ts, now);
        if result.is_ok() {
            result = self.append(&record, now);
        }
        if let Err(e) = result {
            self.note_dropped(record.len() as u64, &e);
        }
        self.record = record;
        // Dropped, not failed: the container's output must keep flowing.
        Ok(())
    }

    /// Counts a record that could not be written; the first one of a run is logged.
    fn note_dropped(&mut self, bytes: u64, e: &LogError) {
        match &mut self.dropped {
            Some(d) => {
                d.records += 1;
                d.bytes += bytes;
            }
            None => {
                let error = match std::error::Error::source(e) {
                    Some(s) => format!("{e}: {s}"),
                    None => e.to_string(),
                };
                log::warn!("dropping container output until the log can be written: {error}");
                self.dropped = Some(Dropped {
                    records: 1,
                    bytes,
                    error,
                });
            }
        }
    }

    /// After dropped output, the marker record goes first (on stderr, as a full line).
    fn write_marker(&mut self, ts: &str, now: SystemTime) -> Result<(), LogError> {
        let Some(d) = self.dropped.clone() else {
            return Ok(());
        };
        let marker = format!(
            "{ts} stderr F {DROP_MARKER} {} record(s), {} bytes could not be written: {}\n",
            d.records, d.bytes, d.error
        );
        self.append(marker.as_bytes(), now)?;
        log::info!(
            "container output is logged again; {} record(s), {} bytes were dropped",
            d.records,
            d.bytes
        );
        self.dropped = None;
        Ok(())
    }

    fn append(&mut self, record: &[u8], now: SystemTime) -> Result<(), LogError> {
        let len = record.len() as u64;
        if self.file.is_some()
            && self.size > 0
            && self.size.saturating_add(len) > self.opts.max_size
        {
            self.rotate(now);
        }
        if self.file.is_none() {
            self.reopen()?;
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        let write_err = |path: &Path, source| LogError::Write {
            path: path.to_owned(),
            source,
        };
        if self.torn_tail {
            file.write_all(b"\n")
                .map_err(|e| write_err(&self.path, e))?;
            self.torn_tail = false;
            self.size = file.metadata().map(|m| m.len()).unwrap_or(self.size);
        }
        // A regular file opened with O_APPEND: write_all issues one write(2) for the whole
        // record unless the kernel returns a short count (disk full, signal).
        match file.write_all(record) {
            Ok(()) => {
                self.size += len;
                Ok(())
            }
            Err(source) => {
                // Part of the record may be in the file: cut it off (only this writer appends
                // to it), or end it with a newline before the next record.
                let grew = file.metadata().map(|m| m.len() > self.size).unwrap_or(true);
                if grew && file.set_len(self.size).is_err() {
                    self.torn_tail = true;
                }
                Err(write_err(&self.path, source))
            }
        }
    }

    /// Renames the current file aside, opens a fresh one and prunes old rotated files.
    /// Failures are logged, not returned: the record is then written to the current file,
    /// which is better than losing it, and the next record retries the rotation.
    fn rotate(&mut self, now: SystemTime) {
        match self.try_rotate(now) {
            Ok(()) => self.rotation_failing = false,
            Err(e) => {
                if !self.rotation_failing {
                    log::warn!("log rotation failed, writing on to the current file: {e}");
                }
                self.rotation_failing = true;
            }
        }
    }

    fn try_rotate(&mut self, now: SystemTime) -> Result<(), LogError> {
        let mut rotated = list_rotated(&self.path)?;
        let mut key = RotationKey::next_after(rotated.last().map(|r| &r.key), now);
        let mut target = rotated_path(&self.path, &key)?;
        while fs::symlink_metadata(&target).is_ok() {
            key.counter += 1;
            target = rotated_path(&self.path, &key)?;
        }
        fs::rename(&self.path, &target).map_err(|source| LogError::Rotate {
            from: self.path.clone(),
            to: target.clone(),
            source,
        })?;
        // From here the old file is rotated: a failure to open the new one leaves `file`
        // empty and the next record opens (and reports) it again.
        self.file = None;
        self.size = 0;
        rotated.push(super::rotation::RotatedFile {
            key,
            path: target,
            compressed: false,
        });
        let keep = (self.opts.max_files - 1) as usize;
        let excess = rotated.len().saturating_sub(keep);
        for old in &rotated[..excess] {
            match fs::remove_file(&old.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => log::warn!(
                    "{}",
                    LogError::RemoveRotated {
                        path: old.path.clone(),
                        source
                    }
                ),
            }
        }
        self.reopen()
    }

    /// The stream reached end of file: a pending unfinished line becomes a final `F` record.
    pub fn finish(&mut self, stream: Stream, now: SystemTime) -> Result<(), LogError> {
        let pending = std::mem::take(&mut self.pending[stream.index()]);
        if pending.is_empty() {
            return Ok(());
        }
        let ts = format_timestamp(now);
        // `pending` holds at most max_line bytes, so this is a single F record.
        let result = self.emit_line(stream, &pending, &ts, now);
        let mut pending = pending;
        pending.clear();
        self.pending[stream.index()] = pending;
        result
    }

    /// Flushes the current file's data to disk.
    pub fn sync(&mut self) -> Result<(), LogError> {
        match &self.file {
            Some(f) => f.sync_data().map_err(|source| LogError::Sync {
                path: self.path.clone(),
                source,
            }),
            None => Ok(()),
        }
    }
}

impl Drop for CriLogWriter {
    fn drop(&mut self) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            if let Err(e) = self.finish(stream, SystemTime::now()) {
                log::warn!("cannot flush the last {stream} line on close: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests;
