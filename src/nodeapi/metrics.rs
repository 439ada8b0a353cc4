//! nodeapi::metrics: `/metrics` and `/metrics/probes` of the secure port, written with the
//! prometheus-client crate (OpenMetrics text).
//!
//! `/metrics`: the kubelet's names where they apply. Gauges computed from the published
//! [`Snapshot`] at scrape time: `kubelet_node_name{node}`, `kubelet_running_pods` (pods with
//! a running container), `kubelet_running_containers{container_state}` (running, exited,
//! created as the kubelet labels the runtime's states), `kubelet_desired_pods{static}`,
//! `kubelet_active_pods{static}`, `kubelet_container_log_filesystem_used_bytes` (from the
//! eviction manager's last measurement); the counters and histograms the owning threads record
//! ([`crate::metrics::KubeletMetrics`]: pod start durations, started pods and containers,
//! restarted pods, evictions, image pulls and GC). podvisor's own under `podvisor_`: pods by
//! phase, container restarts (the pods' `restartCount`s), manifest errors, node conditions and
//! the age of the sync loop's latest turnover.
//!
//! `/metrics/probes`: `prober_probe_total{probe_type,result,container,pod,namespace,pod_uid}`,
//! counted by the probe workers.

use std::time::Instant;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::context::Context;
use super::healthz::HealthChecks;
use crate::httpserver::Response;
use crate::metrics::KubeletMetrics;
use crate::status::Snapshot;

/// The content type of the OpenMetrics exposition (what Prometheus asks for).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the classic text exposition (the kubelet's; `promtool check metrics`).
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The classic text format of an OpenMetrics exposition from prometheus-client: a counter
/// family is named with its `_total` in `# HELP`/`# TYPE` (OpenMetrics names it without),
/// `# UNIT` and `# EOF` go. Samples are the same in both formats.
pub fn to_classic(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if line.starts_with("# HELP ") {
            if let Some(h) = help.replace(line) {
                out.push_str(h);
                out.push('\n');
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            let h = help.take();
            if kind == "counter" && !name.ends_with("_total") {
                if let Some(text) = h.and_then(|h| h.strip_prefix("# HELP ")?.strip_prefix(name)) {
                    out.push_str(&format!("# HELP {name}_total{text}\n"));
                }
                out.push_str(&format!("# TYPE {name}_total counter\n"));
            } else {
                if let Some(h) = h {
                    out.push_str(h);
                    out.push('\n');
                }
                out.push_str(line);
                out.push('\n');
            }
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Whether an `Accept` header asks for OpenMetrics.
fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| a.contains("application/openmetrics-text"))
}

/// Encodes `registry` in the format the client accepts: OpenMetrics when its `Accept` names
/// `application/openmetrics-text` (Prometheus' does), else the classic text format 0.0.4, as
/// the kubelet serves it.
pub fn expose(registry: &Registry, accept: Option<&str>) -> Response {
    let mut text = String::new();
    if encode(&mut text, registry).is_err() {
        return Response::text(500, "Internal Server Error");
    }
    let (content_type, body) = if wants_openmetrics(accept) {
        (CONTENT_TYPE, text)
    } else {
        (TEXT_CONTENT_TYPE, to_classic(&text))
    };
    Response {
        status: 200,
        content_type,
        headers: Vec::new(),
        body: body.into_bytes(),
    }
}

type Labels = Vec<(&'static str, String)>;

/// `/metrics`.
pub fn answer(snap: &Snapshot, ctx: &Context, now: Instant, accept: Option<&str>) -> Response {
    let storage = ctx.stats.node.storage.get();
    expose(
        &registry(snap, &ctx.health, &ctx.metrics, &storage, now),
        accept,
    )
}

/// `/metrics/probes`.
pub fn probes(ctx: &Context, accept: Option<&str>) -> Response {
    let mut registry = Registry::default();
    ctx.metrics.register_probes(&mut registry);
    expose(&registry, accept)
}

/// The metrics of `snap` as of `now`.
pub fn registry(
    snap: &Snapshot,
    health: &HealthChecks,
    metrics: &KubeletMetrics,
    storage: &std::collections::BTreeMap<String, crate::status::EphemeralStorageUsage>,
    now: Instant,
) -> Registry {
    let mut registry = Registry::default();
    let node_name = Family::<Labels, Gauge<i64>>::default();
    let desired = Family::<Labels, Gauge<i64>>::default();
    let active = Family::<Labels, Gauge<i64>>::default();
    let log_used = Family::<Labels, Gauge<i64>>::default();
    node_name
        .get_or_create(&vec![("node", snap.node_name.clone())])
        .set(1);
    for is_static in ["true", "false"] {
        for f in [&desired, &active] {
            f.get_or_create(&vec![("static", is_static.to_string())])
                .set(0);
        }
    }
    for v in &snap.pods {
        let is_static = v.source.starts_with(crate::sources::api::API_SOURCE_PREFIX);
        let l = vec![("static", (!is_static).to_string())];
        // Terminating pods (deletionTimestamp) are no longer desired.
        if v.pod.metadata.deletion_timestamp.is_none() {
            desired.get_or_create(&l).inc();
        }
        if !crate::status::is_terminal(&v.pod) {
            active.get_or_create(&l).inc();
        }
        let (Some(uid), Some(usage)) = (
            v.pod.metadata.uid.as_ref(),
            v.pod.metadata.uid.as_ref().and_then(|u| storage.get(u)),
        ) else {
            continue;
        };
        for (container, bytes) in &usage.container_logs {
            log_used
                .get_or_create(&vec![
                    ("uid", uid.clone()),
                    (
                        "namespace",
                        v.pod.metadata.namespace.clone().unwrap_or_default(),
                    ),
                    ("pod", v.pod.metadata.name.clone().unwrap_or_default()),
                    ("container", container.clone()),
                ])
                .set(i64::try_from(*bytes).unwrap_or(i64::MAX));
        }
    }
    registry.register(
        "kubelet_node_name",
        "The node's name. The count is always 1",
        node_name,
    );
    registry.register(
        "kubelet_desired_pods",
        "The number of pods the kubelet is being instructed to run. static is true if the pod is not from the apiserver",
        desired,
    );
    registry.register(
        "kubelet_active_pods",
        "The number of pods the kubelet considers active and which are being considered when admitting new pods. static is true if the pod is not from the apiserver",
        active,
    );
    registry.register(
        "kubelet_container_log_filesystem_used_bytes",
        "Bytes used by the container's logs on the filesystem",
        log_used,
    );
    metrics.register_kubelet(&mut registry);
    let running_pods = Gauge::<i64>::default();
    let containers = Family::<Labels, Gauge<i64>>::default();
    let phases = Family::<Labels, Gauge<i64>>::default();
    let restarts = Family::<Labels, Gauge<i64>>::default();
    let conditions = Family::<Labels, Gauge<i64>>::default();
    let source_errors = Gauge::<i64>::default();
    let turnover = Gauge::<f64, std::sync::atomic::AtomicU64>::default();

    for state in ["running", "exited", "created"] {
        containers
            .get_or_create(&vec![("container_state", state.to_string())])
            .set(0);
    }
    for phase in ["Pending", "Running", "Succeeded", "Failed", "Unknown"] {
        phases
            .get_or_create(&vec![("phase", phase.to_string())])
            .set(0);
    }
    for v in &snap.pods {
        let Some(status) = v.pod.status.as_ref() else {
            continue;
        };
        let phase = status.phase.as_deref().unwrap_or("Pending");
        phases
            .get_or_create(&vec![("phase", phase.to_string())])
            .inc();
        let mut any_running = false;
        for c in status
            .container_statuses
            .iter()
            .flatten()
            .chain(status.init_container_statuses.iter().flatten())
        {
            let state = match c.state.as_ref() {
                Some(s) if s.running.is_some() => "running",
                Some(s) if s.terminated.is_some() => "exited",
                _ => "created",
            };
            any_running |= state == "running";
            // Waiting containers without an instance yet are not runtime containers.
            if state != "created" || c.container_id.is_some() {
                containers
                    .get_or_create(&vec![("container_state", state.to_string())])
                    .inc();
            }
            restarts
                .get_or_create(&vec![
                    (
                        "namespace",
                        v.pod.metadata.namespace.clone().unwrap_or_default(),
                    ),
                    ("pod", v.pod.metadata.name.clone().unwrap_or_default()),
                    ("container", c.name.clone()),
                ])
                .set(i64::from(c.restart_count));
        }
        if any_running {
            running_pods.inc();
        }
    }
    for c in &snap.node_conditions {
        conditions
            .get_or_create(&vec![
                ("condition", c.type_.clone()),
                ("status", c.status.clone()),
            ])
            .set(1);
    }
    source_errors.set(
        (snap.source_errors.len()
            + snap
                .pods
                .iter()
                .filter(|v| v.source_error.is_some())
                .count()) as i64,
    );
    if let Some(d) = health.monitor.since_latest(now) {
        turnover.set(d.as_secs_f64());
    }

    registry.register(
        "kubelet_running_pods",
        "Number of pods that have a running container",
        running_pods,
    );
    registry.register(
        "kubelet_running_containers",
        "Number of containers currently running",
        containers,
    );
    registry.register("podvisor_pods", "Pods by phase", phases);
    registry.register(
        "podvisor_container_restarts",
        "Restart count of each container (the pod status' restartCount)",
        restarts,
    );
    registry.register(
        "podvisor_node_condition",
        "The node's pressure conditions (1 for the current status)",
        conditions,
    );
    registry.register(
        "podvisor_manifest_errors",
        "Manifest errors: files or URLs that do not parse, pods whose newest manifest is refused",
        source_errors,
    );
    registry.register(
        "podvisor_sync_loop_last_turnover_seconds",
        "Seconds since the sync loop last turned over (healthz fails past its deadline)",
        turnover,
    );
    registry
}
#[cfg(test)]
pub(crate) mod tests {
    use super::super::routes::tests::{context, get, snapshot};

    /// `promtool check metrics` on `text` (Debian's prometheus package); panics with its
    /// output when it fails.
    pub(crate) fn promtool(text: &str) {
        use std::io::Write;
        let mut child = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("promtool (Debian package prometheus)");
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

    #[test]
    fn counters_are_named_with_total_in_the_classic_format() {
        let om = "# HELP a_b Things.\n# TYPE a_b counter\n# UNIT a_b seconds\na_b_total 1\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n# EOF\n";
        assert_eq!(
            super::to_classic(om),
            "# HELP a_b_total Things.\n# TYPE a_b_total counter\na_b_total 1\n# HELP g A gauge.\n# TYPE g gauge\ng 2\n"
        );
    }

    #[test]
    fn metrics_pass_promtool_and_count_the_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = context(snapshot(), dir.path());
        ctx.metrics.record_eviction("memory.available");
        ctx.metrics.pod_start_duration.observe(1.5);
        let r = get("/metrics", &ctx);
        assert_eq!(r.status, 200);
        let text = String::from_utf8(r.body).expect("utf8");
        for line in [
            "kubelet_running_pods 1\n",
            "kubelet_running_containers{container_state=\"running\"} 1\n",
            "kubelet_node_name{node=\"node\"} 1\n",
            "kubelet_desired_pods{static=\"true\"} 2\n",
            "kubelet_active_pods{static=\"false\"} 0\n",
            "kubelet_evictions_total{eviction_signal=\"memory.available\"} 1\n",
            "kubelet_pod_start_duration_seconds_bucket{le=\"2.0\"} 1\n",
            "kubelet_started_pods_total 0\n",
            "podvisor_pods{phase=\"Running\"} 1\n",
            "podvisor_pods{phase=\"Pending\"} 1\n",
            "podvisor_container_restarts{namespace=\"default\",pod=\"web-node\",container=\"side\"} 2\n",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        promtool(&text);
    }

    #[test]
    fn probes_endpoint_has_prober_probe_total() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ctx = context(snapshot(), dir.path());
        let s = crate::metrics::ProbeSubject {
            container: "main".into(),
            pod: "web-node".into(),
            namespace: "default".into(),
            pod_uid: "u1".into(),
        };
        ctx.metrics
            .record_probe(crate::metrics::ProbeType::Liveness, "failed", &s);
        let text = String::from_utf8(get("/metrics/probes", &ctx).body).expect("utf8");
        assert!(
            text.contains("prober_probe_total{probe_type=\"Liveness\",result=\"failed\",container=\"main\",pod=\"web-node\",namespace=\"default\",pod_uid=\"u1\"} 1\n"),
            "{text}"
        );
        promtool(&text);
    }
}
