//! cli::node: `podvisor node` — the node in `kubectl describe node`'s layout: name,
//! conditions (MemoryPressure, DiskPressure, PIDPressure with transition times), eviction
//! (the policy, why nothing is evicted under pressure, the critical pods never evicted), capacity,
//! allocatable, images, and the pods with their requests and ephemeral storage used; `-o json`
//! prints the v1 Node.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::table::kubectl_table;
use super::{render_document, write_out, CliError, OutputFormat};
use crate::api::client;

/// The describe-style text of a `GET /node` answer.
pub fn render_node(node: &Value) -> String {
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    let mut out = format!("Name:  {}\n", s(&node["metadata"]["name"]));
    if let Some(api) = node.get("apiServer").filter(|a| a.is_object()) {
        out.push_str(&format!(
            "API Server:  {} {}\n",
            s(&api["server"]),
            s(&api["state"])
        ));
        for (label, key) in [
            ("Node UID", "nodeUid"),
            ("Last Success", "lastSuccessTime"),
            ("Node Status Written", "nodeStatusTime"),
            ("Lease Renewed", "leaseRenewTime"),
        ] {
            if let Some(v) = api[key].as_str() {
                out.push_str(&format!("  {label}:\t{v}\n"));
            }
        }
        if let Some(e) = api["lastError"].as_str() {
            out.push_str(&format!(
                "  Last Error:\t{e} (at {})\n",
                s(&api["lastErrorTime"])
            ));
        }
        let mirrors = api["mirrors"].as_object().cloned().unwrap_or_default();
        let refused: Vec<String> = mirrors
            .iter()
            .filter(|(_, m)| m["state"] == "Refused")
            .map(|(k, m)| format!("{k}: {}", s(&m["message"])))
            .collect();
        out.push_str(&format!(
            "  Mirror Pods:\t{} ({} refused)\n",
            mirrors.len(),
            refused.len()
        ));
        for r in refused {
            out.push_str(&format!("    {r}\n"));
        }
    }
    out.push_str("Conditions:\n");
    let mut rows = String::from("Type\tStatus\tLastTransitionTime\tReason\tMessage\n");
    for c in node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
    {
        rows.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            s(&c["type"]),
            s(&c["status"]),
            s(&c["lastTransitionTime"]),
            s(&c["reason"]),
            s(&c["message"])
        ));
    }
    for line in kubectl_table(&rows).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    if let Some(e) = node.get("eviction").filter(|e| e.is_object()) {
        out.push_str("Eviction:\n");
        out.push_str(&format!("  Policy:\t{}\n", s(&e["policy"])));
        if let Some(m) = e["notEvicting"].as_str() {
            out.push_str(&format!("  Not Evicting:\t{m}\n"));
        }
        let never: Vec<String> = e["neverEvicted"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        if !never.is_empty() {
            out.push_str(&format!("  Never Evicted:\t{}\n", never.join(", ")));
        }
    }
    for section in ["capacity", "allocatable"] {
        let title = if section == "capacity" {
            "Capacity"
        } else {
            "Allocatable"
        };
        out.push_str(&format!("{title}:\n"));
        if let Some(m) = node["status"][section].as_object() {
            for (k, v) in m {
                out.push_str(&format!("  {k}:\t{}\n", s(v)));
            }
        }
    }
    let images = node["status"]["images"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    out.push_str(&format!("Images:  ({} in total)\n", images.len()));
    for i in &images {
        let names: Vec<String> = i["names"].as_array().into_iter().flatten().map(s).collect();
        out.push_str(&format!(
            "  {}  {} bytes\n",
            names.join(", "),
            i["sizeBytes"].as_u64().unwrap_or(0)
        ));
    }
    let pods = node["pods"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!("Pods:  ({} in total)\n", pods.len()));
    let mut rows = String::from(
        "Namespace\tName\tPhase\tReason\tCPU Requests\tMemory Requests\tEphemeral Storage Requests\tEphemeral Storage Used\n",
    );
    for p in &pods {
        rows.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            s(&p["namespace"]),
            s(&p["name"]),
            s(&p["phase"]),
            s(&p["reason"]),
            s(&p["cpuRequests"]),
            s(&p["memoryRequests"]),
            s(&p["ephemeralStorageRequests"]),
            s(&p["ephemeralStorageUsed"])
        ));
    }
    for line in kubectl_table(&rows).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

/// `podvisor node`: the node described, or as a v1 Node document (`-o json|yaml`).
pub fn get_node(socket: &Path, format: OutputFormat, out: &mut dyn Write) -> Result<(), CliError> {
    let node: serde_json::Value = client::get_json(socket, "/node")?;
    match format {
        OutputFormat::Json | OutputFormat::Yaml => {
            write_out(out, &render_document(&node, format, "the node")?)
        }
        OutputFormat::Table | OutputFormat::Wide => write_out(out, &render_node(&node)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_node_layout() {
        let node = serde_json::json!({
            "metadata": {"name": "edge1"},
            "status": {
                "capacity": {"cpu": "2000m", "memory": "4Gi"},
                "allocatable": {"cpu": "2000m", "memory": "3996Mi"},
                "conditions": [{"type": "DiskPressure", "status": "True", "reason": "KubeletHasDiskPressure", "message": "kubelet has disk pressure", "lastTransitionTime": "2026-11-24T23:00:00Z"}],
                "images": [{"names": ["docker.io/library/busybox:1.35", "sha256:ab"], "sizeBytes": 1000}],
            },
            "pods": [{"namespace": "default", "name": "web-edge1", "phase": "Failed", "reason": "Evicted", "cpuRequests": "0m", "memoryRequests": "0"}],
        });
        let text = render_node(&node);
        assert!(text.starts_with("Name:  edge1\nConditions:\n"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.contains("DiskPressure") && l.contains("True")),
            "{text}"
        );
        assert!(text.contains("KubeletHasDiskPressure"), "{text}");
        assert!(
            text.contains("Capacity:\n  cpu:\t2000m\n  memory:\t4Gi\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "Images:  (1 in total)\n  docker.io/library/busybox:1.35, sha256:ab  1000 bytes\n"
            ),
            "{text}"
        );
        assert!(text.contains("web-edge1"), "{text}");
        assert!(text.contains("Evicted"), "{text}");
        assert!(!text.contains("API Server:"), "{text}");
    }

    #[test]
    fn describe_node_shows_why_nothing_is_evicted() {
        let node = serde_json::json!({
            "metadata": {"name": "edge1"},
            "status": {"conditions": [{"type": "DiskPressure", "status": "True"}]},
            "eviction": {
                "policy": "helpful",
                "notEvicting": "not evicting for nodefs.available: 5Mi short",
                "neverEvicted": ["kube-system/etcd-edge1 (system-node-critical)", "default/dns-edge1 (priority 2000000000)"],
            },
        });
        let text = render_node(&node);
        assert!(
            text.contains(
                "Eviction:\n  Policy:\thelpful\n  Not Evicting:\tnot evicting for nodefs.available: 5Mi short\n  Never Evicted:\tkube-system/etcd-edge1 (system-node-critical), default/dns-edge1 (priority 2000000000)\n"
            ),
            "{text}"
        );
        // No pressure, no critical pod: the policy alone.
        let node = serde_json::json!({
            "metadata": {"name": "edge1"},
            "status": {},
            "eviction": {"policy": "never", "neverEvicted": []},
        });
        let text = render_node(&node);
        assert!(
            text.contains("Eviction:\n  Policy:\tnever\nCapacity:"),
            "{text}"
        );
    }

    #[test]
    fn describe_node_shows_the_api_server_connection() {
        let node = serde_json::json!({
            "metadata": {"name": "edge1"},
            "status": {},
            "apiServer": {
                "server": "https://cp:6443", "state": "Connected",
                "lastError": "PUT lease: HTTP 409 Conflict", "lastErrorTime": "2026-11-24T23:00:00Z",
                "leaseRenewTime": "2026-11-24T23:01:00Z",
                "mirrors": {
                    "default/a-edge1": {"state": "Synced"},
                    "x/b-edge1": {"state": "Refused", "message": "namespaces \"x\" not found"},
                },
            },
        });
        let text = render_node(&node);
        assert!(
            text.contains("API Server:  https://cp:6443 Connected\n"),
            "{text}"
        );
        assert!(
            text.contains("Lease Renewed:\t2026-11-24T23:01:00Z"),
            "{text}"
        );
        assert!(
            text.contains("Last Error:\tPUT lease: HTTP 409 Conflict (at 2026-11-24T23:00:00Z)"),
            "{text}"
        );
        assert!(text.contains("Mirror Pods:\t2 (1 refused)"), "{text}");
        assert!(
            text.contains("x/b-edge1: namespaces \"x\" not found"),
            "{text}"
        );
    }
}
