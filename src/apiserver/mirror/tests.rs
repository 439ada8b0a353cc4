//! Table tests of the mirror pod decisions.

use super::*;

fn view(name: &str, uid: &str, labels: &[(&str, &str)]) -> PodView {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": "kube-system", "uid": uid,
            "labels": labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<Map<_, _>>(),
            "annotations": {
                "kubernetes.io/config.hash": uid,
                "kubernetes.io/config.source": "file",
                "kubernetes.io/config.seen": "2026-01-01T00:00:00Z",
            },
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"nodeName": "edge1", "containers": [{"name": "c", "image": "busybox"}]},
        "status": {
            "phase": "Running",
            "qosClass": "BestEffort",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": true, "restartCount": 2}],
        },
    }))
    .expect("pod");
    PodView {
        pod,
        source: "/etc/kubernetes/manifests/x.yaml".into(),
        source_error: None,
        rolled_back: None,
        log_paths: Default::default(),
        previous_log_paths: Default::default(),
        mirror: None,
    }
}

fn mirror_of(v: &PodView, node_uid: &str) -> MirrorPod {
    let mut body = mirror_body(&v.pod, "edge1", node_uid);
    body["metadata"]["uid"] = json!("server-uid");
    body["metadata"]["resourceVersion"] = json!("7");
    body["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    MirrorPod::from_api(&body).expect("a mirror pod")
}

#[test]
fn mirror_body_as_node_restriction_wants_it() {
    let v = view("etcd-edge1", "abc", &[("tier", "control-plane")]);
    let b = mirror_body(&v.pod, "edge1", "node-uid");
    assert_eq!(b["metadata"]["annotations"][MIRROR_ANNOTATION], "abc");
    assert_eq!(
        b["metadata"]["annotations"]["kubernetes.io/config.source"],
        "file"
    );
    assert_eq!(
        b["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Node", "name": "edge1", "uid": "node-uid", "controller": true}])
    );
    assert_eq!(b["spec"]["nodeName"], "edge1");
    for gone in ["uid", "resourceVersion", "creationTimestamp"] {
        assert!(b["metadata"].get(gone).is_none(), "{gone}");
    }
    assert!(b.get("status").is_none());
    assert_eq!(node_restriction_refusal(&v.pod, "edge1"), None);
}

#[test]
fn node_restriction_refusals_in_its_words() {
    let base = view("p", "u", &[]);
    let cases = [
        (
            json!({"serviceAccountName": "sa"}),
            "reference a service account",
        ),
        (
            json!({"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}),
            "reference secrets",
        ),
        (
            json!({"volumes": [{"name": "c", "configMap": {"name": "x"}}]}),
            "reference configmaps",
        ),
        (
            json!({"volumes": [{"name": "c", "persistentVolumeClaim": {"claimName": "x"}}]}),
            "reference persistentvolumeclaims",
        ),
        (
            json!({"volumes": [{"name": "p", "projected": {"sources": [{"clusterTrustBundle": {"path": "b", "name": "x"}}]}}]}),
            "reference clustertrustbundles",
        ),
        (
            json!({"containers": [{"name": "c", "image": "i", "env": [{"name": "E", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}]}),
            "reference secrets",
        ),
        (
            json!({"imagePullSecrets": [{"name": "x"}]}),
            "reference secrets",
        ),
    ];
    for (patch, want) in cases {
        let mut spec = serde_json::to_value(base.pod.spec.as_ref()).expect("spec");
        for (k, v) in patch.as_object().expect("object") {
            spec[k] = v.clone();
        }
        let mut pod = base.pod.clone();
        pod.spec = Some(serde_json::from_value(spec).expect("spec"));
        let got = node_restriction_refusal(&pod, "edge1").expect(want);
        assert!(
            got.contains(want) && got.starts_with("node \"edge1\""),
            "{got}"
        );
    }
}

#[test]
fn plan_creates_deletes_and_replaces() {
    let a = view("a-edge1", "h1", &[]);
    let b = view("b-edge1", "h2", &[]);
    let snap = |pods: Vec<PodView>, ready: bool| Snapshot {
        pods,
        sources_ready: ready,
        ..Default::default()
    };
    let none: BTreeMap<String, MirrorPod> = BTreeMap::new();
    let no_refusals: BTreeMap<String, String> = BTreeMap::new();
    let names = |acts: &[MirrorAction]| -> Vec<String> {
        acts.iter()
            .map(|a| match a {
                MirrorAction::Create { pod, .. } => format!("create {pod}"),
                MirrorAction::Delete { pod, uid, why, .. } => format!("delete {pod} {uid} ({why})"),
            })
            .collect()
    };
    // Nothing on the server: one create each.
    let acts = plan(
        &snap(vec![a.clone(), b.clone()], true),
        &none,
        "edge1",
        "n1",
        &no_refusals,
    );
    assert_eq!(
        names(&acts),
        ["create kube-system/a-edge1", "create kube-system/b-edge1"]
    );

    let mut mirrors = BTreeMap::new();
    mirrors.insert("kube-system/a-edge1".to_string(), mirror_of(&a, "n1"));
    // In line: nothing to do.
    assert!(plan(
        &snap(vec![a.clone()], true),
        &mirrors,
        "edge1",
        "n1",
        &no_refusals
    )
    .is_empty());
    // The static pod changed (new hash), was relabelled, the Node was registered again, or
    // somebody asked for the mirror's deletion: delete (uid precondition) and create.
    let edited = view("a-edge1", "h9", &[]);
    let relabelled = view("a-edge1", "h1", &[("tier", "x")]);
    for (v, node, why) in [
        (&edited, "n1", "its static pod changed"),
        (
            &relabelled,
            "n1",
            "its static pod's labels or annotations changed",
        ),
        (&a, "n2", "its owner is not this Node"),
    ] {
        let acts = plan(
            &snap(vec![v.clone()], true),
            &mirrors,
            "edge1",
            node,
            &no_refusals,
        );
        assert_eq!(
            names(&acts),
            [
                format!("delete kube-system/a-edge1 server-uid ({why})"),
                "create kube-system/a-edge1".into()
            ]
        );
    }
    let mut deleting = mirrors.clone();
    if let Some(m) = deleting.get_mut("kube-system/a-edge1") {
        m.deleting = true;
    }
    let acts = plan(
        &snap(vec![a.clone()], true),
        &deleting,
        "edge1",
        "n1",
        &no_refusals,
    );
    assert_eq!(acts.len(), 2);
    // The static pod is gone: delete, but only once the sources reported.
    let acts = plan(&snap(vec![], true), &mirrors, "edge1", "n1", &no_refusals);
    assert_eq!(
        names(&acts),
        ["delete kube-system/a-edge1 server-uid (its static pod is gone)"]
    );
    assert!(plan(&snap(vec![], false), &mirrors, "edge1", "n1", &no_refusals).is_empty());
    // A static pod being removed gets no new mirror; its mirror stays until it is gone.
    let mut terminating = b.clone();
    terminating.pod.metadata.deletion_timestamp = a.pod.metadata.creation_timestamp.clone();
    assert!(plan(
        &snap(vec![terminating], true),
        &none,
        "edge1",
        "n1",
        &no_refusals
    )
    .is_empty());
    // A refused mirror is not asked for again until its static pod changes.
    let refused: BTreeMap<String, String> =
        [("kube-system/b-edge1".to_string(), "h2".to_string())].into();
    assert!(plan(&snap(vec![b.clone()], true), &none, "edge1", "n1", &refused).is_empty());
    let b2 = view("b-edge1", "h3", &[]);
    assert_eq!(
        plan(&snap(vec![b2], true), &none, "edge1", "n1", &refused).len(),
        1
    );
}

#[test]
fn status_patch_follows_the_kubelets_merge_rules() {
    let a = view("a-edge1", "h1", &[]);
    let mut m = mirror_of(&a, "n1");
    m.status = json!({
        "phase": "Pending",
        "qosClass": "BestEffort",
        "nominatedNodeName": "kept",
        "reason": "Old",
        "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "DisruptionTarget", "status": "True"},
            {"type": "example.com/gate", "status": "True"},
        ],
    });
    let p = status_patch(&m, &a.pod).expect("differs");
    assert_eq!(
        p["metadata"],
        json!({"uid": "server-uid", "resourceVersion": "7"})
    );
    let s = &p["status"];
    assert_eq!(s["phase"], "Running");
    assert_eq!(
        s["reason"],
        Value::Null,
        "a field the kubelet no longer sets is removed"
    );
    assert!(s.get("qosClass").is_none() && s.get("nominatedNodeName").is_none());
    assert_eq!(s["containerStatuses"][0]["restartCount"], 2);
    let types: Vec<&str> = s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, ["Ready", "DisruptionTarget", "example.com/gate"]);
    // Applied, nothing is left to patch.
    m.status = desired_status(&m.status, &a.pod);
    assert_eq!(status_patch(&m, &a.pod), None);
}
