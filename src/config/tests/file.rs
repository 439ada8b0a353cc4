//! The config file alone (phase one and two): the kubeadm file, JSON, unknown and invalid
//! fields with their line:column, types, syntax, empty files and alias bombs.

use super::*;

#[test]
fn kubeadm_config_parses_and_lists_unimplemented_fields() {
    let cfg = parse(KUBEADM_CONFIG).expect("kubeadm config parses");
    assert_eq!(
        cfg.static_pod_path,
        Some(PathBuf::from("/etc/kubernetes/manifests"))
    );
    // "0s" is the kubelet's "unset": the defaults apply.
    assert_eq!(cfg.file_check_frequency, None);
    assert_eq!(cfg.http_check_frequency, None);
    assert_eq!(cfg.sync_frequency, None);
    assert_eq!(cfg.container_log_max_size, Some(50 * 1024 * 1024));
    assert_eq!(cfg.container_log_max_files, Some(3));
    assert_eq!(cfg.pod_pids_limit, Some(4096));
    assert_eq!(
        cfg.reservation,
        crate::cgroups::allocatable::Reservation {
            system_reserved: crate::pod::resources::Amounts {
                cpu_millis: 500,
                memory_bytes: 512 << 20,
            },
            kube_reserved: Default::default(),
            eviction_memory: crate::cgroups::allocatable::MemoryThreshold::Bytes(100 << 20),
            ephemeral_storage: 0,
        }
    );
    assert_eq!(cfg.static_pod_url, None);
    // kubeadm's driver is implemented, not listed as ignored.
    assert_eq!(
        cfg.cgroup_driver,
        Some(crate::cgroups::CgroupDriver::Systemd)
    );
    let expected: Vec<String> = [
        "authentication.webhook",
        "authorization.webhook",
        "containerRuntimeEndpoint",
        "cpuManagerReconcilePeriod",
        "crashLoopBackOff",
        "featureGates",
        "imageMaximumGCAge",
        "logging",
        "maxPods",
        "memorySwap",
        "rotateCertificates",
        "runtimeRequestTimeout",
        "shutdownGracePeriod",
        "shutdownGracePeriodCriticalPods",
        "streamingConnectionIdleTimeout",
        "tracing",
        "volumeStatsAggPeriod",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(cfg.unimplemented_fields, expected);
}

#[test]
fn unsafe_sysctls_and_seccomp_default_are_read_and_checked() {
    let cfg = parse(&with_header(
        "seccompDefault: true\nallowedUnsafeSysctls:\n- net.core.*\n- kernel/msgmax\n",
    ))
    .expect("config");
    assert_eq!(cfg.seccomp_default, Some(true));
    assert_eq!(
        cfg.allowed_unsafe_sysctls
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>(),
        vec!["net.core.*", "kernel.msgmax"]
    );
    assert!(
        cfg.unimplemented_fields.is_empty(),
        "{:?}",
        cfg.unimplemented_fields
    );
    for (body, want) in [
        (
            "allowedUnsafeSysctls: [net.core.*, vm.swappiness]\n",
            "kubelet.yaml:3:36: allowedUnsafeSysctls[1]: \"vm.swappiness\" is not known to be namespaced",
        ),
        (
            "allowedUnsafeSysctls:\n- 'net.*.x'\n",
            "kubelet.yaml:4:3: allowedUnsafeSysctls[0]: \"net.*.x\" is not a sysctl name or a prefix",
        ),
    ] {
        let e = parse(&with_header(body)).expect_err("invalid").to_string();
        assert!(e.starts_with(want), "{e}\nwant {want}");
    }
}

#[test]
fn json_config_parses() {
    let json = r#"{
  "apiVersion": "kubelet.config.k8s.io/v1beta1",
  "kind": "KubeletConfiguration",
  "staticPodPath": "/srv/pods",
  "staticPodURL": "https://config.example.com:8443/node/pods.yaml",
  "staticPodURLHeader": {"Authorization": ["Bearer abc"], "X-Node": ["a", "b"]},
  "fileCheckFrequency": "5s",
  "httpCheckFrequency": "1m30s",
  "syncFrequency": "2m",
  "containerLogMaxSize": "1Gi",
  "containerLogMaxFiles": 2,
  "podLogsDir": "/data/logs/pods",
  "cgroupRoot": "/edge.slice",
  "podPidsLimit": -1,
  "clusterDNS": ["10.0.0.10"],
  "maxPods": 20
}"#;
    let cfg = parse(json).expect("json parses");
    assert_eq!(cfg.static_pod_path, Some(PathBuf::from("/srv/pods")));
    assert_eq!(
        cfg.static_pod_url.as_deref(),
        Some("https://config.example.com:8443/node/pods.yaml")
    );
    let headers = cfg.static_pod_url_header.expect("headers");
    assert_eq!(headers["Authorization"], vec!["Bearer abc"]);
    assert_eq!(headers["X-Node"], vec!["a", "b"]);
    assert_eq!(cfg.file_check_frequency, Some(Duration::from_secs(5)));
    assert_eq!(cfg.http_check_frequency, Some(Duration::from_secs(90)));
    assert_eq!(cfg.sync_frequency, Some(Duration::from_secs(120)));
    assert_eq!(cfg.container_log_max_size, Some(1 << 30));
    assert_eq!(cfg.container_log_max_files, Some(2));
    assert_eq!(cfg.pod_logs_dir, Some(PathBuf::from("/data/logs/pods")));
    assert_eq!(cfg.cgroup_root.as_deref(), Some("/edge.slice"));
    assert_eq!(cfg.pod_pids_limit, None, "-1 is unlimited");
    assert_eq!(cfg.network.cluster_dns, ["10.0.0.10"]);
    assert_eq!(cfg.unimplemented_fields, vec!["maxPods".to_string()]);
}

#[test]
fn minimal_config_is_all_unset() {
    let cfg = parse(&with_header("")).expect("parses");
    assert_eq!(cfg, KubeletConfig::default());
}

#[test]
fn unknown_field_names_the_field_and_line() {
    let err = parse(&with_header("staticPodPath: /a\nstaticPodPth: /b\n")).expect_err("typo");
    match &err {
        ConfigError::UnknownField {
            field,
            location,
            hint,
            ..
        } => {
            assert_eq!(field, "staticPodPth");
            assert!(location.starts_with(":4:"), "{location}");
            assert_eq!(hint, ", did you mean \"staticPodPath\"?");
        }
        other => panic!("expected UnknownField, got {other:?}"),
    }
    assert!(
        err.to_string().starts_with(
            "kubelet.yaml:4:1: unknown field \"staticPodPth\", did you mean \"staticPodPath\"?"
        ),
        "{err}"
    );
}

#[test]
fn unknown_field_in_nested_object_and_wrong_case() {
    let err = parse(&with_header(
        "authentication:\n  x509:\n    clientCaFile: /ca.crt\n",
    ))
    .expect_err("nested typo");
    assert!(
        matches!(&err, ConfigError::UnknownField { field, hint, .. }
            if field == "clientCaFile" && hint.contains("clientCAFile")),
        "{err:?}"
    );
    let err = parse(&with_header("staticPodUrl: http://x/\n")).expect_err("case matters");
    assert!(
        matches!(&err, ConfigError::UnknownField { field, hint, .. }
            if field == "staticPodUrl" && hint.contains("staticPodURL")),
        "{err:?}"
    );
    let err = parse(&with_header("frobnicate: true\n")).expect_err("unknown");
    assert!(
        matches!(&err, ConfigError::UnknownField { field, hint, .. }
            if field == "frobnicate" && hint.is_empty()),
        "{err:?}"
    );
}

#[test]
fn api_version_and_kind_are_checked() {
    let err = parse("kind: KubeletConfiguration\nstaticPodPath: /a\n").expect_err("no apiVersion");
    assert_eq!(
        err.to_string(),
        "kubelet.yaml: apiVersion: is missing, expected \"kubelet.config.k8s.io/v1beta1\""
    );
    let err = parse("apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n")
        .expect_err("wrong version");
    assert_eq!(
        err.to_string(),
        "kubelet.yaml:1:13: apiVersion: is \"kubelet.config.k8s.io/v1alpha1\", \
         expected \"kubelet.config.k8s.io/v1beta1\""
    );
    // A Pod given as --config is reported by its kind, not by its unknown fields.
    let err = parse("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\nmetadata:\n  name: x\n")
        .expect_err("a pod");
    assert!(
        matches!(&err, ConfigError::Invalid { field, message, .. }
            if field == "kind" && message.contains("\"Pod\"")),
        "{err:?}"
    );
}

#[test]
fn invalid_values_name_the_field() {
    let cases: &[(&str, &str, &str)] = &[
        ("fileCheckFrequency: -5s", "fileCheckFrequency", "negative"),
        (
            "httpCheckFrequency: 10x",
            "httpCheckFrequency",
            "unknown unit",
        ),
        ("syncFrequency: \"1\"", "syncFrequency", "missing unit"),
        (
            "syncFrequency: forever",
            "syncFrequency",
            "invalid duration",
        ),
        (
            "containerLogMaxSize: 10Mb",
            "containerLogMaxSize",
            "invalid quantity",
        ),
        (
            "containerLogMaxSize: \"0\"",
            "containerLogMaxSize",
            "greater than zero",
        ),
        (
            "containerLogMaxSize: -1Mi",
            "containerLogMaxSize",
            "negative",
        ),
        (
            "containerLogMaxFiles: 1",
            "containerLogMaxFiles",
            "at least 2",
        ),
        (
            "containerLogMaxFiles: 0",
            "containerLogMaxFiles",
            "at least 2",
        ),
        ("staticPodPath: manifests", "staticPodPath", "absolute"),
        (
            "imageGCHighThresholdPercent: 101",
            "imageGCHighThresholdPercent",
            "between 0 and 100",
        ),
        (
            "imageGCLowThresholdPercent: -1",
            "imageGCLowThresholdPercent",
            "between 0 and 100",
        ),
        (
            "imageGCLowThresholdPercent: 90",
            "imageGCLowThresholdPercent",
            "90 must be less than imageGCHighThresholdPercent (85)",
        ),
        (
            "imageGCHighThresholdPercent: 70",
            "imageGCLowThresholdPercent",
            "80 must be less than imageGCHighThresholdPercent (70)",
        ),
        ("imageMinimumGCAge: 2", "imageMinimumGCAge", "missing unit"),
        (
            "staticPodURL: ftp://x/pods",
            "staticPodURL",
            "not http or https",
        ),
        ("staticPodURL: example.com/pods", "staticPodURL", "absolute"),
        ("staticPodURL: \"http:///pods\"", "staticPodURL", "no host"),
        (
            "staticPodURL: \"http://a b/\"",
            "staticPodURL",
            "must not contain",
        ),
        (
            "staticPodURL: \"http://host:99999/\"",
            "staticPodURL",
            "port",
        ),
        ("staticPodURL: \"http://[::1/\"", "staticPodURL", "IPv6"),
        (
            "staticPodURLHeader:\n  \"Bad Header\": [x]",
            "staticPodURLHeader",
            "not a valid HTTP token",
        ),
        (
            "staticPodURLHeader:\n  X-A: [\"a\\nb\"]",
            "staticPodURLHeader",
            "control characters",
        ),
        ("podLogsDir: logs", "podLogsDir", "absolute"),
        ("podLogsDir: /var/log/pods/", "podLogsDir", "normalized"),
        ("podLogsDir: /var/../log", "podLogsDir", "normalized"),
        ("podLogsDir: /var/lög", "podLogsDir", "ASCII"),
        ("cgroupRoot: /", "cgroupRoot", "below the root"),
        ("cgroupRoot: a/../b", "cgroupRoot", "below the root"),
        (
            "cgroupDriver: cgroups",
            "cgroupDriver",
            "cgroupfs or systemd",
        ),
        (
            "cgroupDriver: systemd\ncgroupRoot: podvisor",
            "cgroupRoot",
            "ending in \".slice\"",
        ),
        (
            "cgroupDriver: systemd\ncgroupRoot: a--b.slice",
            "cgroupRoot",
            "doubled",
        ),
        ("podPidsLimit: -2", "podPidsLimit", "-1 (unlimited)"),
    ];
    for &(line, field, fragment) in cases {
        let err = parse(&with_header(line)).expect_err(line);
        match &err {
            ConfigError::Invalid {
                field: f,
                message,
                location,
                ..
            } => {
                assert_eq!(f, field, "{line}");
                assert!(message.contains(fragment), "{line}: {message}");
                // The value's line: the two header lines plus the body's lines.
                let at = format!(":{}:", 2 + line.lines().count());
                assert!(location.starts_with(&at), "{line}: {location:?}");
            }
            other => panic!("{line}: expected Invalid, got {other:?}"),
        }
        assert!(err.to_string().contains(field), "{err}");
    }
}

#[test]
fn wrong_types_and_syntax_are_located() {
    for body in [
        "containerLogMaxFiles: many",
        "podPidsLimit: [1]",
        "staticPodURLHeader: {X-A: b}",
        "port: 99999999999",
        "staticPodPath: /a\nstaticPodPath: /b",
        "staticPodPath: [unclosed",
    ] {
        let err = parse(&with_header(body)).expect_err(body);
        match &err {
            ConfigError::Syntax {
                location, message, ..
            } => {
                assert!(location.starts_with(':'), "{body}: {err}");
                assert!(!message.contains(" at line "), "{body}: {err}");
            }
            other => panic!("{body}: expected Syntax, got {other:?}"),
        }
    }
}

#[test]
fn empty_and_binary_files_are_rejected() {
    assert!(matches!(parse(" \n"), Err(ConfigError::Empty { .. })));
    assert!(matches!(
        parse_kubelet_config(&[0xff, 0xfe, 0x00], "x"),
        Err(ConfigError::NotUtf8 { .. })
    ));
    assert!(matches!(
        parse("just a string"),
        Err(ConfigError::Syntax { .. })
    ));
}

#[test]
fn alias_bomb_is_stopped_by_the_budget() {
    let mut doc =
        String::from("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n");
    doc.push_str("logging: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..10 {
        let prev = i - 1;
        doc.push_str(&format!(
            "l{i}: &a{i} [*a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}, *a{prev}]\n"
        ));
    }
    let start = std::time::Instant::now();
    let err = parse(&doc).expect_err("alias bomb");
    assert!(
        matches!(&err, ConfigError::Syntax { message, .. } if message.contains("too large")),
        "{err}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}
