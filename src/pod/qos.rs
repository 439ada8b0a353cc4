//! Pod QoS class and container OOM score adjustment, computed exactly as the kubelet does.
//!
//! - [`qos_class`] follows `pkg/apis/core/v1/helper/qos.ComputePodQOS`: only `cpu` and `memory`
//!   count, zero quantities are ignored, regular and init containers are summed, and requests
//!   default to limits (the API server's `SetDefaults_Pod`, which static pods also get when the
//!   kubelet decodes them). Pod-level `spec.resources`, when set, replace the containers'
//!   resources (the `PodLevelResources` feature, on by default since 1.34).
//! - [`oom_score_adj`] follows `pkg/kubelet/qos/policy.go`: node-critical pods and Guaranteed
//!   pods get -997, BestEffort 1000, Burstable `1000 - 1000*memoryRequest/capacity` clamped to
//!   `[1000 - 997, 999]` (so the floor is 3, as in the source; the docs' table says 2), and a
//!   sidecar (init container with `restartPolicy: Always`) never scores above the smallest
//!   regular container. With a pod-level memory request, the part of it not requested by the
//!   containers is divided equally among all containers (init ones included) and added to
//!   each container's request (`remainingPodMemReqPerContainer`).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{parse_bytes, parse_nanos};
use super::resources::{aggregate_container_requests, effective_requests, ResourceError};

/// The three Kubernetes QoS classes (serialized as `status.qosClass` spells them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The name as `status.qosClass` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }

    /// The class named by a `status.qosClass` value.
    pub fn from_name(name: &str) -> Option<QosClass> {
        [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ]
        .into_iter()
        .find(|q| q.as_str() == name)
    }
}

/// A resource quantity in the pod could not be read, or the node's capacity is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QosError {
    #[error(transparent)]
    Resource(#[from] ResourceError),
    #[error("node memory capacity is zero")]
    ZeroCapacity,
}

/// oom_score_adj of Guaranteed and node-critical containers.
pub const GUARANTEED_OOM_SCORE_ADJ: i32 = -997;
/// oom_score_adj of BestEffort containers.
pub const BEST_EFFORT_OOM_SCORE_ADJ: i32 = 1000;

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// Adds the positive cpu/memory quantities of `list` into `sums` (nano units); returns the
/// names that were positive.
fn accumulate(
    list: &BTreeMap<String, Quantity>,
    sums: &mut BTreeMap<&'static str, u128>,
    field: &str,
) -> Result<Vec<&'static str>, QosError> {
    let mut found = Vec::new();
    for name in QOS_RESOURCES {
        let Some(q) = list.get(name) else { continue };
        let v = parse_nanos(q).map_err(|source| ResourceError::Quantity {
            field: format!("{field}.{name}"),
            source,
        })?;
        if v > 0 {
            let slot = sums.entry(name).or_insert(0);
            *slot = slot.saturating_add(v);
            found.push(name);
        }
    }
    Ok(found)
}

/// Computes the pod's QoS class like `ComputePodQOS`.
pub fn qos_class(pod: &Pod) -> Result<QosClass, QosError> {
    let spec = pod.spec.as_ref().ok_or(ResourceError::MissingSpec)?;
    let mut requests = BTreeMap::new();
    let mut limits = BTreeMap::new();
    let mut guaranteed = true;
    let has_qos_resource = |l: &Option<BTreeMap<String, Quantity>>| {
        l.as_ref()
            .is_some_and(|l| QOS_RESOURCES.iter().any(|n| l.contains_key(*n)))
    };
    let pod_level = spec
        .resources
        .as_ref()
        .filter(|r| has_qos_resource(&r.limits) || has_qos_resource(&r.requests));
    if let Some(r) = pod_level {
        accumulate(
            &effective_requests(Some(r)),
            &mut requests,
            "spec.resources.requests",
        )?;
        if let Some(l) = r.limits.as_ref().filter(|l| !l.is_empty()) {
            let found = accumulate(l, &mut limits, "spec.resources.limits")?;
            if found.len() != QOS_RESOURCES.len() {
                guaranteed = false;
            }
        }
    } else {
        let containers = spec
            .containers
            .iter()
            .enumerate()
            .map(|(i, c)| (format!("spec.containers[{i}]"), c))
            .chain(
                spec.init_containers
                    .iter()
                    .flatten()
                    .enumerate()
                    .map(|(i, c)| (format!("spec.initContainers[{i}]"), c)),
            );
        for (path, c) in containers {
            let r = c.resources.as_ref();
            accumulate(
                &effective_requests(r),
                &mut requests,
                &format!("{path}.resources.requests"),
            )?;
            let empty = BTreeMap::new();
            let l = r.and_then(|r| r.limits.as_ref()).unwrap_or(&empty);
            let found = accumulate(l, &mut limits, &format!("{path}.resources.limits"))?;
            if found.len() != QOS_RESOURCES.len() {
                guaranteed = false;
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return Ok(QosClass::BestEffort);
    }
    if guaranteed {
        guaranteed = requests
            .iter()
            .all(|(name, req)| limits.get(name) == Some(req));
    }
    if guaranteed && requests.len() == limits.len() {
        Ok(QosClass::Guaranteed)
    } else {
        Ok(QosClass::Burstable)
    }
}

fn memory_request(c: &Container, path: &str) -> Result<i128, QosError> {
    match effective_requests(c.resources.as_ref()).get("memory") {
        None => Ok(0),
        Some(q) => parse_bytes(q).map(i128::from).map_err(|source| {
            ResourceError::Quantity {
                field: format!("{path}.resources.requests.memory"),
                source,
            }
            .into()
        }),
    }
}

/// The kubelet's `remainingPodMemReqPerContainer`: the pod-level memory request minus the
/// containers' aggregated requests, divided by the number of containers (0 without a
/// pod-level memory request).
fn remaining_pod_memory_per_container(pod: &Pod) -> Result<i128, QosError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Err(ResourceError::MissingSpec.into());
    };
    let pod_request = match effective_requests(spec.resources.as_ref()).get("memory") {
        None => return Ok(0),
        Some(q) => parse_bytes(q).map_err(|source| ResourceError::Quantity {
            field: "spec.resources.requests.memory".into(),
            source,
        })?,
    };
    if pod_request == 0 {
        return Ok(0);
    }
    let containers = spec.containers.len() + spec.init_containers.as_ref().map_or(0, Vec::len);
    if containers == 0 {
        return Ok(0);
    }
    let aggregated = aggregate_container_requests(pod)?;
    let containers = i128::try_from(containers).unwrap_or(i128::MAX);
    Ok((i128::from(pod_request) - i128::from(aggregated.memory_bytes)) / containers)
}

fn is_sidecar(pod: &Pod, container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.init_containers.as_ref())
            .is_some_and(|ics| ics.iter().any(|ic| ic.name == container.name))
}

/// The kubelet's `GetContainerOOMScoreAdjust`. `critical` stands for the kubelet's
/// `IsNodeCriticalPod` (a critical pod, e.g. any static pod, whose priorityClassName is
/// `system-node-critical`); podvisor's callers decide how to map static pods onto it.
pub fn oom_score_adj(
    pod: &Pod,
    container: &Container,
    node_memory_capacity_bytes: u64,
    critical: bool,
) -> Result<i32, QosError> {
    if critical {
        return Ok(GUARANTEED_OOM_SCORE_ADJ);
    }
    match qos_class(pod)? {
        QosClass::Guaranteed => return Ok(GUARANTEED_OOM_SCORE_ADJ),
        QosClass::BestEffort => return Ok(BEST_EFFORT_OOM_SCORE_ADJ),
        QosClass::Burstable => {}
    }
    if node_memory_capacity_bytes == 0 {
        return Err(QosError::ZeroCapacity);
    }
    let capacity = i128::from(node_memory_capacity_bytes);
    let remaining = remaining_pod_memory_per_container(pod)?;
    let score = |request: i128| 1000 - (1000 * (request + remaining)) / capacity;
    let mut adj = score(memory_request(
        container,
        &format!("container {:?}", container.name),
    )?);
    if is_sidecar(pod, container) {
        let spec = pod.spec.as_ref().ok_or(ResourceError::MissingSpec)?;
        let mut min_request: Option<i128> = None;
        for (i, c) in spec.containers.iter().enumerate() {
            let r = memory_request(c, &format!("spec.containers[{i}]"))?;
            min_request = Some(min_request.map_or(r, |m| m.min(r)));
        }
        if let Some(m) = min_request {
            adj = adj.min(score(m));
        }
    }
    let floor = i128::from(1000 + GUARANTEED_OOM_SCORE_ADJ);
    let adj = if adj < floor {
        floor
    } else if adj == i128::from(BEST_EFFORT_OOM_SCORE_ADJ) {
        adj - 1
    } else {
        adj
    };
    // The value lies in [3, 999] here, so the conversion cannot fail.
    Ok(i32::try_from(adj).unwrap_or(BEST_EFFORT_OOM_SCORE_ADJ - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("pod json")
    }

    fn res(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> serde_json::Value {
        let m = |l: &[(&str, &str)]| {
            l.iter()
                .map(|(k, v)| ((*k).to_string(), serde_json::Value::from(*v)))
                .collect::<serde_json::Map<_, _>>()
        };
        let mut o = serde_json::Map::new();
        if !requests.is_empty() {
            o.insert("requests".into(), m(requests).into());
        }
        if !limits.is_empty() {
            o.insert("limits".into(), m(limits).into());
        }
        o.into()
    }

    fn one(resources: serde_json::Value) -> Pod {
        pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": resources}]}
        }))
    }

    #[test]
    fn qos_table_from_kubernetes_tests() {
        let cases: Vec<(Pod, QosClass)> = vec![
            (one(res(&[], &[])), QosClass::BestEffort),
            (
                one(res(&[("nvidia.com/gpu", "1")], &[])),
                QosClass::BestEffort,
            ),
            (
                one(res(&[("cpu", "0")], &[("memory", "0")])),
                QosClass::BestEffort,
            ),
            (
                one(res(&[], &[("cpu", "100m"), ("memory", "100Mi")])),
                QosClass::Guaranteed,
            ),
            (
                one(res(
                    &[("cpu", "0.1"), ("memory", "100Mi")],
                    &[("cpu", "100m"), ("memory", "100Mi")],
                )),
                QosClass::Guaranteed,
            ),
            (
                one(res(
                    &[("cpu", "100m"), ("memory", "100Mi")],
                    &[("cpu", "200m"), ("memory", "100Mi")],
                )),
                QosClass::Burstable,
            ),
            (one(res(&[], &[("cpu", "100m")])), QosClass::Burstable),
            (one(res(&[("memory", "1Gi")], &[])), QosClass::Burstable),
            (
                one(res(
                    &[],
                    &[
                        ("cpu", "100m"),
                        ("memory", "100Mi"),
                        ("nvidia.com/gpu", "2"),
                    ],
                )),
                QosClass::Guaranteed,
            ),
        ];
        for (i, (p, want)) in cases.into_iter().enumerate() {
            assert_eq!(qos_class(&p), Ok(want), "case {i}");
        }
    }

    #[test]
    fn init_containers_count_for_qos() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]
            }
        }));
        assert_eq!(qos_class(&p), Ok(QosClass::Burstable));
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                "initContainers": [{"name": "i", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]
            }
        }));
        assert_eq!(qos_class(&p), Ok(QosClass::Guaranteed));
        // Two containers: one guaranteed, one best effort -> burstable.
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b"}
            ]}
        }));
        assert_eq!(qos_class(&p), Ok(QosClass::Burstable));
    }

    #[test]
    fn pod_level_resources_decide_qos() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                "containers": [{"name": "c"}]
            }
        }));
        assert_eq!(qos_class(&p), Ok(QosClass::Guaranteed));
    }

    #[test]
    fn bad_quantity_names_the_field() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}, {"name": "d", "resources": {"limits": {"memory": "1Qi"}}}]}
        }));
        let err = qos_class(&p).expect_err("bad quantity");
        assert!(
            err.to_string()
                .starts_with("spec.containers[1].resources.requests.memory: invalid quantity"),
            "{err}"
        );
    }

    const GI: u64 = 1 << 30;

    #[test]
    fn oom_score_adj_matches_kubelet_policy_tests() {
        let c = |p: &Pod| p.spec.as_ref().expect("spec").containers[0].clone();
        let best = one(res(&[], &[]));
        assert_eq!(oom_score_adj(&best, &c(&best), 10 * GI, false), Ok(1000));
        let guaranteed = one(res(&[], &[("cpu", "1"), ("memory", "1Gi")]));
        assert_eq!(
            oom_score_adj(&guaranteed, &c(&guaranteed), 10 * GI, false),
            Ok(-997)
        );
        // Burstable: 1000 - 1000*request/capacity.
        let half = one(res(&[("memory", "5Gi")], &[("memory", "6Gi")]));
        assert_eq!(oom_score_adj(&half, &c(&half), 10 * GI, false), Ok(500));
        let tenth = one(res(&[("memory", "1Gi")], &[]));
        assert_eq!(oom_score_adj(&tenth, &c(&tenth), 10 * GI, false), Ok(900));
        // Request above capacity clamps to 3 (1000 + guaranteedOOMScoreAdj).
        let huge = one(res(&[("memory", "20Gi")], &[]));
        assert_eq!(oom_score_adj(&huge, &c(&huge), 10 * GI, false), Ok(3));
        // No memory request (cpu only) would be 1000: burstable gets 999.
        let cpu = one(res(&[("cpu", "1")], &[]));
        assert_eq!(oom_score_adj(&cpu, &c(&cpu), 10 * GI, false), Ok(999));
        // Critical pods always get -997.
        assert_eq!(oom_score_adj(&best, &c(&best), 10 * GI, true), Ok(-997));
        assert_eq!(
            oom_score_adj(&tenth, &c(&tenth), 0, false),
            Err(QosError::ZeroCapacity)
        );
    }

    #[test]
    fn pod_level_memory_request_is_shared_among_containers() {
        // Pod asks 6Gi, containers 1Gi + 1Gi: 4Gi left, 2Gi more for each container.
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "resources": {"requests": {"memory": "6Gi"}},
                "containers": [
                    {"name": "a", "resources": {"requests": {"memory": "1Gi"}}},
                    {"name": "b", "resources": {"requests": {"memory": "1Gi"}}}
                ]
            }
        }));
        let spec = p.spec.as_ref().expect("spec");
        assert_eq!(qos_class(&p), Ok(QosClass::Burstable));
        assert_eq!(
            oom_score_adj(&p, &spec.containers[0], 10 * GI, false),
            Ok(700)
        );
    }

    #[test]
    fn sidecar_never_scores_above_smallest_regular_container() {
        let p = pod(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "c", "resources": {"requests": {"memory": "5Gi"}}}],
                "initContainers": [{"name": "s", "restartPolicy": "Always",
                                    "resources": {"requests": {"memory": "1Gi"}}}]
            }
        }));
        let spec = p.spec.as_ref().expect("spec");
        let sidecar = &spec.init_containers.as_ref().expect("init")[0];
        assert_eq!(oom_score_adj(&p, sidecar, 10 * GI, false), Ok(500));
        assert_eq!(
            oom_score_adj(&p, &spec.containers[0], 10 * GI, false),
            Ok(500)
        );
    }
}
