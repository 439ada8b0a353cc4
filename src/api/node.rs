//! api::node: `GET /node` — the node as a v1 Node (kubectl's shape): name, capacity and
//! allocatable (cpu, memory), the pressure conditions the eviction manager publishes, the
//! images in the store, and (podvisor's addition, for `podvisor node`) the pods with their
//! requests. Built as JSON values: no new serde code for the Kubernetes types.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::images::ImageStore;
use crate::pod::resources::{pod_requests, Amounts};
use crate::status::Snapshot;

/// What the node endpoint knows besides the snapshot (fixed at start).
#[derive(Debug, Clone, Default)]
pub struct NodeSource {
    pub capacity: Option<Amounts>,
    pub allocatable: Option<Amounts>,
    /// The image store (`<root>/images`), listed read-only per request.
    pub images_dir: Option<PathBuf>,
}

fn resources(a: Option<Amounts>) -> Value {
    match a {
        None => json!({}),
        Some(a) => json!({
            "cpu": format!("{}m", a.cpu_millis),
            "memory": crate::pod::quantity::format_binary_si(a.memory_bytes),
        }),
    }
}

/// The node as JSON.
pub fn node_json(snap: &Snapshot, src: &NodeSource) -> Value {
    let mut images = Vec::new();
    if let Some(dir) = &src.images_dir {
        if let Ok(store) = ImageStore::open_as_is(dir) {
            let mut by_digest: std::collections::BTreeMap<String, (Vec<String>, u64)> =
                Default::default();
            for r in store.list().unwrap_or_default() {
                let e = by_digest.entry(r.digest.clone()).or_default();
                e.0.push(r.reference.clone());
                e.1 = r.size;
            }
            for (digest, (mut names, size)) in by_digest {
                names.push(digest);
                images.push(json!({"names": names, "sizeBytes": size}));
            }
        }
    }
    let pods: Vec<Value> = snap
        .pods
        .iter()
        .map(|v| {
            let r = pod_requests(&v.pod).unwrap_or_default();
            let st = v.pod.status.as_ref();
            json!({
                "namespace": v.pod.metadata.namespace.as_deref().unwrap_or("default"),
                "name": v.pod.metadata.name.as_deref().unwrap_or(""),
                "phase": st.and_then(|s| s.phase.as_deref()).unwrap_or(""),
                "reason": st.and_then(|s| s.reason.as_deref()).unwrap_or(""),
                "cpuRequests": format!("{}m", r.cpu_millis),
                "memoryRequests": crate::pod::quantity::format_binary_si(r.memory_bytes),
            })
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": snap.node_name},
        "status": {
            "capacity": resources(src.capacity),
            "allocatable": resources(src.allocatable),
            "conditions": snap.node_conditions,
            "images": images,
        },
        "pods": pods,
    })
}
