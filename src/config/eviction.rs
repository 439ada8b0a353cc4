//! config::eviction: the eviction settings of the KubeletConfiguration (`evictionHard`,
//! `evictionSoft` and their grace periods, `evictionMinimumReclaim`,
//! `evictionMaxPodGracePeriod`, `evictionPressureTransitionPeriod`,
//! `mergeDefaultEvictionSettings`), the `--eviction-hard` flag and podvisor's
//! `--eviction-policy` (no KubeletConfiguration field: the file's schema is the kubelet's),
//! each bad value an error naming the field or flag, and the reservations node allocatable
//! subtracts (`systemReserved`, `kubeReserved`, the hard memory threshold). The thresholds themselves are parsed by
//! `eviction::threshold`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::flags::invalid_flag;
use super::raw::RawKubeletConfiguration;
use super::raw::{fmt_location, non_empty};
use super::{ConfigError, KubeletConfig};
use crate::cgroups::allocatable::{self, MemoryThreshold, Reservation};
use crate::duration::parse_go_duration;
use crate::eviction::threshold::{EvictionMaps, DEFAULT_PRESSURE_TRANSITION_PERIOD};
use crate::eviction::EvictionConfig;
use crate::eviction::EvictionPolicy;

/// `--eviction-hard`: `signal<value` pairs separated by commas replace the hard thresholds
/// (the file's minimum reclaim of a signal stays) and node allocatable's memory threshold.
pub(super) fn apply_hard_flag(file: &mut KubeletConfig, value: &str) -> Result<(), ConfigError> {
    let mut map = BTreeMap::new();
    for pair in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((signal, v)) = pair.split_once('<') else {
            return Err(invalid_flag(
                "eviction-hard",
                value,
                format!("{pair:?} is not signal<quantity"),
            ));
        };
        map.insert(signal.trim().to_string(), v.trim().to_string());
    }
    let hard = crate::eviction::threshold::parse_thresholds(&EvictionMaps {
        hard: Some(&map),
        ..Default::default()
    })
    .map_err(|e| invalid_flag("eviction-hard", value, e.to_string()))?;
    let old = std::mem::take(&mut file.eviction.thresholds);
    let reclaim = |s| {
        old.iter()
            .find(|t| t.signal == s)
            .and_then(|t| t.min_reclaim)
    };
    file.eviction.thresholds = hard
        .into_iter()
        .map(|mut t| {
            t.min_reclaim = reclaim(t.signal);
            t
        })
        .chain(old.iter().filter(|t| !t.hard).copied())
        .collect();
    file.reservation.eviction_memory =
        crate::eviction::threshold::hard_memory(&file.eviction.thresholds);
    Ok(())
}

/// `--eviction-policy`: `helpful` or `never`.
pub(super) fn parse_policy_flag(value: &str) -> Result<EvictionPolicy, ConfigError> {
    value
        .parse()
        .map_err(|e: crate::eviction::relief::UnknownPolicy| {
            invalid_flag("eviction-policy", value, e.to_string())
        })
}

/// The eviction settings; every bad value an error naming the field (`evictionHard.<signal>`,
/// `evictionSoftGracePeriod.<signal>`, `evictionMaxPodGracePeriod`, ...).
pub(super) fn parse(
    raw: &RawKubeletConfiguration,
    source_name: &str,
) -> Result<EvictionConfig, ConfigError> {
    let invalid = |field: String, location: String, message: String| ConfigError::Invalid {
        source_name: source_name.into(),
        location,
        field,
        message,
    };
    let thresholds = crate::eviction::threshold::parse_thresholds(&EvictionMaps {
        hard: raw.eviction_hard.as_ref(),
        soft: raw.eviction_soft.as_ref(),
        soft_grace_period: raw.eviction_soft_grace_period.as_ref(),
        minimum_reclaim: raw.eviction_minimum_reclaim.as_ref(),
        merge_defaults: raw.merge_default_eviction_settings.unwrap_or(false),
    })
    .map_err(|e| invalid(e.field, String::new(), e.message))?;
    let max_pod_grace_period = match &raw.eviction_max_pod_grace_period {
        Some(n) if n.value < 0 => {
            return Err(invalid(
                "evictionMaxPodGracePeriod".into(),
                fmt_location(&n.referenced),
                format!("{} must not be negative", n.value),
            ))
        }
        Some(n) => Duration::from_secs(n.value as u64),
        None => Duration::ZERO,
    };
    let pressure_transition_period = match non_empty(&raw.eviction_pressure_transition_period) {
        Some(s) => {
            let d = parse_go_duration(&s.value).map_err(|e| {
                invalid(
                    "evictionPressureTransitionPeriod".into(),
                    fmt_location(&s.referenced),
                    e.to_string(),
                )
            })?;
            // Zero is the kubelet's "unset" (kubeadm writes "0s").
            if d.is_zero() {
                DEFAULT_PRESSURE_TRANSITION_PERIOD
            } else {
                d
            }
        }
        None => DEFAULT_PRESSURE_TRANSITION_PERIOD,
    };
    Ok(EvictionConfig {
        thresholds,
        max_pod_grace_period,
        pressure_transition_period,
        policy: EvictionPolicy::default(),
    })
}

/// `systemReserved`, `kubeReserved` and `evictionHard["memory.available"]` (the kubelet's
/// default `100Mi` when `evictionHard` is not set; none when it is set without it). Errors
/// name the field.
pub(super) fn reservation(
    raw: &RawKubeletConfiguration,
    source_name: &str,
) -> Result<Reservation, ConfigError> {
    let invalid = |field: String, message: String| ConfigError::Invalid {
        source_name: source_name.into(),
        location: String::new(),
        field,
        message,
    };
    let reserved = |name: &str, m: &Option<BTreeMap<String, String>>| match m {
        Some(m) => allocatable::parse_reserved(m)
            .map_err(|e| invalid(format!("{name}.{}", e.resource), e.source.to_string())),
        None => Ok(Default::default()),
    };
    let eviction_memory = match &raw.eviction_hard {
        None => MemoryThreshold::default(),
        Some(m) => match m.get("memory.available") {
            None => MemoryThreshold::Bytes(0),
            Some(v) => allocatable::parse_memory_threshold(v)
                .map_err(|e| invalid("evictionHard.memory.available".to_string(), e.to_string()))?,
        },
    };
    let storage = |name: &str, m: &Option<BTreeMap<String, String>>| match m {
        Some(m) => allocatable::parse_reserved_storage(m)
            .map_err(|e| invalid(format!("{name}.{}", e.resource), e.source.to_string())),
        None => Ok(0),
    };
    Ok(Reservation {
        system_reserved: reserved("systemReserved", &raw.system_reserved)?,
        kube_reserved: reserved("kubeReserved", &raw.kube_reserved)?,
        eviction_memory,
        ephemeral_storage: storage("systemReserved", &raw.system_reserved)?
            .saturating_add(storage("kubeReserved", &raw.kube_reserved)?),
    })
}
