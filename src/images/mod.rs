//! The image store under `<root-dir>/images`: image reference normalization, import of OCI
//! and docker-archive tarballs into content-addressed blobs, layers unpacked once per diff_id
//! for overlayfs, image records, leases held by running containers, and garbage collection.
//!
//! Layout:
//! - `blobs/sha256/<hex>`: verified blobs (manifests, configs, layer tarballs).
//! - `layers/<diffid-hex>/`: unpacked layer roots (`.tmp-*` while being unpacked).
//! - `refs/<sha256 of reference>`: one JSON [`ImageRecord`] per image name.
//! - `leases/<holder>`: the manifest digest a container holds.
//! - `used/<manifest hex>`: mtime = the last time a container took a lease on the image (GC).
//! - `preload/*.tar`: archives imported pinned by [`ImageStore::import_preload`].
//! - `tmp/`: import work areas; `lock`: the flock serializing mutations.

mod archive;
mod blobs;
pub mod digest;
mod gc;
mod layer;
mod manifest;
mod records;
pub mod reference;
mod store;
mod unpack;

#[cfg(test)]
mod tests;

pub use archive::ArchiveError;
pub use blobs::BlobError;
pub use digest::Digest;
pub use gc::{
    FsStats, FsUsage, GcReport, ImageGcPolicy, ImageUsage, PinnedImages, RemovedImage, Statvfs,
};
pub use layer::LayerError;
pub use records::{ImageRecord, LayerRecord, RecordError};
pub use reference::{Reference, ReferenceError};
pub use store::{ImageError, ImageStore, ImportOptions, MIN_DIGEST_PREFIX};
pub use unpack::UnpackError;
