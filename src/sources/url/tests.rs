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
    let handle = start_url_source(cfg(&server.url, Duration::from_millis(50)), tx).expect("start");
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
    let handle = start_url_source(cfg(&server.url, Duration::from_secs(60)), tx).expect("start");
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
                    .with_header(tiny_http::Header::from_bytes("ETag", "\"v1\"").expect("header"))
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
    let handle = start_url_source(cfg(&server.url, Duration::from_millis(50)), tx).expect("start");
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
    let handle = start_url_source(cfg(&server.url, Duration::from_secs(60)), tx).expect("start");
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
