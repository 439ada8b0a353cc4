//! Tests of the eviction settings, the reservations, `--eviction-hard` and `--eviction-policy`.

use super::*;

#[test]
fn reservation_errors_name_the_field() {
    let err = parse(&with_header("kubeReserved: {cpu: lots}\n")).expect_err("bad cpu");
    assert!(
        err.to_string()
            .ends_with(": kubeReserved.cpu: invalid quantity \"lots\": no digits"),
        "{err}"
    );
    let err = parse(&with_header("evictionHard: {memory.available: 150%}\n"))
        .expect_err("bad percentage");
    assert!(
        err.to_string().ends_with(
            ": evictionHard.memory.available: \"150%\" is not a percentage between 0% and 100%"
        ),
        "{err}"
    );
    let cfg = parse(&with_header("evictionHard: {nodefs.available: 10%}\n")).expect("parses");
    assert_eq!(
        cfg.reservation.eviction_memory,
        crate::cgroups::allocatable::MemoryThreshold::Bytes(0)
    );
}

#[test]
fn eviction_fields() {
    use crate::cgroups::allocatable::MemoryThreshold;
    use crate::eviction::{Signal, Threshold};
    let cfg = parse(&with_header(
        "evictionHard: {memory.available: 256Mi, nodefs.available: 5%, pid.available: 10%}\n\
         evictionSoft: {memory.available: 1Gi}\n\
         evictionSoftGracePeriod: {memory.available: 2m}\n\
         evictionMinimumReclaim: {nodefs.available: 1Gi}\n\
         evictionMaxPodGracePeriod: 20\n\
         evictionPressureTransitionPeriod: 30s\n",
    ))
    .expect("parses");
    let e = &cfg.eviction;
    assert_eq!(e.max_pod_grace_period, Duration::from_secs(20));
    assert_eq!(e.pressure_transition_period, Duration::from_secs(30));
    assert_eq!(e.thresholds.len(), 4);
    assert!(e.thresholds.contains(&Threshold {
        signal: Signal::NodeFsAvailable,
        value: MemoryThreshold::Basis(500),
        grace_period: Duration::ZERO,
        min_reclaim: Some(MemoryThreshold::Bytes(1 << 30)),
        hard: true,
    }));
    // Allocatable subtracts the same hard memory threshold.
    assert_eq!(
        cfg.reservation.eviction_memory,
        MemoryThreshold::Bytes(256 << 20)
    );
    assert!(
        cfg.unimplemented_fields.is_empty(),
        "{:?}",
        cfg.unimplemented_fields
    );

    // Unset: the kubelet's defaults (five hard thresholds, 5m).
    let cfg = parse(&with_header("evictionPressureTransitionPeriod: 0s\n")).expect("parses");
    assert_eq!(cfg.eviction.thresholds.len(), 5);
    assert_eq!(
        cfg.eviction.pressure_transition_period,
        Duration::from_secs(300)
    );
    assert_eq!(
        cfg.reservation.eviction_memory,
        MemoryThreshold::Bytes(100 << 20)
    );
    // mergeDefaultEvictionSettings fills the signals evictionHard leaves out.
    let cfg = parse(&with_header(
        "evictionHard: {nodefs.available: 20%}\nmergeDefaultEvictionSettings: true\n",
    ))
    .expect("parses");
    assert_eq!(cfg.eviction.thresholds.len(), 5);
    assert_eq!(
        cfg.reservation.eviction_memory,
        MemoryThreshold::Bytes(100 << 20)
    );

    for (body, want) in [
        ("evictionHard: {memory.free: 1Gi}\n", "evictionHard.memory.free: unsupported eviction signal"),
        ("evictionSoft: {memory.available: 1Gi}\n", "evictionSoftGracePeriod.memory.available: a grace period must be given"),
        ("evictionSoft: {memory.available: 1Gi}\nevictionSoftGracePeriod: {memory.available: soon}\n", "evictionSoftGracePeriod.memory.available: "),
        ("evictionMinimumReclaim: {imagefs.available: lots}\n", "evictionMinimumReclaim.imagefs.available: invalid quantity"),
        ("evictionMaxPodGracePeriod: -1\n", "evictionMaxPodGracePeriod: -1 must not be negative"),
        ("evictionPressureTransitionPeriod: 5 minutes\n", "evictionPressureTransitionPeriod: "),
    ] {
        let err = parse(&with_header(body)).expect_err(body).to_string();
        assert!(err.contains(want), "{body}: {err}");
    }
}

#[test]
fn eviction_hard_flag_replaces_the_files_hard_thresholds() {
    use crate::cgroups::allocatable::MemoryThreshold;
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("config.yaml");
    std::fs::write(
        &path,
        with_header(
            "evictionHard: {memory.available: 1Gi}\nevictionMinimumReclaim: {memory.available: 10Mi}\nevictionSoft: {nodefs.available: 20%}\nevictionSoftGracePeriod: {nodefs.available: 1m}\n",
        ),
    )
    .expect("write");
    let p = path.to_str().expect("utf8");
    let cfg = load(
        &flags(&[
            "--config",
            p,
            "--eviction-hard",
            "memory.available<200Mi, pid.available<5%",
        ]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    let t = &cfg.eviction.thresholds;
    assert_eq!(t.len(), 3, "{t:?}");
    assert_eq!(
        cfg.reservation.eviction_memory,
        MemoryThreshold::Bytes(200 << 20)
    );
    assert!(t
        .iter()
        .any(|t| t.hard && t.min_reclaim == Some(MemoryThreshold::Bytes(10 << 20))));
    assert!(t.iter().any(|t| !t.hard));
    let cfg = load(
        &flags(&["--eviction-hard", ""]),
        Path::new("/var/lib/podvisor"),
    )
    .expect("load");
    assert!(cfg.eviction.thresholds.is_empty());
    assert_eq!(cfg.reservation.eviction_memory, MemoryThreshold::Bytes(0));
    for bad in [
        "memory.available=1Gi",
        "disk.available<1Gi",
        "memory.available<x",
    ] {
        let err = load(
            &flags(&["--eviction-hard", bad]),
            Path::new("/var/lib/podvisor"),
        )
        .expect_err(bad)
        .to_string();
        assert!(err.starts_with("--eviction-hard "), "{err}");
    }
}

#[test]
fn eviction_policy_flag() {
    use crate::eviction::EvictionPolicy;
    let root = Path::new("/var/lib/podvisor");
    let cfg = load(&flags(&["--hostname-override", "n1"]), root).expect("load");
    assert_eq!(cfg.eviction.policy, EvictionPolicy::Helpful, "the default");
    for (arg, want) in [
        ("helpful", EvictionPolicy::Helpful),
        ("never", EvictionPolicy::Never),
    ] {
        let cfg = load(
            &flags(&["--hostname-override", "n1", "--eviction-policy", arg]),
            root,
        )
        .expect(arg);
        assert_eq!(cfg.eviction.policy, want, "{arg}");
    }
    // The thresholds stay: the policy only says which pods may go.
    let cfg = load(
        &flags(&[
            "--hostname-override",
            "n1",
            "--eviction-policy",
            "never",
            "--eviction-hard",
            "nodefs.available<20%",
        ]),
        root,
    )
    .expect("load");
    assert_eq!(cfg.eviction.thresholds.len(), 1);
    for bad in ["", "Never", "kubelet", "helpful,never"] {
        let err = load(
            &flags(&["--hostname-override", "n1", "--eviction-policy", bad]),
            root,
        )
        .expect_err(bad);
        assert!(
            matches!(&err, ConfigError::InvalidFlag { .. }),
            "{bad:?}: {err:?}"
        );
        let err = err.to_string();
        assert!(err.starts_with("--eviction-policy "), "{err}");
        assert!(err.contains("expected helpful or never"), "{err}");
    }
}
