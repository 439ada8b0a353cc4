//! images::resolve: what a registry's documents mean for a pull, decided without I/O — a
//! fetched document is an image manifest or an index (by media type, else by shape); from an
//! index, the entry for this machine; from an image manifest, its config and layer descriptors
//! checked (schema version, media types, digests, sizes); from the image config, the diff_ids
//! paired with the layers. `pull` fetches the documents and calls these; being pure, they are
//! what the `registry_manifest` fuzz target exercises (fuzz/README.md).

use super::archive::PlannedLayer;
use super::client::{FetchedManifest, MT_DOCKER_MANIFEST};
use super::digest::Digest;
use super::manifest::{
    is_index_media_type, HostPlatform, RawConfig, RawIndex, RawManifest, MT_OCI_CONFIG,
    MT_OCI_MANIFEST,
};
use super::pull::PullError;

const MT_DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";

/// What a fetched manifest document asks the pull to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Document {
    /// An index (or Docker manifest list): fetch the manifest `chosen` for this machine.
    Index { chosen: Digest },
    /// An image manifest: fetch its config, then its layers.
    Manifest(ImageManifest),
}

/// An image manifest's checked descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageManifest {
    /// The manifest's own digest (for error messages).
    pub digest: Digest,
    pub config: Digest,
    pub config_size: u64,
    /// Layers in order: digest, size, media type.
    pub layers: Vec<(Digest, u64, String)>,
}

/// The layers of an image with their diff_ids, from its manifest and config.
#[derive(Debug, Clone)]
pub struct ImagePlan {
    pub layers: Vec<PlannedLayer>,
    /// The config's `created`, if any.
    pub created: Option<String>,
}

/// Decodes a fetched manifest or index of reference `name` for a machine of platform `host`.
pub fn decode_document(
    name: &str,
    doc: &FetchedManifest,
    host: &HostPlatform,
) -> Result<Document, PullError> {
    let bad = |detail: String| PullError::BadManifest {
        reference: name.to_string(),
        digest: doc.digest.to_string(),
        detail,
    };
    if is_index(name, doc)? {
        let index: RawIndex = serde_json::from_slice(&doc.bytes).map_err(|e| bad(e.to_string()))?;
        let chosen =
            host.select(&index.manifests)
                .map_err(|available| PullError::NoMatchingPlatform {
                    reference: name.to_string(),
                    digest: doc.digest.to_string(),
                    wanted: host.to_string(),
                    available,
                })?;
        let chosen = Digest::parse(&chosen.digest)
            .map_err(|_| bad(format!("invalid digest {:?}", chosen.digest)))?;
        return Ok(Document::Index { chosen });
    }
    let m: RawManifest = serde_json::from_slice(&doc.bytes).map_err(|e| bad(e.to_string()))?;
    if m.schema_version != 2 {
        return Err(bad(format!("schemaVersion {} is not 2", m.schema_version)));
    }
    let config_mt = m.config.media_type.as_deref().unwrap_or(MT_OCI_CONFIG);
    if config_mt != MT_OCI_CONFIG && config_mt != MT_DOCKER_CONFIG {
        return Err(PullError::UnsupportedMediaType {
            reference: name.to_string(),
            what: "config",
            digest: m.config.digest.clone(),
            media_type: config_mt.to_string(),
        });
    }
    let config = Digest::parse(&m.config.digest)
        .map_err(|_| bad(format!("invalid config digest {:?}", m.config.digest)))?;
    let size = |digest: &str, size: i64| -> Result<u64, PullError> {
        u64::try_from(size).map_err(|_| bad(format!("negative size for {digest}")))
    };
    let mut layers = Vec::new();
    for l in &m.layers {
        let mt = l.media_type.as_deref().unwrap_or("");
        if !is_layer_media_type(mt) {
            return Err(PullError::UnsupportedMediaType {
                reference: name.to_string(),
                what: "layer",
                digest: l.digest.clone(),
                media_type: mt.to_string(),
            });
        }
        let d = Digest::parse(&l.digest)
            .map_err(|_| bad(format!("invalid layer digest {:?}", l.digest)))?;
        layers.push((d, size(&l.digest, l.size)?, mt.to_string()));
    }
    Ok(Document::Manifest(ImageManifest {
        digest: doc.digest.clone(),
        config_size: size(&m.config.digest, m.config.size)?,
        config,
        layers,
    }))
}

/// Pairs the manifest's layers with the diff_ids of its (verified) config `config`.
pub fn plan_image(
    name: &str,
    manifest: &ImageManifest,
    config: &[u8],
) -> Result<ImagePlan, PullError> {
    let bad_config = |detail: String| PullError::BadManifest {
        reference: name.to_string(),
        digest: manifest.config.to_string(),
        detail,
    };
    let c: RawConfig =
        serde_json::from_slice(config).map_err(|e| bad_config(format!("image config: {e}")))?;
    if c.rootfs.diff_ids.len() != manifest.layers.len() {
        return Err(PullError::BadManifest {
            reference: name.to_string(),
            digest: manifest.digest.to_string(),
            detail: format!(
                "{} layers but the config lists {} diff_ids",
                manifest.layers.len(),
                c.rootfs.diff_ids.len()
            ),
        });
    }
    let mut layers = Vec::new();
    for ((digest, size, media_type), diff) in manifest.layers.iter().zip(&c.rootfs.diff_ids) {
        let diff_id =
            Digest::parse(diff).map_err(|_| bad_config(format!("invalid diff_id {diff:?}")))?;
        layers.push(PlannedLayer {
            digest: digest.clone(),
            diff_id,
            size: *size,
            media_type: media_type.clone(),
        });
    }
    Ok(ImagePlan {
        layers,
        created: c.created,
    })
}

/// Whether `doc` is an index: by its media type, else (OCI allows documents without one) by
/// its shape.
fn is_index(name: &str, doc: &FetchedManifest) -> Result<bool, PullError> {
    let unsupported = |media_type: &str| PullError::UnsupportedMediaType {
        reference: name.to_string(),
        what: "manifest",
        digest: doc.digest.to_string(),
        media_type: media_type.to_string(),
    };
    match doc.media_type.as_deref() {
        Some(mt) if is_index_media_type(mt) => Ok(true),
        Some(MT_OCI_MANIFEST | MT_DOCKER_MANIFEST) => Ok(false),
        Some(other) => Err(unsupported(other)),
        None => {
            let v: serde_json::Value =
                serde_json::from_slice(&doc.bytes).map_err(|e| PullError::BadManifest {
                    reference: name.to_string(),
                    digest: doc.digest.to_string(),
                    detail: e.to_string(),
                })?;
            if v.get("manifests").is_some() {
                Ok(true)
            } else if v.get("config").is_some() && v.get("layers").is_some() {
                Ok(false)
            } else {
                Err(unsupported("(none)"))
            }
        }
    }
}

fn is_layer_media_type(mt: &str) -> bool {
    matches!(
        mt,
        "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.oci.image.layer.v1.tar+zstd"
            | "application/vnd.docker.image.rootfs.diff.tar"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.zstd"
    )
}
