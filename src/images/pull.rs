//! `ImageStore::pull`: resolves a reference on its registry (mirrors first, as configured in
//! [`RegistryConfig`]), picks this machine's platform from an index, verifies manifest and
//! config, downloads the missing layers concurrently (bounded) into `images/tmp/pulls`
//! (resumable, verified while streaming) and commits the image through the archive import's
//! commit path. Errors name the reference and, where one is involved, the digest.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use super::archive::{BlobData, PlannedImage, PlannedLayer};
use super::client::{Client, FetchedManifest, RegistryError, RetryPolicy};
use super::digest::Digest;
use super::error::{ImageError, PullError};
use super::manifest::HostPlatform;
use super::records::ImageRecord;
use super::reference::Reference;
use super::registry::{RegistryConfig, Source};
use super::resolve::{decode_document, plan_image, Document, ResolveError};
use super::store::ImageStore;

/// Concurrent layer downloads per pull.
pub const PULL_CONCURRENCY: usize = 3;
/// Index hops followed (an index pointing at an index ...).
const MAX_INDEX_HOPS: usize = 4;
/// Age after which an abandoned download in `tmp/pulls` is removed.
const STALE_DOWNLOAD: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

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
        std::fs::create_dir_all(&dir).map_err(|source| RegistryError::Write {
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
                        .push(r.map(|p| (l.digest.clone(), p)).map_err(PullError::from));
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
                Err(PullError::Registry(RegistryError::Cancelled { .. })) => {}
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
    Err(ResolveError::BadManifest {
        reference: name.to_string(),
        digest: doc.digest.to_string(),
        detail: format!("more than {MAX_INDEX_HOPS} nested indexes"),
    }
    .into())
}
