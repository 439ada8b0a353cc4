//! The push source on the sync loop (pods PUT to and DELETEd from the node API), and the
//! kubelet metrics the loop records.

use std::sync::mpsc;

use super::*;
use crate::sources::api::{ApiPodOp, ApiPodReply, ApiPodRequest, Applied};

impl Harness {
    fn push(&mut self, ns: &str, name: &str, op: ApiPodOp) -> ApiPodReply {
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(SyncEvent::ApiPod(ApiPodRequest {
            namespace: ns.into(),
            name: name.into(),
            op,
            reply: tx,
        }));
        rx.try_recv().expect("the loop answers at once")
    }

    fn put(&mut self, name: &str, manifest: &str) -> ApiPodReply {
        self.push(
            "default",
            name,
            ApiPodOp::Put {
                data: manifest.as_bytes().to_vec(),
            },
        )
    }
}

/// `kubelet_pod_start_duration_seconds_count` as exposed.
fn start_count(m: &crate::metrics::KubeletMetrics) -> u64 {
    let mut r = prometheus_client::registry::Registry::default();
    m.register_kubelet(&mut r);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &r).expect("encode");
    text.lines()
        .find_map(|l| l.strip_prefix("kubelet_pod_start_duration_seconds_count "))
        .and_then(|v| v.parse().ok())
        .expect("count")
}

fn outcome(r: &ApiPodReply) -> Applied {
    match r {
        ApiPodReply::Applied { outcome, .. } => *outcome,
        other => panic!("not applied: {other:?}"),
    }
}

#[test]
fn pushed_pods_are_validated_stored_and_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("static-pods");
    let rt = FakeRuntime::default();
    let mut h = harness_with(rt.clone(), store.clone());
    h.scan_done();
    let r = h.put("web", &pod_yaml("web", "busybox", ""));
    assert_eq!(outcome(&r), Applied::Created);
    let ApiPodReply::Applied { pod, .. } = &r else {
        unreachable!()
    };
    // Named as written (no node suffix), in the path's namespace, source `api`.
    assert_eq!(pod.metadata.name.as_deref(), Some("web"));
    let ann = pod.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(ann["kubernetes.io/config.source"], "api");
    let snap = h.snap();
    let v = snap.find_pod("default/web").expect("pod");
    assert_eq!(v.source, "api:default/web");
    assert_eq!(rt.running_ids().len(), 1);
    let stored = dir.path().join("api-pods/default_web.yaml");
    assert_eq!(
        std::fs::read_to_string(&stored).expect("stored"),
        pod_yaml("web", "busybox", "")
    );
    let uid = h.uid("default/web");
    assert_eq!(
        outcome(&h.put("web", &pod_yaml("web", "busybox", ""))),
        Applied::Unchanged
    );

    // Refused manifests change nothing (last-known-good) and say where.
    let bad =
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: main\n";
    match h.put("web", bad) {
        ApiPodReply::Invalid { causes, message } => {
            let c = causes
                .iter()
                .find(|c| c.field == "spec.containers[0].image")
                .unwrap_or_else(|| panic!("{causes:?}"));
            assert_eq!(c.position, Some((7, 5)), "{message}");
        }
        other => panic!("{other:?}"),
    }
    match h.put("web", &pod_yaml("other", "busybox", "")) {
        ApiPodReply::Invalid { causes, .. } => {
            assert_eq!(causes[0].field, "metadata.name");
            assert!(causes[0]
                .message
                .contains("\"other\" does not match \"web\""));
            assert_eq!(causes[0].position, Some((4, 3)));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        h.put("web", "kind: [\n"),
        ApiPodReply::Malformed { .. }
    ));
    assert_eq!(h.uid("default/web"), uid);
    assert_eq!(
        std::fs::read_to_string(&stored).expect("stored"),
        pod_yaml("web", "busybox", "")
    );
    // A name another source defines cannot be pushed, nor deleted through the API.
    h.file("db.yaml", &pod_yaml("db", "busybox", ""));
    assert!(matches!(
        h.put("db-node1", &pod_yaml("db-node1", "busybox", "")),
        ApiPodReply::Conflict { .. }
    ));
    assert!(matches!(
        h.push("default", "db-node1", ApiPodOp::Delete),
        ApiPodReply::Conflict { .. }
    ));
    assert_eq!(
        h.push("default", "nope", ApiPodOp::Delete),
        ApiPodReply::NotFound
    );

    // A restarted daemon has the pushed pod before any source answers, and keeps its container.
    drop(h);
    let starts = rt.starts().len();
    let mut h = harness_with(rt.clone(), store);
    assert_eq!(h.uid("default/web"), uid);
    h.file("db.yaml", &pod_yaml("db", "busybox", ""));
    h.scan_done();
    assert_eq!(rt.starts().len(), starts, "{:?}", rt.calls());
    assert_eq!(
        h.snap().find_pod("default/web").expect("pod").source,
        "api:default/web"
    );

    // A spec change replaces it, as a file edit does; DELETE removes it and its manifest.
    assert_eq!(
        outcome(&h.put("web", &pod_yaml("web", "busybox:v2", ""))),
        Applied::Configured
    );
    assert_ne!(h.uid("default/web"), uid);
    let id = rt.running_ids().into_iter().find(|id| {
        rt.state.lock().expect("lock").containers[id]
            .meta
            .pod_uid
            .as_str()
            == uid
    });
    if let Some(id) = id {
        let ev = rt.exit(&id, 143);
        h.send(ev);
    }
    assert!(matches!(
        h.push("default", "web", ApiPodOp::Delete),
        ApiPodReply::Deleted { .. }
    ));
    assert!(!stored.exists());
    assert_eq!(
        h.push("default", "web", ApiPodOp::Delete),
        ApiPodReply::NotFound
    );
    let live: Vec<String> = rt.running_ids();
    for id in live {
        let pod_uid = rt.state.lock().expect("lock").containers[&id]
            .meta
            .pod_uid
            .clone();
        if pod_uid != h.uid("db") {
            let ev = rt.exit(&id, 143);
            h.send(ev);
        }
    }
    assert!(h.snap().find_pod("default/web").is_none());
}

#[test]
fn the_loop_records_the_kubelet_metrics_of_what_it_owns() {
    let mut h = harness();
    h.scan_done();
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let m = h.sync.cfg.metrics.clone();
    assert_eq!(m.started_pods.get(), 1);
    assert_eq!(start_count(&m), 1);
    let started = |t: &str| {
        m.started_containers
            .get(&vec![("container_type", t.to_string())])
            .map_or(0, |c| c.get())
    };
    assert_eq!(started("container"), 1);
    // A crash and restart: one more start, still one pod start duration.
    let id = h.rt.running_ids()[0].clone();
    let ev = h.rt.exit(&id, 1);
    h.send(ev);
    assert_eq!(started("container"), 2);
    assert_eq!(start_count(&m), 1);
    // Edited and edited back while the first generation is still stopping: the same uid is
    // desired again, the kubelet's restarted pod.
    let id = h.rt.running_ids()[0].clone();
    h.file("web.yaml", &pod_yaml("web", "busybox:v2", ""));
    h.file("web.yaml", &pod_yaml("web", "busybox", ""));
    let restarted = m
        .restarted_pods
        .get(&vec![("static", "true".to_string())])
        .map_or(0, |c| c.get());
    assert_eq!(restarted, 1);
    let ev = h.rt.exit(&id, 143);
    h.send(ev);
    // A start the runtime refuses is a start error with the waiting reason as its code.
    h.rt.state
        .lock()
        .expect("lock")
        .refused_images
        .insert("refused".into());
    h.file("bad.yaml", &pod_yaml("bad", "refused", ""));
    let errors = m
        .started_containers_errors
        .get(&vec![
            ("container_type", "container".to_string()),
            ("code", "RunContainerError".to_string()),
        ])
        .map_or(0, |c| c.get());
    assert_eq!(errors, 1);
}
