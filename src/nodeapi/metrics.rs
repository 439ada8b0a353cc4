//! nodeapi::metrics: `/metrics` of the secure port, written with the prometheus-client crate
//! (OpenMetrics text) from the published [`Snapshot`] and the sync loop's turnover at scrape
//! time: nothing is counted between scrapes, so the metrics are gauges of the current state.
//!
//! The kubelet's names where they apply: `kubelet_running_pods` (pods with a running
//! container), `kubelet_running_containers{container_state}` (running, exited, created as the
//! kubelet labels the runtime's states). podvisor's own under `podvisor_`: pods by phase,
//! container restarts (the pods' `restartCount`s), manifest errors, node conditions and the
//! age of the sync loop's latest turnover.

use std::time::Instant;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::healthz::HealthChecks;
use crate::status::Snapshot;

/// The content type of the exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;

/// The exposition of `snap` as of `now`.
pub fn render(
    snap: &Snapshot,
    health: &HealthChecks,
    now: Instant,
) -> Result<String, std::fmt::Error> {
    let mut registry = Registry::default();
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
    let mut out = String::new();
    encode(&mut out, &registry)?;
    Ok(out)
}
