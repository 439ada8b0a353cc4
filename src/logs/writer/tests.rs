use super::*;
use crate::logs::reader::parse_record;
use std::time::{Duration, UNIX_EPOCH};

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

fn records(path: &Path) -> Vec<(Stream, bool, Vec<u8>)> {
    let data = fs::read(path).expect("read log");
    assert!(data.is_empty() || data.ends_with(b"\n"));
    data.split_inclusive(|&b| b == b'\n')
        .map(|l| {
            let r = parse_record(l).expect("valid record");
            (r.stream, r.partial, r.content)
        })
        .collect()
}

#[test]
fn defaults_match_kubelet() {
    let o = LogOptions::default();
    assert_eq!(o.max_size, 10 * 1024 * 1024);
    assert_eq!(o.max_files, 5);
    assert_eq!(o.max_line, 16 * 1024);
}

#[test]
fn rejects_zero_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    for (o, field) in [
        (opts(0, 5, 10), "max_size"),
        (opts(10, 0, 10), "max_files"),
        (opts(10, 5, 0), "max_line"),
    ] {
        match CriLogWriter::open(&p, o) {
            Err(LogError::InvalidOptions { field: f, .. }) => assert_eq!(f, field),
            other => panic!("expected invalid {field}, got {other:?}"),
        }
    }
}

#[test]
fn writes_exact_record_bytes_and_creates_parents() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("ns_pod_uid").join("c").join("0.log");
    let mut w = CriLogWriter::open(&p, LogOptions::default()).expect("open");
    w.write(Stream::Stdout, b"hello\n\nworld", t0())
        .expect("write");
    w.write(Stream::Stderr, b"oops\n", t0()).expect("write");
    w.finish(Stream::Stdout, t0()).expect("finish");
    w.sync().expect("sync");
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(&p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(mode & !0o640, 0, "mode {mode:o}");
    let got = fs::read_to_string(&p).expect("read");
    assert_eq!(
        got,
        "2024-01-02T03:04:05.123456789Z stdout F hello\n\
             2024-01-02T03:04:05.123456789Z stdout F \n\
             2024-01-02T03:04:05.123456789Z stderr F oops\n\
             2024-01-02T03:04:05.123456789Z stdout F world\n"
    );
}

#[test]
fn long_lines_split_into_partials_of_max_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&p, opts(1 << 20, 2, 4)).expect("open");
    w.write(Stream::Stdout, b"abcdefghij\n", t0())
        .expect("write"); // 4+4+2
    w.write(Stream::Stdout, b"abcdefgh\n", t0()).expect("write"); // exact multiple: 4+4
    w.write(Stream::Stdout, b"abcd\n", t0()).expect("write"); // exactly max_line
    drop(w);
    let got = records(&p);
    let want: Vec<(Stream, bool, Vec<u8>)> = [
        (true, "abcd"),
        (true, "efgh"),
        (false, "ij"),
        (true, "abcd"),
        (false, "efgh"),
        (false, "abcd"),
    ]
    .into_iter()
    .map(|(p, c)| (Stream::Stdout, p, c.as_bytes().to_vec()))
    .collect();
    assert_eq!(got, want);
}

#[test]
fn unfinished_line_is_emitted_as_partials_while_it_grows() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&p, opts(1 << 20, 2, 3)).expect("open");
    w.write(Stream::Stdout, b"ab", t0()).expect("write");
    assert_eq!(
        fs::read(&p).expect("read"),
        b"",
        "short partial stays buffered"
    );
    w.write(Stream::Stdout, b"c", t0()).expect("write");
    assert_eq!(
        fs::read(&p).expect("read"),
        b"",
        "exactly max_line stays buffered"
    );
    w.write(Stream::Stdout, b"d", t0()).expect("write");
    assert_eq!(records(&p), vec![(Stream::Stdout, true, b"abc".to_vec())]);
    w.write(Stream::Stdout, b"efghijk", t0()).expect("write");
    w.finish(Stream::Stdout, t0()).expect("finish");
    w.finish(Stream::Stdout, t0())
        .expect("second finish is a no-op");
    let got: Vec<(bool, String)> = records(&p)
        .into_iter()
        .map(|(_, part, c)| (part, String::from_utf8(c).expect("utf8")))
        .collect();
    assert_eq!(
        got,
        [
            (true, "abc".to_owned()),
            (true, "def".to_owned()),
            (true, "ghi".to_owned()),
            (false, "jk".to_owned())
        ]
    );
}

#[test]
fn streams_have_separate_line_buffers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&p, LogOptions::default()).expect("open");
    w.write(Stream::Stdout, b"out-a", t0()).expect("write");
    w.write(Stream::Stderr, b"err-a", t0()).expect("write");
    w.write(Stream::Stdout, b"-b\nout2", t0()).expect("write");
    w.write(Stream::Stderr, b"-b\n", t0()).expect("write");
    w.write(Stream::Stdout, b"\n", t0()).expect("write");
    drop(w);
    assert_eq!(
        records(&p),
        vec![
            (Stream::Stdout, false, b"out-a-b".to_vec()),
            (Stream::Stderr, false, b"err-a-b".to_vec()),
            (Stream::Stdout, false, b"out2".to_vec()),
        ]
    );
}

#[test]
fn invalid_utf8_is_written_as_is() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&p, LogOptions::default()).expect("open");
    w.write(Stream::Stderr, b"\xff\xfe bad \xc3\n", t0())
        .expect("write");
    drop(w);
    assert_eq!(
        records(&p),
        vec![(Stream::Stderr, false, b"\xff\xfe bad \xc3".to_vec())]
    );
}

#[test]
fn drop_flushes_pending_lines() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&p, LogOptions::default()).expect("open");
    w.write(Stream::Stderr, b"no newline", t0()).expect("write");
    drop(w);
    assert_eq!(
        records(&p),
        vec![(Stream::Stderr, false, b"no newline".to_vec())]
    );
}

#[test]
fn reopen_appends() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    for line in [&b"one\n"[..], b"two\n"] {
        let mut w = CriLogWriter::open(&p, LogOptions::default()).expect("open");
        w.write(Stream::Stdout, line, t0()).expect("write");
    }
    assert_eq!(
        records(&p),
        vec![
            (Stream::Stdout, false, b"one".to_vec()),
            (Stream::Stdout, false, b"two".to_vec())
        ]
    );
}

#[test]
fn rotation_keeps_every_line_once_within_limits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let max_size = 64 * 1024;
    let max_files = 4;
    let mut w = CriLogWriter::open(&p, opts(max_size, max_files, 100)).expect("open");
    let mut now = t0();
    let mut n = 0u64;
    let mut written = 0usize;
    // ~3 MB with many rotations in the same second (exercising .1, .2 suffixes).
    while written < 3 * 1024 * 1024 {
        let line = format!("line {n:08} {}\n", "x".repeat((n % 250) as usize));
        w.write(Stream::Stdout, line.as_bytes(), now)
            .expect("write");
        written += line.len();
        n += 1;
        if n % 1000 == 0 {
            now += Duration::from_millis(700);
        }
    }
    drop(w);
    let mut files: Vec<PathBuf> = list_rotated(&p)
        .expect("list")
        .into_iter()
        .map(|r| r.path)
        .collect();
    assert_eq!(files.len(), (max_files - 1) as usize);
    files.push(p.clone());
    let all_entries = fs::read_dir(dir.path()).expect("readdir").count();
    assert_eq!(all_entries, max_files as usize, "no stray files");
    for f in &files {
        let size = fs::metadata(f).expect("stat").len();
        assert!(size <= max_size, "{} is {size} bytes", f.display());
    }
    // The kept files hold a contiguous, ordered, duplicate-free suffix of the lines,
    // re-joined from P...F records.
    let mut joined = Vec::new();
    let mut cur = String::new();
    let all: Vec<(bool, String)> = files
        .iter()
        .flat_map(|f| records(f))
        .map(|(_, part, c)| (part, String::from_utf8(c).expect("utf8")))
        .collect();
    for (part, c) in all {
        cur.push_str(&c);
        if !part {
            joined.push(std::mem::take(&mut cur));
        }
    }
    assert!(cur.is_empty());
    // The oldest kept file may start with the last records of a line whose first
    // records were pruned: that fragment must be the end of the line before.
    let first: u64 = joined[1][5..13].parse().expect("number");
    assert!(first > 1, "old files must have been pruned");
    let before = format!(
        "line {:08} {}",
        first - 1,
        "x".repeat(((first - 1) % 250) as usize)
    );
    assert!(before.ends_with(&joined[0]), "fragment {:?}", joined[0]);
    let joined = &joined[1..];
    for (i, l) in joined.iter().enumerate() {
        let k = first + i as u64;
        assert_eq!(
            l,
            &format!("line {k:08} {}", "x".repeat((k % 250) as usize))
        );
    }
    assert_eq!(first + joined.len() as u64, n, "last line present");
}

#[test]
fn oversized_record_goes_alone_into_a_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&p, opts(50, 3, 1000)).expect("open");
    w.write(Stream::Stdout, b"a\n", t0()).expect("write");
    w.write(Stream::Stdout, &[b'y'; 200], t0()).expect("write");
    w.write(Stream::Stdout, b"\nb\n", t0()).expect("write");
    drop(w);
    let rotated = list_rotated(&p).expect("list");
    assert_eq!(rotated.len(), 2);
    assert_eq!(
        records(&rotated[0].path),
        vec![(Stream::Stdout, false, b"a".to_vec())]
    );
    assert_eq!(
        records(&rotated[1].path),
        vec![(Stream::Stdout, false, vec![b'y'; 200])]
    );
    assert_eq!(records(&p), vec![(Stream::Stdout, false, b"b".to_vec())]);
    assert_eq!(
        rotated[1].key.counter, 1,
        "second rotation in the same second gets .1"
    );
}

#[test]
fn max_files_one_keeps_only_the_current_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&p, opts(100, 1, 1000)).expect("open");
    for i in 0..20 {
        w.write(Stream::Stdout, format!("line {i}\n").as_bytes(), t0())
            .expect("write");
    }
    drop(w);
    assert!(list_rotated(&p).expect("list").is_empty());
    let last = records(&p).pop().expect("a record");
    assert_eq!(last.2, b"line 19".to_vec());
}

#[test]
fn unwritable_log_drops_output_then_writes_a_marker() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The log directory's place is taken by a file: nothing can be opened there.
    let blocker = dir.path().join("c");
    fs::write(&blocker, b"").expect("write");
    let p = blocker.join("0.log");
    let (mut w, err) = CriLogWriter::open_or_drop(&p, LogOptions::default()).expect("open");
    assert!(matches!(err, Some(LogError::CreateDir { .. })), "{err:?}");
    w.write(Stream::Stdout, b"lost 1\nlost 2\n", t0())
        .expect("dropped, not failed");
    w.write(Stream::Stderr, b"lost 3\n", t0())
        .expect("dropped, not failed");
    assert_eq!(w.dropped_bytes(), 3 * 47);
    // Space again: the marker comes first, then the output.
    fs::remove_file(&blocker).expect("rm");
    w.write(Stream::Stdout, b"back\n", t0()).expect("write");
    assert_eq!(w.dropped_bytes(), 0);
    drop(w);
    let got = records(&p);
    assert_eq!(got.len(), 2, "{got:?}");
    let marker = String::from_utf8(got[0].2.clone()).expect("utf8");
    assert_eq!(got[0].0, Stream::Stderr);
    assert!(
        marker.starts_with(DROP_MARKER)
            && marker.contains("3 record(s), 141 bytes")
            && marker.contains("cannot create log directory"),
        "{marker}"
    );
    assert_eq!(got[1], (Stream::Stdout, false, b"back".to_vec()));
}
