//! api::node: `GET /node` — the node as a v1 Node (kubectl's shape): name, capacity and
//! allocatable (cpu, memory, ephemeral-storage), the pressure conditions the eviction manager publishes, the
//! images in the store, and (podvisor's addition, for `podvisor node`) the pods with their
//! requests and their ephemeral storage as the eviction manager last measured it, and its
//! eviction state (`eviction`: the policy, why it evicts nothing under pressure, the pods it
//! never evicts). Built as JSON values: no new serde code for the Kubernetes types.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::images::ImageStore;
use crate::pod::quantity::format_canonical_bytes;
use crate::pod::resources::{pod_ephemeral_storage_requests, pod_requests, Amounts};
use crate::status::Snapshot;

/// What the node endpoint knows besides the snapshot (fixed at start).
#[derive(Debug, Clone, Default)]
pub struct NodeSource {
    pub capacity: Option<Amounts>,
    pub allocatable: Option<Amounts>,
    /// `ephemeral-storage` (the root dir's filesystem): capacity and allocatable bytes.
    pub ephemeral_storage: Option<(u64, u64)>,
    /// The pods' ephemeral storage, as the eviction manager last measured it.
    pub storage: crate::status::StorageUsageCell,
    /// `--eviction-policy` (`helpful` or `never`; empty when there is no eviction manager).
    pub eviction_policy: String,
    /// Why the eviction manager evicted nothing at its last pass although a threshold is met.
    pub not_evicting: crate::status::NotEvictingCell,
    /// The image store (`<root>/images`), listed read-only per request.
    pub images_dir: Option<PathBuf>,
    /// The API server connection (`--kubeconfig`), shown as `apiServer`.
    pub api_server: crate::status::ApiServerCell,
}

/// The images in the store (none when it cannot be opened).
pub fn image_records(src: &NodeSource) -> Vec<crate::images::ImageRecord> {
    src.images_dir
        .as_ref()
        .and_then(|dir| ImageStore::open_as_is(dir).ok())
        .and_then(|store| store.list().ok())
        .unwrap_or_default()
}

fn resources(a: Option<Amounts>, ephemeral_storage: Option<u64>) -> Value {
    let mut v = match a {
        None => json!({}),
        Some(a) => json!({
            "cpu": format!("{}m", a.cpu_millis),
            "memory": crate::pod::quantity::format_binary_si(a.memory_bytes),
        }),
    };
    if let Some(b) = ephemeral_storage {
        v["ephemeral-storage"] = json!(b.to_string());
    }
    v
}

/// Bytes as a short size (`12Mi`, `340Ki`, `0`), rounded down: how `podvisor node` shows usage.
fn short_bytes(b: u64) -> String {
    match b {
        0 => "0".into(),
        b if b >= 1 << 30 => format!("{}Gi", b >> 30),
        b if b >= 1 << 20 => format!("{}Mi", b >> 20),
        b => format!("{}Ki", b.div_ceil(1024)),
    }
}

/// podvisor's eviction state: the policy, why nothing is evicted under pressure (if so), and
/// the pods never evicted (critical ones, with their priority class).
fn eviction_json(snap: &Snapshot, src: &NodeSource) -> Value {
    let never: Vec<String> = snap
        .pods
        .iter()
        .filter_map(|v| {
            let why = crate::pod::priority::critical_reason(&v.pod)?;
            Some(format!("{} ({why})", crate::status::full_name(&v.pod)))
        })
        .collect();
    let mut e = json!({"policy": src.eviction_policy, "neverEvicted": never});
    if let Some(m) = src.not_evicting.get() {
        e["notEvicting"] = json!(&*m);
    }
    e
}

/// The node as JSON.
pub fn node_json(snap: &Snapshot, src: &NodeSource) -> Value {
    let mut images = Vec::new();
    let mut by_digest: std::collections::BTreeMap<String, (Vec<String>, u64)> = Default::default();
    for r in image_records(src) {
        let e = by_digest.entry(r.digest.clone()).or_default();
        e.0.push(r.reference.clone());
        e.1 = r.size;
    }
    for (digest, (mut names, size)) in by_digest {
        names.push(digest);
        images.push(json!({"names": names, "sizeBytes": size}));
    }
    let usage = src.storage.get();
    let pods: Vec<Value> = snap
        .pods
        .iter()
        .map(|v| {
            let r = pod_requests(&v.pod).unwrap_or_default();
            let storage_requests = pod_ephemeral_storage_requests(&v.pod)
                .ok()
                .flatten()
                .map_or("0".into(), |a| format_canonical_bytes(a.bytes, a.binary));
            let used = v
                .pod
                .metadata
                .uid
                .as_ref()
                .and_then(|u| usage.get(u))
                .map_or(String::new(), |u| short_bytes(u.used_bytes));
            let st = v.pod.status.as_ref();
            json!({
                "namespace": v.pod.metadata.namespace.as_deref().unwrap_or("default"),
                "name": v.pod.metadata.name.as_deref().unwrap_or(""),
                "phase": st.and_then(|s| s.phase.as_deref()).unwrap_or(""),
                "reason": st.and_then(|s| s.reason.as_deref()).unwrap_or(""),
                "cpuRequests": format!("{}m", r.cpu_millis),
                "memoryRequests": crate::pod::quantity::format_binary_si(r.memory_bytes),
                "ephemeralStorageRequests": storage_requests,
                "ephemeralStorageUsed": used,
            })
        })
        .collect();
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": snap.node_name},
        "status": {
            "capacity": resources(src.capacity, src.ephemeral_storage.map(|(c, _)| c)),
            "allocatable": resources(src.allocatable, src.ephemeral_storage.map(|(_, a)| a)),
            "conditions": snap.node_conditions,
            "images": images,
        },
        "pods": pods,
    });
    node["eviction"] = eviction_json(snap, src);
    if let Some(view) = src.api_server.get() {
        node["apiServer"] = serde_json::to_value(&*view).unwrap_or_default();
    }
    node
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::handlers::tests::view;

    #[test]
    fn the_eviction_state_policy_reason_and_critical_pods() {
        let mut etcd = view("kube-system", "etcd-n1", &["etcd"]);
        if let Some(spec) = etcd.pod.spec.as_mut() {
            spec.priority_class_name = Some("system-node-critical".into());
        }
        let snap = Snapshot {
            node_name: "n1".into(),
            pods: vec![view("default", "web-n1", &["app"]), etcd],
            ..Default::default()
        };
        let src = NodeSource {
            eviction_policy: "helpful".into(),
            ..Default::default()
        };
        assert_eq!(
            node_json(&snap, &src)["eviction"],
            json!({"policy": "helpful", "neverEvicted": ["kube-system/etcd-n1 (system-node-critical)"]})
        );
        src.not_evicting
            .set(Some("not evicting for nodefs.available: 5Mi short".into()));
        assert_eq!(
            node_json(&snap, &src)["eviction"]["notEvicting"],
            "not evicting for nodefs.available: 5Mi short"
        );
        src.not_evicting.set(None);
        assert!(node_json(&snap, &src)["eviction"]
            .get("notEvicting")
            .is_none());
    }
}
