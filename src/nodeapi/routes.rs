//! nodeapi::routes: the secure port's route table ([`ROUTES`], the kubelet's paths) and the
//! dispatch of an authorized request to its endpoint:
//!
//! - `/healthz` (and `/healthz/{ping,syncloop}`): as on the healthz port;
//! - `/pods`: a v1 `PodList` of every pod with its status (the kubelet's pod manager view);
//! - `/runningpods`: a v1 `PodList` of the pods with running containers, each with only
//!   name, namespace, uid and its running containers' names and images (the kubelet builds
//!   it from the runtime's pod cache the same way);
//! - `/stats/summary`: the Summary API ([`super::summary`]);
//! - `/metrics`, `/metrics/probes` ([`super::metrics`]), `/metrics/cadvisor`,
//!   `/metrics/resource` ([`super::cadvisor`]): OpenMetrics text;
//! - `/containerLogs/{namespace}/{pod}/{container}` ([`super::containerlogs`]);
//! - `/logs/{path}`: the node's log files under /var/log ([`super::syslogs`]);
//! - `/api/v1/...`: podvisor's push source ([`super::push`]).
//!
//! The tests walk [`ROUTES`] (every method of every route) to check that each refuses requests
//! without valid credentials.

use std::time::Instant;

use serde_json::json;

pub use super::context::{Context, Request};
use crate::httpserver::Response;
use crate::status::Snapshot;

/// What an endpoint serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Healthz,
    Pods,
    RunningPods,
    StatsSummary,
    Metrics,
    MetricsCadvisor,
    MetricsProbes,
    MetricsResource,
    ContainerLogs,
    SystemLogs,
    ApiPods,
    ApiNamespacePods,
    ApiPod,
}

/// One route: a path pattern (`{name}` matches one segment, a final `{*name}` the rest,
/// possibly empty), the methods it takes and an example path for the tests.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    pub pattern: &'static str,
    pub methods: &'static [&'static str],
    pub endpoint: Endpoint,
    pub example: &'static str,
}

const GET: &[&str] = &["GET", "HEAD"];

/// Every route of the secure port.
pub const ROUTES: &[Route] = &[
    Route {
        pattern: "/healthz",
        methods: GET,
        endpoint: Endpoint::Healthz,
        example: "/healthz",
    },
    Route {
        pattern: "/healthz/{check}",
        methods: GET,
        endpoint: Endpoint::Healthz,
        example: "/healthz/syncloop",
    },
    Route {
        pattern: "/pods",
        methods: GET,
        endpoint: Endpoint::Pods,
        example: "/pods",
    },
    Route {
        pattern: "/runningpods",
        methods: GET,
        endpoint: Endpoint::RunningPods,
        example: "/runningpods/",
    },
    Route {
        pattern: "/stats/summary",
        methods: GET,
        endpoint: Endpoint::StatsSummary,
        example: "/stats/summary",
    },
    Route {
        pattern: "/metrics",
        methods: GET,
        endpoint: Endpoint::Metrics,
        example: "/metrics",
    },
    Route {
        pattern: "/metrics/cadvisor",
        methods: GET,
        endpoint: Endpoint::MetricsCadvisor,
        example: "/metrics/cadvisor",
    },
    Route {
        pattern: "/metrics/probes",
        methods: GET,
        endpoint: Endpoint::MetricsProbes,
        example: "/metrics/probes",
    },
    Route {
        pattern: "/metrics/resource",
        methods: GET,
        endpoint: Endpoint::MetricsResource,
        example: "/metrics/resource",
    },
    Route {
        pattern: "/containerLogs/{namespace}/{pod}/{container}",
        methods: GET,
        endpoint: Endpoint::ContainerLogs,
        example: "/containerLogs/default/web/main?tailLines=10",
    },
    Route {
        pattern: "/logs/{*path}",
        methods: GET,
        endpoint: Endpoint::SystemLogs,
        example: "/logs/",
    },
    Route {
        pattern: "/logs",
        methods: GET,
        endpoint: Endpoint::SystemLogs,
        example: "/logs",
    },
    Route {
        pattern: "/api/v1/pods",
        methods: GET,
        endpoint: Endpoint::ApiPods,
        example: "/api/v1/pods",
    },
    Route {
        pattern: "/api/v1/namespaces/{namespace}/pods",
        methods: GET,
        endpoint: Endpoint::ApiNamespacePods,
        example: "/api/v1/namespaces/default/pods",
    },
    Route {
        pattern: "/api/v1/namespaces/{namespace}/pods/{name}",
        methods: &["GET", "HEAD", "PUT", "DELETE"],
        endpoint: Endpoint::ApiPod,
        example: "/api/v1/namespaces/default/pods/web",
    },
];

/// The values a pattern's `{name}`s matched, in order.
pub type Params = Vec<(&'static str, String)>;

/// A matched route.
#[derive(Debug, Clone)]
pub struct Matched {
    pub route: &'static Route,
    pub params: Params,
}

impl Matched {
    pub fn param(&self, name: &str) -> &str {
        self.params
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("", |(_, v)| v.as_str())
    }
}

fn match_pattern(pattern: &'static str, path: &str) -> Option<Params> {
    // A trailing slash names the same resource (`/pods/`), except where the rest is captured.
    let path = if path.len() > 1 && !pattern.contains("{*") {
        path.strip_suffix('/').unwrap_or(path)
    } else {
        path
    };
    let mut params = Vec::new();
    let mut rest = path.strip_prefix('/')?;
    let mut segments = pattern.trim_start_matches('/').split('/').peekable();
    while let Some(seg) = segments.next() {
        if let Some(name) = seg.strip_prefix("{*").and_then(|s| s.strip_suffix('}')) {
            params.push((name, crate::httpserver::percent_decode(rest)?));
            return Some(params);
        }
        let (head, tail) = match rest.split_once('/') {
            Some((h, t)) => (h, Some(t)),
            None => (rest, None),
        };
        if let Some(name) = seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            if head.is_empty() {
                return None;
            }
            params.push((name, crate::httpserver::percent_decode(head)?));
        } else if seg != head {
            return None;
        }
        match (tail, segments.peek()) {
            (None, None) => return Some(params),
            (Some(t), Some(_)) => rest = t,
            _ => return None,
        }
    }
    None
}

/// Why a request matched no route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRoute {
    NotFound,
    /// The path exists for these methods only.
    Method(&'static [&'static str]),
}

/// The route for `method path`.
pub fn find(method: &str, path: &str) -> Result<Matched, NoRoute> {
    let mut methods = None;
    for route in ROUTES {
        if let Some(params) = match_pattern(route.pattern, path) {
            if route.methods.contains(&method) {
                return Ok(Matched { route, params });
            }
            methods.get_or_insert(route.methods);
        }
    }
    Err(methods.map_or(NoRoute::NotFound, NoRoute::Method))
}

/// What to send.
#[derive(Debug)]
pub enum Answer {
    Whole(Response),
    /// Follow a container's log (streamed).
    Follow(super::containerlogs::FollowPlan),
    /// A log file under /var/log (streamed).
    File(super::syslogs::FilePlan),
}

impl From<Response> for Answer {
    fn from(r: Response) -> Answer {
        Answer::Whole(r)
    }
}

fn method_not_allowed(methods: &[&str]) -> Response {
    let mut r = Response::text(405, "Method Not Allowed");
    r.headers.push(("Allow", methods.join(", ")));
    r
}

/// Answers an authorized request.
pub fn answer(req: &Request, ctx: &Context) -> Answer {
    let m = match find(req.method, req.path) {
        Ok(m) => m,
        Err(NoRoute::NotFound) => return Response::not_found().into(),
        Err(NoRoute::Method(allowed)) => return method_not_allowed(allowed).into(),
    };
    let snap = ctx.snapshots.get();
    let now = Instant::now();
    let accept = req.header("accept");
    match m.route.endpoint {
        Endpoint::Healthz => ctx
            .health
            .answer(req.path, req.query, now)
            .unwrap_or_else(Response::not_found)
            .into(),
        Endpoint::Pods => pod_list(&snap).into(),
        Endpoint::RunningPods => running_pods(&snap).into(),
        Endpoint::StatsSummary => super::summary::answer(&snap, ctx).into(),
        Endpoint::Metrics => super::metrics::answer(&snap, ctx, now, accept).into(),
        Endpoint::MetricsProbes => super::metrics::probes(ctx, accept).into(),
        Endpoint::MetricsCadvisor => super::cadvisor::cadvisor(&snap, ctx, accept).into(),
        Endpoint::MetricsResource => super::cadvisor::resource(&snap, ctx, accept).into(),
        Endpoint::ContainerLogs => {
            if !ctx.debugging_handlers {
                return debugging_off();
            }
            let (ns, pod, c) = (m.param("namespace"), m.param("pod"), m.param("container"));
            match super::containerlogs::answer(ns, pod, c, req.query, &snap) {
                super::containerlogs::Logs::Whole(r) => r.into(),
                super::containerlogs::Logs::Follow(plan) => Answer::Follow(plan),
            }
        }
        Endpoint::SystemLogs => match &ctx.system_logs {
            Some(dir) if ctx.debugging_handlers => {
                match super::syslogs::answer(dir, req.path, req.query) {
                    super::syslogs::SysLog::Whole(r) => r.into(),
                    super::syslogs::SysLog::File(plan) => Answer::File(plan),
                }
            }
            _ => debugging_off(),
        },
        Endpoint::ApiPods => super::push::list(&snap, None).into(),
        Endpoint::ApiNamespacePods => super::push::list(&snap, Some(m.param("namespace"))).into(),
        Endpoint::ApiPod => {
            super::push::pod(m.param("namespace"), m.param("name"), req, &snap, ctx).into()
        }
    }
}

/// What the kubelet answers when its debugging handlers are off: the route does not exist.
fn debugging_off() -> Answer {
    Response::not_found().into()
}

/// `/pods`: `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[...]}`.
pub fn pod_list(snap: &Snapshot) -> Response {
    super::push::pod_list_of(snap.pods.iter().map(|v| &v.pod).collect())
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
    Response::json_of(
        200,
        &json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::api::stats::StatsSource;
    use crate::health::SyncLoopMonitor;
    use crate::metrics::KubeletMetrics;
    use crate::status::SnapshotCell;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::Arc;
    use std::time::Duration;

    pub(crate) fn snapshot() -> Snapshot {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
            "metadata": {"name": "web-node", "namespace": "default", "uid": "u1"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}, {"name": "side", "image": "alpine"}]},
            "status": {"phase": "Running", "qosClass": "BestEffort", "startTime": "2026-01-01T00:00:00Z",
              "containerStatuses": [
                {"name": "main", "image": "busybox:1.35", "imageID": "", "ready": true, "restartCount": 0,
                 "containerID": "podvisor://c1",
                 "state": {"running": {"startedAt": "2026-01-01T00:00:01Z"}}},
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

    /// A context over `snap` with cgroups, root and log directories under `dir`.
    pub(crate) fn context(snap: Snapshot, dir: &std::path::Path) -> Context {
        Context {
            snapshots: SnapshotCell::new(snap),
            health: super::super::healthz::HealthChecks {
                monitor: SyncLoopMonitor::new(Instant::now()),
                deadline: Duration::from_secs(10),
            },
            stats: StatsSource {
                root: crate::cgroups::CgroupRoot::new(dir.join("cgroup")),
                parent: "pv".into(),
                driver: crate::cgroups::CgroupDriver::Cgroupfs,
                node: Default::default(),
            },
            metrics: KubeletMetrics::new(),
            root_dir: dir.to_path_buf(),
            system_logs: Some(dir.join("varlog")),
            debugging_handlers: true,
            push: None,
            cpu: Default::default(),
            followers: AtomicUsize::new(0),
            max_followers: 2,
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    pub(crate) fn get(path: &str, ctx: &Context) -> Response {
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        match answer(
            &Request {
                method: "GET",
                path,
                query,
                headers: &[],
                body: &[],
            },
            ctx,
        ) {
            Answer::Whole(r) => r,
            other => panic!("not a whole answer: {other:?}"),
        }
    }

    fn body(r: &Response) -> serde_json::Value {
        serde_json::from_slice(&r.body).expect("json")
    }

    #[test]
    fn patterns_match_segments_and_rests() {
        let m = find("GET", "/containerLogs/default/web/main").expect("route");
        assert_eq!(m.route.endpoint, Endpoint::ContainerLogs);
        assert_eq!(m.param("namespace"), "default");
        assert_eq!(m.param("pod"), "web");
        assert_eq!(m.param("container"), "main");
        assert!(find("GET", "/containerLogs/default/web").is_err());
        assert!(find("GET", "/containerLogs/default/web/main/x").is_err());
        assert!(find("GET", "/containerLogs//web/main").is_err());
        let m = find("GET", "/logs/apt/history.log").expect("logs");
        assert_eq!(m.param("path"), "apt/history.log");
        assert_eq!(find("GET", "/logs/").expect("dir").param("path"), "");
        assert_eq!(
            find("GET", "/pods/").expect("slash").route.endpoint,
            Endpoint::Pods
        );
        assert_eq!(
            find("POST", "/pods").expect_err("method"),
            NoRoute::Method(GET)
        );
        assert_eq!(find("GET", "/nope").expect_err("404"), NoRoute::NotFound);
        let m = find("PUT", "/api/v1/namespaces/kube-system/pods/dns").expect("put");
        assert_eq!(m.route.endpoint, Endpoint::ApiPod);
        assert_eq!(m.param("name"), "dns");
        assert_eq!(
            find("POST", "/api/v1/namespaces/a/pods/b").expect_err("post"),
            NoRoute::Method(&["GET", "HEAD", "PUT", "DELETE"])
        );
        // Every example matches its own route.
        for r in ROUTES {
            let path = r.example.split('?').next().unwrap_or("");
            for m in r.methods {
                assert_eq!(find(m, path).expect(r.example).route.pattern, r.pattern);
            }
        }
    }

    #[test]
    fn pods_is_a_pod_list_with_status() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = context(snapshot(), dir.path());
        let r = get("/pods", &ctx);
        assert_eq!(r.status, 200);
        let v = body(&r);
        assert_eq!(v["kind"], "PodList");
        assert_eq!(v["apiVersion"], "v1");
        assert_eq!(v["items"][1]["metadata"]["name"], "web-node");
        assert_eq!(v["items"][1]["status"]["phase"], "Running");
    }

    #[test]
    fn runningpods_lists_running_containers_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = context(snapshot(), dir.path());
        let v = body(&get("/runningpods/", &ctx));
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
    fn other_paths_methods_and_debugging_handlers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut ctx = context(snapshot(), dir.path());
        assert_eq!(get("/nope", &ctx).status, 404);
        assert_eq!(get("/healthz", &ctx).body, b"ok");
        let post = answer(
            &Request {
                method: "POST",
                path: "/pods",
                query: "",
                headers: &[],
                body: &[],
            },
            &ctx,
        );
        assert!(matches!(post, Answer::Whole(Response { status: 405, .. })));
        ctx.debugging_handlers = false;
        assert_eq!(
            get("/containerLogs/default/web-node/main", &ctx).status,
            404
        );
        assert_eq!(get("/logs/", &ctx).status, 404);
    }
}
