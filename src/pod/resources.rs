//! resources: a pod's request and limit arithmetic, the kubelet's
//! `component-helpers/resource/helpers.go`: a container's effective requests (requests
//! defaulted to limits), a pod's effective requests and limits (`PodRequests` / `PodLimits`:
//! app containers and sidecars summed, the largest init step if larger, pod-level
//! `spec.resources` replacing the sum) and whether every container declares a limit.
//!
//! A leaf: QoS ([`super::qos`]), the pod cgroup values (`cgroups::resources`), admission and the
//! OCI spec all read resources through it. `cpu` and `memory` are computed for the cgroups
//! and admission; `ephemeral-storage` for admission and the eviction manager's limits;
//! `hugepages-<size>` requests only for admission ([`pod_hugepages_requests`]); pod overhead
//! is not supported by podvisor.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::quantity::{parse_bytes, parse_cpu_millis, parse_nanos, QuantityError};

/// A resource amount of the pod could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResourceError {
    #[error("{field}: {source}")]
    Quantity {
        field: String,
        source: QuantityError,
    },
    #[error("pod has no spec")]
    MissingSpec,
}

/// A container's requests after defaulting them to its limits, as the API server does.
pub fn effective_requests(r: Option<&ResourceRequirements>) -> BTreeMap<String, Quantity> {
    let mut requests = r.and_then(|r| r.requests.clone()).unwrap_or_default();
    if let Some(limits) = r.and_then(|r| r.limits.as_ref()) {
        for (name, q) in limits {
            requests.entry(name.clone()).or_insert_with(|| q.clone());
        }
    }
    requests
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
pub fn pod_level(pod: &Pod) -> Option<&ResourceRequirements> {
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
/// rule of `PodRequests`/`PodLimits`, over any per-container amount.
fn combine<T: Copy>(
    pod: &Pod,
    kind: Kind,
    amount: impl Fn(&Container, &str, Kind) -> Result<T, ResourceError>,
    add: fn(T, T) -> T,
    max: fn(T, T) -> T,
    zero: T,
) -> Result<T, ResourceError> {
    let spec = pod.spec.as_ref().ok_or(ResourceError::MissingSpec)?;
    let mut total = zero;
    for (i, c) in spec.containers.iter().enumerate() {
        total = add(total, amount(c, &format!("spec.containers[{i}]"), kind)?);
    }
    let mut sidecars = zero;
    let mut init_max = zero;
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let a = amount(c, &format!("spec.initContainers[{i}]"), kind)?;
        if c.restart_policy.as_deref() == Some("Always") {
            // A sidecar runs next to the later init containers and the app containers.
            total = add(total, a);
            sidecars = add(sidecars, a);
            init_max = max(init_max, sidecars);
        } else {
            init_max = max(init_max, add(a, sidecars));
        }
    }
    Ok(max(total, init_max))
}

/// [`combine`] of cpu and memory; pod-level resources replace it when `pod_level_wins`.
fn aggregate(pod: &Pod, kind: Kind, pod_level_wins: bool) -> Result<Amounts, ResourceError> {
    let mut result = combine(
        pod,
        kind,
        container_amounts,
        Amounts::add,
        Amounts::max,
        Amounts::default(),
    )?;
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

/// A pod's `ephemeral-storage` request or limit (`PodRequests` / `PodLimits`; pod-level
/// resources do not support it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageAmount {
    pub bytes: u64,
    /// Written with a binary suffix (its canonical string is then `BinarySI`).
    pub binary: bool,
}

fn ephemeral_storage(pod: &Pod, kind: Kind) -> Result<Option<StorageAmount>, ResourceError> {
    let amount = |c: &Container, path: &str, kind: Kind| {
        let r = c.resources.as_ref();
        let (list, field) = match kind {
            Kind::Requests => (effective_requests(r), "requests"),
            Kind::Limits => (
                r.and_then(|r| r.limits.clone()).unwrap_or_default(),
                "limits",
            ),
        };
        list.get("ephemeral-storage")
            .map(|q| {
                parse_bytes(q)
                    .map(|bytes| StorageAmount {
                        bytes,
                        binary: super::quantity::is_binary_si(q),
                    })
                    .map_err(|source| ResourceError::Quantity {
                        field: format!("{path}.resources.{field}.ephemeral-storage"),
                        source,
                    })
            })
            .transpose()
    };
    fn add(a: Option<StorageAmount>, b: Option<StorageAmount>) -> Option<StorageAmount> {
        match (a, b) {
            (Some(a), Some(b)) => Some(StorageAmount {
                bytes: a.bytes.saturating_add(b.bytes),
                binary: a.binary,
            }),
            (a, b) => a.or(b),
        }
    }
    fn max(a: Option<StorageAmount>, b: Option<StorageAmount>) -> Option<StorageAmount> {
        match (a, b) {
            (Some(a), Some(b)) if b.bytes > a.bytes => Some(b),
            (a, b) => a.or(b),
        }
    }
    combine(pod, kind, amount, add, max, None)
}

/// The pod's `ephemeral-storage` requests (admission); `None` when no container names it.
pub fn pod_ephemeral_storage_requests(pod: &Pod) -> Result<Option<StorageAmount>, ResourceError> {
    ephemeral_storage(pod, Kind::Requests)
}

/// The pod's `ephemeral-storage` limit (the sum of the containers' limits, by the
/// `PodLimits` rule); `None` when no container sets one.
pub fn pod_ephemeral_storage_limit(pod: &Pod) -> Result<Option<StorageAmount>, ResourceError> {
    ephemeral_storage(pod, Kind::Limits)
}

/// Whether every app container declares a positive limit of `name` (init containers are not
/// looked at, as in the kubelet), or the pod-level resources set one.
pub fn limits_declared(pod: &Pod, name: &str) -> Result<bool, ResourceError> {
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

/// The pod's effective `hugepages-<size>` requests in bytes, by resource name, with the rule of
/// `PodRequests` (app containers and sidecars summed, the largest init step if larger,
/// pod-level `spec.resources` replacing the sum of a resource it names). Names are kept as the
/// manifest spells them: the kubelet compares resource names as strings too.
pub fn pod_hugepages_requests(pod: &Pod) -> Result<BTreeMap<String, u64>, ResourceError> {
    let spec = pod.spec.as_ref().ok_or(ResourceError::MissingSpec)?;
    let is_huge = |n: &String| n.starts_with("hugepages-");
    let request = |c: &Container, path: String, name: &str| -> Result<u64, ResourceError> {
        effective_requests(c.resources.as_ref())
            .get(name)
            .map(|q| {
                parse_bytes(q).map_err(|source| ResourceError::Quantity {
                    field: format!("{path}.resources.requests.{name}"),
                    source,
                })
            })
            .transpose()
            .map(Option::unwrap_or_default)
    };
    let pod_level = spec.resources.as_ref().map(|r| effective_requests(Some(r)));
    let mut names: Vec<String> = pod_level.iter().flat_map(|m| m.keys()).cloned().collect();
    for c in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        names.extend(effective_requests(c.resources.as_ref()).into_keys());
    }
    names.retain(is_huge);
    names.sort();
    names.dedup();
    let mut out = BTreeMap::new();
    for name in names {
        if let Some(q) = pod_level.as_ref().and_then(|m| m.get(&name)) {
            let v = parse_bytes(q).map_err(|source| ResourceError::Quantity {
                field: format!("spec.resources.requests.{name}"),
                source,
            })?;
            out.insert(name, v);
            continue;
        }
        let mut total = 0u64;
        for (i, c) in spec.containers.iter().enumerate() {
            total = total.saturating_add(request(c, format!("spec.containers[{i}]"), &name)?);
        }
        let (mut sidecars, mut init_max) = (0u64, 0u64);
        for (i, c) in spec.init_containers.iter().flatten().enumerate() {
            let v = request(c, format!("spec.initContainers[{i}]"), &name)?;
            if c.restart_policy.as_deref() == Some("Always") {
                total = total.saturating_add(v);
                sidecars = sidecars.saturating_add(v);
                init_max = init_max.max(sidecars);
            } else {
                init_max = init_max.max(v.saturating_add(sidecars));
            }
        }
        out.insert(name, total.max(init_max));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("pod json")
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
    fn ephemeral_storage_limits_sum_and_keep_the_first_format() {
        let p = pod(serde_json::json!({"metadata": {"name": "e"}, "spec": {
            "initContainers": [
                {"name": "i", "resources": {"limits": {"ephemeral-storage": "300Mi"}}}
            ],
            "containers": [
                {"name": "a", "resources": {"limits": {"ephemeral-storage": "100Mi"}}},
                {"name": "b", "resources": {"requests": {"ephemeral-storage": "1G"}}},
                {"name": "c", "resources": {"limits": {"ephemeral-storage": "50Mi"}}}
            ]
        }}));
        // Apps 150Mi, the init step 300Mi: the larger wins.
        assert_eq!(
            pod_ephemeral_storage_limit(&p).expect("limit"),
            Some(StorageAmount {
                bytes: 300 << 20,
                binary: true
            })
        );
        // Requests default to limits: 100Mi + 1G + 50Mi.
        assert_eq!(
            pod_ephemeral_storage_requests(&p)
                .expect("requests")
                .map(|a| a.bytes),
            Some((150 << 20) + 1_000_000_000)
        );
        let none = pod(serde_json::json!({"metadata": {"name": "n"}, "spec": {
            "containers": [{"name": "a", "resources": {"limits": {"memory": "1Gi"}}}]
        }}));
        assert_eq!(pod_ephemeral_storage_limit(&none).expect("limit"), None);
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

    #[test]
    fn hugepages_requests_by_name_with_the_pod_requests_rule() {
        let p = pod(serde_json::json!({"metadata": {"name": "h"}, "spec": {
            "initContainers": [
                {"name": "i1", "resources": {"limits": {"hugepages-2Mi": "8Mi"}}},
                {"name": "s", "restartPolicy": "Always", "resources": {"limits": {"hugepages-2Mi": "2Mi"}}}
            ],
            "containers": [
                {"name": "a", "resources": {"limits": {"hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"hugepages-2Mi": "2Mi"}}}
            ]
        }}));
        let want: BTreeMap<String, u64> = [
            ("hugepages-1Gi".to_string(), 1 << 30),
            // apps 4Mi + sidecar 2Mi = 6Mi < the first init step's 8Mi
            ("hugepages-2Mi".to_string(), 8 << 20),
        ]
        .into();
        assert_eq!(pod_hugepages_requests(&p).expect("requests"), want);
        let none = pod(serde_json::json!({"metadata": {"name": "n"}, "spec": {
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}}));
        assert!(pod_hugepages_requests(&none).expect("none").is_empty());
        let level = pod(serde_json::json!({"metadata": {"name": "l"}, "spec": {
            "resources": {"limits": {"hugepages-2Mi": "20Mi"}},
            "containers": [{"name": "a", "resources": {"limits": {"hugepages-2Mi": "2Mi"}}}]}}));
        assert_eq!(
            pod_hugepages_requests(&level).expect("level")["hugepages-2Mi"],
            20 << 20
        );
        let bad = pod(serde_json::json!({"metadata": {"name": "b"}, "spec": {
            "containers": [{"name": "a", "resources": {"limits": {"hugepages-2Mi": "x"}}}]}}));
        let e = pod_hugepages_requests(&bad).expect_err("bad");
        assert!(
            e.to_string()
                .starts_with("spec.containers[0].resources.requests.hugepages-2Mi"),
            "{e}"
        );
    }
}
