//! Table tests of the eviction decisions and of one manager pass with fakes.

mod relief;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::decisions::*;
use super::manager::*;
use super::ranking::*;
use super::relief::EvictionPolicy;
use super::signals::*;
use super::threshold::*;
use crate::cgroups::allocatable::MemoryThreshold;

const MI: u64 = 1 << 20;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_are_the_kubelets() {
    let t = parse_thresholds(&EvictionMaps::default()).expect("defaults parse");
    let got: Vec<(Signal, MemoryThreshold, bool)> =
        t.iter().map(|t| (t.signal, t.value, t.hard)).collect();
    assert_eq!(
        got,
        vec![
            (Signal::ImageFsAvailable, MemoryThreshold::Basis(1500), true),
            (Signal::ImageFsInodesFree, MemoryThreshold::Basis(500), true),
            (
                Signal::MemoryAvailable,
                MemoryThreshold::Bytes(100 * MI),
                true
            ),
            (Signal::NodeFsAvailable, MemoryThreshold::Basis(1000), true),
            (Signal::NodeFsInodesFree, MemoryThreshold::Basis(500), true),
        ]
    );
    assert_eq!(hard_memory(&t), MemoryThreshold::Bytes(100 * MI));
}

#[test]
fn threshold_config_table() {
    let hard = map(&[("memory.available", "200Mi"), ("pid.available", "5%")]);
    let soft = map(&[("memory.available", "1Gi")]);
    let grace = map(&[("memory.available", "1m30s")]);
    let reclaim = map(&[("memory.available", "50Mi")]);
    let t = parse_thresholds(&EvictionMaps {
        hard: Some(&hard),
        soft: Some(&soft),
        soft_grace_period: Some(&grace),
        minimum_reclaim: Some(&reclaim),
        merge_defaults: false,
    })
    .expect("parses");
    assert_eq!(t.len(), 3, "{t:?}");
    let soft_t = t.iter().find(|t| !t.hard).expect("soft");
    assert_eq!(soft_t.grace_period, Duration::from_secs(90));
    assert_eq!(soft_t.min_reclaim, Some(MemoryThreshold::Bytes(50 * MI)));
    // Merged defaults fill what evictionHard leaves out.
    let t = parse_thresholds(&EvictionMaps {
        hard: Some(&map(&[("memory.available", "1Gi")])),
        merge_defaults: true,
        ..Default::default()
    })
    .expect("parses");
    assert_eq!(t.len(), 5);
    // Zero disables a threshold.
    let t = parse_thresholds(&EvictionMaps {
        hard: Some(&map(&[
            ("memory.available", "0"),
            ("nodefs.available", "0%"),
        ])),
        ..Default::default()
    })
    .expect("parses");
    assert!(t.is_empty());

    let bad: &[(EvictionMaps<'_>, &str)] = &[];
    let _ = bad;
    let cases: Vec<(BTreeMap<String, String>, &str, &str)> = vec![
        (
            map(&[("memory.free", "1Gi")]),
            "evictionHard",
            "evictionHard.memory.free: unsupported eviction signal",
        ),
        (
            map(&[("memory.available", "lots")]),
            "evictionHard",
            "evictionHard.memory.available: invalid quantity",
        ),
        (
            map(&[("nodefs.available", "150%")]),
            "evictionHard",
            "evictionHard.nodefs.available: \"150%\" is not a percentage",
        ),
        (
            map(&[("memory.available", "-1Mi")]),
            "evictionHard",
            "evictionHard.memory.available: quantity \"-1Mi\" is negative",
        ),
        (
            map(&[("memory.available", "1Gi")]),
            "evictionSoft",
            "evictionSoftGracePeriod.memory.available: a grace period must be given",
        ),
        (
            map(&[("memory.available", "1x")]),
            "evictionSoftGracePeriod",
            "evictionSoftGracePeriod.memory.available:",
        ),
        (
            map(&[("memory.available", "1Gi")]),
            "evictionSoftGracePeriodOnly",
            "evictionSoftGracePeriod.memory.available: no evictionSoft threshold",
        ),
        (
            map(&[("memory.available", "-5%")]),
            "evictionMinimumReclaim",
            "evictionMinimumReclaim.memory.available:",
        ),
    ];
    for (m, which, want) in cases {
        let maps = match which {
            "evictionHard" => EvictionMaps {
                hard: Some(&m),
                ..Default::default()
            },
            "evictionSoft" => EvictionMaps {
                soft: Some(&m),
                ..Default::default()
            },
            "evictionSoftGracePeriod" => EvictionMaps {
                soft: Some(&m),
                soft_grace_period: Some(&m),
                ..Default::default()
            },
            "evictionSoftGracePeriodOnly" => EvictionMaps {
                soft_grace_period: Some(&map(&[("memory.available", "1m")])),
                ..Default::default()
            },
            _ => EvictionMaps {
                minimum_reclaim: Some(&m),
                ..Default::default()
            },
        };
        let err = parse_thresholds(&maps).expect_err(want).to_string();
        assert!(err.starts_with(want), "{which} {m:?}: {err}");
    }
}

#[test]
fn binary_si_formatting() {
    for (n, want) in [
        (0, "0"),
        (1000, "1000"),
        (1024, "1Ki"),
        (100 * MI, "100Mi"),
        (1536 * 1024, "1536Ki"),
        (3 << 30, "3Gi"),
    ] {
        assert_eq!(format_binary_si(n), want);
    }
}

fn hard(signal: Signal, v: MemoryThreshold) -> Threshold {
    Threshold {
        signal,
        value: v,
        grace_period: Duration::ZERO,
        min_reclaim: None,
        hard: true,
    }
}

fn obs(pairs: &[(Signal, u64, u64)]) -> Observations {
    pairs
        .iter()
        .map(|(s, a, c)| {
            (
                *s,
                Observation {
                    available: *a,
                    capacity: *c,
                },
            )
        })
        .collect()
}

#[test]
fn thresholds_met_table() {
    let mem = Threshold {
        min_reclaim: Some(MemoryThreshold::Bytes(50 * MI)),
        ..hard(Signal::MemoryAvailable, MemoryThreshold::Bytes(100 * MI))
    };
    let disk = hard(Signal::NodeFsAvailable, MemoryThreshold::Basis(1000));
    let cases: &[(&str, Observations, bool, Vec<Signal>)] = &[
        (
            "above both",
            obs(&[
                (Signal::MemoryAvailable, 200 * MI, 1000 * MI),
                (Signal::NodeFsAvailable, 50, 100),
            ]),
            false,
            vec![],
        ),
        (
            "memory below",
            obs(&[(Signal::MemoryAvailable, 99 * MI, 1000 * MI)]),
            false,
            vec![Signal::MemoryAvailable],
        ),
        (
            "equal is not below",
            obs(&[(Signal::MemoryAvailable, 100 * MI, 1000 * MI)]),
            false,
            vec![],
        ),
        (
            "min reclaim enforced",
            obs(&[(Signal::MemoryAvailable, 120 * MI, 1000 * MI)]),
            true,
            vec![Signal::MemoryAvailable],
        ),
        (
            "past min reclaim",
            obs(&[(Signal::MemoryAvailable, 150 * MI, 1000 * MI)]),
            true,
            vec![],
        ),
        (
            "percentage of capacity",
            obs(&[(Signal::NodeFsAvailable, 9, 100)]),
            false,
            vec![Signal::NodeFsAvailable],
        ),
        ("signal not measured", obs(&[]), false, vec![]),
    ];
    for (name, o, enforce, want) in cases {
        let got: Vec<Signal> = thresholds_met(&[mem, disk], o, *enforce)
            .iter()
            .map(|t| t.signal)
            .collect();
        assert_eq!(&got, want, "{name}");
    }
}

#[test]
fn soft_thresholds_wait_for_their_grace_period_and_conditions_for_the_transition_period() {
    let t0 = Instant::now();
    let soft = Threshold {
        signal: Signal::MemoryAvailable,
        value: MemoryThreshold::Bytes(500 * MI),
        grace_period: Duration::from_secs(60),
        min_reclaim: None,
        hard: false,
    };
    let low = obs(&[(Signal::MemoryAvailable, 400 * MI, 1000 * MI)]);
    let ok = obs(&[(Signal::MemoryAvailable, 900 * MI, 1000 * MI)]);
    let period = Duration::from_secs(300);
    let mut st = EvictionState::default();
    let s = |secs| t0 + Duration::from_secs(secs);
    // (time, observation, conditions, to reclaim)
    let steps: &[(u64, &Observations, bool, bool)] = &[
        (0, &low, true, false), // condition at once, eviction after the grace period
        (30, &low, true, false),
        (60, &low, true, true),
        (70, &ok, true, false), // cleared: the condition stays for the transition period
        (359, &ok, true, false),
        (360, &ok, false, false), // 300 s after it was last observed (t=60)
        (380, &low, true, false), // met again: the grace period starts over
    ];
    for (at, o, cond, reclaim) in steps {
        let e = evaluate(&mut st, s(*at), &[soft], o, period);
        assert_eq!(e.conditions.contains(&Pressure::Memory), *cond, "t={at}");
        assert_eq!(!e.to_reclaim.is_empty(), *reclaim, "t={at}");
    }
}

#[test]
fn memory_is_reclaimed_first_and_hard_before_soft() {
    let mut st = EvictionState::default();
    let soft_mem = Threshold {
        hard: false,
        ..hard(Signal::MemoryAvailable, MemoryThreshold::Bytes(500 * MI))
    };
    let e = evaluate(
        &mut st,
        Instant::now(),
        &[
            hard(Signal::NodeFsAvailable, MemoryThreshold::Basis(1000)),
            soft_mem,
            hard(Signal::MemoryAvailable, MemoryThreshold::Bytes(100 * MI)),
        ],
        &obs(&[
            (Signal::MemoryAvailable, 50 * MI, 1000 * MI),
            (Signal::NodeFsAvailable, 1, 100),
        ]),
        Duration::from_secs(300),
    );
    let order: Vec<(Signal, bool)> = e.to_reclaim.iter().map(|t| (t.signal, t.hard)).collect();
    assert_eq!(
        order,
        vec![
            (Signal::MemoryAvailable, true),
            (Signal::MemoryAvailable, false),
            (Signal::NodeFsAvailable, true)
        ]
    );
    assert_eq!(
        e.conditions,
        BTreeSet::from([Pressure::Memory, Pressure::Disk])
    );
}

#[test]
fn eviction_grace_table() {
    let s = Duration::from_secs;
    for (is_hard, pod, max, want) in [
        (true, s(30), s(10), s(0)),
        (false, s(30), s(10), s(10)),
        (false, s(5), s(10), s(5)),
        (false, s(30), s(0), s(0)),
    ] {
        assert_eq!(eviction_grace(is_hard, pod, max), want);
    }
}

fn pod(name: &str, prio: i32, mem: u64, req: u64) -> PodCandidate {
    PodCandidate {
        uid: format!("uid-{name}"),
        name: format!("default/{name}"),
        priority: prio,
        critical: false,
        guaranteed: false,
        grace: Duration::from_secs(30),
        memory: Some(mem),
        memory_request: req,
        disk: Some(mem),
        disk_request: req,
        inodes: Some(mem / MI),
        pids: Some(mem / MI),
        containers: vec![],
    }
}

#[test]
fn ranking_table() {
    let best_effort = pod("besteffort", 0, 50 * MI, 0);
    let burstable_over = pod("burstable-over", 0, 300 * MI, 100 * MI);
    let guaranteed_under = pod("guaranteed", 0, 400 * MI, 512 * MI);
    let high_prio_over = pod("important", 1000, 900 * MI, 0);
    let critical = PodCandidate {
        critical: true,
        ..pod("etcd", 0, 2000 * MI, 0)
    };
    let all = vec![
        guaranteed_under.clone(),
        critical.clone(),
        high_prio_over.clone(),
        best_effort.clone(),
        burstable_over.clone(),
    ];
    let mut ranked: Vec<&PodCandidate> = all.iter().collect();
    ranked.sort_by(|a, b| compare(Signal::MemoryAvailable, a, b));
    let names: Vec<&str> = ranked.iter().map(|p| p.name.as_str()).collect();
    // Over requests first (lower priority first, then most above requests), then the rest.
    assert_eq!(
        names,
        vec![
            "default/etcd",
            "default/burstable-over",
            "default/besteffort",
            "default/important",
            "default/guaranteed"
        ]
    );
    assert_eq!(
        pick_victim(Signal::MemoryAvailable, &all).map(|p| p.name.as_str()),
        Some("default/burstable-over"),
        "the critical pod is never picked"
    );
    assert_eq!(
        pick_victim(Signal::NodeFsAvailable, &all).map(|p| p.name.as_str()),
        Some("default/burstable-over")
    );
    // PIDs: priority, then most processes.
    assert_eq!(
        pick_victim(Signal::PidAvailable, &all).map(|p| p.name.as_str()),
        Some("default/guaranteed")
    );
    assert_eq!(pick_victim(Signal::MemoryAvailable, &[critical]), None);
    // A Guaranteed pod within its requests is never evicted (over them, it may be).
    let g = PodCandidate {
        guaranteed: true,
        ..guaranteed_under.clone()
    };
    assert_eq!(
        pick_victim(Signal::MemoryAvailable, std::slice::from_ref(&g)),
        None
    );
    assert_eq!(
        pick_victim(Signal::NodeFsAvailable, std::slice::from_ref(&g)),
        None
    );
    let g_over = PodCandidate {
        memory: Some(600 * MI),
        ..g
    };
    assert_eq!(
        pick_victim(Signal::MemoryAvailable, &[g_over]).map(|p| p.name.as_str()),
        Some("default/guaranteed")
    );
}

#[test]
fn inode_ranking_table() {
    // (name, priority, inodes used, ephemeral-storage bytes used, request, guaranteed)
    type Row = (&'static str, i32, Option<u64>, u64, u64, bool);
    let mk = |(name, prio, inodes, disk, req, guaranteed): Row| PodCandidate {
        inodes,
        disk: Some(disk),
        disk_request: req,
        guaranteed,
        ..pod(name, prio, 0, 0)
    };
    // (case, pods, their order, the victim)
    type Case = (
        &'static str,
        Vec<Row>,
        Vec<&'static str>,
        Option<&'static str>,
    );
    let cases: &[Case] = &[
        (
            "more inodes first, whatever the bytes and the byte request",
            vec![
                ("few-files-big", 0, Some(10), 900 * MI, 0, false),
                ("many-small-files", 0, Some(50_000), MI, 100 * MI, false),
                ("some-files", 0, Some(2_000), 10 * MI, 0, false),
            ],
            vec!["many-small-files", "some-files", "few-files-big"],
            Some("many-small-files"),
        ),
        (
            "any inode use is above the (zero) inode request: priority decides before the count",
            vec![
                ("important", 1000, Some(90_000), 0, 0, false),
                ("plain", 0, Some(5), 0, 0, false),
            ],
            vec!["plain", "important"],
            Some("plain"),
        ),
        (
            "no inodes used (or unknown) ranks last, and a Guaranteed pod using none is kept",
            vec![
                ("unmeasured", 0, None, 0, 0, false),
                ("guaranteed-idle", 0, Some(0), 0, 0, true),
                ("guaranteed-busy", 0, Some(300), 0, 0, true),
                ("low", -10, Some(1), 0, 0, false),
            ],
            vec!["low", "guaranteed-busy", "guaranteed-idle", "unmeasured"],
            Some("low"),
        ),
        (
            "only protected pods",
            vec![("guaranteed-idle", 0, Some(0), 0, 0, true)],
            vec!["guaranteed-idle"],
            None,
        ),
    ];
    for signal in [Signal::NodeFsInodesFree, Signal::ImageFsInodesFree] {
        for (name, rows, order, victim) in cases {
            let pods: Vec<PodCandidate> = rows.iter().copied().map(mk).collect();
            let mut ranked: Vec<&PodCandidate> = pods.iter().collect();
            ranked.sort_by(|a, b| compare(signal, a, b).then_with(|| a.name.cmp(&b.name)));
            let got: Vec<&str> = ranked
                .iter()
                .map(|p| p.name.trim_start_matches("default/"))
                .collect();
            assert_eq!(&got, order, "{signal}: {name}");
            assert_eq!(
                pick_victim(signal, &pods).map(|p| p.name.trim_start_matches("default/")),
                *victim,
                "{signal}: {name}"
            );
        }
    }
    // The same pods under nodefs.available rank by bytes above the ephemeral-storage request.
    let pods: Vec<PodCandidate> = cases[0].1.iter().copied().map(mk).collect();
    assert_eq!(
        pick_victim(Signal::NodeFsAvailable, &pods).map(|p| p.name.as_str()),
        Some("default/few-files-big")
    );
}

#[test]
fn the_kubelets_message() {
    let mut p = pod("web", 0, 300 * MI, 100 * MI);
    p.containers = vec![
        ContainerUsage {
            name: "hog".into(),
            memory: 250 * MI,
            memory_request: "100Mi".into(),
            memory_request_bytes: 100 * MI,
            disk: 0,
            disk_request: "0".into(),
            disk_request_bytes: 0,
        },
        ContainerUsage {
            name: "sidecar".into(),
            memory: 10 * MI,
            memory_request: "64Mi".into(),
            memory_request_bytes: 64 * MI,
            disk: 0,
            disk_request: "0".into(),
            disk_request_bytes: 0,
        },
    ];
    assert_eq!(
        eviction_message(Signal::MemoryAvailable, 100 * MI, 51200 * 1024 + 4096, &p),
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51204Ki. \
         Container hog was using 250Mi, request is 100Mi, has larger consumption of memory. "
    );
    assert_eq!(
        eviction_message(Signal::NodeFsInodesFree, 500, 12, &p),
        "The node was low on resource: inodes. Threshold quantity: 500, available: 12. "
    );
}

#[test]
fn signals_from_kernel_files() {
    let meminfo =
        "MemTotal:        1000000 kB\nMemFree:          200000 kB\nMemAvailable:     600000 kB\n";
    // v2: usage = total - free = 800000 kB, working set = usage - inactive_file.
    let o = memory_available(meminfo, "anon 1\ninactive_file 102400000\n", None).expect("v2");
    assert_eq!(o.capacity, 1_024_000_000);
    assert_eq!(o.available, 1_024_000_000 - (819_200_000 - 102_400_000));
    // v1: the root cgroup's usage and total_inactive_file.
    let o = memory_available(meminfo, "total_inactive_file 1000\n", Some(5000)).expect("v1");
    assert_eq!(o.available, 1_024_000_000 - 4000);
    let o = pid_available("4194304\n", "63000\n", "0.10 0.20 0.30 2/345 6789\n").expect("pids");
    assert_eq!((o.available, o.capacity), (63000 - 345, 63000));
    assert!(pid_available("x", "", "").is_none());
}

struct FakeSignals(std::sync::Mutex<Vec<Observations>>);

impl SignalSource for FakeSignals {
    fn observe(&self) -> Observations {
        let mut v = self.0.lock().expect("not poisoned");
        if v.len() > 1 {
            v.remove(0)
        } else {
            v[0].clone()
        }
    }
}

struct FakePods(Vec<PodCandidate>);

impl PodSource for FakePods {
    fn candidates(&self, _: Signal) -> Vec<PodCandidate> {
        self.0.clone()
    }
}

#[derive(Default)]
struct FakeReclaim(Vec<&'static str>);

impl NodeReclaimer for FakeReclaim {
    fn reclaim_containers(&mut self, _: &dyn Fn(EvictionEvent)) -> u64 {
        self.0.push("containers");
        1
    }
    fn reclaim_images(&mut self) -> u64 {
        self.0.push("images");
        1
    }
}

fn disk_cfg() -> EvictionConfig {
    EvictionConfig {
        thresholds: vec![
            hard(Signal::NodeFsAvailable, MemoryThreshold::Basis(1000)),
            hard(Signal::MemoryAvailable, MemoryThreshold::Bytes(100 * MI)),
        ],
        max_pod_grace_period: Duration::ZERO,
        pressure_transition_period: Duration::from_secs(300),
        policy: EvictionPolicy::Helpful,
    }
}

#[test]
fn one_pass_reclaims_first_then_evicts_one_pod() {
    let low = |a| {
        obs(&[
            (Signal::NodeFsAvailable, a, 100),
            (Signal::MemoryAvailable, 900 * MI, 1000 * MI),
        ])
    };
    let pods = FakePods(vec![pod("a", 0, 10, 0), pod("b", 0, 20, 0)]);
    // (observations in order, reclaim steps, evicted)
    type Case<'a> = (&'a str, Vec<Observations>, Vec<&'a str>, Option<&'a str>);
    let cases: Vec<Case<'_>> = vec![
        ("no pressure", vec![low(50)], vec![], None),
        (
            "container GC is enough",
            vec![low(5), low(20)],
            vec!["containers"],
            None,
        ),
        (
            "images too",
            vec![low(5), low(6), low(20)],
            vec!["containers", "images"],
            None,
        ),
        (
            "still short: one pod",
            vec![low(5), low(6), low(7)],
            vec!["containers", "images"],
            Some("default/b"),
        ),
    ];
    for (name, o, steps, victim) in cases {
        let mut m = Manager::new(disk_cfg());
        let mut r = FakeReclaim::default();
        let sent = RefCell::new(Vec::new());
        let report = m.synchronize(
            Instant::now(),
            &FakeSignals(std::sync::Mutex::new(o)),
            &pods,
            &mut r,
            &|e| sent.borrow_mut().push(format!("{e:?}")),
        );
        assert_eq!(r.0, steps, "{name}");
        assert_eq!(
            report.evicted.as_ref().map(|e| e.name.as_str()),
            victim,
            "{name}"
        );
        if let Some(e) = &report.evicted {
            assert_eq!(e.grace, Duration::ZERO, "hard: no grace");
            assert!(e.message.starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: 10, available: 7. "), "{}", e.message);
        }
        let sent = sent.into_inner();
        assert_eq!(
            sent.iter().any(|e| e.starts_with("Conditions")),
            name != "no pressure",
            "{name}: {sent:?}"
        );
    }
}

#[test]
fn memory_is_not_reclaimed_at_node_level_and_an_evicted_pod_is_not_picked_twice() {
    let mut m = Manager::new(disk_cfg());
    let mut r = FakeReclaim::default();
    let low = obs(&[
        (Signal::MemoryAvailable, 50 * MI, 1000 * MI),
        (Signal::NodeFsAvailable, 50, 100),
    ]);
    // 50Mi short: neither pod alone gives enough back, both together do.
    let pods = FakePods(vec![pod("a", 0, 30 * MI, 0), pod("b", 0, 40 * MI, 0)]);
    let signals = FakeSignals(std::sync::Mutex::new(vec![low]));
    let t0 = Instant::now();
    let first = m.synchronize(t0, &signals, &pods, &mut r, &|_| {});
    assert!(r.0.is_empty());
    assert_eq!(first.evicted.expect("evicts").name, "default/b");
    let second = m.synchronize(t0 + HOUSEKEEPING_INTERVAL, &signals, &pods, &mut r, &|_| {});
    assert_eq!(second.evicted.expect("evicts").name, "default/a");
    let third = m.synchronize(
        t0 + 2 * HOUSEKEEPING_INTERVAL,
        &signals,
        &pods,
        &mut r,
        &|_| {},
    );
    assert!(third.evicted.is_none(), "both are being stopped");
    assert_eq!(m.conditions(), &BTreeSet::from([Pressure::Memory]));
}

struct FakeStorage(Vec<crate::eviction::ephemeral::PodStorage>);

impl PodSource for FakeStorage {
    fn candidates(&self, _: Signal) -> Vec<PodCandidate> {
        vec![pod("x", 0, 60 * MI, 0)]
    }
    fn local_storage(&self) -> Vec<crate::eviction::ephemeral::PodStorage> {
        self.0.clone()
    }
}

#[test]
fn local_storage_limits_evict_every_pod_over_one_before_any_threshold() {
    use crate::eviction::ephemeral::{ContainerStorage, Limit, PodStorage};
    let storage = |name: &str, used: u64, critical: bool| PodStorage {
        uid: format!("uid-{name}"),
        name: format!("default/{name}"),
        critical,
        pod_limit: Some(Limit {
            bytes: 10 * MI,
            text: "10Mi".into(),
        }),
        containers: vec![ContainerStorage {
            name: "main".into(),
            limit: Some(Limit {
                bytes: 10 * MI,
                text: "10Mi".into(),
            }),
            used,
        }],
        volumes: vec![],
    };
    let pods = FakeStorage(vec![
        storage("over", 11 * MI, false),
        storage("within", 9 * MI, false),
        storage("crit", 50 * MI, true),
        storage("over2", 12 * MI, false),
    ]);
    // Memory short too: the limits go first and the pass stops there.
    let low = obs(&[(Signal::MemoryAvailable, 50 * MI, 1000 * MI)]);
    let signals = FakeSignals(std::sync::Mutex::new(vec![low]));
    let mut m = Manager::new(disk_cfg());
    let mut r = FakeReclaim::default();
    let sent = RefCell::new(Vec::new());
    let t0 = Instant::now();
    let first = m.synchronize(t0, &signals, &pods, &mut r, &|e| sent.borrow_mut().push(e));
    let names: Vec<&str> = first
        .limit_evicted
        .iter()
        .map(|e| e.name.as_str())
        .collect();
    assert_eq!(names, ["default/over", "default/over2"]);
    assert_eq!(
        first.limit_evicted[0].message,
        "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. "
    );
    assert!(first.evicted.is_none() && first.threshold.is_none());
    let evictions = sent
        .borrow()
        .iter()
        .filter(|e| matches!(e, EvictionEvent::EvictForLimit(_)))
        .count();
    assert_eq!(evictions, 2);
    // Being stopped: not evicted again; now the memory threshold is acted on.
    let second = m.synchronize(t0 + HOUSEKEEPING_INTERVAL, &signals, &pods, &mut r, &|_| {});
    assert!(second.limit_evicted.is_empty());
    assert_eq!(second.evicted.expect("memory").name, "default/x");
}
