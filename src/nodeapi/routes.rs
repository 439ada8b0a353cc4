//! nodeapi::routes: the secure port's routes and their answers, in the kubelet's paths and
//! JSON shapes, from the published [`Snapshot`] (pure: no sockets).
//!
//! - `/healthz` (and `/healthz/{ping,syncloop}`): as on the healthz port;
//! - `/pods`: a v1 `PodList` of every pod with its status (the kubelet's pod manager view);
//! - `/runningpods`: a v1 `PodList` of the pods with running containers, each with only
//!   name, namespace, uid and its running containers' names and images (the kubelet builds
//!   it from the runtime's pod cache the same way);
//! - `/metrics`: [`super::metrics`] (OpenMetrics text).
//!
//! [`ROUTES`] lists every path prefix served; the authentication test walks it.

use std::time::Instant;

use serde_json::json;

use super::healthz::HealthChecks;
use super::http::Response;
use crate::status::Snapshot;

/// Every route of the secure port (a path, or a prefix ending in `/`), for the tests that
/// check each one refuses requests without valid credentials.
pub const ROUTES: &[&str] = &[
    "/healthz",
    "/healthz/ping",
    "/healthz/syncloop",
    "/metrics",
    "/pods",
    "/runningpods",
    "/runningpods/",
];

/// Answers an authorized request.
pub fn answer(
    method: &str,
    path: &str,
    query: &str,
    snap: &Snapshot,
    health: &HealthChecks,
) -> Response {
    if method != "GET" && method != "HEAD" {
        let mut r = Response::text(405, "Method Not Allowed");
        r.headers.push(("Allow", "GET, HEAD".into()));
        return r;
    }
    if let Some(r) = health.answer(path, query, Instant::now()) {
        return r;
    }
    match path {
        "/pods" | "/pods/" => pod_list(snap),
        "/runningpods" | "/runningpods/" => running_pods(snap),
        "/metrics" => match super::metrics::render(snap, health, Instant::now()) {
            Ok(text) => Response {
                status: 200,
                content_type: super::metrics::CONTENT_TYPE,
                headers: Vec::new(),
                body: text.into_bytes(),
            },
            Err(_) => Response::text(500, "Internal Server Error"),
        },
        _ => Response::not_found(),
    }
}

fn encode(value: &impl serde::Serialize) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => Response::json(200, body),
        Err(e) => {
            log::error!("node api: cannot encode a response: {e}");
            Response::text(500, "Internal Server Error")
        }
    }
}

/// `/pods`: `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[...]}`.
fn pod_list(snap: &Snapshot) -> Response {
    let items: Vec<_> = snap.pods.iter().map(|v| &v.pod).collect();
    #[derive(serde::Serialize)]
    struct PodList<'a, T> {
        kind: &'static str,
        #[serde(rename = "apiVersion")]
        api_version: &'static str,
        metadata: serde_json::Map<String, serde_json::Value>,
        items: &'a [T],
    }
    encode(&PodList {
        kind: "PodList",
        api_version: "v1",
        metadata: Default::default(),
        items: &items,
    })
}

/// `/runningpods`.
fn running_pods(snap: &Snapshot) -> Response {
    let items: Vec<serde_json::Value> = snap
        .pods
        .iter()
        .filter_map(|v| {
            let status = v.pod.status.as_ref()?;
            let containers: Vec<serde_json::Value> = status
                .container_statuses
                .iter()
                .flatten()
                .chain(status.init_container_statuses.iter().flatten())
                .filter(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
                .map(|c| json!({"name": c.name, "image": c.image, "resources": {}}))
                .collect();
            if containers.is_empty() {
                return None;
            }
            let m = &v.pod.metadata;
            Some(json!({
                "metadata": {
                    "name": m.name,
                    "namespace": m.namespace,
                    "uid": m.uid,
                    "creationTimestamp": null,
                },
                "spec": {"containers": containers},
                "status": {},
            }))
        })
        .collect();
    encode(&json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::SyncLoopMonitor;
    use std::time::Duration;

    fn snapshot() -> Snapshot {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-node", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}, {"name": "side", "image": "alpine"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "main", "image": "busybox:1.35", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
                {"name": "side", "image": "alpine", "imageID": "", "ready": false, "restartCount": 2,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        }))
        .expect("pod");
        let pending: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "idle-node", "namespace": "default", "uid": "u2"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            "status": {"phase": "Pending"}
        }))
        .expect("pod");
        let view = |pod| crate::status::PodView {
            pod,
            source: "file".into(),
            source_error: None,
            rolled_back: None,
            log_paths: Default::default(),
            previous_log_paths: Default::default(),
            mirror: None,
        };
        Snapshot {
            node_name: "node".into(),
            pods: vec![view(pending), view(pod)],
            ..Default::default()
        }
    }

    fn health() -> HealthChecks {
        HealthChecks {
            monitor: SyncLoopMonitor::new(Instant::now()),
            deadline: Duration::from_secs(10),
        }
    }

    fn body(r: &Response) -> serde_json::Value {
        serde_json::from_slice(&r.body).expect("json")
    }

    #[test]
    fn pods_is_a_pod_list_with_status() {
        let r = answer("GET", "/pods", "", &snapshot(), &health());
        assert_eq!(r.status, 200);
        let v = body(&r);
        assert_eq!(v["kind"], "PodList");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["items"][1]["metadata"]["name"], "web-node");
        assert_eq!(v["items"][1]["status"]["phase"], "Running");
    }

    #[test]
    fn runningpods_lists_running_containers_only() {
        let r = answer("GET", "/runningpods/", "", &snapshot(), &health());
        let v = body(&r);
        assert_eq!(
            v["items"],
            json!([{
                "metadata": {"name": "web-node", "namespace": "default", "uid": "u1", "creationTimestamp": null},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.35", "resources": {}}]},
                "status": {}
            }])
        );
    }

    #[test]
    fn other_paths_and_methods() {
        let (s, h) = (snapshot(), health());
        assert_eq!(answer("GET", "/nope", "", &s, &h).status, 404);
        assert_eq!(answer("POST", "/pods", "", &s, &h).status, 405);
        assert_eq!(answer("GET", "/healthz", "", &s, &h).body, b"ok");
        for route in ROUTES {
            assert_eq!(answer("GET", route, "", &s, &h).status, 200, "{route}");
        }
    }

    #[test]
    fn metrics_pass_promtool_and_count_the_snapshot() {
        let r = answer("GET", "/metrics", "", &snapshot(), &health());
        assert_eq!(r.status, 200);
        let text = String::from_utf8(r.body).expect("utf8");
        for line in [
            "kubelet_running_pods 1\n",
            "kubelet_running_containers{container_state=\"running\"} 1\n",
            "podvisor_pods{phase=\"Running\"} 1\n",
            "podvisor_pods{phase=\"Pending\"} 1\n",
            "podvisor_container_restarts{namespace=\"default\",pod=\"web-node\",container=\"side\"} 2\n",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        let mut child = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool (Debian package prometheus)");
        use std::io::Write;
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write");
        let out = child.wait_with_output().expect("promtool");
        assert!(
            out.status.success(),
            "promtool: {}{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
