//! Root integration tests of registry pulls against a real registry on loopback (Debian's
//! `docker-registry`), with images pushed by `skopeo`: anonymous, Basic (htpasswd) and Bearer
//! auth, multi-platform indexes, faults injected by a proxy (429/500/404, resets, truncation,
//! wrong bytes, unknown media types), a full disk and a SIGKILLed `podvisor image pull`.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::registry::{
    image, layer, noise, registries_yaml, write_archive, write_layout, Comp, Fault, FaultProxy,
    Registry, TestImage, Tmpfs, PASSWORD, USER,
};
use podvisor::images::{
    ImageError, ImageStore, ImportOptions, PullError, PullProgress, RegistryConfig, RegistryError,
    ResolveError, RetryPolicy,
};

fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_secs(2),
    }
}

/// Three layers (gzip, plain, zstd); `big` bytes of noise in the plain one.
fn test_image(arch: &str, big: usize, seed: u64) -> TestImage {
    image(
        arch,
        vec![
            layer(&[("etc/hello", b"hello\n".to_vec())], Comp::Gzip),
            layer(&[("data/noise.bin", noise(big, seed))], Comp::Plain),
            layer(
                &[("etc/zstd", format!("zstd layer {seed}\n").into_bytes())],
                Comp::Zstd,
            ),
        ],
    )
}

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: std::path::PathBuf,
    store: ImageStore,
}

fn fixture() -> Fixture {
    let tmp = tempfile::Builder::new()
        .prefix("podvisor-pull-")
        .tempdir()
        .expect("tempdir");
    let dir = tmp.path().to_path_buf();
    let store = ImageStore::open(&dir.join("images")).expect("store");
    Fixture {
        _tmp: tmp,
        dir,
        store,
    }
}

/// Pushes `img` as `repo:tag` to `reg`.
fn push(reg: &Registry, img: &TestImage, repo_tag: &str) {
    let layout = tempfile::tempdir().expect("layout");
    write_layout(layout.path(), "t", std::slice::from_ref(img));
    reg.push(layout.path(), "t", repo_tag, false);
}

/// A config that reaches `registry` (as written in references) at `endpoint` over http.
fn cfg_for(dir: &Path, registry: &str, endpoint: &str, auth: bool) -> RegistryConfig {
    let y = registries_yaml(dir, registry, endpoint, auth);
    let none = dir.join("no-docker-config.json");
    fs::write(&none, "{}").expect("empty docker config");
    RegistryConfig::load(Some(&y), Some(&none)).expect("registry config")
}

fn pull(
    f: &Fixture,
    reference: &str,
    cfg: &RegistryConfig,
) -> (
    Result<podvisor::images::ImageRecord, ImageError>,
    Vec<PullProgress>,
) {
    let mut events = Vec::new();
    let r = f.store.pull_with(reference, cfg, fast_retry(), &mut |p| {
        events.push(p.clone())
    });
    (r, events)
}

fn assert_names(err: &dyn std::fmt::Display, parts: &[&str]) {
    let s = err.to_string();
    for p in parts {
        assert!(s.contains(p), "error {s:?} does not name {p:?}");
    }
}

fn assert_nothing_listed(f: &Fixture) {
    assert!(
        f.store.list().expect("list").is_empty(),
        "a broken image is listed"
    );
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn pull_matches_import_byte_for_byte() {
    let reg = Registry::start(false);
    let f = fixture();
    let img = test_image(&host_arch(), 300 << 10, 1);
    push(&reg, &img, "team/app:v1");
    let reference = "registry.test/team/app:v1";
    let cfg = cfg_for(&f.dir, "registry.test", &reg.addr, false);
    let (rec, events) = pull(&f, reference, &cfg);
    let rec = rec.expect("pull");
    assert_eq!(rec.reference, reference);
    assert_eq!(rec.digest, img.digest());
    assert_eq!(rec.layers.len(), 3);
    assert!(matches!(
        events.first(),
        Some(PullProgress::Resolved { .. })
    ));
    let done = events
        .iter()
        .filter(|e| matches!(e, PullProgress::LayerDone { cached: false, .. }))
        .count();
    assert_eq!(done, 3, "{events:?}");
    let dirs = f.store.layer_dirs(&rec).expect("layer dirs");
    assert_eq!(
        fs::read(dirs[1].join("data/noise.bin")).expect("noise"),
        noise(300 << 10, 1)
    );
    assert!(dirs[2].join("etc/zstd").is_file());
    assert_eq!(f.store.list().expect("list"), vec![rec.clone()]);

    // The same image imported from an archive: the same record and the same blobs.
    let g = fixture();
    let archive = g.dir.join("app.tar");
    write_archive(&archive, reference, &img);
    let imported = g
        .store
        .import_archive(&archive, &ImportOptions::default())
        .expect("import");
    assert_eq!(imported[0].digest, rec.digest);
    assert_eq!(imported[0].layers, rec.layers);
    assert_eq!(imported[0].size, rec.size);
    let blobs = |d: &Path| {
        let mut v: Vec<_> = fs::read_dir(d.join("images/blobs/sha256"))
            .expect("blobs")
            .map(|e| e.expect("entry").file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(blobs(&f.dir), blobs(&g.dir));

    // A second pull downloads nothing.
    let (again, events) = pull(&f, reference, &cfg);
    again.expect("second pull");
    assert!(events
        .iter()
        .all(|e| !matches!(e, PullProgress::LayerDone { cached: false, .. })));
    assert!(fs::read_dir(f.dir.join("images/tmp/pulls"))
        .expect("pulls dir")
        .next()
        .is_none());
}

fn host_arch() -> String {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
    .to_string()
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn multi_platform_index_picks_this_machine() {
    let reg = Registry::start(false);
    let f = fixture();
    let amd = test_image("amd64", 1000, 2);
    let arm = test_image("arm64", 1000, 3);
    let layout = tempfile::tempdir().expect("layout");
    write_layout(layout.path(), "multi", &[amd.clone(), arm.clone()]);
    reg.push(layout.path(), "multi", "lib/multi:1", true);
    let cfg = cfg_for(&f.dir, "registry.test", &reg.addr, false);
    let (rec, _) = pull(&f, "registry.test/lib/multi:1", &cfg);
    let rec = rec.expect("pull");
    let want = if host_arch() == "arm64" { &arm } else { &amd };
    assert_eq!(rec.digest, want.digest());

    // An index without this machine's platform: the error lists what is there.
    let other = tempfile::tempdir().expect("layout");
    write_layout(
        other.path(),
        "foreign",
        &[test_image("s390x", 10, 4), test_image("ppc64le", 10, 5)],
    );
    reg.push(other.path(), "foreign", "lib/foreign:1", true);
    let (err, _) = pull(&f, "registry.test/lib/foreign:1", &cfg);
    let err = err.expect_err("no platform");
    assert_names(
        &err,
        &[
            "registry.test/lib/foreign:1",
            "linux/s390x",
            "linux/ppc64le",
            "sha256:",
        ],
    );
    assert_eq!(f.store.list().expect("list").len(), 1);
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn basic_auth_from_htpasswd_registry() {
    let reg = Registry::start(true);
    let f = fixture();
    let img = test_image(&host_arch(), 1000, 6);
    push(&reg, &img, "private/app:v1");
    let reference = "registry.test/private/app:v1";

    // No credentials: 401 names the reference and the registry, nothing stored.
    let anon = cfg_for(&f.dir, "registry.test", &reg.addr, false);
    let err = pull(&f, reference, &anon).0.expect_err("anonymous");
    assert!(
        matches!(
            &err,
            ImageError::Pull(PullError::Registry(RegistryError::Unauthorized {
                status: 401,
                ..
            }))
        ),
        "{err}"
    );
    assert_names(&err, &[reference, &reg.addr]);
    assert_nothing_listed(&f);

    // Credentials from registries.yaml configs.
    let with_yaml = cfg_for(&f.dir, "registry.test", &reg.addr, true);
    pull(&f, reference, &with_yaml)
        .0
        .expect("pull with registries.yaml auth");

    // Credentials from a docker config.json (`auth`, base64).
    let g = fixture();
    let docker = g.dir.join("config.json");
    let auth = podvisor::images::registry::base64_encode(format!("{USER}:{PASSWORD}").as_bytes());
    fs::write(
        &docker,
        format!(
            r#"{{"auths": {{"http://{}": {{"auth": "{auth}"}}}}}}"#,
            reg.addr
        ),
    )
    .expect("config.json");
    let y = registries_yaml(&g.dir, "registry.test", &reg.addr, false);
    let cfg = RegistryConfig::load(Some(&y), Some(&docker)).expect("cfg");
    let rec = pull(&g, reference, &cfg).0.expect("pull with config.json");
    assert_eq!(rec.digest, img.digest());
}

/// URL and Authorization header of one token request.
type TokenRequest = (String, Option<String>);

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn bearer_token_flow_with_recorded_challenge() {
    let reg = Registry::start(false);
    let f = fixture();
    let img = test_image(&host_arch(), 1000, 7);
    push(&reg, &img, "tok/app:v1");

    // Token endpoint: checks Basic credentials, scope and service; records each request.
    let token_server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("token bind"));
    let token_addr = token_server.server_addr().to_ip().expect("ip").to_string();
    let token_requests: Arc<Mutex<Vec<TokenRequest>>> = Arc::default();
    let (ts, tr) = (token_server.clone(), token_requests.clone());
    let token_thread = std::thread::spawn(move || {
        for req in ts.incoming_requests() {
            let auth = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .map(|h| h.value.as_str().to_string());
            tr.lock()
                .expect("lock")
                .push((req.url().to_string(), auth.clone()));
            let want = format!(
                "Basic {}",
                podvisor::images::registry::base64_encode(format!("{USER}:{PASSWORD}").as_bytes())
            );
            let r = if auth.as_deref() == Some(want.as_str())
                && req.url().contains("scope=repository%3Atok%2Fapp%3Apull")
                && req.url().contains("service=test-registry")
            {
                tiny_http::Response::from_string(r#"{"token":"tok-123","expires_in":300}"#)
            } else {
                tiny_http::Response::from_string("denied").with_status_code(401)
            };
            let _ = req.respond(r);
        }
    });
    // The registry side (recorded challenge): 401 with a Bearer challenge unless the token
    // is presented, else forwarded to the real registry.
    let realm = format!("http://{token_addr}/token");
    let challenge = format!(
        r#"Bearer realm="{realm}",service="test-registry",scope="repository:tok/app:pull""#
    );
    let upstream = reg.addr.clone();
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind"));
    let addr = server.server_addr().to_ip().expect("ip").to_string();
    let s2 = server.clone();
    let front = std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .new_agent();
        for req in s2.incoming_requests() {
            let auth = req
                .headers()
                .iter()
                .find(|h| h.field.equiv("Authorization"))
                .map(|h| h.value.as_str().to_string());
            if auth.as_deref() != Some("Bearer tok-123") {
                let r = tiny_http::Response::from_string("unauthorized")
                    .with_status_code(401)
                    .with_header(
                        tiny_http::Header::from_bytes(
                            &b"WWW-Authenticate"[..],
                            challenge.as_bytes(),
                        )
                        .expect("header"),
                    );
                let _ = req.respond(r);
                continue;
            }
            let mut up = agent.get(format!("http://{upstream}{}", req.url()));
            if let Some(a) = req.headers().iter().find(|h| h.field.equiv("Accept")) {
                up = up.header("Accept", a.value.as_str());
            }
            let mut resp = up.call().expect("upstream");
            let status = resp.status().as_u16();
            let ct = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/octet-stream")
                .to_string();
            let body = resp.body_mut().read_to_vec().expect("body");
            let r = tiny_http::Response::from_data(body)
                .with_status_code(status)
                .with_header(
                    tiny_http::Header::from_bytes(&b"Content-Type"[..], ct.as_bytes()).expect("ct"),
                );
            let _ = req.respond(r);
        }
    });
    let cfg = cfg_for(&f.dir, "registry.test", &addr, true);
    let rec = pull(&f, "registry.test/tok/app:v1", &cfg)
        .0
        .expect("bearer pull");
    assert_eq!(rec.digest, img.digest());
    // One token for the whole pull (cached per scope).
    let reqs = token_requests.lock().expect("lock").clone();
    assert_eq!(reqs.len(), 1, "{reqs:?}");

    // Wrong credentials: the token endpoint refuses, the error names the realm.
    let g = fixture();
    let y = g.dir.join("bad.yaml");
    fs::write(
        &y,
        format!("mirrors:\n  registry.test:\n    endpoint: [\"http://{addr}\"]\nconfigs:\n  \"{addr}\":\n    auth: {{username: {USER}, password: wrong}}\n"),
    )
    .expect("yaml");
    let none = g.dir.join("none.json");
    fs::write(&none, "{}").expect("none");
    let bad = RegistryConfig::load(Some(&y), Some(&none)).expect("cfg");
    let err = pull(&g, "registry.test/tok/app:v1", &bad)
        .0
        .expect_err("bad creds");
    assert_names(&err, &["registry.test/tok/app:v1", &realm, "401"]);
    assert_nothing_listed(&g);

    server.unblock();
    token_server.unblock();
    front.join().expect("front");
    token_thread.join().expect("token thread");
}

/// A registry with one image and a proxy applying `rule`; returns what a test needs.
fn faulty(
    img: &TestImage,
    rule: impl Fn(&common::registry::Seen, usize) -> Fault + Send + Sync + 'static,
) -> (Registry, FaultProxy, Fixture, RegistryConfig) {
    let reg = Registry::start(false);
    push(&reg, img, "f/app:v1");
    let proxy = FaultProxy::start(&reg.addr, rule);
    let f = fixture();
    let cfg = cfg_for(&f.dir, "registry.test", &proxy.addr, false);
    (reg, proxy, f, cfg)
}

fn hex_of(img: &TestImage, i: usize) -> String {
    common::image::sha256_hex(&img.layers[i].blob)
}

fn big_layer_digest(img: &TestImage) -> String {
    format!("sha256:{}", common::image::sha256_hex(&img.layers[1].blob))
}

const REF: &str = "registry.test/f/app:v1";

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn retry_after_429_then_success() {
    let img = test_image(&host_arch(), 1000, 10);
    let first = Arc::new(AtomicUsize::new(0));
    let (_reg, proxy, f, cfg) = faulty(&img, move |s, _| {
        if s.url.contains("/manifests/v1") && first.fetch_add(1, Ordering::SeqCst) == 0 {
            return Fault::Status(429, Some(1));
        }
        Fault::Pass
    });
    let t = Instant::now();
    let rec = pull(&f, REF, &cfg).0.expect("pull after 429");
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "Retry-After ignored"
    );
    assert_eq!(rec.digest, img.digest());
    let manifests = proxy
        .seen()
        .iter()
        .filter(|s| s.url.contains("/manifests/v1"))
        .count();
    assert_eq!(manifests, 2);
}

#[test]
fn server_errors_and_not_found_fail_naming_reference_and_digest() {
    let img = test_image(&host_arch(), 1000, 11);
    let hex = hex_of(&img, 1);
    let (_reg, proxy, f, cfg) = faulty(&img, move |s, _| {
        if s.url.ends_with(&hex) {
            return Fault::Status(500, None);
        }
        Fault::Pass
    });
    let digest = big_layer_digest(&img);
    let err = pull(&f, REF, &cfg).0.expect_err("500");
    assert!(
        matches!(
            &err,
            ImageError::Pull(PullError::Registry(RegistryError::Status {
                status: 500,
                attempts: 3,
                ..
            }))
        ),
        "{err}"
    );
    assert_names(&err, &[REF, &digest, "500"]);
    assert_nothing_listed(&f);

    // 404: fails at once (one request), naming the reference and the tag.
    let before = proxy.seen().len();
    let err = pull(&f, "registry.test/f/app:missing", &cfg)
        .0
        .expect_err("404");
    assert!(
        matches!(
            &err,
            ImageError::Pull(PullError::Registry(RegistryError::NotFound { .. }))
        ),
        "{err}"
    );
    assert_names(
        &err,
        &["registry.test/f/app:missing", "missing", "not found"],
    );
    assert_eq!(proxy.seen().len() - before, 1, "404 was retried");
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn connection_reset_mid_layer_resumes_with_range() {
    let big = 2 << 20;
    let img = test_image(&host_arch(), big, 12);
    let hex = hex_of(&img, 1);
    let cut = Arc::new(AtomicUsize::new(0));
    let h = hex.clone();
    let (_reg, proxy, f, cfg) = faulty(&img, move |s, _| {
        if s.url.ends_with(&h) && s.range.is_none() && cut.fetch_add(1, Ordering::SeqCst) == 0 {
            return Fault::CutAfter(700 << 10);
        }
        Fault::Pass
    });
    let rec = pull(&f, REF, &cfg).0.expect("pull resumes");
    assert_eq!(rec.digest, img.digest());
    let ranged: Vec<_> = proxy
        .seen()
        .into_iter()
        .filter(|s| s.url.ends_with(&hex) && s.range.is_some())
        .collect();
    assert_eq!(ranged.len(), 1, "expected one resumed request");
    let range = ranged[0].range.clone().unwrap_or_default();
    let from: u64 = range
        .trim_start_matches("bytes=")
        .trim_end_matches('-')
        .parse()
        .expect("range start");
    assert!(from > 0 && from <= 700 << 10, "resumed at {from}");
    let dirs = f.store.layer_dirs(&rec).expect("dirs");
    assert_eq!(
        fs::read(dirs[1].join("data/noise.bin")).expect("noise"),
        noise(big, 12)
    );
}

#[test]
fn truncated_and_corrupt_blobs_are_rejected() {
    // The big layer never gets past 100 KiB (resumed requests are cut at once): the pull
    // gives up naming the digest.
    let img = test_image(&host_arch(), 256 << 10, 13);
    let hex = hex_of(&img, 1);
    let (_reg, _proxy, f, cfg) = faulty(&img, move |s, _| {
        if s.url.ends_with(&hex) {
            return Fault::CutAfter(if s.range.is_some() { 0 } else { 100 << 10 });
        }
        Fault::Pass
    });
    let err = pull(&f, REF, &cfg).0.expect_err("truncated");
    assert!(
        matches!(
            &err,
            ImageError::Pull(PullError::Registry(RegistryError::Truncated { .. }))
        ),
        "{err}"
    );
    assert_names(&err, &[REF, &big_layer_digest(&img)]);
    assert_nothing_listed(&f);

    // Wrong bytes: digest mismatch, the partial download is discarded.
    let img2 = test_image(&host_arch(), 256 << 10, 14);
    let hex2 = hex_of(&img2, 1);
    let (_reg2, _proxy2, g, cfg2) = faulty(&img2, move |s, _| {
        if s.url.ends_with(&hex2) {
            return Fault::Corrupt;
        }
        Fault::Pass
    });
    let err = pull(&g, REF, &cfg2).0.expect_err("corrupt");
    assert!(
        matches!(
            &err,
            ImageError::Pull(PullError::Registry(RegistryError::DigestMismatch { .. }))
        ),
        "{err}"
    );
    assert_names(&err, &[REF, &big_layer_digest(&img2)]);
    assert_nothing_listed(&g);
    // The corrupt download is discarded (others, cancelled or complete, are kept to resume).
    let bad = hex_of(&img2, 1);
    let leftovers: Vec<_> = fs::read_dir(g.dir.join("images/tmp/pulls"))
        .expect("pulls")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&bad))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn unknown_manifest_media_type_is_named() {
    let doc = br#"{"schemaVersion":1,"name":"f/app","tag":"v1","fsLayers":[]}"#.to_vec();
    let digest = format!("sha256:{}", common::image::sha256_hex(&doc));
    let img = test_image(&host_arch(), 10, 15);
    let (_reg, _proxy, f, cfg) = faulty(&img, move |s, _| {
        if s.url.contains("/manifests/") {
            return Fault::Body(
                doc.clone(),
                "application/vnd.docker.distribution.manifest.v1+prettyjws".to_string(),
            );
        }
        Fault::Pass
    });
    let err = pull(&f, REF, &cfg).0.expect_err("unknown type");
    assert!(
        matches!(
            &err,
            ImageError::Pull(PullError::Resolve(
                ResolveError::UnsupportedMediaType { .. }
            ))
        ),
        "{err}"
    );
    assert_names(&err, &[REF, &digest, "manifest.v1+prettyjws"]);
    assert_nothing_listed(&f);
}

#[test]
#[ignore = "needs root: mounts a tmpfs (scripts/test runs it)"]
fn disk_full_during_pull_leaves_store_consistent() {
    common::require_root();
    let reg = Registry::start(false);
    let img = test_image(&host_arch(), 3 << 20, 16);
    push(&reg, &img, "f/app:v1");
    let fs_ = Tmpfs::mount("2m");
    let store_dir = fs_.dir.path().join("images");
    let store = ImageStore::open(&store_dir).expect("store on tmpfs");
    let cfgdir = tempfile::tempdir().expect("cfg dir");
    let cfg = cfg_for(cfgdir.path(), "registry.test", &reg.addr, false);
    let err = store
        .pull_with(REF, &cfg, fast_retry(), &mut |_| {})
        .expect_err("disk full");
    assert_names(&err, &[REF, &big_layer_digest(&img)]);
    assert!(err.to_string().contains("No space left"), "{err}");
    assert!(store.list().expect("list").is_empty());
    let partials: Vec<_> = fs::read_dir(store_dir.join("tmp/pulls"))
        .expect("pulls")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert!(
        partials
            .iter()
            .all(|n| !n.to_string_lossy().ends_with(".partial")),
        "{partials:?}"
    );
    drop(store);
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn sigkill_mid_pull_then_pull_again_completes() {
    let big = 4 << 20;
    let reg = Registry::start(false);
    let img = test_image(&host_arch(), big, 17);
    push(&reg, &img, "f/app:v1");
    // Slow the big layer down so the pull is killed mid-layer.
    let slow_hex = common::image::sha256_hex(&img.layers[1].blob);
    let sh = slow_hex.clone();
    let proxy = FaultProxy::start(&reg.addr, move |s, _| {
        if s.url.ends_with(&sh) && s.range.is_none() {
            Fault::Throttle(1 << 20)
        } else {
            Fault::Pass
        }
    });
    let f = fixture();
    let y = registries_yaml(&f.dir, "registry.test", &proxy.addr, false);
    let none = f.dir.join("none.json");
    fs::write(&none, "{}").expect("none");
    drop(f.store);
    let cli = |args: &[&str]| {
        let mut c = Command::new(common::podvisor_bin());
        c.arg("--root-dir").arg(&f.dir).args(args);
        c
    };
    let mut child = cli(&[
        "image",
        "pull",
        REF,
        "--registry-config",
        y.to_str().expect("utf8"),
        "--docker-config",
        none.to_str().expect("utf8"),
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .expect("spawn pull");
    let partial = f.dir.join(format!("images/tmp/pulls/{slow_hex}.partial"));
    common::wait_until(
        "the big layer's download to start",
        Duration::from_secs(30),
        || fs::metadata(&partial).is_ok_and(|m| m.len() > 512 << 10),
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("wait");
    let ls = cli(&["image", "ls"]).output().expect("ls");
    assert!(ls.status.success());
    assert!(
        !String::from_utf8_lossy(&ls.stdout).contains("registry.test"),
        "a half-pulled image is listed: {}",
        String::from_utf8_lossy(&ls.stdout)
    );
    assert!(
        partial.exists(),
        "the partial download must survive `image ls`"
    );

    let out = cli(&[
        "image",
        "pull",
        REF,
        "--registry-config",
        y.to_str().expect("utf8"),
        "--docker-config",
        none.to_str().expect("utf8"),
    ])
    .output()
    .expect("pull again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("pulled {REF} {}", img.digest())),
        "{stdout}"
    );
    // Not a tty: plain lines per layer.
    assert!(
        stdout.contains("resolved registry.test/f/app:v1"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("layer sha256:{slow_hex} downloaded")),
        "{stdout}"
    );
    assert!(
        proxy
            .seen()
            .iter()
            .any(|s| s.url.ends_with(&slow_hex) && s.range.is_some()),
        "the second pull did not resume"
    );
    let ls = cli(&["image", "ls"]).output().expect("ls");
    assert!(String::from_utf8_lossy(&ls.stdout).contains("registry.test/f/app:v1"));
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn concurrent_pulls_of_one_image_share_downloads() {
    let reg = Registry::start(false);
    let img = test_image(&host_arch(), 1 << 20, 18);
    push(&reg, &img, "f/app:v1");
    let f = fixture();
    let cfg = cfg_for(&f.dir, "registry.test", &reg.addr, false);
    let dir = f.dir.join("images");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    let store = ImageStore::open(&dir).expect("store");
                    store.pull_with(REF, &cfg, fast_retry(), &mut |_| {})
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("thread"))
            .collect()
    });
    for r in results {
        assert_eq!(r.expect("concurrent pull").digest, img.digest());
    }
    let list = f.store.list().expect("list");
    assert_eq!(list.len(), 1);
    let dirs = f.store.layer_dirs(&list[0]).expect("dirs");
    assert_eq!(
        fs::read(dirs[1].join("data/noise.bin")).expect("noise"),
        noise(1 << 20, 18)
    );
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn plain_http_only_when_configured() {
    let reg = Registry::start(false);
    let img = test_image(&host_arch(), 10, 19);
    push(&reg, &img, "f/app:v1");
    let f = fixture();
    // No registries.yaml: the registry is spoken to over https, which this one is not.
    let none = f.dir.join("none.json");
    fs::write(&none, "{}").expect("none");
    let cfg = RegistryConfig::load(None, Some(&none)).expect("cfg");
    let reference = format!("{}/f/app:v1", reg.addr);
    let err = pull(&f, &reference, &cfg)
        .0
        .expect_err("https to an http registry");
    assert!(
        matches!(
            &err,
            ImageError::Pull(PullError::Registry(RegistryError::Transport { .. }))
        ),
        "{err}"
    );
    assert_names(&err, &[&reference, &format!("https://{}", reg.addr)]);
    assert_nothing_listed(&f);
    // With an http:// endpoint for it, the same reference pulls.
    let cfg = cfg_for(&f.dir, &reg.addr, &reg.addr, false);
    let rec = pull(&f, &reference, &cfg).0.expect("http endpoint");
    assert_eq!(rec.digest, img.digest());
}

#[test]
#[ignore = "needs root: unpacks pulled layers with their owners (scripts/test runs it)"]
fn docker_schema2_manifest_list() {
    let reg = Registry::start(false);
    let gz_only = |arch: &str, seed: u64| {
        image(
            arch,
            vec![
                layer(&[("etc/a", noise(1000, seed))], Comp::Gzip),
                layer(&[("etc/b", noise(2000, seed + 1))], Comp::Gzip),
            ],
        )
    };
    let layout = tempfile::tempdir().expect("layout");
    write_layout(
        layout.path(),
        "d",
        &[gz_only("amd64", 20), gz_only("arm64", 22)],
    );
    // skopeo converts the index to a Docker manifest list of schema-2 manifests.
    reg.push_with(layout.path(), "d", "d/app:v1", true, &["--format", "v2s2"]);
    let f = fixture();
    let cfg = cfg_for(&f.dir, "registry.test", &reg.addr, false);
    let rec = pull(&f, "registry.test/d/app:v1", &cfg)
        .0
        .expect("pull v2s2");
    assert_eq!(rec.layers.len(), 2);
    for l in &rec.layers {
        assert_eq!(
            l.media_type,
            "application/vnd.docker.image.rootfs.diff.tar.gzip"
        );
    }
    let dirs = f.store.layer_dirs(&rec).expect("dirs");
    let seed = if host_arch() == "arm64" { 22 } else { 20 };
    assert_eq!(
        fs::read(dirs[0].join("etc/a")).expect("a"),
        noise(1000, seed)
    );
}
