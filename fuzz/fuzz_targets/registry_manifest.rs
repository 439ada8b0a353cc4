//! What a registry returns for a pull: a manifest or index document (with the media type of
//! its Content-Type header, or none) decoded for this machine, and for an image manifest the
//! image config paired with its layers. Input: one byte choosing the media type (and, with its
//! high bit, an arm/v7 host instead of amd64), the document, a NUL byte, the config.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podvisor::images::{
    decode_document, plan_image, Digest, Document, FetchedManifest, HostPlatform,
};

const MEDIA_TYPES: [Option<&str>; 6] = [
    None,
    Some("application/vnd.oci.image.index.v1+json"),
    Some("application/vnd.oci.image.manifest.v1+json"),
    Some("application/vnd.docker.distribution.manifest.list.v2+json"),
    Some("application/vnd.docker.distribution.manifest.v2+json"),
    Some("application/json"),
];

fuzz_target!(|data: &[u8]| {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let (document, config) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let doc = FetchedManifest {
        bytes: document.to_vec(),
        digest: Digest::of(document),
        media_type: MEDIA_TYPES[usize::from(kind) % MEDIA_TYPES.len()].map(str::to_string),
    };
    let host = HostPlatform {
        os: "linux".to_string(),
        architecture: if kind & 0x80 == 0 { "amd64" } else { "arm" }.to_string(),
        variant: (kind & 0x80 != 0).then(|| "v7".to_string()),
    };
    if let Ok(Document::Manifest(m)) = decode_document("fuzz/image:tag", &doc, &host) {
        if let Ok(plan) = plan_image("fuzz/image:tag", &m, config) {
            assert_eq!(plan.layers.len(), m.layers.len());
        }
    }
});
