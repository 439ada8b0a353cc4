use super::blob::content_range_start;
use super::*;
use crate::httpclient::hostile::{self, Hostile};
use crate::httpclient::Phase;
use std::sync::OnceLock;

/// The hostile behaviours, by the name their request paths end in.
const BEHAVIOURS: [&str; 6] = [
    "bomb",
    "endless",
    "slow-head",
    "trickle",
    "huge-head",
    "loop",
];

fn behaviour(name: &str) -> Hostile {
    match name {
        "bomb" => Hostile::GzipBomb,
        "endless" => Hostile::EndlessBody,
        "slow-head" => Hostile::SlowHead,
        "trickle" => Hostile::TrickleBody,
        "huge-head" => Hostile::HugeHead,
        _ => Hostile::RedirectLoop,
    }
}

/// The blob digest standing for behaviour `name`.
fn blob_of(name: &str) -> Digest {
    Digest::of(name.as_bytes())
}

const TEST_LIMITS: Limits = Limits {
    head: Duration::from_millis(700),
    body: Duration::from_millis(700),
    total: Duration::from_secs(20),
    ..REGISTRY_LIMITS
};

/// Runs in a child process (see `hostile_registries_end_in_named_errors_with_bounded_memory`):
/// manifests, tokens, an image config and a layer blob from each hostile behaviour.
fn hostile_child(base: &str) {
    let cfg = RegistryConfig::default();
    let ep = Endpoint::parse(base).expect("endpoint");
    let retry = RetryPolicy {
        attempts: 1,
        ..RetryPolicy::default()
    };
    let client = Client::new(
        &cfg,
        "hostile/app:v1",
        retry,
        Arc::new(AtomicBool::new(false)),
    )
    .with_limits(TEST_LIMITS);
    let dir = tempfile::tempdir().expect("tempdir");
    let timeout = |phase| HttpError::Timeout {
        phase,
        after: Duration::from_millis(700),
    };
    // What each behaviour becomes where an HTTP error is expected.
    let http = |name: &str| match name {
        "slow-head" => timeout(Phase::Head),
        "trickle" => timeout(Phase::Body),
        "huge-head" => HttpError::HeadTooLarge { limit: 64 << 10 },
        _ => HttpError::TooManyRedirects { max: 10 },
    };
    for name in BEHAVIOURS {
        let body_too_large = matches!(name, "bomb" | "endless");
        match client.manifest(&ep, "r/app", name, None) {
            Err(RegistryError::TooLarge { limit, .. }) if body_too_large => {
                assert_eq!(limit, MAX_MANIFEST)
            }
            Err(RegistryError::Transport { source, .. }) if !body_too_large => {
                assert_eq!(source, http(name), "manifest {name}")
            }
            other => panic!("manifest {name}: {other:?}"),
        }
        match client.manifest(&ep, "r/app", &format!("tok-{name}"), None) {
            Err(RegistryError::Token {
                source: TokenError::Http { source, .. },
                ..
            }) => {
                let want = if body_too_large {
                    HttpError::BodyTooLarge { limit: MAX_TOKEN }
                } else {
                    http(name)
                };
                assert_eq!(source, want, "token {name}");
            }
            other => panic!("token {name}: {other:?}"),
        }
        let blob = blob_of(name);
        let config = client.blob_bytes(&ep, "r/app", &blob, 1000);
        let layer = client.blob_to_file(&ep, "r/app", &blob, 1000, dir.path(), &|_| {});
        for (what, r) in [("config", config.map(|_| ())), ("layer", layer.map(|_| ()))] {
            match r {
                Err(RegistryError::SizeMismatch { expected, .. }) if body_too_large => {
                    assert_eq!(expected, 1000)
                }
                Err(RegistryError::Truncated { detail, .. }) if name == "trickle" => {
                    assert!(detail.contains("timed out"), "{what} {name}: {detail}")
                }
                Err(RegistryError::Transport { source, .. }) if !body_too_large => {
                    assert_eq!(source, http(name), "{what} {name}")
                }
                other => panic!("{what} {name}: {other:?}"),
            }
        }
    }
}

#[test]
fn hostile_registries_end_in_named_errors_with_bounded_memory() {
    if let Some(base) = hostile::child_url() {
        hostile_child(&base);
        return hostile::report_peak_rss();
    }
    let authority: Arc<OnceLock<String>> = Arc::default();
    let auth = Arc::clone(&authority);
    let server = hostile::Server::start(move |path| {
        let last = path.split('?').next().unwrap_or(path);
        let last = last.rsplit('/').next().unwrap_or(last);
        if let Some(name) = last.strip_prefix("tok-") {
            let realm = format!("http://{}/token/{name}", auth.get().expect("set"));
            return Hostile::Reply {
                status: 401,
                headers: vec![(
                    "WWW-Authenticate".into(),
                    format!("Bearer realm=\"{realm}\",service=\"hostile\""),
                )],
                body: Vec::new(),
            };
        }
        let name = BEHAVIOURS
            .into_iter()
            .find(|n| *n == last || last == format!("{}", blob_of(n)))
            .unwrap_or("loop");
        behaviour(name)
    });
    authority.set(server.authority()).expect("once");
    hostile::assert_child_memory_bounded(
        module_path!(),
        "hostile_registries_end_in_named_errors_with_bounded_memory",
        &server.url(""),
        "registry client",
        MAX_MANIFEST,
    );
}

#[test]
fn challenges() {
    assert_eq!(
        parse_challenge(
            r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/busybox:pull""#
        ),
        Some(Challenge::Bearer {
            realm: "https://auth.docker.io/token".to_string(),
            service: Some("registry.docker.io".to_string()),
            scope: Some("repository:library/busybox:pull".to_string()),
        })
    );
    assert_eq!(
        parse_challenge(r#"Basic realm="Registry Realm""#),
        Some(Challenge::Basic)
    );
    assert_eq!(
        parse_challenge("bearer realm=http://x/t, service=svc"),
        Some(Challenge::Bearer {
            realm: "http://x/t".to_string(),
            service: Some("svc".to_string()),
            scope: None,
        })
    );
    assert_eq!(parse_challenge("Bearer service=\"x\""), None);
    assert_eq!(parse_challenge("Negotiate abc"), None);
}

#[test]
fn content_range_and_backoff() {
    assert_eq!(content_range_start("bytes 100-199/200"), Some(100));
    assert_eq!(content_range_start("items 1-2/3"), None);
    let p = RetryPolicy::default();
    assert_eq!(p.delay(1, None), Duration::from_millis(500));
    assert_eq!(p.delay(10, None), Duration::from_secs(10));
    assert_eq!(
        p.delay(1, Some(Duration::from_secs(2))),
        Duration::from_secs(2)
    );
    assert_eq!(
        p.delay(1, Some(Duration::from_secs(3600))),
        Duration::from_secs(30)
    );
}
