//! eviction::relief: whether evicting a pod can relieve the pressure (podvisor's rule; the
//! kubelet never evicts a static pod at all).
//!
//! For the signal acted on, a pod is a candidate only when its own usage of the starved
//! resource could give some of it back: memory, its working set; pids, its processes; disk
//! space, its writable layers, logs and emptyDir volumes on disk; inodes, theirs. A pod using
//! none is never a candidate. When the candidates together cannot bring the signal back to
//! its threshold (plus its minimum reclaim, the manager's goal), nothing is evicted and
//! [`NotEvicting`] says why: a file no pod wrote filling the disk costs no pod. Among the
//! candidates the kubelet's order ([`super::ranking`]) stays, one pod per pass: the first of
//! those that relieve it alone, or, when none does, the first of the fewest that do together
//! (a pod using next to nothing is not evicted on the way). With
//! `--eviction-policy never`, the kubelet's own rule instead: no pod is evicted, node-level
//! reclaim only.

use std::fmt;
use std::str::FromStr;

use super::decisions::Observation;
use super::ranking::{evictable, rank, PodCandidate};
use super::threshold::{resolve, Signal, Threshold};

/// Which pods the eviction manager may evict (`--eviction-policy`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Only pods whose own usage can relieve the pressure, in the kubelet's order.
    #[default]
    Helpful,
    /// None: the kubelet's rule for static pods (every static pod is critical); node-level
    /// reclaim only.
    Never,
}

impl EvictionPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            EvictionPolicy::Helpful => "helpful",
            EvictionPolicy::Never => "never",
        }
    }
}

impl fmt::Display for EvictionPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--eviction-policy` value that is neither `helpful` nor `never`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown eviction policy {value:?}, expected helpful or never")]
pub struct UnknownPolicy {
    pub value: String,
}

impl FromStr for EvictionPolicy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "helpful" => Ok(EvictionPolicy::Helpful),
            "never" => Ok(EvictionPolicy::Never),
            _ => Err(UnknownPolicy { value: s.into() }),
        }
    }
}

/// What `p` uses of the resource `signal` measures: what its eviction could give back.
pub fn usage(signal: Signal, p: &PodCandidate) -> u64 {
    match signal {
        Signal::MemoryAvailable => p.memory,
        Signal::PidAvailable => p.pids,
        Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => p.inodes,
        Signal::NodeFsAvailable | Signal::ImageFsAvailable => p.disk,
    }
    .unwrap_or(0)
}

/// How much of the resource the signal lacks to reach the threshold plus its minimum reclaim
/// (where the manager stops reclaiming).
pub fn shortfall(t: &Threshold, o: Observation) -> u64 {
    let mut goal = resolve(t.value, o.capacity);
    if let Some(r) = t.min_reclaim {
        goal = goal.saturating_add(resolve(r, o.capacity));
    }
    goal.saturating_sub(o.available)
}

/// What pods evicted for a signal and still stopping will give back that the signal does not
/// show yet: each pod's usage when it was evicted, less what the signal has gained since the
/// first of those evictions (given back already); with how many pods.
/// `stopping` holds each pod's (usage, available at its eviction).
pub fn pending_relief(stopping: &[(u64, u64)], available: u64) -> (usize, u64) {
    let Some(baseline) = stopping.iter().map(|(_, a)| *a).min() else {
        return (0, 0);
    };
    let freeing = stopping
        .iter()
        .fold(0u64, |acc, (u, _)| acc.saturating_add(*u));
    let seen = available.saturating_sub(baseline);
    (stopping.len(), freeing.saturating_sub(seen))
}

/// Why a pass with a threshold met evicts no pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotEvictingReason {
    /// `--eviction-policy never`.
    Policy,
    /// Pods evicted at earlier passes are still stopping, and what they used covers the
    /// shortfall.
    Stopping { pods: usize, freeing: u64 },
    /// No pod that may be evicted uses any of the resource.
    NoPodUses,
    /// The pods that may be evicted use this much together, less than the shortfall.
    TooLittle { pods: usize, usage: u64 },
}

/// A threshold is met and no pod is evicted for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotEvicting {
    pub signal: Signal,
    /// What the signal lacks (threshold plus minimum reclaim, minus available).
    pub shortfall: u64,
    pub reason: NotEvictingReason,
    /// Pods using the resource that are never evicted for it (critical ones, Guaranteed ones
    /// within their requests): `namespace/name` and their usage.
    pub protected: Vec<(String, u64)>,
    /// What uses the filesystem outside podvisor's dirs (disk signals; the manager fills it
    /// in when it announces the reason).
    pub users: Option<super::topdirs::TopDirs>,
}

impl NotEvicting {
    /// Stays the same from pass to pass while the reason does (the numbers aside): a change
    /// is announced at once, a repeat only now and then.
    pub fn key(&self) -> (Signal, u8) {
        let kind = match self.reason {
            NotEvictingReason::Policy => 0,
            NotEvictingReason::Stopping { .. } => 1,
            NotEvictingReason::NoPodUses => 2,
            NotEvictingReason::TooLittle { .. } => 3,
        };
        (self.signal, kind)
    }

    /// The sentence for the event, the log and `podvisor node`.
    pub fn message(&self) -> String {
        let s = self.signal;
        let resource = s.resource();
        let need = amount(s, self.shortfall);
        let mut m = match &self.reason {
            NotEvictingReason::Policy => format!(
                "not evicting for {s}: --eviction-policy never (the kubelet's rule: static pods are never evicted); node-level reclaim only, {need} short"
            ),
            NotEvictingReason::Stopping { pods, freeing } => format!(
                "not evicting for {s}: {need} short, and {pods} evicted pod(s) still stopping will give back {}",
                amount(s, *freeing)
            ),
            NotEvictingReason::NoPodUses => format!(
                "not evicting for {s}: {need} short, and no pod that may be evicted uses any {resource}: evicting would free nothing"
            ),
            NotEvictingReason::TooLittle { pods, usage } => format!(
                "not evicting for {s}: {need} short, and the {pods} pod(s) that may be evicted use {} of {resource} together: evicting them all would not relieve it",
                amount(s, *usage)
            ),
        };
        if !self.protected.is_empty() {
            let names: Vec<String> = self
                .protected
                .iter()
                .map(|(n, u)| format!("{n} ({})", amount(s, *u)))
                .collect();
            m.push_str(&format!("; never evicted: {}", names.join(", ")));
        }
        if let Some(t) = self.users.as_ref().filter(|t| !t.entries.is_empty()) {
            let inodes = matches!(s, Signal::NodeFsInodesFree | Signal::ImageFsInodesFree);
            let names: Vec<String> = t
                .entries
                .iter()
                .map(|(p, b, i)| {
                    format!(
                        "{} ({})",
                        p.display(),
                        amount(s, if inodes { *i } else { *b })
                    )
                })
                .collect();
            m.push_str(&format!("; what uses it: {}", names.join(", ")));
            if t.partial {
                m.push_str(" (at least: the walk was cut short)");
            }
        }
        m
    }
}

/// An amount of the resource of `signal`, short: bytes as `4.9Mi`, counts as they are.
pub fn amount(signal: Signal, n: u64) -> String {
    match signal {
        Signal::MemoryAvailable | Signal::NodeFsAvailable | Signal::ImageFsAvailable => {
            short_bytes(n)
        }
        _ => n.to_string(),
    }
}

fn short_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["Ki", "Mi", "Gi", "Ti"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    // One decimal below 100, none when it is zero: 4.9Mi, 2Mi, 512Ki.
    let tenths = (v * 10.0).round();
    if v >= 100.0 || tenths % 10.0 == 0.0 {
        format!("{v:.0}{}", UNITS[unit])
    } else {
        format!("{:.1}{}", tenths / 10.0, UNITS[unit])
    }
}

/// What one pass does about a threshold met.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision<'a> {
    Evict(&'a PodCandidate),
    NotEvicting(NotEvicting),
}

/// The pod to evict for `signal`, or why none. `pods` are the pods not already being
/// evicted; `stopping` counts the pods evicted for the same signal that are still stopping
/// and what they will give back ([`pending_relief`]), not needed from another pod.
pub fn decide<'a>(
    policy: EvictionPolicy,
    signal: Signal,
    shortfall: u64,
    stopping: (usize, u64),
    pods: &'a [PodCandidate],
) -> Decision<'a> {
    let protected: Vec<(String, u64)> = pods
        .iter()
        .filter(|p| usage(signal, p) > 0 && !evictable(signal, p))
        .map(|p| (p.name.clone(), usage(signal, p)))
        .collect();
    let not_evicting = |reason| {
        Decision::NotEvicting(NotEvicting {
            signal,
            shortfall,
            reason,
            protected: protected.clone(),
            users: None,
        })
    };
    if policy == EvictionPolicy::Never {
        return not_evicting(NotEvictingReason::Policy);
    }
    let (stopping_pods, freeing) = stopping;
    let remaining = shortfall.saturating_sub(freeing);
    if stopping_pods > 0 && remaining == 0 {
        return not_evicting(NotEvictingReason::Stopping {
            pods: stopping_pods,
            freeing,
        });
    }
    let ranked = rank(signal, pods.iter().filter(|p| usage(signal, p) > 0));
    if ranked.is_empty() {
        return not_evicting(NotEvictingReason::NoPodUses);
    }
    let total = ranked
        .iter()
        .fold(0u64, |acc, p| acc.saturating_add(usage(signal, p)));
    if total < remaining {
        return not_evicting(NotEvictingReason::TooLittle {
            pods: ranked.len(),
            usage: total,
        });
    }
    // The kubelet's first among the pods that relieve it alone; when none does, among the
    // fewest pods that do together (the biggest users), so a pod using next to nothing is
    // not evicted on the way.
    if let Some(p) = ranked.iter().find(|p| usage(signal, p) >= remaining) {
        return Decision::Evict(p);
    }
    let mut biggest = ranked.clone();
    // Stable: equal users stay in the kubelet's order.
    biggest.sort_by_key(|p| std::cmp::Reverse(usage(signal, p)));
    let mut needed = Vec::new();
    let mut sum = 0u64;
    for p in biggest {
        if sum >= remaining {
            break;
        }
        sum = sum.saturating_add(usage(signal, p));
        needed.push(p.uid.as_str());
    }
    match ranked.iter().find(|p| needed.contains(&p.uid.as_str())) {
        Some(p) => Decision::Evict(p),
        // `needed` holds at least one of `ranked` (remaining > 0 here).
        None => not_evicting(NotEvictingReason::NoPodUses),
    }
}
