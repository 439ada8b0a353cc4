//! `ImageStore`: the image store under `<root-dir>/images` tying together archive import,
//! blobs, unpacked layers, records, leases, garbage collection and preloading. Every mutation
//! holds an exclusive flock on `images/lock` so the CLI and the daemon can run at once.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::fsutil;

use super::archive::{BlobData, PlannedImage};
use super::blobs::{BlobError, BlobStore, Spooled};
use super::digest::Digest;
use super::error::ImageError;
use super::layer::Layers;
use super::manifest::{HostPlatform, RawConfig, RawManifest};
use super::mount_targets;
use super::records::{ImageRecord, Leases, Records};
use super::reference::{Reference, ReferenceError};

/// Minimum length of a digest hex prefix accepted by `resolve`.
pub const MIN_DIGEST_PREFIX: usize = 12;
/// Name of the preload bookkeeping file inside `images/preload`.
pub(super) const PRELOAD_STATE: &str = ".imported.json";
/// Directory under `tmp/` holding pull downloads; not removed as a leftover.
const PULLS_DIR: &str = "pulls";

pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ImageError + '_ {
    move |source| ImageError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Content nothing references: what garbage collection removes.
pub(super) struct Unreferenced {
    pub blobs: Vec<Digest>,
    pub layers: Vec<Digest>,
    /// Manifests of the images the store keeps (their use marks stay).
    pub manifests: HashSet<Digest>,
}

/// Held exclusive flock on `images/lock`; released on drop (close).
pub(super) struct LockGuard {
    _file: File,
}

/// The image store under `<root-dir>/images`.
#[derive(Debug)]
pub struct ImageStore {
    pub(super) dir: PathBuf,
    pub(super) blobs: BlobStore,
    pub(super) layers: Layers,
    pub(super) records: Records,
    pub(super) leases: Leases,
    pub(super) tmp: PathBuf,
    pub(super) host: HostPlatform,
    /// Whether the mount-targets layer fits each image (by manifest digest): layers never
    /// change, so each image is looked at once per process.
    mount_target_fits: std::sync::Mutex<HashMap<String, bool>>,
    /// Whether making `layers/mount-targets` failed and was logged (once per process).
    mount_targets_failed: std::sync::atomic::AtomicBool,
}

impl ImageStore {
    /// Opens (creating) the store at `images_dir` and, unless another process holds the lock,
    /// removes leftovers of crashed imports, records and leases a power cut tore (each said
    /// once: they are gone afterwards) and content no record or lease references.
    pub fn open(images_dir: &Path) -> Result<ImageStore, ImageError> {
        let store = ImageStore::open_as_is(images_dir)?;
        if let Some(_lock) = store.try_lock()? {
            store.remove_tmp_leftovers()?;
            store.layers.remove_leftovers()?;
            store.remove_torn_locked()?;
            store.gc_locked()?;
        }
        Ok(store)
    }

    /// Opens (creating) the store without cleaning anything up: for [`ImageStore::check`],
    /// which reports what an interruption left before it repairs.
    pub fn open_as_is(images_dir: &Path) -> Result<ImageStore, ImageError> {
        let dir = images_dir.to_path_buf();
        let tmp = dir.join("tmp");
        let store = ImageStore {
            blobs: BlobStore::open(dir.join("blobs").join("sha256"), tmp.clone())?,
            layers: Layers::open(dir.join("layers"))?,
            records: Records::open(dir.join("refs"))?,
            leases: Leases::open(dir.join("leases"))?,
            tmp,
            host: HostPlatform::detect(),
            dir,
            mount_target_fits: Default::default(),
            mount_targets_failed: Default::default(),
        };
        fs::create_dir_all(store.preload_dir()).map_err(io_err(&store.preload_dir()))?;
        Ok(store)
    }

    /// Removes what interrupted writes left in `refs/` and `leases/`: temporary files, and
    /// records or leases that are empty or torn (records are durable, so only damage tears
    /// them; leases are written without fsync, being worthless after a reboot). The caller
    /// holds the lock.
    pub(super) fn remove_torn_locked(&self) -> Result<(), ImageError> {
        for dir in [self.records.dir(), self.leases.dir()] {
            fsutil::remove_atomic_temps(dir);
        }
        for (path, why) in self.records.torn()? {
            log::warn!(
                "image record {} is torn ({why}): removing it; import or pull that image again",
                path.display()
            );
            fs::remove_file(&path).map_err(io_err(&path))?;
        }
        for (path, why) in self.leases.torn()? {
            log::info!(
                "image lease {} is torn ({why}): an interrupted write, removing it",
                path.display()
            );
            fs::remove_file(&path).map_err(io_err(&path))?;
        }
        Ok(())
    }

    /// The `images/layers` directory (relative lowerdirs for overlayfs are its entries).
    pub fn layers_dir(&self) -> PathBuf {
        self.layers.dir().to_path_buf()
    }

    /// The `images/preload` directory scanned by [`ImageStore::import_preload`].
    pub fn preload_dir(&self) -> PathBuf {
        self.dir.join("preload")
    }

    fn lock_path(&self) -> PathBuf {
        self.dir.join("lock")
    }

    fn open_lock_file(&self) -> Result<File, ImageError> {
        let path = self.lock_path();
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| ImageError::Lock { path, source })
    }

    pub(super) fn lock(&self) -> Result<LockGuard, ImageError> {
        let file = self.open_lock_file()?;
        match crate::sys::lock::lock_exclusive(&file) {
            Ok(()) => Ok(LockGuard { _file: file }),
            Err(source) => Err(ImageError::Lock {
                path: self.lock_path(),
                source,
            }),
        }
    }

    pub(super) fn try_lock(&self) -> Result<Option<LockGuard>, ImageError> {
        let file = self.open_lock_file()?;
        match crate::sys::lock::try_lock_exclusive(&file) {
            Ok(true) => Ok(Some(LockGuard { _file: file })),
            Ok(false) => Ok(None),
            Err(source) => Err(ImageError::Lock {
                path: self.lock_path(),
                source,
            }),
        }
    }

    pub(super) fn remove_tmp_leftovers(&self) -> Result<(), ImageError> {
        for entry in fs::read_dir(&self.tmp).map_err(io_err(&self.tmp))? {
            let entry = entry.map_err(io_err(&self.tmp))?;
            if entry.file_name() == PULLS_DIR {
                continue;
            }
            let p = entry.path();
            let ft = entry.file_type().map_err(io_err(&p))?;
            let r = if ft.is_dir() {
                fs::remove_dir_all(&p)
            } else {
                fs::remove_file(&p)
            };
            r.map_err(io_err(&p))?;
        }
        Ok(())
    }

    /// Commits a pulled image under the store lock: `plan.blobs` holds the manifest and config
    /// bytes, `files` the verified layer files downloaded into [`ImageStore::pulls_dir`] (layers
    /// missing from it must already be stored). Shares the archive import's tail, so pulled and
    /// imported images are identical on disk.
    pub(super) fn commit_pulled(
        &self,
        plan: PlannedImage,
        files: &HashMap<Digest, PathBuf>,
        reference: Reference,
    ) -> Result<ImageRecord, ImageError> {
        let _lock = self.lock()?;
        let result = (|| {
            let mut new_blobs = HashSet::new();
            for (digest, data) in &plan.blobs {
                if let BlobData::Bytes(b) = data {
                    if !self.blobs.exists(digest) {
                        self.blobs.put_bytes(b, digest)?;
                        new_blobs.insert(digest.clone());
                    }
                }
            }
            for l in &plan.layers {
                match files.get(&l.digest) {
                    Some(path) if !self.blobs.exists(&l.digest) => {
                        let spooled = Spooled {
                            path: path.clone(),
                            digest: l.digest.clone(),
                            size: l.size,
                        };
                        self.blobs.commit(spooled, &l.digest)?;
                        new_blobs.insert(l.digest.clone());
                    }
                    Some(path) => {
                        let _ = fs::remove_file(path);
                    }
                    None if self.blobs.exists(&l.digest) => {}
                    None => {
                        return Err(BlobError::Missing {
                            digest: l.digest.clone(),
                        }
                        .into())
                    }
                }
            }
            let mut recs = self.finish_import(vec![(plan, vec![reference])], &new_blobs, false)?;
            recs.pop().ok_or_else(|| ImageError::NotFound {
                query: "pulled record".to_string(),
            })
        })();
        if result.is_err() {
            if let Err(e) = self.gc_locked() {
                log::warn!("cleaning up after failed pull: {e}");
            }
        }
        result
    }

    /// Where pulls keep downloads (`tmp/pulls/<hex>.partial` while downloading, `<hex>` once
    /// verified); kept across restarts so interrupted downloads resume.
    pub(super) fn pulls_dir(&self) -> PathBuf {
        self.tmp.join(PULLS_DIR)
    }

    pub(super) fn host_platform(&self) -> &HostPlatform {
        &self.host
    }

    pub(super) fn has_blob(&self, digest: &Digest) -> bool {
        self.blobs.exists(digest)
    }

    /// Whether every blob of `rec` is present.
    fn is_complete(&self, rec: &ImageRecord) -> bool {
        let Some(d) = rec.digests() else {
            return false;
        };
        self.blobs.exists(&d.manifest)
            && self.blobs.exists(&d.config)
            && d.layers.iter().all(|(b, _)| self.blobs.exists(b))
    }

    /// All intact images, sorted by reference. Broken or unreadable records are logged and
    /// left out.
    pub fn list(&self) -> Result<Vec<ImageRecord>, ImageError> {
        let mut out = Vec::new();
        for r in self.records.all()? {
            match r {
                Ok(rec) if self.is_complete(&rec) => out.push(rec),
                Ok(rec) => log::warn!("image {} is missing content, not listed", rec.reference),
                Err(e) => log::warn!("{e}"),
            }
        }
        out.sort_by(|a, b| a.reference.cmp(&b.reference));
        Ok(out)
    }

    /// Finds an image by normalized reference, by `sha256:<hex>` manifest digest, or by a
    /// unique digest hex prefix of at least 12 characters.
    pub fn resolve(&self, reference_or_digest: &str) -> Result<Option<ImageRecord>, ImageError> {
        Ok(self.resolve_inner(reference_or_digest)?.map(|(r, _)| r))
    }

    /// The intact record named `reference` (normalized), read alone rather than by listing
    /// the store: the container start path resolves names.
    fn read_named(&self, reference: &str) -> Result<Option<ImageRecord>, ImageError> {
        match self.records.read(reference) {
            Ok(Some(rec)) if self.is_complete(&rec) => Ok(Some(rec)),
            Ok(Some(rec)) => {
                log::warn!("image {} is missing content, not listed", rec.reference);
                Ok(None)
            }
            Ok(None) => Ok(None),
            Err(e) => {
                log::warn!("{e}");
                Ok(None)
            }
        }
    }

    /// The record and whether it was found by digest.
    fn resolve_inner(&self, q: &str) -> Result<Option<(ImageRecord, bool)>, ImageError> {
        let hex_part = q.strip_prefix("sha256:");
        let candidate = hex_part.unwrap_or(q);
        let is_hex = candidate.len() >= MIN_DIGEST_PREFIX
            && candidate.len() <= 64
            && candidate
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if is_hex {
            let recs = self.list()?;
            let matches: Vec<&ImageRecord> = recs
                .iter()
                .filter(|r| {
                    r.digest
                        .strip_prefix("sha256:")
                        .is_some_and(|h| h.starts_with(candidate))
                })
                .collect();
            let distinct: HashSet<&str> = matches.iter().map(|r| r.digest.as_str()).collect();
            if distinct.len() > 1 {
                let mut list: Vec<&str> = distinct.into_iter().collect();
                list.sort();
                return Err(ImageError::Ambiguous {
                    query: q.to_string(),
                    matches: list.join(", "),
                });
            }
            if let Some(r) = matches.first() {
                return Ok(Some(((*r).clone(), true)));
            }
        }
        if hex_part.is_some() {
            if is_hex {
                return Ok(None);
            }
            // "sha256:" with a short or malformed hex part.
            return Err(ReferenceError::InvalidDigest {
                reference: q.to_string(),
                digest: q.to_string(),
            }
            .into());
        }
        let r = Reference::parse(q)?.to_string();
        Ok(self.read_named(&r)?.map(|rec| (rec, false)))
    }

    /// The OCI image config of `rec`.
    pub fn image_config(
        &self,
        rec: &ImageRecord,
    ) -> Result<oci_spec::image::ImageConfiguration, ImageError> {
        let d = rec.digests().ok_or_else(|| ImageError::BadRecord {
            reference: rec.reference.clone(),
        })?;
        let data = self.blobs.read_json_blob(&d.config)?;
        serde_json::from_slice(&data).map_err(|source| ImageError::Config {
            digest: rec.config_digest.clone(),
            source,
        })
    }

    /// Unpacked layer directories of `rec`, bottom layer first; a missing directory is
    /// unpacked again from its blob.
    pub fn layer_dirs(&self, rec: &ImageRecord) -> Result<Vec<PathBuf>, ImageError> {
        let d = rec.digests().ok_or_else(|| ImageError::BadRecord {
            reference: rec.reference.clone(),
        })?;
        let mut out = Vec::with_capacity(d.layers.len());
        let mut lock = None;
        for (blob, diff_id) in &d.layers {
            if !self.layers.exists(diff_id) {
                if lock.is_none() {
                    lock = Some(self.lock()?);
                }
                if !self.blobs.exists(blob) {
                    return Err(BlobError::Missing {
                        digest: blob.clone(),
                    }
                    .into());
                }
                self.layers.ensure(&self.blobs.path(blob), blob, diff_id)?;
            }
            out.push(self.layers.path(diff_id));
        }
        Ok(out)
    }

    /// The shared mount-targets layer's directory name under [`ImageStore::layers_dir`] when
    /// it fits `rec`, whose unpacked layers are `dirs` (bottom first, as
    /// [`ImageStore::layer_dirs`] gives them): to be stacked as the topmost lower layer, so
    /// the container's init finds `/etc/hosts`, `/etc/hostname` and `/etc/resolv.conf` and
    /// does not create them in the writable layer (see `mount_targets`). `None` leaves the
    /// image as it is.
    pub fn mount_targets_layer(&self, rec: &ImageRecord, dirs: &[PathBuf]) -> Option<&'static str> {
        let cached = self
            .mount_target_fits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&rec.digest)
            .copied();
        let fits = match cached {
            Some(f) => f,
            None => {
                let top_first: Vec<PathBuf> = dirs.iter().rev().cloned().collect();
                // A layer that cannot be read is left to the start, which reports it.
                let f = mount_targets::fits(&mount_targets::OnDisk, &top_first).unwrap_or(false);
                self.mount_target_fits
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(rec.digest.clone(), f);
                f
            }
        };
        if !fits {
            return None;
        }
        // One stat per start: the layer is never garbage-collected (three empty files), but
        // a hand or `rm -rf` may have removed it, and a lower layer that is gone would fail
        // the overlay mount.
        if self
            .layers
            .dir()
            .join(mount_targets::LAYER_NAME)
            .join("etc")
            .is_dir()
        {
            return Some(mount_targets::LAYER_NAME);
        }
        let made = self
            .lock()
            .map_err(|e| e.to_string())
            .and_then(|_lock| mount_targets::ensure(self.layers.dir()).map_err(|e| e.to_string()));
        match made {
            Ok(_) => Some(mount_targets::LAYER_NAME),
            Err(e) => {
                if !self
                    .mount_targets_failed
                    .swap(true, std::sync::atomic::Ordering::Relaxed)
                {
                    log::warn!(
                        "mount-targets layer: {e}; containers create their /etc mount points \
                         in their writable layer"
                    );
                }
                None
            }
        }
    }

    /// Removes an image name and garbage-collects content nothing references any more.
    /// Refuses when the image is leased and no other name keeps it. A digest matching several
    /// names is ambiguous: remove the names one by one.
    pub fn remove(&self, reference_or_digest: &str) -> Result<ImageRecord, ImageError> {
        let _lock = self.lock()?;
        let (rec, by_digest) =
            self.resolve_inner(reference_or_digest)?
                .ok_or_else(|| ImageError::NotFound {
                    query: reference_or_digest.to_string(),
                })?;
        let same: Vec<ImageRecord> = self
            .list()?
            .into_iter()
            .filter(|r| r.digest == rec.digest)
            .collect();
        if by_digest && same.len() > 1 {
            return Err(ImageError::Ambiguous {
                query: reference_or_digest.to_string(),
                matches: same
                    .iter()
                    .map(|r| r.reference.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        if same.len() <= 1 {
            let holders: Vec<String> = self
                .leases
                .all()?
                .into_iter()
                .filter(|(_, d)| d.to_string() == rec.digest)
                .map(|(h, _)| h)
                .collect();
            if !holders.is_empty() {
                return Err(ImageError::Leased {
                    reference: rec.reference.clone(),
                    digest: rec.digest.clone(),
                    holders: holders.join(", "),
                });
            }
        }
        self.records.remove(&rec.reference)?;
        self.gc_locked()?;
        Ok(rec)
    }

    /// Records that `holder` (a container) uses the image `rec` it resolved by name; rm and GC
    /// keep it. Under the lock the record is read again by that name (one file); the store is
    /// listed only when the name no longer holds `rec`'s digest (retagged meanwhile), so a
    /// container start's lease does not cost more with more images.
    pub fn add_lease(&self, holder: &str, rec: &ImageRecord) -> Result<(), ImageError> {
        let image_digest = rec.digest.as_str();
        let _lock = self.lock()?;
        let digest = Digest::parse(image_digest).map_err(|_| ReferenceError::InvalidDigest {
            reference: image_digest.to_string(),
            digest: image_digest.to_string(),
        })?;
        let by_name = self
            .read_named(&rec.reference)?
            .is_some_and(|r| r.digest == image_digest);
        if !by_name && !self.list()?.iter().any(|r| r.digest == image_digest) {
            return Err(ImageError::NotFound {
                query: image_digest.to_string(),
            });
        }
        self.leases.add(holder, &digest)?;
        self.mark_used(&digest);
        Ok(())
    }

    /// Drops `holder`'s lease (no error if it has none) and collects what it alone kept.
    pub fn remove_lease(&self, holder: &str) -> Result<(), ImageError> {
        let _lock = self.lock()?;
        self.leases.remove(holder)?;
        self.gc_locked()
    }

    /// Removes blobs and layer directories referenced by no record and no lease. The caller
    /// holds the lock.
    pub(super) fn gc_locked(&self) -> Result<(), ImageError> {
        let unused = self.unreferenced_locked()?;
        for b in &unused.blobs {
            self.blobs.remove(b)?;
        }
        for l in &unused.layers {
            self.layers.remove(l)?;
        }
        self.prune_used_marks(&unused.manifests);
        Ok(())
    }

    /// What [`ImageStore::gc_locked`] would remove. The caller holds the lock.
    pub(super) fn unreferenced_locked(&self) -> Result<Unreferenced, ImageError> {
        let mut keep_blobs: HashSet<Digest> = HashSet::new();
        let mut keep_layers: HashSet<Digest> = HashSet::new();
        let mut manifests: HashSet<Digest> = HashSet::new();
        for r in self.records.all()? {
            let rec = match r {
                Ok(rec) => rec,
                Err(e) => {
                    log::warn!("gc: {e}");
                    continue;
                }
            };
            let Some(d) = rec.digests() else {
                log::warn!("gc: image record {} has malformed digests", rec.reference);
                continue;
            };
            manifests.insert(d.manifest.clone());
            keep_blobs.insert(d.manifest);
            keep_blobs.insert(d.config);
            for (b, diff) in d.layers {
                keep_blobs.insert(b);
                keep_layers.insert(diff);
            }
        }
        for (holder, digest) in self.leases.all()? {
            if manifests.contains(&digest) {
                continue;
            }
            // The leased image lost its name (re-import of the tag): keep its content from
            // its manifest and config blobs.
            if let Err(e) = self.keep_from_manifest(&digest, &mut keep_blobs, &mut keep_layers) {
                log::warn!("gc: lease {holder} on {digest}: {e}");
            }
        }
        Ok(Unreferenced {
            blobs: self
                .blobs
                .list()?
                .into_iter()
                .filter(|b| !keep_blobs.contains(b))
                .collect(),
            layers: self
                .layers
                .list()?
                .into_iter()
                .filter(|l| !keep_layers.contains(l))
                .collect(),
            manifests,
        })
    }

    fn keep_from_manifest(
        &self,
        manifest: &Digest,
        keep_blobs: &mut HashSet<Digest>,
        keep_layers: &mut HashSet<Digest>,
    ) -> Result<(), ImageError> {
        let bad = |e: serde_json::Error| ImageError::Config {
            digest: manifest.to_string(),
            source: e,
        };
        let m: RawManifest =
            serde_json::from_slice(&self.blobs.read_json_blob(manifest)?).map_err(bad)?;
        keep_blobs.insert(manifest.clone());
        let parse = |s: &str| {
            Digest::parse(s).map_err(|_| ImageError::BadRecord {
                reference: manifest.to_string(),
            })
        };
        let config = parse(&m.config.digest)?;
        keep_blobs.insert(config.clone());
        for l in &m.layers {
            keep_blobs.insert(parse(&l.digest)?);
        }
        let c: RawConfig =
            serde_json::from_slice(&self.blobs.read_json_blob(&config)?).map_err(bad)?;
        for d in &c.rootfs.diff_ids {
            keep_layers.insert(parse(d)?);
        }
        Ok(())
    }
}
