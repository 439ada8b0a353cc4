//! An API server's answer or watch event (`--kubeconfig`): bytes -> JSON -> what the link
//! reads of it (a mirror pod, its status patch, the Node's foreign conditions, a lease to
//! renew). The server is not trusted to send well-formed objects.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podvisor::apiserver::lease::renewed_lease;
use podvisor::apiserver::mirror::{desired_status, status_patch, MirrorPod};
use podvisor::apiserver::node::merge_foreign_conditions;
use podvisor::apiserver::patch::merge_diff;
use serde_json::{json, Map, Value};

/// RFC 7386, as the API server applies a merge patch.
fn apply(target: &Value, patch: &Value) -> Value {
    match patch {
        Value::Object(p) => {
            let mut t = match target {
                Value::Object(t) => t.clone(),
                _ => Map::new(),
            };
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    let cur = t.get(k).cloned().unwrap_or(Value::Null);
                    t.insert(k.clone(), apply(&cur, v));
                }
            }
            Value::Object(t)
        }
        other => other.clone(),
    }
}

/// `v` without object members that are null (what a merge patch cannot express).
fn no_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), no_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(no_nulls).collect()),
        other => other.clone(),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "ns", "annotations": {"kubernetes.io/config.hash": "h"}},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                   "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 1}]},
    }))
    .expect("pod");
    let objects = [&v, &v["object"]]
        .into_iter()
        .chain(v["items"].as_array().into_iter().flatten());
    for obj in objects {
        if let Some(m) = MirrorPod::from_api(obj) {
            let want = desired_status(&m.status, &pod);
            if let Some(diff) = merge_diff(&m.status, &want) {
                assert_eq!(no_nulls(&apply(&m.status, &diff)), no_nulls(&want));
            }
            if let Some(p) = status_patch(&m, &pod) {
                assert_eq!(p["metadata"]["uid"], json!(m.uid));
            }
        }
        let mut ours = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        merge_foreign_conditions(&mut ours, &obj["status"]);
        assert_eq!(ours["conditions"][0]["type"], "Ready");
        let l = renewed_lease(obj, "n", 40, Some("u"), json!("t"));
        assert_eq!(l["spec"]["holderIdentity"], "n");
    }
});
