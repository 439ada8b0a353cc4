//! sources::url: the manifest URL source — polls `staticPodURL` with ureq and reports new
//! bodies and failures.
//!
//! Every `check_frequency` (and once at start) it sends a GET with the configured headers
//! (each value of a multi-valued header as its own header line) and `If-None-Match` carrying
//! the last ETag. 304 and a 200 with the same bytes (SHA-256) as the last body are silent; a
//! new 200 body is `UrlChanged`; anything else is `UrlError`, on every failing poll. After an
//! error the source forgets the last body and ETag, so the next success is reported even if
//! it is the same body (the receiver can clear its error state). Requests go through
//! [`crate::httpclient`]: the timeout is a deadline for the whole request, redirects and body
//! included; bodies are capped at 10 MiB after decompression, response heads at 64 KiB, and
//! redirects are followed up to 10. Proxies come from the usual environment variables
//! (`HTTP_PROXY`, `NO_PROXY`...), like the kubelet's Go client. An `https://` URL is verified
//! against the system CA bundle plus an optional CA file, and the source can present a client
//! certificate ([`crate::httpclient::tls::ClientTls`]: a private fleet server).

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use ureq::http::header::{ETAG, IF_NONE_MATCH};
use ureq::http::{HeaderName, HeaderValue, StatusCode, Uri};
use ureq::Agent;

use super::{Gate, SourceError, SourceEvent, SourceHandle, MAX_MANIFEST_BYTES};
use crate::httpclient::tls::ClientTls;
use crate::httpclient::{read_body, HttpError, Limits};

/// The kubelet's `httpCheckFrequency`.
pub const DEFAULT_URL_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
/// The kubelet's HTTP client timeout for the static pod URL.
pub const DEFAULT_URL_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest response head (status line and headers) of the manifest URL.
pub const MAX_URL_HEAD: usize = 64 * 1024;
/// Redirects the manifest URL may take (Go's http.Client default).
pub const MAX_URL_REDIRECTS: u32 = 10;

/// The network limits of a manifest URL request with timeout `timeout`: every phase and the
/// whole request share that one deadline.
pub fn url_limits(timeout: Duration) -> Limits {
    Limits {
        max_body: MAX_MANIFEST_BYTES,
        max_head: MAX_URL_HEAD,
        max_redirects: MAX_URL_REDIRECTS,
        connect: timeout,
        head: timeout,
        body: timeout,
        total: timeout,
    }
}

/// Configuration of [`start_url_source`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlSourceConfig {
    /// An `http://` or `https://` URL.
    pub url: String,
    /// Extra request headers (`staticPodURLHeader`); several values are sent as repeated
    /// headers.
    pub headers: BTreeMap<String, Vec<String>>,
    /// Poll period ([`DEFAULT_URL_CHECK_FREQUENCY`]).
    pub check_frequency: Duration,
    /// Whole-request timeout, body included ([`DEFAULT_URL_TIMEOUT`]).
    pub timeout: Duration,
    /// Extra CA file and client certificate (`--manifest-url-ca-file`,
    /// `--manifest-url-client-cert`, `--manifest-url-client-key`).
    pub tls: ClientTls,
}

/// The flags naming the URL source's TLS files in errors.
pub const TLS_FLAG_NAMES: [&str; 3] = [
    "--manifest-url-ca-file",
    "--manifest-url-client-cert",
    "--manifest-url-client-key",
];

impl UrlSourceConfig {
    /// A configuration with no headers and the default frequency and timeout.
    pub fn new(url: impl Into<String>) -> Self {
        UrlSourceConfig {
            url: url.into(),
            headers: BTreeMap::new(),
            check_frequency: DEFAULT_URL_CHECK_FREQUENCY,
            timeout: DEFAULT_URL_TIMEOUT,
            tls: ClientTls {
                names: TLS_FLAG_NAMES,
                ..Default::default()
            },
        }
    }
}

/// Starts polling `cfg.url` on a new thread; the first poll happens at once. Fails only on
/// an invalid configuration (URL, header, zero durations) or when the thread cannot be
/// spawned; an unreachable URL is a `UrlError` event.
pub fn start_url_source(
    cfg: UrlSourceConfig,
    tx: Sender<SourceEvent>,
) -> Result<SourceHandle, SourceError> {
    for (field, value) in [
        ("check_frequency", cfg.check_frequency),
        ("timeout", cfg.timeout),
    ] {
        if value.is_zero() {
            return Err(SourceError::InvalidConfig {
                field,
                reason: "must be greater than zero".to_string(),
            });
        }
    }
    let mut poller = Poller::new(&cfg)?;
    let agent = poller.agent.clone();
    let gate = Gate::new();
    let thread_gate = Arc::clone(&gate);
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let check_frequency = cfg.check_frequency;
    let thread = std::thread::Builder::new()
        .name("source-url".to_string())
        .spawn(move || {
            let _done = done_tx;
            loop {
                if let Some(event) = poller.poll() {
                    if !thread_gate.send(&tx, event) {
                        return;
                    }
                }
                match stop_rx.recv_timeout(check_frequency) {
                    Err(RecvTimeoutError::Timeout) => {}
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        })
        .map_err(|source| SourceError::Spawn {
            what: "url",
            source,
        })?;
    let wake = Box::new(move || {
        drop(stop_tx);
        // Aborts a request in flight (the thread then finds the gate closed).
        agent.shutdown();
    });
    Ok(SourceHandle::new(gate, wake, done_rx, thread))
}

fn validate_url(url: &str) -> Result<(), SourceError> {
    let invalid = |reason: String| SourceError::InvalidUrl {
        url: url.to_string(),
        reason,
    };
    let uri: Uri = url.parse().map_err(|e| invalid(format!("{e}")))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        Some(other) => return Err(invalid(format!("unsupported scheme {other:?}"))),
        None => return Err(invalid("missing scheme (http:// or https://)".to_string())),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(invalid("missing host".to_string()));
    }
    Ok(())
}

fn validate_headers(
    headers: &BTreeMap<String, Vec<String>>,
) -> Result<Vec<(HeaderName, HeaderValue)>, SourceError> {
    let mut out = Vec::new();
    for (name, values) in headers {
        let invalid = |reason: String| SourceError::InvalidHeader {
            name: name.clone(),
            reason,
        };
        let header =
            HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(format!("name: {e}")))?;
        for value in values {
            let value = HeaderValue::from_str(value).map_err(|e| invalid(format!("value: {e}")))?;
            out.push((header.clone(), value));
        }
    }
    Ok(out)
}

/// What one successful request brought.
enum Fetched {
    NotModified,
    Body {
        data: Vec<u8>,
        etag: Option<HeaderValue>,
    },
}

/// Why one poll failed.
#[derive(Debug, thiserror::Error)]
enum FetchError {
    #[error(transparent)]
    Http(#[from] HttpError),
    #[error("unexpected status {0}")]
    Status(StatusCode),
}

/// The polling state; one `poll` is one request.
struct Poller {
    agent: Agent,
    url: String,
    headers: Vec<(HeaderName, HeaderValue)>,
    limits: Limits,
    etag: Option<HeaderValue>,
    /// SHA-256 of the last body reported.
    last: Option<[u8; 32]>,
}

impl Poller {
    /// Checks the URL and headers (the durations are checked by the caller).
    fn new(cfg: &UrlSourceConfig) -> Result<Poller, SourceError> {
        validate_url(&cfg.url)?;
        let headers = validate_headers(&cfg.headers)?;
        let limits = url_limits(cfg.timeout);
        let tls = cfg.tls.config().map_err(SourceError::Tls)?;
        Ok(Poller {
            agent: limits.agent_config().tls_config(tls).build().new_agent(),
            url: cfg.url.clone(),
            headers,
            limits,
            etag: None,
            last: None,
        })
    }

    /// Polls once; returns the event to send, if any.
    fn poll(&mut self) -> Option<SourceEvent> {
        match self.fetch() {
            Ok(Fetched::NotModified) => None,
            Ok(Fetched::Body { data, etag }) => {
                self.etag = etag;
                let hash: [u8; 32] = Sha256::digest(&data).into();
                if self.last == Some(hash) {
                    return None;
                }
                self.last = Some(hash);
                Some(SourceEvent::UrlChanged {
                    url: self.url.clone(),
                    data,
                })
            }
            Err(reason) => {
                self.etag = None;
                self.last = None;
                Some(SourceEvent::UrlError {
                    url: self.url.clone(),
                    message: format!("GET {}: {reason}", self.url),
                })
            }
        }
    }

    fn fetch(&self) -> Result<Fetched, FetchError> {
        let mut request = self.agent.get(&self.url);
        for (name, value) in &self.headers {
            request = request.header(name.clone(), value.clone());
        }
        if let Some(etag) = &self.etag {
            request = request.header(IF_NONE_MATCH, etag.clone());
        }
        let mut response = request.call().map_err(|e| self.limits.error(e))?;
        match response.status() {
            StatusCode::NOT_MODIFIED => Ok(Fetched::NotModified),
            StatusCode::OK => {
                let etag = response.headers().get(ETAG).cloned();
                let data = read_body(response.body_mut(), &self.limits)?;
                Ok(Fetched::Body { data, etag })
            }
            status => Err(FetchError::Status(status)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::httpclient::hostile::{self, Hostile};
    use crate::httpclient::Phase;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::mpsc::Receiver;
    use std::sync::Mutex;
    use std::thread::JoinHandle;
    use std::time::Instant;

    const WAIT: Duration = Duration::from_secs(3);

    type Headers = Vec<(String, String)>;
    type Handler = dyn Fn(usize, &Headers) -> Option<tiny_http::ResponseBox> + Send + 'static;

    /// A tiny_http server on 127.0.0.1 that records each request's headers (lowercased
    /// names) and answers with `handler(request index, headers)`; `None` never answers.
    struct TestServer {
        url: String,
        requests: Arc<Mutex<Vec<Headers>>>,
        stop: Arc<AtomicBool>,
        thread: Option<JoinHandle<()>>,
    }

    impl TestServer {
        fn new(handler: Box<Handler>) -> TestServer {
            let server = tiny_http::Server::http("127.0.0.1:0").expect("bind 127.0.0.1:0");
            let port = server.server_addr().to_ip().expect("ip listener").port();
            let requests = Arc::new(Mutex::new(Vec::new()));
            let stop = Arc::new(AtomicBool::new(false));
            let (requests2, stop2) = (Arc::clone(&requests), Arc::clone(&stop));
            let thread = std::thread::spawn(move || {
                let mut held = Vec::new();
                while !stop2.load(Ordering::SeqCst) {
                    let Ok(Some(request)) = server.recv_timeout(Duration::from_millis(10)) else {
                        continue;
                    };
                    let headers: Headers = request
                        .headers()
                        .iter()
                        .map(|h| {
                            (
                                h.field.as_str().as_str().to_ascii_lowercase(),
                                h.value.as_str().to_string(),
                            )
                        })
                        .collect();
                    let index = {
                        let mut requests = requests2.lock().expect("lock");
                        requests.push(headers.clone());
                        requests.len() - 1
                    };
                    match handler(index, &headers) {
                        Some(response) => {
                            let _ = request.respond(response);
                        }
                        None => held.push(request),
                    }
                }
            });
            TestServer {
                url: format!("http://127.0.0.1:{port}/pods"),
                requests,
                stop,
                thread: Some(thread),
            }
        }

        fn count(&self) -> usize {
            self.requests.lock().expect("lock").len()
        }

        fn request(&self, i: usize) -> Headers {
            self.requests.lock().expect("lock")[i].clone()
        }

        fn wait_for_requests(&self, n: usize) {
            let t = Instant::now();
            while self.count() < n {
                assert!(
                    t.elapsed() < WAIT,
                    "server saw {} requests, want {n}",
                    self.count()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }

    fn header<'a>(headers: &'a Headers, name: &str) -> Vec<&'a str> {
        headers
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    fn ok(body: &[u8]) -> Option<tiny_http::ResponseBox> {
        Some(tiny_http::Response::from_data(body.to_vec()).boxed())
    }

    fn status(code: u16) -> Option<tiny_http::ResponseBox> {
        Some(
            tiny_http::Response::from_string("failure")
                .with_status_code(code)
                .boxed(),
        )
    }

    fn cfg(url: &str, check_frequency: Duration) -> UrlSourceConfig {
        UrlSourceConfig {
            check_frequency,
            ..UrlSourceConfig::new(url)
        }
    }

    fn next(rx: &Receiver<SourceEvent>) -> SourceEvent {
        match rx.recv_timeout(WAIT) {
            Ok(event) => event,
            Err(e) => panic!("no source event within {WAIT:?}: {e}"),
        }
    }

    fn changed(url: &str, data: &[u8]) -> SourceEvent {
        SourceEvent::UrlChanged {
            url: url.to_string(),
            data: data.to_vec(),
        }
    }

    fn expect_error(rx: &Receiver<SourceEvent>, url: &str) -> String {
        match next(rx) {
            SourceEvent::UrlError { url: u, message } => {
                assert_eq!(u, url);
                assert!(message.contains(url), "{message}");
                message
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn sources_url_changed_only_when_body_changes() {
        let version = Arc::new(AtomicUsize::new(0));
        let v = Arc::clone(&version);
        let server = TestServer::new(Box::new(move |_, _| {
            ok(format!("body {}", v.load(Ordering::SeqCst)).as_bytes())
        }));
        let (tx, rx) = mpsc::channel();
        let handle =
            start_url_source(cfg(&server.url, Duration::from_millis(50)), tx).expect("start");
        assert_eq!(next(&rx), changed(&server.url, b"body 0"));
        server.wait_for_requests(4);
        assert!(rx.try_recv().is_err(), "same body reported again");
        version.store(1, Ordering::SeqCst);
        assert_eq!(next(&rx), changed(&server.url, b"body 1"));
        handle.stop();
    }

    #[test]
    fn sources_url_empty_body_is_a_body() {
        let server = TestServer::new(Box::new(|_, _| ok(b"")));
        let (tx, rx) = mpsc::channel();
        let handle =
            start_url_source(cfg(&server.url, Duration::from_secs(60)), tx).expect("start");
        assert_eq!(next(&rx), changed(&server.url, b""));
        handle.stop();
    }

    #[test]
    fn sources_url_etag_and_custom_headers() {
        let server = TestServer::new(Box::new(|_, headers| {
            if header(headers, "if-none-match") == ["\"v1\""] {
                Some(tiny_http::Response::empty(304).boxed())
            } else {
                Some(
                    tiny_http::Response::from_data(b"pod".to_vec())
                        .with_header(
                            tiny_http::Header::from_bytes("ETag", "\"v1\"").expect("header"),
                        )
                        .boxed(),
                )
            }
        }));
        let mut config = cfg(&server.url, Duration::from_millis(50));
        config.headers.insert(
            "X-Token".to_string(),
            vec!["a".to_string(), "b".to_string()],
        );
        config
            .headers
            .insert("Authorization".to_string(), vec!["Bearer t".to_string()]);
        let (tx, rx) = mpsc::channel();
        let handle = start_url_source(config, tx).expect("start");
        assert_eq!(next(&rx), changed(&server.url, b"pod"));
        server.wait_for_requests(3);
        assert!(rx.try_recv().is_err(), "304 reported");
        let first = server.request(0);
        assert_eq!(header(&first, "x-token"), ["a", "b"]);
        assert_eq!(header(&first, "authorization"), ["Bearer t"]);
        assert!(header(&first, "if-none-match").is_empty());
        let second = server.request(1);
        assert_eq!(header(&second, "if-none-match"), ["\"v1\""]);
        assert_eq!(header(&second, "x-token"), ["a", "b"]);
        handle.stop();
    }

    #[test]
    fn sources_url_errors_resent_and_recovery_reported() {
        // 200 "a", then two 500s, then 200 "a" again.
        let server = TestServer::new(Box::new(|i, _| match i {
            0 => ok(b"a"),
            1 | 2 => status(500),
            _ => ok(b"a"),
        }));
        let (tx, rx) = mpsc::channel();
        let handle =
            start_url_source(cfg(&server.url, Duration::from_millis(50)), tx).expect("start");
        assert_eq!(next(&rx), changed(&server.url, b"a"));
        let message = expect_error(&rx, &server.url);
        assert!(message.contains("500"), "{message}");
        expect_error(&rx, &server.url);
        // Same bytes as before the errors: reported, the receiver may clear its error.
        assert_eq!(next(&rx), changed(&server.url, b"a"));
        handle.stop();
    }

    #[test]
    fn sources_url_timeout_is_an_error() {
        let server = TestServer::new(Box::new(|_, _| None));
        let mut config = cfg(&server.url, Duration::from_secs(60));
        config.timeout = Duration::from_millis(300);
        let (tx, rx) = mpsc::channel();
        let start = Instant::now();
        let handle = start_url_source(config, tx).expect("start");
        // The server never answers and the next poll is a minute away: only the timeout can
        // end the first request, and not before 300 ms.
        let message = expect_error(&rx, &server.url);
        let elapsed = start.elapsed();
        assert!(
            message.ends_with("timed out after 300ms for the whole request"),
            "{message}"
        );
        assert!(elapsed >= Duration::from_millis(300), "{elapsed:?}");
        assert_eq!(server.count(), 1, "the error is the first request's");
        handle.stop();
    }

    #[test]
    fn sources_url_stop_aborts_request_in_flight() {
        let server = TestServer::new(Box::new(|_, _| None));
        let (tx, rx) = mpsc::channel();
        // The server never answers and the request's timeout is an hour: only the stop can
        // end it.
        let mut config = cfg(&server.url, Duration::from_secs(3600));
        config.timeout = Duration::from_secs(3600);
        let handle = start_url_source(config, tx).expect("start");
        server.wait_for_requests(1);
        handle.stop();
        // Order of events: the thread ends (its sender dropped) while the request is still
        // unanswered, and the aborted request is not reported.
        assert_eq!(rx.recv_timeout(WAIT), Err(RecvTimeoutError::Disconnected));
        assert_eq!(server.count(), 1);
    }

    #[test]
    fn sources_url_body_over_limit_is_an_error() {
        let size = usize::try_from(MAX_MANIFEST_BYTES).expect("fits") + 1;
        let server = TestServer::new(Box::new(move |_, _| ok(&vec![b'x'; size])));
        let (tx, rx) = mpsc::channel();
        let handle =
            start_url_source(cfg(&server.url, Duration::from_secs(60)), tx).expect("start");
        let message = expect_error(&rx, &server.url);
        assert!(message.contains("10485760-byte"), "{message}");
        handle.stop();
    }

    #[test]
    fn sources_url_connection_refused_is_an_error() {
        // A port that was just free: bind, note, release.
        let port = {
            let server = tiny_http::Server::http("127.0.0.1:0").expect("bind");
            server.server_addr().to_ip().expect("ip").port()
        };
        let url = format!("http://127.0.0.1:{port}/");
        let (tx, rx) = mpsc::channel();
        let handle = start_url_source(cfg(&url, Duration::from_secs(60)), tx).expect("start");
        expect_error(&rx, &url);
        handle.stop();
    }

    /// Runs in a child process (see `hostile_servers_end_in_named_errors_with_bounded_memory`):
    /// every hostile behaviour, one poll each.
    fn hostile_child(base: &str) {
        let cfg = UrlSourceConfig {
            timeout: Duration::from_secs(1),
            ..UrlSourceConfig::new(base)
        };
        let poller = Poller::new(&cfg).expect("poller");
        let fetch = |path: &str| {
            let p = Poller {
                url: format!("{base}{path}"),
                ..Poller::new(&cfg).expect("poller")
            };
            match p.fetch() {
                Err(FetchError::Http(e)) => e,
                Err(other) => panic!("{path}: {other}"),
                Ok(_) => panic!("{path}: fetched a body"),
            }
        };
        let too_large = HttpError::BodyTooLarge {
            limit: MAX_MANIFEST_BYTES,
        };
        assert_eq!(fetch("/bomb"), too_large);
        assert_eq!(fetch("/endless"), too_large);
        let timeout = HttpError::Timeout {
            phase: Phase::Total,
            after: Duration::from_secs(1),
        };
        assert_eq!(fetch("/slow-head"), timeout);
        assert_eq!(fetch("/trickle"), timeout);
        assert_eq!(
            fetch("/huge-head"),
            HttpError::HeadTooLarge {
                limit: MAX_URL_HEAD
            }
        );
        assert_eq!(
            fetch("/loop"),
            HttpError::TooManyRedirects {
                max: MAX_URL_REDIRECTS
            }
        );
        // The event the sync loop gets names the URL and the limit.
        let mut p = Poller {
            url: format!("{base}/bomb"),
            ..poller
        };
        match p.poll() {
            Some(SourceEvent::UrlError { message, .. }) => assert_eq!(
                message,
                format!("GET {base}/bomb: response body is larger than the 10485760-byte limit (counted after decompression)")
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hostile_servers_end_in_named_errors_with_bounded_memory() {
        if let Some(base) = hostile::child_url() {
            hostile_child(&base);
            return hostile::report_peak_rss();
        }
        let server = hostile::Server::start(|path| match path {
            "/bomb" => Hostile::GzipBomb,
            "/endless" => Hostile::EndlessBody,
            "/slow-head" => Hostile::SlowHead,
            "/trickle" => Hostile::TrickleBody,
            "/huge-head" => Hostile::HugeHead,
            _ => Hostile::RedirectLoop,
        });
        hostile::assert_child_memory_bounded(
            module_path!(),
            "hostile_servers_end_in_named_errors_with_bounded_memory",
            &server.url(""),
            "url source",
            MAX_MANIFEST_BYTES,
        );
    }

    #[test]
    fn sources_url_invalid_config() {
        let (tx, _rx) = mpsc::channel();
        for url in [
            "ftp://127.0.0.1/x",
            "127.0.0.1/pods",
            "http://",
            "not a url",
        ] {
            assert!(
                matches!(
                    start_url_source(UrlSourceConfig::new(url), tx.clone()),
                    Err(SourceError::InvalidUrl { .. })
                ),
                "{url}"
            );
        }
        let mut config = UrlSourceConfig::new("http://127.0.0.1:1/");
        config
            .headers
            .insert("Bad Name".to_string(), vec!["v".to_string()]);
        assert!(matches!(
            start_url_source(config.clone(), tx.clone()),
            Err(SourceError::InvalidHeader { .. })
        ));
        config.headers.clear();
        config
            .headers
            .insert("X-Ok".to_string(), vec!["line\nbreak".to_string()]);
        assert!(matches!(
            start_url_source(config.clone(), tx.clone()),
            Err(SourceError::InvalidHeader { .. })
        ));
        config.headers.clear();
        config.timeout = Duration::ZERO;
        assert!(matches!(
            start_url_source(config, tx),
            Err(SourceError::InvalidConfig {
                field: "timeout",
                ..
            })
        ));
    }

    /// A CA (`ca.crt`) and a client certificate it signed for CN `node1` (`node.crt`,
    /// `node.key`) in `dir`.
    fn client_pki(dir: &std::path::Path) {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("ca params");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "fleet-ca");
        let ca_key = rcgen::KeyPair::generate().expect("ca key");
        let ca_cert = ca.self_signed(&ca_key).expect("ca");
        let mut node = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        node.distinguished_name
            .push(rcgen::DnType::CommonName, "node1");
        node.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
        let node_key = rcgen::KeyPair::generate().expect("key");
        let issuer = rcgen::Issuer::from_params(&ca, &ca_key);
        let node_cert = node.signed_by(&node_key, &issuer).expect("signed");
        std::fs::write(dir.join("ca.crt"), ca_cert.pem()).expect("w");
        std::fs::write(dir.join("node.crt"), node_cert.pem()).expect("w");
        std::fs::write(dir.join("node.key"), node_key.serialize_pem()).expect("w");
    }

    /// An HTTPS server (a self-signed certificate for 127.0.0.1 in `dir/pki`, clients
    /// verified against `dir/ca.crt`) answering 200 with a Pod to clients that present a
    /// certificate and 403 to others.
    fn fleet_server(dir: &std::path::Path) -> (u16, JoinHandle<()>, Arc<AtomicBool>) {
        let tls = crate::nodeapi::tls::server_config(&crate::nodeapi::tls::TlsSettings {
            generated_dir: dir.join("pki"),
            client_ca_file: Some(dir.join("ca.crt")),
            ..Default::default()
        })
        .expect("tls");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let stop = Arc::new(AtomicBool::new(false));
        let s = Arc::clone(&stop);
        let t = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let Ok((tcp, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                let _ = tcp.set_nonblocking(false);
                let _ = tcp.set_read_timeout(Some(Duration::from_secs(5)));
                let conn = rustls::ServerConnection::new(Arc::clone(&tls)).expect("conn");
                let mut stream = rustls::StreamOwned::new(conn, tcp);
                let Ok(Some(_head)) = crate::httpserver::read_head(&mut stream) else {
                    continue;
                };
                let who = stream
                    .conn
                    .peer_certificates()
                    .and_then(|c| c.first())
                    .and_then(|c| crate::nodeapi::tls::subject_cn_and_orgs(c))
                    .map(|(cn, _)| cn);
                let resp = match who {
                    Some(cn) => crate::httpserver::Response::plain(
                        200,
                        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: {cn}}}\n"),
                    ),
                    None => crate::httpserver::Response::text(403, "client certificate required"),
                };
                let _ = crate::httpserver::write_response(&mut stream, &resp, false);
                stream.conn.send_close_notify();
                let _ = std::io::Write::flush(&mut stream);
            }
        });
        (port, t, stop)
    }

    #[test]
    fn https_with_a_private_ca_and_a_client_certificate() {
        let dir = tempfile::tempdir().expect("tempdir");
        client_pki(dir.path());
        let (port, server, stop) = fleet_server(dir.path());
        let url = format!("https://127.0.0.1:{port}/pods");
        let tls = |ca: bool, cert: bool| ClientTls {
            ca_file: ca.then(|| dir.path().join("pki/kubelet.crt")),
            client_cert: cert.then(|| dir.path().join("node.crt")),
            client_key: cert.then(|| dir.path().join("node.key")),
            names: TLS_FLAG_NAMES,
        };
        let poll = |tls: ClientTls| {
            let mut p = Poller::new(&UrlSourceConfig {
                tls,
                ..UrlSourceConfig::new(&url)
            })
            .expect("poller");
            p.poll()
        };
        // Trusted through the CA file, identified by the client certificate.
        assert_eq!(
            poll(tls(true, true)),
            Some(changed(
                &url,
                b"apiVersion: v1\nkind: Pod\nmetadata: {name: node1}\n"
            ))
        );
        // No client certificate: the server refuses.
        match poll(tls(true, false)) {
            Some(SourceEvent::UrlError { message, .. }) => {
                assert!(message.contains("403"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        // The system bundle alone does not trust a private server.
        match poll(tls(false, true)) {
            Some(SourceEvent::UrlError { message, .. }) => {
                assert!(message.to_lowercase().contains("certificate"), "{message}")
            }
            other => panic!("{other:?}"),
        }
        // A CA file that is not one is an error at start, naming the flag.
        let bad = ClientTls {
            ca_file: Some(dir.path().join("node.key")),
            ..tls(true, true)
        };
        let err = Poller::new(&UrlSourceConfig {
            tls: bad,
            ..UrlSourceConfig::new(&url)
        })
        .err()
        .expect("refused");
        assert!(err.to_string().contains("--manifest-url-ca-file"), "{err}");
        stop.store(true, Ordering::SeqCst);
        server.join().expect("server");
    }
}
