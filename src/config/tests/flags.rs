//! Tests of `--manifest-url-header` and the node name.

use super::*;

#[test]
fn header_flag_parsing_matches_the_kubelet() {
    let parse = |v: &[&str]| {
        parse_manifest_url_headers(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    };
    let h = parse(&["a:hello,b:again,c:world", "b:beautiful"]).expect("kubelet help example");
    assert_eq!(h["a"], vec!["hello"]);
    assert_eq!(h["b"], vec!["again", "beautiful"]);
    assert_eq!(h["c"], vec!["world"]);
    // Split at the first colon only; key and value trimmed; empty pairs skipped.
    let h = parse(&[" Authorization : Bearer a:b ,,", "X-Empty:"]).expect("parses");
    assert_eq!(h["Authorization"], vec!["Bearer a:b"]);
    assert_eq!(h["X-Empty"], vec![""]);
    assert_eq!(h.len(), 2);
    assert!(parse(&[]).expect("empty").is_empty());
    for bad in ["novalue", "a:1,broken", "Bad Name:x", ":x", "X\u{1}:y"] {
        assert!(
            matches!(
                parse(&[bad]),
                Err(ConfigError::InvalidFlag {
                    flag: "manifest-url-header",
                    ..
                })
            ),
            "{bad}"
        );
    }
}

#[test]
fn node_name_is_lowercased_and_validated() {
    assert_eq!(
        resolve_node_name(Some("  Edge-01.Example.COM ")).expect("valid"),
        "edge-01.example.com"
    );
    for bad in ["   ", "under_score", "-lead", "a..b", &"x".repeat(254)] {
        assert!(
            matches!(
                resolve_node_name(Some(bad)),
                Err(ConfigError::InvalidNodeName { .. })
            ),
            "{bad:?}"
        );
    }
    // No override (or an empty one): the system hostname, lowercased, if it is a valid name.
    let host = nix::unistd::gethostname().expect("gethostname");
    let host = host.to_string_lossy().trim().to_lowercase();
    match resolve_node_name(None) {
        Ok(name) => assert_eq!(name, host),
        Err(e) => assert!(
            matches!(
                e,
                ConfigError::InvalidNodeName {
                    origin: "the system hostname",
                    ..
                }
            ),
            "{e:?}"
        ),
    }
    assert_eq!(
        resolve_node_name(Some("")).map_err(|e| e.to_string()),
        resolve_node_name(None).map_err(|e| e.to_string())
    );
}
