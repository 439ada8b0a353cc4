//! httpserver::head: reading a request — the head (request line and headers, at most
//! [`MAX_HEAD`] bytes and [`MAX_HEADERS`] headers, names lowercased), a body only where the
//! caller takes one (`Content-Length`, bounded by the caller; chunked request bodies are
//! refused), and the request target's path, query and `%XX` escapes. Pure over any `Read`:
//! the deadline is the stream's ([`super::conn::DeadlineStream`]).

use std::io::{self, Read};

/// The largest request head (request line and headers) accepted.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most headers accepted in one request.
pub const MAX_HEADERS: usize = 64;

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
    /// `HTTP/1.0`: such a client gets no chunked encoding where a server streams.
    pub http10: bool,
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
        http10: version == "HTTP/1.0",
        rest: Vec::new(),
    })
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
    }
}
