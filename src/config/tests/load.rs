//! `config::load`: defaults, the file's values, flags over them, and errors naming the
//! flag or the file.

use super::*;

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
