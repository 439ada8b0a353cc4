//! The store: atomicity of a failed import, idempotence, removal and leases, preload,
//! resolution, layer directories, crash leftovers and concurrent imports.

use super::*;

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
