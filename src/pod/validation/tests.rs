use super::*;

#[test]
fn validation_names_the_field() {
    let cases = [
            ("metadata: {name: Web}\nspec: {containers: [{name: a, image: b}]}\n", "metadata.name"),
            ("metadata: {name: w}\nspec: {containers: []}\n", "spec.containers"),
            ("metadata: {name: w}\nspec: {containers: [{name: a}]}\n", "spec.containers[0].image"),
            ("metadata: {name: w}\nspec: {initContainers: [{name: a, image: x}], containers: [{name: a, image: b}]}\n", "spec.containers[0].name"),
            ("metadata: {name: w}\n", "spec"),
        ];
    for (y, field) in cases {
        let pod = crate::pod::manifest::parse_pod(y.as_bytes(), "v.yaml").expect("parse");
        let msg = validate(&pod, "v.yaml").expect_err(y).to_string();
        assert!(msg.contains(&format!(": {field}:")), "{field} not in {msg}");
    }
}

#[test]
fn port_names_follow_iana_svc_name() {
    for ok in ["http", "metrics-1", "a", "h2c", "abcdefghijklmno"] {
        assert!(is_port_name(ok), "{ok}");
    }
    for bad in [
        "",
        "HTTP",
        "123",
        "-http",
        "http-",
        "ht--tp",
        "abcdefghijklmnop",
        "a_b",
    ] {
        assert!(!is_port_name(bad), "{bad}");
    }
}

#[test]
fn env_names_follow_the_kubernetes_pattern() {
    for ok in ["PATH", "_x", "a.b-c", "-x", "X1"] {
        assert!(is_env_var_name(ok), "{ok}");
    }
    for bad in ["", "1X", "A=B", "A B", "é"] {
        assert!(!is_env_var_name(bad), "{bad}");
    }
}

#[test]
fn qualified_names_and_label_values() {
    assert!(check_qualified_name("app.kubernetes.io/name").is_ok());
    assert!(check_qualified_name("tier").is_ok());
    assert_eq!(
        check_qualified_name("Bad_Prefix/x").map_err(|e| e.to_string()),
        Err("prefix \"Bad_Prefix\" is not a valid DNS-1123 subdomain".to_string())
    );
    assert_eq!(
        check_qualified_name("x/"),
        Err(QualifiedNameError::EmptyName)
    );
    assert!(check_qualified_name("-x").is_err());
    assert!(is_label_value(""));
    assert!(is_label_value("v1.2_3-a"));
    assert!(!is_label_value("-v"));
    assert!(!is_label_value(&"a".repeat(64)));
}

#[test]
fn extended_resources_as_the_api_server() {
    let pod = |res: &str| {
        format!("metadata: {{name: w}}\nspec: {{containers: [{{name: a, image: b, resources: {res}}}]}}\n")
    };
    let ok = [
        "{limits: {example.com/foo: 2}}",
        "{requests: {example.com/foo: 2}, limits: {example.com/foo: 2}}",
        "{requests: {hugepages-2Mi: 4Mi, memory: 1Mi}, limits: {hugepages-2Mi: 4Mi, memory: 1Mi}}",
    ];
    for res in ok {
        let p = crate::pod::manifest::parse_pod(pod(res).as_bytes(), "v.yaml").expect("parse");
        assert!(validate(&p, "v.yaml").is_ok(), "{res}");
    }
    let bad = [
        (
            "{requests: {example.com/foo: 2}}",
            "limits[example.com/foo]: Limit must be set for non overcommitable resources",
        ),
        (
            "{requests: {hugepages-2Mi: 2Mi}, limits: {hugepages-2Mi: 4Mi}}",
            "must be equal to the hugepages-2Mi limit of \"4Mi\"",
        ),
        (
            "{limits: {example.com/foo: 1.5}}",
            "\"1.5\" must be an integer",
        ),
        (
            "{limits: {kubernetes.io/foo: 1}}",
            "unknown resource \"kubernetes.io/foo\"",
        ),
    ];
    for (res, want) in bad {
        let p = crate::pod::manifest::parse_pod(pod(res).as_bytes(), "v.yaml").expect("parse");
        let msg = validate(&p, "v.yaml").expect_err(res).to_string();
        assert!(msg.contains(want), "{res}: {msg}");
    }
    let p = crate::pod::manifest::parse_pod(
            b"metadata: {name: w}\nspec: {resources: {limits: {example.com/foo: 1}}, containers: [{name: a, image: b}]}\n",
            "v.yaml",
        )
        .expect("parse");
    let msg = validate(&p, "v.yaml").expect_err("pod level").to_string();
    assert!(
        msg.contains("spec.resources.limits[example.com/foo]"),
        "{msg}"
    );
    let p = crate::pod::manifest::parse_pod(
            b"metadata: {name: w}\nspec: {resources: {limits: {ephemeral-storage: 1Gi}}, containers: [{name: a, image: b}]}\n",
            "v.yaml",
        )
        .expect("parse");
    let msg = validate(&p, "v.yaml").expect_err("pod level").to_string();
    assert!(
        msg.contains("spec.resources.limits[ephemeral-storage]: unsupported value"),
        "{msg}"
    );
}
