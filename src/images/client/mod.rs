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
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use ureq::http::{Response, StatusCode};
use ureq::tls::TlsConfig;
use ureq::{Agent, Body};

use super::digest::Digest;
use super::registry::{Endpoint, RegistryConfig};
use crate::httpclient::{read_body, HttpError, Limits};

pub use self::auth::{parse_challenge, Challenge, TokenError};

/// What a request was for, in error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum What {
    Manifest(String),
    Blob(String),
}

impl fmt::Display for What {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            What::Manifest(m) => write!(f, "manifest {m}"),
            What::Blob(d) => write!(f, "blob {d}"),
        }
    }
}

/// Errors of a registry request (the low-level client); `reference` names the image pulled.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("pull {reference}: {what} from {registry}: {source} (after {attempts} attempts)")]
    Transport {
        reference: String,
        registry: String,
        what: What,
        source: HttpError,
        attempts: u32,
    },
    #[error("pull {reference}: {what} from {registry}: HTTP {status} (after {attempts} attempts)")]
    Status {
        reference: String,
        registry: String,
        what: What,
        status: u16,
        attempts: u32,
    },
    #[error("pull {reference}: {what} from {registry}: HTTP {status}, access denied (check the credentials in registries.yaml or config.json)")]
    Unauthorized {
        reference: String,
        registry: String,
        what: What,
        status: u16,
    },
    #[error("pull {reference}: {what} not found on {registry}")]
    NotFound {
        reference: String,
        registry: String,
        what: What,
    },
    #[error("pull {reference}: token from {realm}: {source}")]
    Token {
        reference: String,
        realm: String,
        source: TokenError,
    },
    #[error("pull {reference}: tls setup for {host}: {source}")]
    Tls {
        reference: String,
        host: String,
        #[source]
        source: CaFileError,
    },
    #[error("pull {reference}: {digest} does not match its content: content digest is {actual}")]
    DigestMismatch {
        reference: String,
        digest: Digest,
        actual: Digest,
    },
    #[error("pull {reference}: blob {digest} from {registry} is truncated: got {got} of {expected} bytes: {detail}")]
    Truncated {
        reference: String,
        registry: String,
        digest: Digest,
        expected: u64,
        got: u64,
        detail: String,
    },
    #[error("pull {reference}: blob {digest} is larger than its descriptor's {expected} bytes")]
    SizeMismatch {
        reference: String,
        digest: Digest,
        expected: u64,
    },
    #[error("pull {reference}: {what} is larger than the {limit}-byte limit")]
    TooLarge {
        reference: String,
        what: What,
        limit: u64,
    },
    #[error("pull {reference}: writing blob {digest} to {path}: {source}")]
    Write {
        reference: String,
        digest: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("pull {reference}: cancelled after another download failed")]
    Cancelled { reference: String },
}

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

/// A registry's `ca_file` that cannot be used.
pub use crate::httpclient::tls::TlsFileError as CaFileError;

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

    fn agent(&self, host: &str) -> Result<Agent, RegistryError> {
        let mut agents = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = agents.get(host) {
            return Ok(a.clone());
        }
        let tls = self.cfg.tls(host);
        let roots = crate::httpclient::tls::root_certs(tls.ca_file.as_deref(), "ca_file").map_err(
            |source| RegistryError::Tls {
                reference: self.reference.clone(),
                host: host.to_string(),
                source,
            },
        )?;
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

    fn sleep(&self, attempt: u32, retry_after: Option<Duration>) -> Result<(), RegistryError> {
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

    pub fn check_cancel(&self) -> Result<(), RegistryError> {
        if self.cancel.load(Ordering::Relaxed) {
            return Err(RegistryError::Cancelled {
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
    ) -> Result<Response<Body>, RegistryError> {
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
                    return Err(RegistryError::Unauthorized {
                        reference: self.reference.clone(),
                        registry: ep.to_string(),
                        what: what.clone(),
                        status: status.as_u16(),
                    })
                }
                404 => {
                    return Err(RegistryError::NotFound {
                        reference: self.reference.clone(),
                        registry: ep.to_string(),
                        what: what.clone(),
                    })
                }
                429 | 500 | 502 | 503 | 504 => {
                    attempt += 1;
                    if attempt >= self.retry.attempts {
                        return Err(RegistryError::Status {
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
                    return Err(RegistryError::Status {
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

    fn transport(
        &self,
        ep: &Endpoint,
        what: &What,
        source: HttpError,
        attempts: u32,
    ) -> RegistryError {
        RegistryError::Transport {
            reference: self.reference.clone(),
            registry: ep.to_string(),
            what: what.clone(),
            source,
            attempts,
        }
    }

    /// Fetches a manifest or index by tag or digest; verifies the digest when known.
    pub fn manifest(
        &self,
        ep: &Endpoint,
        repo: &str,
        tag_or_digest: &str,
        expected: Option<&Digest>,
    ) -> Result<FetchedManifest, RegistryError> {
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
                    return Err(RegistryError::TooLarge {
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
                    return Err(RegistryError::DigestMismatch {
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
}

/// Whether a failed request may succeed when tried again: timeouts and transport errors may;
/// a body or head over its limit and a redirect loop are what the server sends, every time.
fn retryable(e: &HttpError) -> bool {
    matches!(e, HttpError::Timeout { .. } | HttpError::Transport { .. })
}

mod auth;
mod blob;

#[cfg(test)]
mod tests;
