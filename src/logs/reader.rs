//! Reading CRI logs back: [`parse_record`] for one record, [`read_log`] for a snapshot of a
//! container's log (optionally with its rotated files, optionally only the last N lines), and
//! [`LogFollower`] for `-f` style following that survives rotation.
//!
//! Records are joined back into whole lines per stream (`P`... `F`), also across file
//! boundaries. Only complete records (ending in `\n`) are used, so a record the writer is in
//! the middle of appending is picked up by a later read. Malformed records are skipped with a
//! warning naming the file and byte offset.
//!
//! Following relies on the writer's rotation scheme: the current file is renamed to a name
//! whose [`RotationKey`] sorts after every earlier rotated file, then a new current file is
//! created. The follower reads the file it has open to its end, finds it among the rotated
//! files by device and inode, reads any newer rotated files, and only then switches to the new
//! current file, so several rotations between two polls lose nothing unless the writer already
//! deleted a file the follower had not opened yet.

use std::collections::VecDeque;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::rotation::{list_rotated, RotationKey};
use super::timestamp::validate_timestamp;
use super::{quote_prefix, LogError, Stream};

/// One CRI log record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriLogRecord {
    /// The timestamp as written (RFC 3339).
    pub timestamp: String,
    pub stream: Stream,
    /// `P`: the line continues in the next record of the same stream.
    pub partial: bool,
    /// Content bytes, without the record's terminating newline.
    pub content: Vec<u8>,
}

/// A whole line of container output, re-joined from its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Timestamp of the line's first record.
    pub timestamp: String,
    pub stream: Stream,
    /// The line without its newline.
    pub content: Vec<u8>,
}

/// What [`read_log`] returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// Only the last N whole lines.
    pub tail: Option<usize>,
    /// Read the rotated files (oldest first) before the current file.
    pub include_rotated: bool,
}

/// Where a [`LogFollower`] starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowStart {
    /// Every line still on disk: the rotated files, then the current file.
    Beginning,
    /// Only lines completed after the follower was created (a line already in progress is
    /// returned whole once it completes).
    End,
    /// The last N whole lines already on disk (rotated files included), then new lines.
    Tail(usize),
}

/// Splits `<field> <rest>` at the first space.
fn split_field<'a>(b: &'a [u8], field: &'static str) -> Result<(&'a [u8], &'a [u8]), LogError> {
    let i = b
        .iter()
        .position(|&c| c == b' ')
        .ok_or(LogError::MissingField { field })?;
    Ok((&b[..i], &b[i + 1..]))
}

/// Parses one record: `<timestamp> <stdout|stderr> <P|F>[:tags] <content>`, with or without
/// its terminating newline. Extra `:`-separated tags are accepted and ignored, like the kubelet.
pub fn parse_record(line: &[u8]) -> Result<CriLogRecord, LogError> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let (ts, rest) = split_field(line, "timestamp")?;
    validate_timestamp(ts).map_err(|reason| LogError::InvalidTimestamp {
        timestamp: quote_prefix(ts),
        reason,
    })?;
    let (stream, rest) = split_field(rest, "stream")?;
    let stream = Stream::from_bytes(stream).ok_or_else(|| LogError::InvalidStream {
        stream: quote_prefix(stream),
    })?;
    let (tags, content) = split_field(rest, "tag")?;
    let tag = tags.split(|&b| b == b':').next().unwrap_or(tags);
    let partial = match tag {
        b"P" => true,
        b"F" => false,
        _ => {
            return Err(LogError::InvalidTag {
                tag: quote_prefix(tags),
            })
        }
    };
    Ok(CriLogRecord {
        // validate_timestamp accepted only ASCII, so this is lossless.
        timestamp: String::from_utf8_lossy(ts).into_owned(),
        stream,
        partial,
        content: content.to_vec(),
    })
}

/// Re-joins `P`... `F` records into lines, one pending line per stream.
#[derive(Debug, Default)]
struct Joiner {
    pending: [Option<LogLine>; 2],
}

impl Joiner {
    fn push(&mut self, rec: CriLogRecord) -> Option<LogLine> {
        let slot = &mut self.pending[rec.stream.index()];
        match slot {
            Some(line) => line.content.extend_from_slice(&rec.content),
            None => {
                *slot = Some(LogLine {
                    timestamp: rec.timestamp,
                    stream: rec.stream,
                    content: rec.content,
                })
            }
        }
        if rec.partial {
            None
        } else {
            slot.take()
        }
    }
}

/// Keeps all lines, or only the last N.
struct Collector {
    tail: Option<usize>,
    lines: VecDeque<LogLine>,
}

impl Collector {
    fn new(tail: Option<usize>) -> Collector {
        Collector {
            tail,
            lines: VecDeque::new(),
        }
    }

    fn push(&mut self, line: LogLine) {
        match self.tail {
            Some(0) => {}
            Some(n) => {
                if self.lines.len() == n {
                    self.lines.pop_front();
                }
                self.lines.push_back(line);
            }
            None => self.lines.push_back(line),
        }
    }
}

#[derive(Debug, Clone)]
enum SourceKind {
    /// Opened by the current file's path; may be rotated away while open.
    Current,
    /// A rotated file: complete and immutable.
    Rotated(RotationKey),
}

/// How the current path relates to an open source.
enum PathState {
    Same { len: u64 },
    Replaced,
}

const READ_CHUNK: usize = 64 * 1024;

/// A log file's bytes: the file itself, or the decompressed content of a rotated file container
/// GC compressed (complete: nothing is appended to it any more).
enum Input {
    Plain(File),
    Gzip(Box<flate2::read::GzDecoder<File>>),
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Input::Plain(_) => "Plain",
            Input::Gzip(_) => "Gzip",
        })
    }
}

impl Read for Input {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Input::Plain(f) => f.read(buf),
            Input::Gzip(g) => g.read(buf),
        }
    }
}

/// An open log file and the bytes of its last, still incomplete record.
#[derive(Debug)]
struct Source {
    file: Input,
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// Bytes read from the file so far.
    offset: u64,
    /// Unconsumed bytes: always the start of an incomplete record (no newline).
    buf: Vec<u8>,
    kind: SourceKind,
}

impl Source {
    fn open(path: &Path, kind: SourceKind) -> io::Result<Source> {
        let file = File::open(path)?;
        let meta = file.metadata()?;
        let compressed = matches!(kind, SourceKind::Rotated(_))
            && path
                .to_str()
                .is_some_and(|p| p.ends_with(super::rotation::COMPRESSED_SUFFIX));
        let file = if compressed {
            Input::Gzip(Box::new(flate2::read::GzDecoder::new(file)))
        } else {
            Input::Plain(file)
        };
        Ok(Source {
            file,
            path: path.to_owned(),
            dev: meta.dev(),
            ino: meta.ino(),
            offset: 0,
            buf: Vec::new(),
            kind,
        })
    }

    fn read_err(&self, source: io::Error) -> LogError {
        LogError::Read {
            path: self.path.clone(),
            source,
        }
    }

    /// Whether `path` still names this source's file.
    fn state_of(&self, path: &Path) -> Result<PathState, LogError> {
        match fs::metadata(path) {
            Ok(m) if m.dev() == self.dev && m.ino() == self.ino => {
                Ok(PathState::Same { len: m.len() })
            }
            Ok(_) => Ok(PathState::Replaced),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(PathState::Replaced),
            Err(source) => Err(LogError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Starts over after the file was truncated in place.
    fn rewind(&mut self) -> Result<(), LogError> {
        if let Input::Plain(f) = &mut self.file {
            f.seek(SeekFrom::Start(0))
                .map_err(|source| LogError::Read {
                    path: self.path.clone(),
                    source,
                })?;
        }
        self.offset = 0;
        self.buf.clear();
        Ok(())
    }

    /// Reads to the current end of file, feeding every complete record to `joiner` and every
    /// completed line to `sink`.
    fn read_available(
        &mut self,
        joiner: &mut Joiner,
        sink: &mut dyn FnMut(LogLine),
    ) -> Result<(), LogError> {
        loop {
            let start = self.buf.len();
            // read_to_end grows the buffer with what the file holds instead of zeroing a
            // whole chunk first: a 400-byte log costs no 64 KiB allocation and memset per
            // read (the fuzz target's profile was dominated by them). Bytes read before an
            // error are kept and consumed below; the error is returned after them.
            let result = (&mut self.file)
                .take(READ_CHUNK as u64)
                .read_to_end(&mut self.buf);
            let n = self.buf.len() - start;
            if n == 0 {
                return result.map(|_| ()).map_err(|e| self.read_err(e));
            }
            self.offset += n as u64;
            let base = self.offset - self.buf.len() as u64;
            let mut line_start = 0;
            let mut search = start;
            while let Some(p) = self.buf[search..].iter().position(|&b| b == b'\n') {
                let end = search + p;
                match parse_record(&self.buf[line_start..end]) {
                    Ok(rec) => {
                        if let Some(line) = joiner.push(rec) {
                            sink(line);
                        }
                    }
                    Err(e) => log::warn!(
                        "{}: skipping record at byte {}: {e}",
                        self.path.display(),
                        base + line_start as u64
                    ),
                }
                line_start = end + 1;
                search = line_start;
            }
            self.buf.drain(..line_start);
            if let Err(e) = result {
                return Err(self.read_err(e));
            }
        }
    }

    /// Called when the file is known to be complete: a record without its newline can only
    /// be the remains of a crash.
    fn warn_leftover(&self) {
        if !self.buf.is_empty() {
            log::warn!(
                "{}: ignoring {} bytes of an unterminated record at the end",
                self.path.display(),
                self.buf.len()
            );
        }
    }
}

/// Follows a container's log file across rotations, without blocking.
#[derive(Debug)]
pub struct LogFollower {
    path: PathBuf,
    source: Option<Source>,
    /// Every rotated file with a key up to this one has been read (or predates the start).
    last_key: Option<RotationKey>,
    joiner: Joiner,
    /// Lines found but not yet returned by `poll`.
    queued: Vec<LogLine>,
}

impl LogFollower {
    /// Creates a follower of the current log file `path` (which need not exist yet). `End` and
    /// `Tail` read everything already on disk right away (at most `max_size * max_files`
    /// bytes), so that lines in progress are re-joined correctly.
    pub fn new(path: &Path, start: FollowStart) -> Result<LogFollower, LogError> {
        let mut f = LogFollower {
            path: path.to_owned(),
            source: None,
            last_key: None,
            joiner: Joiner::default(),
            queued: Vec::new(),
        };
        match start {
            FollowStart::Beginning => {}
            FollowStart::End => f.drain(&mut |_| {})?,
            FollowStart::Tail(n) => {
                let mut c = Collector::new(Some(n));
                f.drain(&mut |l| c.push(l))?;
                f.queued = c.lines.into();
            }
        }
        Ok(f)
    }

    /// The current log file being followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Returns the whole lines completed since the last call (empty if none, or if the file
    /// does not exist yet). Never blocks.
    pub fn poll(&mut self) -> Result<Vec<LogLine>, LogError> {
        let mut out = std::mem::take(&mut self.queued);
        match self.drain(&mut |l| out.push(l)) {
            Ok(()) => Ok(out),
            Err(e) => {
                // Keep what was already read for the next call.
                self.queued = out;
                Err(e)
            }
        }
    }

    /// Reads everything available, moving through rotated files to the current file.
    fn drain(&mut self, sink: &mut dyn FnMut(LogLine)) -> Result<(), LogError> {
        loop {
            if self.source.is_none() && !self.open_next()? {
                return Ok(());
            }
            let Some(src) = self.source.as_mut() else {
                return Ok(());
            };
            match src.kind.clone() {
                SourceKind::Rotated(key) => {
                    src.read_available(&mut self.joiner, sink)?;
                    src.warn_leftover();
                    self.last_key = Some(key);
                    self.source = None;
                }
                SourceKind::Current => {
                    // Look at the path before reading: if it still names our file, whatever
                    // we read next is all there is for now; if not, the writer is done with
                    // our file and reading it to the end finishes it.
                    let state = src.state_of(&self.path)?;
                    if let PathState::Same { len } = state {
                        if len < src.offset {
                            log::warn!(
                                "{} was truncated, reading it again from the start",
                                src.path.display()
                            );
                            src.rewind()?;
                        }
                    }
                    src.read_available(&mut self.joiner, sink)?;
                    if let PathState::Same { .. } = state {
                        return Ok(());
                    }
                    src.warn_leftover();
                    let (dev, ino) = (src.dev, src.ino);
                    self.source = None;
                    self.note_rotated(dev, ino)?;
                }
            }
        }
    }

    /// Our current file was rotated away: remember its key so only newer files are read next.
    /// If it is already gone (pruned), every remaining newer file follows it anyway.
    fn note_rotated(&mut self, dev: u64, ino: u64) -> Result<(), LogError> {
        for r in list_rotated(&self.path)? {
            if Some(&r.key) <= self.last_key.as_ref() {
                continue;
            }
            if let Ok(m) = fs::metadata(&r.path) {
                if m.dev() == dev && m.ino() == ino {
                    self.last_key = Some(r.key);
                    break;
                }
            }
        }
        Ok(())
    }

    /// Opens the oldest unread rotated file, else the current file. Returns false when there is
    /// nothing to open (the current file does not exist).
    fn open_next(&mut self) -> Result<bool, LogError> {
        loop {
            let next = list_rotated(&self.path)?
                .into_iter()
                .find(|r| Some(&r.key) > self.last_key.as_ref());
            if let Some(r) = next {
                match Source::open(&r.path, SourceKind::Rotated(r.key.clone())) {
                    Ok(s) => {
                        self.source = Some(s);
                        return Ok(true);
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        log::warn!(
                            "rotated log file {} was removed before it could be read",
                            r.path.display()
                        );
                        self.last_key = Some(r.key);
                        continue;
                    }
                    Err(source) => {
                        return Err(LogError::Open {
                            path: r.path,
                            source,
                        })
                    }
                }
            }
            let src = match Source::open(&self.path, SourceKind::Current) {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
                Err(source) => {
                    return Err(LogError::Open {
                        path: self.path.clone(),
                        source,
                    })
                }
            };
            // A rotation between listing and opening means the file we opened may be newer
            // than an unread rotated file: read those first.
            let rotated_meanwhile = list_rotated(&self.path)?
                .iter()
                .any(|r| Some(&r.key) > self.last_key.as_ref());
            if !rotated_meanwhile {
                self.source = Some(src);
                return Ok(true);
            }
        }
    }
}

/// Reads a container log: whole lines of the current file at `path`, preceded by those of its
/// rotated files with `include_rotated`, keeping only the last `tail` lines if set (memory
/// holds at most that many). A line whose `F` record is not written yet is not returned.
/// Without `include_rotated`, the first line may be only the end of a line begun in the
/// newest rotated file (as with the kubelet, which reads only the current file).
pub fn read_log(path: &Path, opts: ReadOptions) -> Result<Vec<LogLine>, LogError> {
    let mut collector = Collector::new(opts.tail);
    if opts.include_rotated {
        let missing = match fs::metadata(path) {
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::NotFound => true,
            Err(source) => {
                return Err(LogError::Open {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        if missing && list_rotated(path)?.is_empty() {
            return Err(LogError::Open {
                path: path.to_owned(),
                source: io::Error::from(io::ErrorKind::NotFound),
            });
        }
        let mut f = LogFollower::new(path, FollowStart::Beginning)?;
        f.drain(&mut |l| collector.push(l))?;
    } else {
        let mut src = Source::open(path, SourceKind::Current).map_err(|source| LogError::Open {
            path: path.to_owned(),
            source,
        })?;
        let mut joiner = Joiner::default();
        src.read_available(&mut joiner, &mut |l| collector.push(l))?;
    }
    Ok(collector.lines.into())
}

#[cfg(test)]
mod tests;
