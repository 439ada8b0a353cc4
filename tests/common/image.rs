//! The busybox test image, built offline from Debian's busybox-static: an OCI archive with
//! one gzip layer (bin/busybox and its applet links, /etc/passwd, /etc/group, /tmp). Shared by
//! the root integration tests and the benchmarks (`#[path]`-included there).
#![allow(dead_code)]

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use sha2::{Digest, Sha256};

pub const BUSYBOX: &str = "docker.io/library/busybox:1.35";

pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

pub fn build_busybox_archive(out: &Path) -> io::Result<()> {
    // Layer: bin/busybox and its applet links, /etc/passwd and /etc/group, /tmp.
    let mut layer = tar::Builder::new(Vec::new());
    let add_dir = |b: &mut tar::Builder<Vec<u8>>, name: &str, mode: u32| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(mode);
        h.set_size(0);
        h.set_mtime(1_700_000_000);
        b.append_data(&mut h, name, std::io::empty())
    };
    for (d, m) in [
        ("bin", 0o755),
        ("etc", 0o755),
        ("tmp", 0o1777),
        ("root", 0o700),
    ] {
        add_dir(&mut layer, d, m)?;
    }
    let busybox = fs::read("/bin/busybox")?;
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o755);
    h.set_size(busybox.len() as u64);
    h.set_mtime(1_700_000_000);
    layer.append_data(&mut h, "bin/busybox", busybox.as_slice())?;
    let list = std::process::Command::new("/bin/busybox")
        .arg("--list")
        .output()?;
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        if applet == "busybox" || applet.is_empty() {
            continue;
        }
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        h.set_mtime(1_700_000_000);
        layer.append_link(&mut h, format!("bin/{applet}"), "busybox")?;
    }
    for (name, content) in [
        (
            "etc/passwd",
            "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
        ),
        ("etc/group", "root:x:0:\nnogroup:x:65534:\n"),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(content.len() as u64);
        h.set_mtime(1_700_000_000);
        layer.append_data(&mut h, name, content.as_bytes())?;
    }
    let layer_tar = layer.into_inner()?;
    let diff_id = format!("sha256:{}", sha256_hex(&layer_tar));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&layer_tar)?;
    let layer_gz = gz.finish()?;
    let config = serde_json::json!({
        "architecture": oci_arch(),
        "os": "linux",
        "created": "2024-01-01T00:00:00Z",
        "config": {
            "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            "Cmd": ["sh"]
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]}
    });
    let config_bytes = serde_json::to_vec(&config).map_err(io::Error::other)?;
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": format!("sha256:{}", sha256_hex(&config_bytes)),
            "size": config_bytes.len()
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
            "digest": format!("sha256:{}", sha256_hex(&layer_gz)),
            "size": layer_gz.len()
        }]
    });
    let manifest_bytes = serde_json::to_vec(&manifest).map_err(io::Error::other)?;
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{}", sha256_hex(&manifest_bytes)),
            "size": manifest_bytes.len(),
            "annotations": {"org.opencontainers.image.ref.name": BUSYBOX}
        }]
    });
    let mut archive = tar::Builder::new(fs::File::create(out)?);
    let mut add = |name: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        archive.append_data(&mut h, name, data)
    };
    add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    add(
        "index.json",
        &serde_json::to_vec(&index).map_err(io::Error::other)?,
    )?;
    for blob in [&config_bytes, &manifest_bytes, &layer_gz] {
        add(&format!("blobs/sha256/{}", sha256_hex(blob)), blob)?;
    }
    archive.finish()
}

fn oci_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        other => other,
    }
}
