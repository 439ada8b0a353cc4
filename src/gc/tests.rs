//! Table tests of the GC decisions.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::logs::{
    log_base, plan_log_dirs, plan_rotated, plan_unreferenced, pod_uid_of_log_dir, LogGcReason,
    PodLogDir,
};
use super::*;
use crate::logs::rotation::{RotatedFile, RotationKey};

fn t(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs)
}

fn dead(id: &str, uid: &str, name: &str, created: u64) -> DeadContainer {
    DeadContainer {
        id: id.into(),
        pod_uid: uid.into(),
        pod: format!("default/{uid}"),
        container_name: name.into(),
        restart_count: 0,
        created: t(created),
        log_path: PathBuf::from(format!("/logs/{uid}/{name}/{id}.log")),
    }
}

fn req(active: &[&str], removing: &[&str], ready: bool, taken_at: u64) -> GcRequest {
    GcRequest {
        taken_at: Some(t(taken_at)),
        active: active.iter().map(|s| s.to_string()).collect(),
        removing: removing.iter().map(|s| s.to_string()).collect(),
        sources_ready: ready,
    }
}

fn policy(min_age: u64, per: i32, max: i32) -> ContainerGcPolicy {
    ContainerGcPolicy {
        min_age: Duration::from_secs(min_age),
        max_per_pod_container: per,
        max_containers: max,
    }
}

/// (id, reason) of each removal, sorted by id.
fn ids(r: Vec<ContainerRemoval>) -> Vec<(String, ContainerGcReason)> {
    let mut v: Vec<_> = r.into_iter().map(|r| (r.container.id, r.reason)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn container_gc_follows_the_kubelet_policy() {
    use ContainerGcReason::*;
    let per1 = PerContainerLimit { keep: 1 };
    // A crash-looping container: four dead instances.
    let crashloop = vec![
        dead("a0", "u1", "app", 10),
        dead("a1", "u1", "app", 20),
        dead("a2", "u1", "app", 30),
        dead("a3", "u1", "app", 40),
    ];
    type Case = (
        &'static str,
        Vec<DeadContainer>,
        GcRequest,
        ContainerGcPolicy,
        u64,
        Vec<(&'static str, ContainerGcReason)>,
    );
    let cases: Vec<Case> = vec![
        (
            "keeps the newest dead instance per container (logs --previous)",
            crashloop.clone(),
            req(&["u1"], &[], true, 100),
            ContainerGcPolicy::default(),
            100,
            vec![("a0", per1), ("a1", per1), ("a2", per1)],
        ),
        (
            "minimum age: younger ones are not evictable (the newest evictable one is kept too)",
            crashloop.clone(),
            req(&["u1"], &[], true, 100),
            policy(75, 1, -1),
            100,
            vec![("a0", per1)],
        ),
        (
            "negative per-container limit keeps everything",
            crashloop.clone(),
            req(&["u1"], &[], true, 100),
            policy(0, -1, -1),
            100,
            vec![],
        ),
        (
            "zero per-container limit keeps nothing",
            crashloop.clone(),
            req(&["u1"], &[], true, 100),
            policy(0, 0, -1),
            100,
            vec![
                ("a0", PerContainerLimit { keep: 0 }),
                ("a1", PerContainerLimit { keep: 0 }),
                ("a2", PerContainerLimit { keep: 0 }),
                ("a3", PerContainerLimit { keep: 0 }),
            ],
        ),
        (
            "units are per pod and container name",
            vec![
                dead("a0", "u1", "app", 10),
                dead("s0", "u1", "side", 11),
                dead("b0", "u2", "app", 12),
                dead("a1", "u1", "app", 20),
            ],
            req(&["u1", "u2"], &[], true, 100),
            ContainerGcPolicy::default(),
            100,
            vec![("a0", per1)],
        ),
        (
            "a gone pod loses every dead container once the sources reported",
            vec![dead("g0", "gone", "app", 10), dead("g1", "gone", "app", 20)],
            req(&["u1"], &[], true, 100),
            ContainerGcPolicy::default(),
            100,
            vec![("g0", PodGone), ("g1", PodGone)],
        ),
        (
            "before the sources reported, a pod not seen yet is only limited",
            vec![dead("g0", "gone", "app", 10), dead("g1", "gone", "app", 20)],
            req(&["u1"], &[], false, 100),
            ContainerGcPolicy::default(),
            100,
            vec![("g0", per1)],
        ),
        (
            "a container newer than the loop's view is never a gone pod's",
            vec![dead("n0", "new", "app", 150)],
            req(&[], &[], true, 100),
            ContainerGcPolicy::default(),
            200,
            vec![],
        ),
        (
            "pods being removed are left to their removal",
            crashloop.clone(),
            req(&[], &["u1"], true, 100),
            ContainerGcPolicy::default(),
            100,
            vec![],
        ),
        (
            "node limit: an equal share per unit, then the oldest overall",
            vec![
                dead("a0", "u1", "app", 10),
                dead("a1", "u1", "app", 20),
                dead("b0", "u2", "app", 15),
                dead("b1", "u2", "app", 25),
                dead("c0", "u3", "app", 30),
            ],
            req(&["u1", "u2", "u3"], &[], true, 100),
            policy(0, -1, 2),
            100,
            vec![
                ("a0", NodeLimit { max: 2 }),
                ("a1", NodeLimit { max: 2 }),
                ("b0", NodeLimit { max: 2 }),
            ],
        ),
        (
            "node limit under the per-container limit",
            vec![
                dead("a0", "u1", "app", 10),
                dead("a1", "u1", "app", 20),
                dead("b0", "u2", "app", 15),
            ],
            req(&["u1", "u2"], &[], true, 100),
            policy(0, 1, 5),
            100,
            vec![("a0", per1)],
        ),
    ];
    for (name, dead, req, policy, now, want) in cases {
        let got = ids(plan_container_gc(&dead, &req, &policy, t(now)));
        let want: Vec<(String, ContainerGcReason)> =
            want.into_iter().map(|(i, r)| (i.to_string(), r)).collect();
        assert_eq!(got, want, "{name}");
    }
}

fn rotated(specs: &[(&str, bool)]) -> Vec<RotatedFile> {
    specs
        .iter()
        .map(|(stamp, compressed)| RotatedFile {
            key: RotationKey {
                stamp: stamp.to_string(),
                counter: 0,
            },
            path: PathBuf::from(format!(
                "/l/0.log.{stamp}{}",
                if *compressed { ".gz" } else { "" }
            )),
            compressed: *compressed,
        })
        .collect()
}

#[test]
fn rotated_files_beyond_max_files_go_and_older_ones_are_compressed() {
    let s = [
        "20240101-000000",
        "20240101-000001",
        "20240101-000002",
        "20240101-000003",
    ];
    type Case = (
        &'static str,
        Vec<RotatedFile>,
        u32,
        Vec<&'static str>,
        Vec<&'static str>,
    );
    let cases: Vec<Case> = vec![
        ("nothing rotated", rotated(&[]), 5, vec![], vec![]),
        (
            "the newest rotated file stays plain",
            rotated(&[(s[0], false)]),
            5,
            vec![],
            vec![],
        ),
        (
            "older ones are compressed, compressed ones left alone",
            rotated(&[(s[0], true), (s[1], false), (s[2], false)]),
            5,
            vec![],
            vec![s[1]],
        ),
        (
            "max files 3: two rotated kept, the oldest deleted",
            rotated(&[(s[0], true), (s[1], false), (s[2], false), (s[3], false)]),
            3,
            vec![s[0], s[1]],
            vec![s[2]],
        ),
        (
            "max files 1: no rotated file kept",
            rotated(&[(s[0], false), (s[1], false)]),
            1,
            vec![s[0], s[1]],
            vec![],
        ),
    ];
    for (name, files, max, del, comp) in cases {
        let plan = plan_rotated(&files, max);
        let stamp_of = |p: &PathBuf| {
            let n = p.file_name().expect("name").to_string_lossy().into_owned();
            n["0.log.".len().."0.log.".len() + 15].to_string()
        };
        let got_del: Vec<String> = plan.delete.iter().map(|(p, _)| stamp_of(p)).collect();
        assert!(plan
            .delete
            .iter()
            .all(|(_, r)| *r == LogGcReason::TooManyFiles { max_files: max }));
        let got_comp: Vec<String> = plan.compress.iter().map(stamp_of).collect();
        assert_eq!(got_del, del, "{name}: deleted");
        assert_eq!(got_comp, comp, "{name}: compressed");
    }
}

#[test]
fn pod_log_dirs_of_gone_pods_are_removed() {
    assert_eq!(
        pod_uid_of_log_dir("default_web-n1_abc-123"),
        Some("abc-123")
    );
    assert_eq!(pod_uid_of_log_dir("kube_system_x_u"), Some("u"));
    assert_eq!(pod_uid_of_log_dir("nounderscore"), None);
    assert_eq!(pod_uid_of_log_dir("ns_pod_"), None);
    let dir = |uid: &str, modified: u64| PodLogDir {
        path: PathBuf::from(format!("/l/ns_p_{uid}")),
        uid: uid.into(),
        modified: t(modified),
    };
    let dirs = vec![
        dir("live", 10),
        dir("gone", 10),
        dir("removing", 10),
        dir("newer", 150),
        dir("busy", 10),
    ];
    let with_containers: BTreeSet<String> = ["busy".to_string()].into();
    let got = plan_log_dirs(
        &dirs,
        &req(&["live"], &["removing"], true, 100),
        &with_containers,
    );
    assert_eq!(got, vec![PathBuf::from("/l/ns_p_gone")]);
    let got = plan_log_dirs(&dirs, &req(&["live"], &[], false, 100), &with_containers);
    assert!(got.is_empty(), "nothing before the sources reported");
}

#[test]
fn logs_of_collected_instances_go_except_the_highest() {
    assert_eq!(log_base("3.log"), Some((3, "3.log".into())));
    assert_eq!(
        log_base("3.log.20240101-000000.gz"),
        Some((3, "3.log".into()))
    );
    assert_eq!(log_base("3.logx"), None);
    assert_eq!(log_base("x.log"), None);
    let names: Vec<String> = [
        "0.log",
        "1.log",
        "1.log.20240101-000000.gz",
        "2.log",
        "3.log",
        "4.log",
        "notes.txt",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let refs: BTreeSet<String> = ["2.log".to_string()].into();
    let mut got = plan_unreferenced(&names, &refs);
    got.sort();
    assert_eq!(
        got,
        ["0.log", "1.log", "1.log.20240101-000000.gz", "3.log"],
        "the highest (4) stays for restart counts, 2 is a record's"
    );
    assert!(plan_unreferenced(&["5.log".to_string()], &BTreeSet::new()).is_empty());
}

#[test]
fn compressed_rotated_files_are_read_back_in_order() {
    use crate::logs::{read_log, CriLogWriter, LogOptions, ReadOptions, Stream};
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("0.log");
    let opts = LogOptions {
        max_size: 200,
        max_files: 10,
        max_line: 1000,
    };
    let mut w = CriLogWriter::open(&p, opts).expect("open");
    for i in 0..40 {
        w.write(Stream::Stdout, format!("line {i:03}\n").as_bytes(), t(i))
            .expect("write");
    }
    drop(w);
    let rotated = crate::logs::rotation::list_rotated(&p).expect("list");
    assert!(rotated.len() >= 3, "{rotated:?}");
    let plan = plan_rotated(&rotated, 10);
    assert_eq!(plan.compress.len(), rotated.len() - 1);
    for f in &plan.compress {
        let (before, after) = super::logs::compress(f).expect("compress");
        assert!(before > 0 && after > 0);
        assert!(!f.exists());
    }
    let after = crate::logs::rotation::list_rotated(&p).expect("list");
    assert_eq!(after.len(), rotated.len());
    assert_eq!(
        after.iter().filter(|r| r.compressed).count(),
        rotated.len() - 1
    );
    let lines: Vec<String> = read_log(
        &p,
        ReadOptions {
            tail: None,
            include_rotated: true,
        },
    )
    .expect("read")
    .into_iter()
    .map(|l| String::from_utf8(l.content).expect("utf8"))
    .collect();
    let want: Vec<String> = (0..40).map(|i| format!("line {i:03}")).collect();
    assert_eq!(lines, want);
}
