//! `ImageStore::pull`: resolves a reference on its registry (mirrors first, as configured in
//! [`RegistryConfig`]), picks this machine's platform from an index, verifies manifest and
//! config, downloads the missing layers concurrently (bounded) into `images/tmp/pulls`
//! (resumable, verified while streaming) and commits the image through the archive import's
//! commit path. Errors name the reference and, where one is involved, the digest.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use super::archive::{BlobData, PlannedImage, PlannedLayer};
use super::client::{Client, FetchedManifest, RetryPolicy};
use super::digest::Digest;
use super::manifest::HostPlatform;
use super::records::ImageRecord;
use super::reference::Reference;
use super::registry::{RegistryConfig, Source};
use super::resolve::{decode_document, plan_image, Document};
use super::store::{ImageError, ImageStore};
use crate::httpclient::HttpError;

/// Concurrent layer downloads per pull.
pub const PULL_CONCURRENCY: usize = 3;
/// Index hops followed (an index pointing at an index ...).
const MAX_INDEX_HOPS: usize = 4;
/// Age after which an abandoned download in `tmp/pulls` is removed.
const STALE_DOWNLOAD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

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

/// Errors of a pull.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
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
    #[error("pull {reference}: tls setup for {host}: {detail}")]
    Tls {
        reference: String,
        host: String,
        detail: String,
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
    #[error("pull {reference}: {what} {digest} has unsupported media type {media_type:?}")]
    UnsupportedMediaType {
        reference: String,
        what: &'static str,
        digest: String,
        media_type: String,
    },
    #[error("pull {reference}: manifest {digest} is invalid: {detail}")]
    BadManifest {
        reference: String,
        digest: String,
        detail: String,
    },
    #[error("pull {reference}: no image for platform {wanted} in index {digest}; available: {available}")]
    NoMatchingPlatform {
        reference: String,
        digest: String,
        wanted: String,
        available: String,
    },
    #[error("pull {reference}: writing blob {digest} to {path}: {source}")]
    Write {
        reference: String,
        digest: String,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("pull {reference}: storing image {digest}: {source}")]
    Commit {
        reference: String,
        digest: String,
        #[source]
        source: Box<ImageError>,
    },
    #[error("pull {reference}: cancelled after another download failed")]
    Cancelled { reference: String },
}

/// Why a bearer token could not be had from a registry's token realm.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("bad realm: {0}")]
    BadRealm(String),
    #[error("refusing a plain http token realm for an https registry")]
    InsecureRealm,
    #[error("{source} (after {attempts} attempts)")]
    Http { source: HttpError, attempts: u32 },
    #[error("HTTP {0}")]
    Status(u16),
    #[error("response is not a token: {0}")]
    Json(String),
    #[error("response holds no token")]
    NoToken,
}

/// Pull progress reported to the caller's callback (on the calling thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PullProgress {
    /// The image manifest is known: where it comes from and its layers (digest, size).
    Resolved {
        reference: String,
        digest: String,
        registry: String,
        layers: Vec<(Digest, u64)>,
    },
    /// Bytes of a layer present so far (resumed downloads start above zero).
    Layer {
        digest: Digest,
        done: u64,
        total: u64,
    },
    /// A layer is complete; `cached` when it was already in the store.
    LayerDone { digest: Digest, cached: bool },
    /// All blobs are here; layers are being unpacked and the record written.
    Committing,
}

/// A manifest resolved for this machine, with its verified config.
struct Resolved {
    source: Source,
    manifest: FetchedManifest,
    config: Vec<u8>,
    config_digest: Digest,
    layers: Vec<PlannedLayer>,
    created: Option<String>,
}

impl ImageStore {
    /// Pulls `reference` for this machine's platform into the store; returns the stored record.
    pub fn pull(
        &self,
        reference: &str,
        cfg: &RegistryConfig,
        progress: &mut dyn FnMut(&PullProgress),
    ) -> Result<ImageRecord, ImageError> {
        self.pull_with(reference, cfg, RetryPolicy::default(), progress)
    }

    /// [`ImageStore::pull`] with an explicit retry policy.
    pub fn pull_with(
        &self,
        reference: &str,
        cfg: &RegistryConfig,
        retry: RetryPolicy,
        progress: &mut dyn FnMut(&PullProgress),
    ) -> Result<ImageRecord, ImageError> {
        let started = Instant::now();
        let r = Reference::parse(reference)?;
        let name = r.to_string();
        let cancel = Arc::new(AtomicBool::new(false));
        let client = Client::new(cfg, &name, retry, cancel.clone());
        let host = self.host_platform().clone();

        let mut last_err = None;
        let mut resolved = None;
        for source in cfg.sources(r.registry(), r.repository()) {
            match resolve(&client, &r, &name, &source, &host) {
                Ok(res) => {
                    resolved = Some(res);
                    break;
                }
                Err(e) => {
                    log::warn!("{e}");
                    last_err.get_or_insert(e);
                }
            }
        }
        let res = match (resolved, last_err) {
            (Some(res), _) => res,
            (None, Some(e)) => return Err(e.into()),
            (None, None) => {
                return Err(ImageError::NotFound {
                    query: name.clone(),
                })
            }
        };
        let registry = res.source.endpoint.to_string();
        progress(&PullProgress::Resolved {
            reference: name.clone(),
            digest: res.manifest.digest.to_string(),
            registry: registry.clone(),
            layers: res
                .layers
                .iter()
                .map(|l| (l.digest.clone(), l.size))
                .collect(),
        });

        let files = self.download_layers(&client, &name, &res, &cancel, progress)?;
        progress(&PullProgress::Committing);
        let config_size = res.config.len() as u64;
        let plan = PlannedImage {
            names: Vec::new(),
            manifest_digest: res.manifest.digest.clone(),
            config_digest: res.config_digest.clone(),
            config_size,
            created: res.created.clone(),
            layers: res.layers.clone(),
            blobs: vec![
                (
                    res.manifest.digest.clone(),
                    BlobData::Bytes(res.manifest.bytes.clone()),
                ),
                (res.config_digest.clone(), BlobData::Bytes(res.config)),
            ],
        };
        let rec = self
            .commit_pulled(plan, &files, r)
            .map_err(|e| PullError::Commit {
                reference: name.clone(),
                digest: res.manifest.digest.to_string(),
                source: Box::new(e),
            })?;
        log::info!(
            "pulled {name} ({}) from {registry}: {} layers, {} bytes in {:.1}s",
            rec.digest,
            rec.layers.len(),
            rec.size,
            started.elapsed().as_secs_f64()
        );
        Ok(rec)
    }

    /// Downloads the layers missing from the store, at most [`PULL_CONCURRENCY`] at once.
    fn download_layers(
        &self,
        client: &Client<'_>,
        name: &str,
        res: &Resolved,
        cancel: &AtomicBool,
        progress: &mut dyn FnMut(&PullProgress),
    ) -> Result<HashMap<Digest, PathBuf>, PullError> {
        let dir = self.pulls_dir();
        std::fs::create_dir_all(&dir).map_err(|source| PullError::Write {
            reference: name.to_string(),
            digest: res.manifest.digest.to_string(),
            path: dir.clone(),
            source,
        })?;
        remove_stale_downloads(&dir);
        let mut todo: Vec<&PlannedLayer> = Vec::new();
        for l in &res.layers {
            if self.has_blob(&l.digest) || todo.iter().any(|t| t.digest == l.digest) {
                progress(&PullProgress::LayerDone {
                    digest: l.digest.clone(),
                    cached: true,
                });
            } else {
                todo.push(l);
            }
        }
        let queue = Mutex::new(todo.clone());
        let results: Mutex<Vec<Result<(Digest, PathBuf), PullError>>> = Mutex::new(Vec::new());
        let (tx, rx) = mpsc::channel::<PullProgress>();
        let workers = PULL_CONCURRENCY.min(todo.len());
        std::thread::scope(|s| {
            for _ in 0..workers {
                let tx = tx.clone();
                let queue = &queue;
                let results = &results;
                let dir = &dir;
                let ep = &res.source.endpoint;
                let repo = res.source.repository.as_str();
                s.spawn(move || loop {
                    let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop();
                    let Some(l) = next else { break };
                    let last = AtomicU64::new(0);
                    let report = |done: u64| {
                        let prev = last.load(Ordering::Relaxed);
                        if done == l.size || done < prev || done - prev >= 512 << 10 {
                            last.store(done, Ordering::Relaxed);
                            let _ = tx.send(PullProgress::Layer {
                                digest: l.digest.clone(),
                                done,
                                total: l.size,
                            });
                        }
                    };
                    let r = client.blob_to_file(ep, repo, &l.digest, l.size, dir, &report);
                    let failed = r.is_err();
                    if r.is_ok() {
                        let _ = tx.send(PullProgress::LayerDone {
                            digest: l.digest.clone(),
                            cached: false,
                        });
                    }
                    results
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(r.map(|p| (l.digest.clone(), p)));
                    if failed {
                        cancel.store(true, Ordering::Relaxed);
                        break;
                    }
                });
            }
            drop(tx);
            for ev in rx {
                progress(&ev);
            }
        });
        let mut files = HashMap::new();
        let mut first_err = None;
        for r in results.into_inner().unwrap_or_else(|p| p.into_inner()) {
            match r {
                Ok((d, p)) => {
                    files.insert(d, p);
                }
                Err(PullError::Cancelled { .. }) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(files)
    }
}

/// Downloads untouched for a day belong to pulls nobody retried: removed.
fn remove_stale_downloads(dir: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let stale = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_DOWNLOAD);
        if stale {
            match std::fs::remove_file(e.path()) {
                Ok(()) => log::info!("removed stale download {}", e.path().display()),
                Err(err) => log::warn!("removing stale download {}: {err}", e.path().display()),
            }
        }
    }
}

fn resolve(
    client: &Client<'_>,
    r: &Reference,
    name: &str,
    source: &Source,
    host: &HostPlatform,
) -> Result<Resolved, PullError> {
    let ep = &source.endpoint;
    let repo = source.repository.as_str();
    let tag_or_digest = match (r.digest(), r.tag()) {
        (Some(d), _) => d.to_string(),
        (None, Some(t)) => t.to_string(),
        (None, None) => "latest".to_string(),
    };
    let mut doc = client.manifest(ep, repo, &tag_or_digest, r.digest())?;
    for _ in 0..MAX_INDEX_HOPS {
        match decode_document(name, &doc, host)? {
            Document::Index { chosen } => {
                doc = client.manifest(ep, repo, &chosen.to_string(), Some(&chosen))?;
            }
            Document::Manifest(m) => {
                let config = client.blob_bytes(ep, repo, &m.config, m.config_size)?;
                let plan = plan_image(name, &m, &config)?;
                return Ok(Resolved {
                    source: source.clone(),
                    manifest: doc,
                    config,
                    config_digest: m.config,
                    layers: plan.layers,
                    created: plan.created,
                });
            }
        }
    }
    Err(PullError::BadManifest {
        reference: name.to_string(),
        digest: doc.digest.to_string(),
        detail: format!("more than {MAX_INDEX_HOPS} nested indexes"),
    })
}
