use super::*;

#[test]
fn json_manifests_parse_too() {
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
    let pod = parse_pod(json.as_bytes(), "j.json").expect("parse");
    assert_eq!(pod.metadata.name.as_deref(), Some("j"));
}

#[test]
fn syntax_error_names_file_line_and_column() {
    let bad = "metadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: [unclosed\n";
    let err = parse_pod(bad.as_bytes(), "bad.yaml").expect_err("must fail");
    let msg = err.to_string();
    assert!(msg.starts_with("bad.yaml:"), "{msg}");
    assert!(
        msg.split(':')
            .nth(1)
            .is_some_and(|l| l.parse::<u64>().is_ok()),
        "{msg}"
    );
}

#[test]
fn type_error_names_field_and_location() {
    let bad = "metadata:\n  name: web\nspec:\n  containers: 12\n";
    let msg = parse_pod(bad.as_bytes(), "t.yaml")
        .expect_err("must fail")
        .to_string();
    assert!(msg.starts_with("t.yaml:4:3: spec.containers: "), "{msg}");
    let bad = "metadata:\n  name: web\nspec:\n  containers:\n  - name: a\n    image: b\n    ports:\n    - containerPort: http\n";
    let msg = parse_pod(bad.as_bytes(), "t.yaml")
        .expect_err("must fail")
        .to_string();
    assert!(
        msg.starts_with("t.yaml:8:7: spec.containers[0].ports[0].containerPort: "),
        "{msg}"
    );
}

#[test]
fn billion_laughs_is_refused_quickly() {
    let mut y = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let mut prev = 'a';
    for c in "bcdefghij".chars() {
        y.push_str(&format!(
            "{c}: &{c} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
        ));
        prev = c;
    }
    y.push_str("metadata: {name: x}\nspec: {containers: []}\n");
    let start = std::time::Instant::now();
    let err = parse_pod(y.as_bytes(), "bomb.yaml").expect_err("must fail");
    assert!(
        start.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
    assert!(err.to_string().starts_with("bomb.yaml"), "{err}");
}

/// Anchors `a` (10 scalars) to `a<levels>`, each a list of 10 aliases of the one before.
fn nested_aliases(levels: usize) -> String {
    let mut y = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..=levels {
        let p = format!("*a{}", i - 1);
        y.push_str(&format!("a{i}: &a{i} [{}]\n", vec![p; 10].join(", ")));
    }
    y
}

#[test]
fn alias_replay_is_capped_far_below_the_library_default() {
    // Four levels replay about 135,000 events: under serde-saphyr's default cap of
    // 1,000,000 (which a 400-byte bomb reaches after half a second of work), over ours.
    let Err(err) = parse_documents(&nested_aliases(4), "bomb.yaml") else {
        panic!("135,000 replayed events were accepted");
    };
    let msg = err.to_string();
    assert!(msg.starts_with("bomb.yaml"), "{msg}");
    assert!(
        msg.contains(&MAX_ALIAS_REPLAYED_EVENTS.to_string()),
        "{msg}"
    );
    // Anchors used as people use them still parse: three levels replay about 13,000.
    let docs = parse_documents(&nested_aliases(3), "ok.yaml").expect("three levels");
    assert_eq!(docs.len(), 1);
}

#[test]
fn empty_and_oversized_manifests_are_refused() {
    assert!(matches!(
        parse_pod(b"  \n", "e.yaml"),
        Err(ManifestError::Empty { .. })
    ));
    assert!(matches!(
        parse_pod(b"---\n# nothing\n", "e.yaml"),
        Err(ManifestError::Empty { .. })
    ));
    let big = vec![b'#'; MAX_MANIFEST_BYTES + 1];
    assert!(matches!(
        parse_pod(&big, "b.yaml"),
        Err(ManifestError::TooLarge { .. })
    ));
}

#[test]
fn oversized_files_are_refused_without_reading_them_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("big.yaml");
    std::fs::write(&p, vec![b'#'; MAX_MANIFEST_BYTES + 10]).expect("write");
    match read_manifest_file(&p) {
        Err(ManifestError::TooLarge { size, .. }) => assert_eq!(size, MAX_MANIFEST_BYTES + 1),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        read_manifest_file(&dir.path().join("missing.yaml")),
        Err(ManifestError::Read { .. })
    ));
}

#[test]
fn locate_finds_keys_items_and_falls_back_to_ancestors() {
    let y = "# c\nspec:\n  containers:\n  - name: a\n    ports:\n    - containerPort: 1\n      name: x\n  - name: b\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n";
    let docs = parse_documents(y, "l.yaml").expect("parse");
    let d = &docs[0];
    let pos = |p: &str| d.locate(p).map(|t| (t.line, t.column));
    assert_eq!(pos("spec"), Some((2, 1)));
    assert_eq!(pos("spec.containers[0].ports[0].name"), Some((7, 7)));
    assert_eq!(
        pos("spec.containers[0].ports[0].containerPort"),
        Some((6, 7))
    );
    assert_eq!(pos("spec.containers[1]"), Some((8, 5)));
    assert_eq!(pos("spec.containers[1].image"), Some((8, 5)));
    assert_eq!(
        pos("spec.containers[1].resources.limits[nvidia.com/gpu]"),
        Some((11, 9))
    );
    assert_eq!(pos("status"), None);
}

#[test]
fn canonical_json_ignores_formatting_order_and_comments() {
    let a = "b: 1\na: {x: [1, 'two', true, null]}\n";
    let b = "# comment\na:\n  x:\n  - 1\n  - \"two\"\n  - true\n  - ~\nb: 1\n";
    let ca = parse_documents(a, "a").expect("a")[0].canonical_json();
    let cb = parse_documents(b, "b").expect("b")[0].canonical_json();
    assert_eq!(ca, cb);
    assert_eq!(ca, r#"{"a":{"x":[1,"two",true,null]},"b":1}"#);
    let c = "b: 2\na: {x: [1, 'two', true, null]}\n";
    assert_ne!(parse_documents(c, "c").expect("c")[0].canonical_json(), ca);
}
