//! Store-level tests: archives (OCI layouts and docker-archives) built in memory, imported
//! into stores in tempdirs; atomicity, GC, leases, preload and resolution.

mod gc;
mod import;
mod store;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::PathBuf;

use serde_json::{json, Value};

use super::layer::Compression;
use super::manifest::HostPlatform;
use super::*;

fn sha(data: &[u8]) -> String {
    Digest::of(data).to_string()
}

/// An uncompressed layer tar holding `files` (and their parent directories).
fn layer_tar(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_gnu();
        h.set_path(name).expect("path");
        h.set_size(data.len() as u64);
        h.set_mode(0o755);
        h.set_mtime(1_600_000_000);
        h.set_uid(0);
        h.set_gid(0);
        h.set_cksum();
        b.append(&h, *data).expect("append");
    }
    b.into_inner().expect("finish")
}

fn compress(data: &[u8], c: Compression) -> Vec<u8> {
    match c {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).expect("gzip");
            e.finish().expect("gzip")
        }
        Compression::Zstd => zstd::encode_all(data, 1).expect("zstd"),
    }
}

fn tar_of(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in files {
        let mut h = tar::Header::new_ustar();
        h.set_path(name).expect("path");
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        b.append(&h, data.as_slice()).expect("append");
    }
    b.into_inner().expect("finish")
}

/// An OCI image layout under construction.
#[derive(Default)]
struct Oci {
    blobs: BTreeMap<String, Vec<u8>>,
    index: Vec<Value>,
}

struct Built {
    manifest: Value,
    config_digest: String,
}

impl Oci {
    fn blob(&mut self, data: Vec<u8>) -> Value {
        let d = sha(&data);
        let size = data.len();
        self.blobs.insert(d.clone(), data);
        json!({"digest": d, "size": size})
    }

    /// Adds an image with the given layers; returns its manifest descriptor.
    fn image(&mut self, layers: &[(Vec<u8>, Compression)], tag: &str) -> Built {
        let mut descs = Vec::new();
        let mut diff_ids = Vec::new();
        for (tar, c) in layers {
            diff_ids.push(sha(tar));
            let mut d = self.blob(compress(tar, *c));
            d["mediaType"] = json!(c.oci_media_type());
            descs.push(d);
        }
        let host = HostPlatform::detect();
        let config = json!({
            "created": "2024-01-02T03:04:05Z",
            "architecture": host.architecture,
            "os": host.os,
            "config": {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"], "Labels": {"tag": tag}},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        });
        let mut cdesc = self.blob(serde_json::to_vec(&config).expect("json"));
        let config_digest = cdesc["digest"].as_str().expect("digest").to_string();
        cdesc["mediaType"] = json!("application/vnd.oci.image.config.v1+json");
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": cdesc,
            "layers": descs,
        });
        let mut m = self.blob(serde_json::to_vec(&manifest).expect("json"));
        m["mediaType"] = json!("application/vnd.oci.image.manifest.v1+json");
        Built {
            manifest: m,
            config_digest,
        }
    }

    fn add(&mut self, mut desc: Value, annotations: Value) {
        if !annotations.is_null() {
            desc["annotations"] = annotations;
        }
        self.index.push(desc);
    }

    fn nested_index(&mut self, entries: Vec<Value>) -> Value {
        let idx = json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": entries});
        let mut d = self.blob(serde_json::to_vec(&idx).expect("json"));
        d["mediaType"] = json!("application/vnd.oci.image.index.v1+json");
        d
    }

    fn tar(&self) -> Vec<u8> {
        let mut files = vec![
            (
                "oci-layout".to_string(),
                br#"{"imageLayoutVersion":"1.0.0"}"#.to_vec(),
            ),
            (
                "index.json".to_string(),
                serde_json::to_vec(&json!({"schemaVersion": 2, "manifests": self.index}))
                    .expect("json"),
            ),
        ];
        for (d, data) in &self.blobs {
            files.push((
                format!("blobs/sha256/{}", d.trim_start_matches("sha256:")),
                data.clone(),
            ));
        }
        tar_of(&files)
    }
}

fn named(r: &str) -> Value {
    json!({"io.containerd.image.name": r})
}

struct Env {
    t: tempfile::TempDir,
    store: ImageStore,
}

fn env() -> Env {
    let t = tempfile::tempdir().expect("tempdir");
    let store = ImageStore::open(&t.path().join("images")).expect("open");
    Env { t, store }
}

impl Env {
    fn images(&self) -> PathBuf {
        self.t.path().join("images")
    }
    fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.t.path().join(name);
        fs::write(&p, data).expect("write archive");
        p
    }
    fn import(
        &self,
        name: &str,
        data: &[u8],
        opts: &ImportOptions,
    ) -> Result<Vec<ImageRecord>, ImageError> {
        let p = self.write(name, data);
        self.store.import_archive(&p, opts)
    }
    fn names(&self, sub: &str) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.images().join(sub))
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
    /// Blobs, layer dirs, record files and tmp entries.
    fn snapshot(&self) -> (Vec<String>, Vec<String>, Vec<String>, Vec<String>) {
        (
            self.names("blobs/sha256"),
            self.names("layers"),
            self.names("refs"),
            self.names("tmp"),
        )
    }
}

fn no_opts() -> ImportOptions {
    ImportOptions::default()
}

fn docker_archive(new_layout: bool, layers: &[Vec<u8>], tags: &[&str]) -> (Vec<u8>, String) {
    let diff_ids: Vec<String> = layers.iter().map(|l| sha(l)).collect();
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux", "created": "2023-05-06T07:08:09Z",
        "config": {"Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .expect("json");
    let chex = sha(&config).trim_start_matches("sha256:").to_string();
    let mut files = Vec::new();
    let mut layer_paths = Vec::new();
    for (i, l) in layers.iter().enumerate() {
        let path = if new_layout {
            format!("blobs/sha256/{}", sha(l).trim_start_matches("sha256:"))
        } else {
            format!("{:064x}/layer.tar", i + 1)
        };
        if !new_layout {
            files.push((format!("{:064x}/VERSION", i + 1), b"1.0".to_vec()));
        }
        files.push((path.clone(), l.clone()));
        layer_paths.push(path);
    }
    let config_path = if new_layout {
        format!("blobs/sha256/{chex}")
    } else {
        format!("{chex}.json")
    };
    files.push((config_path.clone(), config));
    let manifest = json!([{"Config": config_path, "RepoTags": tags, "Layers": layer_paths}]);
    files.push((
        "manifest.json".into(),
        serde_json::to_vec(&manifest).expect("json"),
    ));
    (tar_of(&files), format!("sha256:{chex}"))
}
