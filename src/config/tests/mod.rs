//! Tests of the daemon configuration: kubelet config files, flags, precedence.

use super::*;
use clap::Parser;

mod eviction;
mod examples;
mod flags;
mod network;

/// What `kubeadm init` (v1.30+) writes to /var/lib/kubelet/config.yaml, plus a few settings
/// operators commonly add (eviction, reservations, feature gates, taints, log rotation).
const KUBEADM_CONFIG: &str = r#"apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
  webhook:
    cacheAuthorizedTTL: 0s
    cacheUnauthorizedTTL: 0s
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
crashLoopBackOff: {}
evictionPressureTransitionPeriod: 0s
fileCheckFrequency: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
httpCheckFrequency: 0s
imageMaximumGCAge: 0s
imageMinimumGCAge: 0s
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
nodeStatusReportFrequency: 0s
nodeStatusUpdateFrequency: 0s
rotateCertificates: true
runtimeRequestTimeout: 0s
shutdownGracePeriod: 0s
shutdownGracePeriodCriticalPods: 0s
staticPodPath: /etc/kubernetes/manifests
streamingConnectionIdleTimeout: 0s
syncFrequency: 0s
volumeStatsAggPeriod: 0s
# operator additions
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "10%"
systemReserved:
  cpu: 500m
  memory: 512Mi
featureGates:
  GracefulNodeShutdown: true
registerWithTaints:
- key: node-role.kubernetes.io/edge
  effect: NoSchedule
tracing:
  endpoint: localhost:4317
  samplingRatePerMillion: 100
containerLogMaxSize: 50Mi
containerLogMaxFiles: 3
podPidsLimit: 4096
maxPods: 110
"#;

fn parse(text: &str) -> Result<KubeletConfig, ConfigError> {
    parse_kubelet_config(text.as_bytes(), "kubelet.yaml")
}

fn with_header(body: &str) -> String {
    format!("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{body}")
}

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

fn flags(args: &[&str]) -> RunFlags {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunFlags,
    }
    let mut argv = vec!["podvisor-run"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).expect("flags parse").run
}

fn write_config(dir: &tempfile::TempDir, body: &str) -> PathBuf {
    let path = dir.path().join("kubelet.yaml");
    std::fs::write(&path, with_header(body)).expect("write config");
    path
}

#[test]
fn defaults_without_config_file() {
    let cfg = load(
        &flags(&["--hostname-override", "Edge-Node-1"]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    assert_eq!(
        cfg,
        DaemonConfig {
            node_name: "edge-node-1".into(),
            static_pod_path: Some(PathBuf::from("/etc/kubernetes/manifests")),
            static_pod_url: None,
            static_pod_url_header: BTreeMap::new(),
            static_pod_url_tls: crate::httpclient::tls::ClientTls {
                names: crate::sources::TLS_FLAG_NAMES,
                ..Default::default()
            },
            file_check_frequency: Duration::from_secs(20),
            http_check_frequency: Duration::from_secs(20),
            sync_frequency: Duration::from_secs(60),
            container_log_max_size: 10 * 1024 * 1024,
            container_log_max_files: 5,
            pod_logs_dir: PathBuf::from("/var/log/pods"),
            cgroup_root: "podvisor".into(),
            cgroup_driver: crate::cgroups::CgroupDriver::Cgroupfs,
            pod_pids_limit: None,
            image_gc: crate::images::ImageGcPolicy {
                high_threshold_percent: 85,
                low_threshold_percent: 80,
                minimum_age: Duration::from_secs(120),
            },
            container_gc: crate::gc::ContainerGcPolicy::default(),
            rollback_after: Duration::from_secs(300),
            reservation: Default::default(),
            eviction: crate::eviction::EvictionConfig::default(),
            allowed_unsafe_sysctls: vec![],
            seccomp_default: false,
            resolv_conf: Some(PathBuf::from("/etc/resolv.conf")),
            cluster_dns: vec![],
            cluster_domain: String::new(),
            network: Some(crate::network::NetworkConfig::new(Path::new(
                "/var/lib/podvisor"
            ))),
            api_socket: PathBuf::from("/run/podvisor/podvisor.sock"),
            healthz: Some("127.0.0.1:10248".parse().expect("addr")),
            node_server: Some(crate::nodeapi::NodeServerConfig {
                addr: "0.0.0.0:10250".parse().expect("addr"),
                tls_cert_file: None,
                tls_private_key_file: None,
                tls_min_version: crate::nodeapi::tls::MinVersion::Tls12,
                tls_cipher_suites: vec![],
                client_ca_file: None,
                token_auth_file: None,
                anonymous: false,
                authorization: crate::nodeapi::AuthorizationMode::AlwaysAllow,
                debugging_handlers: true,
                system_log_handler: true,
            }),
            registry_config: None,
            docker_config: None,
            api_server: None,
            unimplemented_fields: vec![],
        }
    );
}

#[test]
fn systemd_driver_defaults_to_the_podvisor_slice() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (body, root) in [
        ("cgroupDriver: systemd\n", "podvisor.slice"),
        (
            "cgroupDriver: systemd\ncgroupRoot: edge-pods.slice\n",
            "edge-pods.slice",
        ),
        ("cgroupDriver: cgroupfs\n", "podvisor"),
    ] {
        let config = write_config(&dir, body);
        let cfg = load(
            &flags(&[
                "--config",
                config.to_str().expect("utf-8 temp path"),
                "--hostname-override",
                "n1",
            ]),
            Path::new("/var/lib/podvisor"),
        )
        .expect(body);
        assert_eq!(cfg.cgroup_root, root, "{body}");
        assert!(cfg.unimplemented_fields.is_empty(), "{body}");
    }
}

#[test]
fn file_values_are_used_and_flags_override_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let body = "staticPodPath: /srv/file-pods\n\
                staticPodURL: http://file.example/pods\n\
                staticPodURLHeader:\n  X-From-File: [\"1\"]\n\
                syncFrequency: 30s\n\
                podLogsDir: /srv/logs\n\
                cgroupRoot: edge\n\
                podPidsLimit: 100\n\
                clusterDomain: cluster.local\n\
                maxPods: 10\n";
    let config = write_config(&dir, body);
    let config_arg = config.to_str().expect("utf-8 temp path");

    let from_file = load(
        &flags(&["--config", config_arg, "--hostname-override", "n1"]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    assert_eq!(
        from_file.static_pod_path,
        Some(PathBuf::from("/srv/file-pods"))
    );
    assert_eq!(
        from_file.static_pod_url.as_deref(),
        Some("http://file.example/pods")
    );
    assert_eq!(from_file.static_pod_url_header["X-From-File"], vec!["1"]);
    assert_eq!(from_file.sync_frequency, Duration::from_secs(30));
    assert_eq!(from_file.file_check_frequency, Duration::from_secs(20));
    assert_eq!(from_file.pod_logs_dir, PathBuf::from("/srv/logs"));
    assert_eq!(from_file.cgroup_root, "edge");
    assert_eq!(from_file.pod_pids_limit, Some(100));
    assert_eq!(from_file.cluster_domain, "cluster.local");
    assert_eq!(from_file.unimplemented_fields, vec!["maxPods"]);

    let overridden = load(
        &flags(&[
            "--config",
            config_arg,
            "--hostname-override",
            "n1",
            "--pod-manifest-path",
            "/srv/flag-pods",
            "--manifest-url",
            "https://flag.example/pods",
            "--manifest-url-header",
            "A:1,B:2",
            "--manifest-url-header",
            "A:3",
            "--api-socket",
            "/run/pv/api.sock",
        ]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    assert_eq!(
        overridden.static_pod_path,
        Some(PathBuf::from("/srv/flag-pods"))
    );
    assert_eq!(
        overridden.static_pod_url.as_deref(),
        Some("https://flag.example/pods")
    );
    // The flag replaces the file's headers; repeated flags accumulate.
    let expected: BTreeMap<String, Vec<String>> = [
        ("A".to_string(), vec!["1".to_string(), "3".to_string()]),
        ("B".to_string(), vec!["2".to_string()]),
    ]
    .into();
    assert_eq!(overridden.static_pod_url_header, expected);
    assert_eq!(overridden.api_socket, PathBuf::from("/run/pv/api.sock"));
    assert_eq!(overridden.sync_frequency, Duration::from_secs(30));

    // Empty flags disable the sources, as in the kubelet.
    let disabled = load(
        &flags(&[
            "--config",
            config_arg,
            "--hostname-override",
            "n1",
            "--pod-manifest-path",
            "",
            "--manifest-url",
            "",
        ]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    assert_eq!(disabled.static_pod_path, None);
    assert_eq!(disabled.static_pod_url, None);
}

#[test]
fn rollback_after_flag() {
    let root = Path::new("/var/lib/podvisor");
    for (arg, want) in [
        ("90s", Duration::from_secs(90)),
        ("1h", Duration::from_secs(3600)),
        ("0", Duration::ZERO),
    ] {
        let cfg = load(
            &flags(&["--hostname-override", "n1", "--rollback-after", arg]),
            root,
        )
        .expect(arg);
        assert_eq!(cfg.rollback_after, want, "{arg}");
    }
}

#[test]
fn invalid_flags_name_the_flag() {
    let root = Path::new("/var/lib/podvisor");
    let cases: &[(&[&str], &str)] = &[
        (
            &["--pod-manifest-path", "relative/dir"],
            "--pod-manifest-path",
        ),
        (&["--manifest-url", "file:///etc/pods"], "--manifest-url"),
        (
            &["--manifest-url-header", "NoColon"],
            "--manifest-url-header",
        ),
        (
            &["--manifest-url-header", ":value"],
            "--manifest-url-header",
        ),
        (
            &["--manifest-url-header", "Bad Name:v"],
            "--manifest-url-header",
        ),
        (&["--api-socket", "api.sock"], "--api-socket"),
        (&["--rollback-after", "5"], "--rollback-after"),
        (&["--rollback-after", "1d"], "--rollback-after"),
    ];
    for &(args, flag) in cases {
        let mut all = vec!["--hostname-override", "n1"];
        all.extend_from_slice(args);
        let err = load(&flags(&all), root).expect_err(flag);
        assert!(
            matches!(&err, ConfigError::InvalidFlag { .. }),
            "{args:?}: {err:?}"
        );
        assert!(err.to_string().starts_with(flag), "{err}");
    }
    let long = format!("/run/{}.sock", "s".repeat(120));
    let err = load(
        &flags(&["--hostname-override", "n1", "--api-socket", &long]),
        root,
    )
    .expect_err("long socket path");
    assert!(err.to_string().contains("at most 107"), "{err}");
    let err = load(&flags(&["--hostname-override", "n1"]), Path::new("var/lib"))
        .expect_err("relative root");
    assert!(err.to_string().starts_with("--root-dir"), "{err}");
}

#[test]
fn config_file_errors_name_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("absent.yaml");
    let err = load(
        &RunFlags {
            config: Some(missing.clone()),
            hostname_override: Some("n1".into()),
            ..RunFlags::default()
        },
        Path::new("/var/lib/podvisor"),
    )
    .expect_err("missing file");
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains(&missing.display().to_string()));

    let config = write_config(&dir, "containerLogMaxFiles: 1\n");
    let err = load(
        &RunFlags {
            config: Some(config.clone()),
            hostname_override: Some("n1".into()),
            ..RunFlags::default()
        },
        Path::new("/var/lib/podvisor"),
    )
    .expect_err("invalid value");
    assert!(
        err.to_string()
            .starts_with(&format!("{}:3:", config.display())),
        "{err}"
    );
}

#[test]
fn url_checks_accept_real_urls() {
    for ok in [
        "http://10.0.0.1/pods",
        "https://config.example.com:8443/a/b?node=x#frag",
        "http://user:pass@host_name:80",
        "http://[::1]:8080/pods",
        "HTTPS://Example.com",
    ] {
        assert_eq!(check_url(ok), Ok(()), "{ok}");
    }
    for bad in [
        "http://host:/",
        "http://:80/",
        "http://[zz]/",
        "http://ho%st/",
    ] {
        assert!(check_url(bad).is_err(), "{bad}");
    }
}

#[test]
fn implemented_fields_are_real_fields() {
    for f in IMPLEMENTED_FIELDS {
        assert!(raw::RawKubeletConfiguration::FIELD_NAMES.contains(f), "{f}");
    }
}

#[test]
fn image_gc_settings_default_like_the_kubelet() {
    let cfg = parse("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nimageGCHighThresholdPercent: 90\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 10m\n").expect("parse");
    assert_eq!(cfg.image_gc_high_threshold_percent, Some(90));
    assert_eq!(cfg.image_gc_low_threshold_percent, Some(50));
    assert_eq!(
        cfg.image_minimum_gc_age,
        Some(std::time::Duration::from_secs(600))
    );
    // "0s" (kubeadm's zero value) means the default, as in the kubelet.
    let cfg = parse("kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nimageMinimumGCAge: 0s\n").expect("parse");
    assert_eq!(cfg.image_minimum_gc_age, None);
}
