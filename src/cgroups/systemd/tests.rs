use std::collections::BTreeMap;
use std::sync::Mutex;

use super::*;
use crate::pod::resources::Amounts;

/// systemd's unit table, as far as podvisor's calls change it.
#[derive(Default)]
struct FakeUnits {
    units: Mutex<BTreeMap<String, UnitProperties>>,
    calls: Mutex<Vec<String>>,
}

impl FakeUnits {
    fn props(&self, unit: &str) -> UnitProperties {
        self.units.lock().expect("lock")[unit].clone()
    }
    fn get(&self, unit: &str, key: &str) -> Option<UnitValue> {
        self.props(unit)
            .into_iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
    fn names(&self) -> Vec<String> {
        self.units.lock().expect("lock").keys().cloned().collect()
    }
}

impl FakeUnits {
    fn unit_exists(&self, unit: &str) -> bool {
        self.units.lock().expect("lock").contains_key(unit)
    }
    fn calls_of(&self, kind: &str) -> usize {
        let calls = self.calls.lock().expect("lock");
        calls.iter().filter(|c| c.starts_with(kind)).count()
    }
}

impl SystemdUnits for FakeUnits {
    fn start_transient(&self, unit: &str, p: &UnitProperties) -> Result<(), SystemdError> {
        self.calls
            .lock()
            .expect("lock")
            .push(format!("start {unit}"));
        let mut units = self.units.lock().expect("lock");
        if units.contains_key(unit) {
            return Err(SystemdError::UnitExists { unit: unit.into() });
        }
        units.insert(unit.into(), p.clone());
        Ok(())
    }
    fn set_properties(&self, unit: &str, p: &UnitProperties) -> Result<(), SystemdError> {
        self.calls.lock().expect("lock").push(format!("set {unit}"));
        let mut units = self.units.lock().expect("lock");
        let Some(u) = units.get_mut(unit) else {
            return Err(SystemdError::NoSuchUnit { unit: unit.into() });
        };
        u.extend(p.iter().cloned());
        Ok(())
    }
    fn stop(&self, unit: &str) -> Result<(), SystemdError> {
        self.calls
            .lock()
            .expect("lock")
            .push(format!("stop {unit}"));
        match self.units.lock().expect("lock").remove(unit) {
            Some(_) => Ok(()),
            None => Err(SystemdError::NoSuchUnit { unit: unit.into() }),
        }
    }
}

fn config(qos: QosClass, quota: Option<u64>, memory: Option<u64>) -> PodCgroupConfig {
    PodCgroupConfig {
        qos,
        cpu_shares: 512,
        cpu_quota_us: quota,
        memory_max: memory,
        pids_max: Some(100),
        requests: Amounts::default(),
    }
}

#[test]
fn slice_names_and_expansion_follow_the_kubelet() {
    // (cgroupRoot, qos, uid) -> (pod slice, its cgroup)
    for (parent, qos, uid, slice, path) in [
        (
            "podvisor.slice",
            QosClass::Guaranteed,
            "a-b",
            "podvisor-poda_b.slice",
            "/podvisor.slice/podvisor-poda_b.slice",
        ),
        (
            "podvisor.slice",
            QosClass::Burstable,
            "u1",
            "podvisor-burstable-podu1.slice",
            "/podvisor.slice/podvisor-burstable.slice/podvisor-burstable-podu1.slice",
        ),
        (
            "edge-pv.slice",
            QosClass::BestEffort,
            "x-y-z",
            "edge-pv-besteffort-podx_y_z.slice",
            "/edge.slice/edge-pv.slice/edge-pv-besteffort.slice/edge-pv-besteffort-podx_y_z.slice",
        ),
    ] {
        assert_eq!(pod_slice(parent, qos, uid), slice);
        assert_eq!(expand_slice(slice), path);
    }
    assert_eq!(scope_name("c0ffee"), "podvisor-c0ffee.scope");
    // The kubelet's ExpandSlice examples.
    assert_eq!(expand_slice("test.slice"), "/test.slice");
    assert_eq!(
        expand_slice("test-a-b.slice"),
        "/test.slice/test-a.slice/test-a-b.slice"
    );
}

#[test]
fn slice_names_are_validated() {
    for ok in ["podvisor.slice", "edge-podvisor.slice", "a_b.c:d.slice"] {
        assert_eq!(validate_slice(ok), Ok(()), "{ok}");
    }
    for (bad, says) in [
        ("podvisor", "ending in \".slice\""),
        ("/podvisor.slice", "not allowed"),
        ("-.slice", "not a slice"),
        (".slice", "not a slice"),
        ("a--b.slice", "doubled"),
        ("-a.slice", "leading"),
        ("a b.slice", "not allowed"),
    ] {
        let err = validate_slice(bad).expect_err(bad).to_string();
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn cpu_quota_per_second_rounds_up_to_ten_milliseconds() {
    // (cfs quota per 100 ms period, CPUQuotaPerSecUSec): runc's rounding.
    for (quota, want) in [
        (None, INFINITY),
        (Some(1_000), 10_000),
        (Some(20_000), 200_000),
        (Some(25_000), 250_000),
        (Some(25_100), 260_000),
        (Some(100_000), 1_000_000),
        (Some(150_000), 1_500_000),
    ] {
        assert_eq!(cpu_quota_per_sec_usec(quota), want, "{quota:?}");
    }
}

#[test]
fn pod_slice_properties_map_the_pod_cgroup_values() {
    let p = pod_slice_properties(
        "u1",
        &config(QosClass::Burstable, Some(50_000), Some(64 << 20)),
    );
    let get = |k: &str| p.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
    assert_eq!(
        get("CPUWeight"),
        Some(UnitValue::U64(shares_to_weight(512)))
    );
    assert_eq!(get("CPUQuotaPerSecUSec"), Some(UnitValue::U64(500_000)));
    assert_eq!(get("MemoryMax"), Some(UnitValue::U64(64 << 20)));
    assert_eq!(get("MemorySwapMax"), Some(UnitValue::U64(0)));
    assert_eq!(get("TasksMax"), Some(UnitValue::U64(100)));
    assert_eq!(get("MemoryAccounting"), Some(UnitValue::Bool(true)));
    assert_eq!(get("DefaultDependencies"), Some(UnitValue::Bool(false)));
    assert_eq!(get("Delegate"), None, "systemd refuses Delegate= on slices");

    let mut unlimited = config(QosClass::BestEffort, None, None);
    unlimited.pids_max = None;
    let p = pod_limits(&unlimited);
    assert_eq!(
        p,
        vec![
            ("CPUWeight", UnitValue::U64(shares_to_weight(512))),
            ("CPUQuotaPerSecUSec", UnitValue::U64(INFINITY)),
            ("MemoryMax", UnitValue::U64(INFINITY)),
            ("TasksMax", UnitValue::U64(INFINITY)),
        ]
    );
    assert_eq!(
        qos_slice_properties(QosClass::BestEffort).last(),
        Some(&("CPUWeight", UnitValue::U64(1)))
    );
    assert_eq!(
        burstable_weight(1000),
        vec![("CPUWeight", UnitValue::U64(39))]
    );
}

#[test]
fn create_starts_the_tiers_once_then_updates_and_remove_stops_the_pod_slice() {
    let units = FakeUnits::default();
    let cfg = config(QosClass::Burstable, None, Some(1 << 30));
    let rel = create_pod(&units, "podvisor.slice", "u-1", &cfg).expect("create");
    assert_eq!(
        rel,
        "/podvisor.slice/podvisor-burstable.slice/podvisor-burstable-podu_1.slice"
    );
    assert_eq!(
        units.names(),
        [
            "podvisor-besteffort.slice",
            "podvisor-burstable-podu_1.slice",
            "podvisor-burstable.slice",
            "podvisor.slice",
        ]
    );
    // Again (a daemon restart, or a slice systemd loaded implicitly for a scope): starting
    // reports the unit as loaded and the pod's limits are set on it.
    let changed = config(QosClass::Burstable, None, Some(2 << 30));
    create_pod(&units, "podvisor.slice", "u-1", &changed).expect("create again");
    assert_eq!(
        units.get("podvisor-burstable-podu_1.slice", "MemoryMax"),
        Some(UnitValue::U64(2 << 30))
    );
    // Every unit was started once more and refused as loaded; only the pod slice got its
    // limits set again.
    assert_eq!(units.calls_of("start"), 8);
    assert_eq!(units.calls_of("set"), 1);
    set_burstable_cpu(&units, "podvisor.slice", 2000).expect("weight");
    assert_eq!(
        units.get("podvisor-burstable.slice", "CPUWeight"),
        Some(UnitValue::U64(79))
    );
    remove_pod(&units, "podvisor.slice", "u-1").expect("remove");
    assert!(!units.unit_exists("podvisor-burstable-podu_1.slice"));
    // The QoS slices stay, as the kubelet's do.
    assert!(units.unit_exists("podvisor-burstable.slice"));
    remove_pod(&units, "podvisor.slice", "u-1").expect("remove again");
}

#[test]
fn burstable_weight_is_not_set_before_the_slice_exists() {
    let units = FakeUnits::default();
    set_burstable_cpu(&units, "podvisor.slice", 500).expect("no-op");
    assert!(!units.unit_exists("podvisor-burstable.slice"));
}

#[test]
fn other_systemd_errors_are_returned_naming_the_unit() {
    struct Refusing;
    impl SystemdUnits for Refusing {
        fn start_transient(&self, unit: &str, _: &UnitProperties) -> Result<(), SystemdError> {
            Err(SystemdError::Unit {
                unit: unit.into(),
                action: "StartTransientUnit",
                message: "Access denied".into(),
            })
        }
        fn set_properties(&self, unit: &str, _: &UnitProperties) -> Result<(), SystemdError> {
            Err(SystemdError::NoSuchUnit { unit: unit.into() })
        }
        fn stop(&self, unit: &str) -> Result<(), SystemdError> {
            Err(SystemdError::NoSuchUnit { unit: unit.into() })
        }
    }
    let cfg = config(QosClass::Guaranteed, None, None);
    let err = create_pod(&Refusing, "podvisor.slice", "u", &cfg).expect_err("refused");
    assert_eq!(
        err.to_string(),
        "systemd unit podvisor.slice: StartTransientUnit failed: Access denied"
    );
    remove_pod(&Refusing, "podvisor.slice", "u").expect("nothing to stop is fine");
}

#[test]
fn host_check_names_what_is_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v2 = dir.path().join("v2");
    std::fs::create_dir_all(&v2).expect("mkdir");
    std::fs::write(v2.join("cgroup.controllers"), "cpu memory\n").expect("write");
    let v1 = dir.path().join("v1");
    std::fs::create_dir_all(v1.join("memory")).expect("mkdir");
    let marker = dir.path().join("run-systemd-system");
    if !cfg!(feature = "systemd-cgroup") {
        let err = check_host(&CgroupRoot::new(&v2), &marker).expect_err("not built");
        assert!(err.to_string().contains("systemd-cgroup"), "{err}");
        return;
    }
    let err = check_host(&CgroupRoot::new(&v2), &marker).expect_err("not booted");
    assert!(err.to_string().contains("run-systemd-system"), "{err}");
    std::fs::create_dir(&marker).expect("mkdir");
    let err = check_host(&CgroupRoot::new(&v1), &marker).expect_err("v1");
    assert!(err.to_string().contains("cgroup v1 or hybrid"), "{err}");
    check_host(&CgroupRoot::new(&v2), &marker).expect("v2 with systemd");
}
