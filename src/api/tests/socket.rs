//! api tests over a real unix socket: socket setup, the client, log following and its end.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated};

use crate::api::client::{get_json, get_stream};
use crate::api::handlers::tests::view;
use crate::api::server::{serve_with, Limits};
use crate::api::{serve, ApiError};
use crate::status::{PodView, Snapshot, SnapshotCell};

fn record(line: &str) -> String {
    format!("2024-01-02T03:04:05.000000001Z stdout F {line}\n")
}

fn append(path: &Path, text: &str) {
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("open log");
    f.write_all(text.as_bytes()).expect("append");
}

/// A snapshot with one running single-container pod whose log is `log`.
fn snapshot(log: &Path) -> Snapshot {
    let mut v = view("default", "web-n1", &["app"]);
    v.log_paths.insert("app".into(), log.to_owned());
    Snapshot {
        node_name: "n1".into(),
        pods: vec![v, view("kube-system", "etcd-n1", &["etcd", "backup"])],
        ..Default::default()
    }
}

fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends a raw request and returns the whole response.
fn raw(socket: &Path, request: &str) -> String {
    let mut s = UnixStream::connect(socket).expect("connect");
    s.write_all(request.as_bytes()).expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

struct Setup {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    log: PathBuf,
    cell: SnapshotCell,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("run/podvisor/api.sock");
    let log = dir.path().join("0.log");
    append(&log, &(record("first") + &record("second")));
    let cell = SnapshotCell::new(snapshot(&log));
    Setup {
        _dir: dir,
        socket,
        log,
        cell,
    }
}

#[test]
fn socket_modes_client_and_routes() {
    let s = setup();
    let server = serve(&s.socket, s.cell.clone()).expect("serve");
    let meta = fs::metadata(&s.socket).expect("socket");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let dir_meta = fs::metadata(s.socket.parent().expect("dir")).expect("dir");
    assert_eq!(dir_meta.permissions().mode() & 0o777, 0o700);
    // No temporary socket left beside it.
    let names: Vec<_> = fs::read_dir(s.socket.parent().expect("dir"))
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("api.sock")]);

    let pods: Vec<PodView> = get_json(&s.socket, "/pods").expect("pods");
    assert_eq!(pods, s.cell.get().pods);
    let etcd: PodView = get_json(&s.socket, "/pods/etcd").expect("short name");
    assert_eq!(etcd.pod.metadata.name.as_deref(), Some("etcd-n1"));

    let err = get_json::<PodView>(&s.socket, "/pods/default/nope").expect_err("404");
    assert!(
        matches!(&err, ApiError::Status { status: 404, message } if message == "pod \"default/nope\" not found"),
        "{err:?}"
    );
    let err = get_json::<PodView>(&s.socket, "/pods/kube-system/etcd-n1/log").expect_err("400");
    assert_eq!(err.status(), 400);
    assert_eq!(
        err.to_string(),
        "a container name must be specified for pod kube-system/etcd-n1, choose one of: [etcd backup]"
    );

    let mut out = Vec::new();
    get_stream(&s.socket, "/healthz", &mut out).expect("healthz");
    assert_eq!(out, b"ok");
    let mut out = Vec::new();
    get_stream(&s.socket, "/pods/default/web-n1/log?tail=1", &mut out).expect("log");
    assert_eq!(out, b"second\n");

    let r = raw(&s.socket, "DELETE /pods HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
    assert!(r.contains("\r\nAllow: GET\r\n"), "{r}");
    let r = raw(&s.socket, "nonsense\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{r}");
    assert!(
        r.contains("{\"error\":\"malformed request request line"),
        "{r}"
    );
    let r = raw(&s.socket, "GET /pods?x=%zz HTTP/1.1\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 400 "), "{r}");
    let r = raw(&s.socket, "GET /nodes HTTP/1.1\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 404 "), "{r}");

    server.stop();
    assert!(!s.socket.exists(), "socket removed on stop");
    let err = get_json::<Vec<PodView>>(&s.socket, "/pods").expect_err("stopped");
    assert!(
        err.to_string().contains("is `podvisor run` running?"),
        "{err}"
    );
}

/// Reads a chunked follow response from a raw connection, one chunk at a time.
struct RawFollow {
    reader: BufReader<UnixStream>,
}

impl RawFollow {
    fn open(socket: &Path, path: &str) -> (RawFollow, String) {
        let mut s = UnixStream::connect(socket).expect("connect");
        s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .expect("send");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut reader = BufReader::new(s);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).expect("head line");
            head.push_str(&line);
            if line == "\r\n" || line.is_empty() {
                break;
            }
        }
        (RawFollow { reader }, head)
    }

    fn chunk(&mut self) -> String {
        let mut size = String::new();
        self.reader.read_line(&mut size).expect("chunk size");
        let n = usize::from_str_radix(size.trim(), 16).expect("hex size");
        let mut data = vec![0u8; n + 2];
        self.reader.read_exact(&mut data).expect("chunk data");
        data.truncate(n);
        String::from_utf8(data).expect("utf8")
    }
}

#[test]
fn follow_streams_appended_lines_and_ends_when_client_leaves() {
    let s = setup();
    let server = serve(&s.socket, s.cell.clone()).expect("serve");
    let (mut f, head) = RawFollow::open(&s.socket, "/pods/default/web-n1/log?follow=true");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(head.contains("Transfer-Encoding: chunked\r\n"), "{head}");
    assert_eq!(f.chunk(), "first\nsecond\n");
    assert_eq!(server.active_followers(), 1);

    // A writer thread appends while we follow.
    let log = s.log.clone();
    let writer = std::thread::spawn(move || {
        for i in 0..3 {
            std::thread::sleep(Duration::from_millis(150));
            append(&log, &record(&format!("line {i}")));
        }
    });
    let mut got = String::new();
    while got.matches('\n').count() < 3 {
        got.push_str(&f.chunk());
    }
    writer.join().expect("writer");
    assert_eq!(got, "line 0\nline 1\nline 2\n");

    // The client hangs up while the log is quiet: the follower ends on its own.
    drop(f);
    wait_until("the follower to end", || server.active_followers() == 0);
    wait_until("the connection thread to end", || {
        server.active_connections() == 0
    });
    server.stop();
}

#[test]
fn follow_with_client_ends_when_the_container_stops() {
    let s = setup();
    let server = serve(&s.socket, s.cell.clone()).expect("serve");
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    struct ChannelWriter(mpsc::Sender<Vec<u8>>);
    impl Write for ChannelWriter {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            let _ = self.0.send(b.to_vec());
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let socket = s.socket.clone();
    let client = std::thread::spawn(move || {
        let mut w = ChannelWriter(tx);
        get_stream(
            &socket,
            "/pods/default/web-n1/log?follow=true&tail=1",
            &mut w,
        )
    });
    let first = rx.recv_timeout(Duration::from_secs(5)).expect("tail");
    assert_eq!(first, b"second\n");
    append(&s.log, &record("third"));
    let next = rx.recv_timeout(Duration::from_secs(5)).expect("appended");
    assert_eq!(next, b"third\n");

    // The container exits: a last line is written, then the snapshot says Terminated.
    append(&s.log, &record("bye"));
    let mut snap = snapshot(&s.log);
    let st = snap.pods[0].pod.status.as_mut().expect("status");
    st.container_statuses.as_mut().expect("statuses")[0].state = Some(ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 0,
            reason: Some("Completed".into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    s.cell.publish(snap);
    client
        .join()
        .expect("client thread")
        .expect("stream ends cleanly");
    let rest: Vec<u8> = rx.try_iter().flatten().collect();
    assert_eq!(rest, b"bye\n");
    wait_until("the follower to end", || server.active_followers() == 0);
}

#[test]
fn followers_are_capped_and_stop_ends_them() {
    let s = setup();
    let limits = Limits {
        max_followers: 1,
        max_connections: 8,
    };
    let server = serve_with(&s.socket, s.cell.clone(), limits).expect("serve");
    let (mut f, _) = RawFollow::open(&s.socket, "/pods/default/web-n1/log?follow=true");
    assert_eq!(f.chunk(), "first\nsecond\n");
    let r = raw(
        &s.socket,
        "GET /pods/default/web-n1/log?follow=true HTTP/1.1\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{r}");
    assert!(r.contains("too many log followers (limit 1)"), "{r}");
    // Non-follow requests still work.
    let _: Vec<PodView> = get_json(&s.socket, "/pods").expect("pods");

    // Stopping the server ends the stream with its final chunk.
    let started = Instant::now();
    server.stop();
    assert!(started.elapsed() < Duration::from_secs(3));
    let mut rest = String::new();
    f.reader.read_to_string(&mut rest).expect("rest");
    assert_eq!(rest, "0\r\n\r\n");
    assert!(!s.socket.exists());
}

#[test]
fn stale_socket_replaced_live_one_refused() {
    let s = setup();
    fs::create_dir_all(s.socket.parent().expect("dir")).expect("mkdir");
    // A socket file left by a crashed daemon.
    drop(UnixListener::bind(&s.socket).expect("stale bind"));
    assert!(s.socket.exists());
    let server = serve(&s.socket, s.cell.clone()).expect("replaces stale socket");
    let _: Vec<PodView> = get_json(&s.socket, "/pods").expect("served");

    // A second server on the same path is refused while the first one runs.
    let err = serve(&s.socket, s.cell.clone()).expect_err("in use");
    assert!(matches!(err, ApiError::SocketInUse { .. }), "{err:?}");
    let _: Vec<PodView> = get_json(&s.socket, "/pods").expect("still served");
    drop(server);
    assert!(!s.socket.exists(), "removed on drop");

    // Something that is not a socket is never replaced.
    fs::write(&s.socket, b"precious").expect("file");
    let err = serve(&s.socket, s.cell.clone()).expect_err("not a socket");
    assert_eq!(
        err.to_string(),
        format!(
            "{} exists and is not a socket, refusing to replace it",
            s.socket.display()
        )
    );
    assert_eq!(fs::read(&s.socket).expect("file kept"), b"precious");
}

#[test]
fn cli_commands_over_the_socket() {
    use crate::cli::{self, LogsOptions, OutputFormat};
    use crate::status::{EventRecord, EventType, SourceErrorView};

    let s = setup();
    let mut snap = s.cell.get().as_ref().clone();
    snap.source_errors.push(SourceErrorView {
        source: "/etc/podvisor/manifests/new.yaml".into(),
        message: "new.yaml:1:1: not a Pod".into(),
        since: "2024-01-02T03:04:05Z".into(),
    });
    snap.events.push(
        EventRecord {
            type_: EventType::Warning,
            reason: "BackOff".into(),
            message: "Back-off restarting failed container etcd".into(),
            pod: "kube-system/etcd-n1".into(),
            container: Some("etcd".into()),
            count: 4,
            first_timestamp: "2024-01-02T03:00:00Z".into(),
            last_timestamp: "2024-01-02T03:04:00Z".into(),
        }
        .into(),
    );
    s.cell.publish(snap);
    let server = serve(&s.socket, s.cell.clone()).expect("serve");
    let text = |r: Vec<u8>| String::from_utf8(r).expect("utf8");

    let (mut out, mut err) = (Vec::new(), Vec::new());
    cli::get_pods(&s.socket, None, OutputFormat::Table, &mut out, &mut err).expect("pods");
    let (out, err) = (text(out), text(err));
    assert!(
        out.starts_with("NAME      READY   STATUS    RESTARTS   AGE\n"),
        "{out}"
    );
    assert!(
        out.contains("\nweb-n1    0/1     Running   0          <unknown>\n"),
        "{out}"
    );
    assert_eq!(
        err,
        "warning: /etc/podvisor/manifests/new.yaml: new.yaml:1:1: not a Pod\n"
    );

    let (mut out, mut err) = (Vec::new(), Vec::new());
    cli::get_pods(
        &s.socket,
        Some("etcd"),
        OutputFormat::Yaml,
        &mut out,
        &mut err,
    )
    .expect("pod yaml");
    let out = text(out);
    assert!(out.contains("kind: Pod"), "{out}");
    assert!(out.contains("name: etcd-n1"), "{out}");

    let mut out = Vec::new();
    cli::describe_pod(&s.socket, "etcd", &mut out).expect("describe");
    let out = text(out);
    assert!(out.starts_with("Name:"), "{out}");
    assert!(out.contains("Namespace:    kube-system\n"), "{out}");
    assert!(out.contains("BackOff  "), "{out}");
    assert!(out.contains("(x4 over "), "{out}");

    let (mut out, mut err) = (Vec::new(), Vec::new());
    cli::get_events(&s.socket, Some("kube-system/etcd-n1"), &mut out, &mut err).expect("events");
    let out = text(out);
    assert!(out.contains("pod/etcd-n1"), "{out}");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    cli::get_events(&s.socket, Some("web"), &mut out, &mut err).expect("no events");
    assert!(out.is_empty());
    assert_eq!(text(err), "No events found\n");

    let mut out = Vec::new();
    let opts = LogsOptions {
        pod: "web".into(),
        tail: Some(1),
        ..Default::default()
    };
    cli::logs(&s.socket, &opts, &mut out).expect("logs");
    assert_eq!(text(out), "second\n");
    let opts = LogsOptions {
        pod: "etcd".into(),
        ..Default::default()
    };
    let err = cli::logs(&s.socket, &opts, &mut Vec::new()).expect_err("two containers");
    assert!(
        err.to_string().contains("choose one of: [etcd backup]"),
        "{err}"
    );
    drop(server);
}
