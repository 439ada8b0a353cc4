//! podvisor's API server link (`--kubeconfig`) against the test API server of
//! `tests/common/apiserver` (TLS, client certificates, resourceVersions, NodeRestriction...):
//!
//! - the test server's own rules, checked through podvisor's client;
//! - the link's threads on published snapshots (no containers, no root): registration, lease,
//!   mirror pods and their status, a deleted mirror recreated, stale and orphaned mirrors
//!   deleted, a refused mirror reported, and convergence after every fault (down, slow, 500,
//!   429 with Retry-After, a foreign certificate, conflicts); kubectl (Debian's
//!   kubernetes-client) decodes what podvisor wrote;
//! - `podvisor run --kubeconfig` with real containers (root): the Done-when scenario, local
//!   pods never noticing an API server that is gone.

mod common;
#[allow(dead_code)]
#[path = "common/apiserver/mod.rs"]
mod fake;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake::{ApiServer, Faults};
use podvisor::apiserver::{self, KubeClient, Kubeconfig};
use podvisor::config::ApiServerConfig;
use podvisor::status::{ApiServerCell, PodView, Snapshot, SnapshotCell};
use serde_json::{json, Value};

fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    t0.elapsed()
}

/// A node's client (system:node:<node>, system:nodes) and its kubeconfig.
fn node_client(s: &ApiServer, dir: &Path, node: &str) -> (Kubeconfig, KubeClient) {
    let creds = s.pki.issue(
        node,
        &format!("system:node:{node}"),
        &["system:nodes"],
        false,
    );
    let path = dir.join(format!("{node}.kubeconfig"));
    s.kubeconfig(&path, &creds);
    let kc = Kubeconfig::load(&path).expect("kubeconfig");
    let client = KubeClient::new(&kc, 0, 0).expect("client");
    (kc, client)
}

fn admin_kubeconfig(s: &ApiServer, dir: &Path) -> std::path::PathBuf {
    let creds = s
        .pki
        .issue("admin", "kubernetes-admin", &["system:masters"], false);
    let path = dir.join("admin.kubeconfig");
    s.kubeconfig(&path, &creds);
    path
}

fn status_of(e: &apiserver::ClientError) -> u16 {
    e.status().unwrap_or(0)
}

#[test]
fn test_server_enforces_the_api_servers_rules() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = ApiServer::start(dir.path());
    let (_, c) = node_client(&s, dir.path(), "edge1");
    let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge1", "labels": {"kubernetes.io/hostname": "edge1"}}});
    let created = c.post("/api/v1/nodes", &node).expect("create node").body;
    let uid = created["metadata"]["uid"]
        .as_str()
        .expect("uid")
        .to_string();
    // AlreadyExists.
    let e = c.post("/api/v1/nodes", &node).expect_err("exists");
    assert!(e.is_already_exists(), "{e}");
    // NodeRestriction: another node's object, a forbidden label, taints after creation.
    let other = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge2"}});
    assert_eq!(
        status_of(&c.post("/api/v1/nodes", &other).expect_err("other node")),
        403
    );
    let (_, c2) = node_client(&s, dir.path(), "edge2");
    let bad = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "edge2", "labels": {"node-role.kubernetes.io/master": ""}}});
    let e = c2.post("/api/v1/nodes", &bad).expect_err("forbidden label");
    assert!(
        e.to_string().contains("node-role.kubernetes.io/master"),
        "{e}"
    );
    let e = c
        .merge_patch(
            "/api/v1/nodes/edge1",
            &json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
        )
        .expect_err("taints");
    assert!(
        e.to_string().contains("not allowed to modify taints"),
        "{e}"
    );
    // Strict fields: unknown and mistyped fields refused.
    let e = c
        .merge_patch(
            "/api/v1/nodes/edge1/status",
            &json!({"status": {"nodeInfo": {"kernel": "x"}}}),
        )
        .expect_err("unknown field");
    assert_eq!(status_of(&e), 400, "{e}");
    assert!(
        e.to_string()
            .contains("unknown field \"status.nodeInfo.kernel\""),
        "{e}"
    );
    let e = c
        .merge_patch(
            "/api/v1/nodes/edge1/status",
            &json!({"status": {"capacity": "lots"}}),
        )
        .expect_err("mistyped");
    assert_eq!(status_of(&e), 400, "{e}");
    // resourceVersion: a stale one conflicts; spec changes through status are ignored.
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_string();
    let ok = c
        .merge_patch(
            "/api/v1/nodes/edge1/status",
            &json!({"metadata": {"resourceVersion": rv}, "spec": {"podCIDR": "10.0.0.0/24"}, "status": {"phase": "Running"}}),
        )
        .expect("patch")
        .body;
    assert!(
        ok["spec"]["podCIDR"].is_null(),
        "spec ignored through status"
    );
    assert_eq!(ok["status"]["phase"], "Running");
    let e = c
        .merge_patch(
            "/api/v1/nodes/edge1/status",
            &json!({"metadata": {"resourceVersion": rv}, "status": {"phase": "Pending"}}),
        )
        .expect_err("stale");
    assert!(e.is_conflict(), "{e}");
    // Patch types other than merge patch are refused (podvisor sends merge patches).
    // Mirror pods: the annotation, the owner, nodeName are required.
    let pod = |ann: bool, owner_uid: &str, node_name: &str| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "m", "namespace": "default", "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": "edge1", "uid": owner_uid, "controller": true}]},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]}});
        if ann {
            p["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "h"});
        }
        p
    };
    for (p, want) in [
        (pod(false, &uid, "edge1"), "can only create mirror pods"),
        (pod(true, &uid, "edge2"), "spec.nodeName set to itself"),
        (pod(true, "wrong", "edge1"), "UID mismatch"),
    ] {
        let e = c
            .post("/api/v1/namespaces/default/pods", &p)
            .expect_err(want);
        assert!(e.to_string().contains(want) && status_of(&e) == 403, "{e}");
    }
    let e = c
        .post("/api/v1/namespaces/nowhere/pods", &pod(true, &uid, "edge1"))
        .expect_err("namespace");
    assert!(e.is_not_found(), "{e}");
    let m = c
        .post("/api/v1/namespaces/default/pods", &pod(true, &uid, "edge1"))
        .expect("mirror")
        .body;
    assert_eq!(m["status"]["phase"], "Pending");
    // Status: a uid that is not the pod's is a conflict; labels cannot change through it.
    let e = c
        .merge_patch(
            "/api/v1/namespaces/default/pods/m/status",
            &json!({"metadata": {"uid": "other"}, "status": {"phase": "Running"}}),
        )
        .expect_err("uid");
    assert!(
        e.is_conflict() && e.to_string().contains("Precondition failed"),
        "{e}"
    );
    let e = c
        .merge_patch(
            "/api/v1/namespaces/default/pods/m/status",
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .expect_err("labels");
    assert_eq!(status_of(&e), 403, "{e}");
    // Deletion: a uid precondition that does not match conflicts; grace 0 removes.
    let del = |uid: &str| json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "preconditions": {"uid": uid}});
    assert!(c
        .delete("/api/v1/namespaces/default/pods/m", &del("nope"))
        .expect_err("precondition")
        .is_conflict());
    let muid = m["metadata"]["uid"].as_str().expect("uid");
    c.delete("/api/v1/namespaces/default/pods/m", &del(muid))
        .expect("delete");
    assert!(c
        .get("/api/v1/namespaces/default/pods/m")
        .expect_err("gone")
        .is_not_found());
    // Leases: only its own, only in kube-node-lease, updates need the resourceVersion.
    let lease = |name: &str| {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}})
    };
    let lp = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases";
    assert_eq!(
        status_of(&c.post(lp, &lease("edge2")).expect_err("other lease")),
        403
    );
    let l = c.post(lp, &lease("edge1")).expect("lease").body;
    let e = c
        .put(&format!("{lp}/edge1"), &lease("edge1"))
        .expect_err("no rv");
    assert_eq!(status_of(&e), 422, "{e}");
    let mut renewed = l.clone();
    renewed["spec"]["renewTime"] = json!("2026-01-01T00:00:00.000000Z");
    let r = c.put(&format!("{lp}/edge1"), &renewed).expect("renew").body;
    assert_ne!(
        r["metadata"]["resourceVersion"],
        l["metadata"]["resourceVersion"]
    );
    assert!(c
        .put(&format!("{lp}/edge1"), &renewed)
        .expect_err("stale")
        .is_conflict());
}

fn pod_view(ns: &str, name: &str, hash: &str, restarts: u32, extra: Value) -> PodView {
    let mut p = json!({
        "metadata": {
            "name": name, "namespace": ns, "uid": hash,
            "labels": {"app": name},
            "annotations": {
                "kubernetes.io/config.hash": hash,
                "kubernetes.io/config.source": "file",
                "kubernetes.io/config.seen": "2026-01-01T00:00:00Z",
            },
        },
        "spec": {
            "nodeName": "edge1",
            "containers": [{"name": "c", "image": "docker.io/library/busybox:1.35", "imagePullPolicy": "IfNotPresent"}],
            "tolerations": [{"operator": "Exists", "effect": "NoExecute"}],
        },
        "status": {
            "phase": "Running",
            "qosClass": "BestEffort",
            "hostIP": "192.0.2.1",
            "podIP": "192.0.2.1",
            "startTime": "2026-01-01T00:00:00Z",
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"},
            ],
            "containerStatuses": [{
                "name": "c", "image": "docker.io/library/busybox:1.35",
                "imageID": "docker.io/library/busybox@sha256:0000000000000000000000000000000000000000000000000000000000000000",
                "containerID": "podvisor://abc", "ready": true, "started": true, "restartCount": restarts,
                "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}},
            }],
        },
    });
    if let Some(spec) = extra.as_object() {
        for (k, v) in spec {
            p["spec"][k] = v.clone();
        }
    }
    PodView {
        pod: serde_json::from_value(p).expect("pod"),
        source: format!("/etc/kubernetes/manifests/{name}.yaml"),
        source_error: None,
        rolled_back: None,
        log_paths: Default::default(),
        previous_log_paths: Default::default(),
        mirror: None,
    }
}

struct Link {
    snapshots: SnapshotCell,
    cell: ApiServerCell,
    events: mpsc::Receiver<podvisor::sync::SyncEvent>,
    _link: apiserver::ApiServerLink,
}

impl Link {
    fn publish(&self, pods: Vec<PodView>) {
        self.snapshots.publish(Snapshot {
            node_name: "edge1".into(),
            pods,
            sources_ready: true,
            ..Default::default()
        });
    }

    fn state(&self) -> String {
        self.cell.get().map(|v| v.state.clone()).unwrap_or_default()
    }
}

fn config(kubeconfig: &Path, update: Duration) -> ApiServerConfig {
    ApiServerConfig {
        kubeconfig: kubeconfig.to_path_buf(),
        register_node: true,
        node_labels: [("node.kubernetes.io/site".to_string(), "lab".to_string())].into(),
        register_with_taints: vec![podvisor::config::NodeTaint {
            key: "podvisor.io/static-only".into(),
            value: Some("true".into()),
            effect: "NoSchedule".into(),
        }],
        node_status_update_frequency: update,
        node_status_report_frequency: update * 5,
        node_lease_duration: update * 4,
        node_status_max_images: Some(50),
        kube_api_qps: 50,
        kube_api_burst: 100,
    }
}

fn start_link(s: &ApiServer, dir: &Path, update: Duration, pods: Vec<PodView>) -> Link {
    let (kc, _) = node_client(s, dir, "edge1");
    let snapshots = SnapshotCell::default();
    let (tx, events) = mpsc::channel();
    let monitor = podvisor::health::SyncLoopMonitor::new(Instant::now());
    monitor.record(Instant::now());
    let cell = ApiServerCell::default();
    let link = Link {
        snapshots: snapshots.clone(),
        cell: cell.clone(),
        events,
        _link: apiserver::start(
            apiserver::Context {
                cfg: config(&kc.path, update),
                node_name: "edge1".into(),
                facts: apiserver::node::NodeFacts::gather("edge1", "192.0.2.1", 10250),
                node_source: podvisor::api::node::NodeSource {
                    capacity: Some(podvisor::pod::resources::Amounts {
                        cpu_millis: 2000,
                        memory_bytes: 4 << 30,
                    }),
                    ..Default::default()
                },
                snapshots: snapshots.clone(),
                monitor,
                monitor_deadline: Duration::from_secs(3600),
                events: tx,
            },
            &kc,
            cell,
        )
        .expect("start"),
    };
    link.publish(pods);
    link
}

fn mirror(s: &ApiServer, ns: &str, name: &str) -> Option<Value> {
    s.get(&format!("pods/{ns}/{name}"))
}

fn restarts(p: &Value) -> i64 {
    p["status"]["containerStatuses"][0]["restartCount"]
        .as_i64()
        .unwrap_or(-1)
}

fn kubectl() -> String {
    std::env::var("PODVISOR_TEST_KUBECTL").unwrap_or_else(|_| "kubectl".into())
}

#[test]
fn link_registers_mirrors_and_converges_after_every_fault() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = ApiServer::start(dir.path());
    let update = Duration::from_secs(1);
    let a = |n: u32| pod_view("kube-system", "etcd-edge1", "h1", n, json!({}));
    let b = pod_view("default", "web-edge1", "h2", 0, json!({}));
    let refused = pod_view("nowhere", "lost-edge1", "h3", 0, json!({}));
    let link = start_link(&s, dir.path(), update, vec![a(2), b.clone(), refused]);
    let long = Duration::from_secs(15);

    // The node: labels, taints, status.
    wait_for("the node", long, || {
        s.get("nodes//edge1")
            .is_some_and(|n| !n["status"]["conditions"].is_null())
    });
    let node = s.get("nodes//edge1").expect("node");
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/hostname"],
        "edge1"
    );
    assert_eq!(node["metadata"]["labels"]["node.kubernetes.io/site"], "lab");
    assert_eq!(node["spec"]["taints"][0]["key"], "podvisor.io/static-only");
    assert_eq!(
        node["status"]["nodeInfo"]["containerRuntimeVersion"],
        apiserver::node::RUNTIME_VERSION
    );
    assert_eq!(node["status"]["capacity"]["cpu"], "2");
    let ready = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready")
        .cloned()
        .expect("Ready");
    assert_eq!(ready["status"], "True");
    assert!(ready["lastHeartbeatTime"].is_string());
    let node_uid = node["metadata"]["uid"].as_str().expect("uid").to_string();

    // The lease: held by the node, owned by it, renewed.
    wait_for("the lease owned by the node", long, || {
        s.get("leases/kube-node-lease/edge1")
            .is_some_and(|l| l["metadata"]["ownerReferences"][0]["uid"] == node_uid.as_str())
    });
    let l1 = s.get("leases/kube-node-lease/edge1").expect("lease");
    assert_eq!(l1["spec"]["holderIdentity"], "edge1");
    assert_eq!(l1["spec"]["leaseDurationSeconds"], 4);
    wait_for("a renewal", long, || {
        s.get("leases/kube-node-lease/edge1").expect("lease")["spec"]["renewTime"]
            != l1["spec"]["renewTime"]
    });

    // Mirror pods with their status.
    wait_for("mirror pods with status", long, || {
        mirror(&s, "kube-system", "etcd-edge1").is_some_and(|p| restarts(&p) == 2)
            && mirror(&s, "default", "web-edge1").is_some_and(|p| p["status"]["phase"] == "Running")
    });
    let m = mirror(&s, "kube-system", "etcd-edge1").expect("mirror");
    assert_eq!(
        m["metadata"]["annotations"]["kubernetes.io/config.mirror"],
        "h1"
    );
    assert_eq!(
        m["metadata"]["annotations"]["kubernetes.io/config.source"],
        "file"
    );
    assert!(m["metadata"]["annotations"]["kubernetes.io/config.seen"].is_string());
    assert_eq!(
        m["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Node", "name": "edge1", "uid": node_uid, "controller": true}])
    );
    assert_eq!(m["spec"]["nodeName"], "edge1");
    assert_ne!(
        m["metadata"]["uid"], "h1",
        "the mirror's uid is the API server's"
    );
    // The refused one: an event and the view say so; the others are fine.
    let ev = link.events.recv_timeout(long).expect("an event");
    match ev {
        podvisor::sync::SyncEvent::MirrorPod {
            pod,
            reason,
            message,
        } => {
            assert_eq!(pod, "nowhere/lost-edge1");
            assert_eq!(reason.as_str(), "MirrorPodRefused");
            assert!(
                message.contains("namespaces \"nowhere\" not found"),
                "{message}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    let view = link.cell.get().expect("view");
    assert_eq!(view.mirrors["nowhere/lost-edge1"].state, "Refused");
    assert_eq!(view.state, "Connected");

    // A restart shows in the mirror's status.
    let t0 = Instant::now();
    link.publish(vec![a(3), b.clone()]);
    wait_for("restartCount 3", long, || {
        mirror(&s, "kube-system", "etcd-edge1").is_some_and(|p| restarts(&p) == 3)
    });
    eprintln!(
        "INFO: snapshot published -> mirror status: {:?}",
        t0.elapsed()
    );

    // A mirror deleted by an administrator (graceful: only marked) comes back; so does one
    // removed at once.
    let uid0 = m["metadata"]["uid"].clone();
    s.admin_delete("pods/kube-system/etcd-edge1", false);
    wait_for("the mirror recreated", long, || {
        mirror(&s, "kube-system", "etcd-edge1").is_some_and(|p| {
            p["metadata"]["uid"] != uid0
                && p["metadata"]["deletionTimestamp"].is_null()
                && restarts(&p) == 3
        })
    });
    let uid1 = mirror(&s, "default", "web-edge1").expect("web")["metadata"]["uid"].clone();
    s.admin_delete("pods/default/web-edge1", true);
    wait_for("the second mirror recreated", long, || {
        mirror(&s, "default", "web-edge1").is_some_and(|p| p["metadata"]["uid"] != uid1)
    });

    // An edit (new config hash) replaces the mirror; a removed static pod's mirror goes.
    let edited = pod_view("kube-system", "etcd-edge1", "h9", 0, json!({}));
    link.publish(vec![edited.clone()]);
    wait_for("the edited mirror and the orphan gone", long, || {
        mirror(&s, "kube-system", "etcd-edge1")
            .is_some_and(|p| p["metadata"]["annotations"]["kubernetes.io/config.mirror"] == "h9")
            && mirror(&s, "default", "web-edge1").is_none()
    });

    // The Node deleted on the server: registered again, the mirror and the lease follow its
    // new uid.
    s.admin_delete("nodes//edge1", true);
    wait_for(
        "the node registered again, mirror and lease owned by it",
        long,
        || {
            let Some(n) = s.get("nodes//edge1") else {
                return false;
            };
            let uid = &n["metadata"]["uid"];
            uid != node_uid.as_str()
                && mirror(&s, "kube-system", "etcd-edge1")
                    .is_some_and(|p| &p["metadata"]["ownerReferences"][0]["uid"] == uid)
                && s.get("leases/kube-node-lease/edge1")
                    .is_some_and(|l| &l["metadata"]["ownerReferences"][0]["uid"] == uid)
        },
    );

    // Faults: each changes nothing but the link's state, and it converges after.
    let mut gen = 10u32;
    let mut check = |what: &str, fault: &dyn Fn(), heal: &dyn Fn(), failing: bool| {
        fault();
        gen += 1;
        let pod = pod_view("kube-system", "etcd-edge1", "h9", gen, json!({}));
        link.publish(vec![pod]);
        if failing {
            wait_for(&format!("{what}: state Failing"), long, || {
                link.state() == "Failing"
            });
            std::thread::sleep(Duration::from_secs(2));
        }
        let converged = || {
            mirror(&s, "kube-system", "etcd-edge1").is_some_and(|p| restarts(&p) == i64::from(gen))
                && link.state() == "Connected"
        };
        if !failing {
            // Conflicts and slowness delay the status, never lose it.
            let took = wait_for(
                &format!("{what}: convergence under the fault"),
                long,
                converged,
            );
            eprintln!("INFO: {what}: status written {took:?} after the change, under the fault");
        }
        let healed = Instant::now();
        heal();
        let took = wait_for(&format!("{what}: convergence"), long, converged);
        // Within one status period (plus the backoff step in progress).
        assert!(took < update * 8, "{what}: converged after {took:?}");
        eprintln!(
            "INFO: {what}: converged {:?} after it healed",
            healed.elapsed()
        );
    };
    check(
        "500",
        &|| {
            s.set_faults(Faults {
                status: Some(500),
                ..Default::default()
            })
        },
        &|| s.set_faults(Faults::default()),
        true,
    );
    check(
        "429 Retry-After 2",
        &|| {
            s.set_faults(Faults {
                status: Some(429),
                retry_after: Some(2),
                ..Default::default()
            })
        },
        &|| s.set_faults(Faults::default()),
        true,
    );
    check("down", &|| s.stop(), &|| s.restart(), true);
    check(
        "foreign certificate",
        &|| {
            s.use_foreign_certificate();
            s.stop();
            s.restart();
        },
        &|| {
            s.use_own_certificate();
            s.stop();
            s.restart();
        },
        true,
    );
    check(
        "conflicts",
        &|| {
            s.set_faults(Faults {
                conflicts: 3,
                ..Default::default()
            })
        },
        &|| {},
        false,
    );
    check(
        "slow (1.5 s a request)",
        &|| {
            s.set_faults(Faults {
                delay: Duration::from_millis(1500),
                ..Default::default()
            })
        },
        &|| s.set_faults(Faults::default()),
        false,
    );
    let view = link.cell.get().expect("view");
    assert!(
        view.last_error.is_some(),
        "the last error is kept: {view:?}"
    );

    // A real client decodes what podvisor wrote.
    let admin = admin_kubeconfig(&s, dir.path());
    for args in [
        vec!["get", "pods,nodes", "-A", "-o", "yaml"],
        vec!["get", "leases", "-n", "kube-node-lease", "-o", "json"],
        vec!["describe", "nodes", "edge1"],
        vec!["describe", "pods", "-n", "kube-system", "etcd-edge1"],
    ] {
        let out = Command::new(kubectl())
            .arg("--kubeconfig")
            .arg(&admin)
            .args(&args)
            .output()
            .expect("kubectl (Debian's kubernetes-client; PODVISOR_TEST_KUBECTL names another)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}\n{text}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("edge1"), "kubectl {args:?}:\n{text}");
        if args[0] == "describe" && args[1] == "pods" {
            assert!(text.contains("Controlled By:  Node/edge1"), "{text}");
        }
    }
}

#[test]
fn requests_in_steady_state_are_the_lease_and_changes_only() {
    // 10 pods, nothing changing, kubelet-default periods scaled down 10x (lease renewed
    // every second, node status checked every second, reported every 5 s): in 10 s that
    // is 10 lease renewals, 2 node status reports, and no pod requests at all.
    let dir = tempfile::tempdir().expect("tmp");
    let s = ApiServer::start(dir.path());
    let pods: Vec<PodView> = (0..10)
        .map(|i| {
            pod_view(
                "default",
                &format!("p{i}-edge1"),
                &format!("h{i}"),
                0,
                json!({}),
            )
        })
        .collect();
    let link = start_link(&s, dir.path(), Duration::from_secs(1), pods);
    wait_for("10 mirrors with status", Duration::from_secs(15), || {
        s.list("pods")
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count()
            == 10
    });
    std::thread::sleep(Duration::from_secs(2));
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(10));
    let reqs = s.requests_since(t0);
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for (m, p) in &reqs {
        let kind = if p.contains("/leases/") {
            "lease"
        } else if p.starts_with("/api/v1/nodes") {
            "node"
        } else {
            "pods"
        };
        *by.entry(format!("{m} {kind}")).or_default() += 1;
    }
    eprintln!("INFO: requests in 10 s of steady state (10 pods, periods/10): {by:?}");
    assert_eq!(
        by.get("GET pods").copied().unwrap_or(0) + by.get("PATCH pods").copied().unwrap_or(0),
        0,
        "{by:?}"
    );
    let lease = by.get("PUT lease").copied().unwrap_or(0);
    assert!((8..=11).contains(&lease), "{by:?}");
    assert!(by.get("PATCH node").copied().unwrap_or(0) <= 3, "{by:?}");
    drop(link);
}

/// The whole daemon with real containers (root).
#[test]
#[ignore = "needs root: runs podvisor run with containers"]
fn daemon_mirrors_static_pods_and_never_waits_for_the_api_server() {
    use common::daemon::{Daemon, KeepLogOnPanic};
    use common::TestEnv;
    let env = TestEnv::new("apiserver-daemon");
    let _ = env.images();
    let dir = env.dir.path().join("apiserver");
    let s = ApiServer::start(&dir);
    let creds = s
        .pki
        .issue("node", "system:node:testnode", &["system:nodes"], false);
    let kubeconfig = dir.join("node.kubeconfig");
    s.kubeconfig(&kubeconfig, &creds);
    let manifests = env.dir.path().join("manifests");
    std::fs::create_dir_all(&manifests).expect("manifests");
    let image = common::BUSYBOX;
    std::fs::write(
        manifests.join("steady.yaml"),
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: steady, namespace: kube-system, labels: {{tier: control-plane}}}}\nspec:\n  containers:\n  - {{name: c, image: {image}, imagePullPolicy: Never, command: [sleep, '3600']}}\n"),
    )
    .expect("manifest");
    std::fs::write(
        manifests.join("crash.yaml"),
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: crash}}\nspec:\n  containers:\n  - {{name: c, image: {image}, imagePullPolicy: Never, command: [sh, -c, 'sleep 1; exit 3']}}\n"),
    )
    .expect("manifest");
    let config = env.dir.path().join("kubelet.yaml");
    std::fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenableServer: false\nhealthzPort: 0\n",
    )
    .expect("config");
    let d = Daemon::start_with(
        &env,
        &manifests,
        &[
            "--config",
            config.to_str().expect("utf-8"),
            "--kubeconfig",
            kubeconfig.to_str().expect("utf-8"),
        ],
    );
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let long = Duration::from_secs(60);
    wait_for("node, lease and two mirrors", long, || {
        s.get("nodes//testnode").is_some()
            && s.get("leases/kube-node-lease/testnode").is_some()
            && mirror(&s, "kube-system", "steady-testnode")
                .is_some_and(|p| p["status"]["phase"] == "Running")
            && mirror(&s, "default", "crash-testnode").is_some()
    });
    // Restarts tracked: the local restart count shows in the mirror within a second.
    let local_restarts = |d: &Daemon| -> i64 {
        d.pods()
            .unwrap_or_default()
            .iter()
            .find(|v| v.pod.metadata.name.as_deref() == Some("crash-testnode"))
            .and_then(|v| {
                v.pod
                    .status
                    .as_ref()?
                    .container_statuses
                    .as_ref()?
                    .first()
                    .map(|c| i64::from(c.restart_count))
            })
            .unwrap_or(-1)
    };
    // Polled together every 5 ms: when the local status shows a restart, and when the
    // mirror does (a printed number, not a timed assertion).
    for _ in 0..2 {
        let before = local_restarts(&d);
        wait_for("the mirror in line", long, || {
            mirror(&s, "default", "crash-testnode").is_some_and(|p| restarts(&p) >= before)
        });
        let (mut local_at, mut mirror_at) = (None, None);
        let t0 = Instant::now();
        while local_at.is_none() || mirror_at.is_none() {
            assert!(t0.elapsed() < long, "no restart seen");
            let now = Instant::now();
            if local_at.is_none() && local_restarts(&d) > before {
                local_at = Some(now);
            }
            if mirror_at.is_none()
                && mirror(&s, "default", "crash-testnode").is_some_and(|p| restarts(&p) > before)
            {
                mirror_at = Some(now);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let (l, m) = (local_at.unwrap_or(t0), mirror_at.unwrap_or(t0));
        eprintln!(
            "INFO: restart {}: local status -> mirror status {:?} (5 ms polling)",
            before + 1,
            m.saturating_duration_since(l)
        );
    }
    // A deleted mirror comes back.
    s.admin_delete("pods/kube-system/steady-testnode", false);
    wait_for("the mirror recreated", long, || {
        mirror(&s, "kube-system", "steady-testnode")
            .is_some_and(|p| p["metadata"]["deletionTimestamp"].is_null())
    });
    // The API server gone: local pods go on, the API answers at once.
    let steady_id = |d: &Daemon| {
        d.pods()
            .unwrap_or_default()
            .iter()
            .find(|v| v.pod.metadata.name.as_deref() == Some("steady-testnode"))
            .and_then(|v| {
                v.pod
                    .status
                    .as_ref()?
                    .container_statuses
                    .as_ref()?
                    .first()?
                    .container_id
                    .clone()
            })
    };
    let id0 = steady_id(&d).expect("steady runs");
    s.stop();
    let outage = Instant::now();
    let mut slowest = Duration::ZERO;
    let outage_for = Duration::from_secs(
        std::env::var("PODVISOR_TEST_OUTAGE_SECS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(30),
    );
    while outage.elapsed() < outage_for {
        let t = Instant::now();
        assert_eq!(
            steady_id(&d).as_deref(),
            Some(id0.as_str()),
            "the steady pod kept its container"
        );
        slowest = slowest.max(t.elapsed());
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("INFO: slowest local API answer during the outage: {slowest:?}");
    let (_, text, _) = d.cli(&env, &["node"]);
    assert!(
        text.contains("Failing") && text.contains("Last Error"),
        "{text}"
    );
    let (_, text, _) = d.cli(&env, &["describe", "steady"]);
    assert!(
        text.contains("Mirror Pod:") && text.contains("API Server:"),
        "{text}"
    );
    // Back: everything converges within one status period (10 s) and its backoff step.
    let want = local_restarts(&d);
    s.restart();
    let took = wait_for("convergence", long, || {
        mirror(&s, "default", "crash-testnode").is_some_and(|p| restarts(&p) >= want)
    });
    eprintln!("INFO: converged {took:?} after the API server came back");
    // An edit replaces the mirror.
    std::fs::write(
        manifests.join("steady.yaml"),
        format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: steady, namespace: kube-system, labels: {{tier: edited}}}}\nspec:\n  containers:\n  - {{name: c, image: {image}, imagePullPolicy: Never, command: [sleep, '3600']}}\n"),
    )
    .expect("edit");
    wait_for("the relabelled mirror", long, || {
        mirror(&s, "kube-system", "steady-testnode")
            .is_some_and(|p| p["metadata"]["labels"]["tier"] == "edited")
    });
    std::fs::remove_file(manifests.join("crash.yaml")).expect("remove");
    wait_for("the removed pod's mirror gone", long, || {
        mirror(&s, "default", "crash-testnode").is_none()
    });
    drop(d);
    let _ = Arc::strong_count(&s);
}

#[test]
fn a_burst_of_changes_collapses_into_one_patch_per_pod() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = ApiServer::start(dir.path());
    let pods = |n: u32| -> Vec<PodView> {
        (0..100)
            .map(|i| {
                pod_view(
                    "default",
                    &format!("p{i}-edge1"),
                    &format!("h{i}"),
                    n,
                    json!({}),
                )
            })
            .collect()
    };
    let link = start_link(&s, dir.path(), Duration::from_secs(10), pods(0));
    wait_for("100 mirrors with status", Duration::from_secs(60), || {
        s.list("pods")
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count()
            == 100
    });
    std::thread::sleep(Duration::from_millis(500));
    // Five snapshots back to back, every pod's restart count going up each time (what 100
    // pods restarting at once looks like from the link: the sync loop only publishes).
    let t0 = Instant::now();
    for n in 1..=5 {
        link.publish(pods(n));
    }
    let took = wait_for(
        "every mirror at restartCount 5",
        Duration::from_secs(60),
        || s.list("pods").iter().filter(|p| restarts(p) == 5).count() == 100,
    );
    let patches = s
        .requests_since(t0)
        .iter()
        .filter(|(m, p)| m == "PATCH" && p.ends_with("/status") && p.contains("/pods/"))
        .count();
    eprintln!("INFO: 100 pods x 5 snapshots -> {patches} status patches, all written in {took:?}");
    assert!(
        patches <= 200,
        "{patches} patches: the snapshots did not collapse"
    );
}
