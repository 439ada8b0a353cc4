//! eviction::decisions: which thresholds are met and which node conditions hold, as pure
//! functions of the observations and the state kept between passes (the kubelet's
//! `synchronize` up to the choice of the threshold to reclaim: `thresholdsMet`,
//! `thresholdsFirstObservedAt`, `nodeConditionsObservedSince`, `thresholdsMetGracePeriod`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use super::threshold::{resolve, Pressure, Signal, Threshold};

/// One signal measured: what is available out of what capacity (bytes, inodes or pids).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: u64,
    pub capacity: u64,
}

/// Every signal measured in one pass (a signal that could not be read is absent).
pub type Observations = BTreeMap<Signal, Observation>;

/// The threshold as a quantity, for a signal of `capacity`.
pub fn threshold_quantity(t: &Threshold, capacity: u64) -> u64 {
    resolve(t.value, capacity)
}

/// The thresholds of `thresholds` that `obs` meets: available below the threshold (plus its
/// minimum reclaim when `enforce_min_reclaim`, the hysteresis of a threshold already met).
pub fn thresholds_met(
    thresholds: &[Threshold],
    obs: &Observations,
    enforce_min_reclaim: bool,
) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            let Some(o) = obs.get(&t.signal) else {
                return false;
            };
            let mut q = threshold_quantity(t, o.capacity);
            if enforce_min_reclaim {
                if let Some(r) = t.min_reclaim {
                    q = q.saturating_add(resolve(r, o.capacity));
                }
            }
            o.available < q
        })
        .copied()
        .collect()
}

fn key(t: &Threshold) -> (Signal, bool) {
    (t.signal, t.hard)
}

/// What the manager remembers between passes.
#[derive(Debug, Clone, Default)]
pub struct EvictionState {
    /// Thresholds met (past their grace period) at the last pass.
    pub met: Vec<Threshold>,
    /// When each threshold currently met was first seen met.
    pub first_observed: BTreeMap<(Signal, bool), Instant>,
    /// When each pressure condition was last observed.
    pub last_observed: BTreeMap<Pressure, Instant>,
}

/// The outcome of one evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// Node conditions that hold (observed within the transition period).
    pub conditions: BTreeSet<Pressure>,
    /// Thresholds met past their grace period, the one to reclaim first at the front
    /// (memory, then the others in signal order).
    pub to_reclaim: Vec<Threshold>,
}

/// One pass's decision about thresholds and conditions; updates `state`.
pub fn evaluate(
    state: &mut EvictionState,
    now: Instant,
    thresholds: &[Threshold],
    obs: &Observations,
    transition_period: Duration,
) -> Evaluation {
    let mut met = thresholds_met(thresholds, obs, false);
    // Thresholds met before stay met until the minimum reclaim is reached.
    for t in thresholds_met(&state.met, obs, true) {
        if !met.iter().any(|m| key(m) == key(&t)) {
            met.push(t);
        }
    }
    let mut first = BTreeMap::new();
    for t in &met {
        let at = state.first_observed.get(&key(t)).copied().unwrap_or(now);
        first.insert(key(t), at);
    }
    state.first_observed = first;
    // Conditions come from every threshold met, before grace periods (as the kubelet).
    for t in &met {
        state.last_observed.insert(t.signal.condition(), now);
    }
    state
        .last_observed
        .retain(|_, at| now.saturating_duration_since(*at) < transition_period);
    let conditions = state.last_observed.keys().copied().collect();
    let mut to_reclaim: Vec<Threshold> = met
        .into_iter()
        .filter(|t| {
            let since = state.first_observed.get(&key(t)).copied().unwrap_or(now);
            now.saturating_duration_since(since) >= t.grace_period
        })
        .collect();
    to_reclaim.sort_by_key(|t| (t.signal, !t.hard));
    state.met = to_reclaim.clone();
    Evaluation {
        conditions,
        to_reclaim,
    }
}

/// Whether node-level reclaim was enough: after it, no threshold met at this pass is still
/// met with its minimum reclaim (the kubelet's `reclaimNodeLevelResources`).
pub fn reclaim_sufficed(met: &[Threshold], after: &Observations) -> bool {
    thresholds_met(met, after, true).is_empty()
}

/// The grace period an evicted pod gets: none for a hard threshold; for a soft one its own
/// `terminationGracePeriodSeconds`, at most `evictionMaxPodGracePeriod` (so none with the
/// default 0, as the kubelet).
pub fn eviction_grace(hard: bool, pod_grace: Duration, max_pod_grace: Duration) -> Duration {
    if hard {
        return Duration::ZERO;
    }
    pod_grace.min(max_pod_grace)
}
