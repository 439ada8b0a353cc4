//! apiserver::node: the Node object podvisor registers and the status it keeps up to date
//! (the kubelet's `initialNode` and `nodestatus` setters), as JSON values built from the
//! published Snapshot and [`crate::api::node`]'s capacity, allocatable and image listing
//! (the same numbers `podvisor node` shows). Pure: the facts of the host are gathered once
//! ([`NodeFacts::gather`]) and passed in.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::api::node::NodeSource;
use crate::config::{ApiServerConfig, NodeTaint};
use crate::status::Snapshot;

/// The API level podvisor implements (k8s-openapi's `v1_35`), the `kubeletVersion` it
/// reports with its own version as build metadata.
pub const KUBELET_VERSION: &str = concat!("v1.35.0+podvisor-", env!("CARGO_PKG_VERSION"));
/// `containerRuntimeVersion`.
pub const RUNTIME_VERSION: &str = concat!("podvisor://", env!("CARGO_PKG_VERSION"));
/// The kubelet's default `maxPods`, reported as the `pods` capacity.
pub const MAX_PODS: u32 = 110;
/// Names listed per image (the kubelet's `maxNamesPerImageInNodeStatus`).
const MAX_NAMES_PER_IMAGE: usize = 5;

/// What the host is, read once at start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeFacts {
    pub node_name: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
    /// GOARCH spelling (amd64, arm64, arm).
    pub architecture: String,
    pub internal_ip: String,
    /// The node API's port (`daemonEndpoints.kubeletEndpoint.Port`), 0 when off.
    pub kubelet_port: u16,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// `std::env::consts::ARCH` as Go's GOARCH.
pub fn goarch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

impl NodeFacts {
    /// The host's facts (each empty when unreadable, as the kubelet's cadvisor leaves them).
    pub fn gather(node_name: &str, internal_ip: &str, kubelet_port: u16) -> NodeFacts {
        let os_image = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    l.strip_prefix("PRETTY_NAME=")
                        .map(|v| v.trim_matches('"').to_string())
                })
            })
            .unwrap_or_else(|| "Linux".into());
        NodeFacts {
            node_name: node_name.to_string(),
            machine_id: read_trimmed("/etc/machine-id"),
            system_uuid: read_trimmed("/sys/class/dmi/id/product_uuid").to_lowercase(),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            kernel_version: read_trimmed("/proc/sys/kernel/osrelease"),
            os_image,
            architecture: goarch().to_string(),
            internal_ip: internal_ip.to_string(),
            kubelet_port,
        }
    }
}

/// The labels a kubelet sets on its own Node, then `--node-labels`.
pub fn node_labels(facts: &NodeFacts, cfg: &ApiServerConfig) -> BTreeMap<String, String> {
    let mut l = BTreeMap::new();
    for (k, v) in [
        ("kubernetes.io/hostname", facts.node_name.as_str()),
        ("kubernetes.io/os", "linux"),
        ("kubernetes.io/arch", facts.architecture.as_str()),
        ("beta.kubernetes.io/os", "linux"),
        ("beta.kubernetes.io/arch", facts.architecture.as_str()),
    ] {
        l.insert(k.to_string(), v.to_string());
    }
    for (k, v) in &cfg.node_labels {
        l.insert(k.clone(), v.clone());
    }
    l
}

/// The labels `updateDefaultLabels` keeps in line on an existing Node.
pub const DEFAULT_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

fn taint_json(t: &NodeTaint) -> Value {
    let mut v = json!({"key": t.key, "effect": t.effect});
    if let Some(val) = &t.value {
        v["value"] = json!(val);
    }
    v
}

/// The Node to create: labels, taints (only ever set here) and a first status.
pub fn initial_node(facts: &NodeFacts, cfg: &ApiServerConfig, status: Value) -> Value {
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": facts.node_name, "labels": node_labels(facts, cfg)},
        "spec": {},
        "status": status,
    });
    if !cfg.register_with_taints.is_empty() {
        node["spec"]["taints"] =
            Value::Array(cfg.register_with_taints.iter().map(taint_json).collect());
    }
    node
}

/// cpu millicores as a canonical quantity ("2", "1500m").
fn cpu_quantity(millis: u64) -> String {
    if millis % 1000 == 0 {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

fn resources(a: Option<crate::pod::resources::Amounts>, storage: Option<u64>) -> Value {
    let mut m = Map::new();
    if let Some(a) = a {
        m.insert("cpu".into(), json!(cpu_quantity(a.cpu_millis)));
        m.insert(
            "memory".into(),
            json!(crate::pod::quantity::format_binary_si(a.memory_bytes)),
        );
    }
    if let Some(b) = storage {
        m.insert("ephemeral-storage".into(), json!(b.to_string()));
    }
    m.insert("pods".into(), json!(MAX_PODS.to_string()));
    Value::Object(m)
}

/// The images of the store as `status.images`: largest first, at most `max`, each with at
/// most five names (`repo@digest` and `repo:tag`).
pub fn images(src: &NodeSource, max: Option<usize>) -> Vec<Value> {
    let mut by_digest: BTreeMap<String, (Vec<String>, u64)> = BTreeMap::new();
    for r in crate::api::node::image_records(src) {
        let e = by_digest.entry(r.digest.clone()).or_default();
        let repo = r
            .reference
            .rsplit_once(':')
            .filter(|(repo, tag)| !tag.contains('/') && !repo.is_empty())
            .map_or(r.reference.as_str(), |(repo, _)| repo);
        for n in [format!("{repo}@{}", r.digest), r.reference.clone()] {
            if !e.0.contains(&n) {
                e.0.push(n);
            }
        }
        e.1 = e.1.max(r.size);
    }
    let mut list: Vec<(Vec<String>, u64)> = by_digest.into_values().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    list.truncate(max.unwrap_or(usize::MAX));
    list.into_iter()
        .map(|(mut names, size)| {
            names.truncate(MAX_NAMES_PER_IMAGE);
            json!({"names": names, "sizeBytes": size})
        })
        .collect()
}

/// The Ready condition as the node's client computes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    pub ready: bool,
    pub message: String,
    /// RFC 3339 of the last change.
    pub since: String,
}

/// `status` without heartbeat times (what is compared to decide whether to send it);
/// [`with_heartbeat`] adds them.
pub fn node_status(
    snap: &Snapshot,
    src: &NodeSource,
    facts: &NodeFacts,
    ready: &Readiness,
    started: &str,
    max_images: Option<usize>,
) -> Value {
    let mut conditions: Vec<Value> = snap
        .node_conditions
        .iter()
        .map(|c| {
            json!({
                "type": c.type_,
                "status": c.status,
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": if c.last_transition_time.is_empty() {
                    started
                } else {
                    c.last_transition_time.as_str()
                },
            })
        })
        .collect();
    conditions.push(json!({
        "type": "Ready",
        "status": if ready.ready { "True" } else { "False" },
        "reason": if ready.ready { "KubeletReady" } else { "KubeletNotReady" },
        "message": ready.message,
        "lastTransitionTime": ready.since,
    }));
    let mut addresses = Vec::new();
    if !facts.internal_ip.is_empty() {
        addresses.push(json!({"type": "InternalIP", "address": facts.internal_ip}));
    }
    addresses.push(json!({"type": "Hostname", "address": facts.node_name}));
    json!({
        "capacity": resources(src.capacity, src.ephemeral_storage.map(|(c, _)| c)),
        "allocatable": resources(src.allocatable, src.ephemeral_storage.map(|(_, a)| a)),
        "conditions": conditions,
        "addresses": addresses,
        "daemonEndpoints": {"kubeletEndpoint": {"Port": facts.kubelet_port}},
        "nodeInfo": {
            "machineID": facts.machine_id,
            "systemUUID": facts.system_uuid,
            "bootID": facts.boot_id,
            "kernelVersion": facts.kernel_version,
            "osImage": facts.os_image,
            "containerRuntimeVersion": RUNTIME_VERSION,
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": facts.architecture,
        },
        "images": images(src, max_images),
    })
}

/// `status` with every condition's `lastHeartbeatTime` set to `now`.
pub fn with_heartbeat(status: &Value, now: &str) -> Value {
    let mut s = status.clone();
    if let Some(cs) = s.get_mut("conditions").and_then(Value::as_array_mut) {
        for c in cs {
            c["lastHeartbeatTime"] = json!(now);
        }
    }
    s
}

/// Keeps the conditions other components set on the Node (node-problem-detector's, the node
/// controller's NetworkUnavailable) in a status podvisor writes: its own types replace theirs,
/// the others stay, as the kubelet's strategic merge by type does.
pub fn merge_foreign_conditions(ours: &mut Value, server_status: &Value) {
    let own: Vec<String> = ours["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str().map(String::from))
        .collect();
    let foreign: Vec<Value> = server_status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| !own.iter().any(|o| o == t))
        })
        .cloned()
        .collect();
    if let Some(cs) = ours.get_mut("conditions").and_then(Value::as_array_mut) {
        cs.extend(foreign);
    }
}

/// The default labels of `want` that `existing` (a Node's labels) lacks or has otherwise:
/// a merge patch for them, `None` when they match.
pub fn default_labels_patch(want: &BTreeMap<String, String>, existing: &Value) -> Option<Value> {
    let mut patch = Map::new();
    for k in DEFAULT_LABELS {
        if let Some(v) = want.get(*k) {
            if existing.get(*k).and_then(Value::as_str) != Some(v.as_str()) {
                patch.insert((*k).to_string(), json!(v));
            }
        }
    }
    (!patch.is_empty()).then(|| json!({"metadata": {"labels": patch}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::NodeConditionView;

    fn facts() -> NodeFacts {
        NodeFacts {
            node_name: "edge1".into(),
            architecture: "arm64".into(),
            internal_ip: "192.0.2.7".into(),
            kubelet_port: 10250,
            kernel_version: "6.1.0".into(),
            ..Default::default()
        }
    }

    fn cfg() -> ApiServerConfig {
        ApiServerConfig {
            kubeconfig: "/k".into(),
            register_node: true,
            node_labels: [("node.kubernetes.io/site".to_string(), "b".to_string())].into(),
            register_with_taints: vec![NodeTaint {
                key: "dedicated".into(),
                value: None,
                effect: "NoSchedule".into(),
            }],
            node_status_update_frequency: std::time::Duration::from_secs(10),
            node_status_report_frequency: std::time::Duration::from_secs(300),
            node_lease_duration: std::time::Duration::from_secs(40),
            node_status_max_images: Some(50),
            kube_api_qps: 50,
            kube_api_burst: 100,
        }
    }

    #[test]
    fn registration_has_the_kubelets_labels_and_the_taints() {
        let node = initial_node(&facts(), &cfg(), json!({}));
        let labels = &node["metadata"]["labels"];
        assert_eq!(labels["kubernetes.io/hostname"], "edge1");
        assert_eq!(labels["kubernetes.io/arch"], "arm64");
        assert_eq!(labels["kubernetes.io/os"], "linux");
        assert_eq!(labels["node.kubernetes.io/site"], "b");
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "dedicated", "effect": "NoSchedule"}])
        );
    }

    #[test]
    fn status_conditions_capacity_and_info() {
        let snap = Snapshot {
            node_conditions: vec![NodeConditionView {
                type_: "MemoryPressure".into(),
                status: "False".into(),
                reason: "KubeletHasSufficientMemory".into(),
                message: "kubelet has sufficient memory available".into(),
                last_transition_time: String::new(),
            }],
            ..Default::default()
        };
        let src = NodeSource {
            capacity: Some(crate::pod::resources::Amounts {
                cpu_millis: 4000,
                memory_bytes: 4 << 30,
            }),
            ..Default::default()
        };
        let ready = Readiness {
            ready: true,
            message: "kubelet is posting ready status".into(),
            since: "2026-01-01T00:00:00Z".into(),
        };
        let s = node_status(
            &snap,
            &src,
            &facts(),
            &ready,
            "2025-12-31T00:00:00Z",
            Some(50),
        );
        assert_eq!(s["capacity"]["cpu"], "4");
        assert_eq!(s["capacity"]["memory"], "4Gi");
        assert_eq!(s["capacity"]["pods"], "110");
        assert_eq!(
            s["conditions"][0]["lastTransitionTime"],
            "2025-12-31T00:00:00Z"
        );
        assert_eq!(s["conditions"][1]["type"], "Ready");
        assert_eq!(s["conditions"][1]["reason"], "KubeletReady");
        assert_eq!(s["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
        assert_eq!(s["nodeInfo"]["containerRuntimeVersion"], RUNTIME_VERSION);
        assert!(s["nodeInfo"]["kubeletVersion"]
            .as_str()
            .is_some_and(|v| v.starts_with("v1.35.0+podvisor-")));
        assert_eq!(s["addresses"][0]["type"], "InternalIP");
        let hb = with_heartbeat(&s, "2026-01-02T00:00:00Z");
        assert_eq!(
            hb["conditions"][1]["lastHeartbeatTime"],
            "2026-01-02T00:00:00Z"
        );
        assert!(s["conditions"][1].get("lastHeartbeatTime").is_none());

        let mut ours = s.clone();
        merge_foreign_conditions(
            &mut ours,
            &json!({"conditions": [
                {"type": "Ready", "status": "Unknown"},
                {"type": "KernelDeadlock", "status": "False"}
            ]}),
        );
        let types: Vec<&str> = ours["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, ["MemoryPressure", "Ready", "KernelDeadlock"]);
        assert_eq!(ours["conditions"][1]["status"], "True");
    }

    #[test]
    fn default_labels_are_reconciled_others_left() {
        let want = node_labels(&facts(), &cfg());
        assert_eq!(
            default_labels_patch(
                &want,
                &json!({"kubernetes.io/hostname": "edge1", "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                        "beta.kubernetes.io/arch": "arm64", "team": "x"})
            ),
            Some(json!({"metadata": {"labels": {"kubernetes.io/arch": "arm64"}}}))
        );
        let all: Value = serde_json::to_value(&want).unwrap_or_default();
        assert_eq!(default_labels_patch(&want, &all), None);
    }
}
