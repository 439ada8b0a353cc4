//! Tests of the manifest directory source: the watcher, the periodic re-read, editor
//! leftovers, bounded reads.

use super::*;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

const WAIT: Duration = Duration::from_secs(3);

fn cfg(dir: &Path, check_frequency: Duration) -> FileSourceConfig {
    FileSourceConfig {
        dir: dir.to_path_buf(),
        check_frequency,
        debounce: DEFAULT_DEBOUNCE,
    }
}

/// The next event, skipping the one-time `FileScanComplete` marker (tested on its own).
fn next(rx: &Receiver<SourceEvent>) -> SourceEvent {
    loop {
        match rx.recv_timeout(WAIT) {
            Ok(SourceEvent::FileScanComplete { .. }) => continue,
            Ok(event) => return event,
            Err(e) => panic!("no source event within {WAIT:?}: {e}"),
        }
    }
}

/// Asserts that nothing but the scan marker arrives for `quiet`.
fn assert_quiet(rx: &Receiver<SourceEvent>, quiet: Duration) {
    let deadline = Instant::now() + quiet;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(SourceEvent::FileScanComplete { .. }) => continue,
            Ok(event) => panic!("unexpected event: {event:?}"),
            Err(_) => return,
        }
    }
}

#[test]
fn sources_file_scan_complete_follows_the_initial_files_once() {
    let tmp = tempfile::tempdir().expect("tempdir");
    fs::write(tmp.path().join("a.yaml"), "a").expect("write");
    let (tx, rx) = mpsc::channel();
    let handle = start_file_source(cfg(tmp.path(), Duration::from_millis(100)), tx).expect("start");
    let first = rx.recv_timeout(WAIT).expect("first");
    assert!(
        matches!(first, SourceEvent::FileChanged { .. }),
        "{first:?}"
    );
    let second = rx.recv_timeout(WAIT).expect("second");
    assert_eq!(
        second,
        SourceEvent::FileScanComplete {
            dir: tmp.path().to_path_buf()
        }
    );
    // Later periodic scans do not repeat it.
    assert!(rx.recv_timeout(Duration::from_millis(350)).is_err());
    handle.stop();
}

fn changed(path: &Path, data: &[u8]) -> SourceEvent {
    SourceEvent::FileChanged {
        path: path.to_path_buf(),
        data: data.to_vec(),
    }
}

fn removed(path: &Path) -> SourceEvent {
    SourceEvent::FileRemoved {
        path: path.to_path_buf(),
    }
}

/// Starts a watching source on a fresh tempdir holding `files`; returns after the
/// initial scan's events (checked) have arrived.
fn started(
    files: &[(&str, &[u8])],
    check_frequency: Duration,
) -> (tempfile::TempDir, SourceHandle, Receiver<SourceEvent>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    for (name, data) in files {
        fs::write(tmp.path().join(name), data).expect("write");
    }
    let (tx, rx) = mpsc::channel();
    let handle =
        start_file_source(cfg(tmp.path(), check_frequency), tx).expect("start file source");
    let mut sorted: Vec<_> = files
        .iter()
        .filter(|(n, _)| is_manifest_name(OsStr::new(n)))
        .collect();
    sorted.sort();
    for (name, data) in sorted {
        assert_eq!(next(&rx), changed(&tmp.path().join(name), data));
    }
    (tmp, handle, rx)
}

#[test]
fn sources_file_initial_scan_filters_names() {
    let (tmp, handle, rx) = started(
        &[
            ("a.yaml", b"a: 1"),
            ("b.json", b"{}"),
            ("c.yml", b""),
            ("a.yaml.bak", b"old"),
            (".a.yaml.swp", b"swap"),
            ("notes.txt", b"x"),
        ],
        Duration::from_secs(60),
    );
    fs::create_dir(tmp.path().join("sub.yaml")).expect("mkdir");
    fs::write(tmp.path().join("sub.yaml").join("inner.yaml"), b"x").expect("write");
    assert_quiet(&rx, Duration::from_millis(150));
    handle.stop();
}

#[test]
fn sources_file_create_delete_and_unchanged_rewrite() {
    let (tmp, handle, rx) = started(&[], Duration::from_secs(60));
    let path = tmp.path().join("web.yaml");
    fs::write(&path, b"v1").expect("write");
    assert_eq!(next(&rx), changed(&path, b"v1"));
    assert_quiet(&rx, Duration::from_millis(100));

    // Same bytes again (truncate + write): events fire, content is unchanged.
    fs::write(&path, b"v1").expect("rewrite");
    assert_quiet(&rx, Duration::from_millis(150));

    fs::remove_file(&path).expect("remove");
    assert_eq!(next(&rx), removed(&path));
    assert_quiet(&rx, Duration::from_millis(100));
    handle.stop();
}

#[test]
fn sources_file_editor_save_is_one_event() {
    let (tmp, handle, rx) = started(&[("x.yaml", b"old")], Duration::from_secs(60));
    let path = tmp.path().join("x.yaml");
    let tmp_path = tmp.path().join("x.yaml.tmp");
    {
        let mut f = File::create(&tmp_path).expect("create temp");
        f.write_all(b"new: ").expect("write");
        f.write_all(b"content").expect("write");
        f.sync_all().expect("sync");
    }
    let renamed = Instant::now();
    fs::rename(&tmp_path, &path).expect("rename");
    assert_eq!(next(&rx), changed(&path, b"new: content"));
    let latency = renamed.elapsed();
    // A rename into place completes the write: it is read without the debounce wait.
    eprintln!("latency (rename -> FileChanged): {latency:?}");
    assert_quiet(&rx, Duration::from_millis(150));
    handle.stop();
}

#[test]
fn sources_file_vim_style_save() {
    let (tmp, handle, rx) = started(&[("x.yaml", b"old")], Duration::from_secs(60));
    let path = tmp.path().join("x.yaml");
    let swap = tmp.path().join(".x.yaml.swp");
    fs::write(&swap, b"swap 1").expect("swap");
    fs::write(&swap, b"swap 2").expect("swap");
    // backupcopy=yes: truncate, then write in pieces.
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .expect("open");
    f.write_all(b"new ").expect("write");
    f.write_all(b"content").expect("write");
    drop(f);
    fs::remove_file(&swap).expect("remove swap");
    assert_eq!(next(&rx), changed(&path, b"new content"));
    assert_quiet(&rx, Duration::from_millis(150));
    handle.stop();
}

#[test]
fn sources_file_steady_writes_do_not_starve() {
    let (tmp, handle, rx) = started(&[], Duration::from_secs(3600));
    let path = tmp.path().join("busy.yaml");
    // After the initial scan (which would read the file at once).
    assert_eq!(
        rx.recv_timeout(WAIT),
        Ok(SourceEvent::FileScanComplete {
            dir: tmp.path().to_path_buf()
        })
    );
    // A writer that keeps the file open (no close-write event marks its content complete)
    // and appends every 10 ms (a third of the 30 ms debounce) until the file is reported:
    // the name is never quiet for the debounce, and the periodic scan is an hour away, so
    // only the DEBOUNCE_MAX_WAIT cap can report it (on a machine so loaded that the
    // writer pauses for the debounce, the debounce may; the cap itself is tested
    // without a clock below). Order of events: the report comes while the writes go on.
    let writing = AtomicBool::new(true);
    let (got, writes) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut f = File::create(&path).expect("create");
            let mut writes = 0u32;
            // Bounded, so that a failing test ends.
            let give_up = Instant::now() + 2 * WAIT;
            while writing.load(Ordering::SeqCst) && Instant::now() < give_up {
                writeln!(f, "v{writes}").expect("write");
                writes += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            writes
        });
        let got = rx.recv_timeout(WAIT);
        let still_writing = writing.swap(false, Ordering::SeqCst);
        let writes = writer.join().expect("writer");
        assert!(still_writing, "the writes stopped first ({writes} writes)");
        (got, writes)
    });
    assert!(
        matches!(&got, Ok(SourceEvent::FileChanged { path: p, .. }) if *p == path),
        "starved ({writes} writes): {got:?}"
    );
    handle.stop();
}

#[test]
fn sources_file_pending_read_is_due_after_the_debounce_or_the_cap() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let debounce = ms(30);
    // (ms since the first event of the last one, complete) -> due, in ms after the first.
    for (last, complete, due) in [
        (0, false, 30),
        (20, false, 50),
        // Steady events: the cap, not the debounce after the last one.
        (180, false, 200),
        (500, false, 200),
        // A finished write is read at once.
        (0, true, 0),
        (500, true, 500),
    ] {
        let p = Pending {
            first: t0,
            last: t0 + ms(last),
            complete,
        };
        assert_eq!(
            p.due(debounce),
            t0 + ms(due),
            "last {last} ms, complete {complete}"
        );
    }
    assert_eq!(DEBOUNCE_MAX_WAIT, ms(200));
}

#[test]
fn sources_file_rename_to_ignored_name_is_removal() {
    let (tmp, handle, rx) = started(&[("x.yaml", b"a")], Duration::from_secs(60));
    let path = tmp.path().join("x.yaml");
    fs::rename(&path, tmp.path().join("x.yaml.bak")).expect("rename");
    assert_eq!(next(&rx), removed(&path));
    // And back: it is a manifest again.
    fs::rename(tmp.path().join("x.yaml.bak"), &path).expect("rename back");
    assert_eq!(next(&rx), changed(&path, b"a"));
    assert_quiet(&rx, Duration::from_millis(100));
    handle.stop();
}

#[test]
fn sources_file_oversized_and_fifo_are_errors() {
    let (tmp, handle, rx) = started(&[], Duration::from_secs(60));
    let big = tmp.path().join("big.yaml");
    let f = File::create(&big).expect("create");
    f.set_len(MAX_MANIFEST_BYTES + 1).expect("set_len");
    drop(f);
    match next(&rx) {
        SourceEvent::FileError { path, message } => {
            assert_eq!(path, big);
            assert!(message.contains("10485761 bytes"), "{message}");
            assert!(message.contains("10485760"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    // Shrunk under the limit: readable again.
    fs::write(&big, b"small").expect("write");
    assert_eq!(next(&rx), changed(&big, b"small"));

    let fifo = tmp.path().join("pipe.yaml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
    match next(&rx) {
        SourceEvent::FileError { path, message } => {
            assert_eq!(path, fifo);
            assert!(message.contains("fifo"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    fs::remove_file(&fifo).expect("remove fifo");
    assert_eq!(next(&rx), removed(&fifo));
    handle.stop();
}

#[test]
fn sources_file_symlinks_followed_and_rescan_sees_target_changes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let manifests = tmp.path().join("manifests");
    let store = tmp.path().join("store");
    fs::create_dir(&manifests).expect("mkdir");
    fs::create_dir(&store).expect("mkdir");
    fs::write(store.join("real.yaml"), b"v1").expect("write");
    std::os::unix::fs::symlink(store.join("real.yaml"), manifests.join("x.yaml")).expect("symlink");
    std::os::unix::fs::symlink(&store, manifests.join("dirlink.yaml")).expect("symlink");
    let (tx, rx) = mpsc::channel();
    let handle = start_file_source(cfg(&manifests, Duration::from_millis(150)), tx).expect("start");
    let link = manifests.join("x.yaml");
    assert_eq!(next(&rx), changed(&link, b"v1"));
    // The watch cannot see this (another directory); the periodic re-read does.
    fs::write(store.join("real.yaml"), b"v2").expect("write");
    assert_eq!(next(&rx), changed(&link, b"v2"));
    // Dangling link.
    fs::remove_file(store.join("real.yaml")).expect("remove");
    match next(&rx) {
        SourceEvent::FileError { path, message } => {
            assert_eq!(path, link);
            assert!(message.contains("broken symbolic link"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    handle.stop();
}

#[test]
fn sources_file_rescan_without_inotify() {
    let tmp = tempfile::tempdir().expect("tempdir");
    fs::write(tmp.path().join("a.yaml"), b"a").expect("write");
    fs::write(tmp.path().join("b.yaml"), b"b").expect("write");
    let (tx, rx) = mpsc::channel();
    let handle = start(cfg(tmp.path(), Duration::from_millis(100)), tx, false).expect("start");
    let (a, b, c) = (
        tmp.path().join("a.yaml"),
        tmp.path().join("b.yaml"),
        tmp.path().join("c.yaml"),
    );
    assert_eq!(next(&rx), changed(&a, b"a"));
    assert_eq!(next(&rx), changed(&b, b"b"));
    assert_quiet(&rx, Duration::from_millis(250));
    fs::write(&a, b"a2").expect("write");
    fs::remove_file(&b).expect("remove");
    fs::write(&c, b"c").expect("write");
    let mut got = vec![next(&rx), next(&rx), next(&rx)];
    got.sort_by_key(|e| format!("{e:?}"));
    let mut want = vec![changed(&a, b"a2"), removed(&b), changed(&c, b"c")];
    want.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(got, want);
    assert_quiet(&rx, Duration::from_millis(250));
    handle.stop();
}

#[test]
fn sources_file_missing_dir_then_created_and_recreated() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("manifests");
    let (tx, rx) = mpsc::channel();
    let handle = start_file_source(cfg(&dir, Duration::from_millis(100)), tx).expect("start");
    match next(&rx) {
        SourceEvent::DirError { dir: d, message } => {
            assert_eq!(d, dir);
            assert!(message.contains("No such file"), "{message}");
        }
        other => panic!("unexpected {other:?}"),
    }
    fs::create_dir(&dir).expect("mkdir");
    let path = dir.join("a.yaml");
    fs::write(&path, b"a").expect("write");
    let event = loop {
        // Retries while the directory was missing each send a DirError.
        match next(&rx) {
            SourceEvent::DirError { .. } => continue,
            other => break other,
        }
    };
    assert_eq!(event, changed(&path, b"a"));
    // The watch is live on the new directory.
    fs::write(&path, b"a2").expect("write");
    assert_eq!(next(&rx), changed(&path, b"a2"));

    // Deleted and recreated with the same content: after the DirError, the recovery scan
    // re-sends every file.
    fs::remove_dir_all(&dir).expect("rm -rf");
    loop {
        match next(&rx) {
            SourceEvent::DirError { .. } => break,
            SourceEvent::FileRemoved { path: p } if p == path => continue,
            other => panic!("unexpected {other:?}"),
        }
    }
    fs::create_dir(&dir).expect("mkdir");
    fs::write(&path, b"a2").expect("write");
    let event = loop {
        match next(&rx) {
            SourceEvent::DirError { .. } => continue,
            other => break other,
        }
    };
    assert_eq!(event, changed(&path, b"a2"));
    // And it is watched again (change seen well before the next 100 ms re-read would
    // matter, but either path must report it once).
    fs::write(&path, b"a3").expect("write");
    assert_eq!(next(&rx), changed(&path, b"a3"));
    assert_quiet(&rx, Duration::from_millis(250));
    handle.stop();
}

#[test]
fn sources_file_scanner_recovery_resync_and_removals() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("m");
    fs::create_dir(&dir).expect("mkdir");
    fs::write(dir.join("a.yaml"), b"a").expect("write");
    fs::write(dir.join("b.yaml"), b"b").expect("write");
    let mut scanner = Scanner::new(dir.clone());
    let mut out = Vec::new();
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert_eq!(out.len(), 2);
    out.clear();
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert!(out.is_empty(), "{out:?}");

    // Directory gone: error, nothing forgotten yet.
    fs::rename(&dir, tmp.path().join("away")).expect("rename");
    let problem = scanner
        .scan(&HashSet::new(), &mut out)
        .expect_err("directory gone");
    assert!(
        problem
            .to_string()
            .starts_with("cannot read directory: No such file or directory"),
        "{problem}"
    );
    assert!(out.is_empty(), "{out:?}");
    // Back with a.yaml unchanged and b.yaml gone: a is re-sent, b removed.
    fs::create_dir(&dir).expect("mkdir");
    fs::write(dir.join("a.yaml"), b"a").expect("write");
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert_eq!(
        out,
        vec![
            changed(&dir.join("a.yaml"), b"a"),
            removed(&dir.join("b.yaml"))
        ]
    );
    // A pending name is skipped but not considered vanished.
    out.clear();
    fs::write(dir.join("a.yaml"), b"a-new").expect("write");
    let skip: HashSet<OsString> = [OsString::from("a.yaml")].into_iter().collect();
    scanner.scan(&skip, &mut out).expect("scan");
    assert!(out.is_empty(), "{out:?}");
}

#[test]
fn sources_file_invalid_config_and_stop_is_prompt() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (bad_tx, _) = mpsc::channel();
    let mut bad = cfg(tmp.path(), Duration::ZERO);
    assert!(matches!(
        start_file_source(bad.clone(), bad_tx.clone()),
        Err(SourceError::InvalidConfig {
            field: "check_frequency",
            ..
        })
    ));
    bad.check_frequency = Duration::from_secs(1);
    bad.debounce = Duration::from_secs(1);
    assert!(matches!(
        start_file_source(bad, bad_tx),
        Err(SourceError::InvalidConfig {
            field: "debounce",
            ..
        })
    ));
    let (tx, rx) = mpsc::channel();
    // The next scan is an hour away: only the stop can end the thread before it.
    let handle = start_file_source(cfg(tmp.path(), Duration::from_secs(3600)), tx).expect("start");
    assert_eq!(
        rx.recv_timeout(WAIT),
        Ok(SourceEvent::FileScanComplete {
            dir: tmp.path().to_path_buf()
        })
    );
    assert!(handle.is_running());
    handle.stop();
    // Order of events: the thread ends (its sender dropped) before its next scan, and
    // sends nothing more.
    assert_eq!(rx.recv_timeout(WAIT), Err(RecvTimeoutError::Disconnected));
}

#[test]
fn sources_file_ends_when_receiver_dropped() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (tx, rx) = mpsc::channel();
    let handle = start_file_source(cfg(tmp.path(), Duration::from_secs(60)), tx).expect("start");
    drop(rx);
    fs::write(tmp.path().join("a.yaml"), b"a").expect("write");
    let t = Instant::now();
    while handle.is_running() && t.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!handle.is_running());
}

/// Opens of the files in the watched directory since the last call (the directory's own
/// opens, by the scan's read_dir, carry no name and are not counted).
fn opens(inotify: &nix::sys::inotify::Inotify) -> usize {
    match inotify.read_events() {
        Ok(events) => events
            .iter()
            .filter(|e| {
                e.name.is_some() && e.mask.contains(nix::sys::inotify::AddWatchFlags::IN_OPEN)
            })
            .count(),
        Err(nix::errno::Errno::EAGAIN) => 0,
        Err(e) => panic!("inotify read: {e}"),
    }
}

#[test]
fn sources_file_rescan_opens_only_changed_or_unsettled_files() {
    use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("m");
    fs::create_dir(&dir).expect("mkdir");
    fs::write(dir.join("a.yaml"), b"a").expect("write");
    fs::write(dir.join("b.yaml"), b"b").expect("write");
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).expect("inotify");
    inotify
        .add_watch(&dir, AddWatchFlags::IN_OPEN)
        .expect("watch");
    let mut scanner = Scanner::new(dir.clone());
    let mut out = Vec::new();

    // Written just now: read, but not settled (a same-size write in the same timestamp
    // tick could follow unseen), so the next scan reads them again.
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert_eq!(out.len(), 2);
    assert_eq!(opens(&inotify), 2);
    out.clear();
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(opens(&inotify), 2, "unsettled files are read again");

    // Settled: the stat tells, nothing is opened, nothing is sent.
    scanner.settle = Duration::ZERO;
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert_eq!(opens(&inotify), 2, "read once more, now settled");
    for _ in 0..3 {
        scanner.scan(&HashSet::new(), &mut out).expect("scan");
    }
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(opens(&inotify), 0, "unchanged settled files are not opened");

    // A write of the same size changes ctime: read again and sent.
    fs::write(dir.join("a.yaml"), b"x").expect("write");
    let _ = opens(&inotify); // the test's own write
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert_eq!(out, vec![changed(&dir.join("a.yaml"), b"x")]);
    assert_eq!(opens(&inotify), 1);
    // Replaced by rename (new inode) with the same content: read, nothing sent.
    out.clear();
    fs::write(dir.join(".b.tmp"), b"b").expect("write");
    fs::rename(dir.join(".b.tmp"), dir.join("b.yaml")).expect("rename");
    let _ = opens(&inotify);
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(opens(&inotify), 1);
    // A failed scan re-reads every file afterwards (resync), settled or not.
    scanner.resync = true;
    scanner.scan(&HashSet::new(), &mut out).expect("scan");
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(opens(&inotify), 2);
}
