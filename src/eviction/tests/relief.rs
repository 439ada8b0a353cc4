//! Table tests of "evict only what can help" (`relief`): the decision for one pass, and
//! passes of the manager against a fake node whose space comes back as pods are evicted.

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cgroups::allocatable::MemoryThreshold;
use crate::eviction::decisions::{Observation, Observations};
use crate::eviction::manager::*;
use crate::eviction::ranking::PodCandidate;
use crate::eviction::relief::*;
use crate::eviction::signals::SignalSource;
use crate::eviction::threshold::*;

const KI: u64 = 1 << 10;
const MI: u64 = 1 << 20;

/// A Burstable pod using `disk` bytes of ephemeral storage, `mem` bytes of memory and `pids`
/// processes, with no requests.
fn pod(name: &str, prio: i32, disk: u64, mem: u64, pids: u64) -> PodCandidate {
    PodCandidate {
        uid: format!("uid-{name}"),
        name: format!("default/{name}"),
        priority: prio,
        critical: false,
        guaranteed: false,
        grace: Duration::from_secs(30),
        memory: Some(mem),
        memory_request: 0,
        disk: Some(disk),
        disk_request: 0,
        inodes: Some(disk / KI),
        pids: Some(pids),
        containers: vec![],
    }
}

fn critical(p: PodCandidate) -> PodCandidate {
    PodCandidate {
        critical: true,
        ..p
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

/// What a decision comes to: the victim's name, or the reason with the protected pods.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    Evict(&'static str),
    Not(NotEvictingReason, Vec<&'static str>),
}

/// The decision in [`Want`]'s terms, its names owned.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Evict(String),
    Not(NotEvictingReason, Vec<String>),
}

impl From<Want> for Got {
    fn from(w: Want) -> Got {
        match w {
            Want::Evict(n) => Got::Evict(n.into()),
            Want::Not(r, p) => Got::Not(r, p.into_iter().map(String::from).collect()),
        }
    }
}

#[test]
fn decide_table() {
    let nodefs = Signal::NodeFsAvailable;
    // (case, policy, signal, shortfall, stopping, pods, outcome)
    type Case = (
        &'static str,
        EvictionPolicy,
        Signal,
        u64,
        (usize, u64),
        Vec<PodCandidate>,
        Want,
    );
    let small = || {
        vec![
            pod("a", 0, 4 * KI, 10 * MI, 2),
            pod("b", 0, 4 * KI, 10 * MI, 2),
            pod("c", 0, 4 * KI, 10 * MI, 2),
        ]
    };
    let h = EvictionPolicy::Helpful;
    let cases: Vec<Case> = vec![
        (
            "a filler outside the pods: 4Ki each against 5Mi short evicts nothing",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            small(),
            Want::Not(
                NotEvictingReason::TooLittle {
                    pods: 3,
                    usage: 12 * KI,
                },
                vec![],
            ),
        ),
        (
            "no pod uses any disk",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            vec![pod("a", 0, 0, MI, 1), pod("b", 0, 0, MI, 1)],
            Want::Not(NotEvictingReason::NoPodUses, vec![]),
        ),
        (
            "a pod whose own logs or emptyDir cover the shortfall is evicted, the others stay",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            vec![
                pod("a", 0, 4 * KI, 0, 1),
                pod("hog", 0, 6 * MI, 0, 1),
                pod("c", 0, 4 * KI, 0, 1),
            ],
            Want::Evict("hog"),
        ),
        (
            "small pods that together cover it: the kubelet's first (lowest priority)",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            vec![
                pod("a", 10, 2 * MI, 0, 1),
                pod("b", -5, 2 * MI, 0, 1),
                pod("c", 0, 2 * MI, 0, 1),
            ],
            Want::Evict("b"),
        ),
        (
            "none covers it alone: among the fewest that do together, not the tiny first one",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            vec![
                pod("tiny", -1, 4 * KI, 0, 1),
                pod("y", 0, 3 * MI, 0, 1),
                pod("x", 0, 3 * MI, 0, 1),
            ],
            Want::Evict("x"),
        ),
        (
            "several cover it alone: the kubelet's first of them, not the biggest",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            vec![pod("big", 0, 40 * MI, 0, 1), pod("low", -5, 6 * MI, 0, 1)],
            Want::Evict("low"),
        ),
        (
            "a zero-usage pod is never a candidate, even when first in the kubelet's order",
            h,
            nodefs,
            MI,
            (0, 0),
            vec![pod("idle", -100, 0, 0, 1), pod("user", 0, 2 * MI, 0, 1)],
            Want::Evict("user"),
        ),
        (
            "a critical pod using the space is never evicted, nor counted, and is named",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            vec![
                critical(pod("etcd", 0, 50 * MI, 0, 1)),
                pod("a", 0, MI, 0, 1),
            ],
            Want::Not(
                NotEvictingReason::TooLittle { pods: 1, usage: MI },
                vec!["default/etcd"],
            ),
        ),
        (
            "only a critical pod uses it",
            h,
            nodefs,
            5 * MI,
            (0, 0),
            vec![
                critical(pod("etcd", 0, 50 * MI, 0, 1)),
                pod("a", 0, 0, 0, 1),
            ],
            Want::Not(NotEvictingReason::NoPodUses, vec!["default/etcd"]),
        ),
        (
            "--eviction-policy never: the hog stays too",
            EvictionPolicy::Never,
            nodefs,
            5 * MI,
            (0, 0),
            vec![pod("hog", 0, 60 * MI, 0, 1)],
            Want::Not(NotEvictingReason::Policy, vec![]),
        ),
        (
            "a pod being stopped gives back enough: nobody else",
            h,
            nodefs,
            5 * MI,
            (1, 6 * MI),
            vec![pod("a", 0, 10 * MI, 0, 1)],
            Want::Not(
                NotEvictingReason::Stopping {
                    pods: 1,
                    freeing: 6 * MI,
                },
                vec![],
            ),
        ),
        (
            "a pod being stopped gives back part: the rest from a pod that covers it",
            h,
            nodefs,
            5 * MI,
            (1, 3 * MI),
            vec![pod("a", 0, 2 * MI, 0, 1), pod("b", 0, 4 * KI, 0, 1)],
            Want::Evict("a"),
        ),
        (
            "memory: the working set counts",
            h,
            Signal::MemoryAvailable,
            50 * MI,
            (0, 0),
            vec![pod("a", 0, 0, 30 * MI, 1), pod("b", 0, 0, 60 * MI, 1)],
            Want::Evict("b"),
        ),
        (
            "memory: small working sets cannot relieve",
            h,
            Signal::MemoryAvailable,
            500 * MI,
            (0, 0),
            vec![pod("a", 0, 90 * MI, 30 * MI, 1), pod("b", 0, 0, 60 * MI, 1)],
            Want::Not(
                NotEvictingReason::TooLittle {
                    pods: 2,
                    usage: 90 * MI,
                },
                vec![],
            ),
        ),
        (
            "pids: the pod's processes count",
            h,
            Signal::PidAvailable,
            100,
            (0, 0),
            vec![pod("a", 0, 0, 0, 5), pod("forkbomb", 0, 0, 0, 500)],
            Want::Evict("forkbomb"),
        ),
        (
            "pids: a few processes cannot relieve",
            h,
            Signal::PidAvailable,
            1000,
            (0, 0),
            vec![pod("a", 0, 0, 0, 5), pod("b", 0, 0, 0, 6)],
            Want::Not(NotEvictingReason::TooLittle { pods: 2, usage: 11 }, vec![]),
        ),
        (
            "a Guaranteed pod within its requests is kept and not counted",
            h,
            nodefs,
            3 * MI,
            (0, 0),
            vec![
                PodCandidate {
                    guaranteed: true,
                    disk_request: 10 * MI,
                    ..pod("g", 0, 5 * MI, 0, 1)
                },
                pod("a", 0, MI, 0, 1),
            ],
            Want::Not(
                NotEvictingReason::TooLittle { pods: 1, usage: MI },
                vec!["default/g"],
            ),
        ),
    ];
    for (name, policy, signal, short, stopping, pods, want) in cases {
        let got = match decide(policy, signal, short, stopping, &pods) {
            Decision::Evict(p) => Got::Evict(p.name.trim_start_matches("default/").into()),
            Decision::NotEvicting(n) => {
                assert_eq!((n.signal, n.shortfall), (signal, short), "{name}");
                Got::Not(n.reason, n.protected.into_iter().map(|(p, _)| p).collect())
            }
        };
        assert_eq!(got, Got::from(want), "{name}");
    }
}

#[test]
fn shortfall_pending_relief_and_usage() {
    let t = hard(Signal::NodeFsAvailable, MemoryThreshold::Basis(1000));
    let o = |available| Observation {
        available,
        capacity: 100 * MI,
    };
    assert_eq!(shortfall(&t, o(5 * MI)), 5 * MI);
    assert_eq!(shortfall(&t, o(20 * MI)), 0);
    let with_reclaim = Threshold {
        min_reclaim: Some(MemoryThreshold::Bytes(2 * MI)),
        ..t
    };
    assert_eq!(shortfall(&with_reclaim, o(5 * MI)), 7 * MI);
    // (pods stopping: usage, available at their eviction; available now; want)
    type Case = (&'static [(u64, u64)], u64, (usize, u64));
    let cases: &[Case] = &[
        (&[], 5, (0, 0)),
        (&[(3, 5)], 5, (1, 3)),
        (&[(3, 5)], 7, (1, 1)),
        (&[(3, 5)], 9, (1, 0)),
        (&[(3, 5), (2, 8)], 9, (2, 1)),
    ];
    for (stopping, available, want) in cases {
        assert_eq!(
            pending_relief(stopping, *available),
            *want,
            "{stopping:?} {available}"
        );
    }
    let p = pod("p", 0, 7, 8, 9);
    assert_eq!(usage(Signal::NodeFsAvailable, &p), 7);
    assert_eq!(usage(Signal::ImageFsAvailable, &p), 7);
    assert_eq!(usage(Signal::MemoryAvailable, &p), 8);
    assert_eq!(usage(Signal::PidAvailable, &p), 9);
    assert_eq!(usage(Signal::NodeFsInodesFree, &p), 0);
    let unmeasured = PodCandidate { disk: None, ..p };
    assert_eq!(usage(Signal::NodeFsAvailable, &unmeasured), 0);
}

#[test]
fn policy_names_and_messages() {
    assert_eq!("helpful".parse(), Ok(EvictionPolicy::Helpful));
    assert_eq!("never".parse(), Ok(EvictionPolicy::Never));
    assert_eq!(EvictionPolicy::default(), EvictionPolicy::Helpful);
    let err = "Never".parse::<EvictionPolicy>().expect_err("case matters");
    assert_eq!(
        err.to_string(),
        "unknown eviction policy \"Never\", expected helpful or never"
    );
    let n = NotEvicting {
        signal: Signal::NodeFsAvailable,
        shortfall: 5 * MI + 100 * KI,
        reason: NotEvictingReason::TooLittle {
            pods: 3,
            usage: 12 * KI,
        },
        protected: vec![("kube-system/etcd-n1".into(), 3 * MI)],
        users: None,
    };
    assert_eq!(
        n.message(),
        "not evicting for nodefs.available: 5.1Mi short, and the 3 pod(s) that may be evicted \
         use 12Ki of ephemeral-storage together: evicting them all would not relieve it; never \
         evicted: kube-system/etcd-n1 (3Mi)"
    );
    let n = NotEvicting {
        signal: Signal::PidAvailable,
        shortfall: 40,
        reason: NotEvictingReason::NoPodUses,
        protected: vec![],
        users: None,
    };
    assert_eq!(
        n.message(),
        "not evicting for pid.available: 40 short, and no pod that may be evicted uses any pids: \
         evicting would free nothing"
    );
    let users = |partial| crate::eviction::topdirs::TopDirs {
        entries: vec![
            ("/var/log/journal".into(), 3 * MI, 12),
            ("/srv/filler".into(), 5 * MI + 512 * KI, 1),
        ],
        partial,
    };
    let n = NotEvicting {
        signal: Signal::NodeFsAvailable,
        shortfall: 5 * MI,
        reason: NotEvictingReason::NoPodUses,
        protected: vec![],
        users: Some(users(false)),
    };
    assert!(
        n.message().ends_with(
            "evicting would free nothing; what uses it: /var/log/journal (3Mi), /srv/filler (5.5Mi)"
        ),
        "{}",
        n.message()
    );
    let n = NotEvicting {
        signal: Signal::NodeFsInodesFree,
        users: Some(users(true)),
        ..n
    };
    assert!(
        n.message().ends_with(
            "what uses it: /var/log/journal (12), /srv/filler (1) (at least: the walk was cut short)"
        ),
        "{}",
        n.message()
    );
    for (n, want) in [
        (0, "0B"),
        (1023, "1023B"),
        (1024, "1Ki"),
        (1536, "1.5Ki"),
        (2 * MI + 60 * KI, "2.1Mi"),
        (2 * MI + 52 * KI, "2.1Mi"),
        (2 * MI + 50 * KI, "2Mi"),
        (2 * MI - 50 * KI, "2Mi"),
        (150 * MI + 900 * KI, "151Mi"),
    ] {
        assert_eq!(amount(Signal::MemoryAvailable, n), want);
    }
    assert_eq!(amount(Signal::NodeFsAvailable, 3 << 30), "3Gi");
    assert_eq!(amount(Signal::NodeFsInodesFree, 1536), "1536");
}

/// A node with a 100Mi disk: `available` grows by what each evicted pod used.
struct World {
    available: u64,
    pods: Vec<PodCandidate>,
    evicted: Vec<String>,
    /// How often the manager asked what uses the filesystem.
    walks: u32,
}

#[derive(Clone)]
struct FakeNode(Arc<Mutex<World>>);

impl FakeNode {
    fn new(available: u64, pods: Vec<PodCandidate>) -> FakeNode {
        FakeNode(Arc::new(Mutex::new(World {
            available,
            pods,
            evicted: vec![],
            walks: 0,
        })))
    }

    fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.0.lock().expect("not poisoned")
    }

    /// The sync loop's side: an evicted pod stops and gives its space back at once.
    fn deliver(&self, e: &EvictionEvent) {
        if let EvictionEvent::Evict(p) = e {
            let mut w = self.world();
            let freed = w
                .pods
                .iter()
                .find(|c| c.uid == p.uid)
                .and_then(|c| c.disk)
                .unwrap_or(0);
            w.available += freed;
            w.pods.retain(|c| c.uid != p.uid);
            w.evicted.push(p.name.trim_start_matches("default/").into());
        }
    }
}

impl SignalSource for FakeNode {
    fn top_dirs(&self, _: Signal) -> Option<crate::eviction::topdirs::TopDirs> {
        self.world().walks += 1;
        Some(crate::eviction::topdirs::TopDirs {
            entries: vec![("/filler".into(), 90 * MI, 1)],
            partial: false,
        })
    }

    fn observe(&self) -> Observations {
        let a = self.world().available;
        [(
            Signal::NodeFsAvailable,
            Observation {
                available: a,
                capacity: 100 * MI,
            },
        )]
        .into_iter()
        .collect()
    }
}

impl PodSource for FakeNode {
    fn candidates(&self, _: Signal) -> Vec<PodCandidate> {
        self.world().pods.clone()
    }
}

struct CountReclaim(Vec<&'static str>);

impl NodeReclaimer for CountReclaim {
    fn reclaim_containers(&mut self, _: &dyn Fn(EvictionEvent)) -> u64 {
        self.0.push("containers");
        0
    }
    fn reclaim_images(&mut self) -> u64 {
        self.0.push("images");
        0
    }
}

fn cfg(policy: EvictionPolicy) -> EvictionConfig {
    EvictionConfig {
        thresholds: vec![hard(Signal::NodeFsAvailable, MemoryThreshold::Basis(1000))],
        max_pod_grace_period: Duration::ZERO,
        pressure_transition_period: Duration::from_secs(300),
        policy,
    }
}

/// Runs `passes` housekeeping passes; returns the pods evicted, the messages of the
/// `NotEvicting` events sent, and the reclaim steps run.
fn run(
    policy: EvictionPolicy,
    node: &FakeNode,
    passes: u32,
) -> (Vec<String>, Vec<String>, Vec<&'static str>) {
    let mut m = Manager::new(cfg(policy));
    let mut r = CountReclaim(vec![]);
    let said = RefCell::new(Vec::new());
    let t0 = Instant::now();
    for i in 0..passes {
        let report = m.synchronize(t0 + HOUSEKEEPING_INTERVAL * i, node, node, &mut r, &|e| {
            node.deliver(&e);
            if let EvictionEvent::NotEvicting { message } = e {
                said.borrow_mut().push(message);
            }
        });
        // A pass either evicts one pod, says why not, or has nothing to do.
        let acted = report.threshold.is_some() && !report.reclaim_sufficed;
        assert_eq!(
            acted,
            report.evicted.is_some() || report.not_evicting.is_some(),
            "pass {i}: {report:?}"
        );
        assert!(!(report.evicted.is_some() && report.not_evicting.is_some()));
    }
    let evicted = node.world().evicted.clone();
    (evicted, said.into_inner(), r.0)
}

#[test]
fn passes_against_a_node_whose_space_comes_back() {
    // (case, policy, available of 100Mi (threshold 10Mi), pods, passes, evicted in order,
    // NotEvicting events sent)
    type Case = (
        &'static str,
        EvictionPolicy,
        u64,
        Vec<PodCandidate>,
        u32,
        Vec<&'static str>,
        usize,
    );
    let h = EvictionPolicy::Helpful;
    let cases: Vec<Case> = vec![
        (
            "a filler outside the pods: reclaim every pass, no pod evicted, said once",
            h,
            5 * MI,
            vec![
                pod("a", 0, 4 * KI, 0, 1),
                pod("b", 0, 4 * KI, 0, 1),
                critical(pod("etcd", 0, 8 * KI, 0, 1)),
            ],
            12,
            vec![],
            1,
        ),
        (
            "the pod filling its emptyDir is the one evicted; the others stay",
            h,
            5 * MI,
            vec![
                pod("a", -10, 4 * KI, 0, 1),
                pod("hog", 0, 20 * MI, 0, 1),
                pod("b", 0, 4 * KI, 0, 1),
            ],
            6,
            vec!["hog"],
            0,
        ),
        (
            "small pods that together relieve: one per pass in the kubelet's order, until \
             relieved",
            h,
            5 * MI,
            vec![
                pod("a", 10, 2 * MI, 0, 1),
                pod("b", -5, 2 * MI, 0, 1),
                pod("c", 0, 2 * MI, 0, 1),
                pod("tiny", 0, 4 * KI, 0, 1),
            ],
            8,
            vec!["b", "c", "a"],
            0,
        ),
        (
            "critical pods are never evicted, whatever they use",
            h,
            5 * MI,
            vec![
                critical(pod("etcd", -100, 50 * MI, 0, 1)),
                pod("a", 0, 6 * MI, 0, 1),
            ],
            6,
            vec!["a"],
            0,
        ),
        (
            "--eviction-policy never: reclaim only, the hog stays",
            EvictionPolicy::Never,
            5 * MI,
            vec![pod("hog", 0, 20 * MI, 0, 1)],
            6,
            vec![],
            1,
        ),
    ];
    for (name, policy, available, pods, passes, want, events) in cases {
        let node = FakeNode::new(available, pods);
        let (evicted, said, reclaimed) = run(policy, &node, passes);
        assert_eq!(evicted, want, "{name}");
        assert_eq!(said.len(), events, "{name}: {said:?}");
        if want.is_empty() {
            assert_eq!(
                reclaimed.len() as u32,
                2 * passes,
                "{name}: node-level reclaim runs at every pass: {reclaimed:?}"
            );
        }
        if policy == EvictionPolicy::Never {
            assert!(said[0].contains("--eviction-policy never"), "{}", said[0]);
        }
    }
}

#[test]
fn the_reason_is_said_again_after_the_repeat_period_and_at_once_when_it_changes() {
    let node = FakeNode::new(5 * MI, vec![pod("a", 0, 4 * KI, 0, 1)]);
    let mut m = Manager::new(cfg(EvictionPolicy::Helpful));
    let mut r = CountReclaim(vec![]);
    let said = RefCell::new(Vec::new());
    let t0 = Instant::now();
    let mut pass = |at: Duration| {
        m.synchronize(t0 + at, &node, &node, &mut r, &|e| {
            if let EvictionEvent::NotEvicting { message } = e {
                said.borrow_mut().push(message);
            }
        })
    };
    let first = pass(Duration::ZERO);
    assert!(first.not_evicting.is_some());
    pass(Duration::from_secs(10));
    let last = pass(NOT_EVICTING_REPEAT - Duration::from_secs(1));
    assert_eq!(said.borrow().len(), 1, "rate-limited");
    assert_eq!(
        node.world().walks,
        1,
        "the filesystem is walked when the reason is said"
    );
    let shown = last.not_evicting.expect("not evicting").message();
    assert!(shown.ends_with("; what uses it: /filler (90Mi)"), "{shown}");
    assert_eq!(said.borrow()[0], shown);
    pass(NOT_EVICTING_REPEAT);
    assert_eq!(said.borrow().len(), 2, "repeated after the period");
    assert_eq!(node.world().walks, 2);
    // The pod's usage goes: a new reason, said at once.
    node.world().pods[0].disk = Some(0);
    pass(NOT_EVICTING_REPEAT + Duration::from_secs(10));
    assert_eq!(said.borrow().len(), 3, "{:?}", said.borrow());
    assert!(
        said.borrow()[2].contains("no pod that may be evicted uses any"),
        "{:?}",
        said.borrow()
    );
    // Space comes back: nothing to say.
    node.world().available = 50 * MI;
    let r = pass(NOT_EVICTING_REPEAT + Duration::from_secs(20));
    assert!(r.threshold.is_none() && r.not_evicting.is_none());
}

struct OverLimit;

impl PodSource for OverLimit {
    fn candidates(&self, _: Signal) -> Vec<PodCandidate> {
        vec![]
    }
    fn local_storage(&self) -> Vec<crate::eviction::ephemeral::PodStorage> {
        use crate::eviction::ephemeral::{ContainerStorage, Limit, PodStorage};
        vec![PodStorage {
            uid: "uid-over".into(),
            name: "default/over".into(),
            critical: false,
            pod_limit: Some(Limit {
                bytes: MI,
                text: "1Mi".into(),
            }),
            containers: vec![ContainerStorage {
                name: "main".into(),
                limit: Some(Limit {
                    bytes: MI,
                    text: "1Mi".into(),
                }),
                used: 2 * MI,
            }],
            volumes: vec![],
        }]
    }
}

#[test]
fn a_pod_over_its_storage_limit_is_evicted_unless_the_policy_is_never() {
    let node = FakeNode::new(50 * MI, vec![]);
    for (policy, want) in [
        (EvictionPolicy::Helpful, vec!["default/over"]),
        (EvictionPolicy::Never, vec![]),
    ] {
        let mut m = Manager::new(cfg(policy));
        let report = m.synchronize(
            Instant::now(),
            &node,
            &OverLimit,
            &mut CountReclaim(vec![]),
            &|_| {},
        );
        let got: Vec<&str> = report
            .limit_evicted
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        assert_eq!(got, want, "{policy}");
    }
}
