//! Table tests of the user namespace allocator, the mapping file checks, the subuid range and
//! the manager's persistence.

use super::*;

const U: u32 = IDS_PER_POD;

#[test]
fn allocator_hands_out_the_lowest_free_slot_and_reuses_released_ones() {
    let mut a = Allocator::new(IdRange {
        first_slot: 1,
        slots: 3,
    });
    // (operation, pod, expected base or error)
    let steps: &[(&str, &str, Result<u32, &str>)] = &[
        ("alloc", "a", Ok(U)),
        ("alloc", "b", Ok(2 * U)),
        ("alloc", "a", Ok(U)),
        ("alloc", "c", Ok(3 * U)),
        (
            "alloc",
            "d",
            Err("no free user namespace left: all 3 ranges"),
        ),
        ("release", "b", Ok(0)),
        ("alloc", "d", Ok(2 * U)),
        ("release", "zz", Ok(0)),
    ];
    for (op, pod, want) in steps {
        match *op {
            "alloc" => match (a.allocate(pod), want) {
                (Ok(b), Ok(w)) => assert_eq!(b, *w, "{op} {pod}"),
                (Err(e), Err(w)) => assert!(e.to_string().starts_with(w), "{e}"),
                (got, _) => panic!("{op} {pod}: {got:?}, want {want:?}"),
            },
            _ => a.release(pod),
        }
    }
    assert_eq!(a.in_use(), 3);
}

#[test]
fn recording_refuses_collisions_and_ranges_outside() {
    let mut a = Allocator::new(IdRange {
        first_slot: 2,
        slots: 2,
    });
    let cases: &[(&str, u32, Option<&str>)] = &[
        ("a", 2 * U, None),
        ("a", 2 * U, None),
        ("a", 3 * U, Some("pod already holds the range at 131072")),
        ("b", 2 * U, Some("range 131072 is already used by pod a")),
        ("b", U, Some("outside the configured range")),
        ("b", 4 * U, Some("outside the configured range")),
        ("b", 3 * U + 1, Some("outside the configured range")),
        ("b", 3 * U, None),
    ];
    for (pod, base, want) in cases {
        let got = a.record(pod, *base);
        match (got, want) {
            (Ok(()), None) => {}
            (Err(e), Some(w)) => assert!(e.to_string().contains(w), "{pod} {base}: {e}"),
            (got, _) => panic!("{pod} {base}: {got:?}, want {want:?}"),
        }
    }
    // Recorded slots are never allocated again.
    assert!(a.allocate("c").is_err());
}

#[test]
fn mapping_files_are_checked_as_the_kubelet_checks_them() {
    let m = |h, c, l| IdMapping {
        host_id: h,
        container_id: c,
        length: l,
    };
    let ns = |u: Vec<IdMapping>, g: Vec<IdMapping>| PodUserNamespace {
        uid_mappings: u,
        gid_mappings: g,
    };
    let cases: Vec<(PodUserNamespace, Result<u32, &str>)> = vec![
        (PodUserNamespace::at(5 * U), Ok(5 * U)),
        (ns(vec![], vec![]), Err("exactly one uid mapping")),
        (
            ns(vec![m(U, 0, U), m(2 * U, U, U)], vec![m(U, 0, U)]),
            Err("exactly one uid mapping"),
        ),
        (
            ns(vec![m(U, 0, U)], vec![m(2 * U, 0, U)]),
            Err("must be identical"),
        ),
        (
            ns(vec![m(U, 1, U)], vec![m(U, 1, U)]),
            Err("uid 0 must be mapped"),
        ),
        (ns(vec![m(U, 0, 10)], vec![m(U, 0, 10)]), Err("length 10")),
        (
            ns(vec![m(0, 0, U)], vec![m(0, 0, U)]),
            Err("non-zero multiple"),
        ),
        (
            ns(vec![m(100, 0, U)], vec![m(100, 0, U)]),
            Err("non-zero multiple"),
        ),
    ];
    for (n, want) in cases {
        match (n.check(), want) {
            (Ok(b), Ok(w)) => assert_eq!(b, w),
            (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{e}"),
            (got, want) => panic!("{n:?}: {got:?}, want {want:?}"),
        }
    }
    assert_eq!(PodUserNamespace::at(2 * U).map_line(), "0 131072 65536\n");
    // The kubelet's file format.
    let json = serde_json::to_string(&PodUserNamespace::at(U)).expect("json");
    assert_eq!(
        json,
        r#"{"uidMappings":[{"hostId":65536,"containerId":0,"length":65536}],"gidMappings":[{"hostId":65536,"containerId":0,"length":65536}]}"#
    );
}

#[test]
fn subid_entries_give_the_range() {
    let users = &["podvisor", "kubelet"];
    type Want = Result<Option<(u32, u32)>, &'static str>;
    let cases: &[(&str, Want)] = &[
        ("", Ok(None)),
        ("alice:100000:65536\n", Ok(None)),
        ("kubelet:65536:655360\n", Ok(Some((1, 10)))),
        (
            "kubelet:65536:65536\npodvisor:131072:131072\n",
            Ok(Some((2, 2))),
        ),
        ("podvisor:100000:65536\n", Err("non-zero multiple of 65536")),
        ("podvisor:0:65536\n", Err("non-zero multiple of 65536")),
        ("podvisor:65536:1000\n", Err("non-zero multiple of 65536")),
        ("podvisor:65536\n", Err("want name:first:count")),
        ("podvisor:x:65536\n", Err("must be numbers")),
        ("podvisor:4294901760:131072\n", Err("beyond 2^32")),
    ];
    for (text, want) in cases {
        let got = parse_subid(text, users).map(|r| r.map(|r| (r.first_slot, r.slots)));
        match (got, want) {
            (Ok(g), Ok(w)) => assert_eq!(g, *w, "{text:?}"),
            (Err(e), Err(w)) => assert!(e.contains(w), "{text:?}: {e}"),
            (got, want) => panic!("{text:?}: {got:?}, want {want:?}"),
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (u, g) = (dir.path().join("subuid"), dir.path().join("subgid"));
    assert_eq!(read_id_range(&u, &g).expect("default"), IdRange::default());
    assert_eq!(IdRange::default().first_slot, 1);
    assert_eq!(IdRange::default().slots, 65535);
    fs::write(&u, "podvisor:131072:65536\n").expect("w");
    let e = read_id_range(&u, &g).expect_err("subgid missing");
    assert!(e.to_string().contains("differs"), "{e}");
    fs::write(&g, "podvisor:131072:65536\n").expect("w");
    assert_eq!(
        read_id_range(&u, &g).expect("range"),
        IdRange {
            first_slot: 2,
            slots: 1
        }
    );
}

#[test]
fn the_manager_persists_mappings_and_a_restart_never_reuses_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let range = IdRange {
        first_slot: 1,
        slots: 3,
    };
    let mut m = UsernsManager::load(dir.path(), range);
    let a = m.get_or_create("pod-a").expect("a");
    let b = m.get_or_create("pod-b").expect("b");
    assert_eq!((a.base(), b.base()), (U, 2 * U));
    assert_eq!(m.get_or_create("pod-a").expect("again"), a);
    let text = fs::read_to_string(dir.path().join("pod-a").join(MAPPINGS_FILE)).expect("file");
    assert!(text.contains("\"hostId\":65536"), "{text}");
    // A restarted daemon records both before allocating.
    drop(m);
    let mut m = UsernsManager::load(dir.path(), range);
    assert_eq!(m.base_of("pod-b"), Some(2 * U));
    assert_eq!(m.get_or_create("pod-c").expect("c").base(), 3 * U);
    assert_eq!(m.get_or_create("pod-b").expect("b kept"), b);
    // Released: the file goes and the slot is free again.
    m.release("pod-a");
    assert!(!dir.path().join("pod-a").join(MAPPINGS_FILE).exists());
    assert_eq!(m.get_or_create("pod-d").expect("d").base(), U);
    // A damaged file names itself and is not replaced by a new range.
    fs::create_dir_all(dir.path().join("pod-e")).expect("mkdir");
    fs::write(
        dir.path().join("pod-e").join(MAPPINGS_FILE),
        "{\"uidMappings\":[]",
    )
    .expect("w");
    let e = m.get_or_create("pod-e").expect_err("torn");
    assert!(e.to_string().contains("pod-e/userns"), "{e}");
    // A file that collides with another pod's range keeps the slot out of use after a
    // restart, and its pod fails naming it.
    fs::write(
        dir.path().join("pod-e").join(MAPPINGS_FILE),
        serde_json::to_string(&PodUserNamespace::at(2 * U)).expect("json"),
    )
    .expect("w");
    let mut m = UsernsManager::load(dir.path(), range);
    let e = m.get_or_create("pod-e").expect_err("collision");
    assert!(e.to_string().contains("already used by pod pod-b"), "{e}");
}
