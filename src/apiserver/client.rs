//! apiserver::client: a synchronous Kubernetes REST client on the registry client's ureq +
//! rustls stack: the kubeconfig's CA as the only roots (or verification off when it says
//! so), its client certificate, a bearer token (a `tokenFile` is read again when it changes),
//! JSON in and out as `serde_json::Value`s, `metav1.Status` errors decoded, `Retry-After`
//! read, the kubelet's client-side rate limit (`kubeAPIQPS`/`kubeAPIBurst`, a token bucket;
//! the lease's heartbeat client has none, as in the kubelet) and every response bounded by
//! [`crate::httpclient`].

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};
use ureq::Agent;

use super::kubeconfig::Kubeconfig;
use crate::httpclient::{read_body, HttpError, Limits};

/// Ordinary requests: 32 MiB (a list of 110 pods is ~1-2 MB), answers within 30 s.
pub const API_LIMITS: Limits = Limits {
    max_body: 32 << 20,
    max_head: 64 << 10,
    max_redirects: 0,
    connect: Duration::from_secs(10),
    head: Duration::from_secs(30),
    body: Duration::from_secs(30),
    total: Duration::from_secs(30),
};

/// The largest single watch event accepted.
pub const MAX_WATCH_EVENT: usize = 8 << 20;

/// What went wrong with a request; `method` and `path` name it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    #[error("{method} {path}: {source}")]
    Transport {
        method: &'static str,
        path: String,
        source: HttpError,
    },
    /// The API server answered with an error status (its `metav1.Status` reason and message).
    #[error("{method} {path}: HTTP {status} {reason}: {message}")]
    Status {
        method: &'static str,
        path: String,
        status: u16,
        reason: String,
        message: String,
        retry_after: Option<Duration>,
    },
    #[error("{method} {path}: undecodable answer: {message}")]
    Decode {
        method: &'static str,
        path: String,
        message: String,
    },
    #[error("tls setup: {message}")]
    Tls { message: String },
    #[error("token file {path}: {message}")]
    Token { path: PathBuf, message: String },
}

impl ClientError {
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status() == Some(404)
    }

    pub fn is_conflict(&self) -> bool {
        self.status() == Some(409)
    }

    /// `409` with reason `AlreadyExists` (a create whose name is taken).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, ClientError::Status { status: 409, reason, .. } if reason == "AlreadyExists")
    }

    /// The server (or the way to it) is the problem, not the request: transport errors,
    /// 429 and 5xx. Everything is retried later; these also back every request off.
    pub fn is_unavailable(&self) -> bool {
        match self {
            ClientError::Transport { .. } | ClientError::Decode { .. } => true,
            ClientError::Status { status, .. } => *status == 429 || *status >= 500,
            ClientError::Tls { .. } | ClientError::Token { .. } => false,
        }
    }

    /// The request itself is refused and the same request will be refused again (403,
    /// 400, 422): not worth retrying before something changes.
    pub fn is_refusal(&self) -> bool {
        matches!(self.status(), Some(400 | 403 | 422))
    }

    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ClientError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// The kubelet's client-side rate limit: `qps` requests a second, bursts of `burst`.
#[derive(Debug)]
struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// How long to wait for a token at `now` (taking it).
    fn take(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

#[derive(Debug)]
enum Token {
    None,
    Fixed(String),
    /// Path, its last modification time and content.
    File(PathBuf, Mutex<Option<(SystemTime, String)>>),
}

/// A client of one API server; cheap to clone (the agent and its connection pool are shared).
#[derive(Debug, Clone)]
pub struct KubeClient {
    agent: Agent,
    server: String,
    token: Arc<Token>,
    limiter: Option<Arc<Mutex<TokenBucket>>>,
    limits: Limits,
}

/// A successful answer.
#[derive(Debug, Clone)]
pub struct ApiResponse {
    pub status: u16,
    pub body: Value,
}

/// The `Retry-After` seconds of an answer.
fn retry_after(resp: &ureq::http::Response<ureq::Body>) -> Option<Duration> {
    let v = resp.headers().get("retry-after")?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

impl KubeClient {
    /// A client for `kc`'s server; `qps` 0 means no client-side rate limit.
    pub fn new(kc: &Kubeconfig, qps: u32, burst: u32) -> Result<KubeClient, ClientError> {
        let tls_err = |message: String| ClientError::Tls { message };
        let mut tls = TlsConfig::builder().disable_verification(kc.insecure_skip_tls_verify);
        if let Some(pem) = &kc.ca_pem {
            let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(pem)
                .filter_map(|i| match i {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(tls_err(format!(
                    "{}: the certificate authority holds no PEM certificate",
                    kc.path.display()
                )));
            }
            tls = tls.root_certs(RootCerts::new_with_certs(&certs));
        }
        if let (Some(cert), Some(key)) = (&kc.client_cert_pem, &kc.client_key_pem) {
            let chain: Vec<Certificate<'static>> = ureq::tls::parse_pem(cert)
                .filter_map(|i| match i {
                    Ok(PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            let key: Option<PrivateKey<'static>> =
                ureq::tls::parse_pem(key).find_map(|i| match i {
                    Ok(PemItem::PrivateKey(k)) => Some(k),
                    _ => None,
                });
            let Some(key) = key.filter(|_| !chain.is_empty()) else {
                return Err(tls_err(format!(
                    "{}: the client certificate or key holds no PEM certificate or key",
                    kc.path.display()
                )));
            };
            tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        let agent: Agent = API_LIMITS
            .agent_config()
            .tls_config(tls.build())
            .user_agent(concat!("podvisor/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        let token = match (&kc.token, &kc.token_file) {
            (_, Some(p)) => Token::File(p.clone(), Mutex::new(None)),
            (Some(t), None) => Token::Fixed(t.clone()),
            (None, None) => Token::None,
        };
        let limiter = (qps > 0).then(|| {
            Arc::new(Mutex::new(TokenBucket {
                qps: f64::from(qps),
                burst: f64::from(burst.max(1)),
                tokens: f64::from(burst.max(1)),
                at: Instant::now(),
            }))
        });
        Ok(KubeClient {
            agent,
            server: kc.server.clone(),
            token: Arc::new(token),
            limiter,
            limits: API_LIMITS,
        })
    }

    /// This client without the rate limit and with `total` as every deadline (the
    /// kubelet's heartbeat client: lease and node status).
    pub fn heartbeat(&self, total: Duration) -> KubeClient {
        let total = total.max(Duration::from_secs(1));
        KubeClient {
            limiter: None,
            limits: Limits {
                connect: total.min(self.limits.connect),
                head: total,
                body: total,
                total,
                ..self.limits
            },
            ..self.clone()
        }
    }

    /// This client with other deadlines (tests).
    pub fn with_limits(&self, limits: Limits) -> KubeClient {
        KubeClient {
            limits,
            ..self.clone()
        }
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    fn bearer(&self) -> Result<Option<String>, ClientError> {
        match &*self.token {
            Token::None => Ok(None),
            Token::Fixed(t) => Ok(Some(t.clone())),
            Token::File(path, cache) => {
                let err = |message: String| ClientError::Token {
                    path: path.clone(),
                    message,
                };
                let mtime = std::fs::metadata(path)
                    .and_then(|m| m.modified())
                    .map_err(|e| err(e.to_string()))?;
                let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                if let Some((at, t)) = cache.as_ref() {
                    if *at == mtime {
                        return Ok(Some(t.clone()));
                    }
                }
                let t = std::fs::read_to_string(path)
                    .map_err(|e| err(e.to_string()))?
                    .trim()
                    .to_string();
                if t.is_empty() {
                    return Err(err("is empty".into()));
                }
                *cache = Some((mtime, t.clone()));
                Ok(Some(t))
            }
        }
    }

    fn wait_for_token(&self) {
        if let Some(l) = &self.limiter {
            let wait = l
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take(Instant::now());
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
        }
    }

    fn send(
        &self,
        method: &'static str,
        path: &str,
        body: Option<(&str, &Value)>,
        limits: &Limits,
    ) -> Result<ureq::http::Response<ureq::Body>, ClientError> {
        self.wait_for_token();
        // Writes ask for strict field validation: a field the server does not know is an
        // error, never silently dropped.
        let strict = match (method, path.contains('?')) {
            ("POST" | "PUT" | "PATCH", false) => "?fieldValidation=Strict",
            ("POST" | "PUT" | "PATCH", true) => "&fieldValidation=Strict",
            _ => "",
        };
        let url = format!("{}{path}{strict}", self.server);
        let auth = self.bearer()?.map(|t| format!("Bearer {t}"));
        let transport = |e: ureq::Error| ClientError::Transport {
            method,
            path: path.to_string(),
            source: limits.error(e),
        };
        let resp = match body {
            None => {
                let mut r = self.agent.get(&url).header("Accept", "application/json");
                if let Some(a) = &auth {
                    r = r.header("Authorization", a.as_str());
                }
                limits.request(r).call()
            }
            Some((content_type, v)) => {
                let bytes = serde_json::to_vec(v).map_err(|e| ClientError::Decode {
                    method,
                    path: path.to_string(),
                    message: e.to_string(),
                })?;
                let mut r = match method {
                    "POST" => self.agent.post(&url),
                    "PUT" => self.agent.put(&url),
                    "PATCH" => self.agent.patch(&url),
                    _ => self.agent.delete(&url).force_send_body(),
                }
                .header("Accept", "application/json")
                .header("Content-Type", content_type);
                if let Some(a) = &auth {
                    r = r.header("Authorization", a.as_str());
                }
                limits.request(r).send(&bytes[..])
            }
        }
        .map_err(transport)?;
        Ok(resp)
    }

    /// One request; 2xx answers are decoded, others become [`ClientError::Status`].
    pub fn request(
        &self,
        method: &'static str,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> Result<ApiResponse, ClientError> {
        let limits = self.limits;
        let mut resp = self.send(method, path, body, &limits)?;
        let status = resp.status().as_u16();
        let ra = retry_after(&resp);
        let bytes =
            read_body(resp.body_mut(), &limits).map_err(|source| ClientError::Transport {
                method,
                path: path.to_string(),
                source,
            })?;
        let value: Option<Value> = serde_json::from_slice(&bytes).ok();
        if (200..300).contains(&status) {
            let body = value.ok_or_else(|| ClientError::Decode {
                method,
                path: path.to_string(),
                message: format!("HTTP {status} with a body that is not JSON"),
            })?;
            return Ok(ApiResponse { status, body });
        }
        let field = |k: &str| {
            value
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let mut message = field("message");
        if message.is_empty() {
            message = String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).into_owned();
        }
        Err(ClientError::Status {
            method,
            path: path.to_string(),
            status,
            reason: field("reason"),
            message,
            retry_after: ra,
        })
    }

    pub fn get(&self, path: &str) -> Result<ApiResponse, ClientError> {
        self.request("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<ApiResponse, ClientError> {
        self.request("POST", path, Some(("application/json", body)))
    }

    pub fn put(&self, path: &str, body: &Value) -> Result<ApiResponse, ClientError> {
        self.request("PUT", path, Some(("application/json", body)))
    }

    /// A JSON merge patch (RFC 7386).
    pub fn merge_patch(&self, path: &str, body: &Value) -> Result<ApiResponse, ClientError> {
        self.request("PATCH", path, Some(("application/merge-patch+json", body)))
    }

    pub fn delete(&self, path: &str, body: &Value) -> Result<ApiResponse, ClientError> {
        self.request("DELETE", path, Some(("application/json", body)))
    }

    /// Opens a watch (`path` with `watch=1`): its events, one JSON object per line, read
    /// within `deadline`.
    pub fn watch(&self, path: &str, deadline: Duration) -> Result<WatchStream, ClientError> {
        let limits = Limits {
            max_body: u64::MAX,
            body: deadline,
            total: deadline + self.limits.head,
            ..self.limits
        };
        let resp = self.send("GET", path, None, &limits)?;
        let status = resp.status().as_u16();
        if !(200..300).contains(&status) {
            let ra = retry_after(&resp);
            return Err(ClientError::Status {
                method: "GET",
                path: path.to_string(),
                status,
                reason: String::new(),
                message: "watch refused".into(),
                retry_after: ra,
            });
        }
        Ok(WatchStream {
            reader: BufReader::new(resp.into_body().into_with_config().limit(u64::MAX).reader()),
            path: path.to_string(),
            limits,
        })
    }
}

/// The events of a watch.
pub struct WatchStream {
    reader: BufReader<ureq::BodyReader<'static>>,
    path: String,
    limits: Limits,
}

impl WatchStream {
    /// The next event; `Ok(None)` at the end of the stream (the server's timeout).
    pub fn next_event(&mut self) -> Result<Option<Value>, ClientError> {
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = (&mut self.reader)
                .take(MAX_WATCH_EVENT as u64 + 1)
                .read_until(b'\n', &mut line)
                .map_err(|e| ClientError::Transport {
                    method: "GET",
                    path: self.path.clone(),
                    source: self.limits.io_error(e),
                })?;
            if n == 0 {
                return Ok(None);
            }
            if line.len() > MAX_WATCH_EVENT {
                return Err(ClientError::Decode {
                    method: "GET",
                    path: self.path.clone(),
                    message: format!("a watch event larger than {MAX_WATCH_EVENT} bytes"),
                });
            }
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return serde_json::from_slice(&line)
                .map(Some)
                .map_err(|e| ClientError::Decode {
                    method: "GET",
                    path: self.path.clone(),
                    message: e.to_string(),
                });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_bucket_allows_bursts_then_paces() {
        let t0 = Instant::now();
        let mut b = TokenBucket {
            qps: 10.0,
            burst: 3.0,
            tokens: 3.0,
            at: t0,
        };
        for _ in 0..3 {
            assert_eq!(b.take(t0), Duration::ZERO);
        }
        let w = b.take(t0);
        assert!(
            w > Duration::from_millis(90) && w <= Duration::from_millis(100),
            "{w:?}"
        );
        // A second later the bucket is full again (capped at the burst).
        assert_eq!(b.take(t0 + Duration::from_secs(2)), Duration::ZERO);
    }

    #[test]
    fn error_classes() {
        let s = |status: u16, reason: &str| ClientError::Status {
            method: "GET",
            path: "/x".into(),
            status,
            reason: reason.into(),
            message: String::new(),
            retry_after: None,
        };
        assert!(s(409, "AlreadyExists").is_already_exists());
        assert!(!s(409, "Conflict").is_already_exists());
        assert!(s(409, "Conflict").is_conflict());
        assert!(s(429, "").is_unavailable() && s(503, "").is_unavailable());
        assert!(!s(403, "").is_unavailable() && s(403, "").is_refusal());
        assert!(s(422, "Invalid").is_refusal());
    }
}
