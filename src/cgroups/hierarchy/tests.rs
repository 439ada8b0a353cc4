use super::*;
use crate::pod::resources::Amounts;

fn read(p: &Path) -> String {
    fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

#[test]
fn pod_init_goes_to_a_leaf_without_controllers_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    fs::write(r.join("cgroup.controllers"), "cpu memory pids\n").expect("w");
    fs::write(r.join("cgroup.subtree_control"), "").expect("w");
    let root = CgroupRoot::new(r);
    root.add_process("pv/podu/pod-init", 42).expect("add");
    assert_eq!(read(&r.join("pv/podu/pod-init/cgroup.procs")), "42");
    assert!(!r.join("pv/podu/pod-init/cgroup.subtree_control").exists());
    // v1: one leaf per hierarchy podvisor uses.
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    for h in ["cpu", "memory", "pids", "blkio"] {
        fs::create_dir_all(r.join(h)).expect("mkdir");
    }
    let root = CgroupRoot::new(r);
    root.add_process("pv/podu/pod-init", 7).expect("add");
    for h in ["cpu", "memory", "pids"] {
        assert_eq!(read(&r.join(h).join("pv/podu/pod-init/cgroup.procs")), "7");
    }
    // Its parent, the pod cgroup, is made in every hierarchy, as `create_pod` makes it;
    // the leaf only where the init is placed.
    assert!(r.join("blkio/pv/podu").is_dir());
    assert!(!r.join("blkio/pv/podu/pod-init").exists());
}

/// Pre-creates a v2 cgroup dir with the files the kernel would show.
fn v2_dir(p: &Path) {
    fs::create_dir_all(p).expect("mkdir");
    for f in [
        "cgroup.subtree_control",
        "cpu.weight",
        "cpu.max",
        "memory.max",
        "memory.swap.max",
        "pids.max",
    ] {
        fs::write(p.join(f), "").expect("write");
    }
}

fn config(qos: QosClass) -> PodCgroupConfig {
    PodCgroupConfig {
        qos,
        cpu_shares: 102,
        cpu_quota_us: Some(25_000),
        memory_max: Some(64 << 20),
        pids_max: Some(50),
        requests: Amounts::default(),
    }
}

#[test]
fn v2_pod_values_and_controllers_top_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    fs::write(
        r.join("cgroup.controllers"),
        "cpuset cpu io memory hugetlb pids rdma misc\n",
    )
    .expect("write");
    fs::write(r.join("cgroup.subtree_control"), "").expect("write");
    for d in ["pv", "pv/burstable", "pv/besteffort", "pv/burstable/podu1"] {
        v2_dir(&r.join(d));
    }
    let root = CgroupRoot::new(r);
    let rel = root
        .create_pod("pv", "u1", &config(QosClass::Burstable))
        .expect("create");
    assert_eq!(rel, "/pv/burstable/podu1");
    let pod = r.join("pv/burstable/podu1");
    assert_eq!(read(&pod.join("cpu.weight")), "4");
    assert_eq!(read(&pod.join("cpu.max")), "25000 100000");
    assert_eq!(read(&pod.join("memory.max")), (64u64 << 20).to_string());
    assert_eq!(read(&pod.join("memory.swap.max")), "0");
    assert_eq!(read(&pod.join("pids.max")), "50");
    assert_eq!(read(&r.join("pv/besteffort/cpu.weight")), "1");
    for d in ["", "pv", "pv/burstable", "pv/burstable/podu1"] {
        assert_eq!(
            read(&r.join(d).join("cgroup.subtree_control")),
            "+cpuset +cpu +io +memory +hugetlb +pids",
            "{d}"
        );
    }
    root.set_burstable_cpu("pv", 2000).expect("tier");
    assert_eq!(read(&r.join("pv/burstable/cpu.weight")), "79");
}

#[test]
fn v2_unlimited_values_and_absent_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    fs::write(r.join("cgroup.controllers"), "cpu pids\n").expect("write");
    fs::create_dir_all(r.join("pv/podg")).expect("mkdir");
    for f in ["cpu.weight", "cpu.max", "pids.max"] {
        fs::write(r.join("pv/podg").join(f), "").expect("write");
    }
    let root = CgroupRoot::new(r);
    let mut c = config(QosClass::Guaranteed);
    c.cpu_quota_us = None;
    c.pids_max = None;
    root.create_pod("pv", "g", &c).expect("create");
    let pod = r.join("pv/podg");
    assert_eq!(read(&pod.join("cpu.max")), "max 100000");
    assert_eq!(read(&pod.join("pids.max")), "max");
    // No memory controller: its files are not created.
    assert!(!pod.join("memory.max").exists());
    assert_eq!(read(&r.join("cgroup.subtree_control")), "+cpu +pids");
}

#[test]
fn v1_pod_values_in_each_hierarchy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    let pod = "pv/besteffort/podb";
    for (h, files) in [
        (
            "cpu",
            &["cpu.shares", "cpu.cfs_period_us", "cpu.cfs_quota_us"][..],
        ),
        ("memory", &["memory.limit_in_bytes"][..]),
        ("pids", &["pids.max"][..]),
    ] {
        fs::create_dir_all(r.join(h).join(pod)).expect("mkdir");
        for f in files {
            fs::write(r.join(h).join(pod).join(f), "").expect("write");
        }
    }
    fs::write(r.join("cpu/pv/besteffort/cpu.shares"), "").expect("write");
    let root = CgroupRoot::new(r);
    assert_eq!(root.mode(), CgroupMode::Legacy);
    let mut c = config(QosClass::BestEffort);
    c.cpu_shares = 2;
    c.cpu_quota_us = None;
    c.memory_max = None;
    root.create_pod("pv", "b", &c).expect("create");
    assert_eq!(read(&r.join("cpu").join(pod).join("cpu.shares")), "2");
    assert_eq!(
        read(&r.join("cpu").join(pod).join("cpu.cfs_quota_us")),
        "-1"
    );
    assert_eq!(
        read(&r.join("cpu").join(pod).join("cpu.cfs_period_us")),
        "100000"
    );
    assert_eq!(
        read(&r.join("memory").join(pod).join("memory.limit_in_bytes")),
        "-1"
    );
    assert_eq!(read(&r.join("pids").join(pod).join("pids.max")), "50");
}

#[test]
fn v1_tiers_are_made_with_the_first_pod_then_a_pod_is_one_mkdir_per_hierarchy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    for h in ["cpu", "memory", "pids"] {
        fs::create_dir(r.join(h)).expect("mkdir");
    }
    let root = CgroupRoot::new(r);
    let exists = |rel: &str| {
        ["cpu", "memory", "pids"]
            .iter()
            .all(|h| r.join(h).join(rel).is_dir())
    };
    // The first pod: the tiers are made, in every hierarchy.
    root.create_pod("pv", "a", &config(QosClass::BestEffort))
        .expect("create");
    assert!(exists("pv/burstable") && exists("pv/besteffort/poda"));
    // The next: only its own directory; the tiers are not written again (the BestEffort
    // weight, which the first pod's path would write, is left as it is).
    let shares = r.join("cpu/pv/besteffort/cpu.shares");
    fs::write(&shares, "").expect("write");
    root.create_pod("pv", "b", &config(QosClass::BestEffort))
        .expect("create");
    assert!(exists("pv/besteffort/podb"));
    assert_eq!(read(&shares), "");
    // A tier missing in one hierarchy (the pod's directory is already made in another):
    // every tier is made again, and the pod's directory everywhere.
    fs::remove_dir(r.join("memory/pv/burstable")).expect("rmdir");
    root.create_pod("pv", "c", &config(QosClass::Burstable))
        .expect("create");
    assert!(exists("pv/burstable/podc"));
    assert_eq!(read(&shares), "2");
    // A Guaranteed pod sits below the parent itself.
    root.create_pod("pv", "g", &config(QosClass::Guaranteed))
        .expect("create");
    assert!(exists("pv/podg"));
}

#[test]
fn v1_pod_cgroups_are_made_in_every_hierarchy_libcontainer_places_containers_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    for h in [
        "cpu", "memory", "pids", "cpuset", "freezer", "blkio", "devices",
    ] {
        fs::create_dir(r.join(h)).expect("mkdir");
    }
    // Co-mounted: `cpuacct` is the `cpu` hierarchy under a second name.
    std::os::unix::fs::symlink(r.join("cpu"), r.join("cpuacct")).expect("symlink");
    let root = CgroupRoot::new(r);
    root.create_pod("pv", "a", &config(QosClass::BestEffort))
        .expect("first pod");
    root.create_pod("pv", "b", &config(QosClass::BestEffort))
        .expect("next pod");
    for h in [
        "cpu", "cpuacct", "memory", "pids", "cpuset", "freezer", "blkio", "devices",
    ] {
        for pod in ["a", "b"] {
            let d = r.join(h).join(format!("pv/besteffort/pod{pod}"));
            assert!(d.is_dir(), "{}", d.display());
        }
    }
    // Not mounted: nothing made.
    assert!(!r.join("hugetlb").exists());
    root.remove_pod("pv", "a").expect("remove");
    assert!(!r.join("freezer/pv/besteffort/poda").exists());
    assert!(!r.join("cpuset/pv/besteffort/poda").exists());
}

#[test]
fn an_empty_cpuset_level_takes_its_parents_cpus_and_mems() {
    let dir = tempfile::tempdir().expect("tempdir");
    let parent = dir.path();
    fs::write(parent.join("cpuset.cpus"), "0-3\n").expect("write");
    fs::write(parent.join("cpuset.mems"), "0\n").expect("write");
    let child = parent.join("pod");
    fs::create_dir(&child).expect("mkdir");
    fs::write(child.join("cpuset.cpus"), "\n").expect("write");
    // One already set is left as it is.
    fs::write(child.join("cpuset.mems"), "1\n").expect("write");
    fill_cpuset(&child).expect("fill");
    assert_eq!(read(&child.join("cpuset.cpus")), "0-3");
    assert_eq!(read(&child.join("cpuset.mems")), "1");
    // A directory without the files (not a cpuset cgroup) is left alone.
    let other = parent.join("other");
    fs::create_dir(&other).expect("mkdir");
    fill_cpuset(&other).expect("fill");
    assert!(!other.join("cpuset.cpus").exists());
}

#[test]
fn v2_a_pod_below_tiers_that_lack_a_controller_enables_it_at_every_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    fs::write(r.join("cgroup.controllers"), "cpu memory pids\n").expect("write");
    fs::write(r.join("cgroup.subtree_control"), "").expect("write");
    for d in ["pv", "pv/burstable", "pv/besteffort", "pv/besteffort/podx"] {
        v2_dir(&r.join(d));
    }
    let root = CgroupRoot::new(r);
    // The tiers pass down everything the root offers: only the pod's level is written.
    fs::write(
        r.join("pv/besteffort/podx/cgroup.controllers"),
        "cpu memory pids\n",
    )
    .expect("write");
    root.create_pod("pv", "x", &config(QosClass::BestEffort))
        .expect("create");
    assert_eq!(
        read(&r.join("pv/besteffort/podx/cgroup.subtree_control")),
        "+cpu +memory +pids"
    );
    assert_eq!(read(&r.join("pv/cgroup.subtree_control")), "");
    // They lack pids (made by an older podvisor, or changed by hand): every level again.
    fs::write(
        r.join("pv/besteffort/podx/cgroup.controllers"),
        "cpu memory\n",
    )
    .expect("write");
    root.create_pod("pv", "x", &config(QosClass::BestEffort))
        .expect("create");
    for d in ["", "pv", "pv/besteffort", "pv/besteffort/podx"] {
        assert_eq!(
            read(&r.join(d).join("cgroup.subtree_control")),
            "+cpu +memory +pids",
            "{d}"
        );
    }
}

#[test]
fn remove_pod_probes_every_tier_and_keeps_the_tiers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = dir.path();
    for h in ["cpu", "memory"] {
        fs::create_dir_all(r.join(h).join("pv/burstable/podu1/c1")).expect("mkdir");
        fs::create_dir_all(r.join(h).join("pv/besteffort")).expect("mkdir");
        fs::create_dir_all(r.join(h).join("pv/podg")).expect("mkdir");
    }
    let root = CgroupRoot::new(r);
    root.remove_pod("pv", "u1").expect("remove");
    for h in ["cpu", "memory"] {
        assert!(!r.join(h).join("pv/burstable/podu1").exists(), "{h}");
        assert!(r.join(h).join("pv/podg").exists(), "{h}");
    }
    root.remove_pod("pv", "g").expect("remove last");
    for h in ["cpu", "memory"] {
        assert!(!r.join(h).join("pv/podg").exists(), "{h}");
        // The last pod gone: the tiers stay for the next one.
        assert!(r.join(h).join("pv/burstable").exists(), "{h}");
        assert!(r.join(h).join("pv/besteffort").exists(), "{h}");
    }
    // The next pod of the class is one mkdir per hierarchy below the kept tier.
    assert!(root
        .create_in_existing_parent("pv/burstable/podu2")
        .expect("create"));
    // Removing a pod that is gone is fine.
    root.remove_pod("pv", "u1").expect("remove again");
}

/// libcgroups' v1 manager, which libcontainer makes in every container start, finds each
/// subsystem's mount point in one read of mountinfo (vendor/README.md): the same choices as
/// its per-subsystem search, which this table pins.
mod libcgroups_v1_mounts {
    use std::path::PathBuf;

    use libcgroups::v1::util::subsystem_mount_point;
    use libcgroups::v1::ControllerType as C;

    fn mounts(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn picks_the_first_mount_holding_the_subsystem() {
        let debian = mounts(&[
            "/sys/fs/cgroup/systemd",
            "/sys/fs/cgroup/cpu,cpuacct",
            "/sys/fs/cgroup/net_cls,net_prio",
            "/sys/fs/cgroup/memory",
            "/sys/fs/cgroup/pids",
        ]);
        let split = mounts(&[
            "/sys/fs/cgroup/cpu",
            "/sys/fs/cgroup/cpuacct",
            "/sys/fs/cgroup/net_prio",
            "/sys/fs/cgroup/net_cls",
            "/sys/fs/cgroup/memory",
            "/run/other/memory",
        ]);
        let cases: &[(&[PathBuf], C, Option<&str>)] = &[
            (&debian, C::Cpu, Some("/sys/fs/cgroup/cpu,cpuacct")),
            (&debian, C::CpuAcct, Some("/sys/fs/cgroup/cpu,cpuacct")),
            (
                &debian,
                C::NetworkClassifier,
                Some("/sys/fs/cgroup/net_cls,net_prio"),
            ),
            (
                &debian,
                C::NetworkPriority,
                Some("/sys/fs/cgroup/net_cls,net_prio"),
            ),
            (&debian, C::Memory, Some("/sys/fs/cgroup/memory")),
            (&debian, C::Freezer, None),
            (&split, C::Cpu, Some("/sys/fs/cgroup/cpu")),
            (&split, C::CpuAcct, Some("/sys/fs/cgroup/cpuacct")),
            (&split, C::NetworkClassifier, Some("/sys/fs/cgroup/net_cls")),
            (&split, C::NetworkPriority, Some("/sys/fs/cgroup/net_prio")),
            // The first of two mounts of one subsystem, in mountinfo order.
            (&split, C::Memory, Some("/sys/fs/cgroup/memory")),
            (&[], C::Pids, None),
        ];
        for (list, subsystem, want) in cases {
            assert_eq!(
                subsystem_mount_point(list, subsystem),
                want.map(PathBuf::from),
                "{subsystem} in {list:?}"
            );
        }
    }
}
