//! Importing images into the [`ImageStore`]: OCI and docker archives (`podvisor image import`)
//! and the preload directory (pinned images imported at start): the archive's blobs committed
//! to the store, and the names its images get ([`ImportOptions`], the archive's own names).

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::fsutil;

use super::archive::{
    self, ArchiveContents, ArchiveError, ArchiveName, BlobData, Content, PlannedImage,
};
use super::blobs::{unique_tmp_name, Spooled};
use super::digest::Digest;
use super::error::ImageError;
use super::records::{now_rfc3339, ImageRecord, LayerRecord};
use super::reference::Reference;

use super::store::{io_err, ImageStore, PRELOAD_STATE};

/// Options of [`ImageStore::import_archive`].
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Names the image (overriding names in the archive). Required when the archive names its
    /// image only by a tag or not at all. If it has no explicit tag and the archive names the
    /// image by a tag only, that tag is used. Only valid for archives with one image.
    pub reference: Option<String>,
    /// Marks the records pinned (preloaded images).
    pub pinned: bool,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct PreloadEntry {
    size: u64,
    mtime_ns: i128,
    references: Vec<String>,
}

fn record_for(plan: &PlannedImage, r: &Reference, imported_at: &str, pinned: bool) -> ImageRecord {
    let layers: Vec<LayerRecord> = plan
        .layers
        .iter()
        .map(|l| LayerRecord {
            digest: l.digest.to_string(),
            diff_id: l.diff_id.to_string(),
            size: l.size,
            media_type: l.media_type.clone(),
        })
        .collect();
    ImageRecord {
        reference: r.to_string(),
        digest: plan.manifest_digest.to_string(),
        config_digest: plan.config_digest.to_string(),
        size: layers.iter().map(|l| l.size).sum::<u64>() + plan.config_size,
        layers,
        created: plan.created.clone(),
        imported_at: imported_at.to_string(),
        pinned,
    }
}

/// Whether the user wrote a tag after the last `/` of the name.
fn has_explicit_tag(s: &str) -> bool {
    let name = s.split('@').next().unwrap_or(s);
    name.rsplit('/')
        .next()
        .is_some_and(|last| last.contains(':'))
}

/// Gives every planned image its references.
fn name_images(
    plans: Vec<PlannedImage>,
    opts: &ImportOptions,
    archive: &Path,
) -> Result<Vec<(PlannedImage, Vec<Reference>)>, ImageError> {
    if let Some(s) = &opts.reference {
        let mut r = Reference::parse(s)?;
        let [plan] = <[PlannedImage; 1]>::try_from(plans).map_err(|plans| {
            ImageError::ReferenceForManyImages {
                archive: archive.to_path_buf(),
                count: plans.len(),
            }
        })?;
        if let Some(d) = r.digest() {
            if d != &plan.manifest_digest {
                return Err(ImageError::ReferenceDigestMismatch {
                    reference: r.to_string(),
                    expected: d.to_string(),
                    actual: plan.manifest_digest.to_string(),
                });
            }
        } else if !has_explicit_tag(s) {
            let tags: Vec<&String> = plan
                .names
                .iter()
                .filter_map(|n| match n {
                    ArchiveName::Tag(t) => Some(t),
                    ArchiveName::Full(_) => None,
                })
                .collect();
            if let [t] = tags.as_slice() {
                r = r.with_tag(t)?;
            }
        }
        return Ok(vec![(plan, vec![r])]);
    }
    let mut out = Vec::new();
    for plan in plans {
        let full: Vec<Reference> = plan
            .names
            .iter()
            .filter_map(|n| match n {
                ArchiveName::Full(r) => Some(r.clone()),
                ArchiveName::Tag(_) => None,
            })
            .collect();
        if full.is_empty() {
            let digest = plan.manifest_digest.to_string();
            return Err(match plan.names.first() {
                Some(ArchiveName::Tag(tag)) => ImageError::TagOnly {
                    archive: archive.to_path_buf(),
                    digest,
                    tag: tag.clone(),
                },
                _ => ImageError::NoName {
                    archive: archive.to_path_buf(),
                    digest,
                },
            });
        }
        out.push((plan, full));
    }
    Ok(out)
}

impl ImageStore {
    /// Imports an OCI archive or docker-archive; returns one record per name it was given.
    pub fn import_archive(
        &self,
        archive: &Path,
        opts: &ImportOptions,
    ) -> Result<Vec<ImageRecord>, ImageError> {
        let _lock = self.lock()?;
        self.import_locked(archive, opts)
    }

    fn import_locked(
        &self,
        archive: &Path,
        opts: &ImportOptions,
    ) -> Result<Vec<ImageRecord>, ImageError> {
        let work = unique_tmp_name(&self.tmp, "import-");
        fs::create_dir(&work).map_err(io_err(&work))?;
        let result = self.import_in(archive, opts, &work);
        if let Err(e) = fs::remove_dir_all(&work) {
            log::warn!("removing import temp dir {}: {e}", work.display());
        }
        if result.is_err() {
            // Blobs and layers committed before the failure are complete but unreferenced.
            if let Err(e) = self.gc_locked() {
                log::warn!(
                    "cleaning up after failed import of {}: {e}",
                    archive.display()
                );
            }
        }
        result
    }

    fn import_in(
        &self,
        archive: &Path,
        opts: &ImportOptions,
        work: &Path,
    ) -> Result<Vec<ImageRecord>, ImageError> {
        let contents = archive::read_archive(archive, work)?;
        let plans = contents.plan(&self.host)?;
        let named = name_images(plans, opts, archive)?;

        let mut new_blobs = HashSet::new();
        for (plan, _) in &named {
            for (digest, data) in &plan.blobs {
                if self.blobs.exists(digest) || new_blobs.contains(digest) {
                    continue;
                }
                self.commit_blob(&contents, digest, data)?;
                new_blobs.insert(digest.clone());
            }
        }
        self.finish_import(named, &new_blobs, opts.pinned)
    }

    /// The common tail of archive imports and registry pulls, once every blob is committed:
    /// syncs the blob directory, unpacks (or re-verifies) layers, writes the records and
    /// collects what a replaced record left unreferenced.
    pub(super) fn finish_import(
        &self,
        named: Vec<(PlannedImage, Vec<Reference>)>,
        new_blobs: &HashSet<Digest>,
        pinned: bool,
    ) -> Result<Vec<ImageRecord>, ImageError> {
        // Pairs (blob, diff_id) already verified by earlier imports.
        let mut verified: HashSet<(String, String)> = HashSet::new();
        for rec in self.records.all()?.into_iter().flatten() {
            for l in rec.layers {
                verified.insert((l.digest, l.diff_id));
            }
        }
        self.blobs.sync()?;

        for (plan, _) in &named {
            for l in &plan.layers {
                let blob = self.blobs.path(&l.digest);
                let pair = (l.digest.to_string(), l.diff_id.to_string());
                if !self.layers.exists(&l.diff_id) {
                    self.layers.ensure(&blob, &l.digest, &l.diff_id)?;
                } else if new_blobs.contains(&l.digest) || !verified.contains(&pair) {
                    self.layers.verify(&blob, &l.digest, &l.diff_id)?;
                }
                verified.insert(pair);
            }
        }

        let imported_at = now_rfc3339();
        let mut out = Vec::new();
        let mut replaced = false;
        for (plan, refs) in named {
            for r in refs {
                let rec = record_for(&plan, &r, &imported_at, pinned);
                if let Some(old) = self.records.read(&rec.reference).ok().flatten() {
                    replaced |= old.digest != rec.digest;
                }
                self.records.write(&rec)?;
                out.push(rec);
            }
        }
        if replaced {
            self.gc_locked()?;
        }
        Ok(out)
    }

    fn commit_blob(
        &self,
        contents: &ArchiveContents,
        digest: &Digest,
        data: &BlobData,
    ) -> Result<(), ImageError> {
        match data {
            BlobData::Bytes(b) => self.blobs.put_bytes(b, digest)?,
            BlobData::File(name) => {
                let f = contents
                    .get(name)
                    .ok_or_else(|| ArchiveError::MissingFile {
                        archive: contents.archive().to_path_buf(),
                        name: name.clone(),
                    })?;
                match &f.content {
                    Content::Memory(b) => self.blobs.put_bytes(b, digest)?,
                    Content::Spooled(p) => self.blobs.commit(
                        Spooled {
                            path: p.clone(),
                            digest: f.digest.clone(),
                            size: f.size,
                        },
                        digest,
                    )?,
                }
            }
        }
        Ok(())
    }

    /// Imports every `images/preload/*.tar` with `pinned = true`, skipping archives whose size
    /// and mtime match the last successful import (recorded in `preload/.imported.json`) while
    /// their records still exist. A failing archive is logged (error level) and the others are
    /// still imported. Returns the records created by this call (skipped archives add none).
    pub fn import_preload(&self) -> Result<Vec<ImageRecord>, ImageError> {
        let _lock = self.lock()?;
        let dir = self.preload_dir();
        let state_path = dir.join(PRELOAD_STATE);
        let mut state: BTreeMap<String, PreloadEntry> = match fs::read(&state_path) {
            Ok(d) => serde_json::from_slice(&d).unwrap_or_else(|e| {
                log::warn!("ignoring invalid {}: {e}", state_path.display());
                BTreeMap::new()
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => BTreeMap::new(),
            Err(source) => {
                return Err(ImageError::Io {
                    path: state_path,
                    source,
                })
            }
        };
        let mut archives = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err(&dir))? {
            let entry = entry.map_err(io_err(&dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.starts_with('.') || !name.ends_with(".tar") {
                continue;
            }
            match fs::metadata(&path) {
                Ok(m) if m.is_file() => archives.push((name, path, m)),
                Ok(_) => {}
                Err(e) => log::error!("preload archive {}: {e}", path.display()),
            }
        }
        archives.sort_by(|a, b| a.0.cmp(&b.0));
        let present: HashSet<String> = archives.iter().map(|a| a.0.clone()).collect();
        state.retain(|k, _| present.contains(k));

        let mut out = Vec::new();
        for (name, path, meta) in archives {
            let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
            if let Some(prev) = state.get(&name) {
                let unchanged = prev.size == meta.len() && prev.mtime_ns == mtime_ns;
                let intact = prev
                    .references
                    .iter()
                    .all(|r| matches!(self.records.read(r), Ok(Some(_))));
                if unchanged && intact {
                    log::debug!("preload archive {} unchanged, skipped", path.display());
                    continue;
                }
            }
            let opts = ImportOptions {
                reference: None,
                pinned: true,
            };
            match self.import_locked(&path, &opts) {
                Ok(recs) => {
                    log::info!(
                        "preloaded {} image name(s) from {}",
                        recs.len(),
                        path.display()
                    );
                    state.insert(
                        name,
                        PreloadEntry {
                            size: meta.len(),
                            mtime_ns,
                            references: recs.iter().map(|r| r.reference.clone()).collect(),
                        },
                    );
                    out.extend(recs);
                }
                Err(e) => {
                    log::error!("preloading {}: {e}", path.display());
                    state.remove(&name);
                }
            }
        }
        fsutil::write_json_atomic(&state_path, &state).map_err(io_err(&state_path))?;
        Ok(out)
    }
}
