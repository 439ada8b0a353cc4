//! api::client: a small blocking HTTP/1.1 client for podvisor's unix socket — one request per
//! connection, bodies by `Content-Length`, chunked encoding or end of stream, and error
//! replies turned into [`ApiError::Status`] with the server's message.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::ApiError;

/// How long a JSON request may wait for its answer.
const JSON_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest response head or error body read.
const MAX_HEAD: usize = 64 * 1024;

/// `GET path` and decode the JSON answer.
pub fn get_json<T: DeserializeOwned>(socket: &Path, path: &str) -> Result<T, ApiError> {
    let mut body = Vec::new();
    let mut conn = Connection::open(socket, Some(JSON_TIMEOUT))?;
    conn.get(path, &mut body)?;
    serde_json::from_slice(&body).map_err(|source| ApiError::Decode {
        path: path.to_string(),
        source,
    })
}

/// `GET path` and decode the JSON answer, holding `v1 Pod`s, through the manifest decoder
/// ([`crate::pod::manifest::from_tree`]): the binary then carries one deserializer of the
/// Kubernetes types instead of two (about 200 KB of the 10 MiB budget; see
/// docs/history/benchmarks.md).
pub fn get_pod_json<T: DeserializeOwned>(socket: &Path, path: &str) -> Result<T, ApiError> {
    let value: serde_json::Value = get_json(socket, path)?;
    let tree = crate::pod::manifest::tree_of_json(value);
    crate::pod::manifest::from_tree(&tree).map_err(|error| ApiError::DecodeField {
        path: path.to_string(),
        error,
    })
}

/// `GET path` and copy the body to `out` as it arrives (flushing after each piece), until the
/// server ends it: for following logs, that is when the container stops or the server stops.
pub fn get_stream(socket: &Path, path: &str, out: &mut dyn Write) -> Result<(), ApiError> {
    let mut conn = Connection::open(socket, None)?;
    conn.get(path, out)
}

struct Connection<'a> {
    socket: &'a Path,
    stream: UnixStream,
}

enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
}

impl<'a> Connection<'a> {
    fn open(socket: &'a Path, timeout: Option<Duration>) -> Result<Connection<'a>, ApiError> {
        let stream = UnixStream::connect(socket).map_err(|source| {
            if matches!(
                source.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) {
                ApiError::NotRunning {
                    socket: socket.to_owned(),
                    source,
                }
            } else {
                ApiError::Connect {
                    socket: socket.to_owned(),
                    source,
                }
            }
        })?;
        let conn = Connection { socket, stream };
        conn.stream
            .set_read_timeout(timeout)
            .and_then(|()| conn.stream.set_write_timeout(timeout))
            .map_err(|e| conn.io(e))?;
        Ok(conn)
    }

    fn io(&self, source: io::Error) -> ApiError {
        ApiError::Io {
            socket: self.socket.to_owned(),
            source,
        }
    }

    fn malformed(&self, reason: impl Into<String>) -> ApiError {
        ApiError::MalformedResponse {
            socket: self.socket.to_owned(),
            reason: reason.into(),
        }
    }

    fn get(&mut self, path: &str, out: &mut dyn Write) -> Result<(), ApiError> {
        let request = format!("GET {path} HTTP/1.1\r\nHost: podvisor\r\nConnection: close\r\n\r\n");
        self.stream
            .write_all(request.as_bytes())
            .map_err(|e| self.io(e))?;
        let reader_stream = self.stream.try_clone().map_err(|e| self.io(e))?;
        let mut reader = BufReader::new(reader_stream);
        let (status, framing) = self.read_head(&mut reader)?;
        if status != 200 {
            let mut body = Vec::new();
            self.copy_body(&mut reader, &framing, &mut body, MAX_HEAD)?;
            return Err(ApiError::Status {
                status,
                message: error_message(status, &body),
            });
        }
        self.copy_body(&mut reader, &framing, out, usize::MAX)
    }

    fn read_line(&self, reader: &mut impl BufRead, seen: &mut usize) -> Result<String, ApiError> {
        let mut line = Vec::new();
        let n = reader
            .take(MAX_HEAD.saturating_sub(*seen) as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(|e| self.io(e))?;
        *seen += n;
        if *seen > MAX_HEAD {
            return Err(self.malformed("response head too large"));
        }
        if !line.ends_with(b"\n") {
            return Err(self.malformed("connection closed inside the response head"));
        }
        let line = String::from_utf8(line).map_err(|_| self.malformed("head is not UTF-8"))?;
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }

    fn read_head(&self, reader: &mut impl BufRead) -> Result<(u16, Framing), ApiError> {
        let mut seen = 0;
        let status_line = self.read_line(reader, &mut seen)?;
        let mut parts = status_line.splitn(3, ' ');
        let status = match (parts.next(), parts.next()) {
            (Some(v), Some(code)) if v.starts_with("HTTP/1.") => code.parse::<u16>().ok(),
            _ => None,
        }
        .ok_or_else(|| self.malformed(format!("bad status line {status_line:?}")))?;
        let mut framing = Framing::UntilClose;
        loop {
            let line = self.read_line(reader, &mut seen)?;
            if line.is_empty() {
                break;
            }
            let Some((name, value)) = line.split_once(':') else {
                return Err(self.malformed(format!("bad header line {line:?}")));
            };
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                let n = value
                    .parse::<u64>()
                    .map_err(|_| self.malformed(format!("bad Content-Length {value:?}")))?;
                if !matches!(framing, Framing::Chunked) {
                    framing = Framing::Length(n);
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                if value.eq_ignore_ascii_case("chunked") {
                    framing = Framing::Chunked;
                } else {
                    return Err(self.malformed(format!("unsupported Transfer-Encoding {value:?}")));
                }
            }
        }
        Ok((status, framing))
    }

    /// Copies the body to `out`, at most `limit` bytes (more is an error).
    fn copy_body(
        &self,
        reader: &mut impl BufRead,
        framing: &Framing,
        out: &mut dyn Write,
        limit: usize,
    ) -> Result<(), ApiError> {
        let mut total = 0usize;
        let mut emit = |data: &[u8], total: &mut usize| -> Result<(), ApiError> {
            *total += data.len();
            if *total > limit {
                return Err(self.malformed(format!("body larger than {limit} bytes")));
            }
            out.write_all(data)
                .and_then(|()| out.flush())
                .map_err(|source| ApiError::Output { source })
        };
        match framing {
            Framing::Length(n) => {
                let mut left = *n;
                let mut buf = vec![0u8; 64 * 1024];
                while left > 0 {
                    let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    let got = read_some(reader, &mut buf[..want]).map_err(|e| self.io(e))?;
                    if got == 0 {
                        return Err(self.malformed("connection closed before the end of the body"));
                    }
                    emit(&buf[..got], &mut total)?;
                    left -= got as u64;
                }
            }
            Framing::UntilClose => {
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let got = read_some(reader, &mut buf).map_err(|e| self.io(e))?;
                    if got == 0 {
                        break;
                    }
                    emit(&buf[..got], &mut total)?;
                }
            }
            Framing::Chunked => {
                loop {
                    let mut seen = 0;
                    let size_line = self.read_line(reader, &mut seen).map_err(|e| match e {
                        ApiError::MalformedResponse { .. } => {
                            self.malformed("stream ended without its final chunk")
                        }
                        other => other,
                    })?;
                    let size_hex = size_line.split(';').next().unwrap_or("").trim();
                    let size = usize::from_str_radix(size_hex, 16)
                        .map_err(|_| self.malformed(format!("bad chunk size {size_line:?}")))?;
                    if size == 0 {
                        // Trailers until the empty line.
                        while !self.read_line(reader, &mut seen)?.is_empty() {}
                        break;
                    }
                    let mut data = vec![0u8; size];
                    reader.read_exact(&mut data).map_err(|e| self.io(e))?;
                    emit(&data, &mut total)?;
                    let mut crlf = [0u8; 2];
                    reader.read_exact(&mut crlf).map_err(|e| self.io(e))?;
                    if &crlf != b"\r\n" {
                        return Err(self.malformed("chunk not followed by CRLF"));
                    }
                }
            }
        }
        Ok(())
    }
}

fn read_some(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        match reader.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// The server's `{"error": ...}` message, or the raw body.
fn error_message(status: u16, body: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    struct ErrorBody {
        error: String,
    }
    match serde_json::from_slice::<ErrorBody>(body) {
        Ok(e) => e.error,
        Err(_) if body.is_empty() => format!("podvisor answered HTTP {status}"),
        Err(_) => String::from_utf8_lossy(body).trim().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::PodView;
    use std::os::unix::net::UnixListener;

    /// The tree decoder of `get_pod_json` reads what the daemon serves exactly as serde_json
    /// does: quantities, int-or-string ports, timestamps, states, maps, nulls and the view's
    /// own fields.
    #[test]
    fn pod_views_decode_through_the_tree_as_through_serde_json() {
        let doc = serde_json::json!([{
            "pod": {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "web-n1", "namespace": "default", "uid": "u-1",
                    "labels": {"app": "web"}, "annotations": {"a": ""},
                    "creationTimestamp": "2026-11-24T10:00:00Z"},
                "spec": {
                    "containers": [{"name": "c", "image": "busybox:1.35",
                        "command": ["sh", "-c", "sleep 1"],
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
                        "livenessProbe": {"httpGet": {"port": "http", "path": "/"},
                            "periodSeconds": 5},
                        "readinessProbe": {"tcpSocket": {"port": 8080}}}],
                    "volumes": [{"name": "d", "emptyDir": {"sizeLimit": "1Gi"}},
                        {"name": "h", "hostPath": {"path": "/x", "type": null}}],
                    "hostNetwork": true, "priority": 2000001000
                },
                "status": {
                    "phase": "Running", "podIP": "10.0.0.1",
                    "startTime": "2026-11-24T10:00:01Z",
                    "conditions": [{"type": "Ready", "status": "True",
                        "lastTransitionTime": "2026-11-24T10:00:02Z"}],
                    "containerStatuses": [{"name": "c", "image": "busybox:1.35",
                        "imageID": "", "ready": true, "restartCount": 3, "started": true,
                        "state": {"running": {"startedAt": "2026-11-24T10:00:03Z"}},
                        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled",
                            "finishedAt": "2026-11-24T10:00:00Z"}}}]
                }
            },
            "source": "/etc/kubernetes/manifests/web.yaml",
            "sourceError": {"source": "/etc/kubernetes/manifests/web.yaml",
                "message": "web.yaml:3:1: spec: bad", "since": "2026-11-24T10:00:04Z"},
            "logPaths": {"c": "/var/log/pods/default_web-n1_u-1/c/3.log"}
        }]);
        let bytes = serde_json::to_vec(&doc).expect("json");
        let direct: Vec<PodView> = serde_json::from_slice(&bytes).expect("serde_json");
        let tree =
            crate::pod::manifest::tree_of_json(serde_json::from_slice(&bytes).expect("value"));
        let through: Vec<PodView> = crate::pod::manifest::from_tree(&tree).expect("tree");
        assert_eq!(through, direct);
        assert_eq!(
            serde_json::to_value(&through).expect("back"),
            serde_json::to_value(&direct).expect("back")
        );
    }

    /// Serves one canned response on a fresh socket and returns what the client got.
    fn exchange(response: &'static [u8]) -> (Result<(), ApiError>, Vec<u8>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("c.sock");
        let listener = UnixListener::bind(&sock).expect("bind");
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().expect("accept");
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).expect("read");
            assert!(buf[..n].starts_with(b"GET /x HTTP/1.1\r\n"));
            s.write_all(response).expect("write");
        });
        let mut out = Vec::new();
        let r = get_stream(&sock, "/x", &mut out);
        server.join().expect("server");
        (r, out)
    }

    #[test]
    fn bodies_by_length_chunks_and_close() {
        let (r, out) = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        r.expect("length");
        assert_eq!(out, b"hello");
        let (r, out) = exchange(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\nA;x=y\r\n0123456789\r\n0\r\n\r\n",
        );
        r.expect("chunked");
        assert_eq!(out, b"abc0123456789");
        let (r, out) = exchange(b"HTTP/1.0 200 OK\r\n\r\nuntil close");
        r.expect("close");
        assert_eq!(out, b"until close");
    }

    #[test]
    fn truncated_and_error_responses() {
        let (r, out) =
            exchange(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n");
        let err = r.expect_err("cut short");
        assert!(err.to_string().contains("final chunk"), "{err}");
        assert_eq!(out, b"abc");
        let (r, _) =
            exchange(b"HTTP/1.1 404 Not Found\r\n\r\n{\"error\":\"pod \\\"x\\\" not found\"}");
        let err = r.expect_err("404");
        assert!(
            matches!(err, ApiError::Status { status: 404, .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "pod \"x\" not found");
        let (r, _) = exchange(b"garbage\r\n\r\n");
        assert!(r
            .expect_err("garbage")
            .to_string()
            .contains("bad status line"));
    }

    #[test]
    fn missing_daemon_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let sock = dir.path().join("none.sock");
        let err = get_json::<serde_json::Value>(&sock, "/pods").expect_err("no daemon");
        assert_eq!(
            err.to_string(),
            format!(
                "cannot connect to podvisor at {}: is `podvisor run` running?",
                sock.display()
            )
        );
        // A socket file nobody listens on (a crashed daemon) reads the same.
        drop(UnixListener::bind(&sock).expect("bind"));
        let err = get_json::<serde_json::Value>(&sock, "/pods").expect_err("stale");
        assert!(matches!(err, ApiError::NotRunning { .. }), "{err:?}");
    }
}
