//! Image GC and prune against real stores in tempdirs, with a filesystem whose usage is the
//! store's own size (so every removal really frees what it frees).

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::*;

/// A filesystem of fixed capacity whose only content is the image store.
struct StoreSizedFs {
    capacity: u64,
}

fn du(p: &Path) -> u64 {
    let Ok(md) = fs::symlink_metadata(p) else {
        return 0;
    };
    if md.is_dir() {
        fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| du(&e.path())).sum())
            .unwrap_or(0)
    } else {
        md.len()
    }
}

impl FsStats for StoreSizedFs {
    fn usage(&self, path: &Path) -> std::io::Result<FsUsage> {
        let used = du(path);
        Ok(FsUsage {
            capacity: self.capacity,
            available: self.capacity.saturating_sub(used),
        })
    }
}

/// A 10 KiB incompressible layer unique to `seed`.
fn unique_layer(seed: u8) -> Vec<u8> {
    let mut x: u32 = 0x9e37_79b9 ^ u32::from(seed);
    let data: Vec<u8> = (0..10 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    layer_tar(&[("data", &data)])
}

/// Imports images `gc-<name>:1`, each with one shared base layer and one unique 10 KiB layer.
fn import_images(e: &Env, names: &[&str], pinned: bool) -> Vec<ImageRecord> {
    let base = layer_tar(&[("base", b"shared")]);
    let mut out = Vec::new();
    for (i, n) in names.iter().enumerate() {
        let mut oci = Oci::default();
        let seed = n
            .bytes()
            .fold(i as u8, |a, b| a.wrapping_mul(31).wrapping_add(b));
        let img = oci.image(
            &[
                (base.clone(), Compression::None),
                (unique_layer(seed), Compression::None),
            ],
            n,
        );
        oci.add(img.manifest, named(&format!("gc-{n}:1")));
        let opts = ImportOptions {
            reference: None,
            pinned,
        };
        out.extend(
            e.import(&format!("{n}.tar"), &oci.tar(), &opts)
                .expect("import"),
        );
    }
    out
}

/// Makes `rec` look last used `ago` before now.
fn set_last_used(e: &Env, rec: &ImageRecord, ago: Duration) {
    let dir = e.images().join("used");
    fs::create_dir_all(&dir).expect("used dir");
    let f = fs::File::create(dir.join(rec.digest.trim_start_matches("sha256:"))).expect("mark");
    f.set_modified(SystemTime::now() - ago).expect("mtime");
}

fn refs(e: &Env) -> Vec<String> {
    let mut v: Vec<String> = e
        .store
        .list()
        .expect("list")
        .into_iter()
        .map(|r| r.reference)
        .collect();
    v.sort();
    v
}

fn fs_at_percent(e: &Env, percent: u64) -> StoreSizedFs {
    let used = du(&e.images());
    StoreSizedFs {
        capacity: used * 100 / percent,
    }
}

fn later() -> SystemTime {
    SystemTime::now() + Duration::from_secs(3600)
}

#[test]
fn gc_does_nothing_below_the_high_threshold_or_when_disabled() {
    let e = env();
    import_images(&e, &["a", "b"], false);
    let before = refs(&e);
    let policy = ImageGcPolicy::default();
    let r = e
        .store
        .garbage_collect(
            &policy,
            &PinnedImages::default(),
            &fs_at_percent(&e, 80),
            later(),
        )
        .expect("gc");
    assert!(r.removed.is_empty() && r.shortfall.is_none(), "{r:?}");
    let disabled = ImageGcPolicy {
        high_threshold_percent: 100,
        ..policy
    };
    let r = e
        .store
        .garbage_collect(
            &disabled,
            &PinnedImages::default(),
            &fs_at_percent(&e, 99),
            later(),
        )
        .expect("gc");
    assert!(r.removed.is_empty(), "{r:?}");
    assert_eq!(refs(&e), before);
}

#[test]
fn gc_removes_least_recently_used_first_until_under_the_low_threshold() {
    let e = env();
    let recs = import_images(&e, &["old", "mid", "new", "unused"], false);
    set_last_used(&e, &recs[0], Duration::from_secs(3000));
    set_last_used(&e, &recs[1], Duration::from_secs(2000));
    set_last_used(&e, &recs[2], Duration::from_secs(1000));
    // "unused" has no use mark: its first-seen time (import, now) orders it after "old"... but
    // before nothing, since "now" is later than every mark.
    let fs = fs_at_percent(&e, 90);
    let policy = ImageGcPolicy {
        high_threshold_percent: 85,
        low_threshold_percent: 60,
        minimum_age: Duration::from_secs(120),
    };
    let r = e
        .store
        .garbage_collect(&policy, &PinnedImages::default(), &fs, later())
        .expect("gc");
    let removed: Vec<&str> = r.removed.iter().map(|x| x.references[0].as_str()).collect();
    assert_eq!(
        removed,
        vec!["docker.io/library/gc-old:1", "docker.io/library/gc-mid:1"],
        "{r:?}"
    );
    assert!(r.after.used_percent() < 60, "{r:?}");
    assert!(r.shortfall.is_none());
    assert!(
        r.removed[0]
            .reason
            .contains("imageGCHighThresholdPercent 85%"),
        "{r:?}"
    );
    assert_eq!(
        refs(&e),
        vec![
            "docker.io/library/gc-new:1",
            "docker.io/library/gc-unused:1"
        ]
    );
    // The base layer shared with the kept images stays and they still unpack.
    for rec in e.store.list().expect("list") {
        let dirs = e.store.layer_dirs(&rec).expect("layers");
        assert!(dirs[0].join("base").exists());
    }
    // Use marks of removed images are gone.
    assert_eq!(e.names("used").len(), 1);
}

#[test]
fn gc_never_removes_pinned_in_use_or_young_images() {
    let e = env();
    let preloaded = import_images(&e, &["pre"], true);
    let recs = import_images(&e, &["manifest", "leased", "victim"], false);
    e.store.add_lease("pod_c1", &recs[1]).expect("lease");
    let pinned = PinnedImages::from_images(["gc-manifest:1", "unparsable image!"]);
    let policy = ImageGcPolicy {
        high_threshold_percent: 50,
        low_threshold_percent: 10,
        minimum_age: Duration::from_secs(120),
    };
    // Young: imported just now, so nothing is old enough.
    let r = e
        .store
        .garbage_collect(&policy, &pinned, &fs_at_percent(&e, 95), SystemTime::now())
        .expect("gc");
    assert!(r.removed.is_empty(), "{r:?}");
    let short = r.shortfall.expect("shortfall");
    assert!(
        short.contains("1 image(s) in use, 2 pinned, 1 younger than 120s"),
        "{short}"
    );
    // Old enough: only the victim goes; usage stays above the low threshold.
    let r = e
        .store
        .garbage_collect(&policy, &pinned, &fs_at_percent(&e, 95), later())
        .expect("gc");
    assert_eq!(r.removed.len(), 1, "{r:?}");
    assert_eq!(r.removed[0].digest, recs[2].digest);
    assert!(r.shortfall.is_some());
    assert_eq!(
        refs(&e),
        vec![
            "docker.io/library/gc-leased:1",
            "docker.io/library/gc-manifest:1",
            "docker.io/library/gc-pre:1"
        ]
    );
    assert_eq!(preloaded[0].reference, "docker.io/library/gc-pre:1");
}

#[test]
fn an_image_with_several_names_is_one_image() {
    let e = env();
    let recs = import_images(&e, &["multi"], false);
    // A second name for the same content.
    let archive = e.t.path().join("multi.tar");
    e.store
        .import_archive(
            &archive,
            &ImportOptions {
                reference: Some("other/name:2".into()),
                pinned: false,
            },
        )
        .expect("second name");
    let usage = e
        .store
        .image_usage(&PinnedImages::default())
        .expect("usage");
    assert_eq!(usage.len(), 1);
    assert_eq!(
        usage[0].references,
        vec!["docker.io/library/gc-multi:1", "docker.io/other/name:2"]
    );
    // Pinning one name pins the image; pinning by digest works too.
    let by_name = PinnedImages::from_images(["docker.io/other/name:2"]);
    assert!(e.store.prune(&by_name, false).expect("prune").is_empty());
    let by_digest = PinnedImages::from_images([format!("x/y@{}", recs[0].digest).as_str()]);
    assert!(e.store.prune(&by_digest, false).expect("prune").is_empty());
    assert_eq!(refs(&e).len(), 2);
}

#[test]
fn prune_removes_every_unused_unpinned_image_and_dry_run_nothing() {
    let e = env();
    import_images(&e, &["pre"], true);
    let recs = import_images(&e, &["keep", "drop1", "drop2"], false);
    e.store.add_lease("pod_c", &recs[0]).expect("lease");
    let would = e
        .store
        .prune(&PinnedImages::default(), true)
        .expect("dry run");
    assert_eq!(would.len(), 2);
    assert_eq!(refs(&e).len(), 4, "dry run removes nothing");
    let done = e
        .store
        .prune(&PinnedImages::default(), false)
        .expect("prune");
    assert_eq!(done, would);
    assert_eq!(
        refs(&e),
        vec!["docker.io/library/gc-keep:1", "docker.io/library/gc-pre:1"]
    );
    e.store.remove_lease("pod_c").expect("unlease");
    let done = e
        .store
        .prune(&PinnedImages::default(), false)
        .expect("prune");
    assert_eq!(done.len(), 1);
    assert_eq!(refs(&e), vec!["docker.io/library/gc-pre:1"]);
}

#[test]
fn pinned_images_from_pods_cover_init_and_app_containers() {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {
            "initContainers": [{"name": "i", "image": "busybox"}],
            "containers": [{"name": "c", "image": "registry.local:5000/app:2"}]
        }
    }))
    .expect("pod");
    let p = PinnedImages::from_pods([&pod]);
    assert_eq!(
        p,
        PinnedImages::from_images([
            "docker.io/library/busybox:latest",
            "registry.local:5000/app:2"
        ])
    );
}

#[test]
fn used_percent_rounds_like_the_kubelet() {
    let u = |capacity, available| FsUsage {
        capacity,
        available,
    };
    assert_eq!(u(1000, 151).used_percent(), 85);
    assert_eq!(u(1000, 150).used_percent(), 85);
    assert_eq!(u(1000, 149).used_percent(), 86);
    assert_eq!(u(0, 0).used_percent(), 0);
    assert_eq!(u(100, 200).used_percent(), 0);
}

#[test]
fn reclaim_under_disk_pressure_respects_the_minimum_age_table() {
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let min = Duration::from_secs(120);
    let usage = |age_s: i64, in_use: bool, pinned: Option<&'static str>| ImageUsage {
        digest: "sha256:x".into(),
        references: vec!["docker.io/library/x:1".into()],
        size: 1,
        first_seen: if age_s >= 0 {
            t0 - Duration::from_secs(age_s as u64)
        } else {
            t0 + Duration::from_secs(age_s.unsigned_abs())
        },
        last_used: None,
        in_use_by: if in_use { vec!["pod_c".into()] } else { vec![] },
        pinned,
    };
    // (first seen this long before now, in use, pinned, minimum age, reclaimable)
    let cases = [
        (600, false, None, min, true),
        (120, false, None, min, true),
        (119, false, None, min, false),
        (0, false, None, min, false),
        (-30, false, None, min, false),
        (0, false, None, Duration::ZERO, true),
        (600, true, None, min, false),
        (600, false, Some("preloaded"), min, false),
        (600, false, Some("manifest"), Duration::ZERO, false),
    ];
    for (age, in_use, pinned, minimum, want) in cases {
        assert_eq!(
            usage(age, in_use, pinned).reclaimable(minimum, t0),
            want,
            "age {age}s in_use {in_use} pinned {pinned:?} minimum {minimum:?}"
        );
    }
}

#[test]
fn delete_unused_images_keeps_images_younger_than_the_minimum_age() {
    let e = env();
    let recs = import_images(&e, &["a", "b"], false);
    let min = Duration::from_secs(120);
    let now = SystemTime::now();
    let removed = e
        .store
        .delete_unused_images(&PinnedImages::default(), min, now)
        .expect("reclaim");
    assert!(removed.is_empty(), "just imported: {removed:?}");
    assert_eq!(refs(&e).len(), 2);
    e.store.add_lease("pod_c", &recs[0]).expect("lease");
    let removed = e
        .store
        .delete_unused_images(
            &PinnedImages::default(),
            min,
            now + Duration::from_secs(600),
        )
        .expect("reclaim");
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert_eq!(removed[0].references, vec!["docker.io/library/gc-b:1"]);
    assert!(
        removed[0].reason.contains("imageMinimumGCAge 120s"),
        "{}",
        removed[0].reason
    );
    assert_eq!(refs(&e), vec!["docker.io/library/gc-a:1"]);
}
