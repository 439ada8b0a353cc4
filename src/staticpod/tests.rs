//! Tests of static pod loading: names, UIDs, hashes, defaults and file:line:column errors.

use super::*;

const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox\n    resources:\n      limits: {memory: 64Mi, cpu: 500m}\n";

#[test]
fn parses_and_defaults_a_pod() {
    let mut pod = manifest::parse_pod(GOOD.as_bytes(), "web.yaml").expect("parse");
    validation::validate(&pod, "web.yaml").expect("valid");
    apply_defaults(&mut pod, "web.yaml", GOOD.as_bytes());
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    let uid = pod.metadata.uid.clone().expect("uid");
    assert_eq!(uid.len(), 32);
    let mut again = manifest::parse_pod(GOOD.as_bytes(), "web.yaml").expect("parse");
    apply_defaults(&mut again, "web.yaml", GOOD.as_bytes());
    assert_eq!(again.metadata.uid, Some(uid));
    let limits = pod.spec.expect("spec").containers[0]
        .resources
        .clone()
        .expect("resources")
        .limits
        .expect("limits");
    assert_eq!(limits["memory"].0, "64Mi");
}

#[test]
fn pull_policy_defaults_like_the_api_server() {
    for (image, want) in [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("registry.local:5000/app", "Always"),
        ("registry.local:5000/app:2", "IfNotPresent"),
        ("registry.local:5000/app:latest", "Always"),
        ("busybox@sha256:0123", "IfNotPresent"),
        ("busybox:latest@sha256:0123", "Always"),
    ] {
        assert_eq!(default_pull_policy(image), want, "{image}");
    }
    let mut pod = manifest::parse_pod(GOOD.as_bytes(), "web.yaml").expect("parse");
    apply_defaults(&mut pod, "web.yaml", GOOD.as_bytes());
    let spec = pod.spec.expect("spec");
    assert_eq!(
        spec.containers[0].image_pull_policy.as_deref(),
        Some("Always")
    );
}

const NOW: &str = "2025-01-02T03:04:05Z";

/// A block-YAML pod: `container` lines are inserted from line 9 on (indent 4), then
/// `spec` lines (indent 2).
fn manifest(container: &str, spec: &str) -> String {
    let mut s = String::from(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox\n",
        );
    for part in [container, spec] {
        if !part.is_empty() {
            s.push_str(part);
            s.push('\n');
        }
    }
    s
}

fn load_file(text: &str) -> Result<Vec<StaticPod>, ManifestError> {
    load_manifest(
        text.as_bytes(),
        "/etc/kubernetes/manifests/web.yaml",
        SourceKind::File,
        "Node1",
        NOW,
    )
}

fn errors_of(text: &str) -> Vec<FieldError> {
    match load_file(text) {
        Err(ManifestError::Invalid { errors, .. }) => errors,
        other => panic!("expected Invalid for\n{text}\ngot {other:?}"),
    }
}

fn one(text: &str) -> StaticPod {
    let mut pods = load_file(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(pods.len(), 1);
    pods.remove(0)
}

#[test]
fn every_validation_rule_names_field_line_and_column() {
    // (container lines, spec lines, line, column, field, message part)
    let cases: &[(&str, &str, u64, u64, &str, &str)] = &[
            ("    ports:\n    - containerPort: 80\n    - containerPort: 70000", "", 11, 7,
             "spec.containers[0].ports[1].containerPort", "70000 is not a valid port (1-65535)"),
            ("    ports:\n    - containerPort: 0", "", 10, 7,
             "spec.containers[0].ports[0].containerPort", "0 is not a valid port (1-65535)"),
            ("    ports:\n    - containerPort: 80\n      hostPort: 70000", "", 11, 7,
             "spec.containers[0].ports[0].hostPort", "70000 is not a valid port (0-65535)"),
            ("    ports:\n    - containerPort: 80\n      protocol: HTTP", "", 11, 7,
             "spec.containers[0].ports[0].protocol", "\"HTTP\" is not one of TCP, UDP, SCTP"),
            ("    ports:\n    - containerPort: 80\n      name: Web_1", "", 11, 7,
             "spec.containers[0].ports[0].name", "is not a valid port name"),
            ("    ports:\n    - containerPort: 80\n      name: metrics-endpoint1", "", 11, 7,
             "spec.containers[0].ports[0].name", "is not a valid port name"),
            ("    ports:\n    - {containerPort: 80, name: http}\n    - containerPort: 81\n      name: http", "", 12, 7,
             "spec.containers[0].ports[1].name", "duplicate port name \"http\""),
            ("    ports:\n    - {containerPort: 80, hostPort: 8080}\n    - containerPort: 81\n      hostPort: 8080", "", 12, 7,
             "spec.containers[0].ports[1].hostPort", "host port 8080/TCP is already used"),
            ("    ports:\n    - containerPort: 80\n      hostPort: 8080", "  hostNetwork: true", 11, 7,
             "spec.containers[0].ports[0].hostPort", "must match containerPort 80 when hostNetwork is true"),
            ("    resources:\n      limits:\n        gpu: 1", "", 11, 9,
             "spec.containers[0].resources.limits[gpu]", "unknown resource \"gpu\""),
            ("    resources:\n      limits:\n        example.com/foo: 500m", "", 11, 9,
             "spec.containers[0].resources.limits[example.com/foo]", "\"500m\" must be an integer"),
            ("    resources:\n      requests:\n        example.com/foo: 1\n      limits:\n        example.com/foo: 2", "", 11, 9,
             "spec.containers[0].resources.requests[example.com/foo]", "\"1\" must be equal to the example.com/foo limit of \"2\""),
            ("    resources:\n      requests:\n        memory: lots", "", 11, 9,
             "spec.containers[0].resources.requests[memory]", "invalid quantity \"lots\""),
            ("    resources:\n      requests:\n        cpu: '2'\n      limits:\n        cpu: 500m", "", 11, 9,
             "spec.containers[0].resources.requests[cpu]", "\"2\" must be less than or equal to the cpu limit of \"500m\""),
            ("    resources:\n      requests:\n        memory: 1Gi\n      limits:\n        memory: 1000Mi", "", 11, 9,
             "spec.containers[0].resources.requests[memory]", "must be less than or equal to the memory limit"),
            ("    restartPolicy: Always", "", 9, 5,
             "spec.containers[0].restartPolicy", "may only be set on init containers"),
            ("    imagePullPolicy: Sometimes", "", 9, 5,
             "spec.containers[0].imagePullPolicy", "\"Sometimes\" is not one of Always, IfNotPresent, Never"),
            ("    env:\n    - name: OK\n      value: x\n    - name: 1BAD", "", 12, 7,
             "spec.containers[0].env[1].name", "\"1BAD\" is not a valid environment variable name"),
            ("    env:\n    - name: P\n      valueFrom:\n        secretKeyRef: {name: s, key: k}", "", 12, 9,
             "spec.containers[0].env[0].valueFrom.secretKeyRef", "static pods cannot reference API objects (secrets)"),
            ("    env:\n    - name: P\n      valueFrom:\n        configMapKeyRef: {name: s, key: k}", "", 12, 9,
             "spec.containers[0].env[0].valueFrom.configMapKeyRef", "static pods cannot reference API objects (config maps)"),
            ("    envFrom:\n    - configMapRef: {name: c}", "", 10, 7,
             "spec.containers[0].envFrom[0].configMapRef", "(config maps)"),
            ("    envFrom:\n    - prefix: X_\n      secretRef: {name: c}", "", 11, 7,
             "spec.containers[0].envFrom[0].secretRef", "(secrets)"),
            ("    volumeMounts:\n    - name: data\n      mountPath: /data", "", 10, 7,
             "spec.containers[0].volumeMounts[0].name", "volume \"data\" is not declared in spec.volumes"),
            ("    volumeMounts:\n    - name: data\n      mountPath: data", "  volumes:\n  - name: data\n    emptyDir: {}", 11, 7,
             "spec.containers[0].volumeMounts[0].mountPath", "\"data\" must be an absolute path"),
            ("    volumeMounts:\n    - {name: data, mountPath: /d}\n    - name: data\n      mountPath: /d/", "  volumes:\n  - name: data\n    emptyDir: {}", 12, 7,
             "spec.containers[0].volumeMounts[1].mountPath", "mounted more than once"),
            ("    volumeMounts:\n    - name: data\n      mountPath: /d\n      subPath: ../etc", "  volumes:\n  - name: data\n    emptyDir: {}", 12, 7,
             "spec.containers[0].volumeMounts[0].subPath", "relative path without '..'"),
            ("", "  restartPolicy: Sometimes", 9, 3,
             "spec.restartPolicy", "\"Sometimes\" is not one of Always, OnFailure, Never"),
            ("", "  terminationGracePeriodSeconds: -1", 9, 3,
             "spec.terminationGracePeriodSeconds", "-1 must be greater than or equal to 0"),
            ("", "  volumes:\n  - name: a\n    emptyDir: {}\n  - name: a\n    hostPath: {path: /x}", 12, 5,
             "spec.volumes[1].name", "duplicate volume name \"a\""),
            ("", "  volumes:\n  - name: Bad_Name\n    emptyDir: {}", 10, 5,
             "spec.volumes[0].name", "not a valid DNS-1123 label"),
            ("", "  volumes:\n  - name: a\n    emptyDir: {}\n    hostPath: {path: /x}", 10, 5,
             "spec.volumes[0]", "may not specify more than 1 volume type"),
            ("", "  volumes:\n  - name: s\n    secret: {secretName: x}", 11, 5,
             "spec.volumes[0].secret", "static pods cannot reference API objects (secrets)"),
            ("", "  volumes:\n  - name: s\n    configMap: {name: x}", 11, 5,
             "spec.volumes[0].configMap", "(config maps)"),
            ("", "  volumes:\n  - name: s\n    persistentVolumeClaim: {claimName: x}", 11, 5,
             "spec.volumes[0].persistentVolumeClaim", "(persistent volume claims)"),
            ("", "  volumes:\n  - name: s\n    ephemeral: {}", 11, 5,
             "spec.volumes[0].ephemeral", "static pods cannot reference API objects"),
            ("", "  volumes:\n  - name: s\n    csi: {driver: x}", 11, 5,
             "spec.volumes[0].csi", "(CSI drivers)"),
            ("", "  volumes:\n  - name: t\n    projected:\n      sources:\n      - downwardAPI: {}\n      - serviceAccountToken: {path: token}", 14, 9,
             "spec.volumes[0].projected.sources[1].serviceAccountToken", "static pods cannot get service account tokens"),
            ("", "  volumes:\n  - name: t\n    projected:\n      sources:\n      - clusterTrustBundle: {path: b}", 13, 9,
             "spec.volumes[0].projected.sources[0].clusterTrustBundle", "(cluster trust bundles)"),
            ("", "  volumes:\n  - name: t\n    projected:\n      sources:\n      - secret: {name: b}", 13, 9,
             "spec.volumes[0].projected.sources[0].secret", "(secrets)"),
            ("", "  serviceAccountName: builder", 9, 3,
             "spec.serviceAccountName", "static pods cannot reference service accounts"),
            ("", "  automountServiceAccountToken: true", 9, 3,
             "spec.automountServiceAccountToken", "static pods cannot get service account tokens"),
            ("", "  imagePullSecrets:\n  - name: reg", 10, 5,
             "spec.imagePullSecrets[0]", "(secrets)"),
            ("", "  ephemeralContainers:\n  - name: dbg\n    image: busybox", 9, 3,
             "spec.ephemeralContainers", "static pods cannot have ephemeral containers"),
            ("", "  resourceClaims:\n  - name: gpu\n    resourceClaimName: g", 9, 3,
             "spec.resourceClaims", "(resource claims)"),
            ("", "  initContainers:\n  - name: init\n    image: busybox\n    restartPolicy: OnFailure", 12, 5,
             "spec.initContainers[0].restartPolicy", "only Always (a sidecar) is allowed"),
            ("", "  initContainers:\n  - name: app\n    image: busybox", 7, 5,
             "spec.containers[0].name", "duplicate container name \"app\""),
            ("", "  initContainers:\n  - name: Init\n    image: busybox", 10, 5,
             "spec.initContainers[0].name", "\"Init\" is not a valid DNS-1123 label"),
            ("", "  initContainers:\n  - name: init\n    image: \"  \"", 11, 5,
             "spec.initContainers[0].image", "required"),
            ("", "  initContainers:\n  - name: init", 10, 5,
             "spec.initContainers[0].image", "required"),
        ];
    for (container, spec, line, column, field, message) in cases {
        let text = manifest(container, spec);
        let errors = errors_of(&text);
        let hit = errors
            .iter()
            .find(|e| e.field == *field)
            .unwrap_or_else(|| panic!("no error for {field} in {errors:?}\n{text}"));
        assert!(
            hit.message.contains(message),
            "{field}: {:?} lacks {message:?}",
            hit.message
        );
        assert_eq!(
            hit.pos.map(|p| (p.line, p.column)),
            Some((*line, *column)),
            "{field} in\n{text}"
        );
        assert_eq!(errors.len(), 1, "{errors:?}\n{text}");
    }
}

#[test]
fn error_text_is_source_line_column_field_message() {
    let text = manifest(
        "    ports:\n    - containerPort: 80\n    - containerPort: 70000",
        "",
    );
    let msg = load_file(&text).expect_err("invalid").to_string();
    assert_eq!(
            msg,
            "/etc/kubernetes/manifests/web.yaml:11:7: spec.containers[0].ports[1].containerPort: 70000 is not a valid port (1-65535)"
        );
}

#[test]
fn all_errors_of_a_manifest_are_reported_one_per_line() {
    let text = manifest(
        "    imagePullPolicy: Sometimes\n    ports:\n    - containerPort: 70000",
        "  restartPolicy: Sometimes\n  serviceAccountName: x",
    );
    let err = load_file(&text).expect_err("invalid");
    let msg = err.to_string();
    let lines: Vec<&str> = msg.lines().collect();
    assert_eq!(lines.len(), 4, "{msg}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("/etc/kubernetes/manifests/web.yaml:")),
        "{msg}"
    );
    for field in [
        "spec.containers[0].imagePullPolicy",
        "spec.containers[0].ports[0].containerPort",
        "spec.restartPolicy",
        "spec.serviceAccountName",
    ] {
        assert!(msg.contains(&format!(": {field}: ")), "{field} in {msg}");
    }
}

#[test]
fn metadata_rules_name_the_field() {
    type Case = (&'static str, Option<(u64, u64)>, &'static str, &'static str);
    let cases: &[Case] = &[
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: Web\nspec:\n  containers: [{name: a, image: b}]\n",
             Some((4, 3)), "metadata.name", "\"Web-node1\" is not a valid DNS-1123 subdomain"),
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: Kube_System\nspec:\n  containers: [{name: a, image: b}]\n",
             Some((5, 3)), "metadata.namespace", "\"Kube_System\" is not a valid DNS-1123 label"),
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  labels: {a: b}\nspec:\n  containers: [{name: a, image: b}]\n",
             Some((3, 1)), "metadata.name", "required"),
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels:\n    app.kubernetes.io/name: -bad\nspec:\n  containers: [{name: a, image: b}]\n",
             Some((6, 5)), "metadata.labels[app.kubernetes.io/name]", "not a valid label value"),
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    Bad_Prefix/x: value\nspec:\n  containers: [{name: a, image: b}]\n",
             Some((6, 5)), "metadata.annotations[Bad_Prefix/x]", "prefix \"Bad_Prefix\" is not a valid DNS-1123 subdomain"),
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  annotations:\n    podvisor.io/rollback-after: 5 minutes\nspec:\n  containers: [{name: a, image: b}]\n",
             Some((6, 5)), "metadata.annotations[podvisor.io/rollback-after]", "unknown unit \" minutes\" in duration \"5 minutes\" (a duration such as \"5m\""),
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: []\n",
             Some((6, 3)), "spec.containers", "at least one container is required"),
            ("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n",
             None, "spec", "required"),
        ];
    for (text, pos, field, message) in cases {
        let errors = errors_of(text);
        let hit = errors
            .iter()
            .find(|e| e.field == *field)
            .unwrap_or_else(|| panic!("no {field} in {errors:?}"));
        assert!(hit.message.contains(message), "{field}: {:?}", hit.message);
        assert_eq!(hit.pos.map(|p| (p.line, p.column)), *pos, "{field}");
    }
}

#[test]
fn the_node_suffix_counts_toward_the_name_limit() {
    // 63 + 63 + 63 + 55 characters and three dots: 247 characters.
    let name = [
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(55),
    ]
    .join(".");
    let text = format!("apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers: [{{name: a, image: b}}]\n");
    // 247 + "-node1" = 253: fits exactly.
    assert_eq!(one(&text).pod.metadata.name.map(|n| n.len()), Some(253));
    let text = text.replace(&name, &format!("{name}d"));
    let errors = errors_of(&text);
    assert_eq!(errors[0].field, "metadata.name");
    assert!(errors[0].message.contains("node suffix"), "{errors:?}");
    assert!(errors[0].message.contains("253"), "{errors:?}");
}

#[test]
fn json_manifests_report_the_field_path() {
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox","ports":[{"containerPort":70000}]}],"volumes":[{"name":"s","secret":{"secretName":"x"}}]}}"#;
    let errors = match load_manifest(json.as_bytes(), "j.json", SourceKind::File, "n", NOW) {
        Err(ManifestError::Invalid { errors, .. }) => errors,
        other => panic!("{other:?}"),
    };
    let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
    assert!(
        fields.contains(&"spec.containers[0].ports[0].containerPort"),
        "{fields:?}"
    );
    assert!(fields.contains(&"spec.volumes[0].secret"), "{fields:?}");
    let pretty = serde_json::to_string_pretty(
        &serde_json::from_str::<serde_json::Value>(json).expect("json"),
    )
    .expect("pretty");
    let msg = load_manifest(pretty.as_bytes(), "j.json", SourceKind::File, "n", NOW)
        .expect_err("invalid")
        .to_string();
    assert!(
        msg.contains(": spec.containers[0].ports[0].containerPort: 70000"),
        "{msg}"
    );
    let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"b"}]}}"#;
    let pods = load_manifest(json.as_bytes(), "j.json", SourceKind::File, "n", NOW).expect("ok");
    assert_eq!(pods[0].full_name, "default/j-n");
}

#[test]
fn type_errors_name_the_field_and_location() {
    let text = manifest("    ports:\n    - containerPort: http", "");
    let msg = load_file(&text).expect_err("invalid").to_string();
    assert!(
            msg.starts_with("/etc/kubernetes/manifests/web.yaml:10:7: spec.containers[0].ports[0].containerPort: invalid type"),
            "{msg}"
        );
    let text =
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: [{image: b}]\n";
    let msg = load_file(text).expect_err("invalid").to_string();
    assert!(
        msg.ends_with(":6:16: spec.containers[0].name: required"),
        "{msg}"
    );
    // Like Kubernetes, an unquoted number is not a string.
    let text = manifest("    env:\n    - name: PORT\n      value: 8080", "");
    let msg = load_file(&text).expect_err("invalid").to_string();
    assert!(
            msg.starts_with("/etc/kubernetes/manifests/web.yaml:11:7: spec.containers[0].env[0].value: invalid type: integer `8080`, expected a string"),
            "{msg}"
        );
    // Quantities may be numbers.
    let p = one(&manifest(
        "    resources:\n      limits: {cpu: 1, memory: 1e9}",
        "",
    ));
    let limits = p.pod.spec.expect("spec").containers[0]
        .resources
        .clone()
        .expect("r")
        .limits
        .expect("l");
    assert_eq!(limits["cpu"].0, "1");
}

#[test]
fn api_version_and_kind_are_checked_first() {
    let cases: &[(&str, SourceKind, &str, &str)] = &[
        (
            "kind: Pod\nmetadata: {name: a}\n",
            SourceKind::File,
            "apiVersion",
            "required (v1)",
        ),
        (
            "apiVersion: apps/v1\nkind: Pod\nmetadata: {name: a}\n",
            SourceKind::File,
            "apiVersion",
            "\"apps/v1\" is not supported: expected v1",
        ),
        (
            "apiVersion: v1\nmetadata: {name: a}\n",
            SourceKind::File,
            "kind",
            "required",
        ),
        (
            "apiVersion: v1\nkind: Deployment\nspec: {replicas: 3}\n",
            SourceKind::File,
            "kind",
            "\"Deployment\" is not supported: expected Pod",
        ),
        (
            "apiVersion: v1\nkind: Deployment\n",
            SourceKind::Http,
            "kind",
            "expected Pod, PodList or List",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: []\n",
            SourceKind::File,
            "kind",
            "a file holds exactly one Pod",
        ),
        (
            "- a\n- b\n",
            SourceKind::File,
            "(document)",
            "expected a Pod (a mapping), found a list",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: a}\n",
            SourceKind::Http,
            "items[0].apiVersion",
            "required",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  metadata: {name: a}\n",
            SourceKind::Http,
            "items[0].kind",
            "required",
        ),
        (
            "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n",
            SourceKind::Http,
            "items[0].kind",
            "\"Service\" is not supported: list items must be Pods",
        ),
        (
            "apiVersion: v1\nkind: PodList\nitems: {a: b}\n",
            SourceKind::Http,
            "items",
            "expected a list of Pods",
        ),
    ];
    for (text, kind, field, message) in cases {
        let errors = match load_manifest(text.as_bytes(), "m.yaml", *kind, "n", NOW) {
            Err(ManifestError::Invalid { errors, .. }) => errors,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, *field, "{text}");
        assert!(
            errors[0].message.contains(message),
            "{text}: {}",
            errors[0].message
        );
    }
    let msg = load_file("apiVersion: v1\nkind: Deployment\n")
        .expect_err("kind")
        .to_string();
    assert!(
        msg.starts_with("/etc/kubernetes/manifests/web.yaml:2:1: kind: "),
        "{msg}"
    );
}

#[test]
fn files_hold_exactly_one_document() {
    let text = format!("{}---\n{}", manifest("", ""), manifest("", ""));
    let msg = load_file(&text).expect_err("two docs").to_string();
    assert!(
        msg.contains("exactly one Pod, found 2 YAML documents"),
        "{msg}"
    );
    // Leading/trailing document markers and comments are fine.
    let text = format!("---\n# web\n{}---\n", manifest("", ""));
    one(&text);
    assert!(matches!(
        load_file("---\n# nothing\n"),
        Err(ManifestError::Empty { .. })
    ));
}

#[test]
fn static_pod_defaults() {
    let p = one(&manifest("", ""));
    assert_eq!(p.pod.metadata.name.as_deref(), Some("web-node1"));
    assert_eq!(p.pod.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(p.full_name, "default/web-node1");
    assert_eq!(p.source, "/etc/kubernetes/manifests/web.yaml");
    let spec = p.pod.spec.as_ref().expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("Node1"));
    let tol = spec.tolerations.as_ref().expect("tolerations");
    assert_eq!(tol.len(), 1);
    assert_eq!(tol[0].operator.as_deref(), Some("Exists"));
    assert_eq!(tol[0].effect.as_deref(), Some("NoExecute"));
    assert_eq!(tol[0].key, None);
    // The API server's pull policy default is visible in the pod, as the kubelet shows it.
    assert!(spec.containers.iter().all(|c| c
        .image_pull_policy
        .as_deref()
        .is_some_and(|p| !p.is_empty())));
    let uid = p.uid().to_string();
    assert_eq!(uid.len(), 32);
    assert!(uid.bytes().all(|b| b.is_ascii_hexdigit()));
    let ann = p.pod.metadata.annotations.as_ref().expect("annotations");
    assert_eq!(ann[CONFIG_SOURCE_ANNOTATION], "file");
    assert_eq!(ann[CONFIG_SEEN_ANNOTATION], NOW);
    assert_eq!(ann[CONFIG_HASH_ANNOTATION], uid);
    assert_eq!(p.spec_hash.len(), 64);
    assert_eq!(p.meta_hash.len(), 64);

    // A namespace as written is kept; an existing identical toleration is not doubled.
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: kube-system}\nspec:\n  tolerations: [{operator: Exists, effect: NoExecute}]\n  containers: [{name: a, image: b}]\n";
    let p = one(text);
    assert_eq!(p.full_name, "kube-system/web-node1");
    assert_eq!(
        p.pod.spec.expect("spec").tolerations.map(|t| t.len()),
        Some(1)
    );

    // URL pods get no toleration and say they came from http.
    let p = load_manifest(
        manifest("", "").as_bytes(),
        "http://cfg/pods",
        SourceKind::Http,
        "node1",
        NOW,
    )
    .expect("http")
    .remove(0);
    assert_eq!(p.pod.spec.as_ref().expect("spec").tolerations, None);
    assert_eq!(
        p.pod.metadata.annotations.expect("ann")[CONFIG_SOURCE_ANNOTATION],
        "http"
    );
    assert_eq!(p.source, "http://cfg/pods");
}

#[test]
fn uid_is_stable_across_metadata_and_formatting_edits_and_changes_with_the_spec() {
    let base = one(&manifest("    ports:\n    - containerPort: 80", ""));
    let same = [
            // Labels and annotations added.
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {app: web}\n  annotations: {note: hi}\nspec:\n  containers:\n  - name: app\n    image: busybox\n    ports:\n    - containerPort: 80\n",
            // Comments, flow style, key order, quoting.
            "# the web pod\nkind: Pod\napiVersion: \"v1\"\nspec: {containers: [{ports: [{containerPort: 80}], image: 'busybox', name: app}]}  # inline\nmetadata: {name: web}\n",
            // JSON.
            r#"{"metadata":{"name":"web"},"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"app","image":"busybox","ports":[{"containerPort":80}]}]}}"#,
        ];
    for text in same {
        let p = one(text);
        assert_eq!(p.uid(), base.uid(), "{text}");
        assert_eq!(p.spec_hash, base.spec_hash, "{text}");
    }
    assert_ne!(one(same[0]).meta_hash, base.meta_hash);
    assert_eq!(one(same[1]).meta_hash, base.meta_hash);
    let different = [
        manifest("    ports:\n    - containerPort: 81", ""),
        manifest(
            "    ports:\n    - containerPort: 80",
            "  restartPolicy: Never",
        ),
        manifest("    ports:\n    - containerPort: 80\n    args: [x]", ""),
        manifest("    ports:\n    - containerPort: 80", "").replace("name: web", "name: web2"),
    ];
    for text in &different {
        let p = one(text);
        assert_ne!(p.uid(), base.uid(), "{text}");
    }
    let other_path = load_manifest(
        manifest("    ports:\n    - containerPort: 80", "").as_bytes(),
        "/etc/kubernetes/manifests/web2.yaml",
        SourceKind::File,
        "Node1",
        NOW,
    )
    .expect("ok")
    .remove(0);
    assert_ne!(other_path.uid(), base.uid());
    assert_eq!(other_path.spec_hash, base.spec_hash);
    let other_node = load_manifest(
        manifest("    ports:\n    - containerPort: 80", "").as_bytes(),
        "/etc/kubernetes/manifests/web.yaml",
        SourceKind::File,
        "node2",
        "2030-01-01T00:00:00Z",
    )
    .expect("ok")
    .remove(0);
    assert_ne!(other_node.uid(), base.uid());
    // `seen` is not part of the identity.
    let later = load_manifest(
        manifest("    ports:\n    - containerPort: 80", "").as_bytes(),
        "/etc/kubernetes/manifests/web.yaml",
        SourceKind::File,
        "Node1",
        "2030-01-01T00:00:00Z",
    )
    .expect("ok")
    .remove(0);
    assert_eq!(later.uid(), base.uid());
}

#[test]
fn url_bodies_hold_pod_lists_and_several_documents() {
    let list = "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec: {containers: [{name: c, image: busybox}]}\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: b, namespace: edge}\n  spec: {containers: [{name: c, image: busybox}]}\n";
    let pods =
        load_manifest(list.as_bytes(), "http://h/p", SourceKind::Http, "n1", NOW).expect("list");
    let names: Vec<&str> = pods.iter().map(|p| p.full_name.as_str()).collect();
    assert_eq!(names, ["default/a-n1", "edge/b-n1"]);
    assert!(pods.iter().all(|p| p.source == "http://h/p"));
    assert_ne!(pods[0].uid(), pods[1].uid());

    let multi = format!(
            "{}---\n# a list in the same body\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {{name: c}}\n  spec: {{containers: [{{name: c, image: busybox}}]}}\n---\n",
            manifest("", "")
        );
    let pods =
        load_manifest(multi.as_bytes(), "http://h/p", SourceKind::Http, "n1", NOW).expect("multi");
    let names: Vec<&str> = pods.iter().map(|p| p.full_name.as_str()).collect();
    assert_eq!(names, ["default/web-n1", "default/c-n1"]);

    // A list item's errors name the item and point into the body.
    let bad = list.replace("name: b, namespace: edge}\n  spec: {containers: [{name: c, image: busybox}]}", "name: b}\n  spec:\n    containers:\n    - name: c\n      image: busybox\n      ports: [{containerPort: 0}]");
    let msg = load_manifest(bad.as_bytes(), "http://h/p", SourceKind::Http, "n1", NOW)
        .expect_err("bad item")
        .to_string();
    assert_eq!(
            msg,
            "http://h/p:13:16: items[1].spec.containers[0].ports[0].containerPort: 0 is not a valid port (1-65535)"
        );
    let dup = format!("{}---\n{}", manifest("", ""), manifest("", ""));
    let msg = load_manifest(dup.as_bytes(), "http://h/p", SourceKind::Http, "n1", NOW)
        .expect_err("duplicate")
        .to_string();
    assert_eq!(
        msg,
        "http://h/p:13:3: metadata.name: duplicate pod \"default/web-n1\" in this source"
    );
    let empty = load_manifest(
        b"apiVersion: v1\nkind: PodList\nitems: []\n",
        "http://h/p",
        SourceKind::Http,
        "n1",
        NOW,
    )
    .expect("empty list");
    assert!(empty.is_empty());
}

#[test]
fn kubeadm_etcd_manifest_validates() {
    let etcd = r#"apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubeadm.kubernetes.io/etcd.advertise-client-urls: https://10.0.0.10:2379
  creationTimestamp: null
  labels:
    component: etcd
    tier: control-plane
  name: etcd
  namespace: kube-system
spec:
  containers:
  - command:
    - etcd
    - --advertise-client-urls=https://10.0.0.10:2379
    - --data-dir=/var/lib/etcd
    - --listen-client-urls=https://127.0.0.1:2379,https://10.0.0.10:2379
    - --listen-metrics-urls=http://127.0.0.1:2381
    image: registry.k8s.io/etcd:3.5.15-0
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 8
      httpGet:
        host: 127.0.0.1
        path: /livez
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    name: etcd
    readinessProbe:
      failureThreshold: 3
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: 2381
        scheme: HTTP
      periodSeconds: 1
      timeoutSeconds: 15
    resources:
      requests:
        cpu: 100m
        memory: 100Mi
    startupProbe:
      failureThreshold: 24
      httpGet:
        host: 127.0.0.1
        path: /readyz
        port: 2381
        scheme: HTTP
      initialDelaySeconds: 10
      periodSeconds: 10
      timeoutSeconds: 15
    volumeMounts:
    - mountPath: /var/lib/etcd
      name: etcd-data
    - mountPath: /etc/kubernetes/pki/etcd
      name: etcd-certs
  hostNetwork: true
  priority: 2000001000
  priorityClassName: system-node-critical
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  volumes:
  - hostPath:
      path: /etc/kubernetes/pki/etcd
      type: DirectoryOrCreate
    name: etcd-certs
  - hostPath:
      path: /var/lib/etcd
      type: DirectoryOrCreate
    name: etcd-data
status: {}
"#;
    let p = one(etcd);
    assert_eq!(p.full_name, "kube-system/etcd-node1");
    let spec = p.pod.spec.as_ref().expect("spec");
    assert_eq!(spec.host_network, Some(true));
    assert_eq!(
        spec.priority_class_name.as_deref(),
        Some("system-node-critical")
    );
    assert_eq!(spec.volumes.as_ref().map(|v| v.len()), Some(2));
    let labels = p.pod.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels["component"], "etcd");
    let ann = p.pod.metadata.annotations.as_ref().expect("annotations");
    assert!(ann.contains_key("kubeadm.kubernetes.io/etcd.advertise-client-urls"));
}

#[test]
fn validate_file_reads_any_name_and_play_keeps_the_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(".web.yaml.bak");
    std::fs::write(&path, manifest("", "")).expect("write");
    let pods = validate_file(&path, "edge-1", &NodeSecurity::default()).expect("valid");
    assert_eq!(pods[0].full_name, "default/web-edge-1");
    assert_eq!(pods[0].source, path.display().to_string());
    let pod = load_pod_file(&path, &NodeSecurity::default()).expect("play");
    // play always accepted manifests without apiVersion/kind; wrong values are refused.
    std::fs::write(
        &path,
        "metadata: {name: p}\nspec: {containers: [{name: a, image: b}]}\n",
    )
    .expect("write");
    let bare =
        load_pod_file(&path, &NodeSecurity::default()).expect("play without apiVersion/kind");
    assert_eq!(bare.metadata.name.as_deref(), Some("p"));
    std::fs::write(&path, "kind: Deployment\nmetadata: {name: p}\n").expect("write");
    let msg = load_pod_file(&path, &NodeSecurity::default())
        .expect_err("deployment")
        .to_string();
    assert!(
        msg.contains(":1:1: kind: \"Deployment\" is not supported"),
        "{msg}"
    );
    assert!(matches!(
        validate_file(&path, "n", &NodeSecurity::default()),
        Err(ManifestError::Invalid { .. })
    ));
    std::fs::write(&path, manifest("", "")).expect("write");
    assert_eq!(pod.metadata.name.as_deref(), Some("web"));
    assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
    assert_eq!(pod.metadata.uid.as_ref().map(|u| u.len()), Some(32));
    assert_eq!(pod.metadata.annotations, None);
    assert_eq!(pod.spec.as_ref().expect("spec").node_name, None);
    std::fs::write(
        &path,
        manifest("    ports:\n    - containerPort: 70000", ""),
    )
    .expect("write");
    let msg = load_pod_file(&path, &NodeSecurity::default())
        .expect_err("invalid")
        .to_string();
    assert!(
        msg.contains(":10:7: spec.containers[0].ports[0].containerPort: "),
        "{msg}"
    );
    assert!(matches!(
        validate_file(
            &dir.path().join("missing.yaml"),
            "n",
            &NodeSecurity::default()
        ),
        Err(ManifestError::Read { .. })
    ));
}
