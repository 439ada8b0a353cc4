//! api::handlers: answers an [`ApiRequest`] from one [`Snapshot`] — JSON documents, log text,
//! or a plan for the server to follow a log. No sockets; only log reads touch the disk.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde::Serialize;

use super::{error_chain, ApiError, ApiRequest, LogRequest};
use crate::logs::{read_log, FollowStart, LogLine, ReadOptions};
use crate::status::{PodView, Snapshot};

/// What the server sends back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// `application/json` with this status.
    Json { status: u16, body: Vec<u8> },
    /// `text/plain`, 200.
    Text { body: Vec<u8> },
    /// Stream this log until the client leaves or the container stops running.
    Follow(FollowPlan),
}

/// A log to follow, resolved from the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowPlan {
    /// `namespace/name` of the pod.
    pub pod: String,
    pub container: String,
    pub path: PathBuf,
    pub start: FollowStart,
}

/// Answers `req` from `snap`. Errors carry their HTTP status ([`ApiError::status`]); turn them
/// into a reply with [`error_reply`].
pub fn handle(req: &ApiRequest, snap: &Snapshot) -> Result<Reply, ApiError> {
    match req {
        ApiRequest::Healthz => Ok(Reply::Text {
            body: b"ok".to_vec(),
        }),
        ApiRequest::ListPods => json(&snap.pods),
        ApiRequest::GetPod(pod) => json(find(snap, &pod.query())?),
        ApiRequest::Events { pod: None } => json(&snap.events),
        ApiRequest::Events { pod: Some(query) } => {
            let view = find(snap, query)?;
            let key = pod_key(&view.pod);
            let events: Vec<_> = snap.events.iter().filter(|e| e.pod == key).collect();
            json(&events)
        }
        ApiRequest::SourceErrors => json(&snap.source_errors),
        ApiRequest::Logs(req) => logs(req, snap),
        // Served by the server when it knows the cgroup root (see `server::serve_with_stats`).
        ApiRequest::Stats { .. } => Err(ApiError::NoRoute {
            path: "/stats".into(),
        }),
        // Without the node's capacity and image store: the conditions and pods only.
        ApiRequest::Node => json(&super::node::node_json(snap, &Default::default())),
    }
}

/// The JSON error reply `{"error": "<message and causes>"}` for `err`.
pub fn error_reply(err: &ApiError) -> Reply {
    let body = serde_json::json!({ "error": error_chain(err) });
    Reply::Json {
        status: err.status(),
        body: body.to_string().into_bytes(),
    }
}

fn json<T: Serialize + ?Sized>(value: &T) -> Result<Reply, ApiError> {
    let body = serde_json::to_vec(value).map_err(|source| ApiError::Encode { source })?;
    Ok(Reply::Json { status: 200, body })
}

fn find<'a>(snap: &'a Snapshot, query: &str) -> Result<&'a PodView, ApiError> {
    snap.find_pod(query).ok_or_else(|| ApiError::PodNotFound {
        query: query.to_string(),
    })
}

/// `namespace/name`, as events name their pod.
pub fn pod_key(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// Containers then init containers, as named in the spec.
fn container_names(pod: &Pod) -> Vec<String> {
    let Some(spec) = &pod.spec else {
        return Vec::new();
    };
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .map(|c| c.name.clone())
        .collect()
}

fn container_status<'a>(pod: &'a Pod, name: &str) -> Option<&'a ContainerStatus> {
    let status = pod.status.as_ref()?;
    status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .find(|s| s.name == name)
}

/// A few words on why a container has no log: its waiting reason, if any.
fn waiting_state(pod: &Pod, name: &str) -> String {
    let waiting = container_status(pod, name)
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.waiting.as_ref());
    match waiting.and_then(|w| w.reason.as_deref()) {
        Some(reason) => format!("waiting to start: {reason}"),
        None => "waiting to start".to_string(),
    }
}

/// Whether the container is running now (following ends when it is not).
pub fn container_running(pod: &Pod, name: &str) -> bool {
    container_status(pod, name)
        .and_then(|s| s.state.as_ref())
        .is_some_and(|s| s.running.is_some())
}

fn logs(req: &LogRequest, snap: &Snapshot) -> Result<Reply, ApiError> {
    let view = find(snap, &req.pod.query())?;
    let pod = pod_key(&view.pod);
    let names = container_names(&view.pod);
    let container = match &req.container {
        Some(c) => {
            if !names.contains(c) {
                return Err(ApiError::ContainerNotFound {
                    pod,
                    container: c.clone(),
                    choices: names.join(" "),
                });
            }
            c.clone()
        }
        None => {
            let main: Vec<&String> = view
                .pod
                .spec
                .iter()
                .flat_map(|s| s.containers.iter().map(|c| &c.name))
                .collect();
            match main.as_slice() {
                [only] => (*only).clone(),
                _ => {
                    return Err(ApiError::ContainerRequired {
                        pod,
                        choices: names.join(" "),
                    })
                }
            }
        }
    };
    let paths = if req.previous {
        &view.previous_log_paths
    } else {
        &view.log_paths
    };
    let Some(path) = paths.get(&container) else {
        return Err(if req.previous {
            ApiError::NoPreviousLog { pod, container }
        } else {
            ApiError::NoLog {
                state: waiting_state(&view.pod, &container),
                pod,
                container,
            }
        });
    };
    if req.follow {
        return Ok(Reply::Follow(FollowPlan {
            pod,
            container,
            path: path.clone(),
            start: match req.tail {
                Some(n) => FollowStart::Tail(n),
                None => FollowStart::Beginning,
            },
        }));
    }
    // Rotated files too: the kubelet reads only the current file, but nothing on disk should
    // be hidden from `logs`.
    let opts = ReadOptions {
        tail: req.tail,
        include_rotated: true,
    };
    let lines = read_log(path, opts).map_err(|source| ApiError::ReadLog {
        pod,
        container,
        source,
    })?;
    Ok(Reply::Text {
        body: log_text(&lines),
    })
}

/// Log lines as `kubectl logs` prints them: content only, one per line.
pub fn log_text(lines: &[LogLine]) -> Vec<u8> {
    let mut out = Vec::with_capacity(lines.iter().map(|l| l.content.len() + 1).sum());
    for l in lines {
        out.extend_from_slice(&l.content);
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::parse_request;
    use crate::status::{EventRecord, EventType, SourceErrorView};
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStateWaiting, PodSpec, PodStatus,
    };
    use std::collections::BTreeMap;

    pub(crate) fn view(ns: &str, name: &str, containers: &[&str]) -> PodView {
        let mut pod = Pod::default();
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some(ns.into());
        pod.spec = Some(PodSpec {
            containers: containers
                .iter()
                .map(|c| Container {
                    name: c.to_string(),
                    image: Some("busybox".into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(
                containers
                    .iter()
                    .map(|c| ContainerStatus {
                        name: c.to_string(),
                        state: Some(ContainerState {
                            running: Some(ContainerStateRunning::default()),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        });
        PodView {
            pod,
            source: format!("/etc/podvisor/manifests/{name}.yaml"),
            source_error: None,
            rolled_back: None,
            log_paths: BTreeMap::new(),
            previous_log_paths: BTreeMap::new(),
            mirror: None,
        }
    }

    fn event(pod: &str, reason: &str) -> EventRecord {
        EventRecord {
            type_: EventType::Normal,
            reason: reason.into(),
            message: format!("{reason} message"),
            pod: pod.into(),
            container: None,
            count: 1,
            first_timestamp: "2024-01-02T03:04:05Z".into(),
            last_timestamp: "2024-01-02T03:04:05Z".into(),
        }
    }

    fn snapshot() -> Snapshot {
        Snapshot {
            node_name: "n1".into(),
            pods: vec![
                view("default", "web-n1", &["app", "sidecar"]),
                view("kube-system", "etcd-n1", &["etcd"]),
            ],
            sources_ready: true,
            node_conditions: vec![],
            source_errors: vec![SourceErrorView {
                source: "/etc/podvisor/manifests/bad.yaml".into(),
                message: "bad.yaml:3:1: spec: missing field".into(),
                since: "2024-01-02T03:04:05Z".into(),
            }],
            events: vec![
                event("default/web-n1", "Started").into(),
                event("kube-system/etcd-n1", "Pulled").into(),
                event("", "SourceError").into(),
            ],
        }
    }

    fn run(url: &str, snap: &Snapshot) -> Result<Reply, ApiError> {
        handle(&parse_request("GET", url).expect(url), snap)
    }

    fn json_body(reply: Reply) -> serde_json::Value {
        match reply {
            Reply::Json { status: 200, body } => serde_json::from_slice(&body).expect("json"),
            other => panic!("unexpected reply {other:?}"),
        }
    }

    #[test]
    fn pods_and_lookups() {
        let snap = snapshot();
        let all: Vec<PodView> =
            serde_json::from_value(json_body(run("/pods", &snap).expect("list"))).expect("pods");
        assert_eq!(all, snap.pods);
        for url in ["/pods/etcd", "/pods/etcd-n1", "/pods/kube-system/etcd"] {
            let v: PodView =
                serde_json::from_value(json_body(run(url, &snap).expect(url))).expect("pod");
            assert_eq!(v.pod.metadata.name.as_deref(), Some("etcd-n1"), "{url}");
        }
        let err = run("/pods/default/etcd", &snap).expect_err("wrong namespace");
        assert_eq!(err.status(), 404);
        assert_eq!(err.to_string(), "pod \"default/etcd\" not found");
        match error_reply(&err) {
            Reply::Json { status, body } => {
                assert_eq!(status, 404);
                let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
                assert_eq!(v["error"], "pod \"default/etcd\" not found");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            run("/healthz", &snap).expect("healthz"),
            Reply::Text {
                body: b"ok".to_vec()
            }
        );
        let errs = json_body(run("/source-errors", &snap).expect("errors"));
        assert_eq!(errs[0]["message"], "bad.yaml:3:1: spec: missing field");
    }

    #[test]
    fn events_filtered_by_pod() {
        let snap = snapshot();
        let all = json_body(run("/events", &snap).expect("all"));
        assert_eq!(all.as_array().map(Vec::len), Some(3));
        let etcd: Vec<EventRecord> =
            serde_json::from_value(json_body(run("/events?pod=etcd", &snap).expect("etcd")))
                .expect("events");
        assert_eq!(etcd.len(), 1);
        assert_eq!(etcd[0].reason, "Pulled");
        let err = run("/events?pod=nope", &snap).expect_err("unknown pod");
        assert_eq!(err.to_string(), "pod \"nope\" not found");
    }

    fn write_log(path: &std::path::Path, lines: &[&str]) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let mut s = String::new();
        for l in lines {
            s.push_str(&format!("2024-01-02T03:04:05.000000001Z stdout F {l}\n"));
        }
        std::fs::write(path, s).expect("write log");
    }

    #[test]
    fn logs_choose_container_and_read_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut snap = snapshot();
        let app = dir.path().join("app/1.log");
        let prev = dir.path().join("app/0.log");
        let etcd = dir.path().join("etcd/0.log");
        write_log(&app, &["one", "two", "three"]);
        write_log(&prev, &["old"]);
        write_log(&etcd, &["e1", "e2"]);
        snap.pods[0].log_paths.insert("app".into(), app.clone());
        snap.pods[0].previous_log_paths.insert("app".into(), prev);
        snap.pods[1].log_paths.insert("etcd".into(), etcd);

        let text = |url: &str| match run(url, &snap).expect(url) {
            Reply::Text { body } => String::from_utf8(body).expect("utf8"),
            other => panic!("{other:?}"),
        };
        assert_eq!(text("/pods/kube-system/etcd-n1/log"), "e1\ne2\n");
        assert_eq!(
            text("/pods/default/web-n1/log?container=app"),
            "one\ntwo\nthree\n"
        );
        assert_eq!(
            text("/pods/default/web-n1/log?container=app&tail=2"),
            "two\nthree\n"
        );
        assert_eq!(text("/pods/default/web-n1/log?container=app&tail=0"), "");
        assert_eq!(
            text("/pods/default/web-n1/log?container=app&previous=true"),
            "old\n"
        );

        let err = |url: &str| run(url, &snap).expect_err(url);
        let e = err("/pods/default/web-n1/log");
        assert_eq!(e.status(), 400);
        assert_eq!(
            e.to_string(),
            "a container name must be specified for pod default/web-n1, choose one of: [app sidecar]"
        );
        let e = err("/pods/default/web-n1/log?container=db");
        assert_eq!(e.status(), 400);
        assert_eq!(
            e.to_string(),
            "container db is not valid for pod default/web-n1, choose one of: [app sidecar]"
        );
        let e = err("/pods/default/web-n1/log?container=sidecar");
        assert_eq!(e.status(), 400);
        assert_eq!(
            e.to_string(),
            "container sidecar in pod default/web-n1 has no log yet: waiting to start"
        );
        let e = err("/pods/default/web-n1/log?container=sidecar&previous=true");
        assert_eq!(
            e.to_string(),
            "previous terminated container sidecar in pod default/web-n1 not found"
        );
        let e = err("/pods/default/nope/log");
        assert_eq!(e.status(), 404);
        assert!(e.to_string().contains("default/nope"), "{e}");

        // A log file that vanished: 404 naming the pod, container and file.
        std::fs::remove_file(&app).expect("rm");
        let e = err("/pods/default/web-n1/log?container=app");
        assert_eq!(e.status(), 404);
        let msg = error_chain(&e);
        assert!(msg.contains("container app in pod default/web-n1"), "{msg}");
        assert!(msg.contains(&app.display().to_string()), "{msg}");

        match run(
            "/pods/default/web-n1/log?container=app&follow=true&tail=5",
            &snap,
        )
        .expect("follow")
        {
            Reply::Follow(plan) => {
                assert_eq!(plan.pod, "default/web-n1");
                assert_eq!(plan.container, "app");
                assert_eq!(plan.path, app);
                assert_eq!(plan.start, FollowStart::Tail(5));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn waiting_reason_is_named_when_there_is_no_log() {
        let mut snap = snapshot();
        let status = snap.pods[1].pod.status.as_mut().expect("status");
        status.container_statuses.as_mut().expect("statuses")[0].state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("ContainerCreating".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let e = run("/pods/kube-system/etcd-n1/log", &snap).expect_err("no log");
        assert_eq!(
            e.to_string(),
            "container etcd in pod kube-system/etcd-n1 has no log yet: waiting to start: ContainerCreating"
        );
        assert!(!container_running(&snap.pods[1].pod, "etcd"));
        assert!(container_running(&snap.pods[0].pod, "app"));
    }
}
