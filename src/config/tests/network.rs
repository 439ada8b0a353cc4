//! The pod network's settings: podCIDR, clusterDNS, clusterDomain and the CNI flags.

use super::*;

#[test]
fn network_fields_are_read_checked_and_the_flags_override_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        &dir,
        "podCIDR: 10.77.0.0/16,fd77::/64\nclusterDNS: [10.96.0.10]\nclusterDomain: edge.local.\n",
    );
    let arg = config.to_str().expect("utf-8");
    let cfg = load(
        &flags(&["--config", arg, "--hostname-override", "n1"]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    assert_eq!(cfg.cluster_dns, ["10.96.0.10"]);
    assert_eq!(cfg.cluster_domain, "edge.local");
    let net = cfg.network.expect("network on by default");
    assert_eq!(net.conf_dir, PathBuf::from("/etc/cni/net.d"));
    assert_eq!(
        net.bin_dirs,
        [PathBuf::from("/usr/lib/cni"), PathBuf::from("/opt/cni/bin")]
    );
    let subnets: Vec<String> = net
        .default_network
        .subnets
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(subnets, ["10.77.0.0/16", "fd77::/64"]);
    assert_eq!(
        net.default_network.ipam_dir,
        PathBuf::from("/var/lib/podvisor/network/ipam")
    );

    let cfg = load(
        &flags(&[
            "--config",
            arg,
            "--hostname-override",
            "n1",
            "--cni-conf-dir",
            "/srv/cni",
            "--cni-bin-dir",
            "/opt/a, /opt/b",
            "--cni-plugin-timeout",
            "5s",
            "--pod-cidr",
            "10.99.0.0/24",
        ]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    let net = cfg.network.expect("network");
    assert_eq!(net.conf_dir, PathBuf::from("/srv/cni"));
    assert_eq!(
        net.bin_dirs,
        [PathBuf::from("/opt/a"), PathBuf::from("/opt/b")]
    );
    assert_eq!(net.plugin_timeout, Duration::from_secs(5));
    assert_eq!(net.default_network.subnets[0].to_string(), "10.99.0.0/24");

    let off = load(
        &flags(&["--hostname-override", "n1", "--cni-conf-dir", ""]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    assert_eq!(off.network, None);
}

#[test]
fn bad_network_values_name_the_field_or_flag() {
    let e = parse(&with_header("clusterDNS: [10.96.0.10, nameserver]\n")).expect_err("dns");
    assert!(
        e.to_string()
            .contains("clusterDNS[1]: \"nameserver\" is not an IP address"),
        "{e}"
    );
    let e = parse(&with_header("podCIDR: 10.86.0.1/16\n")).expect_err("cidr");
    assert!(
        e.to_string()
            .contains("podCIDR: \"10.86.0.1/16\" is not a network address"),
        "{e}"
    );
    let e = parse(&with_header("clusterDomain: Bad_Domain\n")).expect_err("domain");
    assert!(e.to_string().contains("clusterDomain:"), "{e}");
    for (flag, value, want) in [
        ("--pod-cidr", "10.0.0.0/33", "--pod-cidr \"10.0.0.0/33\""),
        ("--cni-conf-dir", "relative", "--cni-conf-dir \"relative\""),
        (
            "--cni-bin-dir",
            ",",
            "--cni-bin-dir \",\": no directory given",
        ),
        ("--cni-plugin-timeout", "0s", "must be greater than zero"),
    ] {
        let e = load(
            &flags(&["--hostname-override", "n1", flag, value]),
            Path::new("/var/lib/podvisor"),
        )
        .expect_err(flag);
        assert!(e.to_string().contains(want), "{flag}: {e}");
    }
}
