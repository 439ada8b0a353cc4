//! Imports: OCI layouts and docker-archives, compressions, references, platforms, and what
//! is not an image.

use super::*;

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
