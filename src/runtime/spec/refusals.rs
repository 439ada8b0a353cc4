//! The refusal walk: every manifest the runtime refuses when it builds a container (spec) or
//! prepares a volume is refused by validation too, naming the same field, so `podvisor
//! validate` and last-known-good cover it (issue 13, item 1).

use super::testutil::*;
use super::*;
use crate::pod::validation::{validate_pod, ValidationOptions};
use serde_json::json;

/// The fields validation reports for `p`.
fn validation_fields(p: &Pod) -> Vec<String> {
    validate_pod(p, &ValidationOptions::default())
        .into_iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect()
}

fn data_volume() -> serde_json::Value {
    json!([{"name": "data", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}])
}

#[test]
fn every_container_refusal_is_a_validation_error() {
    let env = |from: serde_json::Value| json!({"env": [{"name": "X", "valueFrom": from}]});
    let mount = |m: serde_json::Value| {
        let mut base = json!({"name": "data", "mountPath": "/d"});
        merge(&mut base, m);
        json!({"volumeMounts": [base]})
    };
    let cases: Vec<(serde_json::Value, serde_json::Value, &str)> = vec![
        (
            json!({}),
            json!({"shareProcessNamespace": true, "hostPID": true}),
            "spec.shareProcessNamespace",
        ),
        (json!({}), json!({"hostUsers": false}), "spec.hostUsers"),
        (
            json!({"securityContext": {"procMount": "Unmasked"}}),
            json!({}),
            "spec.containers[0].securityContext.procMount",
        ),
        (
            json!({"envFrom": [{"configMapRef": {"name": "x"}}]}),
            json!({}),
            "spec.containers[0].envFrom[0]",
        ),
        (
            env(json!({"fileKeyRef": {"path": "p", "key": "k", "volumeName": "data"}})),
            json!({}),
            "spec.containers[0].env[0].valueFrom.fileKeyRef",
        ),
        (
            env(json!({"secretKeyRef": {"name": "s", "key": "k"}})),
            json!({}),
            "spec.containers[0].env[0].valueFrom.secretKeyRef",
        ),
        (
            env(json!({"fieldRef": {"fieldPath": "metadata.labels"}})),
            json!({}),
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath",
        ),
        (
            env(json!({"fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v2"}})),
            json!({}),
            "spec.containers[0].env[0].valueFrom.fieldRef.apiVersion",
        ),
        (
            env(json!({"resourceFieldRef": {"resource": "limits.ephemeral-storage"}})),
            json!({}),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.resource",
        ),
        (
            env(json!({"resourceFieldRef": {"resource": "limits.cpu", "containerName": "nope"}})),
            json!({}),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.containerName",
        ),
        (
            env(json!({"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}})),
            json!({}),
            "spec.containers[0].env[0].valueFrom.resourceFieldRef.divisor",
        ),
        (
            mount(json!({"mountPropagation": "Sideways"})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].mountPropagation",
        ),
        (
            mount(json!({"mountPropagation": "Bidirectional"})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].mountPropagation",
        ),
        (
            mount(json!({"recursiveReadOnly": "Enabled"})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].recursiveReadOnly",
        ),
        (
            mount(
                json!({"recursiveReadOnly": "IfPossible", "readOnly": true, "mountPropagation": "HostToContainer"}),
            ),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].recursiveReadOnly",
        ),
        (
            mount(json!({"recursiveReadOnly": "Always", "readOnly": true})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].recursiveReadOnly",
        ),
        (
            mount(json!({"subPath": "/etc"})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].subPath",
        ),
        (
            mount(json!({"subPath": "../x"})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].subPath",
        ),
        (
            mount(json!({"subPathExpr": "$(X)", "subPath": "a"})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].subPathExpr",
        ),
        (
            mount(json!({"subPathExpr": "/$(X)"})),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].subPathExpr",
        ),
        (
            json!({"volumeMounts": [{"name": "data", "mountPath": "rel"}]}),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0].mountPath",
        ),
        (
            json!({"volumeMounts": [{"name": "nope", "mountPath": "/n"}]}),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeMounts[0]",
        ),
        (
            json!({"volumeDevices": [{"name": "data", "devicePath": "/dev/x"}]}),
            json!({"volumes": data_volume()}),
            "spec.containers[0].volumeDevices",
        ),
    ];
    for (c, s, field) in cases {
        let p = pod_with(c.clone(), s.clone());
        let runtime = err(&p);
        assert!(
            runtime.starts_with(field),
            "runtime: {runtime}\n  want {field} for {c} {s}"
        );
        let found = validation_fields(&p);
        assert!(
            found.iter().any(|f| f.starts_with(field)),
            "validation misses {field} ({runtime}): {found:?}"
        );
    }
}

#[test]
fn every_volume_refusal_is_a_validation_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let n = node();
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!({"hostPath": {"path": "relative/x"}}),
            "spec.volumes[0].hostPath.path",
        ),
        (
            json!({"hostPath": {"path": "/x", "type": "Pipe"}}),
            "spec.volumes[0].hostPath.type",
        ),
        (
            json!({"emptyDir": {"medium": "Disk"}}),
            "spec.volumes[0].emptyDir.medium",
        ),
        (
            json!({"emptyDir": {"medium": "Memory", "sizeLimit": "lots"}}),
            "spec.volumes[0].emptyDir.sizeLimit",
        ),
        (
            json!({"nfs": {"server": "s", "path": "/x"}}),
            "spec.volumes[0].nfs",
        ),
        (
            json!({"secret": {"secretName": "s"}}),
            "spec.volumes[0].secret",
        ),
        (
            json!({"configMap": {"name": "c"}}),
            "spec.volumes[0].configMap",
        ),
        (
            json!({"projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}),
            "spec.volumes[0].projected.sources[0].serviceAccountToken",
        ),
        (
            json!({"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "spec.nodeName"}}]}}),
            "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath",
        ),
        (
            json!({"downwardAPI": {"items": [{"path": "../n", "fieldRef": {"fieldPath": "metadata.name"}}]}}),
            "spec.volumes[0].downwardAPI.items[0].path",
        ),
        (
            json!({"downwardAPI": {"items": [{"path": "c", "resourceFieldRef": {"resource": "limits.cpu"}}]}}),
            "spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName",
        ),
        (
            json!({"downwardAPI": {"defaultMode": 4095, "items": []}}),
            "spec.volumes[0].downwardAPI.defaultMode",
        ),
        (
            json!({"projected": {"sources": [{"downwardAPI": {"items": [{"path": "x", "mode": 1000, "fieldRef": {"fieldPath": "metadata.uid"}}]}}]}}),
            "spec.volumes[0].projected.sources[0].downwardAPI.items[0].mode",
        ),
    ];
    for (i, (source, field)) in cases.into_iter().enumerate() {
        let mut vol = json!({"name": "v"});
        merge(&mut vol, source.clone());
        let p = pod_with(json!({}), json!({"volumes": [vol]}));
        let v = &p
            .spec
            .as_ref()
            .expect("spec")
            .volumes
            .as_ref()
            .expect("volumes")[0];
        let data = dir.path().join(format!("v{i}"));
        let runtime = crate::runtime::volumes::prepare(&p, &n, v, 0, &data)
            .expect_err(field)
            .to_string();
        assert!(
            runtime.starts_with(field),
            "runtime: {runtime}\n  want {field} for {source}"
        );
        let found = validation_fields(&p);
        assert!(
            found.iter().any(|f| f.starts_with(field)),
            "validation misses {field} ({runtime}): {found:?}"
        );
    }
}
