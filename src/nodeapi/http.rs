//! nodeapi::http: the HTTP/1.1 of the node ports — a request head read under a deadline
//! (request line and headers, at most [`MAX_HEAD`] bytes), a body only where a route takes one
//! (`Content-Length`, bounded by the caller), and one response per connection
//! (`Connection: close`), whole or streamed in chunks. Works over any byte stream: the plain
//! healthz socket and a rustls stream alike.
//!
//! Hand-written for the same reason as `api::server` (no async runtime, a few hundred lines,
//! every limit visible): a slow client is cut by the whole-request deadline of
//! [`DeadlineStream`], not by a per-read timeout a slowloris client resets byte by byte.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// The largest request head (request line and headers) accepted.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most headers accepted in one request.
pub const MAX_HEADERS: usize = 64;

/// A TCP stream whose reads and writes fail with `TimedOut` once `deadline` has passed, however
/// the bytes trickle in (the socket timeout is set to what is left before each call).
#[derive(Debug)]
pub struct DeadlineStream {
    tcp: TcpStream,
    deadline: Instant,
}

impl DeadlineStream {
    pub fn new(tcp: TcpStream, deadline: Instant) -> DeadlineStream {
        DeadlineStream { tcp, deadline }
    }

    /// Moves the deadline (for the response after the request was read).
    pub fn set_deadline(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    fn left(&self) -> io::Result<Duration> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "connection deadline passed",
            ));
        }
        Ok(left)
    }
}

impl Read for DeadlineStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.tcp.set_read_timeout(Some(left))?;
        self.tcp.read(buf)
    }
}

impl Write for DeadlineStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let left = self.left()?;
        self.tcp.set_write_timeout(Some(left))?;
        self.tcp.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.tcp.flush()
    }
}

/// Why a request head was refused (each answered with 400, or 431 when too large).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeadError {
    #[error("request head larger than {max} bytes")]
    TooLarge { max: usize },
    #[error("more than {max} headers")]
    TooManyHeaders { max: usize },
    #[error("malformed request line: {reason}")]
    RequestLine { reason: &'static str },
    #[error("malformed header line {line}")]
    Header { line: usize },
    #[error("connection closed before the end of the headers")]
    Truncated,
    #[error("cannot read the request: {reason}")]
    Read { reason: String },
}

impl HeadError {
    pub fn status(&self) -> u16 {
        match self {
            HeadError::TooLarge { .. } | HeadError::TooManyHeaders { .. } => 431,
            _ => 400,
        }
    }
}

/// A request head: request line and headers (names lowercased).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    /// Path and query as sent (percent-encoded).
    pub target: String,
    pub headers: Vec<(String, String)>,
    /// Bytes read past the head: the start of a body.
    pub rest: Vec<u8>,
}

impl RequestHead {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// The query (after `?`), empty when there is none.
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }
}

/// Reads one request head from `stream`; `Ok(None)` when the client closed without sending
/// anything. Bytes after the head stay in [`RequestHead::rest`] for [`read_body`].
pub fn read_head<R: Read>(stream: &mut R) -> Result<Option<RequestHead>, HeadError> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 2048];
    let end = loop {
        if let Some(p) = head_end(&buf) {
            break p;
        }
        if buf.len() > MAX_HEAD {
            return Err(HeadError::TooLarge { max: MAX_HEAD });
        }
        let n = match stream.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(HeadError::Read {
                    reason: e.to_string(),
                })
            }
        };
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(HeadError::Truncated)
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    if end > MAX_HEAD {
        return Err(HeadError::TooLarge { max: MAX_HEAD });
    }
    let mut head = parse_head(&buf[..end])?;
    let sep = if buf[end..].starts_with(b"\r\n\r\n") {
        4
    } else {
        2
    };
    head.rest = buf[end + sep..].to_vec();
    Ok(Some(head))
}

fn head_end(buf: &[u8]) -> Option<usize> {
    let crlf = buf.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = buf.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Why a request body was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    #[error("a request body needs Content-Length (chunked request bodies are not accepted)")]
    LengthRequired,
    #[error("request body larger than {max} bytes")]
    TooLarge { max: usize },
    #[error("malformed Content-Length")]
    BadLength,
    #[error("connection closed before the end of the body")]
    Truncated,
    #[error("cannot read the request body: {reason}")]
    Read { reason: String },
}

impl BodyError {
    pub fn status(&self) -> u16 {
        match self {
            BodyError::LengthRequired => 411,
            BodyError::TooLarge { .. } => 413,
            _ => 400,
        }
    }
}

/// Reads the body of `head` (`Content-Length` bytes, at most `max`) from `stream`.
pub fn read_body<R: Read>(
    stream: &mut R,
    head: &RequestHead,
    max: usize,
) -> Result<Vec<u8>, BodyError> {
    if head.header("transfer-encoding").is_some() {
        return Err(BodyError::LengthRequired);
    }
    let len: usize = match head.header("content-length") {
        None => return Err(BodyError::LengthRequired),
        Some(v) => v.trim().parse().map_err(|_| BodyError::BadLength)?,
    };
    if len > max {
        return Err(BodyError::TooLarge { max });
    }
    let mut body = head.rest.clone();
    body.truncate(len);
    let mut chunk = [0u8; 8192];
    while body.len() < len {
        let want = (len - body.len()).min(chunk.len());
        match stream.read(&mut chunk[..want]) {
            Ok(0) => return Err(BodyError::Truncated),
            Ok(n) => body.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(BodyError::Read {
                    reason: e.to_string(),
                })
            }
        }
    }
    Ok(body)
}

/// Parses a request head (without the blank line that ends it).
pub fn parse_head(head: &[u8]) -> Result<RequestHead, HeadError> {
    let text = std::str::from_utf8(head).map_err(|_| HeadError::RequestLine {
        reason: "not UTF-8",
    })?;
    let mut lines = text.split('\n').map(|l| l.trim_end_matches('\r'));
    let line = lines.next().unwrap_or("");
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HeadError::RequestLine {
            reason: "expected METHOD TARGET HTTP/1.x",
        });
    };
    if !version.starts_with("HTTP/1.")
        || method.is_empty()
        || !method.bytes().all(|b| b.is_ascii_uppercase())
        || !target.starts_with('/')
    {
        return Err(HeadError::RequestLine {
            reason: "expected METHOD /TARGET HTTP/1.x",
        });
    }
    let mut headers = Vec::new();
    for (i, l) in lines.enumerate() {
        if l.is_empty() {
            continue;
        }
        if headers.len() == MAX_HEADERS {
            return Err(HeadError::TooManyHeaders { max: MAX_HEADERS });
        }
        let (name, value) = l
            .split_once(':')
            .filter(|(n, _)| !n.is_empty() && !n.contains([' ', '\t']))
            .ok_or(HeadError::Header { line: i + 2 })?;
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    Ok(RequestHead {
        method: method.to_string(),
        target: target.to_string(),
        headers,
        rest: Vec::new(),
    })
}

/// One response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// A `text/plain` response, as Go's `http.Error` writes them (`msg` plus a newline).
    pub fn text(status: u16, msg: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: vec![("X-Content-Type-Options", "nosniff".into())],
            body: format!("{msg}\n").into_bytes(),
        }
    }

    /// `text/plain` without the newline (the healthz "ok").
    pub fn plain(status: u16, body: impl Into<Vec<u8>>) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: vec![("X-Content-Type-Options", "nosniff".into())],
            body: body.into(),
        }
    }

    /// A JSON response of `value`; 500 when it cannot be encoded.
    pub fn json_of(status: u16, value: &impl serde::Serialize) -> Response {
        match serde_json::to_vec(value) {
            Ok(body) => Response::json(status, body),
            Err(e) => {
                log::error!("node api: cannot encode a response: {e}");
                Response::text(500, "Internal Server Error")
            }
        }
    }

    pub fn json(status: u16, body: Vec<u8>) -> Response {
        Response {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body,
        }
    }

    /// Go's `http.NotFound`.
    pub fn not_found() -> Response {
        Response::text(404, "404 page not found")
    }
}

pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        301 => "Moved Permanently",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Entity",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Internal Server Error",
    }
}

/// A response stream that outlives one whole-exchange deadline (a followed log, a large
/// file): each write gets its own deadline, and a follower can wait for the client to hang up.
pub trait Streaming: Write {
    /// The next writes must complete within `limit` from now.
    fn extend_deadline(&mut self, limit: Duration);
    /// Waits up to `timeout` for the client to hang up; true if it did.
    fn client_gone(&mut self, timeout: Duration) -> bool;
}

/// Starts a streamed response: status line and headers, `Transfer-Encoding: chunked`.
pub fn write_stream_head<W: Write>(out: &mut W, status: u16, content_type: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nX-Content-Type-Options: nosniff\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        reason_phrase(status)
    );
    out.write_all(head.as_bytes())?;
    out.flush()
}

/// One chunk of a streamed response (nothing for empty `data`: an empty chunk ends it).
pub fn write_chunk<W: Write>(out: &mut W, data: &[u8]) -> io::Result<()> {
    if data.is_empty() {
        return Ok(());
    }
    let mut buf = format!("{:x}\r\n", data.len()).into_bytes();
    buf.extend_from_slice(data);
    buf.extend_from_slice(b"\r\n");
    out.write_all(&buf)?;
    out.flush()
}

/// Ends a streamed response.
pub fn write_last_chunk<W: Write>(out: &mut W) -> io::Result<()> {
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

/// `%XX` decoded (`+` stays); `None` for a bad escape or a result that is not UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Writes `resp` (no body for `HEAD`) and flushes.
pub fn write_response<W: Write>(out: &mut W, resp: &Response, head_only: bool) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n",
        resp.status,
        reason_phrase(resp.status),
        resp.content_type,
        resp.body.len()
    );
    for (name, value) in &resp.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("Connection: close\r\n\r\n");
    let mut bytes = head.into_bytes();
    if !head_only {
        bytes.extend_from_slice(&resp.body);
    }
    out.write_all(&bytes)?;
    out.flush()
}

/// The value of query parameter `name` (first occurrence, `+` and `%XX` not decoded: the node
/// routes' parameters are plain words and numbers). A bare `name` gives `Some("")`.
pub fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|kv| match kv.split_once('=') {
        Some((k, v)) if k == name => Some(v),
        None if kv == name => Some(""),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_with_headers_lowercased() {
        let h =
            parse_head(b"GET /healthz?verbose HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer t\r\n")
                .expect("head");
        assert_eq!(h.method, "GET");
        assert_eq!(h.path(), "/healthz");
        assert_eq!(h.query(), "verbose");
        assert_eq!(h.header("authorization"), Some("Bearer t"));
        assert_eq!(query_param(h.query(), "verbose"), Some(""));
        assert_eq!(query_param("a=1&exclude=x", "exclude"), Some("x"));
        assert_eq!(query_param("a=1", "exclude"), None);
    }

    #[test]
    fn malformed_heads_are_refused() {
        for bad in [
            &b"GET /pods"[..],
            b"GET pods HTTP/1.1",
            b"get /pods HTTP/1.1",
            b"GET /a b HTTP/1.1",
            b"GET / SPDY/3",
            b"\xff / HTTP/1.1",
            b"GET / HTTP/1.1\r\nno colon here",
            b"GET / HTTP/1.1\r\n: empty name",
        ] {
            let e = parse_head(bad).expect_err("bad head");
            assert_eq!(e.status(), 400, "{e}");
        }
        let many: Vec<u8> = std::iter::once(b"GET / HTTP/1.1".to_vec())
            .chain((0..=MAX_HEADERS).map(|i| format!("\r\nx{i}: y").into_bytes()))
            .flatten()
            .collect();
        assert_eq!(parse_head(&many).expect_err("too many").status(), 431);
    }

    #[test]
    fn oversized_and_truncated_heads() {
        let mut big = b"GET / HTTP/1.1\r\nx: ".to_vec();
        big.extend(std::iter::repeat_n(b'a', MAX_HEAD + 10));
        big.extend_from_slice(b"\r\n\r\n");
        let e = read_head(&mut &big[..]).expect_err("too large");
        assert_eq!(e, HeadError::TooLarge { max: MAX_HEAD });
        let e = read_head(&mut &b"GET / HTTP/1.1\r\nHost"[..]).expect_err("cut");
        assert_eq!(e, HeadError::Truncated);
        assert_eq!(read_head(&mut &b""[..]).expect("empty"), None);
        let ok = read_head(&mut &b"GET /pods HTTP/1.0\n\n"[..]).expect("ok");
        assert_eq!(ok.expect("head").target, "/pods");
    }

    #[test]
    fn bodies_follow_content_length_and_their_bounds() {
        let req =
            b"PUT /api/v1/namespaces/default/pods/web HTTP/1.1\r\nContent-Length: 10\r\n\r\nhello";
        let mut stream = &req[..];
        let head = read_head(&mut stream).expect("head").expect("some");
        assert_eq!(head.rest, b"hello");
        let mut more = &b"world and more"[..];
        assert_eq!(
            read_body(&mut more, &head, 100).expect("body"),
            b"helloworld"
        );
        assert_eq!(
            read_body(&mut &b""[..], &head, 5).expect_err("big"),
            BodyError::TooLarge { max: 5 }
        );
        assert_eq!(
            read_body(&mut &b"wo"[..], &head, 100).expect_err("cut"),
            BodyError::Truncated
        );
        let chunked = parse_head(b"PUT / HTTP/1.1\r\nTransfer-Encoding: chunked").expect("h");
        assert_eq!(
            read_body(&mut &b""[..], &chunked, 100)
                .expect_err("chunked")
                .status(),
            411
        );
        let none = parse_head(b"PUT / HTTP/1.1").expect("h");
        assert_eq!(
            read_body(&mut &b""[..], &none, 1)
                .expect_err("none")
                .status(),
            411
        );
        let bad = parse_head(b"PUT / HTTP/1.1\r\nContent-Length: -1").expect("h");
        assert_eq!(
            read_body(&mut &b""[..], &bad, 1).expect_err("bad").status(),
            400
        );
        assert_eq!(percent_decode("a%20b%2Fc").as_deref(), Some("a b/c"));
        assert_eq!(percent_decode("%zz"), None);
        let mut out = Vec::new();
        write_stream_head(&mut out, 200, "text/plain").expect("head");
        write_chunk(&mut out, b"abc").expect("chunk");
        write_chunk(&mut out, b"").expect("empty");
        write_last_chunk(&mut out).expect("last");
        let s = String::from_utf8(out).expect("utf8");
        assert!(
            s.ends_with(
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
            ),
            "{s}"
        );
    }

    #[test]
    fn responses_are_written_with_length_and_close() {
        let mut out = Vec::new();
        write_response(&mut out, &Response::text(401, "Unauthorized"), false).expect("write");
        let s = String::from_utf8(out).expect("utf8");
        assert!(s.starts_with("HTTP/1.1 401 Unauthorized\r\n"), "{s}");
        assert!(s.contains("Content-Length: 13\r\n"), "{s}");
        assert!(
            s.ends_with("Connection: close\r\n\r\nUnauthorized\n"),
            "{s}"
        );
        let mut out = Vec::new();
        write_response(&mut out, &Response::plain(200, "ok"), true).expect("write");
        assert!(String::from_utf8(out).expect("utf8").ends_with("\r\n\r\n"));
    }
}
