//! Tests of the secure port in-process with real clients (curl, openssl s_client): TLS
//! versions, slow and oversized requests, the connection bound.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::nodeapi::auth::{Authenticator, Authorizer, TokenFile};
use crate::nodeapi::routes::tests::{context, snapshot};
use crate::nodeapi::secure::{serve_secure, SecureServer, SecureSettings};
use crate::nodeapi::tls::{server_config, MinVersion, TlsSettings};

fn server(dir: &Path, min_version: MinVersion, max_connections: usize) -> SecureServer {
    server_with(dir, min_version, max_connections, snapshot())
}

fn server_with(
    dir: &Path,
    min_version: MinVersion,
    max_connections: usize,
    snap: crate::status::Snapshot,
) -> SecureServer {
    let tls = server_config(&TlsSettings {
        generated_dir: dir.join("pki"),
        node_name: "testnode".into(),
        min_version,
        ..Default::default()
    })
    .expect("tls");
    let tokens = TokenFile::parse("secret,tester\n", Path::new("t.csv")).expect("tokens");
    serve_secure(
        SecureSettings {
            addr: "127.0.0.1:0".parse().expect("addr"),
            tls,
            authenticator: Authenticator {
                x509: false,
                tokens: Some(tokens),
                anonymous: false,
            },
            authorizer: Authorizer::AlwaysAllow,
            max_connections,
        },
        context(snap, dir),
    )
    .expect("serve")
}

fn s_client(addr: SocketAddr, version: &str) -> bool {
    let out = Command::new("openssl")
        .args(["s_client", "-connect", &addr.to_string(), version])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    out.status.success() && text.contains("Cipher is") && !text.contains("Cipher is (NONE)")
}

fn curl(addr: SocketAddr, dir: &Path, path: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-w",
            "\n%{http_code}",
            "--cacert",
        ])
        .arg(dir.join("pki/kubelet.crt"))
        .args(args)
        .arg(format!("https://127.0.0.1:{}{path}", addr.port()))
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn tls_min_version_13_refuses_12_and_min_12_takes_both() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s13 = server(dir.path(), MinVersion::Tls13, 8);
    let a13 = s13.local_addr().expect("bound");
    assert!(s_client(a13, "-tls1_3"));
    assert!(!s_client(a13, "-tls1_2"));
    let s12 = server(dir.path(), MinVersion::Tls12, 8);
    let a12 = s12.local_addr().expect("bound");
    assert!(s_client(a12, "-tls1_3"));
    assert!(s_client(a12, "-tls1_2"));
    assert!(!s_client(a12, "-tls1_1"));
    // The self-signed certificate verifies for 127.0.0.1, and a token gets in.
    let (code, body) = curl(
        a12,
        dir.path(),
        "/healthz",
        &["-H", "Authorization: Bearer secret"],
    );
    assert_eq!((code, body.as_str()), (200, "ok"));
    let (code, body) = curl(a12, dir.path(), "/healthz", &[]);
    assert_eq!((code, body.as_str()), (401, "Unauthorized\n"));
}

/// Reads until the server closes; true if it did within `limit`.
fn closed_within(c: &mut TcpStream, limit: Duration) -> bool {
    c.set_read_timeout(Some(limit)).expect("timeout");
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

#[test]
fn slow_silent_and_oversized_clients_are_cut_and_connections_bounded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = server(dir.path(), MinVersion::Tls12, 2);
    let addr = s.local_addr().expect("bound");
    // Two silent clients take both slots; a third is closed at once.
    let mut a = TcpStream::connect(addr).expect("a");
    let mut b = TcpStream::connect(addr).expect("b");
    std::thread::sleep(Duration::from_millis(300));
    let mut c = TcpStream::connect(addr).expect("c");
    assert!(
        closed_within(&mut c, Duration::from_secs(5)),
        "over the bound"
    );
    // The silent ones are cut by the handshake deadline (10 s), not kept forever.
    let t0 = Instant::now();
    assert!(closed_within(&mut a, Duration::from_secs(30)));
    assert!(closed_within(&mut b, Duration::from_secs(30)));
    assert!(t0.elapsed() >= Duration::from_secs(5), "{:?}", t0.elapsed());
    // A slowloris client trickling bytes is cut by the same deadline.
    let mut slow = TcpStream::connect(addr).expect("slow");
    let t0 = Instant::now();
    let mut cut = false;
    while t0.elapsed() < Duration::from_secs(40) {
        if slow.write_all(b"\x16").is_err() {
            cut = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(cut, "slowloris connection still open after 40 s");
    // Slots are free again: a real client is served.
    let (code, _) = curl(
        addr,
        dir.path(),
        "/pods",
        &["-H", "Authorization: Bearer secret"],
    );
    assert_eq!(code, 200);
    // An oversized head is refused without reading it all.
    let big = format!("X-Big: {}", "a".repeat(20 * 1024));
    let (code, _) = curl(addr, dir.path(), "/pods", &["-H", &big]);
    assert_eq!(code, 431);
}

#[test]
fn request_bodies_are_bounded_and_need_a_length() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = server(dir.path(), MinVersion::Tls12, 8);
    let addr = s.local_addr().expect("bound");
    let auth = ["-H", "Authorization: Bearer secret"];
    let put = |args: &[&str]| {
        let mut all = vec!["-X", "PUT", "-H", "Content-Type: application/yaml"];
        all.extend_from_slice(&auth);
        all.extend_from_slice(args);
        curl(
            addr,
            dir.path(),
            "/api/v1/namespaces/default/pods/web",
            &all,
        )
    };
    // Over 1 MiB: 413 before anything is read.
    let big = dir.path().join("big.yaml");
    std::fs::write(&big, vec![b'#'; 2 * 1024 * 1024]).expect("big");
    let (code, body) = put(&["--data-binary", &format!("@{}", big.display())]);
    assert_eq!(code, 413, "{body}");
    // Chunked: 411.
    let (code, _) = put(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        "kind: Pod",
    ]);
    assert_eq!(code, 411);
    // This test server has no sync loop behind it: a well-formed push is refused with 405.
    let (code, body) = put(&["--data-binary", "kind: Pod"]);
    assert_eq!(code, 405, "{body}");
    // A slowloris body (10 bytes of a declared 100, then nothing) is cut by the response
    // deadline (30 s): openssl s_client sees the connection end.
    let mut client = Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &addr.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("openssl");
    let mut stdin = client.stdin.take().expect("stdin");
    stdin
        .write_all(
            b"PUT /api/v1/namespaces/default/pods/web HTTP/1.1\r\nHost: x\r\n\
              Authorization: Bearer secret\r\nContent-Type: application/yaml\r\n\
              Content-Length: 100\r\n\r\n0123456789",
        )
        .expect("send");
    stdin.flush().expect("flush");
    let t0 = Instant::now();
    let mut out = String::new();
    let mut stdout = client.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let mut ended = false;
    while t0.elapsed() < Duration::from_secs(60) {
        if reader.is_finished() {
            ended = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = client.kill();
    let _ = client.wait();
    assert!(ended, "slow body still open after 60 s");
    assert!(
        t0.elapsed() >= Duration::from_secs(20),
        "{:?}",
        t0.elapsed()
    );
    let out = reader.join().expect("reader");
    assert!(out.starts_with("HTTP/1.1 400 ") || out.is_empty(), "{out}");
    drop(stdin);
}

#[test]
fn log_followers_are_bounded_and_freed_when_the_client_leaves() {
    use crate::logs::{CriLogWriter, LogOptions, Stream};
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("0.log");
    let mut w = CriLogWriter::open(&log, LogOptions::default()).expect("writer");
    w.write(Stream::Stdout, b"hello\n", std::time::SystemTime::now())
        .expect("write");
    let mut snap = snapshot();
    snap.pods[1].log_paths.insert("main".into(), log);
    // The test context allows two followers.
    let s = server_with(dir.path(), MinVersion::Tls12, 8, snap);
    let addr = s.local_addr().expect("bound");
    let path = "/containerLogs/default/web-node/main?follow=true";
    let follow = |secs: &str| {
        Command::new("curl")
            .args([
                "-sS",
                "-N",
                "--max-time",
                secs,
                "-o",
                "/dev/null",
                "-w",
                "%{http_code}",
            ])
            .arg("--cacert")
            .arg(dir.path().join("pki/kubelet.crt"))
            .args(["-H", "Authorization: Bearer secret"])
            .arg(format!("https://127.0.0.1:{}{path}", addr.port()))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("curl")
    };
    // Followers whose clients leave (curl's --max-time) free their slots: more in a row than
    // the bound all get their stream.
    for _ in 0..3 {
        let out = follow("2").wait_with_output().expect("curl");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    }
    // Two at once hold both slots: a third is refused with 503.
    let a = follow("8");
    let b = follow("8");
    std::thread::sleep(Duration::from_secs(2));
    let (code, body) = curl(
        addr,
        dir.path(),
        path,
        &["-H", "Authorization: Bearer secret"],
    );
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("too many log followers"), "{body}");
    for c in [a, b] {
        let out = c.wait_with_output().expect("curl");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    }
}
