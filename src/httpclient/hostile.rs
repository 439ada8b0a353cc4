//! Test support: a hostile HTTP/1.1 server on 127.0.0.1 (std `TcpListener`, one thread per
//! connection) and a way to measure a client's peak memory by running a test's client side
//! in a child process (this test binary re-executed with only that test selected).
//!
//! Every client of [`super`] is tested against each [`Hostile`] behaviour: a gzip bomb,
//! an endless body, slowloris headers, huge headers and a redirect loop (plus a trickled
//! body). The server stops writing when it is dropped or the client hangs up.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// Decoded size of [`Hostile::GzipBomb`]: 1 GiB of text.
pub const BOMB_DECODED: u64 = 1 << 30;
/// The environment variable that tells a re-executed test it is the child, and where the
/// server is.
const CHILD_URL: &str = "PODVISOR_HOSTILE_URL";
/// No hostile behaviour lasts longer than this, so a client without a deadline fails its test
/// (with a different error) instead of hanging it.
const SAFETY_STOP: Duration = Duration::from_secs(120);
/// Pace of the trickling behaviours: far below any per-read timeout.
const TRICKLE: Duration = Duration::from_millis(50);

/// What the server does with a request.
#[derive(Debug, Clone)]
pub enum Hostile {
    /// 200 with `Content-Encoding: gzip`: [`BOMB_DECODED`] bytes of text in about 1 MB.
    GzipBomb,
    /// 200 without a length, body bytes at full speed until the client hangs up.
    EndlessBody,
    /// A status line, then one header byte every 50 ms, never ending the head.
    SlowHead,
    /// A status line, then header lines at full speed, never ending the head.
    HugeHead,
    /// 302 back to the same path.
    RedirectLoop,
    /// 200 with a 1 GiB Content-Length, then one body byte every 50 ms.
    TrickleBody,
    /// A normal response.
    Reply {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
}

type Route = dyn Fn(&str) -> Hostile + Send + Sync;

/// A hostile server; dropping it stops every connection.
pub struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Serves every request with `route(path)`.
    pub fn start(route: impl Fn(&str) -> Hostile + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local addr").port();
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let route: Arc<Route> = Arc::new(route);
        thread::spawn(move || {
            while !stop2.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (route, stop) = (Arc::clone(&route), Arc::clone(&stop2));
                        thread::spawn(move || serve(conn, &*route, &stop));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Server { port, stop }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `127.0.0.1:<port>`.
    pub fn authority(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(mut conn: TcpStream, route: &Route, stop: &AtomicBool) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let Some(path) = read_request_path(&mut conn) else {
        return;
    };
    let started = Instant::now();
    let going = || !stop.load(Ordering::SeqCst) && started.elapsed() < SAFETY_STOP;
    let _ = match route(&path) {
        Hostile::GzipBomb => conn
            .write_all(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\
                     Content-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    bomb().len()
                )
                .as_bytes(),
            )
            .and_then(|()| conn.write_all(bomb())),
        Hostile::EndlessBody => {
            let chunk = vec![b'x'; 64 << 10];
            let mut r = conn.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            while r.is_ok() && going() {
                r = conn.write_all(&chunk);
            }
            r
        }
        Hostile::SlowHead => {
            let mut r = conn.write_all(b"HTTP/1.1 200 OK\r\nX-Slow: ");
            while r.is_ok() && going() {
                thread::sleep(TRICKLE);
                r = conn.write_all(b"a");
            }
            r
        }
        Hostile::HugeHead => {
            // Headers of 4 KB: the head limit (at most 64 KiB) is reached long before ureq's
            // 128-header parse limit, whatever the client's reads gather at once (with 1 KB
            // headers a 128 KiB read under load held 129 and failed as "too many headers").
            let mut r = conn.write_all(b"HTTP/1.1 200 OK\r\n");
            let mut i = 0u64;
            while r.is_ok() && going() {
                r = conn.write_all(format!("X-Pad-{i}: {}\r\n", "a".repeat(4000)).as_bytes());
                i += 1;
            }
            r
        }
        Hostile::RedirectLoop => conn.write_all(
            format!(
                "HTTP/1.1 302 Found\r\nLocation: {path}\r\nContent-Length: 0\r\n\
                 Connection: close\r\n\r\n"
            )
            .as_bytes(),
        ),
        Hostile::TrickleBody => {
            let mut r = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n");
            while r.is_ok() && going() {
                thread::sleep(TRICKLE);
                r = conn.write_all(b"{");
            }
            r
        }
        Hostile::Reply {
            status,
            headers,
            body,
        } => {
            let mut head = format!(
                "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (k, v) in headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str("\r\n");
            conn.write_all(head.as_bytes())
                .and_then(|()| conn.write_all(&body))
        }
    };
    // Let the client read what was sent before the socket closes.
    let _ = conn.shutdown(std::net::Shutdown::Write);
    let mut sink = [0u8; 1024];
    while matches!(conn.read(&mut sink), Ok(n) if n > 0) {}
}

/// The path (with query) of the request on `conn`, once its head is read.
fn read_request_path(conn: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).ok().filter(|&n| n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > 64 << 10 {
            return None;
        }
    }
    let line = String::from_utf8_lossy(&head);
    line.split(' ').nth(1).map(str::to_string)
}

/// The bomb: one gzip member of 1 MiB of text, repeated (gzip allows concatenated members,
/// and ureq's decoder reads them all) up to [`BOMB_DECODED`].
fn bomb() -> &'static [u8] {
    static BOMB: OnceLock<Vec<u8>> = OnceLock::new();
    BOMB.get_or_init(|| {
        let text: Vec<u8> = b"{\"apiVersion\": \"v1\", \"kind\": \"Pod\"}    \n"
            .iter()
            .copied()
            .cycle()
            .take(1 << 20)
            .collect();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&text).expect("gzip");
        let member = enc.finish().expect("gzip");
        member.repeat((BOMB_DECODED >> 20) as usize)
    })
}

/// In a child started by [`run_in_child`]: the server URL it was given.
pub fn child_url() -> Option<String> {
    std::env::var(CHILD_URL).ok()
}

/// The line a child prints with its peak RSS.
const PEAK_MARKER: &str = "podvisor-hostile-peak-rss-kib: ";

/// In a child started by [`run_in_child`], at the end of its test: prints its own peak RSS
/// (VmHWM, which belongs to the memory map exec gave it). `ru_maxrss` would not do: Linux
/// carries the parent's RSS at fork across exec into it, so a big parallel test binary
/// inflated the child's figure.
pub fn report_peak_rss() {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmHWM in /proc/self/status");
    println!("\n{PEAK_MARKER}{kib}");
}

/// Runs test `module::name` like [`run_in_child`] and asserts its peak RSS: below three
/// times `max_body` (the body limit, and the buffer growing to twice that) plus 64 MiB for
/// the test binary itself. Prints the peak, naming the client `what`.
pub fn assert_child_memory_bounded(module: &str, name: &str, url: &str, what: &str, max_body: u64) {
    let peak = run_in_child(module, name, url);
    eprintln!(
        "{what} against hostile servers: peak RSS {} KiB",
        peak >> 10
    );
    let bound = 3 * max_body + (64 << 20);
    assert!(peak < bound, "{what}: peak RSS {peak} bytes, bound {bound}");
}

/// Runs test `module::name` (the path `module_path!()` gives, crate name first) alone in a
/// child process of this test binary with `url` as its [`child_url`], requires it to pass,
/// and returns its peak RSS in bytes (the VmHWM it printed with [`report_peak_rss`]).
pub fn run_in_child(module: &str, name: &str, url: &str) -> u64 {
    let test = match module.split_once("::") {
        Some((_, rest)) => format!("{rest}::{name}"),
        None => name.to_string(),
    };
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_URL, url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the test binary");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let mut err = String::new();
    let _ = stderr.read_to_string(&mut err);
    let out = out.join().unwrap_or_default();
    let status = child.wait().expect("wait for the child test");
    assert!(
        status.success(),
        "child test {test} failed ({status}):\n{out}\n{err}"
    );
    assert!(
        out.contains("1 passed"),
        "child ran no test named {test}:\n{out}"
    );
    let kib: u64 = out
        .lines()
        // libtest may have printed "test <name> ... " on the same line
        .find_map(|l| l.split_once(PEAK_MARKER).map(|(_, v)| v))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("child test {test} reported no peak RSS:\n{out}"));
    kib * 1024
}
