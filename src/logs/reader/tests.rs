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
    let r = parse_record(b"2024-01-02T03:04:05.123456789Z stdout F hello world\n").expect("parse");
    assert_eq!(
        r,
        CriLogRecord {
            timestamp: "2024-01-02T03:04:05.123456789Z".into(),
            stream: Stream::Stdout,
            partial: false,
            content: b"hello world".to_vec(),
        }
    );
    let r =
        parse_record(b"2016-10-06T00:17:09.669794202Z stderr P:x:y  two spaces").expect("parse");
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
