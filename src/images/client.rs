//! The OCI distribution API client used by pulls, on ureq: one agent per host (TLS roots =
//! system bundle + the host's CA file, or verification off), anonymous/Basic/Bearer auth
//! driven by `WWW-Authenticate` challenges with tokens cached per (host, scope), retries with
//! backoff for transport errors and 429/5xx (honouring `Retry-After`), manifest fetches with
//! the four manifest/index media types, and blob downloads that are hashed while streaming
//! and resumed with `Range` requests into a partial file.
//!
//! Every request and body read goes through [`crate::httpclient`] with [`REGISTRY_LIMITS`]:
//! manifests and indexes at most [`MAX_MANIFEST`] bytes, tokens [`MAX_TOKEN`], an image
//! config and a blob no more than their descriptor's size, all counted after decompression;
//! response heads 64 KiB; 10 redirects; deadlines for connecting, the response head, the body
//! (for a blob, growing with its size at [`MIN_RATE`]) and each whole request. A body too
//! large, a head too large or a redirect loop fails the pull at once; timeouts and transport
//! errors are retried.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use ureq::http::{Response, StatusCode};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};
use ureq::{Agent, Body};

use super::digest::Digest;
use super::pull::{PullError, TokenError, What};
use super::registry::{
    base64_encode, Credentials, Endpoint, RegistryConfig, Scheme, SYSTEM_CA_BUNDLE,
};
use crate::httpclient::{self, read_body, HttpError, Limits};

pub const MT_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Largest manifest or index accepted.
pub const MAX_MANIFEST: u64 = 4 << 20;
/// Largest token response accepted.
pub const MAX_TOKEN: u64 = 1 << 20;
/// Largest image config accepted.
pub const MAX_CONFIG: u64 = 4 * MAX_MANIFEST;
/// The limits of manifest, index and token requests; image configs and blobs derive theirs
/// (their size, and for blobs a body deadline that grows with it).
pub const REGISTRY_LIMITS: Limits = Limits {
    max_body: MAX_MANIFEST,
    max_head: 64 << 10,
    max_redirects: 10,
    connect: Duration::from_secs(20),
    head: Duration::from_secs(60),
    body: Duration::from_secs(60),
    total: Duration::from_secs(180),
};
/// Accept header for manifest requests.
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// The slowest blob download accepted, in bytes/s: a blob's body deadline is the limits'
/// `body` plus its remaining bytes at this rate.
pub const MIN_RATE: u64 = 16 << 10;

/// Retry policy inside one pull.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts per request (transport errors, 429, 5xx, interrupted bodies).
    pub attempts: u32,
    /// First backoff; doubles per attempt up to `max_delay`.
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.max_delay);
        match retry_after {
            Some(ra) => ra.min(self.max_delay.saturating_mul(3)),
            None => exp,
        }
    }
}

/// A downloaded manifest or index.
#[derive(Debug, Clone)]
pub struct FetchedManifest {
    pub bytes: Vec<u8>,
    pub digest: Digest,
    /// From the document's `mediaType`, else the Content-Type header.
    pub media_type: Option<String>,
}

/// Progress of one blob download, sent to the pulling thread.
pub type ProgressFn<'a> = &'a (dyn Fn(u64) + Sync);

/// A registry client for one pull (one reference).
pub struct Client<'a> {
    cfg: &'a RegistryConfig,
    reference: String,
    retry: RetryPolicy,
    limits: Limits,
    agents: Mutex<HashMap<String, Agent>>,
    /// Authorization header values per (host, scope).
    auth: Mutex<HashMap<(String, String), String>>,
    cancel: Arc<AtomicBool>,
}

#[derive(Deserialize)]
struct TokenResponse {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// A parsed `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses `Bearer realm="..",service="..",scope=".."` or `Basic realm=".."`.
pub fn parse_challenge(h: &str) -> Option<Challenge> {
    let h = h.trim();
    let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params: HashMap<String, String> = HashMap::new();
    let mut s = rest.trim();
    while !s.is_empty() {
        let (key, after) = s.split_once('=')?;
        let key = key.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, rest) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (&q[..end], &q[end + 1..])
        } else {
            match after.find(',') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            }
        };
        params.insert(key, value.to_string());
        s = rest.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge::Bearer {
        realm: params.remove("realm")?,
        service: params.remove("service"),
        scope: params.remove("scope"),
    })
}

fn load_roots(ca_file: Option<&Path>) -> Result<RootCerts, String> {
    let mut certs: Vec<Certificate<'static>> = Vec::new();
    let system = fs::read(SYSTEM_CA_BUNDLE).ok();
    let extra = match ca_file {
        Some(p) => Some(fs::read(p).map_err(|e| format!("reading ca_file {}: {e}", p.display()))?),
        None => None,
    };
    if system.is_none() && extra.is_none() {
        return Ok(RootCerts::WebPki);
    }
    for pem in system.iter().chain(extra.iter()) {
        for item in ureq::tls::parse_pem(pem) {
            if let Ok(PemItem::Certificate(c)) = item {
                certs.push(c);
            }
        }
    }
    if let (Some(p), Some(data)) = (ca_file, &extra) {
        if !ureq::tls::parse_pem(data).any(|i| matches!(i, Ok(PemItem::Certificate(_)))) {
            return Err(format!("ca_file {} holds no PEM certificate", p.display()));
        }
    }
    Ok(RootCerts::new_with_certs(&certs))
}

impl<'a> Client<'a> {
    pub fn new(
        cfg: &'a RegistryConfig,
        reference: &str,
        retry: RetryPolicy,
        cancel: Arc<AtomicBool>,
    ) -> Client<'a> {
        Client {
            cfg,
            reference: reference.to_string(),
            retry,
            limits: REGISTRY_LIMITS,
            agents: Mutex::new(HashMap::new()),
            auth: Mutex::new(HashMap::new()),
            cancel,
        }
    }

    /// This client with other limits than [`REGISTRY_LIMITS`] (short deadlines for tests).
    #[cfg(test)]
    pub fn with_limits(mut self, limits: Limits) -> Client<'a> {
        self.limits = limits;
        self
    }

    /// The limits of a blob download with `remaining` of its bytes still to come.
    fn blob_limits(&self, remaining: u64) -> Limits {
        let body = self.limits.body + Duration::from_secs(remaining / MIN_RATE);
        Limits {
            max_body: remaining,
            body,
            total: self.limits.connect + self.limits.head + body,
            ..self.limits
        }
    }

    fn agent(&self, host: &str) -> Result<Agent, PullError> {
        let mut agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = agents.get(host) {
            return Ok(a.clone());
        }
        let tls = self.cfg.tls(host);
        let roots = load_roots(tls.ca_file.as_deref()).map_err(|detail| PullError::Tls {
            reference: self.reference.clone(),
            host: host.to_string(),
            detail,
        })?;
        let agent: Agent = self
            .limits
            .agent_config()
            .redirect_auth_headers(ureq::config::RedirectAuthHeaders::SameHost)
            .tls_config(
                TlsConfig::builder()
                    .root_certs(roots)
                    .disable_verification(tls.insecure_skip_verify)
                    .build(),
            )
            .build()
            .new_agent();
        agents.insert(host.to_string(), agent.clone());
        Ok(agent)
    }

    fn sleep(&self, attempt: u32, retry_after: Option<Duration>) -> Result<(), PullError> {
        let d = self.retry.delay(attempt, retry_after);
        let step = Duration::from_millis(50);
        let mut slept = Duration::ZERO;
        while slept < d {
            self.check_cancel()?;
            std::thread::sleep(step.min(d - slept));
            slept += step;
        }
        Ok(())
    }

    pub fn check_cancel(&self) -> Result<(), PullError> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(PullError::Cancelled {
                reference: self.reference.clone(),
            });
        }
        Ok(())
    }

    /// GET `path` (below the endpoint's base) with auth, retries and backoff, within
    /// `limits`. Returns the response for 2xx and 416; other statuses become errors.
    fn get(
        &self,
        ep: &Endpoint,
        repo: &str,
        path: &str,
        headers: &[(&str, String)],
        limits: &Limits,
        what: &What,
    ) -> Result<Response<Body>, PullError> {
        let url = format!("{}{}/{repo}/{path}", ep.origin(), ep.base);
        let scope = format!("repository:{repo}:pull");
        let key = (ep.host.clone(), scope.clone());
        let agent = self.agent(&ep.host)?;
        let mut attempt = 0u32;
        let mut authed = false;
        loop {
            self.check_cancel()?;
            let mut req = agent.get(&url);
            for (k, v) in headers {
                req = req.header(*k, v.as_str());
            }
            let cached = self
                .auth
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&key)
                .cloned();
            if let Some(a) = &cached {
                req = req.header("Authorization", a.as_str());
            }
            let resp = match limits.request(req).call() {
                Ok(r) => r,
                Err(e) => {
                    let e = limits.error(e);
                    attempt += 1;
                    if !retryable(&e) || attempt >= self.retry.attempts {
                        return Err(self.transport(ep, what, e, attempt));
                    }
                    log::debug!("GET {url}: {e}; retrying");
                    self.sleep(attempt, None)?;
                    continue;
                }
            };
            let status = resp.status();
            if status.is_success() || status == StatusCode::RANGE_NOT_SATISFIABLE {
                return Ok(resp);
            }
            match status.as_u16() {
                401 if !authed => {
                    authed = true;
                    let challenge = resp
                        .headers()
                        .get("www-authenticate")
                        .and_then(|v| v.to_str().ok())
                        .and_then(parse_challenge);
                    let header = self.authorize(ep, challenge, &scope, what)?;
                    self.auth
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(key.clone(), header);
                }
                401 | 403 => {
                    return Err(PullError::Unauthorized {
                        reference: self.reference.clone(),
                        registry: ep.to_string(),
                        what: what.clone(),
                        status: status.as_u16(),
                    })
                }
                404 => {
                    return Err(PullError::NotFound {
                        reference: self.reference.clone(),
                        registry: ep.to_string(),
                        what: what.clone(),
                    })
                }
                429 | 500 | 502 | 503 | 504 => {
                    attempt += 1;
                    if attempt >= self.retry.attempts {
                        return Err(PullError::Status {
                            reference: self.reference.clone(),
                            registry: ep.to_string(),
                            what: what.clone(),
                            status: status.as_u16(),
                            attempts: attempt,
                        });
                    }
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    log::debug!("GET {url}: HTTP {status}; retrying");
                    self.sleep(attempt, retry_after)?;
                }
                other => {
                    return Err(PullError::Status {
                        reference: self.reference.clone(),
                        registry: ep.to_string(),
                        what: what.clone(),
                        status: other,
                        attempts: attempt + 1,
                    })
                }
            }
        }
    }

    fn transport(&self, ep: &Endpoint, what: &What, source: HttpError, attempts: u32) -> PullError {
        PullError::Transport {
            reference: self.reference.clone(),
            registry: ep.to_string(),
            what: what.clone(),
            source,
            attempts,
        }
    }

    /// Answers a 401 challenge: the Authorization header value to use from now on.
    fn authorize(
        &self,
        ep: &Endpoint,
        challenge: Option<Challenge>,
        scope: &str,
        what: &What,
    ) -> Result<String, PullError> {
        let creds = self.cfg.credentials(&ep.host);
        let unauthorized = || PullError::Unauthorized {
            reference: self.reference.clone(),
            registry: ep.to_string(),
            what: what.clone(),
            status: 401,
        };
        match challenge {
            Some(Challenge::Basic) => creds.map(basic).ok_or_else(unauthorized),
            Some(Challenge::Bearer {
                realm,
                service,
                scope: challenge_scope,
            }) => {
                let token = self.fetch_token(
                    ep,
                    &realm,
                    service.as_deref(),
                    challenge_scope.as_deref().unwrap_or(scope),
                    creds,
                )?;
                Ok(format!("Bearer {token}"))
            }
            None => Err(unauthorized()),
        }
    }

    fn fetch_token(
        &self,
        ep: &Endpoint,
        realm: &str,
        service: Option<&str>,
        scope: &str,
        creds: Option<&Credentials>,
    ) -> Result<String, PullError> {
        let token_err = |source: TokenError| PullError::Token {
            reference: self.reference.clone(),
            realm: realm.to_string(),
            source,
        };
        let realm_ep = Endpoint::parse(realm).map_err(|e| token_err(TokenError::BadRealm(e)))?;
        if realm_ep.scheme == Scheme::Http && ep.scheme == Scheme::Https {
            return Err(token_err(TokenError::InsecureRealm));
        }
        if !realm.starts_with("http://") && !realm.starts_with("https://") {
            return Err(token_err(TokenError::BadRealm(
                "not an http(s) url".to_string(),
            )));
        }
        let limits = Limits {
            max_body: MAX_TOKEN,
            ..self.limits
        };
        let agent = self.agent(&realm_ep.host)?;
        let mut attempt = 0u32;
        loop {
            self.check_cancel()?;
            attempt += 1;
            let mut req = agent.get(realm).query("scope", scope);
            if let Some(s) = service {
                req = req.query("service", s);
            }
            if let Some(c) = creds {
                req = req.header("Authorization", basic(c));
            }
            let body = match limits.request(req).call() {
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    if matches!(status, 429 | 500 | 502 | 503 | 504)
                        && attempt < self.retry.attempts
                    {
                        self.sleep(attempt, None)?;
                        continue;
                    }
                    if status != 200 {
                        return Err(token_err(TokenError::Status(status)));
                    }
                    read_body(resp.body_mut(), &limits)
                }
                Err(e) => Err(limits.error(e)),
            };
            let body = match body {
                Ok(body) => body,
                Err(e) if retryable(&e) && attempt < self.retry.attempts => {
                    log::debug!("token from {realm}: {e}; retrying");
                    self.sleep(attempt, None)?;
                    continue;
                }
                Err(source) => {
                    return Err(token_err(TokenError::Http {
                        source,
                        attempts: attempt,
                    }))
                }
            };
            let t: TokenResponse = serde_json::from_slice(&body)
                .map_err(|e| token_err(TokenError::Json(e.to_string())))?;
            return t
                .token
                .or(t.access_token)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| token_err(TokenError::NoToken));
        }
    }

    /// Fetches a manifest or index by tag or digest; verifies the digest when known.
    pub fn manifest(
        &self,
        ep: &Endpoint,
        repo: &str,
        tag_or_digest: &str,
        expected: Option<&Digest>,
    ) -> Result<FetchedManifest, PullError> {
        let what = match expected {
            Some(d) => What::Manifest(d.to_string()),
            None => What::Manifest(tag_or_digest.to_string()),
        };
        let mut attempt = 0u32;
        loop {
            let mut resp = self.get(
                ep,
                repo,
                &format!("manifests/{tag_or_digest}"),
                &[("Accept", ACCEPT_MANIFESTS.to_string())],
                &self.limits,
                &what,
            )?;
            let content_type = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .map(|v| v.split(';').next().unwrap_or(v).trim().to_string());
            let header_digest = resp
                .headers()
                .get("docker-content-digest")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| Digest::parse(v).ok());
            let body = match read_body(resp.body_mut(), &self.limits) {
                Ok(b) => b,
                Err(HttpError::BodyTooLarge { limit }) => {
                    return Err(PullError::TooLarge {
                        reference: self.reference.clone(),
                        what,
                        limit,
                    })
                }
                Err(e) => {
                    attempt += 1;
                    if !retryable(&e) || attempt >= self.retry.attempts {
                        return Err(self.transport(ep, &what, e, attempt));
                    }
                    self.sleep(attempt, None)?;
                    continue;
                }
            };
            let digest = Digest::of(&body);
            if let Some(exp) = expected.or(header_digest.as_ref()) {
                if exp != &digest {
                    return Err(PullError::DigestMismatch {
                        reference: self.reference.clone(),
                        digest: exp.clone(),
                        actual: digest,
                    });
                }
            }
            #[derive(Deserialize)]
            struct MediaTypeOnly {
                #[serde(default, rename = "mediaType")]
                media_type: Option<String>,
            }
            let doc_mt = serde_json::from_slice::<MediaTypeOnly>(&body)
                .ok()
                .and_then(|m| m.media_type);
            // A generic content type says nothing; a specific one names the document type.
            let media_type = doc_mt.or(content_type.filter(|ct| {
                !matches!(
                    ct.as_str(),
                    "" | "application/json" | "text/plain" | "application/octet-stream"
                )
            }));
            return Ok(FetchedManifest {
                bytes: body,
                digest,
                media_type,
            });
        }
    }

    /// Downloads blob `digest` of `size` bytes into `dir/<hex>`, resuming from
    /// `dir/<hex>.partial`; returns the path of the complete, verified file. Concurrent
    /// downloads of the same blob (two processes) serialize on a flock of the partial file.
    pub fn blob_to_file(
        &self,
        ep: &Endpoint,
        repo: &str,
        digest: &Digest,
        size: u64,
        dir: &Path,
        progress: ProgressFn<'_>,
    ) -> Result<PathBuf, PullError> {
        let done = dir.join(digest.hex());
        let partial = dir.join(format!("{}.partial", digest.hex()));
        let what = What::Blob(digest.to_string());
        let write_err = |path: &Path, source: io::Error| PullError::Write {
            reference: self.reference.clone(),
            digest: digest.to_string(),
            path: path.to_path_buf(),
            source,
        };
        // Open and lock the partial file; if another download renamed it meanwhile, the
        // lock is on a file no longer at that path: open again.
        let mut file = loop {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&partial)
                .map_err(|e| write_err(&partial, e))?;
            flock(&file).map_err(|e| write_err(&partial, e))?;
            if done.is_file() {
                progress(size);
                return Ok(done);
            }
            let ours = file.metadata().map_err(|e| write_err(&partial, e))?.ino();
            match fs::metadata(&partial) {
                Ok(m) if m.ino() == ours => break file,
                _ => continue,
            }
        };
        // Hash what an interrupted download left.
        let mut hasher = Sha256::new();
        let mut have = 0u64;
        {
            let mut buf = vec![0u8; 256 << 10];
            file.seek(SeekFrom::Start(0))
                .map_err(|e| write_err(&partial, e))?;
            loop {
                let n = file.read(&mut buf).map_err(|e| write_err(&partial, e))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                have += n as u64;
            }
        }
        if have > size {
            restart(&mut file, &mut hasher, &mut have).map_err(|e| write_err(&partial, e))?;
        } else if have > 0 {
            log::info!(
                "pull {}: resuming blob {digest} at {have} of {size} bytes",
                self.reference
            );
        }
        progress(have);
        let mut attempt = 0u32;
        let mut buf = vec![0u8; 256 << 10];
        while have < size {
            let mut headers = vec![("Accept-Encoding", "identity".to_string())];
            if have > 0 {
                headers.push(("Range", format!("bytes={have}-")));
            }
            // A stalled connection ends (and is resumed) instead of hanging the pull.
            let limits = self.blob_limits(size - have);
            let resp = self.get(
                ep,
                repo,
                &format!("blobs/{digest}"),
                &headers,
                &limits,
                &what,
            )?;
            match resp.status().as_u16() {
                206 => {
                    let start = resp
                        .headers()
                        .get("content-range")
                        .and_then(|v| v.to_str().ok())
                        .and_then(content_range_start);
                    if start != Some(have) {
                        // Not the range asked for: start over.
                        restart(&mut file, &mut hasher, &mut have)
                            .map_err(|e| write_err(&partial, e))?;
                        progress(0);
                        continue;
                    }
                }
                416 => {
                    attempt += 1;
                    if attempt >= self.retry.attempts {
                        return Err(PullError::Status {
                            reference: self.reference.clone(),
                            registry: ep.to_string(),
                            what,
                            status: 416,
                            attempts: attempt,
                        });
                    }
                    restart(&mut file, &mut hasher, &mut have)
                        .map_err(|e| write_err(&partial, e))?;
                    progress(0);
                    continue;
                }
                _ => {
                    if have > 0 {
                        restart(&mut file, &mut hasher, &mut have)
                            .map_err(|e| write_err(&partial, e))?;
                        progress(0);
                    }
                }
            }
            file.seek(SeekFrom::Start(have))
                .map_err(|e| write_err(&partial, e))?;
            // Decoded bytes beyond the blob's size are an error, not a longer download.
            let mut body = httpclient::body_reader(resp.into_body(), size - have);
            let interrupted = loop {
                self.check_cancel()?;
                let n = match body.read(&mut buf) {
                    Ok(0) => break None,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => match limits.io_error(e) {
                        HttpError::BodyTooLarge { .. } => {
                            drop(file);
                            let _ = fs::remove_file(&partial);
                            return Err(PullError::SizeMismatch {
                                reference: self.reference.clone(),
                                digest: digest.clone(),
                                expected: size,
                            });
                        }
                        e => break Some(e.to_string()),
                    },
                };
                if let Err(e) = file.write_all(&buf[..n]) {
                    drop(file);
                    // A full disk is not kept full by a partial download.
                    let _ = fs::remove_file(&partial);
                    return Err(write_err(&partial, e));
                }
                hasher.update(&buf[..n]);
                have += n as u64;
                progress(have);
            };
            if have < size {
                attempt += 1;
                let detail = interrupted.unwrap_or_else(|| {
                    format!("connection closed after {have} of {size} bytes (truncated)")
                });
                if attempt >= self.retry.attempts {
                    return Err(PullError::Truncated {
                        reference: self.reference.clone(),
                        registry: ep.to_string(),
                        digest: digest.clone(),
                        expected: size,
                        got: have,
                        detail,
                    });
                }
                log::info!(
                    "pull {}: blob {digest} interrupted at {have} of {size} bytes ({detail}); resuming",
                    self.reference
                );
                self.sleep(attempt, None)?;
            }
        }
        let actual = Digest::from_hex(&hex::encode(hasher.finalize())).ok_or_else(|| {
            write_err(
                &partial,
                io::Error::new(io::ErrorKind::InvalidData, "hash encoding"),
            )
        })?;
        if &actual != digest {
            drop(file);
            let _ = fs::remove_file(&partial);
            return Err(PullError::DigestMismatch {
                reference: self.reference.clone(),
                digest: digest.clone(),
                actual,
            });
        }
        file.sync_all().map_err(|e| write_err(&partial, e))?;
        fs::rename(&partial, &done).map_err(|e| write_err(&done, e))?;
        Ok(done)
    }

    /// Downloads a small blob (the image config) into memory and verifies it.
    pub fn blob_bytes(
        &self,
        ep: &Endpoint,
        repo: &str,
        digest: &Digest,
        size: u64,
    ) -> Result<Vec<u8>, PullError> {
        let what = What::Blob(digest.to_string());
        if size > MAX_CONFIG {
            return Err(PullError::TooLarge {
                reference: self.reference.clone(),
                what,
                limit: MAX_CONFIG,
            });
        }
        let limits = Limits {
            max_body: size,
            ..self.limits
        };
        let mut attempt = 0u32;
        loop {
            let mut resp = self.get(ep, repo, &format!("blobs/{digest}"), &[], &limits, &what)?;
            let (got, detail) = match read_body(resp.body_mut(), &limits) {
                Ok(b) if b.len() as u64 == size => {
                    let actual = Digest::of(&b);
                    if &actual != digest {
                        return Err(PullError::DigestMismatch {
                            reference: self.reference.clone(),
                            digest: digest.clone(),
                            actual,
                        });
                    }
                    return Ok(b);
                }
                Err(HttpError::BodyTooLarge { .. }) => {
                    return Err(PullError::SizeMismatch {
                        reference: self.reference.clone(),
                        digest: digest.clone(),
                        expected: size,
                    })
                }
                Err(e) if !retryable(&e) => {
                    return Err(self.transport(ep, &what, e, attempt + 1));
                }
                Ok(b) => (b.len() as u64, "truncated".to_string()),
                Err(e) => (0, e.to_string()),
            };
            attempt += 1;
            if attempt >= self.retry.attempts {
                return Err(PullError::Truncated {
                    reference: self.reference.clone(),
                    registry: ep.to_string(),
                    digest: digest.clone(),
                    expected: size,
                    got,
                    detail,
                });
            }
            self.sleep(attempt, None)?;
        }
    }
}

/// Whether a failed request may succeed when tried again: timeouts and transport errors may;
/// a body or head over its limit and a redirect loop are what the server sends, every time.
fn retryable(e: &HttpError) -> bool {
    matches!(e, HttpError::Timeout { .. } | HttpError::Transport { .. })
}

fn basic(c: &Credentials) -> String {
    format!(
        "Basic {}",
        base64_encode(format!("{}:{}", c.username, c.password).as_bytes())
    )
}

/// `bytes 100-199/200` -> 100.
fn content_range_start(v: &str) -> Option<u64> {
    let r = v.trim().strip_prefix("bytes")?.trim_start();
    r.split('-').next()?.trim().parse().ok()
}

fn restart(file: &mut File, hasher: &mut Sha256, have: &mut u64) -> io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    *hasher = Sha256::new();
    *have = 0;
    Ok(())
}

/// Exclusive flock, released when the file is closed.
fn flock(f: &File) -> io::Result<()> {
    loop {
        // SAFETY: valid fd owned by `f`.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::httpclient::hostile::{self, Hostile};
    use crate::httpclient::Phase;
    use std::sync::OnceLock;

    /// The hostile behaviours, by the name their request paths end in.
    const BEHAVIOURS: [&str; 6] = [
        "bomb",
        "endless",
        "slow-head",
        "trickle",
        "huge-head",
        "loop",
    ];

    fn behaviour(name: &str) -> Hostile {
        match name {
            "bomb" => Hostile::GzipBomb,
            "endless" => Hostile::EndlessBody,
            "slow-head" => Hostile::SlowHead,
            "trickle" => Hostile::TrickleBody,
            "huge-head" => Hostile::HugeHead,
            _ => Hostile::RedirectLoop,
        }
    }

    /// The blob digest standing for behaviour `name`.
    fn blob_of(name: &str) -> Digest {
        Digest::of(name.as_bytes())
    }

    const TEST_LIMITS: Limits = Limits {
        head: Duration::from_millis(700),
        body: Duration::from_millis(700),
        total: Duration::from_secs(20),
        ..REGISTRY_LIMITS
    };

    /// Runs in a child process (see `hostile_registries_end_in_named_errors_with_bounded_memory`):
    /// manifests, tokens, an image config and a layer blob from each hostile behaviour.
    fn hostile_child(base: &str) {
        let cfg = RegistryConfig::default();
        let ep = Endpoint::parse(base).expect("endpoint");
        let retry = RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        };
        let client = Client::new(
            &cfg,
            "hostile/app:v1",
            retry,
            Arc::new(AtomicBool::new(false)),
        )
        .with_limits(TEST_LIMITS);
        let dir = tempfile::tempdir().expect("tempdir");
        let timeout = |phase| HttpError::Timeout {
            phase,
            after: Duration::from_millis(700),
        };
        // What each behaviour becomes where an HTTP error is expected.
        let http = |name: &str| match name {
            "slow-head" => timeout(Phase::Head),
            "trickle" => timeout(Phase::Body),
            "huge-head" => HttpError::HeadTooLarge { limit: 64 << 10 },
            _ => HttpError::TooManyRedirects { max: 10 },
        };
        for name in BEHAVIOURS {
            let body_too_large = matches!(name, "bomb" | "endless");
            match client.manifest(&ep, "r/app", name, None) {
                Err(PullError::TooLarge { limit, .. }) if body_too_large => {
                    assert_eq!(limit, MAX_MANIFEST)
                }
                Err(PullError::Transport { source, .. }) if !body_too_large => {
                    assert_eq!(source, http(name), "manifest {name}")
                }
                other => panic!("manifest {name}: {other:?}"),
            }
            match client.manifest(&ep, "r/app", &format!("tok-{name}"), None) {
                Err(PullError::Token {
                    source: TokenError::Http { source, .. },
                    ..
                }) => {
                    let want = if body_too_large {
                        HttpError::BodyTooLarge { limit: MAX_TOKEN }
                    } else {
                        http(name)
                    };
                    assert_eq!(source, want, "token {name}");
                }
                other => panic!("token {name}: {other:?}"),
            }
            let blob = blob_of(name);
            let config = client.blob_bytes(&ep, "r/app", &blob, 1000);
            let layer = client.blob_to_file(&ep, "r/app", &blob, 1000, dir.path(), &|_| {});
            for (what, r) in [("config", config.map(|_| ())), ("layer", layer.map(|_| ()))] {
                match r {
                    Err(PullError::SizeMismatch { expected, .. }) if body_too_large => {
                        assert_eq!(expected, 1000)
                    }
                    Err(PullError::Truncated { detail, .. }) if name == "trickle" => {
                        assert!(detail.contains("timed out"), "{what} {name}: {detail}")
                    }
                    Err(PullError::Transport { source, .. }) if !body_too_large => {
                        assert_eq!(source, http(name), "{what} {name}")
                    }
                    other => panic!("{what} {name}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn hostile_registries_end_in_named_errors_with_bounded_memory() {
        if let Some(base) = hostile::child_url() {
            hostile_child(&base);
            return hostile::report_peak_rss();
        }
        let authority: Arc<OnceLock<String>> = Arc::default();
        let auth = Arc::clone(&authority);
        let server = hostile::Server::start(move |path| {
            let last = path.split('?').next().unwrap_or(path);
            let last = last.rsplit('/').next().unwrap_or(last);
            if let Some(name) = last.strip_prefix("tok-") {
                let realm = format!("http://{}/token/{name}", auth.get().expect("set"));
                return Hostile::Reply {
                    status: 401,
                    headers: vec![(
                        "WWW-Authenticate".into(),
                        format!("Bearer realm=\"{realm}\",service=\"hostile\""),
                    )],
                    body: Vec::new(),
                };
            }
            let name = BEHAVIOURS
                .into_iter()
                .find(|n| *n == last || last == format!("{}", blob_of(n)))
                .unwrap_or("loop");
            behaviour(name)
        });
        authority.set(server.authority()).expect("once");
        hostile::assert_child_memory_bounded(
            module_path!(),
            "hostile_registries_end_in_named_errors_with_bounded_memory",
            &server.url(""),
            "registry client",
            MAX_MANIFEST,
        );
    }

    #[test]
    fn challenges() {
        assert_eq!(
            parse_challenge(
                r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#
            ),
            Some(Challenge::Bearer {
                realm: "https://auth.docker.io/token".to_string(),
                service: Some("registry.docker.io".to_string()),
                scope: Some("repository:library/busybox:pull".to_string()),
            })
        );
        assert_eq!(
            parse_challenge(r#"Basic realm="Registry Realm""#),
            Some(Challenge::Basic)
        );
        assert_eq!(
            parse_challenge("bearer realm=http://x/t, service=svc"),
            Some(Challenge::Bearer {
                realm: "http://x/t".to_string(),
                service: Some("svc".to_string()),
                scope: None,
            })
        );
        assert_eq!(parse_challenge("Bearer service=\"x\""), None);
        assert_eq!(parse_challenge("Negotiate abc"), None);
    }

    #[test]
    fn content_range_and_backoff() {
        assert_eq!(content_range_start("bytes 100-199/200"), Some(100));
        assert_eq!(content_range_start("items 1-2/3"), None);
        let p = RetryPolicy::default();
        assert_eq!(p.delay(1, None), Duration::from_millis(500));
        assert_eq!(p.delay(10, None), Duration::from_secs(10));
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(30)
        );
    }
}
