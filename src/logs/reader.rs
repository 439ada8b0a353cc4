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
mod tests {
    use super::*;
    use crate::logs::writer::{CriLogWriter, LogOptions};
    use std::io::Write;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    fn t0() -> SystemTime {
        UNIX_EPOCH + Duration::new(1_704_164_645, 123_456_789)
    }

    fn opts(max_size: u64, max_files: u32, max_line: usize) -> LogOptions {
        LogOptions {
            max_size,
            max_files,
            max_line,
        }
    }

    fn text(lines: &[LogLine]) -> Vec<String> {
        lines
            .iter()
            .map(|l| String::from_utf8(l.content.clone()).expect("utf8"))
            .collect()
    }

    fn append(path: &Path, bytes: &[u8]) {
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .expect("open");
        f.write_all(bytes).expect("append");
    }

    /// Line `i` of the test streams: lengths vary so that some lines are split into P records.
    fn nth_line(i: usize) -> String {
        format!("line-{i:06}-{}", "z".repeat(i * 37 % 300))
    }

    #[test]
    fn parses_full_and_partial_records() {
        let r =
            parse_record(b"2024-01-02T03:04:05.123456789Z stdout F hello world\n").expect("parse");
        assert_eq!(
            r,
            CriLogRecord {
                timestamp: "2024-01-02T03:04:05.123456789Z".into(),
                stream: Stream::Stdout,
                partial: false,
                content: b"hello world".to_vec(),
            }
        );
        let r = parse_record(b"2016-10-06T00:17:09.669794202Z stderr P:x:y  two spaces")
            .expect("parse");
        assert_eq!(r.stream, Stream::Stderr);
        assert!(r.partial);
        assert_eq!(r.content, b" two spaces");
        let r = parse_record(b"2024-01-02T03:04:05Z stdout F \n").expect("empty content");
        assert_eq!(r.content, b"");
        let r = parse_record(b"2024-01-02T03:04:05Z stdout F a\rb\xff").expect("raw bytes");
        assert_eq!(r.content, b"a\rb\xff");
    }

    #[test]
    fn parse_errors_name_the_problem() {
        let cases: [(&[u8], &str); 7] = [
            (b"", "malformed log record: no space after the timestamp"),
            (
                b"notatime stdout F x",
                "malformed log record: invalid timestamp \"notatime\": too short for RFC 3339",
            ),
            (
                b"2024-01-02T03:04:05Z",
                "malformed log record: no space after the timestamp",
            ),
            (
                b"2024-01-02T03:04:05Z stdout",
                "malformed log record: no space after the stream",
            ),
            (
                b"2024-01-02T03:04:05Z stdin F x",
                "malformed log record: unknown stream \"stdin\", expected stdout or stderr",
            ),
            (
                b"2024-01-02T03:04:05Z stdout F",
                "malformed log record: no space after the tag",
            ),
            (
                b"2024-01-02T03:04:05Z stdout X:y x",
                "malformed log record: unknown tag \"X:y\", expected P or F",
            ),
        ];
        for (line, want) in cases {
            let err = parse_record(line).expect_err("must fail");
            assert_eq!(err.to_string(), want, "{:?}", String::from_utf8_lossy(line));
        }
        assert!(matches!(
            parse_record(b"2024-02-30T03:04:05Z+ stdout F x"),
            Err(LogError::InvalidTimestamp { .. })
        ));
    }

    #[test]
    fn read_log_joins_partials_per_stream_and_skips_bad_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        fs::write(
            &p,
            b"2024-01-02T03:04:05.000000001Z stdout P hel\n\
              2024-01-02T03:04:05.000000002Z stderr P err\n\
              garbage line\n\
              2024-01-02T03:04:05.000000003Z stdout F lo\n\
              2024-01-02T03:04:05.000000004Z stderr F or\n\
              2024-01-02T03:04:05.000000005Z stdout F next\n\
              2024-01-02T03:04:05.000000006Z stdout F unterminated",
        )
        .expect("write");
        let lines = read_log(&p, ReadOptions::default()).expect("read");
        assert_eq!(
            lines,
            vec![
                LogLine {
                    timestamp: "2024-01-02T03:04:05.000000001Z".into(),
                    stream: Stream::Stdout,
                    content: b"hello".to_vec()
                },
                LogLine {
                    timestamp: "2024-01-02T03:04:05.000000002Z".into(),
                    stream: Stream::Stderr,
                    content: b"error".to_vec()
                },
                LogLine {
                    timestamp: "2024-01-02T03:04:05.000000005Z".into(),
                    stream: Stream::Stdout,
                    content: b"next".to_vec()
                },
            ]
        );
    }

    #[test]
    fn read_log_of_missing_file_names_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("7.log");
        for include_rotated in [false, true] {
            let err = read_log(
                &p,
                ReadOptions {
                    tail: None,
                    include_rotated,
                },
            )
            .expect_err("missing");
            assert!(
                matches!(&err, LogError::Open { path, .. } if path == &p),
                "{err}"
            );
        }
    }

    #[test]
    fn read_log_tail_across_rotated_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        let mut w = CriLogWriter::open(&p, opts(2048, 500, 64)).expect("open");
        let n = 400;
        for i in 0..n {
            w.write(
                Stream::Stdout,
                format!("{}\n", nth_line(i)).as_bytes(),
                t0(),
            )
            .expect("write");
        }
        drop(w);
        let rotated = list_rotated(&p).expect("list");
        assert!(rotated.len() > 10, "test needs many rotated files");
        let all = read_log(
            &p,
            ReadOptions {
                tail: None,
                include_rotated: true,
            },
        )
        .expect("read all");
        let want: Vec<String> = (0..n).map(nth_line).collect();
        assert_eq!(text(&all), want, "P...F sequences survive rotation");
        for tail in [0, 1, 7, 150, 399, 400, 1000] {
            let got = read_log(
                &p,
                ReadOptions {
                    tail: Some(tail),
                    include_rotated: true,
                },
            )
            .expect("tail");
            assert_eq!(text(&got), want[n - tail.min(n)..], "tail {tail}");
        }
        // Without rotated files only the current file's lines are returned; its first line
        // may be the tail of a line begun in the previous file.
        let current = text(&read_log(&p, ReadOptions::default()).expect("current"));
        assert!(!current.is_empty() && current.len() < n);
        assert!(want.ends_with(&current[1..]));
    }

    #[test]
    fn follower_waits_for_file_and_complete_records() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("sub").join("0.log");
        let mut f = LogFollower::new(&p, FollowStart::Beginning).expect("follower");
        assert!(f.poll().expect("poll").is_empty());
        fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        append(
            &p,
            b"2024-01-02T03:04:05Z stdout F first\n2024-01-02T03:04:05Z std",
        );
        assert_eq!(text(&f.poll().expect("poll")), ["first"]);
        append(&p, b"out P sec");
        assert!(f.poll().expect("poll").is_empty());
        append(&p, b"ond-\n");
        assert!(f.poll().expect("poll").is_empty(), "P alone is not a line");
        append(&p, b"2024-01-02T03:04:06Z stdout F half\n");
        let lines = f.poll().expect("poll");
        assert_eq!(text(&lines), ["second-half"]);
        assert_eq!(lines[0].timestamp, "2024-01-02T03:04:05Z");
        assert!(f.poll().expect("poll").is_empty());
    }

    #[test]
    fn follower_start_end_and_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        let mut w = CriLogWriter::open(&p, opts(1000, 500, 8)).expect("open");
        for i in 0..30 {
            w.write(
                Stream::Stdout,
                format!("{}\n", nth_line(i)).as_bytes(),
                t0(),
            )
            .expect("write");
        }
        // A line in progress when the followers start: both see it once it completes.
        w.write(Stream::Stderr, b"in-progress-line", t0())
            .expect("write");
        let mut end = LogFollower::new(&p, FollowStart::End).expect("end");
        let mut tail = LogFollower::new(&p, FollowStart::Tail(3)).expect("tail");
        let mut begin = LogFollower::new(&p, FollowStart::Beginning).expect("begin");
        assert!(end.poll().expect("poll").is_empty());
        assert_eq!(
            text(&tail.poll().expect("poll")),
            [nth_line(27), nth_line(28), nth_line(29)]
        );
        w.write(Stream::Stderr, b"-done\n", t0()).expect("write");
        w.write(Stream::Stdout, b"new\n", t0()).expect("write");
        let want = ["in-progress-line-done", "new"];
        assert_eq!(text(&end.poll().expect("poll")), want);
        assert_eq!(text(&tail.poll().expect("poll")), want);
        let all = text(&begin.poll().expect("poll"));
        let mut expect: Vec<String> = (0..30).map(nth_line).collect();
        expect.extend(want.iter().map(|s| s.to_string()));
        assert_eq!(all, expect);
    }

    #[test]
    fn follower_sees_every_line_once_across_rotations() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        let max_files = 5;
        let mut w = CriLogWriter::open(&p, opts(4096, max_files, 100)).expect("open");
        let mut f = LogFollower::new(&p, FollowStart::Beginning).expect("follower");
        let mut seen = Vec::new();
        let mut next = 0;
        let mut now = t0();
        for round in 0..200 {
            // Between polls: up to ~2.5 rotations (fewer than max_files - 1, so nothing the
            // follower has not read yet is pruned), sometimes none.
            let bytes_goal = (round * 1543) % 10_000;
            let mut written = 0;
            while written < bytes_goal {
                let line = format!("{}\n", nth_line(next));
                // Chunks cut mid-line, alternating streams' interleaving.
                let (a, b) = line.as_bytes().split_at(line.len() / 2);
                w.write(Stream::Stdout, a, now).expect("write");
                w.write(Stream::Stderr, b"e", now).expect("write");
                w.write(Stream::Stdout, b, now).expect("write");
                written += line.len() + 50;
                next += 1;
            }
            now += Duration::from_millis(300);
            for l in f.poll().expect("poll") {
                if l.stream == Stream::Stdout {
                    seen.push(String::from_utf8(l.content).expect("utf8"));
                }
            }
        }
        let rotations = list_rotated(&p).expect("list");
        assert_eq!(rotations.len(), (max_files - 1) as usize);
        let want: Vec<String> = (0..next).map(nth_line).collect();
        assert_eq!(seen.len(), want.len());
        assert_eq!(seen, want);
    }

    #[test]
    fn follower_keeps_reading_a_file_rotated_then_pruned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        // max_files 1: every rotated file is deleted at once; only the open fd has its tail.
        let mut w = CriLogWriter::open(&p, opts(300, 1, 1000)).expect("open");
        let mut f = LogFollower::new(&p, FollowStart::Beginning).expect("follower");
        let mut seen = Vec::new();
        for i in 0..100 {
            w.write(
                Stream::Stdout,
                format!("{}\n", nth_line(i % 5)).as_bytes(),
                t0(),
            )
            .expect("write");
            seen.extend(text(&f.poll().expect("poll")));
        }
        let want: Vec<String> = (0..100).map(|i| nth_line(i % 5)).collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn follower_far_behind_skips_pruned_files_without_duplicates() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        // One rotated file kept; each file holds exactly two records.
        let mut w = CriLogWriter::open(&p, opts(170, 2, 1000)).expect("open");
        let line = |i: usize| format!("line {i:04} {}\n", "q".repeat(30));
        w.write(Stream::Stdout, line(0).as_bytes(), t0())
            .expect("write");
        let mut f = LogFollower::new(&p, FollowStart::Beginning).expect("follower");
        let mut seen = text(&f.poll().expect("poll"));
        assert_eq!(seen.len(), 1);
        // 4 files' worth while the follower sleeps: the file after the one it holds open is
        // pruned before it can be read.
        for i in 1..8 {
            w.write(Stream::Stdout, line(i).as_bytes(), t0())
                .expect("write");
        }
        seen.extend(text(&f.poll().expect("poll")));
        let n: Vec<usize> = seen
            .iter()
            .map(|l| l[5..9].parse().expect("number"))
            .collect();
        assert_eq!(
            n,
            [0, 1, 4, 5, 6, 7],
            "held file finished, pruned one skipped"
        );
        w.write(Stream::Stdout, line(8).as_bytes(), t0())
            .expect("write");
        assert_eq!(text(&f.poll().expect("poll")), [line(8).trim_end()]);
    }

    #[test]
    fn follower_rereads_a_file_truncated_in_place() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("0.log");
        append(&p, b"2024-01-02T03:04:05Z stdout F old line that is long\n");
        let mut f = LogFollower::new(&p, FollowStart::End).expect("follower");
        fs::write(&p, b"2024-01-02T03:04:06Z stdout F new\n").expect("truncate");
        assert_eq!(text(&f.poll().expect("poll")), ["new"]);
    }

    #[test]
    fn follower_keeps_up_with_a_concurrent_writer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("c").join("0.log");
        let n = 5_000;
        // Keep more bytes on disk than the whole run writes, so a descheduled follower can
        // never legitimately lose a pruned file: every line must arrive.
        let writer_path = p.clone();
        let writer = std::thread::spawn(move || {
            let mut w = CriLogWriter::open(&writer_path, opts(32 * 1024, 200, 50)).expect("open");
            let mut pending = Vec::new();
            for i in 0..n {
                pending.extend_from_slice(format!("{}\n", nth_line(i)).as_bytes());
                if i % 3 == 0 {
                    // Arbitrary pipe-sized chunks, cut anywhere.
                    let cut = pending.len() * 2 / 3;
                    w.write(Stream::Stdout, &pending[..cut], SystemTime::now())
                        .expect("write");
                    pending.drain(..cut);
                    w.write(
                        Stream::Stderr,
                        format!("err {i}\n").as_bytes(),
                        SystemTime::now(),
                    )
                    .expect("write");
                }
                if i % 500 == 0 {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            w.write(Stream::Stdout, &pending, SystemTime::now())
                .expect("write");
            w.finish(Stream::Stdout, SystemTime::now()).expect("finish");
        });
        let mut f = LogFollower::new(&p, FollowStart::Beginning).expect("follower");
        let mut out = Vec::new();
        let mut errs = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while out.len() < n && std::time::Instant::now() < deadline {
            for l in f.poll().expect("poll") {
                match l.stream {
                    Stream::Stdout => out.push(String::from_utf8(l.content).expect("utf8")),
                    Stream::Stderr => errs.push(String::from_utf8(l.content).expect("utf8")),
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        writer.join().expect("writer thread");
        for l in f.poll().expect("final poll") {
            if l.stream == Stream::Stderr {
                errs.push(String::from_utf8(l.content).expect("utf8"));
            }
        }
        assert!(
            list_rotated(&p).expect("list").len() > 5,
            "the run must rotate"
        );
        let want: Vec<String> = (0..n).map(nth_line).collect();
        assert_eq!(out.len(), n);
        assert_eq!(out, want);
        let want_err: Vec<String> = (0..n).step_by(3).map(|i| format!("err {i}")).collect();
        assert_eq!(errs, want_err);
    }
}
