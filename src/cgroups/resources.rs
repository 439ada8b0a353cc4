//! resources: the kubelet's pod cgroup values — CPU shares, weights and quotas
//! (`pkg/kubelet/cm/helpers_linux.go`) and the pod cgroup's values (`ResourceConfigForPod`),
//! from the pod's effective requests and limits ([`crate::pod::resources`]).
//!
//! Only `cpu` and `memory` are computed; pod overhead and hugepages are not supported by
//! podvisor.

use k8s_openapi::api::core::v1::Pod;

use crate::pod::qos::{qos_class, QosClass, QosError};
use crate::pod::resources::{limits_declared, pod_limits, pod_requests, Amounts, ResourceError};

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

/// The pod cgroup's values could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodCgroupConfigError {
    #[error(transparent)]
    Resource(#[from] ResourceError),
    #[error("qos class: {0}")]
    Qos(#[from] QosError),
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
    pub fn for_pod(
        pod: &Pod,
        pids_limit: Option<i64>,
    ) -> Result<PodCgroupConfig, PodCgroupConfigError> {
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
}
