//! prober::http: the httpGet handler and httpGet hooks (the kubelet's pkg/probe/http).
//!
//! As the kubelet: User-Agent `kube-probe/<ver>` and `Accept: */*` unless the probe sets
//! them; HTTPS without certificate verification (ureq + rustls); plain HTTP/1.1 by hand (the
//! hot path: a fraction of ureq's CPU per request); no proxy; no keep-alive; 200-399 passes;
//! redirects to the same host are followed (at most 10), a redirect to another host is not
//! followed and passes with a warning; at most 10 KiB of the body is read (for the message).

use std::io::{Read, Write};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ureq::tls::TlsConfig;
use ureq::Agent;

use super::{HttpAction, ProbeResult, Scheme, USER_AGENT};

/// The kubelet reads at most this much of a probe's response body.
pub const MAX_BODY: u64 = 10 * 1024;
const MAX_REDIRECTS: usize = 10;

fn agent() -> &'static Agent {
    static AGENT: OnceLock<Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        Agent::new_with_config(
            Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .proxy(None)
                .max_idle_connections(0)
                .max_idle_connections_per_host(0)
                .user_agent(USER_AGENT)
                .accept("*/*")
                .tls_config(TlsConfig::builder().disable_verification(true).build())
                .build(),
        )
    })
}

/// A parsed absolute URL: scheme, host, port, path-and-query.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    scheme: Scheme,
    host: String,
    port: u16,
    path: String,
}

impl Url {
    fn render(&self) -> String {
        let s = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!(
            "{s}://{}{}",
            super::tcp::authority(&self.host, self.port),
            self.path
        )
    }

    /// Resolves a Location header against this URL.
    fn join(&self, location: &str) -> Option<Url> {
        let (scheme, rest) = if let Some(r) = location.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if let Some(r) = location.strip_prefix("https://") {
            (Scheme::Https, r)
        } else if location.starts_with('/') {
            return Some(Url {
                path: location.to_string(),
                ..self.clone()
            });
        } else {
            let dir = self.path.rsplit_once('/').map_or("", |(d, _)| d);
            return Some(Url {
                path: format!("{dir}/{location}"),
                ..self.clone()
            });
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let default_port = if scheme == Scheme::Https { 443 } else { 80 };
        let (host, port) = if let Some(r) = authority.strip_prefix('[') {
            let (h, p) = r.split_once(']')?;
            (h, p.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let port = match port {
            Some(p) => p.parse().ok()?,
            None => default_port,
        };
        Some(Url {
            scheme,
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

/// One response: status code, Location header, the first [`MAX_BODY`] bytes of the body.
type Fetched = (u16, Option<String>, String);

/// Why a request got no response; the probe fails with `Get "<url>": <this>`.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error("{0}")]
    Tls(ureq::Error),
    #[error("timeout awaiting response headers")]
    Timeout,
    #[error("dial tcp {authority}: {source}")]
    Dial {
        authority: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Io(std::io::Error),
    #[error("response headers larger than 64 KiB")]
    HeadersTooLarge,
    #[error("connection closed before the response headers")]
    ClosedBeforeHeaders,
    #[error("malformed HTTP response {status:?}")]
    Malformed { status: String },
}

/// HTTPS through ureq (rustls, certificate not verified).
fn fetch_tls(
    target: &str,
    headers: &[(String, String)],
    remaining: Duration,
) -> Result<Fetched, FetchError> {
    let mut req = agent().get(target);
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let resp = req
        .config()
        .timeout_global(Some(remaining))
        .build()
        .call()
        .map_err(FetchError::Tls)?;
    let code = resp.status().as_u16();
    let location = resp
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if !(300..400).contains(&code) {
        return Ok((code, location, String::new()));
    }
    let mut body = Vec::new();
    // A body cut short by the timeout or the size cap decides nothing: the status code does;
    // the body is only the redirect warning's message.
    let _ = resp
        .into_body()
        .as_reader()
        .take(MAX_BODY)
        .read_to_end(&mut body);
    Ok((code, location, String::from_utf8_lossy(&body).into_owned()))
}

/// Plain HTTP/1.1 by hand: one request with `Connection: close`, the status line and headers
/// parsed, the body read up to the cap. Probes are the hot path (hundreds per second on a
/// busy node) and this costs about what the TCP connect costs; ureq handles HTTPS.
fn fetch_plain(
    url: &Url,
    headers: &[(String, String)],
    deadline: Instant,
) -> Result<Fetched, FetchError> {
    let remaining = || {
        let r = deadline.saturating_duration_since(Instant::now());
        if r.is_zero() {
            Err(FetchError::Timeout)
        } else {
            Ok(r)
        }
    };
    let authority = super::tcp::authority(&url.host, url.port);
    let mut s =
        super::tcp::connect(&authority, remaining()?).map_err(|source| FetchError::Dial {
            authority: authority.clone(),
            source,
        })?;
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut req = format!("GET {} HTTP/1.1\r\n", url.path);
    if !has("host") {
        req.push_str(&format!("Host: {authority}\r\n"));
    }
    if !has("user-agent") {
        req.push_str(&format!("User-Agent: {USER_AGENT}\r\n"));
    }
    if !has("accept") {
        req.push_str("Accept: */*\r\n");
    }
    for (k, v) in headers {
        // Header injection is impossible: CR/LF never reach the wire.
        let clean = |x: &str| x.replace(['\r', '\n'], " ");
        req.push_str(&format!("{}: {}\r\n", clean(k), clean(v)));
    }
    req.push_str("Connection: close\r\n\r\n");
    s.set_write_timeout(Some(remaining()?))
        .map_err(FetchError::Io)?;
    s.write_all(req.as_bytes()).map_err(FetchError::Io)?;
    // Headers: read until the blank line (at most 64 KiB of them).
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 64 * 1024 {
            return Err(FetchError::HeadersTooLarge);
        }
        s.set_read_timeout(Some(remaining()?))
            .map_err(FetchError::Io)?;
        match s.read(&mut chunk) {
            Ok(0) => return Err(FetchError::ClosedBeforeHeaders),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) => return Err(FetchError::Io(e)),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or("");
    let code = status
        .strip_prefix("HTTP/1.")
        .and_then(|r| r.get(2..5))
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| FetchError::Malformed {
            status: status.to_string(),
        })?;
    let mut location = None;
    let mut chunked = false;
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            let v = v.trim();
            if k.eq_ignore_ascii_case("location") {
                location = Some(v.to_string());
            } else if k.eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.to_ascii_lowercase().contains("chunked");
            }
        }
    }
    // Only a redirect's body is ever shown (in the ProbeWarning); for other codes the status
    // decides, and waiting for the body would hold a worker until the server closes.
    if !(300..400).contains(&code) {
        return Ok((code, location, String::new()));
    }
    let mut body = buf[head_end..].to_vec();
    while (body.len() as u64) < MAX_BODY {
        let Ok(r) = remaining() else { break };
        if s.set_read_timeout(Some(r)).is_err() {
            break;
        }
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    body.truncate(MAX_BODY as usize);
    if chunked {
        body = dechunk(&body);
    }
    Ok((code, location, String::from_utf8_lossy(&body).into_owned()))
}

/// Best-effort decoding of a (possibly truncated) chunked body, for the message only.
fn dechunk(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = raw;
    while let Some(i) = rest.windows(2).position(|w| w == b"\r\n") {
        let size_line = String::from_utf8_lossy(&rest[..i]);
        let hex = size_line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(hex, 16) else {
            break;
        };
        if size == 0 {
            break;
        }
        let data = &rest[i + 2..];
        let take = size.min(data.len());
        out.extend_from_slice(&data[..take]);
        rest = data.get(take + 2..).unwrap_or(&[]);
    }
    out
}

/// Runs one httpGet probe within `timeout` (all redirects included).
pub fn probe(action: &HttpAction, timeout: Duration) -> ProbeResult {
    let deadline = Instant::now() + timeout;
    let first = Url {
        scheme: action.scheme,
        host: action.host.clone(),
        port: action.port,
        path: action.path.clone(),
    };
    let mut url = first.clone();
    for _ in 0..=MAX_REDIRECTS {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let target = url.render();
        if remaining.is_zero() {
            return failure(format!("Get {target:?}: timeout after {timeout:?}"));
        }
        let fetched = match url.scheme {
            Scheme::Http => fetch_plain(&url, &action.headers, deadline),
            Scheme::Https => fetch_tls(&target, &action.headers, remaining),
        };
        let (code, location, body) = match fetched {
            Ok(r) => r,
            Err(e) => return failure(format!("Get {target:?}: {e}")),
        };
        if (300..400).contains(&code) {
            if let Some(next) = location.as_deref().and_then(|l| url.join(l)) {
                if next.host == first.host {
                    url = next;
                    continue;
                }
            }
            return ProbeResult::Warning {
                message: format!("Probe terminated redirects, Response body: {body}"),
            };
        }
        if (200..300).contains(&code) {
            return ProbeResult::Success;
        }
        return failure(format!("HTTP probe failed with statuscode: {code}"));
    }
    failure(format!(
        "Get {:?}: stopped after {MAX_REDIRECTS} redirects",
        first.render()
    ))
}

fn failure(message: String) -> ProbeResult {
    ProbeResult::Failure { message }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc;
    use std::thread;

    /// A request the server saw: path and headers.
    type Seen = (String, Vec<(String, String)>);

    /// A tiny_http server answering each request with `respond(path) -> (code, headers)`,
    /// reporting each request's headers on the channel.
    fn serve(
        respond: impl Fn(&str) -> (u16, Vec<(String, String)>, String) + Send + 'static,
    ) -> (u16, mpsc::Receiver<Seen>) {
        let server = tiny_http::Server::http("127.0.0.1:0").expect("server");
        let port = server.server_addr().to_ip().expect("ip").port();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for req in server.incoming_requests() {
                let headers: Vec<(String, String)> = req
                    .headers()
                    .iter()
                    .map(|h| (h.field.to_string(), h.value.to_string()))
                    .collect();
                let (code, extra, body) = respond(req.url());
                let _ = tx.send((req.url().to_string(), headers));
                let mut resp = tiny_http::Response::from_string(body).with_status_code(code);
                for (k, v) in extra {
                    if let Ok(h) = tiny_http::Header::from_bytes(k.as_bytes(), v.as_bytes()) {
                        resp.add_header(h);
                    }
                }
                let _ = req.respond(resp);
            }
        });
        (port, rx)
    }

    fn action(port: u16, path: &str) -> HttpAction {
        HttpAction {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port,
            path: path.into(),
            headers: vec![("X-Probe".into(), "yes".into())],
        }
    }

    #[test]
    fn status_codes_headers_and_user_agent() {
        let (port, rx) = serve(|path| match path {
            "/ok" => (200, vec![], "fine".into()),
            "/bad" => (500, vec![], "x".repeat(100_000)),
            _ => (404, vec![], String::new()),
        });
        let t = Duration::from_secs(2);
        assert_eq!(probe(&action(port, "/ok"), t), ProbeResult::Success);
        let (_, headers) = rx.recv().expect("request");
        let get = |k: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("user-agent").as_deref(), Some(USER_AGENT));
        assert_eq!(get("accept").as_deref(), Some("*/*"));
        assert_eq!(get("x-probe").as_deref(), Some("yes"));
        assert_eq!(
            probe(&action(port, "/bad"), t),
            failure("HTTP probe failed with statuscode: 500".into())
        );
        assert!(!probe(&action(port, "/missing"), t).passed());
    }

    #[test]
    fn redirects_same_host_followed_other_host_warns() {
        let (port, rx) = serve(move |path| match path {
            "/a" => (302, vec![("Location".into(), "/b".into())], String::new()),
            "/b" => (200, vec![], String::new()),
            "/away" => (
                301,
                vec![("Location".into(), "http://localhost:1/x".into())],
                "moved".into(),
            ),
            _ => (404, vec![], String::new()),
        });
        let t = Duration::from_secs(2);
        assert_eq!(probe(&action(port, "/a"), t), ProbeResult::Success);
        let paths: Vec<String> = rx.try_iter().map(|(p, _)| p).collect();
        assert_eq!(paths, vec!["/a", "/b"]);
        match probe(&action(port, "/away"), t) {
            ProbeResult::Warning { message } => assert!(message.contains("moved"), "{message}"),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn hanging_server_times_out_and_refused_fails() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        // Accepts (the kernel backlog does) but never answers.
        let t0 = Instant::now();
        let r = probe(&action(port, "/"), Duration::from_millis(300));
        assert!(!r.passed(), "{r:?}");
        assert!(t0.elapsed() < Duration::from_secs(2));
        drop(l);
        assert!(!probe(&action(port, "/"), Duration::from_secs(1)).passed());
    }

    #[test]
    fn chunked_bodies_and_malformed_responses() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2;x=1\r\nde\r\n0\r\n\r\n"), b"abcde");
        assert_eq!(dechunk(b"5\r\nab"), b"ab");
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut s) = c else { return };
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf);
                let _ = s.write_all(b"SSH-2.0-OpenSSH\r\n\r\n");
            }
        });
        match probe(&action(port, "/"), Duration::from_secs(1)) {
            ProbeResult::Failure { message } => {
                assert!(message.contains("malformed HTTP response"), "{message}")
            }
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn location_resolution() {
        let u = Url {
            scheme: Scheme::Http,
            host: "127.0.0.1".into(),
            port: 80,
            path: "/a/b".into(),
        };
        assert_eq!(u.join("c").map(|u| u.path), Some("/a/c".into()));
        let o = u.join("https://[::1]:8443/x").expect("url");
        assert_eq!(
            (o.scheme, o.host.as_str(), o.port, o.path.as_str()),
            (Scheme::Https, "::1", 8443, "/x")
        );
        assert_eq!(u.join("http://h").map(|u| u.port), Some(80));
    }

    struct Killed(Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[test]
    fn https_without_certificate_verification() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        let ok = Command::new("openssl")
            .args([
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            ])
            .args(["-subj", "/CN=probe-test", "-keyout"])
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("openssl");
        assert!(ok.success());
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        let _server = Killed(
            Command::new("openssl")
                .args(["s_server", "-quiet", "-www", "-accept"])
                .arg(port.to_string())
                .arg("-cert")
                .arg(&cert)
                .arg("-key")
                .arg(&key)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("s_server"),
        );
        let mut a = action(port, "/");
        a.scheme = Scheme::Https;
        let mut last = None;
        for _ in 0..50 {
            let r = probe(&a, Duration::from_secs(2));
            if r.passed() {
                return;
            }
            last = Some(r);
            thread::sleep(Duration::from_millis(100));
        }
        panic!("self-signed https probe never passed: {last:?}");
    }
}
