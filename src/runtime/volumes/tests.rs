use super::*;

use std::os::unix::fs::MetadataExt;

fn pod(json: serde_json::Value) -> Pod {
    serde_json::from_value(json).expect("pod")
}

fn node() -> NodeInfo {
    NodeInfo {
        name: "node1".into(),
        cpu_millis: 2000,
        memory_bytes: 4 << 30,
        host_ip: "10.0.0.1".into(),
        bounding_capabilities: Default::default(),
    }
}

#[test]
fn host_path_types_follow_the_kubelet_and_containerd() {
    let dir = tempfile::tempdir().expect("tempdir");
    let f = "spec.volumes[0].hostPath";
    // Untyped and missing: created as a directory with its parents (containerd).
    let untyped = dir.path().join("a/b/admin.conf");
    check_host_path(&untyped, "", f).expect("untyped");
    assert!(untyped.is_dir());
    assert_eq!(fs::metadata(&untyped).expect("md").mode() & 0o777, 0o755);
    // DirectoryOrCreate makes parents too.
    let d = dir.path().join("x/y");
    check_host_path(&d, "DirectoryOrCreate", f).expect("dir or create");
    assert!(d.is_dir());
    // FileOrCreate creates the file, never its parent.
    let file = dir.path().join("log");
    check_host_path(&file, "FileOrCreate", f).expect("file or create");
    assert!(file.is_file());
    assert_eq!(fs::metadata(&file).expect("md").mode() & 0o777, 0o644);
    let orphan = dir.path().join("missing-parent/log");
    let e = check_host_path(&orphan, "FileOrCreate", f).expect_err("no parent");
    assert!(
        e.to_string()
            .starts_with(&format!("{f}: create file {}", orphan.display())),
        "{e}"
    );
    assert!(!orphan.parent().expect("parent").exists());
    // Checks name the path and what it is not.
    let cases = [
        (&file, "Directory", "is not a directory"),
        (&d, "File", "is not a file"),
        (&d, "FileOrCreate", "is not a file"),
        (&file, "DirectoryOrCreate", "is not a directory"),
        (&d, "Socket", "is not a socket file"),
        (&d, "CharDevice", "is not a character device"),
        (&d, "BlockDevice", "is not a block device"),
        (&orphan, "Directory", "does not exist"),
        (&orphan, "File", "does not exist"),
    ];
    for (p, t, want) in cases {
        let e = check_host_path(p, t, f).expect_err(t).to_string();
        assert_eq!(
            e,
            format!("{f}: hostPath type check failed: {} {want}", p.display()),
            "{t}"
        );
    }
    check_host_path(Path::new("/dev/null"), "CharDevice", f).expect("char device");
    // A symlink to a file is a file (stat, as the kubelet).
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(&file, &link).expect("symlink");
    check_host_path(&link, "File", f).expect("symlink to file");
    assert!(check_host_path(&d, "Bogus", f).is_err());
}

fn payload(items: &[(&str, &str)]) -> BTreeMap<String, (Vec<u8>, u32)> {
    items
        .iter()
        .map(|(p, c)| (p.to_string(), (c.as_bytes().to_vec(), 0o644)))
        .collect()
}

#[test]
fn atomic_writer_swaps_data_through_a_symlink() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = dir.path();
    write_atomic(v, &payload(&[("labels", "a=\"1\""), ("sub/name", "web")])).expect("write");
    let data = fs::read_link(v.join("..data")).expect("..data");
    assert!(data.to_string_lossy().starts_with("..20"), "{data:?}");
    assert_eq!(
        fs::read_link(v.join("labels")).expect("link"),
        Path::new("..data/labels")
    );
    assert_eq!(fs::read_to_string(v.join("sub/name")).expect("read"), "web");
    // Unchanged payload: nothing is rewritten.
    write_atomic(v, &payload(&[("labels", "a=\"1\""), ("sub/name", "web")])).expect("again");
    assert_eq!(fs::read_link(v.join("..data")).expect("..data"), data);
    // A new payload: a new directory, the old one and the stale name are gone.
    write_atomic(v, &payload(&[("labels", "a=\"2\"")])).expect("update");
    let data2 = fs::read_link(v.join("..data")).expect("..data");
    assert_ne!(data2, data);
    assert!(!v.join(&data).exists(), "old payload directory removed");
    assert!(
        fs::symlink_metadata(v.join("sub")).is_err(),
        "stale name removed"
    );
    assert_eq!(
        fs::read_to_string(v.join("labels")).expect("read"),
        "a=\"2\""
    );
    assert!(!v.join("..data_tmp").exists());
}

#[test]
fn downward_api_volume_files_hold_pod_fields_and_resources() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pod(serde_json::json!({
        "metadata": {"name": "web", "namespace": "ns", "uid": "u1",
                     "labels": {"zone": "a", "app": "w\"x"}},
        "spec": {
            "containers": [{"name": "c", "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}}],
            "volumes": [{"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 256},
                {"path": "zone", "fieldRef": {"fieldPath": "metadata.labels['zone']"}},
                {"path": "cpu", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu", "divisor": "1m"}},
                {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}
            ]}}]
        }
    }));
    let vol = &p
        .spec
        .as_ref()
        .expect("spec")
        .volumes
        .as_ref()
        .expect("volumes")[0];
    let data = dir.path().join("info");
    let (path, kind) = prepare(&p, &node(), vol, 0, &data).expect("prepare");
    assert_eq!(
        (path.as_path(), kind),
        (data.as_path(), VolumeKind::Projected)
    );
    let read = |n: &str| fs::read_to_string(data.join(n)).expect(n);
    assert_eq!(read("labels"), "app=\"w\\\"x\"\nzone=\"a\"");
    assert_eq!(read("name"), "web");
    assert_eq!(read("zone"), "a");
    assert_eq!(read("cpu"), "250");
    assert_eq!(read("mem"), "64");
    assert_eq!(
        fs::metadata(data.join("name")).expect("md").mode() & 0o777,
        0o400
    );
    assert_eq!(
        fs::metadata(data.join("zone")).expect("md").mode() & 0o777,
        0o644
    );
}

#[test]
fn a_volume_without_a_source_is_an_empty_dir() {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = pod(
        serde_json::json!({"spec": {"containers": [{"name": "c"}], "volumes": [{"name": "run"}]}}),
    );
    let vol = &p
        .spec
        .as_ref()
        .expect("spec")
        .volumes
        .as_ref()
        .expect("volumes")[0];
    let data = dir.path().join("run");
    let (_, kind) = prepare(&p, &node(), vol, 0, &data).expect("prepare");
    assert_eq!(kind, VolumeKind::EmptyDir);
    assert_eq!(fs::metadata(&data).expect("md").mode() & 0o777, 0o777);
}

#[test]
fn fs_group_owns_volumes_and_on_root_mismatch_skips_the_walk() {
    let dir = tempfile::tempdir().expect("tempdir");
    let v = dir.path().join("v");
    fs::create_dir_all(v.join("sub")).expect("mkdir");
    fs::write(v.join("sub/f"), b"x").expect("write");
    fs::set_permissions(v.join("sub/f"), fs::Permissions::from_mode(0o600)).expect("chmod");
    let sc: PodSecurityContext =
        serde_json::from_value(serde_json::json!({"fsGroup": 2000})).expect("sc");
    if !nix::unistd::geteuid().is_root() {
        // chown to another group needs root: the walk must report the path.
        let e = apply_fs_group(&v, &sc, false, "spec.volumes[0]").expect_err("not root");
        assert!(e.to_string().contains("chown"), "{e}");
        return;
    }
    apply_fs_group(&v, &sc, false, "spec.volumes[0]").expect("fsGroup");
    for (p, mode) in [
        (&v, 0o2770),
        (&v.join("sub"), 0o2770),
        (&v.join("sub/f"), 0o660),
    ] {
        let md = fs::metadata(p).expect("md");
        assert_eq!(md.gid(), 2000, "{p:?}");
        assert_eq!(md.mode() & mode, mode, "{p:?}");
    }
    // OnRootMismatch: the root already matches, a file changed below is left alone.
    std::os::unix::fs::lchown(v.join("sub/f"), None, Some(0)).expect("chown back");
    let sc: PodSecurityContext = serde_json::from_value(
        serde_json::json!({"fsGroup": 2000, "fsGroupChangePolicy": "OnRootMismatch"}),
    )
    .expect("sc");
    apply_fs_group(&v, &sc, false, "spec.volumes[0]").expect("fsGroup");
    assert_eq!(fs::metadata(v.join("sub/f")).expect("md").gid(), 0);
    // Always (the default) walks again.
    let sc: PodSecurityContext =
        serde_json::from_value(serde_json::json!({"fsGroup": 2000})).expect("sc");
    apply_fs_group(&v, &sc, false, "spec.volumes[0]").expect("fsGroup");
    assert_eq!(fs::metadata(v.join("sub/f")).expect("md").gid(), 2000);
}

#[test]
fn hugepage_media_and_item_paths() {
    assert_eq!(
        crate::pod::validation::hugepage_size("HugePages").as_deref(),
        Some("2M")
    );
    assert_eq!(
        crate::pod::validation::hugepage_size("HugePages-1Gi").as_deref(),
        Some("1073741824")
    );
    assert_eq!(crate::pod::validation::hugepage_size("HugePages-x"), None);
    assert_eq!(crate::pod::validation::hugepage_size("Disk"), None);
    for bad in ["", "/abs", "..x", "a/../b"] {
        assert!(check_item_path(bad, "f").is_err(), "{bad}");
    }
    check_item_path("a/b..c", "f").expect("dots inside a name");
}
