//! apiserver::mirror: the decisions about mirror pods, pure and table-tested (the kubelet's
//! `mirror_client.go` and the status manager's merge rules):
//!
//! - [`mirror_body`]: the mirror pod of a static pod: its metadata and spec, annotation
//!   `kubernetes.io/config.mirror` = the config hash, exactly one ownerReference (the Node,
//!   `controller: true`, no `blockOwnerDeletion`), `spec.nodeName`; and podvisor's
//!   `podvisor.io/mirror-meta` hash of the labels and annotations, so a label edit (which
//!   keeps the static pod's uid) replaces the mirror as the kubelet's new hash would;
//! - [`node_restriction_refusal`]: what NodeRestriction refuses in a mirror pod, checked
//!   before asking;
//! - [`plan`]: creates and deletes (with the mirror's uid as precondition) from the published
//!   Snapshot and the mirror pods the API server holds, matched by name and the mirror
//!   annotation, never by uid (a mirror pod's uid is the API server's own);
//! - [`status_patch`]: the merge patch bringing a mirror pod's status to the static pod's:
//!   the fields the kubelet owns, conditions of other writers kept, resourceVersion and uid
//!   as preconditions.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::patch::merge_diff;
use crate::staticpod::{CONFIG_HASH_ANNOTATION, CONFIG_SEEN_ANNOTATION};
use crate::status::{full_name, PodView, Snapshot};

/// The mirror annotation (its value: the static pod's config hash).
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// podvisor's hash of the static pod's labels and annotations, on its mirror pod.
pub const MIRROR_META_ANNOTATION: &str = "podvisor.io/mirror-meta";

/// Status fields the kubelet owns (`qosClass` is the API server's, computed at creation).
const KUBELET_STATUS_FIELDS: &[&str] = &[
    "phase",
    "conditions",
    "message",
    "reason",
    "hostIP",
    "hostIPs",
    "podIP",
    "podIPs",
    "startTime",
    "initContainerStatuses",
    "containerStatuses",
    "ephemeralContainerStatuses",
];

/// Condition types the kubelet sets (`kubetypes.PodConditionsByKubelet`); others'
/// conditions on a mirror pod are kept.
const KUBELET_CONDITIONS: &[&str] = &[
    "PodScheduled",
    "Ready",
    "Initialized",
    "ContainersReady",
    "PodReadyToStartContainers",
];

/// A mirror pod as the API server holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    /// `kubernetes.io/config.mirror`.
    pub hash: String,
    /// `podvisor.io/mirror-meta` (empty when absent).
    pub meta: String,
    /// The uid of its controller ownerReference of kind Node.
    pub owner_uid: Option<String>,
    /// Deletion requested (a graceful delete of a pod bound to a node only marks it).
    pub deleting: bool,
    pub status: Value,
}

impl MirrorPod {
    /// The mirror pod in a Pod from the API server; `None` for a pod that is not a mirror pod.
    pub fn from_api(v: &Value) -> Option<MirrorPod> {
        let m = v.get("metadata")?;
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let ann = m.get("annotations");
        let hash = ann?.get(MIRROR_ANNOTATION)?.as_str()?.to_string();
        let owner_uid = m
            .get("ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|o| o["kind"] == "Node" && o["controller"] == true)
            .map(|o| s(o, "uid"));
        Some(MirrorPod {
            namespace: s(m, "namespace"),
            name: s(m, "name"),
            uid: s(m, "uid"),
            resource_version: s(m, "resourceVersion"),
            hash,
            meta: ann
                .and_then(|a| a.get(MIRROR_META_ANNOTATION))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            owner_uid,
            deleting: m.get("deletionTimestamp").is_some_and(|t| !t.is_null()),
            status: v.get("status").cloned().unwrap_or_else(|| json!({})),
        })
    }

    pub fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The static pod's config hash.
pub fn config_hash(pod: &Pod) -> &str {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION))
        .map_or_else(|| pod.metadata.uid.as_deref().unwrap_or(""), String::as_str)
}

/// Hash of the labels and annotations a mirror pod copies (`config.seen` left out: it is
/// when podvisor read the manifest, not what it says).
pub fn meta_hash(pod: &Pod) -> String {
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    let mut ann = pod.metadata.annotations.clone().unwrap_or_default();
    ann.remove(CONFIG_SEEN_ANNOTATION);
    let doc = json!({"labels": labels, "annotations": ann});
    hex::encode(&Sha256::digest(doc.to_string().as_bytes())[..8])
}

/// The mirror pod to create for `pod` on node `node_name` with uid `node_uid`.
pub fn mirror_body(pod: &Pod, node_name: &str, node_uid: &str) -> Value {
    let mut p = pod.clone();
    p.status = None;
    let meta = meta_hash(pod);
    let m = &mut p.metadata;
    m.uid = None;
    m.resource_version = None;
    m.creation_timestamp = None;
    m.deletion_timestamp = None;
    m.deletion_grace_period_seconds = None;
    m.generation = None;
    m.managed_fields = None;
    m.self_link = None;
    m.generate_name = None;
    m.owner_references = None;
    let ann = m.annotations.get_or_insert_with(Default::default);
    ann.insert(MIRROR_ANNOTATION.into(), config_hash(pod).to_string());
    ann.insert(MIRROR_META_ANNOTATION.into(), meta);
    let mut v = serde_json::to_value(&p).unwrap_or_else(|_| json!({}));
    v["apiVersion"] = json!("v1");
    v["kind"] = json!("Pod");
    v["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "v1",
        "kind": "Node",
        "name": node_name,
        "uid": node_uid,
        "controller": true,
    }]);
    v["spec"]["nodeName"] = json!(node_name);
    v
}

/// Why NodeRestriction would refuse `pod`'s mirror pod, in its words; `None` if it may be
/// created. (Manifest validation already refuses these for static pods; this guards pods
/// from records written by older versions and keeps the rule in one place.)
pub fn node_restriction_refusal(pod: &Pod, node_name: &str) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let node = format!("node {node_name:?}");
    if spec
        .service_account_name
        .as_deref()
        .is_some_and(|s| !s.is_empty())
    {
        return Some(format!(
            "{node} can not create pods that reference a service account"
        ));
    }
    let mut secrets = spec
        .image_pull_secrets
        .as_ref()
        .is_some_and(|s| !s.is_empty());
    let mut config_maps = false;
    let mut pvcs = false;
    let mut bundles = false;
    for v in spec.volumes.iter().flatten() {
        secrets |= v.secret.is_some();
        config_maps |= v.config_map.is_some();
        pvcs |= v.persistent_volume_claim.is_some();
        for src in v.projected.iter().flat_map(|p| p.sources.iter().flatten()) {
            secrets |= src.secret.is_some();
            config_maps |= src.config_map.is_some();
            bundles |= src.cluster_trust_bundle.is_some();
        }
    }
    let containers = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten());
    for c in containers {
        for e in c.env.iter().flatten() {
            if let Some(from) = &e.value_from {
                secrets |= from.secret_key_ref.is_some();
                config_maps |= from.config_map_key_ref.is_some();
            }
        }
        for e in c.env_from.iter().flatten() {
            secrets |= e.secret_ref.is_some();
            config_maps |= e.config_map_ref.is_some();
        }
    }
    let what = [
        (secrets, "secrets"),
        (config_maps, "configmaps"),
        (bundles, "clustertrustbundles"),
        (pvcs, "persistentvolumeclaims"),
    ];
    what.iter()
        .find(|(present, _)| *present)
        .map(|(_, w)| format!("{node} can not create pods that reference {w}"))
}

/// One request to make.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorAction {
    /// Create the mirror pod of the static pod `pod` (`namespace/name`).
    Create { pod: String, body: Value },
    /// Delete a mirror pod with its uid as precondition, then (`recreate`) create it again.
    Delete {
        pod: String,
        namespace: String,
        name: String,
        uid: String,
        why: &'static str,
    },
}

/// The creates and deletes that bring the API server's mirror pods (`mirrors`, by
/// `namespace/name`) in line with the static pods of `snap`. `refused` static pods (by
/// `namespace/name` and config hash) are not asked for again; orphans are only deleted once
/// the sources reported.
pub fn plan(
    snap: &Snapshot,
    mirrors: &BTreeMap<String, MirrorPod>,
    node_name: &str,
    node_uid: &str,
    refused: &BTreeMap<String, String>,
) -> Vec<MirrorAction> {
    let mut out = Vec::new();
    let mut desired: BTreeSet<String> = BTreeSet::new();
    for v in &snap.pods {
        let name = full_name(&v.pod);
        desired.insert(name.clone());
        let hash = config_hash(&v.pod);
        let terminating = v.pod.metadata.deletion_timestamp.is_some();
        match mirrors.get(&name) {
            Some(m) => {
                let why = if m.deleting {
                    Some("its deletion was requested")
                } else if m.hash != hash {
                    Some("its static pod changed")
                } else if m.meta != meta_hash(&v.pod) {
                    Some("its static pod's labels or annotations changed")
                } else if m.owner_uid.as_deref() != Some(node_uid) {
                    Some("its owner is not this Node")
                } else {
                    None
                };
                if let Some(why) = why {
                    out.push(MirrorAction::Delete {
                        pod: name.clone(),
                        namespace: m.namespace.clone(),
                        name: m.name.clone(),
                        uid: m.uid.clone(),
                        why,
                    });
                    if !terminating && refused.get(&name).map(String::as_str) != Some(hash) {
                        out.push(create(v, &name, node_name, node_uid));
                    }
                }
            }
            None if !terminating && refused.get(&name).map(String::as_str) != Some(hash) => {
                out.push(create(v, &name, node_name, node_uid));
            }
            None => {}
        }
    }
    if snap.sources_ready {
        for (name, m) in mirrors {
            if !desired.contains(name) {
                out.push(MirrorAction::Delete {
                    pod: name.clone(),
                    namespace: m.namespace.clone(),
                    name: m.name.clone(),
                    uid: m.uid.clone(),
                    why: "its static pod is gone",
                });
            }
        }
    }
    out
}

fn create(v: &PodView, name: &str, node_name: &str, node_uid: &str) -> MirrorAction {
    MirrorAction::Create {
        pod: name.to_string(),
        body: mirror_body(&v.pod, node_name, node_uid),
    }
}

/// The status podvisor wants on the mirror pod: the server's `status` with the fields the
/// kubelet owns taken from the static pod and the conditions of other writers kept.
pub fn desired_status(server: &Value, pod: &Pod) -> Value {
    let ours = pod
        .status
        .as_ref()
        .and_then(|s| serde_json::to_value(s).ok())
        .unwrap_or_else(|| json!({}));
    let mut out: Map<String, Value> = server.as_object().cloned().unwrap_or_default();
    for k in KUBELET_STATUS_FIELDS {
        match ours.get(*k) {
            Some(v) if !v.is_null() => {
                out.insert((*k).to_string(), v.clone());
            }
            _ => {
                out.remove(*k);
            }
        }
    }
    let own: Vec<&str> = ours["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    let foreign: Vec<Value> = server["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            c["type"]
                .as_str()
                .is_some_and(|t| !own.contains(&t) && !KUBELET_CONDITIONS.contains(&t))
        })
        .cloned()
        .collect();
    if !foreign.is_empty() {
        let list = out
            .entry("conditions")
            .or_insert_with(|| Value::Array(vec![]));
        if let Some(l) = list.as_array_mut() {
            l.extend(foreign);
        }
    }
    Value::Object(out)
}

/// The merge patch for `pods/{name}/status` bringing `mirror`'s status to `pod`'s, with the
/// mirror's uid and resourceVersion as preconditions; `None` when it already matches.
pub fn status_patch(mirror: &MirrorPod, pod: &Pod) -> Option<Value> {
    let want = desired_status(&mirror.status, pod);
    let diff = merge_diff(&mirror.status, &want)?;
    Some(json!({
        "metadata": {"uid": mirror.uid, "resourceVersion": mirror.resource_version},
        "status": diff,
    }))
}

#[cfg(test)]
mod tests;
