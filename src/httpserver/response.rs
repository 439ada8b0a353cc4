//! httpserver::response: what goes back — a whole [`Response`] with `Content-Length`, or a
//! streamed one (a head, then chunks each flushed as written, then the last chunk; HTTP/1.0
//! clients get the bare bytes). Every response says `Connection: close`: one request per
//! connection.

use std::io::{self, Write};

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

/// The status line and headers of `resp` (its body not written, and not counted unless
/// `length` says so): `Content-Type`, then `Content-Length: length` when given, the
/// response's own headers, `Transfer-Encoding: chunked` when `chunked`, `Connection: close`.
fn head_text(resp: &Response, length: Option<u64>, chunked: bool) -> String {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\n",
        resp.status,
        reason_phrase(resp.status),
        resp.content_type,
    );
    if let Some(len) = length {
        head.push_str(&format!("Content-Length: {len}\r\n"));
    }
    for (name, value) in &resp.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if chunked {
        head.push_str("Transfer-Encoding: chunked\r\n");
    }
    head.push_str("Connection: close\r\n\r\n");
    head
}

/// Writes the head of a response whose `length` body bytes the caller sends after it (a file
/// copied in pieces); `resp.body` is ignored. Not flushed.
pub fn write_sized_head<W: Write>(out: &mut W, resp: &Response, length: u64) -> io::Result<()> {
    out.write_all(head_text(resp, Some(length), false).as_bytes())
}

/// Starts a streamed response with the status, type and headers of `resp` (its body is
/// ignored): `Transfer-Encoding: chunked` when `chunked`, else (an HTTP/1.0 client) the body
/// runs to the end of the connection.
pub fn write_stream_head<W: Write>(out: &mut W, resp: &Response, chunked: bool) -> io::Result<()> {
    out.write_all(head_text(resp, None, chunked).as_bytes())?;
    out.flush()
}

/// One chunk of a streamed response, flushed at once (nothing for empty `data`: an empty
/// chunk ends it).
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

/// `data` of a streamed response, flushed at once: a chunk, or the bytes as they are when the
/// stream is not chunked.
pub fn write_stream_data<W: Write>(out: &mut W, data: &[u8], chunked: bool) -> io::Result<()> {
    if chunked {
        return write_chunk(out, data);
    }
    out.write_all(data)?;
    out.flush()
}

/// Ends a chunked response.
pub fn write_last_chunk<W: Write>(out: &mut W) -> io::Result<()> {
    out.write_all(b"0\r\n\r\n")?;
    out.flush()
}

/// Writes `resp` (no body for `HEAD`) and flushes.
pub fn write_response<W: Write>(out: &mut W, resp: &Response, head_only: bool) -> io::Result<()> {
    let mut bytes = head_text(resp, Some(resp.body.len() as u64), false).into_bytes();
    if !head_only {
        bytes.extend_from_slice(&resp.body);
    }
    out.write_all(&bytes)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn streams_are_chunked_and_ended() {
        let mut out = Vec::new();
        write_stream_head(&mut out, &Response::plain(200, ""), true).expect("head");
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
}
