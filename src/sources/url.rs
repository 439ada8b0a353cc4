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
mod tests;
