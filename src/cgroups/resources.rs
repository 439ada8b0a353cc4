//! resources: the kubelet's resource arithmetic — CPU shares, weights and quotas
//! (`pkg/kubelet/cm/helpers_linux.go`), a pod's effective requests and limits
//! (`component-helpers/resource.PodRequests` / `PodLimits`) and the pod cgroup's values
//! (`ResourceConfigForPod`).
//!
//! Only `cpu` and `memory` are computed; pod overhead and hugepages are not supported by
//! podvisor.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::pod::qos::{effective_requests, qos_class, QosClass, QosError};
use crate::pod::quantity::{parse_bytes, parse_cpu_millis, parse_nanos, QuantityError};

/// Smallest cpu.shares value (`MinShares`).
pub const MIN_SHARES: u64 = 2;
/// Largest cpu.shares value (`MaxShares`).
pub const MAX_SHARES: u64 = 262_144;
/// cpu.shares per CPU (`SharesPerCPU`).
pub const SHARES_PER_CPU: u64 = 1024;
/// CFS period in microseconds (`QuotaPeriod`).
pub const CPU_PERIOD_US: u64 = 100_000;
/// Smallest CFS quota in microseconds (`MinQuotaPeriod`).
pub const MIN_QUOTA_US: u64 = 1000;

/// A resource amount of the pod could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    #[error("{field}: {source}")]
    Quantity {
        field: String,
        source: QuantityError,
    },
    #[error("qos class: {0}")]
    Qos(#[from] QosError),
    #[error("pod has no spec")]
    MissingSpec,
}

/// The kubelet's `MilliCPUToShares`: 1024 shares per CPU, clamped to [2, 262144]; no request
/// gives the minimum.
pub fn milli_cpu_to_shares(milli_cpu: u64) -> u64 {
    if milli_cpu == 0 {
        return MIN_SHARES;
    }
    (milli_cpu.saturating_mul(SHARES_PER_CPU) / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// The kubelet's `CpuSharesToCpuWeight` (cgroup v2 `cpu.weight` from v1 shares):
/// `1 + ((shares - 2) * 9999) / 262142`.
pub fn shares_to_weight(shares: u64) -> u64 {
    let shares = shares.clamp(MIN_SHARES, MAX_SHARES);
    1 + ((shares - 2) * 9999) / 262_142
}

/// The kubelet's `MilliCPUToQuota`: microseconds per `period_us`, at least 1000; 0 (no limit)
/// for no CPU limit.
pub fn milli_cpu_to_quota(milli_cpu: u64, period_us: u64) -> u64 {
    if milli_cpu == 0 {
        return 0;
    }
    (milli_cpu.saturating_mul(period_us) / 1000).max(MIN_QUOTA_US)
}

/// CPU (millicores) and memory (bytes) of a pod or container.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    pub cpu_millis: u64,
    pub memory_bytes: u64,
}

impl Amounts {
    fn add(self, o: Amounts) -> Amounts {
        Amounts {
            cpu_millis: self.cpu_millis.saturating_add(o.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(o.memory_bytes),
        }
    }
    fn max(self, o: Amounts) -> Amounts {
        Amounts {
            cpu_millis: self.cpu_millis.max(o.cpu_millis),
            memory_bytes: self.memory_bytes.max(o.memory_bytes),
        }
    }
}

fn amounts(list: &BTreeMap<String, Quantity>, field: &str) -> Result<Amounts, ResourceError> {
    let q = |name: &str, f: fn(&Quantity) -> Result<u64, QuantityError>| {
        list.get(name)
            .map(|v| {
                f(v).map_err(|source| ResourceError::Quantity {
                    field: format!("{field}.{name}"),
                    source,
                })
            })
            .transpose()
            .map(Option::unwrap_or_default)
    };
    Ok(Amounts {
        cpu_millis: q("cpu", parse_cpu_millis)?,
        memory_bytes: q("memory", parse_bytes)?,
    })
}

#[derive(Clone, Copy)]
enum Kind {
    Requests,
    Limits,
}

fn container_amounts(c: &Container, path: &str, kind: Kind) -> Result<Amounts, ResourceError> {
    let r = c.resources.as_ref();
    match kind {
        Kind::Requests => amounts(
            &effective_requests(r),
            &format!("{path}.resources.requests"),
        ),
        Kind::Limits => amounts(
            &r.and_then(|r| r.limits.clone()).unwrap_or_default(),
            &format!("{path}.resources.limits"),
        ),
    }
}

/// The pod-level `spec.resources`, when it sets cpu or memory.
fn pod_level(pod: &Pod) -> Option<&ResourceRequirements> {
    let has = |l: &Option<BTreeMap<String, Quantity>>| {
        l.as_ref()
            .is_some_and(|l| l.contains_key("cpu") || l.contains_key("memory"))
    };
    pod.spec
        .as_ref()?
        .resources
        .as_ref()
        .filter(|r| has(&r.requests) || has(&r.limits))
}

/// Sum of app containers and sidecars, or the largest init container step if larger: the
/// rule of `PodRequests`/`PodLimits`; pod-level resources replace it when `pod_level_wins`.
fn aggregate(pod: &Pod, kind: Kind, pod_level_wins: bool) -> Result<Amounts, ResourceError> {
    let spec = pod.spec.as_ref().ok_or(ResourceError::MissingSpec)?;
    let mut total = Amounts::default();
    for (i, c) in spec.containers.iter().enumerate() {
        total = total.add(container_amounts(
            c,
            &format!("spec.containers[{i}]"),
            kind,
        )?);
    }
    let mut sidecars = Amounts::default();
    let mut init_max = Amounts::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let a = container_amounts(c, &format!("spec.initContainers[{i}]"), kind)?;
        if c.restart_policy.as_deref() == Some("Always") {
            // A sidecar runs next to the later init containers and the app containers.
            total = total.add(a);
            sidecars = sidecars.add(a);
            init_max = init_max.max(sidecars);
        } else {
            init_max = init_max.max(a.add(sidecars));
        }
    }
    let mut result = total.max(init_max);
    // Pod-level resources replace the aggregate for the resources they name.
    if let Some(r) = pod_level(pod).filter(|_| pod_level_wins) {
        let list = match kind {
            Kind::Requests => effective_requests(Some(r)),
            Kind::Limits => r.limits.clone().unwrap_or_default(),
        };
        let field = match kind {
            Kind::Requests => "spec.resources.requests",
            Kind::Limits => "spec.resources.limits",
        };
        let a = amounts(&list, field)?;
        if list.contains_key("cpu") {
            result.cpu_millis = a.cpu_millis;
        }
        if list.contains_key("memory") {
            result.memory_bytes = a.memory_bytes;
        }
    }
    Ok(result)
}

/// The pod's effective requests (`resource.PodRequests`): what admission counts.
pub fn pod_requests(pod: &Pod) -> Result<Amounts, ResourceError> {
    aggregate(pod, Kind::Requests, true)
}

/// The containers' aggregated requests, ignoring pod-level resources
/// (`resource.AggregateContainerRequests`).
pub fn aggregate_container_requests(pod: &Pod) -> Result<Amounts, ResourceError> {
    aggregate(pod, Kind::Requests, false)
}

/// The pod's effective limits (`resource.PodLimits`); 0 means no limit for that resource.
pub fn pod_limits(pod: &Pod) -> Result<Amounts, ResourceError> {
    aggregate(pod, Kind::Limits, true)
}

/// Whether every app container declares a positive limit of `name` (init containers are not
/// looked at, as in the kubelet), or the pod-level resources set one.
fn limits_declared(pod: &Pod, name: &str) -> Result<bool, ResourceError> {
    let spec = pod.spec.as_ref().ok_or(ResourceError::MissingSpec)?;
    let positive =
        |l: Option<&BTreeMap<String, Quantity>>, field: String| match l.and_then(|l| l.get(name)) {
            None => Ok(false),
            Some(q) => parse_nanos(q)
                .map(|v| v > 0)
                .map_err(|source| ResourceError::Quantity { field, source }),
        };
    if let Some(r) = pod_level(pod) {
        if positive(r.limits.as_ref(), format!("spec.resources.limits.{name}"))? {
            return Ok(true);
        }
    }
    for (i, c) in spec.containers.iter().enumerate() {
        let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
        if !positive(
            limits,
            format!("spec.containers[{i}].resources.limits.{name}"),
        )? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The values of a pod cgroup (`ResourceConfigForPod` plus `podPidsLimit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodCgroupConfig {
    pub qos: QosClass,
    /// v1 cpu.shares; v2 cpu.weight is [`shares_to_weight`] of it.
    pub cpu_shares: u64,
    /// CFS quota per [`CPU_PERIOD_US`]; `None` = no CPU limit.
    pub cpu_quota_us: Option<u64>,
    /// memory.max; `None` = no memory limit.
    pub memory_max: Option<u64>,
    /// pids.max; `None` = unlimited.
    pub pids_max: Option<i64>,
    /// The pod's effective requests (for the burstable tier's weight and admission).
    pub requests: Amounts,
}

impl PodCgroupConfig {
    /// The kubelet's `ResourceConfigForPod` for `pod`, with `pids_limit` (podPidsLimit) added.
    pub fn for_pod(pod: &Pod, pids_limit: Option<i64>) -> Result<PodCgroupConfig, ResourceError> {
        let qos = qos_class(pod)?;
        let requests = pod_requests(pod)?;
        let limits = pod_limits(pod)?;
        let shares = milli_cpu_to_shares(requests.cpu_millis);
        let quota = milli_cpu_to_quota(limits.cpu_millis, CPU_PERIOD_US);
        let (cpu_shares, cpu_quota_us, memory_max) = match qos {
            QosClass::Guaranteed => (
                shares,
                (quota > 0).then_some(quota),
                (limits.memory_bytes > 0).then_some(limits.memory_bytes),
            ),
            QosClass::Burstable => (
                shares,
                (limits_declared(pod, "cpu")? && quota > 0).then_some(quota),
                (limits_declared(pod, "memory")? && limits.memory_bytes > 0)
                    .then_some(limits.memory_bytes),
            ),
            QosClass::BestEffort => (MIN_SHARES, None, None),
        };
        Ok(PodCgroupConfig {
            qos,
            cpu_shares,
            cpu_quota_us,
            memory_max,
            pids_max: pids_limit.filter(|n| *n > 0),
            requests,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("pod json")
    }

    #[test]
    fn shares_weights_and_quotas_match_kubelet_values() {
        // (millicores, shares, weight) from helpers_linux_test.go and the KEP's table.
        for (milli, shares, weight) in [
            (0, 2, 1),
            (1, 2, 1),
            (5, 5, 1),
            (100, 102, 4),
            (250, 256, 10),
            (1000, 1024, 39),
            (2000, 2048, 79),
            (256_000, 262_144, 10_000),
            (300_000, 262_144, 10_000),
        ] {
            assert_eq!(milli_cpu_to_shares(milli), shares, "shares of {milli}m");
            assert_eq!(shares_to_weight(shares), weight, "weight of {shares}");
        }
        for (milli, quota) in [
            (0, 0),
            (5, 1000),
            (9, 1000),
            (10, 1000),
            (200, 20_000),
            (250, 25_000),
            (500, 50_000),
            (1000, 100_000),
            (1500, 150_000),
        ] {
            assert_eq!(milli_cpu_to_quota(milli, CPU_PERIOD_US), quota, "{milli}m");
        }
    }

    #[test]
    fn guaranteed_pod_gets_summed_limits() {
        let p = pod(
            serde_json::json!({"metadata": {"name": "g"}, "spec": {"containers": [
                {"name": "a", "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}}},
                {"name": "b", "resources": {"limits": {"cpu": "750m", "memory": "64Mi"}}}
            ]}}),
        );
        let c = PodCgroupConfig::for_pod(&p, Some(100)).expect("config");
        assert_eq!(c.qos, QosClass::Guaranteed);
        assert_eq!(c.cpu_shares, 1024);
        assert_eq!(c.cpu_quota_us, Some(100_000));
        assert_eq!(c.memory_max, Some(128 << 20));
        assert_eq!(c.pids_max, Some(100));
    }

    #[test]
    fn burstable_pod_gets_limits_only_when_every_container_has_one() {
        let p = pod(
            serde_json::json!({"metadata": {"name": "b"}, "spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "32Mi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "100m", "memory": "16Mi"}, "limits": {"cpu": "300m"}}}
            ]}}),
        );
        let c = PodCgroupConfig::for_pod(&p, None).expect("config");
        assert_eq!(c.qos, QosClass::Burstable);
        assert_eq!(c.cpu_shares, 204);
        assert_eq!(c.cpu_quota_us, Some(50_000));
        assert_eq!(c.memory_max, None, "b has no memory limit");
        assert_eq!(c.pids_max, None);
        assert_eq!(
            c.requests,
            Amounts {
                cpu_millis: 200,
                memory_bytes: (32 << 20) + (16 << 20)
            }
        );
    }

    #[test]
    fn init_containers_do_not_decide_whether_pod_limits_are_set() {
        // The kubelet looks at app containers only: an init container without limits does
        // not drop the pod's limits.
        let p = pod(serde_json::json!({"metadata": {"name": "b"}, "spec": {
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "50m"}}}],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "32Mi"}}}]
        }}));
        let c = PodCgroupConfig::for_pod(&p, None).expect("config");
        assert_eq!(c.qos, QosClass::Burstable);
        assert_eq!(c.cpu_quota_us, Some(20_000));
        assert_eq!(c.memory_max, Some(32 << 20));
    }

    #[test]
    fn best_effort_pod_gets_minimum_shares_only() {
        let p = pod(
            serde_json::json!({"metadata": {"name": "e"}, "spec": {"containers": [{"name": "a"}]}}),
        );
        let c = PodCgroupConfig::for_pod(&p, Some(-1)).expect("config");
        assert_eq!(
            (
                c.qos,
                c.cpu_shares,
                c.cpu_quota_us,
                c.memory_max,
                c.pids_max
            ),
            (QosClass::BestEffort, 2, None, None, None)
        );
    }

    #[test]
    fn init_containers_count_by_the_max_rule_and_sidecars_add_up() {
        // Apps 300m; init 1 needs 500m alone; sidecar 100m runs with init 2 (400m+100m)
        // and with the apps (300m+100m).
        let p = pod(serde_json::json!({"metadata": {"name": "i"}, "spec": {
            "initContainers": [
                {"name": "i1", "resources": {"requests": {"cpu": "500m", "memory": "10Mi"}}},
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "i2", "resources": {"requests": {"cpu": "450m"}}}
            ],
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "300m", "memory": "20Mi"}}}]
        }}));
        assert_eq!(
            pod_requests(&p).expect("requests"),
            Amounts {
                cpu_millis: 550,
                memory_bytes: 20 << 20
            }
        );
    }

    #[test]
    fn pod_level_resources_replace_the_sum() {
        let p = pod(serde_json::json!({"metadata": {"name": "p"}, "spec": {
            "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2", "memory": "1Gi"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "8Mi"}}}]
        }}));
        let c = PodCgroupConfig::for_pod(&p, None).expect("config");
        assert_eq!(c.qos, QosClass::Burstable);
        assert_eq!(c.cpu_shares, 1024);
        assert_eq!(c.cpu_quota_us, Some(200_000));
        assert_eq!(c.memory_max, Some(1 << 30));
        // memory request defaults to the pod-level limit.
        assert_eq!(c.requests.memory_bytes, 1 << 30);
    }

    #[test]
    fn bad_quantity_names_the_field() {
        let p = pod(
            serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "x"}}}
            ]}}),
        );
        let err = pod_limits(&p).expect_err("bad");
        assert!(
            err.to_string()
                .starts_with("spec.containers[0].resources.limits.memory"),
            "{err}"
        );
    }
}
