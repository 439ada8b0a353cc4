//! eviction: the kubelet's eviction manager (`pkg/kubelet/eviction`) for one node.
//!
//! What it owns: the eviction thresholds ([`threshold`]: `evictionHard`, `evictionSoft`,
//! grace periods, minimum reclaim), the measurement of the signals ([`signals`]:
//! memory.available, nodefs/imagefs space and inodes, pid.available), the decisions
//! ([`decisions`]: thresholds met, grace periods, node conditions with the pressure transition
//! period; [`ranking`]: the kubelet's victim order, critical pods, the eviction message;
//! [`relief`]: podvisor's rule that only a pod whose own usage can relieve the pressure is
//! evicted, and `--eviction-policy never`, the kubelet's rule of evicting no static pod;
//! [`topdirs`]: what uses a filesystem outside podvisor's dirs, when no eviction can help), one
//! housekeeping pass and the `eviction-manager` thread ([`manager`]), the memory wake-up
//! ([`notifier`]: memcg threshold on v1, PSI, a close watch near the threshold) and the real
//! node's seams ([`node`]), and the local storage limits: the decision ([`ephemeral`]: container
//! and pod `ephemeral-storage` limits, emptyDir `sizeLimit`), each pod's ephemeral storage
//! ([`storage`]) measured at a bounded cost per pass ([`usage`]).
//!
//! What it does not own: pod state. A pass reclaims node-level resources first (dead
//! containers and logs through the sync loop's container GC, then unused images) and only
//! then picks at most one pod that can help, which it hands to the sync loop as an
//! [`EvictionEvent::Evict`]; the loop stops it (phase Failed, reason Evicted), publishes the
//! node conditions, refuses pods under pressure as the kubelet's admission does, and starts
//! an evicted pod again once its pressure has cleared.
//!
//! The decisions are pure and table-tested in `tests/` (`tests/relief.rs` for "evict only what can help").

pub mod decisions;
pub mod ephemeral;
pub mod manager;
pub mod node;
pub mod notifier;
pub mod ranking;
pub mod relief;
pub mod signals;
pub mod storage;
pub mod threshold;
pub mod topdirs;
pub mod usage;

#[cfg(test)]
mod tests;

pub use manager::{EvictPod, EvictionConfig, EvictionEvent, LimitEviction};
pub use relief::EvictionPolicy;
pub use threshold::{Pressure, Signal, Threshold};
