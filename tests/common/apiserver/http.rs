//! HTTP/1.1 over TLS for the test API server: keep-alive connections, Content-Length
//! bodies, authentication (client certificate subject, else a bearer token), faults, and
//! chunked watch streams.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::{ServerConfig, ServerConnection, StreamOwned};
use serde_json::{json, Value};

use super::store::{status_error, Reply};
use super::Shared;

/// Who is asking.
#[derive(Debug, Clone)]
pub struct User {
    pub name: String,
    pub groups: Vec<String>,
}

impl User {
    /// `system:node:<name>` in group `system:nodes`: NodeRestriction applies.
    pub fn node(&self) -> Option<&str> {
        self.name
            .strip_prefix("system:node:")
            .filter(|_| self.groups.iter().any(|g| g == "system:nodes"))
    }
}

/// One request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: Vec<(String, String)>,
    pub content_type: String,
    pub body: Vec<u8>,
    pub user: User,
}

impl Request {
    pub fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(q, _)| q == k)
            .map(|(_, v)| v.as_str())
    }
}

fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        410 => "Gone",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

type Stream = StreamOwned<ServerConnection, TcpStream>;

fn write_reply(s: &mut Stream, code: u16, body: &Value, extra: &[(String, String)]) -> bool {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut head = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        reason(code),
        bytes.len()
    );
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).is_ok() && s.write_all(&bytes).is_ok() && s.flush().is_ok()
}

/// Serves one connection until it closes.
pub fn serve_connection(conn: TcpStream, tls: Arc<ServerConfig>, shared: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(120)));
    let Ok(sc) = ServerConnection::new(tls) else {
        return;
    };
    let mut stream = StreamOwned::new(sc, conn);
    // Complete the handshake first: a client that does not trust the certificate leaves here.
    while stream.conn.is_handshaking() {
        if stream.conn.complete_io(&mut stream.sock).is_err() {
            return;
        }
    }
    let cert_user = stream
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .and_then(|leaf| podvisor::nodeapi::tls::subject_cn_and_orgs(leaf))
        .map(|(name, groups)| User { name, groups });
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
            return;
        };
        let (method, target) = (method.to_string(), target.to_string());
        let mut len = 0usize;
        let mut content_type = String::new();
        let mut token = None;
        let mut close = false;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                let v = v.trim();
                match k.to_ascii_lowercase().as_str() {
                    "content-length" => len = v.parse().unwrap_or(0),
                    "content-type" => content_type = v.to_string(),
                    "authorization" => token = v.strip_prefix("Bearer ").map(String::from),
                    "connection" if v.eq_ignore_ascii_case("close") => close = true,
                    _ => {}
                }
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let (path, query) = target.split_once('?').unwrap_or((target.as_str(), ""));
        let query: Vec<(String, String)> = query
            .split('&')
            .filter(|q| !q.is_empty())
            .map(|q| {
                let (k, v) = q.split_once('=').unwrap_or((q, ""));
                (unescape(k), unescape(v))
            })
            .collect();
        shared.requests.lock().expect("requests").push((
            method.clone(),
            path.to_string(),
            Instant::now(),
        ));
        let user = cert_user.clone().or_else(|| {
            let t = token.as_ref()?;
            shared
                .tokens
                .lock()
                .expect("tokens")
                .iter()
                .find(|(tok, _, _)| tok == t)
                .map(|(_, u, g)| User {
                    name: u.clone(),
                    groups: g.clone(),
                })
        });
        let stream = reader.get_mut();
        let Some(user) = user else {
            if !write_reply(
                stream,
                401,
                &status_error(401, "Unauthorized", "Unauthorized"),
                &[],
            ) {
                return;
            }
            continue;
        };
        let req = Request {
            method,
            path: path.to_string(),
            query,
            content_type,
            body,
            user,
        };
        let faults = shared.faults.lock().expect("faults").clone();
        if !faults.delay.is_zero() {
            std::thread::sleep(faults.delay);
        }
        let discovery = req.method == "GET"
            && (req.path == "/api"
                || req.path == "/apis"
                || req.path == "/version"
                || req.path.starts_with("/openapi"));
        if let (Some(code), false) = (faults.status, discovery) {
            let mut extra = vec![];
            if let Some(s) = faults.retry_after {
                extra.push(("Retry-After".to_string(), s.to_string()));
            }
            let r = if code == 429 {
                "TooManyRequests"
            } else {
                "InternalError"
            };
            if !write_reply(
                stream,
                code,
                &status_error(code, r, "injected fault"),
                &extra,
            ) {
                return;
            }
            continue;
        }
        if req.method != "GET" {
            let mut f = shared.faults.lock().expect("faults");
            if f.conflicts > 0 {
                f.conflicts -= 1;
                drop(f);
                let e = status_error(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
                );
                if !write_reply(stream, 409, &e, &[]) {
                    return;
                }
                continue;
            }
        }
        if req.param("watch").is_some_and(|w| w == "1" || w == "true") {
            watch(stream, &req, shared);
            return;
        }
        let reply = {
            let mut st = shared.store.lock().expect("store");
            st.handle(&req)
        };
        shared.store_changed.notify_all();
        let ok = match reply {
            Reply::Json(code, v) => write_reply(stream, code, &v, &[]),
        };
        if !ok || close {
            return;
        }
    }
}

/// A chunked watch of pods: history after the resourceVersion, then new events, until
/// `timeoutSeconds` or the connection or the server goes.
fn watch(stream: &mut Stream, req: &Request, shared: &Shared) {
    let since: u64 = req
        .param("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let timeout = Duration::from_secs(
        req.param("timeoutSeconds")
            .and_then(|v| v.parse().ok())
            .unwrap_or(300),
    );
    let bookmarks = req.param("allowWatchBookmarks") == Some("true");
    let selector = req.param("fieldSelector").unwrap_or("").to_string();
    let head =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let send = |stream: &mut Stream, ev: &Value| -> bool {
        let mut line = serde_json::to_vec(ev).unwrap_or_default();
        line.push(b'\n');
        let chunk = format!("{:x}\r\n", line.len());
        stream.write_all(chunk.as_bytes()).is_ok()
            && stream.write_all(&line).is_ok()
            && stream.write_all(b"\r\n").is_ok()
            && stream.flush().is_ok()
    };
    let end = Instant::now() + timeout;
    let mut cursor = since;
    {
        let st = shared.store.lock().expect("store");
        if since > 0 && since < st.oldest_history() {
            drop(st);
            let e = json!({"type": "ERROR", "object": status_error(410, "Expired", "too old resource version")});
            let _ = send(stream, &e);
            let _ = stream.write_all(b"0\r\n\r\n");
            return;
        }
    }
    let mut last_bookmark = Instant::now();
    loop {
        let (events, up, rv) = {
            let st = shared.store.lock().expect("store");
            let evs = st.pod_events_after(cursor, &selector);
            let rv = st.rv;
            (evs, shared.up_now(), rv)
        };
        if !up {
            return;
        }
        for (rv, ev) in events {
            cursor = cursor.max(rv);
            if !send(stream, &ev) {
                return;
            }
        }
        if bookmarks && last_bookmark.elapsed() > Duration::from_secs(1) && rv > cursor {
            cursor = rv;
            last_bookmark = Instant::now();
            let bm = json!({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}}});
            if !send(stream, &bm) {
                return;
            }
        }
        if Instant::now() >= end {
            let _ = stream.write_all(b"0\r\n\r\n");
            return;
        }
        let st = shared.store.lock().expect("store");
        let _ = shared
            .store_changed
            .wait_timeout(st, Duration::from_millis(200))
            .expect("wait");
    }
}

impl Shared {
    pub fn up_now(&self) -> bool {
        self.up.load(std::sync::atomic::Ordering::SeqCst)
    }
}
