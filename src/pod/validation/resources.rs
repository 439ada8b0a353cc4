//! pod::validation::resources: a container's or the pod's `resources` as the API server
//! checks them (resource names, quantities, requests against limits, what must not be
//! overcommitted).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{check_qualified_name, quantity, Errors, STATIC_REF};

fn is_known_resource(name: &str) -> bool {
    match name {
        "cpu" | "memory" | "ephemeral-storage" => true,
        _ => is_hugepages(name) || is_extended_resource(name),
    }
}

fn is_hugepages(name: &str) -> bool {
    name.strip_prefix("hugepages-")
        .is_some_and(|size| quantity::parse_bytes(&Quantity(size.to_string())).is_ok_and(|b| b > 0))
}

/// The API's extended resource name (`IsExtendedResourceName`): domain-qualified, outside
/// the `kubernetes.io` domain, not `requests.`-prefixed, and a valid qualified name with
/// `requests.` in front (as quota names it).
fn is_extended_resource(name: &str) -> bool {
    name.contains('/')
        && !name.contains("kubernetes.io/")
        && !name.starts_with("requests.")
        && check_qualified_name(&format!("requests.{name}")).is_ok()
}

/// Requests must equal limits (the API's `IsOvercommitAllowed` is false): extended
/// resources and hugepages.
fn is_non_overcommitable(name: &str) -> bool {
    is_hugepages(name) || is_extended_resource(name)
}

pub(super) fn validate_resources(
    r: &ResourceRequirements,
    field: &str,
    pod_level: bool,
    v: &mut Errors,
) {
    let mut parsed: [BTreeMap<&str, u128>; 2] = [BTreeMap::new(), BTreeMap::new()];
    for (slot, (kind, map)) in [("requests", &r.requests), ("limits", &r.limits)]
        .into_iter()
        .enumerate()
    {
        for (name, q) in map.iter().flatten() {
            let rf = format!("{field}.{kind}{}", bracket(name));
            // The API server's `supportedPodLevelResources` (no ephemeral-storage).
            if pod_level && (is_extended_resource(name) || name == "ephemeral-storage") {
                v.push(
                    &rf,
                    format!("unsupported value {name:?}: pod-level resources support cpu, memory and hugepages-<size>"),
                );
                continue;
            }
            if !is_known_resource(name) {
                v.push(
                    &rf,
                    format!("unknown resource {name:?} (podvisor knows cpu, memory, ephemeral-storage, hugepages-<size> and extended resources <domain>/<name>)"),
                );
                continue;
            }
            match quantity::parse_nanos(q) {
                Ok(n) if is_extended_resource(name) && n % 1_000_000_000 != 0 => {
                    v.push(&rf, format!("{:?} must be an integer", q.0));
                }
                Ok(n) => {
                    parsed[slot].insert(name.as_str(), n);
                }
                Err(e) => v.push(&rf, e.to_string()),
            }
        }
    }
    let quantity_of = |m: &Option<BTreeMap<String, Quantity>>, name: &str| {
        m.as_ref()
            .and_then(|m| m.get(name))
            .map(|q| q.0.clone())
            .unwrap_or_default()
    };
    for name in parsed[0].keys() {
        if is_non_overcommitable(name) && !parsed[1].contains_key(name) {
            v.push(
                format!("{field}.limits{}", bracket(name)),
                "Limit must be set for non overcommitable resources".to_string(),
            );
        }
    }
    for (name, req) in &parsed[0] {
        match parsed[1].get(name) {
            Some(lim) if is_non_overcommitable(name) && req != lim => v.push(
                format!("{field}.requests{}", bracket(name)),
                format!(
                    "{:?} must be equal to the {name} limit of {:?}",
                    quantity_of(&r.requests, name),
                    quantity_of(&r.limits, name)
                ),
            ),
            _ => {}
        }
    }
    let [requests, limits] = &parsed;
    for (name, req) in requests {
        if let Some(lim) = limits.get(name) {
            if req > lim && !is_non_overcommitable(name) {
                let rq = r
                    .requests
                    .as_ref()
                    .and_then(|m| m.get(*name))
                    .map(|q| q.0.as_str())
                    .unwrap_or("");
                let lq = r
                    .limits
                    .as_ref()
                    .and_then(|m| m.get(*name))
                    .map(|q| q.0.as_str())
                    .unwrap_or("");
                v.push(
                    format!("{field}.requests{}", bracket(name)),
                    format!("{rq:?} must be less than or equal to the {name} limit of {lq:?}"),
                );
            }
        }
    }
    if r.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        v.push(
            format!("{field}.claims"),
            format!("{STATIC_REF} (resource claims)"),
        );
    }
}

fn bracket(name: &str) -> String {
    format!("[{name}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_names() {
        for ok in [
            "cpu",
            "memory",
            "ephemeral-storage",
            "hugepages-2Mi",
            "hugepages-1Gi",
        ] {
            assert!(is_known_resource(ok), "{ok}");
        }
        for ext in ["nvidia.com/gpu", "example.com/foo", "squat.ai/serial"] {
            assert!(is_known_resource(ext) && is_extended_resource(ext), "{ext}");
        }
        for bad in [
            "gpu",
            "hugepages-",
            "hugepages-x",
            "CPU",
            "kubernetes.io/foo",
            "requests.example.com/foo",
            "example.com/",
            "-bad.com/x",
        ] {
            assert!(!is_known_resource(bad), "{bad}");
        }
    }
}
