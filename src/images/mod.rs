//! The image store under `<root-dir>/images`: image reference normalization, import of OCI
//! and docker-archive tarballs into content-addressed blobs, layers unpacked once per diff_id
//! for overlayfs, image records, leases held by running containers, and garbage collection.
//!
//! Layout:
//! - `blobs/sha256/<hex>`: verified blobs (manifests, configs, layer tarballs).
//! - `layers/<diffid-hex>/`: unpacked layer roots (`.tmp-*` while being unpacked).
//! - `layers/mount-targets/`: the shared layer holding `/etc/hosts`, `/etc/hostname` and
//!   `/etc/resolv.conf`, stacked on images that lack them ([`mount_targets`]).
//! - `refs/<sha256 of reference>`: one JSON [`ImageRecord`] per image name.
//! - `leases/<holder>`: the manifest digest a container holds.
//! - `used/<manifest hex>`: mtime = the last time a container took a lease on the image (GC).
//! - `preload/*.tar`: archives imported pinned by [`ImageStore::import_preload`].
//! - `tmp/`: import work areas; `tmp/pulls/`: registry downloads (`<hex>.partial` while
//!   downloading, kept to resume); `lock`: the flock serializing mutations.
//!
//! Crash safety: a blob is fsynced before it is renamed into place, a layer directory is
//! synced (syncfs) before it is renamed into place, and the record naming an image is written
//! durably last, so a power cut leaves either the old state or the new one, plus temporary
//! files that the next open removes. `check` verifies the whole store and repairs what it can.
//!
//! Pulls from OCI registries: `registry` (mirrors, auth, TLS config), `client` (the
//! distribution API over ureq), `resolve` (what the fetched
//! documents mean, pure), `pull` (`ImageStore::pull`).

mod archive;
mod blobs;
mod check;
mod client;
pub mod digest;
mod error;
mod gc;
mod import;
mod layer;
mod manifest;
pub mod mount_targets;
mod pull;
mod records;
pub mod reference;
pub mod registry;
mod resolve;
mod store;
mod unpack;

#[cfg(test)]
mod tests;

pub use archive::ArchiveError;
pub use blobs::BlobError;
pub use check::{CheckReport, Finding, FindingKind};
pub use client::{
    parse_challenge, Challenge, FetchedManifest, RegistryError, RetryPolicy, TokenError, What,
};
pub use digest::Digest;
pub use error::{ImageError, PullError};
pub use gc::{
    FsStats, FsUsage, GcReport, ImageGcPolicy, ImageUsage, PinnedImages, RemovedImage, Statvfs,
};
pub use import::ImportOptions;
pub use layer::{unpack_layer_file, LayerError};
pub use manifest::HostPlatform;
pub use pull::{PullProgress, PULL_CONCURRENCY};
pub use records::{ImageRecord, LayerRecord, RecordError};
pub use reference::{Reference, ReferenceError};
pub use registry::{RegistryConfig, RegistryConfigError};
pub use resolve::{decode_document, plan_image, Document, ImageManifest, ImagePlan, ResolveError};
pub use store::{ImageStore, MIN_DIGEST_PREFIX};
pub use unpack::{unpack, UnpackError};
