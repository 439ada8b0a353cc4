//! eviction::threshold: eviction signals and thresholds as the kubelet configures them
//! (`pkg/kubelet/eviction/api/types.go`, `helpers.go` `ParseThresholdConfig`): the
//! `evictionHard`, `evictionSoft`, `evictionSoftGracePeriod` and `evictionMinimumReclaim` maps
//! parsed into [`Threshold`]s, each bad value an error naming the map and the signal.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::cgroups::allocatable::{parse_memory_threshold, MemoryThreshold};

/// An eviction signal (the kubelet's `evictionapi.Signal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Signal {
    MemoryAvailable,
    NodeFsAvailable,
    NodeFsInodesFree,
    ImageFsAvailable,
    ImageFsInodesFree,
    PidAvailable,
}

impl Signal {
    /// Every signal, in the kubelet's reclaim order (memory first).
    pub const ALL: [Signal; 6] = [
        Signal::MemoryAvailable,
        Signal::NodeFsAvailable,
        Signal::NodeFsInodesFree,
        Signal::ImageFsAvailable,
        Signal::ImageFsInodesFree,
        Signal::PidAvailable,
    ];

    /// The name used in configuration (`memory.available`).
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory.available",
            Signal::NodeFsAvailable => "nodefs.available",
            Signal::NodeFsInodesFree => "nodefs.inodesFree",
            Signal::ImageFsAvailable => "imagefs.available",
            Signal::ImageFsInodesFree => "imagefs.inodesFree",
            Signal::PidAvailable => "pid.available",
        }
    }

    pub fn from_name(name: &str) -> Option<Signal> {
        Signal::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The node condition the signal drives.
    pub fn condition(self) -> Pressure {
        match self {
            Signal::MemoryAvailable => Pressure::Memory,
            Signal::PidAvailable => Pressure::Pid,
            _ => Pressure::Disk,
        }
    }

    /// The resource the kubelet names in its eviction message (`signalToResource`).
    pub fn resource(self) -> &'static str {
        match self {
            Signal::MemoryAvailable => "memory",
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => "ephemeral-storage",
            Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => "inodes",
            Signal::PidAvailable => "pids",
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node pressure condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pressure {
    Memory,
    Disk,
    Pid,
}

impl Pressure {
    pub const ALL: [Pressure; 3] = [Pressure::Memory, Pressure::Disk, Pressure::Pid];

    /// The node condition type (`MemoryPressure`).
    pub fn condition_type(self) -> &'static str {
        match self {
            Pressure::Memory => "MemoryPressure",
            Pressure::Disk => "DiskPressure",
            Pressure::Pid => "PIDPressure",
        }
    }
}

/// A threshold's value: a quantity (bytes, inodes or pids) or a share of capacity.
pub type ThresholdValue = MemoryThreshold;

/// Resolves a threshold value against a capacity.
pub fn resolve(value: ThresholdValue, capacity: u64) -> u64 {
    match value {
        MemoryThreshold::Bytes(b) => b,
        MemoryThreshold::Basis(bp) => {
            u64::try_from(u128::from(capacity) * u128::from(bp) / 10_000).unwrap_or(u64::MAX)
        }
    }
}

/// One eviction threshold: `signal < value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threshold {
    pub signal: Signal,
    pub value: ThresholdValue,
    /// Zero for hard thresholds; a soft threshold must be met this long first.
    pub grace_period: Duration,
    /// Reclaim until the signal is this far above the threshold
    /// (`evictionMinimumReclaim`); `None` for none.
    pub min_reclaim: Option<ThresholdValue>,
    pub hard: bool,
}

/// A bad eviction setting; `field` is `evictionHard.memory.available` and the like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ThresholdConfigError {
    pub field: String,
    pub message: String,
}

/// The kubelet's default `evictionHard` on Linux (`DefaultEvictionHard`).
pub const DEFAULT_EVICTION_HARD: &[(&str, &str)] = &[
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
    ("imagefs.available", "15%"),
    ("imagefs.inodesFree", "5%"),
];

/// The kubelet's default `evictionPressureTransitionPeriod`.
pub const DEFAULT_PRESSURE_TRANSITION_PERIOD: Duration = Duration::from_secs(300);

/// The raw eviction maps of a KubeletConfiguration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvictionMaps<'a> {
    /// `None`: unset (the kubelet's defaults apply).
    pub hard: Option<&'a BTreeMap<String, String>>,
    pub soft: Option<&'a BTreeMap<String, String>>,
    /// Go durations.
    pub soft_grace_period: Option<&'a BTreeMap<String, String>>,
    pub minimum_reclaim: Option<&'a BTreeMap<String, String>>,
    /// `mergeDefaultEvictionSettings`: defaults fill the signals `evictionHard` leaves out.
    pub merge_defaults: bool,
}

fn value(field: String, text: &str) -> Result<Option<ThresholdValue>, ThresholdConfigError> {
    let text = text.trim();
    let v = parse_memory_threshold(text).map_err(|e| ThresholdConfigError {
        field: field.clone(),
        message: e.to_string(),
    })?;
    // As the kubelet: a threshold of 0 or 0% is no threshold.
    Ok(match v {
        MemoryThreshold::Bytes(0) | MemoryThreshold::Basis(0) => None,
        v => Some(v),
    })
}

fn signal(map: &str, key: &str) -> Result<Signal, ThresholdConfigError> {
    Signal::from_name(key).ok_or_else(|| ThresholdConfigError {
        field: format!("{map}.{key}"),
        message: format!(
            "unsupported eviction signal {key:?} (supported: {})",
            Signal::ALL.map(Signal::as_str).join(", ")
        ),
    })
}

/// Parses the eviction maps into thresholds, hard ones first (the kubelet's
/// `ParseThresholdConfig`). A soft threshold needs a grace period; a grace period or minimum
/// reclaim needs a threshold of its signal.
pub fn parse_thresholds(maps: &EvictionMaps<'_>) -> Result<Vec<Threshold>, ThresholdConfigError> {
    let defaults: BTreeMap<String, String> = DEFAULT_EVICTION_HARD
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let mut hard_map = maps.hard.cloned().unwrap_or_else(|| defaults.clone());
    if maps.merge_defaults {
        for (k, v) in &defaults {
            hard_map.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    let mut grace = BTreeMap::new();
    for (k, v) in maps.soft_grace_period.into_iter().flatten() {
        let s = signal("evictionSoftGracePeriod", k)?;
        let d = crate::duration::parse_go_duration(v.trim()).map_err(|e| ThresholdConfigError {
            field: format!("evictionSoftGracePeriod.{k}"),
            message: e.to_string(),
        })?;
        grace.insert(s, d);
    }
    let mut reclaim = BTreeMap::new();
    for (k, v) in maps.minimum_reclaim.into_iter().flatten() {
        let s = signal("evictionMinimumReclaim", k)?;
        if let Some(v) = value(format!("evictionMinimumReclaim.{k}"), v)? {
            reclaim.insert(s, v);
        }
    }
    let mut out = Vec::new();
    for (k, v) in &hard_map {
        let s = signal("evictionHard", k)?;
        if let Some(v) = value(format!("evictionHard.{k}"), v)? {
            out.push(Threshold {
                signal: s,
                value: v,
                grace_period: Duration::ZERO,
                min_reclaim: reclaim.get(&s).copied(),
                hard: true,
            });
        }
    }
    for (k, v) in maps.soft.into_iter().flatten() {
        let s = signal("evictionSoft", k)?;
        let Some(v) = value(format!("evictionSoft.{k}"), v)? else {
            continue;
        };
        let Some(g) = grace.get(&s) else {
            return Err(ThresholdConfigError {
                field: format!("evictionSoftGracePeriod.{k}"),
                message: format!(
                    "a grace period must be given for the soft eviction threshold {k}"
                ),
            });
        };
        out.push(Threshold {
            signal: s,
            value: v,
            grace_period: *g,
            min_reclaim: reclaim.get(&s).copied(),
            hard: false,
        });
    }
    for s in grace.keys() {
        if !maps.soft.is_some_and(|m| m.contains_key(s.as_str())) {
            return Err(ThresholdConfigError {
                field: format!("evictionSoftGracePeriod.{s}"),
                message: format!("no evictionSoft threshold for {s}"),
            });
        }
    }
    Ok(out)
}

/// The hard `memory.available` threshold (node allocatable subtracts it), zero when none.
pub fn hard_memory(thresholds: &[Threshold]) -> MemoryThreshold {
    thresholds
        .iter()
        .find(|t| t.hard && t.signal == Signal::MemoryAvailable)
        .map(|t| t.value)
        .unwrap_or(MemoryThreshold::Bytes(0))
}

pub use crate::pod::quantity::format_binary_si;
