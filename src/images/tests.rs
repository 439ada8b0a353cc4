//! Store-level tests: archives (OCI layouts and docker-archives) built in memory, imported
//! into stores in tempdirs; atomicity, GC, leases, preload and resolution.

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

#[test]
fn oci_import_uncompressed_gzip_and_zstd_layers() {
    let e = env();
    let mut oci = Oci::default();
    let l1 = layer_tar(&[("bin/a", b"a")]);
    let l2 = layer_tar(&[("bin/b", b"b")]);
    let l3 = layer_tar(&[("etc/c", b"c")]);
    let img = oci.image(
        &[
            (l1.clone(), Compression::None),
            (l2.clone(), Compression::Gzip),
            (l3.clone(), Compression::Zstd),
        ],
        "x",
    );
    oci.add(img.manifest.clone(), named("example.com/team/app:1.0"));
    let recs = e.import("a.tar", &oci.tar(), &no_opts()).expect("import");
    assert_eq!(recs.len(), 1);
    let rec = &recs[0];
    assert_eq!(rec.reference, "example.com/team/app:1.0");
    assert_eq!(rec.digest, img.manifest["digest"].as_str().expect("d"));
    assert_eq!(rec.config_digest, img.config_digest);
    assert_eq!(rec.created.as_deref(), Some("2024-01-02T03:04:05Z"));
    assert!(!rec.pinned);
    let diff_ids: Vec<String> = rec.layers.iter().map(|l| l.diff_id.clone()).collect();
    assert_eq!(diff_ids, vec![sha(&l1), sha(&l2), sha(&l3)]);
    let media: Vec<&str> = rec.layers.iter().map(|l| l.media_type.as_str()).collect();
    assert_eq!(
        media,
        vec![
            "application/vnd.oci.image.layer.v1.tar",
            "application/vnd.oci.image.layer.v1.tar+gzip",
            "application/vnd.oci.image.layer.v1.tar+zstd"
        ]
    );
    let config_size = oci.blobs[&img.config_digest].len() as u64;
    assert_eq!(
        rec.size,
        rec.layers.iter().map(|l| l.size).sum::<u64>() + config_size
    );

    let dirs = e.store.layer_dirs(rec).expect("layer dirs");
    assert_eq!(dirs.len(), 3);
    assert_eq!(fs::read(dirs[0].join("bin/a")).expect("a"), b"a");
    assert_eq!(fs::read(dirs[1].join("bin/b")).expect("b"), b"b");
    assert_eq!(fs::read(dirs[2].join("etc/c")).expect("c"), b"c");
    assert!(dirs
        .iter()
        .all(|d| d.parent() == Some(e.store.layers_dir().as_path())));

    let cfg = e.store.image_config(rec).expect("config");
    let cmd = cfg.config().as_ref().and_then(|c| c.cmd().clone());
    assert_eq!(cmd, Some(vec!["/bin/sh".to_string()]));

    assert_eq!(e.store.list().expect("list"), recs);
    let (_, _, _, tmp) = e.snapshot();
    assert!(tmp.is_empty(), "tmp leftovers: {tmp:?}");
}

#[test]
fn compressed_archive_is_accepted() {
    let e = env();
    let (d, _) = docker_archive(false, &[layer_tar(&[("z", b"z")])], &["gz:1"]);
    let recs = e
        .import("d.tar.gz", &compress(&d, Compression::Gzip), &no_opts())
        .expect("gzip archive");
    assert_eq!(recs[0].reference, "docker.io/library/gz:1");
    let recs = e
        .import("d.tar.zst", &compress(&d, Compression::Zstd), &no_opts())
        .expect("zstd archive");
    assert_eq!(recs[0].reference, "docker.io/library/gz:1");
}

#[test]
fn oci_tag_only_and_unnamed_images_need_a_reference() {
    let e = env();
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("f", b"1")]), Compression::Gzip)], "t");
    oci.add(
        img.manifest.clone(),
        json!({"org.opencontainers.image.ref.name": "v2"}),
    );
    let data = oci.tar();
    let err = e.import("t.tar", &data, &no_opts()).expect_err("tag only");
    assert!(err.to_string().contains("pass a reference"), "{err}");
    assert!(err.to_string().contains("\"v2\""), "{err}");
    assert!(e.store.list().expect("list").is_empty());

    let opts = ImportOptions {
        reference: Some("myapp".into()),
        pinned: false,
    };
    let recs = e.import("t.tar", &data, &opts).expect("named");
    assert_eq!(
        recs[0].reference, "docker.io/library/myapp:v2",
        "tag taken from the archive"
    );
    let opts = ImportOptions {
        reference: Some("localhost:5000/other:3".into()),
        pinned: false,
    };
    let recs = e.import("t.tar", &data, &opts).expect("named");
    assert_eq!(recs[0].reference, "localhost:5000/other:3");

    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("f", b"2")]), Compression::None)], "u");
    oci.add(img.manifest, Value::Null);
    let err = e
        .import("u.tar", &oci.tar(), &no_opts())
        .expect_err("unnamed");
    assert!(matches!(err, ImageError::NoName { .. }), "{err}");
    assert!(err.to_string().contains("pass a reference"), "{err}");

    // A full reference in ref.name is used as is.
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("f", b"3")]), Compression::None)], "v");
    oci.add(
        img.manifest,
        json!({"org.opencontainers.image.ref.name": "busybox:1.36"}),
    );
    let recs = e
        .import("v.tar", &oci.tar(), &no_opts())
        .expect("full ref.name");
    assert_eq!(recs[0].reference, "docker.io/library/busybox:1.36");
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

#[test]
fn docker_archive_old_layout() {
    let e = env();
    let l1 = layer_tar(&[("bin/sh", b"shell")]);
    let l2 = layer_tar(&[("etc/hosts", b"127.0.0.1")]);
    let (data, config) = docker_archive(
        false,
        &[l1.clone(), l2.clone()],
        &["busybox:latest", "foo/bar:1"],
    );
    let recs = e.import("d.tar", &data, &no_opts()).expect("import");
    let refs: Vec<&str> = recs.iter().map(|r| r.reference.as_str()).collect();
    assert_eq!(
        refs,
        vec!["docker.io/library/busybox:latest", "docker.io/foo/bar:1"]
    );
    assert_eq!(recs[0].digest, recs[1].digest);
    assert_eq!(recs[0].config_digest, config);
    assert_eq!(
        recs[0].layers[0].digest,
        sha(&l1),
        "uncompressed layer: digest = diff_id"
    );
    assert_eq!(recs[0].layers[1].diff_id, sha(&l2));
    // The synthesized manifest is stored and hashes to the image digest.
    let d = Digest::parse(&recs[0].digest).expect("digest");
    let manifest = fs::read(e.images().join("blobs/sha256").join(d.hex())).expect("manifest blob");
    assert_eq!(sha(&manifest), recs[0].digest);
    let m: Value = serde_json::from_slice(&manifest).expect("json");
    assert_eq!(m["mediaType"], "application/vnd.oci.image.manifest.v1+json");
    let dirs = e.store.layer_dirs(&recs[0]).expect("dirs");
    assert_eq!(fs::read(dirs[0].join("bin/sh")).expect("sh"), b"shell");
    assert_eq!(e.store.list().expect("list").len(), 2);
    assert_eq!(recs[0].created.as_deref(), Some("2023-05-06T07:08:09Z"));
}

#[test]
fn docker_archive_new_layout_with_gzip_layer() {
    let e = env();
    let l1 = layer_tar(&[("a", b"1")]);
    let gz = compress(&l1, Compression::Gzip);
    // Docker writes the layer under its (compressed) digest; diff_id is of the tar.
    let diff = sha(&l1);
    let (data, _) = {
        let config = serde_json::to_vec(&json!({"rootfs": {"type": "layers", "diff_ids": [diff]}}))
            .expect("json");
        let chex = sha(&config).trim_start_matches("sha256:").to_string();
        let lpath = format!("blobs/sha256/{}", sha(&gz).trim_start_matches("sha256:"));
        let files = vec![
            (format!("blobs/sha256/{chex}"), config),
            (lpath.clone(), gz.clone()),
            (
                "manifest.json".to_string(),
                serde_json::to_vec(&json!([{"Config": format!("blobs/sha256/{chex}"), "RepoTags": ["x:1"], "Layers": [lpath]}])).expect("json"),
            ),
        ];
        (tar_of(&files), ())
    };
    let recs = e.import("n.tar", &data, &no_opts()).expect("import");
    assert_eq!(recs[0].reference, "docker.io/library/x:1");
    assert_eq!(recs[0].layers[0].digest, sha(&gz));
    assert_eq!(
        recs[0].layers[0].media_type,
        "application/vnd.oci.image.layer.v1.tar+gzip"
    );
    let dirs = e.store.layer_dirs(&recs[0]).expect("dirs");
    assert_eq!(fs::read(dirs[0].join("a")).expect("a"), b"1");

    let (data, _) = docker_archive(true, &[layer_tar(&[("b", b"2")])], &["y:2"]);
    let recs = e
        .import("n2.tar", &data, &no_opts())
        .expect("import new layout");
    assert_eq!(recs[0].reference, "docker.io/library/y:2");
}

#[test]
fn multi_platform_index_selects_the_host_platform() {
    let e = env();
    let host = HostPlatform::detect();
    let mut oci = Oci::default();
    let mine = oci.image(
        &[(layer_tar(&[("host", b"yes")]), Compression::Gzip)],
        "host",
    );
    let other = oci.image(
        &[(layer_tar(&[("other", b"no")]), Compression::Gzip)],
        "other",
    );
    let mut m1 = mine.manifest.clone();
    m1["platform"] =
        json!({"os": host.os, "architecture": host.architecture, "variant": host.variant});
    let mut m2 = other.manifest.clone();
    m2["platform"] = json!({"os": "windows", "architecture": "amd64"});
    let mut m3 = other.manifest.clone();
    m3["platform"] = json!({"os": "unknown", "architecture": "unknown"});
    let inner = oci.nested_index(vec![m2.clone(), m1, m3]);
    let outer = oci.nested_index(vec![inner]);
    oci.add(outer, named("multi:1"));
    let recs = e.import("m.tar", &oci.tar(), &no_opts()).expect("import");
    assert_eq!(recs[0].digest, mine.manifest["digest"].as_str().expect("d"));
    let dirs = e.store.layer_dirs(&recs[0]).expect("dirs");
    assert!(dirs[0].join("host").exists());

    // Platform manifests listed directly in index.json with the same name.
    let mut oci2 = Oci::default();
    let mine2 = oci2.image(&[(layer_tar(&[("h2", b"y")]), Compression::None)], "h");
    let other2 = oci2.image(&[(layer_tar(&[("o2", b"n")]), Compression::None)], "o");
    let mut a = other2.manifest.clone();
    a["platform"] = json!({"os": "windows", "architecture": "arm64"});
    let mut b = mine2.manifest.clone();
    b["platform"] = json!({"os": host.os, "architecture": host.architecture});
    oci2.add(a, named("flat:1"));
    oci2.add(b, named("flat:1"));
    let recs = e
        .import("f.tar", &oci2.tar(), &no_opts())
        .expect("flat import");
    assert_eq!(recs.len(), 1);
    assert_eq!(
        recs[0].digest,
        mine2.manifest["digest"].as_str().expect("d")
    );

    // No match: the error lists what is available and what was wanted.
    let mut oci3 = Oci::default();
    let x = oci3.image(&[(layer_tar(&[("x", b"x")]), Compression::None)], "x");
    let mut w1 = x.manifest.clone();
    w1["platform"] = json!({"os": "windows", "architecture": "amd64"});
    let mut w2 = x.manifest.clone();
    w2["platform"] = json!({"os": "windows", "architecture": "arm", "variant": "v7"});
    let idx = oci3.nested_index(vec![w1, w2]);
    oci3.add(idx, named("nomatch:1"));
    let before = e.snapshot();
    let err = e
        .import("x.tar", &oci3.tar(), &no_opts())
        .expect_err("no match");
    let msg = err.to_string();
    assert!(msg.contains("windows/amd64, windows/arm/v7"), "{msg}");
    assert!(msg.contains(&host.to_string()), "{msg}");
    assert!(msg.contains("docker.io/library/nomatch:1"), "{msg}");
    assert_eq!(e.snapshot(), before);
}

/// An image big enough that its layer is spooled to disk (> 1 MiB).
fn big_image(tag: &str) -> (Vec<u8>, Vec<u8>) {
    let mut big = vec![0u8; 3 << 20];
    let mut x: u32 = 12345;
    for b in big.iter_mut() {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        *b = (x >> 16) as u8;
    }
    let layer = layer_tar(&[("big.bin", &big)]);
    let mut oci = Oci::default();
    let img = oci.image(&[(layer.clone(), Compression::None)], tag);
    oci.add(img.manifest, named(&format!("big:{tag}")));
    (oci.tar(), layer)
}

#[test]
fn truncated_archive_leaves_nothing_visible() {
    let e = env();
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("keep", b"k")]), Compression::Gzip)], "k");
    oci.add(img.manifest, named("kept:1"));
    e.import("k.tar", &oci.tar(), &no_opts())
        .expect("first image");
    let list = e.store.list().expect("list");
    let before = e.snapshot();

    let (data, _) = big_image("t");
    for cut in [data.len() / 2, data.len() - 700, 1000, 512 * 3 + 17] {
        let err = e
            .import("trunc.tar", &data[..cut], &no_opts())
            .expect_err("truncated");
        assert!(!err.to_string().is_empty());
        assert_eq!(e.store.list().expect("list"), list, "cut {cut}");
        assert_eq!(e.snapshot(), before, "cut {cut}: {err}");
    }
    // The whole archive imports fine.
    e.import("full.tar", &data, &no_opts()).expect("full");
}

#[test]
fn corrupt_blob_or_diff_id_leaves_nothing_visible() {
    let e = env();
    let before = e.snapshot();
    // A layer whose content does not match its file name.
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("a", b"1")]), Compression::Gzip)], "c");
    oci.add(img.manifest.clone(), named("corrupt:1"));
    let layer_digest = img.manifest["digest"]
        .as_str()
        .map(str::to_string)
        .expect("d");
    let _ = layer_digest;
    let victim = oci
        .blobs
        .iter()
        .find(|(_, v)| v.starts_with(&[0x1f, 0x8b]))
        .map(|(k, _)| k.clone())
        .expect("gzip blob");
    if let Some(v) = oci.blobs.get_mut(&victim) {
        let n = v.len();
        v[n / 2] ^= 0xff;
    }
    let err = e
        .import("c.tar", &oci.tar(), &no_opts())
        .expect_err("digest mismatch");
    assert!(
        err.to_string()
            .contains(victim.trim_start_matches("sha256:")),
        "{err}"
    );
    assert!(e.store.list().expect("list").is_empty());
    assert_eq!(e.snapshot(), before);

    // A config whose diff_id does not match the layer.
    let mut oci = Oci::default();
    let good = layer_tar(&[("a", b"1")]);
    let img = oci.image(&[(good, Compression::Zstd)], "d");
    let cfg = oci.blobs.remove(&img.config_digest).expect("config");
    let mut cfg: Value = serde_json::from_slice(&cfg).expect("json");
    cfg["rootfs"]["diff_ids"] = json!([sha(b"not the layer")]);
    let new_cfg = oci.blob(serde_json::to_vec(&cfg).expect("json"));
    let mdigest = img.manifest["digest"].as_str().expect("d").to_string();
    let m = oci.blobs.remove(&mdigest).expect("manifest");
    let mut m: Value = serde_json::from_slice(&m).expect("json");
    m["config"]["digest"] = new_cfg["digest"].clone();
    m["config"]["size"] = new_cfg["size"].clone();
    let mdesc = oci.blob(serde_json::to_vec(&m).expect("json"));
    oci.add(mdesc, named("badiff:1"));
    let err = e
        .import("d.tar", &oci.tar(), &no_opts())
        .expect_err("diff_id mismatch");
    assert!(err.to_string().contains("diff_id"), "{err}");
    assert!(e.store.list().expect("list").is_empty());
    assert_eq!(e.snapshot(), before);
}

#[test]
fn reimport_is_idempotent() {
    let e = env();
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("a", b"1")]), Compression::Gzip)], "i");
    oci.add(img.manifest, named("idem:1"));
    let data = oci.tar();
    let first = e.import("i.tar", &data, &no_opts()).expect("first");
    let snap = e.snapshot();
    let second = e.import("i.tar", &data, &no_opts()).expect("second");
    assert_eq!(e.snapshot(), snap);
    let strip = |mut r: ImageRecord| {
        r.imported_at.clear();
        r
    };
    assert_eq!(
        first.into_iter().map(strip).collect::<Vec<_>>(),
        second.into_iter().map(strip).collect::<Vec<_>>()
    );
    assert_eq!(e.store.list().expect("list").len(), 1);
}

fn two_images_sharing_base(e: &Env) -> (ImageRecord, ImageRecord, Vec<u8>) {
    let base = layer_tar(&[("base", b"b")]);
    let mut oci = Oci::default();
    let a = oci.image(
        &[
            (base.clone(), Compression::Gzip),
            (layer_tar(&[("a", b"a")]), Compression::Gzip),
        ],
        "a",
    );
    let b = oci.image(
        &[
            (base.clone(), Compression::Gzip),
            (layer_tar(&[("b", b"b")]), Compression::Gzip),
        ],
        "b",
    );
    oci.add(a.manifest, named("img-a:1"));
    oci.add(b.manifest, named("img-b:1"));
    let recs = e.import("ab.tar", &oci.tar(), &no_opts()).expect("import");
    assert_eq!(recs.len(), 2);
    let a = recs
        .iter()
        .find(|r| r.reference.contains("img-a"))
        .cloned()
        .expect("a");
    let b = recs
        .iter()
        .find(|r| r.reference.contains("img-b"))
        .cloned()
        .expect("b");
    (a, b, base)
}

#[test]
fn rm_garbage_collects_but_keeps_shared_layers() {
    let e = env();
    let (a, b, base) = two_images_sharing_base(&e);
    assert_eq!(e.names("layers").len(), 3);
    let removed = e.store.remove("img-a:1").expect("rm");
    assert_eq!(removed, a);
    assert_eq!(e.store.list().expect("list"), vec![b.clone()]);
    let layers = e.names("layers");
    assert_eq!(layers.len(), 2);
    assert!(layers.contains(&sha(&base).trim_start_matches("sha256:").to_string()));
    assert!(!e
        .images()
        .join("blobs/sha256")
        .join(a.digest.trim_start_matches("sha256:"))
        .exists());
    assert!(!e
        .images()
        .join("blobs/sha256")
        .join(a.layers[1].digest.trim_start_matches("sha256:"))
        .exists());
    let dirs = e.store.layer_dirs(&b).expect("b dirs");
    assert!(dirs[0].join("base").exists() && dirs[1].join("b").exists());
    // Removing the last image empties the store.
    e.store.remove(&b.digest).expect("rm by digest");
    let (blobs, layers, refs, tmp) = e.snapshot();
    assert!(blobs.is_empty() && layers.is_empty() && refs.is_empty() && tmp.is_empty());
    let err = e.store.remove("img-b:1").expect_err("gone");
    assert!(matches!(err, ImageError::NotFound { .. }), "{err}");
}

#[test]
fn lease_blocks_rm_and_keeps_content_of_a_retagged_image() {
    let e = env();
    let (a, _b, _) = two_images_sharing_base(&e);
    e.store.add_lease("pod1_ctr", &a).expect("lease");
    let err = e.store.remove("img-a:1").expect_err("leased");
    assert!(matches!(err, ImageError::Leased { .. }), "{err}");
    assert!(err.to_string().contains("pod1_ctr"), "{err}");
    assert!(e.store.add_lease("../x", &a).is_err());
    let unknown = ImageRecord {
        digest: sha(b"unknown"),
        ..a.clone()
    };
    assert!(e.store.add_lease("c2", &unknown).is_err());

    // Re-tagging img-a:1 to another image while leased keeps the old layers.
    let mut oci = Oci::default();
    let n = oci.image(&[(layer_tar(&[("new", b"n")]), Compression::None)], "n");
    oci.add(n.manifest, named("img-a:1"));
    e.import("n.tar", &oci.tar(), &no_opts()).expect("retag");
    let old_layer = e
        .images()
        .join("layers")
        .join(a.layers[1].diff_id.trim_start_matches("sha256:"));
    assert!(old_layer.is_dir(), "leased content kept");
    e.store.remove_lease("pod1_ctr").expect("unlease");
    assert!(!old_layer.exists(), "collected once the lease is gone");
    e.store.remove_lease("pod1_ctr").expect("idempotent");
    e.store.remove("img-a:1").expect("rm after lease");
}

#[test]
fn a_lease_holds_after_its_name_is_retagged_and_not_after_a_removal() {
    let e = env();
    let a = one_layer_image(&e, "img-a:1", "a");
    let _other = one_layer_image(&e, "img-b:1", "b");
    e.store.add_lease("c1", &a).expect("lease by name");
    e.store.remove_lease("c1").expect("unlease");
    // img-a:1 now names another image, and a second name still holds a's digest: the
    // record by name no longer matches, the listing finds the digest.
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("a", b"1")]), Compression::Zstd)], "a");
    oci.add(img.manifest, named("img-a-alias:1"));
    e.import("alias.tar", &oci.tar(), &no_opts())
        .expect("alias");
    let n = one_layer_image(&e, "img-a:1", "n");
    assert_ne!(n.digest, a.digest);
    e.store
        .add_lease("c2", &a)
        .expect("lease through the listing");
    e.store.remove_lease("c2").expect("unlease");
    // Without any record of its digest, no lease.
    e.store.remove("img-a-alias:1").expect("rm alias");
    let err = e.store.add_lease("c3", &a).expect_err("gone");
    assert!(matches!(err, ImageError::NotFound { .. }), "{err}");
}

#[test]
fn preload_imports_pinned_and_skips_unchanged() {
    let e = env();
    let preload = e.store.preload_dir();
    let mut oci = Oci::default();
    let p = oci.image(&[(layer_tar(&[("p", b"p")]), Compression::Gzip)], "p");
    oci.add(p.manifest, named("pre:1"));
    fs::write(preload.join("a.tar"), oci.tar()).expect("a");
    fs::write(preload.join("b.tar"), b"not a tar archive at all").expect("b");
    let (d, _) = docker_archive(false, &[layer_tar(&[("q", b"q")])], &["pre2:1"]);
    fs::write(preload.join("c.tar"), d).expect("c");
    fs::write(preload.join("ignored.txt"), b"x").expect("txt");

    let recs = e.store.import_preload().expect("preload");
    let refs: Vec<&str> = recs.iter().map(|r| r.reference.as_str()).collect();
    assert_eq!(
        refs,
        vec!["docker.io/library/pre:1", "docker.io/library/pre2:1"]
    );
    assert!(recs.iter().all(|r| r.pinned));
    assert!(e.store.list().expect("list").iter().all(|r| r.pinned));

    assert!(
        e.store.import_preload().expect("again").is_empty(),
        "unchanged archives skipped"
    );

    // A changed archive is imported again; a removed image is restored.
    let mut oci2 = Oci::default();
    let p2 = oci2.image(
        &[(layer_tar(&[("p", b"changed")]), Compression::Zstd)],
        "p2",
    );
    oci2.add(p2.manifest, named("pre:1"));
    fs::write(preload.join("a.tar"), oci2.tar()).expect("a2");
    e.store.remove("pre2:1").expect("rm");
    let recs = e.store.import_preload().expect("third");
    let refs: Vec<&str> = recs.iter().map(|r| r.reference.as_str()).collect();
    assert_eq!(
        refs,
        vec!["docker.io/library/pre:1", "docker.io/library/pre2:1"]
    );
}

#[test]
fn resolve_by_reference_digest_and_prefix() {
    let e = env();
    let (a, b, _) = two_images_sharing_base(&e);
    let hex = a.digest.trim_start_matches("sha256:");
    assert_eq!(e.store.resolve("img-a:1").expect("ref"), Some(a.clone()));
    assert_eq!(
        e.store.resolve("docker.io/library/img-a:1").expect("full"),
        Some(a.clone())
    );
    assert_eq!(e.store.resolve(&a.digest).expect("digest"), Some(a.clone()));
    assert_eq!(
        e.store.resolve(&hex[..12]).expect("prefix"),
        Some(a.clone())
    );
    assert_eq!(
        e.store
            .resolve(&format!("sha256:{}", &hex[..16]))
            .expect("prefix"),
        Some(a.clone())
    );
    assert_eq!(e.store.resolve("img-c:1").expect("missing"), None);
    assert!(e.store.resolve("sha256:abc").is_err(), "too short a digest");
    assert!(e.store.resolve("Bad Ref").is_err());
    assert_eq!(e.store.resolve(&b.digest).expect("b"), Some(b.clone()));

    // Two names on one image: rm by digest is ambiguous, by name is fine.
    let (d, _) = docker_archive(false, &[layer_tar(&[("z", b"z")])], &["z:1", "z:2"]);
    let recs = e.import("z.tar", &d, &no_opts()).expect("import");
    let err = e.store.remove(&recs[0].digest).expect_err("ambiguous");
    assert!(matches!(err, ImageError::Ambiguous { .. }), "{err}");
    e.store.remove("z:1").expect("rm one name");
    assert!(e.store.resolve("z:2").expect("other").is_some());
}

#[test]
fn layer_dirs_unpacks_a_missing_layer_again() {
    let e = env();
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("x", b"1")]), Compression::Zstd)], "l");
    oci.add(img.manifest, named("relayer:1"));
    let rec = e
        .import("l.tar", &oci.tar(), &no_opts())
        .expect("import")
        .remove(0);
    let dirs = e.store.layer_dirs(&rec).expect("dirs");
    fs::remove_dir_all(&dirs[0]).expect("rm layer");
    let again = e.store.layer_dirs(&rec).expect("dirs again");
    assert_eq!(again, dirs);
    assert_eq!(fs::read(again[0].join("x")).expect("x"), b"1");
}

/// A one-layer image named `name` (its layer holds `file`), imported.
fn one_layer_image(e: &Env, name: &str, file: &str) -> ImageRecord {
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[(file, b"1")]), Compression::Zstd)], file);
    oci.add(img.manifest, named(name));
    e.import(&format!("{file}.tar"), &oci.tar(), &no_opts())
        .expect("import")
        .remove(0)
}

/// A hand-made layer directory `name` with a root-owned 0755 `etc` holding `files`.
fn etc_layer(e: &Env, name: &str, files: &[&str]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = e.t.path().join(name);
    fs::create_dir_all(dir.join("etc")).expect("mkdir");
    fs::set_permissions(dir.join("etc"), fs::Permissions::from_mode(0o755)).expect("chmod");
    for f in files {
        fs::write(dir.join("etc").join(f), "x\n").expect("write");
    }
    dir
}

/// The mount-targets layer is made on first use, checked at every use, and made again when
/// something removed it; an image with its own /etc/hosts gets none. As root only: the
/// layer's /etc must be root's, as the image's is.
#[test]
fn the_mount_targets_layer_is_made_again_when_removed() {
    if !nix::unistd::Uid::effective().is_root() {
        return;
    }
    let e = env();
    let name = Some(super::mount_targets::LAYER_NAME);
    let rec = one_layer_image(&e, "targets:1", "x");
    let plain = etc_layer(&e, "plain", &[]);
    let layer = e.store.layers_dir().join(super::mount_targets::LAYER_NAME);
    let stacked = |rec: &ImageRecord, dir: &PathBuf| {
        e.store.mount_targets_layer(rec, std::slice::from_ref(dir))
    };
    assert_eq!(stacked(&rec, &plain), name);
    assert!(layer.join("etc/resolv.conf").is_file());
    fs::remove_dir_all(&layer).expect("rm");
    assert_eq!(stacked(&rec, &plain), name);
    assert!(layer.join("etc/hosts").is_file(), "made again");
    // Layers and GC leave it alone.
    let dirs = e.store.layer_dirs(&rec).expect("dirs");
    assert!(dirs.iter().all(|d| d != &layer));
    e.store.remove("targets:1").expect("rm image");
    assert!(layer.is_dir());
    // Another image, with its own /etc/hosts: no layer (the decision is cached per image).
    let other = one_layer_image(&e, "own-hosts:1", "y");
    assert_eq!(stacked(&other, &etc_layer(&e, "own", &["hosts"])), None);
}

#[test]
fn open_removes_crash_leftovers_and_orphans() {
    let e = env();
    let mut oci = Oci::default();
    let img = oci.image(&[(layer_tar(&[("x", b"1")]), Compression::Gzip)], "o");
    oci.add(img.manifest, named("kept:1"));
    e.import("o.tar", &oci.tar(), &no_opts()).expect("import");
    let snap = e.snapshot();
    let images = e.images();
    fs::create_dir_all(images.join("tmp/import-1-2-3/deep")).expect("tmp");
    fs::write(images.join("tmp/spool-x"), b"partial").expect("spool");
    fs::create_dir_all(images.join("layers/.tmp-abc-1/usr")).expect("layer tmp");
    let orphan = Digest::of(b"orphan");
    fs::write(images.join("blobs/sha256").join(orphan.hex()), b"orphan").expect("orphan");
    fs::create_dir(images.join("layers").join(Digest::of(b"l").hex())).expect("orphan layer");
    let reopened = ImageStore::open(&images).expect("reopen");
    assert_eq!(e.snapshot(), snap);
    assert_eq!(reopened.list().expect("list").len(), 1);
}

#[test]
fn concurrent_imports_are_serialized() {
    let e = env();
    let mut paths = Vec::new();
    for i in 0..3 {
        let mut oci = Oci::default();
        let img = oci.image(
            &[
                (layer_tar(&[("shared", b"s")]), Compression::Gzip),
                (
                    layer_tar(&[("own", format!("{i}").as_bytes())]),
                    Compression::Gzip,
                ),
            ],
            "c",
        );
        oci.add(img.manifest, named(&format!("conc:{i}")));
        paths.push(e.write(&format!("c{i}.tar"), &oci.tar()));
    }
    let images = e.images();
    std::thread::scope(|s| {
        for p in &paths {
            let images = images.clone();
            s.spawn(move || {
                let store = ImageStore::open(&images).expect("open");
                store.import_archive(p, &no_opts()).expect("import");
            });
        }
    });
    assert_eq!(e.store.list().expect("list").len(), 3);
    assert_eq!(e.names("layers").len(), 4);
}

#[test]
fn not_an_image_archive() {
    let e = env();
    let data = tar_of(&[("hello.txt".to_string(), b"hi".to_vec())]);
    let err = e
        .import("h.tar", &data, &no_opts())
        .expect_err("not an image");
    assert!(
        matches!(err, ImageError::Archive(ArchiveError::UnknownFormat { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("h.tar"), "{err}");
}

#[path = "gc_tests.rs"]
mod gc_tests;
