//! The example configuration files shipped in packaging/, loaded through the daemon's own
//! loader (`config::load`), so an example the docs point at can never stop parsing.

use super::*;

fn example(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn load_example(path: &str) -> DaemonConfig {
    let file = example(path);
    let file = file.to_str().expect("utf8 path");
    load(
        &flags(&["--config", file, "--hostname-override", "raspberrypi"]),
        Path::new("/var/lib/podvisor"),
    )
    .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
fn raspberry_pi_example_loads_with_every_field_implemented() {
    let cfg = load_example("packaging/examples/raspberry-pi.yaml");
    assert_eq!(cfg.unimplemented_fields, Vec::<String>::new());
    assert_eq!(
        cfg.static_pod_path,
        Some(PathBuf::from("/etc/kubernetes/manifests"))
    );
    assert_eq!(cfg.container_log_max_size, 5 << 20);
    assert_eq!(cfg.container_log_max_files, 3);
    assert_eq!(cfg.image_gc.high_threshold_percent, 80);
    assert_eq!(cfg.image_gc.low_threshold_percent, 70);
    assert_eq!(cfg.pod_pids_limit, Some(1024));
    assert!(cfg.seccomp_default);
    assert_eq!(cfg.node_server, None);
    assert_eq!(
        cfg.cgroup_driver,
        crate::cgroups::CgroupDriver::Cgroupfs,
        "the example keeps the default driver"
    );
    assert_eq!(
        cfg.reservation.system_reserved,
        crate::pod::resources::Amounts {
            cpu_millis: 200,
            memory_bytes: 128 << 20,
        }
    );
    assert_eq!(
        cfg.reservation.eviction_memory,
        crate::cgroups::allocatable::MemoryThreshold::Bytes(64 << 20)
    );
    assert_eq!(cfg.eviction.thresholds.len(), 4, "{:?}", cfg.eviction);
}

#[test]
fn packaged_config_loads_with_every_field_implemented() {
    let cfg = load_example("packaging/config.yaml");
    assert_eq!(cfg.unimplemented_fields, Vec::<String>::new());
    assert_eq!(
        cfg.static_pod_path,
        Some(PathBuf::from("/etc/kubernetes/manifests"))
    );
}
