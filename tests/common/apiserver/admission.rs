//! NodeRestriction (plugin/pkg/admission/noderestriction), for users `system:node:<name>` in
//! `system:nodes`: what a node may create, update and delete, with the plugin's messages.

use serde_json::Value;

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str().unwrap_or("")
}

fn label_namespace(k: &str) -> &str {
    k.split_once('/').map_or("", |(n, _)| n)
}

fn in_domain(ns: &str, d: &str) -> bool {
    ns == d || ns.ends_with(&format!(".{d}"))
}

const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

fn forbidden_label(k: &str) -> bool {
    let ns = label_namespace(k);
    if in_domain(ns, "node-restriction.kubernetes.io") {
        return true;
    }
    let kube = in_domain(ns, "kubernetes.io") || in_domain(ns, "k8s.io");
    let kubelet = KUBELET_LABELS.contains(&k)
        || in_domain(ns, "kubelet.kubernetes.io")
        || in_domain(ns, "node.kubernetes.io");
    kube && !kubelet
}

fn modified_labels(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let empty = serde_json::Map::new();
    let am = a.as_object().unwrap_or(&empty);
    let bm = b.as_object().unwrap_or(&empty);
    for (k, v) in am {
        if bm.get(k) != Some(v) {
            out.push(k.clone());
        }
    }
    for (k, v) in bm {
        if am.get(k) != Some(v) && !out.contains(k) {
            out.push(k.clone());
        }
    }
    out.sort();
    out
}

/// A pod create by node `node`; `node_uid` the Node's uid if it exists.
pub fn pod_create(node: &str, pod: &Value, node_uid: Option<&str>) -> Result<(), String> {
    if pod["metadata"]["annotations"]["kubernetes.io/config.mirror"].is_null() {
        return Err(format!(
            "pod does not have \"kubernetes.io/config.mirror\" annotation, node {node:?} can only create mirror pods"
        ));
    }
    if s(pod, &["spec", "nodeName"]) != node {
        return Err(format!(
            "node {node:?} can only create pods with spec.nodeName set to itself"
        ));
    }
    let owners = pod["metadata"]["ownerReferences"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if owners.len() > 1 {
        return Err(format!(
            "node {node:?} can only create pods with a single owner reference set to itself"
        ));
    }
    let Some(o) = owners.first() else {
        return Err(format!(
            "node {node:?} can only create pods with an owner reference set to itself"
        ));
    };
    if s(o, &["apiVersion"]) != "v1" || s(o, &["kind"]) != "Node" || s(o, &["name"]) != node {
        return Err(format!(
            "node {node:?} can only create pods with an owner reference set to itself"
        ));
    }
    if o["controller"] != true {
        return Err(format!(
            "node {node:?} can only create pods with a controller owner reference set to itself"
        ));
    }
    if o["blockOwnerDeletion"] == true {
        return Err(format!(
            "node {node:?} must not set blockOwnerDeletion on an owner reference"
        ));
    }
    match node_uid {
        None => return Err(format!("nodes {node:?} not found")),
        Some(uid) if uid != s(o, &["uid"]) => {
            return Err(format!(
                "node {node} UID mismatch: expected {} got {uid}",
                s(o, &["uid"])
            ))
        }
        _ => {}
    }
    let spec = &pod["spec"];
    if !s(spec, &["serviceAccountName"]).is_empty() {
        return Err(format!(
            "node {node:?} can not create pods that reference a service account"
        ));
    }
    let mut secrets = spec["imagePullSecrets"]
        .as_array()
        .is_some_and(|a| !a.is_empty());
    let mut cms = false;
    let mut pvcs = false;
    let mut ctb = false;
    for v in spec["volumes"].as_array().into_iter().flatten() {
        secrets |= !v["secret"].is_null();
        cms |= !v["configMap"].is_null();
        pvcs |= !v["persistentVolumeClaim"].is_null();
        for src in v["projected"]["sources"].as_array().into_iter().flatten() {
            secrets |= !src["secret"].is_null();
            cms |= !src["configMap"].is_null();
            ctb |= !src["clusterTrustBundle"].is_null();
        }
    }
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in spec[list].as_array().into_iter().flatten() {
            for e in c["env"].as_array().into_iter().flatten() {
                secrets |= !e["valueFrom"]["secretKeyRef"].is_null();
                cms |= !e["valueFrom"]["configMapKeyRef"].is_null();
            }
            for e in c["envFrom"].as_array().into_iter().flatten() {
                secrets |= !e["secretRef"].is_null();
                cms |= !e["configMapRef"].is_null();
            }
        }
    }
    for (bad, what) in [
        (secrets, "secrets"),
        (cms, "configmaps"),
        (ctb, "clustertrustbundles"),
        (pvcs, "persistentvolumeclaims"),
    ] {
        if bad {
            return Err(format!(
                "node {node:?} can not create pods that reference {what}"
            ));
        }
    }
    Ok(())
}

/// A pod status update by node `node`.
pub fn pod_status(node: &str, old: &Value, new: &Value) -> Result<(), String> {
    if s(old, &["spec", "nodeName"]) != node {
        return Err(format!(
            "node {node:?} can only update pod status for pods with spec.nodeName set to itself"
        ));
    }
    if !modified_labels(&old["metadata"]["labels"], &new["metadata"]["labels"]).is_empty() {
        return Err(format!(
            "node {node:?} cannot update labels through pod status"
        ));
    }
    Ok(())
}

/// A pod delete by node `node`.
pub fn pod_delete(node: &str, pod: &Value) -> Result<(), String> {
    if s(pod, &["spec", "nodeName"]) != node {
        return Err(format!(
            "node {node:?} can only delete pods with spec.nodeName set to itself"
        ));
    }
    Ok(())
}

/// A Node create or update (`old` for updates) by node `node`.
pub fn node_write(node: &str, name: &str, new: &Value, old: Option<&Value>) -> Result<(), String> {
    if name != node {
        return Err(format!(
            "node {node:?} is not allowed to modify node {name:?}"
        ));
    }
    let old_labels = old.map_or(Value::Null, |o| o["metadata"]["labels"].clone());
    let forbidden: Vec<String> = modified_labels(&new["metadata"]["labels"], &old_labels)
        .into_iter()
        .filter(|k| forbidden_label(k))
        .collect();
    match old {
        None => {
            if !forbidden.is_empty() {
                return Err(format!(
                    "node {node:?} is not allowed to set the following labels: {}",
                    forbidden.join(", ")
                ));
            }
        }
        Some(old) => {
            if new["spec"]["taints"] != old["spec"]["taints"] {
                return Err(format!("node {node:?} is not allowed to modify taints"));
            }
            if !forbidden.is_empty() {
                return Err(format!(
                    "is not allowed to modify labels: {}",
                    forbidden.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// A lease write by node `node` (`name`: the lease's).
pub fn lease(node: &str, namespace: &str, name: &str) -> Result<(), String> {
    if namespace != "kube-node-lease" {
        return Err("can only access leases in the \"kube-node-lease\" system namespace".into());
    }
    if name != node {
        return Err("can only access node lease with the same name as the requesting node".into());
    }
    Ok(())
}
