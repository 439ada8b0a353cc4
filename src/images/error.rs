//! error: the image store's and the pull's errors, in one module because they nest both ways
//! (a pull that fails to commit carries the store's error; the store's pull entry point
//! returns the pull's), so neither `store` nor `pull` imports the other for an error type.

use std::io;
use std::path::PathBuf;

use super::archive::ArchiveError;
use super::blobs::BlobError;
use super::client::RegistryError;
use super::layer::LayerError;
use super::records::RecordError;
use super::reference::ReferenceError;
use super::registry::RegistryConfigError;
use super::resolve::ResolveError;

/// Errors of the image store.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error(transparent)]
    Reference(#[from] ReferenceError),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error(transparent)]
    Blob(#[from] BlobError),
    #[error(transparent)]
    Layer(#[from] LayerError),
    #[error(transparent)]
    Record(#[from] RecordError),
    #[error("image store i/o on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("locking image store {path}: {source}")]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("image {digest} in {archive} has no name: pass a reference to name it")]
    NoName { archive: PathBuf, digest: String },
    #[error(
        "image {digest} in {archive} is named only by tag {tag:?}: pass a reference to name it"
    )]
    TagOnly {
        archive: PathBuf,
        digest: String,
        tag: String,
    },
    #[error("archive {archive} holds {count} images: a single reference cannot name them all")]
    ReferenceForManyImages { archive: PathBuf, count: usize },
    #[error("reference {reference} pins digest {expected} but the archive's image is {actual}")]
    ReferenceDigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    #[error("image {query:?} not found")]
    NotFound { query: String },
    #[error("{query:?} matches several images: {matches}")]
    Ambiguous { query: String, matches: String },
    #[error("image {reference} ({digest}) is in use by {holders}: stop them first")]
    Leased {
        reference: String,
        digest: String,
        holders: String,
    },
    #[error("image record {reference} has a malformed digest")]
    BadRecord { reference: String },
    #[error(transparent)]
    Pull(#[from] PullError),
    #[error(transparent)]
    RegistryConfig(#[from] RegistryConfigError),
    #[error("image config {digest} is invalid: {source}")]
    Config {
        digest: String,
        #[source]
        source: serde_json::Error,
    },
}

/// Errors of a pull.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("pull {reference}: storing image {digest}: {source}")]
    Commit {
        reference: String,
        digest: String,
        #[source]
        source: Box<ImageError>,
    },
}
