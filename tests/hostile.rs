//! The real binary against a gzip bomb (1 GiB of text in about 1 MB of gzip): the daemon
//! polling it as its manifest URL, and `podvisor image pull` fetching it as a manifest. Both
//! must end with an error naming the limit, with a peak RSS far below the bomb (the daemon's
//! VmHWM while it runs; the pull's `ru_maxrss`). The per-client tests of every hostile
//! behaviour (endless body, slowloris, huge headers, redirect loops) are unit tests beside
//! the clients (src/sources/url.rs, src/images/client.rs).
//!
//! Each test prints the peak it measured; `PODVISOR_TEST_BIN=/path/to/podvisor` runs them
//! against another build (an older one fails the bound, and prints its peak).

mod common;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::OnceLock;
use std::thread;
use std::time::Duration;

use common::daemon::{wait_for, Daemon};
use common::TestEnv;
use podvisor::status::SourceErrorView;

/// Peak RSS allowed: the largest limit involved (the manifest URL's 10 MiB) a few times
/// over, plus the process itself.
const BOUND: u64 = 160 << 20;

/// One gzip member of 1 MiB of manifest-like text, repeated 1024 times.
fn bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| {
        let text = b"{\"apiVersion\": \"v1\", \"kind\": \"Pod\"}    \n".repeat(1 << 15);
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&text[..1 << 20]).expect("gzip");
        enc.finish().expect("gzip").repeat(1024)
    })
}

/// Answers every request on 127.0.0.1 with the bomb; returns `host:port`.
fn bomb_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            thread::spawn(move || {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut buf) {
                        Ok(n) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let body = bomb();
                let _ = write!(
                    conn,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                     Content-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(body);
            });
        }
    });
    addr
}

fn vm_hwm(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kib << 10
}

#[test]
fn daemon_polling_a_gzip_bomb_url_stays_bounded() {
    let env = TestEnv::new("bomb-url");
    let url = format!("http://{}/pods", bomb_server());
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("manifests");
    let daemon = Daemon::start_with(&env, &manifests, &["--manifest-url", &url]);
    let errors = || {
        podvisor::api::client::get_json::<Vec<SourceErrorView>>(&daemon.socket, "/source-errors")
            .unwrap_or_default()
    };
    wait_for("the URL's source error", Duration::from_secs(60), || {
        errors().iter().any(|e| e.source == url)
    });
    let peak = vm_hwm(daemon.pid());
    let message = errors()
        .into_iter()
        .find(|e| e.source == url)
        .map(|e| e.message)
        .unwrap_or_default();
    eprintln!(
        "daemon with a gzip bomb manifest URL: peak RSS {} KiB: {message}",
        peak >> 10
    );
    assert!(peak < BOUND, "daemon peak RSS {peak} bytes, bound {BOUND}");
    assert!(
        message.contains("larger than the 10485760-byte limit (counted after decompression)"),
        "{message}"
    );
    daemon.stop();
}

#[test]
fn image_pull_of_a_gzip_bomb_manifest_stays_bounded() {
    let env = TestEnv::new("bomb-pull");
    let addr = bomb_server();
    let yaml = env.dir.path().join("registries.yaml");
    fs::write(
        &yaml,
        format!("mirrors:\n  \"{addr}\":\n    endpoint: [\"http://{addr}\"]\n"),
    )
    .expect("registries.yaml");
    let docker_config = env.dir.path().join("docker-config.json");
    fs::write(&docker_config, "{}").expect("docker config");
    let child = env
        .podvisor()
        .args(["image", "pull", &format!("{addr}/bomb/app:v1")])
        .arg("--registry-config")
        .arg(&yaml)
        .arg("--docker-config")
        .arg(&docker_config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("podvisor image pull");
    let (ok, stderr, peak) = common::wait_with_peak_rss(child);
    eprintln!(
        "image pull of a gzip bomb manifest: peak RSS {} KiB",
        peak >> 10
    );
    assert!(!ok, "the pull succeeded:\n{stderr}");
    assert!(peak < BOUND, "pull peak RSS {peak} bytes, bound {BOUND}");
    assert!(
        stderr.contains("is larger than the 4194304-byte limit"),
        "{stderr}"
    );
}
