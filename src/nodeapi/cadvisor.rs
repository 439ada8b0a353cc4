//! nodeapi::cadvisor: `/metrics/cadvisor` and `/metrics/resource`, from one collection of
//! cgroup usage ([`super::collect`]) at scrape time, written by prometheus-client (classic
//! text or OpenMetrics, [`super::metrics::expose`]).
//!
//! `/metrics/cadvisor` has cadvisor's names and its kubelet labels `container`, `id` (the
//! cgroup path), `image`, `name` (the container id, as cadvisor names containerd's
//! containers), `namespace`, `pod`: a series for the root cgroup (`id="/"`, every other label
//! empty), one for podvisor's cgroup parent, one per pod (`container=""`) and one per running
//! container. CPU counters carry cadvisor's `cpu="total"`. Filesystem usage is the container's
//! writable layer, as the eviction manager last measured it, on the root dir's device. No
//! network series (no per-pod network accounting yet).
//!
//! `/metrics/resource` has the kubelet's resource metrics (what metrics-server reads): node,
//! pod and container CPU and working set, container start times, `scrape_error` and
//! `resource_scrape_error`; unlike the kubelet's, samples carry no timestamp of their own
//! (Prometheus uses the scrape time).

use std::path::Path;
use std::sync::atomic::AtomicU64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::collect::{collect, Collected};
use super::context::Context;
use crate::cgroups::stats::CgroupStats;
use crate::httpserver::Response;
use crate::metrics::Labels;
use crate::status::Snapshot;

type GaugeF = Gauge<f64, AtomicU64>;
type CounterF = Counter<f64, AtomicU64>;

/// A registry being filled: families by name, registered as they are first used.
#[derive(Default)]
struct Exposition {
    registry: Registry,
}

impl Exposition {
    fn gauges(&mut self, name: &str, help: &str) -> Family<Labels, GaugeF> {
        let f = Family::<Labels, GaugeF>::default();
        self.registry.register(name, help, f.clone());
        f
    }

    /// A counter family: `name` without the `_total` the exposition adds.
    fn counters(&mut self, name: &str, help: &str) -> Family<Labels, CounterF> {
        let f = Family::<Labels, CounterF>::default();
        self.registry.register(name, help, f.clone());
        f
    }

    /// One unlabelled gauge.
    fn gauge(&mut self, name: &str, help: &str, v: Option<f64>) {
        if let Some(v) = v {
            let g = GaugeF::default();
            g.set(v);
            self.registry.register(name, help, g);
        }
    }

    /// One unlabelled counter.
    fn counter(&mut self, name: &str, help: &str, v: Option<f64>) {
        if let Some(v) = v {
            let c = CounterF::default();
            c.inc_by(v);
            self.registry.register(name, help, c);
        }
    }

    fn render(self, accept: Option<&str>) -> Response {
        super::metrics::expose(&self.registry, accept)
    }
}

fn set(f: &Family<Labels, GaugeF>, labels: &Labels, v: Option<f64>) {
    if let Some(v) = v {
        f.get_or_create(labels).set(v);
    }
}

fn add(f: &Family<Labels, CounterF>, labels: &Labels, v: Option<f64>) {
    if let Some(v) = v {
        f.get_or_create(labels).inc_by(v);
    }
}

fn usec(v: Option<u64>) -> Option<f64> {
    v.map(|u| u as f64 / 1e6)
}

fn bytes(v: Option<u64>) -> Option<f64> {
    v.map(|b| b as f64)
}

/// RFC 3339 -> seconds since the epoch.
fn epoch_seconds(t: &str) -> Option<f64> {
    let ts: k8s_openapi::jiff::Timestamp = t.parse().ok()?;
    Some(ts.as_millisecond() as f64 / 1000.0)
}

/// The mount source (`/dev/sda1`) of the filesystem holding `path`, from
/// /proc/self/mountinfo: cadvisor's `device` label.
fn fs_device(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let Ok(dev) = std::fs::metadata(path).map(|m| m.dev()) else {
        return String::new();
    };
    let want = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return String::new();
    };
    text.lines()
        .filter(|l| l.split(' ').nth(2) == Some(want.as_str()))
        .find_map(|l| l.split_once(" - ")?.1.split(' ').nth(1).map(String::from))
        .unwrap_or_default()
}

/// cadvisor's labels of one series.
fn labels(container: &str, id: &str, image: &str, name: &str, ns: &str, pod: &str) -> Labels {
    vec![
        ("container", container.to_string()),
        ("id", id.to_string()),
        ("image", image.to_string()),
        ("name", name.to_string()),
        ("namespace", ns.to_string()),
        ("pod", pod.to_string()),
    ]
}

/// The cadvisor families every cgroup series has.
struct CgroupFamilies {
    cpu: Family<Labels, CounterF>,
    user: Family<Labels, CounterF>,
    system: Family<Labels, CounterF>,
    periods: Family<Labels, CounterF>,
    throttled_periods: Family<Labels, CounterF>,
    throttled: Family<Labels, CounterF>,
    oom: Family<Labels, CounterF>,
    usage: Family<Labels, GaugeF>,
    working_set: Family<Labels, GaugeF>,
    rss: Family<Labels, GaugeF>,
    cache: Family<Labels, GaugeF>,
    limit: Family<Labels, GaugeF>,
    threads: Family<Labels, GaugeF>,
    last_seen: Family<Labels, GaugeF>,
}

impl CgroupFamilies {
    fn new(e: &mut Exposition) -> CgroupFamilies {
        CgroupFamilies {
            cpu: e.counters(
                "container_cpu_usage_seconds",
                "Cumulative cpu time consumed in seconds",
            ),
            user: e.counters(
                "container_cpu_user_seconds",
                "Cumulative user cpu time consumed in seconds",
            ),
            system: e.counters(
                "container_cpu_system_seconds",
                "Cumulative system cpu time consumed in seconds",
            ),
            periods: e.counters(
                "container_cpu_cfs_periods",
                "Number of elapsed enforcement period intervals",
            ),
            throttled_periods: e.counters(
                "container_cpu_cfs_throttled_periods",
                "Number of throttled period intervals",
            ),
            throttled: e.counters(
                "container_cpu_cfs_throttled_seconds",
                "Total time duration the container has been throttled",
            ),
            oom: e.counters(
                "container_oom_events",
                "Count of out of memory events observed for the container",
            ),
            usage: e.gauges(
                "container_memory_usage_bytes",
                "Current memory usage in bytes, including all memory regardless of when it was accessed",
            ),
            working_set: e.gauges(
                "container_memory_working_set_bytes",
                "Current working set in bytes",
            ),
            rss: e.gauges("container_memory_rss", "Size of RSS in bytes"),
            cache: e.gauges("container_memory_cache", "Number of bytes of page cache memory"),
            limit: e.gauges(
                "container_spec_memory_limit_bytes",
                "Memory limit for the container",
            ),
            threads: e.gauges("container_threads", "Number of threads running inside the container"),
            last_seen: e.gauges(
                "container_last_seen",
                "Last time a container was seen by the exporter",
            ),
        }
    }

    fn record(&self, l: &Labels, s: &CgroupStats, now: f64) {
        let mut cpu = l.clone();
        cpu.push(("cpu", "total".to_string()));
        add(&self.cpu, &cpu, usec(s.cpu_usage_usec));
        add(&self.user, l, usec(s.cpu_user_usec));
        add(&self.system, l, usec(s.cpu_system_usec));
        add(&self.periods, l, bytes(s.cpu_periods));
        add(&self.throttled_periods, l, bytes(s.cpu_throttled_periods));
        add(&self.throttled, l, usec(s.cpu_throttled_usec));
        add(&self.oom, l, bytes(s.oom_kills));
        set(&self.usage, l, bytes(s.memory_usage_bytes));
        set(&self.working_set, l, bytes(s.memory_working_set_bytes));
        set(&self.rss, l, bytes(s.memory_rss_bytes));
        set(&self.cache, l, bytes(s.memory_cache_bytes));
        // cadvisor's 0 for "no limit".
        set(
            &self.limit,
            l,
            Some(s.memory_limit_bytes.unwrap_or(0) as f64),
        );
        set(&self.threads, l, bytes(s.pids_current));
        set(&self.last_seen, l, Some(now));
    }
}

fn now_seconds(c: &Collected) -> f64 {
    c.at_usec() as f64 / 1e6
}

/// `/metrics/cadvisor` of one collection.
pub fn render_cadvisor(
    snap: &Snapshot,
    ctx: &Context,
    c: &Collected,
    accept: Option<&str>,
) -> Response {
    let mut e = Exposition::default();
    let f = CgroupFamilies::new(&mut e);
    let start = e.gauges(
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds",
    );
    let fs_usage = e.gauges(
        "container_fs_usage_bytes",
        "Number of bytes that are consumed by the container on this filesystem",
    );
    let fs_limit = e.gauges(
        "container_fs_limit_bytes",
        "Number of bytes that can be consumed by the container on this filesystem",
    );
    let now = now_seconds(c);
    f.record(&labels("", "/", "", "", "", ""), &c.node, now);
    set(
        &start,
        &labels("", "/", "", "", "", ""),
        c.boot_time.as_deref().and_then(epoch_seconds),
    );
    for s in &c.system {
        if s.name == "pods" {
            f.record(&labels("", &s.cgroup, "", "", "", ""), &s.stats, now);
        }
    }
    let device = fs_device(&ctx.root_dir);
    let storage = ctx.stats.node.storage.get();
    for p in &c.pods {
        let view = Collected::view(snap, p);
        if let Some(stats) = &p.stats {
            f.record(
                &labels("", &p.cgroup, "", "", &p.namespace, &p.name),
                stats,
                now,
            );
        }
        let statuses: Vec<&k8s_openapi::api::core::v1::ContainerStatus> = view
            .and_then(|v| v.pod.status.as_ref())
            .into_iter()
            .flat_map(|s| {
                s.container_statuses
                    .iter()
                    .flatten()
                    .chain(s.init_container_statuses.iter().flatten())
            })
            .collect();
        let usage = storage.get(&p.uid);
        for cs in &p.containers {
            let status = statuses.iter().find(|s| s.name == cs.name);
            let image = status.map_or("", |s| s.image.as_str());
            let l = labels(
                &cs.name,
                &cs.cgroup,
                image,
                &cs.container_id,
                &p.namespace,
                &p.name,
            );
            if let Some(stats) = &cs.stats {
                f.record(&l, stats, now);
            }
            let started = status
                .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.as_ref())
                .map(|t| t.0.as_millisecond() as f64 / 1000.0);
            set(&start, &l, started);
            if let Some(u) = usage {
                // The writable layer, as cadvisor reports a containerd container's rootfs.
                let total = u.containers.get(&cs.name).copied().unwrap_or(0);
                let log = u.container_logs.get(&cs.name).copied().unwrap_or(0);
                let mut fl = l.clone();
                fl.push(("device", device.clone()));
                set(&fs_usage, &fl, Some(total.saturating_sub(log) as f64));
                set(&fs_limit, &fl, c.nodefs.map(|n| n.capacity as f64));
            }
        }
    }
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    e.gauge(
        "machine_cpu_cores",
        "Number of logical CPU cores",
        Some(cpus as f64),
    );
    e.gauge(
        "machine_memory_bytes",
        "Amount of memory installed on the machine",
        bytes(c.machine_memory),
    );
    e.gauge(
        "container_scrape_error",
        "1 if there was an error while getting container metrics, 0 otherwise",
        Some(if c.error { 1.0 } else { 0.0 }),
    );
    e.render(accept)
}

/// `/metrics/resource` of one collection.
pub fn render_resource(snap: &Snapshot, c: &Collected, accept: Option<&str>) -> Response {
    let mut e = Exposition::default();
    e.counter(
        "node_cpu_usage_seconds",
        "Cumulative cpu time consumed by the node in core-seconds",
        usec(c.node.cpu_usage_usec),
    );
    e.gauge(
        "node_memory_working_set_bytes",
        "Current working set of the node in bytes",
        bytes(c.node.memory_working_set_bytes),
    );
    let c_start = e.gauges(
        "container_start_time_seconds",
        "Start time of the container since unix epoch in seconds",
    );
    let c_cpu = e.counters(
        "container_cpu_usage_seconds",
        "Cumulative cpu time consumed by the container in core-seconds",
    );
    let c_ws = e.gauges(
        "container_memory_working_set_bytes",
        "Current working set of the container in bytes",
    );
    let p_cpu = e.counters(
        "pod_cpu_usage_seconds",
        "Cumulative cpu time consumed by the pod in core-seconds",
    );
    let p_ws = e.gauges(
        "pod_memory_working_set_bytes",
        "Current working set of the pod in bytes",
    );
    for p in &c.pods {
        let pl: Labels = vec![("pod", p.name.clone()), ("namespace", p.namespace.clone())];
        if let Some(s) = &p.stats {
            add(&p_cpu, &pl, usec(s.cpu_usage_usec));
            set(&p_ws, &pl, bytes(s.memory_working_set_bytes));
        }
        let view = Collected::view(snap, p);
        for cs in &p.containers {
            let l: Labels = vec![
                ("container", cs.name.clone()),
                ("pod", p.name.clone()),
                ("namespace", p.namespace.clone()),
            ];
            if let Some(s) = &cs.stats {
                add(&c_cpu, &l, usec(s.cpu_usage_usec));
                set(&c_ws, &l, bytes(s.memory_working_set_bytes));
            }
            let started = view
                .and_then(|v| v.pod.status.as_ref())
                .into_iter()
                .flat_map(|s| {
                    s.container_statuses
                        .iter()
                        .flatten()
                        .chain(s.init_container_statuses.iter().flatten())
                })
                .find(|s| s.name == cs.name)
                .and_then(|s| s.state.as_ref()?.running.as_ref()?.started_at.as_ref())
                .map(|t| t.0.as_millisecond() as f64 / 1000.0);
            set(&c_start, &l, started);
        }
    }
    let err = Some(if c.error { 1.0 } else { 0.0 });
    let help = "1 if there was an error while getting container metrics, 0 otherwise";
    e.gauge("scrape_error", help, err);
    e.gauge("resource_scrape_error", help, err);
    e.render(accept)
}

/// `/metrics/cadvisor`.
pub fn cadvisor(snap: &Snapshot, ctx: &Context, accept: Option<&str>) -> Response {
    render_cadvisor(snap, ctx, &collect(snap, &ctx.stats, &ctx.root_dir), accept)
}

/// `/metrics/resource`.
pub fn resource(snap: &Snapshot, ctx: &Context, accept: Option<&str>) -> Response {
    render_resource(snap, &collect(snap, &ctx.stats, &ctx.root_dir), accept)
}

#[cfg(test)]
mod tests {
    use super::super::metrics::tests::promtool;
    use super::super::routes::tests::{context, get, snapshot};
    use super::super::summary::tests::cgroups;

    #[test]
    fn cadvisor_series_with_the_kubelets_labels_pass_promtool() {
        let dir = tempfile::tempdir().expect("tempdir");
        cgroups(dir.path());
        let ctx = context(snapshot(), dir.path());
        let r = get("/metrics/cadvisor", &ctx);
        assert_eq!(r.status, 200);
        let text = String::from_utf8(r.body).expect("utf8");
        let c1 = "container=\"main\",id=\"/pv/besteffort/podu1/c1\",image=\"busybox:1.35\",name=\"c1\",namespace=\"default\",pod=\"web-node\"";
        for line in [
            format!("container_cpu_usage_seconds_total{{{c1},cpu=\"total\"}} 2.0\n"),
            format!("container_memory_working_set_bytes{{{c1}}} 3072.0\n"),
            format!("container_memory_rss{{{c1}}} 2048.0\n"),
            format!("container_oom_events_total{{{c1}}} 1.0\n"),
            format!("container_spec_memory_limit_bytes{{{c1}}} 65536.0\n"),
            "container_memory_working_set_bytes{container=\"\",id=\"/pv/besteffort/podu1\",image=\"\",name=\"\",namespace=\"default\",pod=\"web-node\"} 7168.0\n".to_string(),
            "container_cpu_usage_seconds_total{container=\"\",id=\"/\",image=\"\",name=\"\",namespace=\"\",pod=\"\",cpu=\"total\"} 50.0\n".to_string(),
            "container_scrape_error 0.0\n".to_string(),
        ] {
            assert!(text.contains(&line), "{line} not in:\n{text}");
        }
        assert!(
            text.contains("container_start_time_seconds{container=\"main\""),
            "{text}"
        );
        promtool(&text);
    }

    #[test]
    fn resource_metrics_have_the_kubelets_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        cgroups(dir.path());
        let ctx = context(snapshot(), dir.path());
        let text = String::from_utf8(get("/metrics/resource", &ctx).body).expect("utf8");
        for line in [
            "node_cpu_usage_seconds_total 50.0\n",
            "container_cpu_usage_seconds_total{container=\"main\",pod=\"web-node\",namespace=\"default\"} 2.0\n",
            "container_memory_working_set_bytes{container=\"main\",pod=\"web-node\",namespace=\"default\"} 3072.0\n",
            "pod_cpu_usage_seconds_total{pod=\"web-node\",namespace=\"default\"} 3.0\n",
            "pod_memory_working_set_bytes{pod=\"web-node\",namespace=\"default\"} 7168.0\n",
            "container_start_time_seconds{container=\"main\",pod=\"web-node\",namespace=\"default\"} 1767225601.0\n",
            "resource_scrape_error 0.0\n",
        ] {
            assert!(text.contains(line), "{line} not in:\n{text}");
        }
        promtool(&text);
    }
}
