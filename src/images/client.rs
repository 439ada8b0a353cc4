//! The OCI distribution API client used by pulls, on ureq: one agent per host (TLS roots =
//! system bundle + the host's CA file, or verification off), anonymous/Basic/Bearer auth
//! driven by `WWW-Authenticate` challenges with tokens cached per (host, scope), retries with
//! backoff for transport errors and 429/5xx (honouring `Retry-After`), manifest fetches with
//! the four manifest/index media types, and blob downloads that are hashed while streaming
//! and resumed with `Range` requests into a partial file.

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
use super::pull::{PullError, What};
use super::registry::{
    base64_encode, Credentials, Endpoint, RegistryConfig, Scheme, SYSTEM_CA_BUNDLE,
};

pub const MT_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
/// Largest manifest or index accepted.
pub const MAX_MANIFEST: u64 = 4 << 20;
/// Accept header for manifest requests.
const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.index.v1+json, \
     application/vnd.oci.image.manifest.v1+json, \
     application/vnd.docker.distribution.manifest.list.v2+json, \
     application/vnd.docker.distribution.manifest.v2+json";

/// Time allowed for a blob body: this plus the remaining bytes at [`MIN_RATE`] bytes/s.
const BODY_TIMEOUT_BASE: Duration = Duration::from_secs(60);
const MIN_RATE: u64 = 16 << 10;

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
            agents: Mutex::new(HashMap::new()),
            auth: Mutex::new(HashMap::new()),
            cancel,
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
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(20)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
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

    /// GET `path` (below the endpoint's base) with auth, retries and backoff. Returns the
    /// response for 2xx and 416; other statuses become errors.
    fn get(
        &self,
        ep: &Endpoint,
        repo: &str,
        path: &str,
        headers: &[(&str, String)],
        body_timeout: Option<Duration>,
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
            if body_timeout.is_some() {
                req = req.config().timeout_recv_body(body_timeout).build();
            }
            let resp = match req.call() {
                Ok(r) => r,
                Err(e) => {
                    attempt += 1;
                    if attempt >= self.retry.attempts {
                        return Err(self.transport(ep, what, e.to_string(), attempt));
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

    fn transport(&self, ep: &Endpoint, what: &What, detail: String, attempts: u32) -> PullError {
        PullError::Transport {
            reference: self.reference.clone(),
            registry: ep.to_string(),
            what: what.clone(),
            detail,
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
        let token_err = |detail: String| PullError::Token {
            reference: self.reference.clone(),
            realm: realm.to_string(),
            detail,
        };
        let realm_ep = Endpoint::parse(realm).map_err(|e| token_err(format!("bad realm: {e}")))?;
        if realm_ep.scheme == Scheme::Http && ep.scheme == Scheme::Https {
            return Err(token_err(
                "refusing a plain http token realm for an https registry".to_string(),
            ));
        }
        if !realm.starts_with("http://") && !realm.starts_with("https://") {
            return Err(token_err("realm is not an http(s) url".to_string()));
        }
        let agent = self.agent(&realm_ep.host)?;
        let mut attempt = 0u32;
        loop {
            self.check_cancel()?;
            let mut req = agent.get(realm).query("scope", scope);
            if let Some(s) = service {
                req = req.query("service", s);
            }
            if let Some(c) = creds {
                req = req.header("Authorization", basic(c));
            }
            let mut resp = match req.call() {
                Ok(r) => r,
                Err(e) => {
                    attempt += 1;
                    if attempt >= self.retry.attempts {
                        return Err(token_err(e.to_string()));
                    }
                    self.sleep(attempt, None)?;
                    continue;
                }
            };
            let status = resp.status().as_u16();
            if matches!(status, 429 | 500 | 502 | 503 | 504) && attempt + 1 < self.retry.attempts {
                attempt += 1;
                self.sleep(attempt, None)?;
                continue;
            }
            if status != 200 {
                return Err(token_err(format!("HTTP {status}")));
            }
            let body = resp
                .body_mut()
                .with_config()
                .limit(1 << 20)
                .read_to_vec()
                .map_err(|e| token_err(e.to_string()))?;
            let t: TokenResponse =
                serde_json::from_slice(&body).map_err(|e| token_err(e.to_string()))?;
            return t
                .token
                .or(t.access_token)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| token_err("response holds no token".to_string()));
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
                Some(BODY_TIMEOUT_BASE),
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
            let body = match resp
                .body_mut()
                .with_config()
                .limit(MAX_MANIFEST)
                .read_to_vec()
            {
                Ok(b) => b,
                Err(ureq::Error::BodyExceedsLimit(_)) => {
                    return Err(PullError::TooLarge {
                        reference: self.reference.clone(),
                        what,
                        limit: MAX_MANIFEST,
                    })
                }
                Err(e) => {
                    attempt += 1;
                    if attempt >= self.retry.attempts {
                        return Err(self.transport(ep, &what, e.to_string(), attempt));
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
            let body_timeout = BODY_TIMEOUT_BASE + Duration::from_secs((size - have) / MIN_RATE);
            let resp = self.get(
                ep,
                repo,
                &format!("blobs/{digest}"),
                &headers,
                Some(body_timeout),
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
                        return Err(self.transport(
                            ep,
                            &what,
                            "range not satisfiable".to_string(),
                            attempt,
                        ));
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
            let mut body = resp.into_body().into_reader();
            let interrupted = loop {
                self.check_cancel()?;
                let n = match body.read(&mut buf) {
                    Ok(0) => break None,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => break Some(e.to_string()),
                };
                if have + n as u64 > size {
                    drop(file);
                    let _ = fs::remove_file(&partial);
                    return Err(PullError::SizeMismatch {
                        reference: self.reference.clone(),
                        digest: digest.clone(),
                        expected: size,
                        got: have + n as u64,
                    });
                }
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
        if size > MAX_MANIFEST * 4 {
            return Err(PullError::TooLarge {
                reference: self.reference.clone(),
                what,
                limit: MAX_MANIFEST * 4,
            });
        }
        let mut attempt = 0u32;
        loop {
            let mut resp = self.get(
                ep,
                repo,
                &format!("blobs/{digest}"),
                &[],
                Some(BODY_TIMEOUT_BASE),
                &what,
            )?;
            match resp.body_mut().with_config().limit(size + 1).read_to_vec() {
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
                Ok(b) if (b.len() as u64) > size => {
                    return Err(PullError::SizeMismatch {
                        reference: self.reference.clone(),
                        digest: digest.clone(),
                        expected: size,
                        got: b.len() as u64,
                    })
                }
                Err(ureq::Error::BodyExceedsLimit(_)) => {
                    return Err(PullError::SizeMismatch {
                        reference: self.reference.clone(),
                        digest: digest.clone(),
                        expected: size,
                        got: size + 1,
                    })
                }
                short => {
                    attempt += 1;
                    let (got, detail) = match short {
                        Ok(b) => (b.len() as u64, "truncated".to_string()),
                        Err(e) => (0, e.to_string()),
                    };
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
    }
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
