//! prober::grpc: the grpc handler — one `grpc.health.v1.Health/Check` call over a minimal
//! HTTP/2 cleartext (h2c, prior knowledge) client, as the kubelet's pkg/probe/grpc does with
//! grpc-go, without an async runtime.
//!
//! The client sends the connection preface, an empty SETTINGS frame, one HEADERS frame (HPACK
//! literals) and one DATA frame carrying the 5-byte gRPC message prefix and a protobuf
//! `HealthCheckRequest{service}`; it acknowledges the server's SETTINGS and PINGs, collects the
//! response headers, DATA and trailers of stream 1, and passes when `grpc-status` is 0 and
//! `HealthCheckResponse.status` is SERVING (1). Everything happens within the probe timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use super::hpack::{self, field_size, Decoder, MAX_HEADER_LIST};
use super::{ProbeResult, USER_AGENT};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const GOAWAY: u8 = 7;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// Largest frame accepted (the HTTP/2 default SETTINGS_MAX_FRAME_SIZE).
const MAX_FRAME: usize = 16_384;
/// A health response is a few bytes; anything far bigger is not one.
const MAX_MESSAGE: usize = 64 * 1024;

/// Errors of one call (turned into a probe failure message).
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error("failed to connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Hpack(#[from] hpack::HpackError),
    #[error("http2: {0}")]
    Protocol(String),
}

/// Writes one frame.
fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = payload.len() as u32;
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(payload);
}

/// The request bytes after the preface: SETTINGS, HEADERS, DATA on stream 1.
fn request(authority: &str, service: &str) -> Vec<u8> {
    let mut out = PREFACE.to_vec();
    frame(&mut out, SETTINGS, 0, 0, &[]);
    let block = hpack::encode(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":path", "/grpc.health.v1.Health/Check"),
        (":authority", authority),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
        ("user-agent", USER_AGENT),
    ]);
    frame(&mut out, HEADERS, END_HEADERS, 1, &block);
    // HealthCheckRequest { string service = 1; }
    let mut msg = Vec::new();
    if !service.is_empty() {
        msg.push(0x0a);
        varint(&mut msg, service.len() as u64);
        msg.extend_from_slice(service.as_bytes());
    }
    let mut data = vec![0u8];
    data.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    data.extend_from_slice(&msg);
    frame(&mut out, DATA, END_STREAM, 1, &data);
    out
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// What stream 1 returned.
#[derive(Debug, Default)]
struct Response {
    headers: Vec<(String, String)>,
    data: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Reads one frame (type, flags, stream, payload); frames above [`MAX_FRAME`] are refused.
fn read_frame<S: Read>(s: &mut S) -> Result<(u8, u8, u32, Vec<u8>), CallError> {
    let mut h = [0u8; 9];
    s.read_exact(&mut h)?;
    let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
    if len > MAX_FRAME {
        return Err(CallError::Protocol(format!("frame of {len} bytes")));
    }
    let stream = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload)?;
    Ok((h[3], h[4], stream, payload))
}

/// Sets the socket's read timeout to what is left until `deadline` (an error once it passed).
fn arm_read(s: &mut TcpStream, deadline: Instant) -> Result<(), CallError> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    if remaining.is_zero() {
        return Err(CallError::Io(std::io::ErrorKind::TimedOut.into()));
    }
    s.set_read_timeout(Some(remaining))?;
    Ok(())
}

/// Strips padding (and priority fields of HEADERS) from a frame payload.
fn unpad(kind: u8, flags: u8, payload: &[u8]) -> Result<&[u8], CallError> {
    let mut p = payload;
    let mut pad = 0usize;
    if flags & PADDED != 0 {
        let (&n, rest) = p
            .split_first()
            .ok_or(CallError::Protocol("empty padded frame".into()))?;
        pad = n as usize;
        p = rest;
    }
    if kind == HEADERS && flags & PRIORITY != 0 {
        p = p
            .get(5..)
            .ok_or(CallError::Protocol("short priority fields".into()))?;
    }
    if pad > p.len() {
        return Err(CallError::Protocol("padding longer than the frame".into()));
    }
    Ok(&p[..p.len() - pad])
}

fn call(host: &str, port: u16, service: &str, timeout: Duration) -> Result<Response, CallError> {
    let deadline = Instant::now() + timeout;
    let addr = super::tcp::authority(host, port);
    let mut s = super::tcp::connect(&addr, timeout).map_err(|source| CallError::Connect {
        addr: addr.clone(),
        source,
    })?;
    s.set_nodelay(true)?;
    s.set_write_timeout(Some(
        deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1)),
    ))?;
    s.write_all(&request(&addr, service))?;
    exchange(&mut s, |s| arm_read(s, deadline))
}

/// Reads the server's frames after the request was sent, answering SETTINGS and PING, until
/// stream 1 ends; `arm` runs before each frame is read (the deadline of a real call).
fn exchange<S: Read + Write>(
    s: &mut S,
    mut arm: impl FnMut(&mut S) -> Result<(), CallError>,
) -> Result<Response, CallError> {
    let mut dec = Decoder::default();
    let mut resp = Response::default();
    let mut block: Vec<u8> = Vec::new();
    let mut block_ends_stream = false;
    loop {
        arm(s)?;
        let (kind, flags, stream, payload) = read_frame(s)?;
        match kind {
            SETTINGS if flags & ACK == 0 => {
                let mut ack = Vec::new();
                frame(&mut ack, SETTINGS, ACK, 0, &[]);
                // Best effort: a server that already answered may have closed its side.
                let _ = s.write_all(&ack);
            }
            PING if flags & ACK == 0 => {
                let mut pong = Vec::new();
                frame(&mut pong, PING, ACK, 0, &payload);
                let _ = s.write_all(&pong);
            }
            GOAWAY => return Err(CallError::Protocol("server sent GOAWAY".into())),
            RST_STREAM if stream == 1 => {
                return Err(CallError::Protocol("server reset the stream".into()))
            }
            HEADERS | CONTINUATION if stream == 1 => {
                if kind == HEADERS {
                    block_ends_stream = flags & END_STREAM != 0;
                }
                block.extend_from_slice(unpad(kind, flags, &payload)?);
                if block.len() > MAX_MESSAGE {
                    return Err(CallError::Protocol("header block too large".into()));
                }
                if flags & END_HEADERS != 0 {
                    resp.headers.extend(dec.decode(&block)?);
                    block.clear();
                    // Headers and trailers together, however many blocks a server sends.
                    let size: usize = resp.headers.iter().map(|(n, v)| field_size(n, v)).sum();
                    if size > MAX_HEADER_LIST {
                        return Err(CallError::Protocol(format!(
                            "response headers larger than {MAX_HEADER_LIST} bytes"
                        )));
                    }
                    if block_ends_stream {
                        return Ok(resp);
                    }
                }
            }
            DATA if stream == 1 => {
                resp.data.extend_from_slice(unpad(kind, flags, &payload)?);
                if resp.data.len() > MAX_MESSAGE {
                    return Err(CallError::Protocol("response too large".into()));
                }
                if flags & END_STREAM != 0 {
                    return Ok(resp);
                }
            }
            _ => {}
        }
    }
}

/// HealthCheckResponse.status (field 1, varint); 0 (UNKNOWN) when absent.
fn serving_status(message: &[u8]) -> Option<u64> {
    let mut i = 0;
    let mut status = 0;
    let read_varint = |i: &mut usize| -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *message.get(*i)?;
            *i += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    };
    while i < message.len() {
        let key = read_varint(&mut i)?;
        match (key >> 3, key & 7) {
            (1, 0) => status = read_varint(&mut i)?,
            (_, 0) => {
                read_varint(&mut i)?;
            }
            (_, 2) => {
                let len = read_varint(&mut i)? as usize;
                i = i.checked_add(len)?;
            }
            (_, 1) => i += 8,
            (_, 5) => i += 4,
            _ => return None,
        }
    }
    Some(status)
}

fn status_name(s: u64) -> &'static str {
    match s {
        0 => "UNKNOWN",
        1 => "SERVING",
        2 => "NOT_SERVING",
        3 => "SERVICE_UNKNOWN",
        _ => "INVALID",
    }
}

/// Runs one grpc health check against `host:port` within `timeout`.
pub fn probe(host: &str, port: u16, service: &str, timeout: Duration) -> ProbeResult {
    verdict(call(host, port, service, timeout), timeout)
}

/// The probe result for `server_bytes`, everything a server sent on the connection after the
/// client's request, judged exactly as [`probe`] judges a live server (the client's
/// acknowledgements are discarded, and the end of the bytes is the server closing). Used by
/// the `grpc_response` fuzz target on the frame reader, HPACK and the health message.
pub fn probe_reply(server_bytes: &[u8]) -> ProbeResult {
    let mut wire = Replay(server_bytes);
    verdict(exchange(&mut wire, |_| Ok(())), Duration::ZERO)
}

/// A connection replayed from memory: reads `.0`, discards writes.
struct Replay<'a>(&'a [u8]);

impl Read for Replay<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for Replay<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Judges the outcome of a call made with `timeout`.
fn verdict(call: Result<Response, CallError>, timeout: Duration) -> ProbeResult {
    let fail = |message: String| ProbeResult::Failure { message };
    let resp = match call {
        Ok(r) => r,
        Err(CallError::Connect { addr, source }) => {
            return fail(format!(
                "timeout: failed to connect service \"{addr}\" within {}s: failed to connect to {addr}: {source}",
                timeout.as_secs_f64()
            ))
        }
        Err(CallError::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) =>
        {
            return fail(format!(
                "timeout: health rpc did not complete within {}s",
                timeout.as_secs_f64()
            ))
        }
        Err(e) => return fail(format!("error: health rpc probe failed: {e}")),
    };
    if let Some(st) = resp.header(":status").filter(|s| *s != "200") {
        return fail(format!("error: health rpc probe failed: http status {st}"));
    }
    let code = resp.header("grpc-status").unwrap_or("");
    if code != "0" {
        let msg = resp.header("grpc-message").unwrap_or("");
        if code == "12" {
            return fail(format!(
                "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {msg}"
            ));
        }
        return fail(format!(
            "error: health rpc probe failed: rpc error: code = {code} desc = {msg}"
        ));
    }
    let msg = match resp.data.get(5..) {
        Some(m) if resp.data[0] == 0 => m,
        _ => {
            return fail("error: health rpc probe failed: no uncompressed response message".into())
        }
    };
    match serving_status(msg) {
        Some(1) => ProbeResult::Success,
        Some(s) => fail(format!(
            "service unhealthy (responded with \"{}\")",
            status_name(s)
        )),
        None => fail("error: health rpc probe failed: malformed HealthCheckResponse".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    /// A hand-written h2c gRPC health server: serves `status_for(service)` for every call, or
    /// never answers when `hang` is set.
    fn server(status_for: fn(&str) -> (u32, u64), hang: bool) -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(mut s) = conn else { return };
                thread::spawn(move || {
                    let mut preface = [0u8; 24];
                    if s.read_exact(&mut preface).is_err() || preface != PREFACE {
                        return;
                    }
                    if hang {
                        thread::sleep(Duration::from_secs(5));
                        return;
                    }
                    let far = Instant::now() + Duration::from_secs(5);
                    let mut out = Vec::new();
                    frame(&mut out, SETTINGS, 0, 0, &[0, 3, 0, 0, 0, 100]);
                    frame(&mut out, PING, 0, 0, &[1; 8]);
                    let _ = s.write_all(&out);
                    let mut dec = Decoder::default();
                    let mut service = String::new();
                    let mut path = String::new();
                    loop {
                        if arm_read(&mut s, far).is_err() {
                            return;
                        }
                        let Ok((kind, flags, stream, payload)) = read_frame(&mut s) else {
                            return;
                        };
                        if kind == HEADERS {
                            for (n, v) in dec.decode(&payload).unwrap_or_default() {
                                if n == ":path" {
                                    path = v;
                                }
                            }
                        }
                        if kind == DATA && stream == 1 {
                            // 5-byte prefix, then field 1 (0x0a), length, service name.
                            if payload.len() > 7 {
                                service = String::from_utf8_lossy(&payload[7..]).into_owned();
                            }
                            if flags & END_STREAM != 0 {
                                break;
                            }
                        }
                    }
                    assert_eq!(path, "/grpc.health.v1.Health/Check");
                    let (grpc_status, serving) = status_for(&service);
                    let mut out = Vec::new();
                    // ":status: 200" from the static table, then a literal.
                    let mut block = vec![0x88];
                    block.extend(hpack::encode(&[("content-type", "application/grpc")]));
                    frame(&mut out, HEADERS, END_HEADERS, 1, &block);
                    frame(&mut out, DATA, 0, 1, &[0, 0, 0, 0, 2, 0x08, serving as u8]);
                    let code = grpc_status.to_string();
                    let trailers = hpack::encode(&[("grpc-status", code.as_str())]);
                    frame(&mut out, HEADERS, END_HEADERS | END_STREAM, 1, &trailers);
                    let _ = s.write_all(&out);
                    // Read the client's acknowledgements until it hangs up, so closing
                    // never resets the connection under its unread response.
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut sink = [0u8; 256];
                    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
                });
            }
        });
        port
    }

    fn by_service(service: &str) -> (u32, u64) {
        match service {
            "" | "etcd" => (0, 1),
            "sick" => (0, 2),
            _ => (5, 0),
        }
    }

    #[test]
    fn serving_not_serving_and_unknown_service() {
        let port = server(by_service, false);
        let t = Duration::from_secs(2);
        assert_eq!(probe("127.0.0.1", port, "", t), ProbeResult::Success);
        assert_eq!(probe("127.0.0.1", port, "etcd", t), ProbeResult::Success);
        assert_eq!(
            probe("127.0.0.1", port, "sick", t),
            ProbeResult::Failure {
                message: "service unhealthy (responded with \"NOT_SERVING\")".into()
            }
        );
        match probe("127.0.0.1", port, "nope", t) {
            ProbeResult::Failure { message } => assert!(message.contains("code = 5"), "{message}"),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn hanging_server_times_out_and_closed_port_fails() {
        let port = server(by_service, true);
        let t0 = Instant::now();
        match probe("127.0.0.1", port, "", Duration::from_millis(300)) {
            ProbeResult::Failure { message } => assert!(message.contains("timeout"), "{message}"),
            r => panic!("{r:?}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(2));
        let closed = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        assert!(!probe("127.0.0.1", closed, "", Duration::from_secs(1)).passed());
    }

    #[test]
    fn header_blocks_without_end_are_bounded() {
        // Block after block of 4 KiB headers on stream 1, never ending the stream: the probe
        // fails once the headers add up to more than the limit instead of collecting them.
        let mut out = Vec::new();
        let value = "v".repeat(4000);
        for _ in 0..100 {
            frame(
                &mut out,
                HEADERS,
                END_HEADERS,
                1,
                &hpack::encode(&[("x-pad", &value)]),
            );
        }
        match probe_reply(&out) {
            ProbeResult::Failure { message } => assert_eq!(
                message,
                "error: health rpc probe failed: http2: response headers larger than 65536 bytes"
            ),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn replayed_server_bytes_are_judged_like_a_live_server() {
        let mut out = Vec::new();
        frame(&mut out, SETTINGS, 0, 0, &[]);
        let mut block = vec![0x88];
        block.extend(hpack::encode(&[("content-type", "application/grpc")]));
        frame(&mut out, HEADERS, END_HEADERS, 1, &block);
        frame(&mut out, DATA, 0, 1, &[0, 0, 0, 0, 2, 0x08, 1]);
        frame(
            &mut out,
            HEADERS,
            END_HEADERS | END_STREAM,
            1,
            &hpack::encode(&[("grpc-status", "0")]),
        );
        assert_eq!(probe_reply(&out), ProbeResult::Success);
        match probe_reply(&out[..out.len() - 3]) {
            ProbeResult::Failure { message } => {
                assert!(
                    message.starts_with("error: health rpc probe failed"),
                    "{message}"
                )
            }
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn health_response_decoding() {
        assert_eq!(serving_status(&[0x08, 0x01]), Some(1));
        assert_eq!(serving_status(&[]), Some(0));
        assert_eq!(serving_status(&[0x12, 0x01, 0x41, 0x08, 0x02]), Some(2));
        assert_eq!(serving_status(&[0x08]), None);
    }
}
