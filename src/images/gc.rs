//! gc: image garbage collection and pinning, as the kubelet's image GC manager does it, minus
//! the part that hurts air-gapped nodes.
//!
//! - **Pinned** images are never collected: images imported from the preload directory (their
//!   records carry `pinned`) and every image a current manifest references ([`PinnedImages`],
//!   built by the caller from the pods it runs). The kubelet only pins what the runtime marks
//!   pinned, so a node that cannot pull loses images its manifests still need.
//! - **In use**: an image a container holds a lease on (running or exited, not yet removed).
//! - **Threshold GC** ([`ImageStore::garbage_collect`], `pkg/kubelet/images/image_gc_manager.go`):
//!   when the image filesystem's usage reaches `imageGCHighThresholdPercent` (85), unused,
//!   unpinned images at least `imageMinimumGCAge` (2 min) old are deleted least recently used
//!   first until usage is below `imageGCLowThresholdPercent` (80). A high threshold of 100
//!   disables it. Usage is measured again after each deletion, so layers shared with kept
//!   images (which deleting frees nothing) do not count as freed.
//! - **Prune** ([`ImageStore::prune`], `podvisor image prune`): every unused, unpinned image,
//!   whatever the disk usage and age.
//! - **Eviction reclaim** ([`ImageStore::delete_unused_images`], the eviction manager under
//!   disk pressure): every unused, unpinned image at least `imageMinimumGCAge` old, whatever
//!   the disk usage.
//!
//! "Last used" is the mtime of `images/used/<manifest hex>`, touched whenever a container takes
//! a lease; "first seen" is the record's import/pull time. An image with several names is one
//! image: all its names go together.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::digest::Digest;
use super::error::ImageError;
use super::records::ImageRecord;
use super::reference::Reference;
use super::store::ImageStore;

/// The kubelet's image GC settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// `imageGCHighThresholdPercent`: usage at which GC starts (100 disables GC).
    pub high_threshold_percent: u8,
    /// `imageGCLowThresholdPercent`: usage GC brings the filesystem under.
    pub low_threshold_percent: u8,
    /// `imageMinimumGCAge`: images younger than this are never collected.
    pub minimum_age: Duration,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            minimum_age: Duration::from_secs(120),
        }
    }
}

/// Size and free space of a filesystem, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsUsage {
    pub capacity: u64,
    pub available: u64,
}

impl FsUsage {
    /// Used share in percent, rounded up as the kubelet computes it (`100 - available*100/capacity`).
    pub fn used_percent(&self) -> u64 {
        if self.capacity == 0 {
            return 0;
        }
        100 - (u128::from(self.available.min(self.capacity)) * 100 / u128::from(self.capacity))
            as u64
    }
}

/// Where the collector reads filesystem usage (a seam for tests).
pub trait FsStats {
    fn usage(&self, path: &Path) -> io::Result<FsUsage>;
}

/// The real filesystem, through statvfs(2).
#[derive(Debug, Clone, Copy, Default)]
pub struct Statvfs;

impl FsStats for Statvfs {
    // The block counts and sizes are 32 bits wide on 32-bit ARM (armhf) and 64 bits elsewhere:
    // the casts widen there and are no-ops here.
    #[allow(clippy::unnecessary_cast)]
    fn usage(&self, path: &Path) -> io::Result<FsUsage> {
        let st = nix::sys::statvfs::statvfs(path).map_err(io::Error::from)?;
        let frag = st.fragment_size() as u64;
        Ok(FsUsage {
            capacity: (st.blocks() as u64).saturating_mul(frag),
            // Blocks available to unprivileged users, as df and the kubelet's cadvisor report.
            available: (st.blocks_available() as u64).saturating_mul(frag),
        })
    }
}

/// Images that must stay: the references current manifests use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinnedImages {
    /// Normalized references (`docker.io/library/busybox:1.36`).
    references: BTreeSet<String>,
    /// Manifest digests of references written with `@sha256:...`.
    digests: BTreeSet<String>,
}

impl PinnedImages {
    /// Pins the images named by `images` (as written in manifests). Names that do not parse
    /// pin nothing: such a manifest cannot start a container anyway.
    pub fn from_images<'a>(images: impl IntoIterator<Item = &'a str>) -> PinnedImages {
        let mut p = PinnedImages::default();
        for image in images {
            if let Ok(r) = Reference::parse(image) {
                if let Some(d) = r.digest() {
                    p.digests.insert(d.to_string());
                }
                p.references.insert(r.to_string());
            }
        }
        p
    }

    /// The manifest images of every container (init and app) of `pods`.
    pub fn from_pods<'a>(
        pods: impl IntoIterator<Item = &'a k8s_openapi::api::core::v1::Pod>,
    ) -> Self {
        let mut images: Vec<&str> = Vec::new();
        for pod in pods {
            let Some(spec) = pod.spec.as_ref() else {
                continue;
            };
            let inits = spec.init_containers.iter().flatten();
            for c in inits.chain(spec.containers.iter()) {
                if let Some(i) = c.image.as_deref() {
                    images.push(i);
                }
            }
        }
        PinnedImages::from_images(images)
    }

    /// Why `rec` is pinned, if it is.
    fn reason(&self, rec: &ImageRecord) -> Option<&'static str> {
        if rec.pinned {
            Some("preloaded")
        } else if self.references.contains(&rec.reference) || self.digests.contains(&rec.digest) {
            Some("manifest")
        } else {
            None
        }
    }
}

/// One image (one manifest digest, all its names) as the collector sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUsage {
    pub digest: String,
    /// Its names, sorted.
    pub references: Vec<String>,
    /// Compressed size of its blobs (shared layers counted in full).
    pub size: u64,
    /// Earliest import or pull time of any of its names.
    pub first_seen: SystemTime,
    /// Last time a container took a lease on it.
    pub last_used: Option<SystemTime>,
    /// Container(s) holding a lease.
    pub in_use_by: Vec<String>,
    /// Why it is pinned, if it is: `preloaded` or `manifest` (referenced by a pod).
    pub pinned: Option<&'static str>,
}

impl ImageUsage {
    fn lru_key(&self) -> (SystemTime, SystemTime) {
        (self.last_used.unwrap_or(self.first_seen), self.first_seen)
    }

    /// Whether deleting unused images at `now` may take it: no container holds it, it is not
    /// pinned, and it was first seen at least `minimum_age` ago (the kubelet's `freeSpace`
    /// skips younger images, for threshold GC and the eviction manager's
    /// `DeleteUnusedImages` alike). A first-seen time in the future counts as brand new.
    pub fn reclaimable(&self, minimum_age: Duration, now: SystemTime) -> bool {
        let age = now
            .duration_since(self.first_seen)
            .unwrap_or(Duration::ZERO);
        self.in_use_by.is_empty() && self.pinned.is_none() && age >= minimum_age
    }
}

/// An image the collector or prune removed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemovedImage {
    pub digest: String,
    pub references: Vec<String>,
    pub size: u64,
    pub reason: String,
}

/// What one threshold GC run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GcReport {
    pub before: FsUsage,
    pub after: FsUsage,
    pub removed: Vec<RemovedImage>,
    /// Set when usage stayed above the low threshold: what kept the rest.
    pub shortfall: Option<String>,
}

fn parse_time(s: &str) -> Option<SystemTime> {
    let ts: k8s_openapi::jiff::Timestamp = s.parse().ok()?;
    Some(SystemTime::from(ts))
}

impl ImageStore {
    fn used_dir(&self) -> PathBuf {
        self.dir.join("used")
    }

    /// Records that an image was used now (best effort: a failure only makes GC see it as
    /// older than it is, and is logged).
    pub(super) fn mark_used(&self, digest: &Digest) {
        let dir = self.used_dir();
        let path = dir.join(digest.hex());
        let r = fs::create_dir_all(&dir).and_then(|()| {
            fs::OpenOptions::new()
                .create(true)
                .truncate(true)
                .write(true)
                .open(&path)
                .and_then(|f| f.set_modified(SystemTime::now()))
        });
        if let Err(e) = r {
            log::warn!(
                "image store: recording use of {digest} in {}: {e}",
                path.display()
            );
        }
    }

    fn last_used(&self, digest: &str) -> Option<SystemTime> {
        let digest = Digest::parse(digest).ok()?;
        fs::metadata(self.used_dir().join(digest.hex()))
            .and_then(|m| m.modified())
            .ok()
    }

    /// Removes use marks of images the store no longer has. The caller holds the lock.
    pub(super) fn prune_used_marks(&self, kept: &std::collections::HashSet<Digest>) {
        let Ok(entries) = fs::read_dir(self.used_dir()) else {
            return;
        };
        for e in entries.flatten() {
            let keep = e
                .file_name()
                .to_str()
                .and_then(Digest::from_hex)
                .is_some_and(|d| kept.contains(&d));
            if !keep {
                let _ = fs::remove_file(e.path());
            }
        }
    }

    /// Every intact image with its usage, pin and lease state, oldest use first.
    pub fn image_usage(&self, pinned: &PinnedImages) -> Result<Vec<ImageUsage>, ImageError> {
        let mut holders: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (holder, digest) in self.leases.all()? {
            holders.entry(digest.to_string()).or_default().push(holder);
        }
        let mut by_digest: BTreeMap<String, ImageUsage> = BTreeMap::new();
        for rec in self.list()? {
            let first = parse_time(&rec.imported_at).unwrap_or(SystemTime::UNIX_EPOCH);
            let u = by_digest
                .entry(rec.digest.clone())
                .or_insert_with(|| ImageUsage {
                    digest: rec.digest.clone(),
                    references: Vec::new(),
                    size: rec.size,
                    first_seen: first,
                    last_used: self.last_used(&rec.digest),
                    in_use_by: holders.get(&rec.digest).cloned().unwrap_or_default(),
                    pinned: None,
                });
            u.references.push(rec.reference.clone());
            u.first_seen = u.first_seen.min(first);
            if u.pinned.is_none() {
                u.pinned = pinned.reason(&rec);
            }
        }
        let mut out: Vec<ImageUsage> = by_digest.into_values().collect();
        for u in &mut out {
            u.references.sort();
        }
        out.sort_by_key(ImageUsage::lru_key);
        Ok(out)
    }

    /// Removes every name of the image `digest`. The caller holds the lock and checked that
    /// no lease holds it.
    fn remove_image_locked(&self, u: &ImageUsage) -> Result<(), ImageError> {
        for r in &u.references {
            self.records.remove(r)?;
        }
        self.gc_locked()
    }

    /// Threshold image GC (see the module docs). `now` decides the minimum age.
    pub fn garbage_collect(
        &self,
        policy: &ImageGcPolicy,
        pinned: &PinnedImages,
        fs_stats: &dyn FsStats,
        now: SystemTime,
    ) -> Result<GcReport, ImageError> {
        let io = |source| ImageError::Io {
            path: self.dir.clone(),
            source,
        };
        let before = fs_stats.usage(&self.dir).map_err(io)?;
        let mut report = GcReport {
            before,
            after: before,
            removed: Vec::new(),
            shortfall: None,
        };
        let high = u64::from(policy.high_threshold_percent);
        let low = u64::from(policy.low_threshold_percent);
        if high >= 100 || before.used_percent() < high {
            return Ok(report);
        }
        let _lock = self.lock()?;
        let (mut in_use, mut pinned_n, mut young) = (0usize, 0usize, 0usize);
        for u in self.image_usage(pinned)? {
            if report.after.used_percent() < low {
                break;
            }
            if !u.in_use_by.is_empty() {
                in_use += 1;
                continue;
            }
            if u.pinned.is_some() {
                pinned_n += 1;
                continue;
            }
            let age = now.duration_since(u.first_seen).unwrap_or(Duration::ZERO);
            if age < policy.minimum_age {
                young += 1;
                continue;
            }
            let used_before = report.after.used_percent();
            self.remove_image_locked(&u)?;
            report.after = fs_stats.usage(&self.dir).map_err(io)?;
            let last = match u.last_used {
                Some(t) => format!("last used {}", crate::logs::timestamp::format_timestamp(t)),
                None => "never used".to_string(),
            };
            let reason = format!(
                "image filesystem {used_before}% used >= imageGCHighThresholdPercent {high}%: \
                 freeing down to {low}%; unused, {last}"
            );
            log::info!(
                "image GC: removed {} ({}, {} bytes): {reason}",
                u.references.join(", "),
                u.digest,
                u.size
            );
            report.removed.push(RemovedImage {
                digest: u.digest.clone(),
                references: u.references.clone(),
                size: u.size,
                reason,
            });
        }
        if report.after.used_percent() >= low {
            report.shortfall = Some(format!(
                "image filesystem still {}% used (low threshold {low}%): {in_use} image(s) in \
                 use, {pinned_n} pinned, {young} younger than {}s",
                report.after.used_percent(),
                policy.minimum_age.as_secs()
            ));
        }
        Ok(report)
    }

    /// Removes every unused, unpinned image now (`podvisor image prune`). With `dry_run`
    /// nothing is removed and the list says what would be.
    pub fn prune(
        &self,
        pinned: &PinnedImages,
        dry_run: bool,
    ) -> Result<Vec<RemovedImage>, ImageError> {
        self.remove_unused(
            pinned,
            dry_run,
            Duration::ZERO,
            SystemTime::now(),
            "pruned: not used by any container, not pinned",
        )
    }

    /// The eviction manager's image reclaim under disk pressure (the kubelet's
    /// `DeleteUnusedImages`): every unused, unpinned image at least `minimum_age`
    /// (`imageMinimumGCAge`) old at `now`, whatever the disk usage.
    pub fn delete_unused_images(
        &self,
        pinned: &PinnedImages,
        minimum_age: Duration,
        now: SystemTime,
    ) -> Result<Vec<RemovedImage>, ImageError> {
        let reason = format!(
            "disk pressure: not used by any container, not pinned, older than imageMinimumGCAge {}s",
            minimum_age.as_secs()
        );
        self.remove_unused(pinned, false, minimum_age, now, &reason)
    }

    fn remove_unused(
        &self,
        pinned: &PinnedImages,
        dry_run: bool,
        minimum_age: Duration,
        now: SystemTime,
        reason: &str,
    ) -> Result<Vec<RemovedImage>, ImageError> {
        let _lock = self.lock()?;
        let mut removed = Vec::new();
        for u in self.image_usage(pinned)? {
            if !u.reclaimable(minimum_age, now) {
                continue;
            }
            if !dry_run {
                for r in &u.references {
                    self.records.remove(r)?;
                }
            }
            removed.push(RemovedImage {
                reason: reason.to_string(),
                digest: u.digest,
                references: u.references,
                size: u.size,
            });
        }
        // One collection for all removed names (threshold GC collects after each image
        // because it measures the disk in between).
        if !dry_run && !removed.is_empty() {
            self.gc_locked()?;
        }
        Ok(removed)
    }
}
