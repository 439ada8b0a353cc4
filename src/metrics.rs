//! metrics: the kubelet's own counters and histograms (its `pkg/kubelet/metrics` and the
//! prober's `ProberResults`), recorded by the thread that owns what they count and read by
//! the node API at scrape time.
//!
//! Nothing here is pod state: each value only ever grows (counters, histogram buckets) or is a
//! label set the recording thread adds and removes, and every metric is internally an atomic
//! or a short lock of prometheus-client's. Who records what:
//!
//! | metric | recorded by |
//! |---|---|
//! | `kubelet_pod_start_duration_seconds` | the sync loop, when a pod generation first shows phase Running |
//! | `kubelet_started_pods_total`, `kubelet_started_pods_errors_total` | the sync loop, on a sandbox job's result |
//! | `kubelet_started_containers_total`, `kubelet_started_containers_errors_total` | the sync loop, on a start job's result |
//! | `kubelet_restarted_pods_total` | the sync loop, when a removed pod's uid is desired again |
//! | `kubelet_evictions` | the sync loop, when it evicts a pod |
//! | `kubelet_image_pull_duration_seconds` | the executor worker that pulled |
//! | `kubelet_image_garbage_collected_total` | the image GC thread and the eviction manager's reclaim |
//! | `prober_probe_total` | the probe worker that ran the probe; the series of a container go when its probes are removed |
//!
//! A [`KubeletMetrics`] is cheap to clone: clones share the same values.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// A label set: (name, value) pairs in a fixed order.
pub type Labels = Vec<(&'static str, String)>;

type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// The kubelet's `podStartupDurationBuckets`.
pub const POD_START_BUCKETS: [f64; 25] = [
    0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 20.0, 30.0, 45.0, 60.0, 120.0, 180.0, 240.0,
    300.0, 360.0, 480.0, 600.0, 900.0, 1200.0, 1800.0, 2700.0, 3600.0,
];

/// The kubelet's `imagePullDurationBuckets`.
pub const IMAGE_PULL_BUCKETS: [f64; 18] = [
    1.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 240.0, 300.0, 360.0, 480.0, 600.0, 900.0,
    1200.0, 1800.0, 2700.0, 3600.0,
];

fn image_pull_histogram() -> Histogram {
    Histogram::new(IMAGE_PULL_BUCKETS)
}

/// The kubelet's `image_size_in_bytes` label of an image pull: the size bucket it falls in
/// (`GetImageSizeBucket`).
pub fn image_size_bucket(bytes: u64) -> &'static str {
    const MB: u64 = 1024 * 1024;
    const GB: u64 = 1024 * MB;
    const BUCKETS: [(u64, &str); 12] = [
        (0, "0-10MB"),
        (10 * MB, "10MB-100MB"),
        (100 * MB, "100MB-500MB"),
        (500 * MB, "500MB-1GB"),
        (GB, "1GB-5GB"),
        (5 * GB, "5GB-10GB"),
        (10 * GB, "10GB-20GB"),
        (20 * GB, "20GB-30GB"),
        (30 * GB, "30GB-40GB"),
        (40 * GB, "40GB-60GB"),
        (60 * GB, "60GB-100GB"),
        (100 * GB, "GT100GB"),
    ];
    if bytes == 0 {
        return "N/A";
    }
    BUCKETS
        .iter()
        .rev()
        .find(|(low, _)| bytes > *low)
        .map_or("", |(_, label)| label)
}

/// The kubelet's probe types as `prober_probe_total` labels them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeType {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeType {
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }
}

/// The container whose probes are counted, as `prober_probe_total` labels it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeSubject {
    pub container: String,
    pub pod: String,
    pub namespace: String,
    pub pod_uid: String,
}

/// The kubelet's probe results as labelled (`successful` counts warnings too).
pub const PROBE_RESULTS: [&str; 3] = ["successful", "failed", "unknown"];

/// The recorded metrics (see the module docs for who records each).
#[derive(Debug, Clone)]
pub struct KubeletMetrics {
    pub pod_start_duration: Histogram,
    pub started_pods: Counter,
    pub started_pods_errors: Counter,
    /// `container_type`: `container`, `init_container`.
    pub started_containers: Family<Labels, Counter>,
    /// `container_type`, `code` (the waiting reason of the failure).
    pub started_containers_errors: Family<Labels, Counter>,
    /// `static`: `true` for file and URL pods, `false` for pods pushed to the node API.
    pub restarted_pods: Family<Labels, Counter>,
    /// `eviction_signal`.
    pub evictions: Family<Labels, Counter>,
    /// `reason`: `space` (threshold GC and eviction reclaim; podvisor has no maximum age).
    pub image_garbage_collected: Family<Labels, Counter>,
    /// `image_size_in_bytes` (a size bucket).
    pub image_pull_duration: HistogramFamily,
    /// `probe_type`, `result`, `container`, `pod`, `namespace`, `pod_uid`.
    pub probe_total: Family<Labels, Counter>,
}

impl Default for KubeletMetrics {
    fn default() -> Self {
        KubeletMetrics::new()
    }
}

impl KubeletMetrics {
    pub fn new() -> KubeletMetrics {
        KubeletMetrics {
            pod_start_duration: Histogram::new(POD_START_BUCKETS),
            started_pods: Counter::default(),
            started_pods_errors: Counter::default(),
            started_containers: Family::default(),
            started_containers_errors: Family::default(),
            restarted_pods: Family::default(),
            evictions: Family::default(),
            image_garbage_collected: Family::default(),
            image_pull_duration: Family::new_with_constructor(image_pull_histogram),
            probe_total: Family::default(),
        }
    }

    /// An eviction for `signal` (the kubelet's signal name, `memory.available`,
    /// `ephemeralpodfs.limit`, ...).
    pub fn record_eviction(&self, signal: &str) {
        self.evictions
            .get_or_create(&vec![("eviction_signal", signal.to_string())])
            .inc();
    }

    /// An image pulled in `seconds`, `bytes` big.
    pub fn record_image_pull(&self, seconds: f64, bytes: u64) {
        self.image_pull_duration
            .get_or_create(&vec![(
                "image_size_in_bytes",
                image_size_bucket(bytes).to_string(),
            )])
            .observe(seconds);
    }

    /// `n` images removed by garbage collection.
    pub fn record_images_collected(&self, n: u64) {
        if n > 0 {
            self.image_garbage_collected
                .get_or_create(&vec![("reason", "space".to_string())])
                .inc_by(n);
        }
    }

    fn probe_labels(kind: ProbeType, result: &str, s: &ProbeSubject) -> Labels {
        vec![
            ("probe_type", kind.as_str().to_string()),
            ("result", result.to_string()),
            ("container", s.container.clone()),
            ("pod", s.pod.clone()),
            ("namespace", s.namespace.clone()),
            ("pod_uid", s.pod_uid.clone()),
        ]
    }

    /// One probe run of `s` with `result` (one of [`PROBE_RESULTS`]).
    pub fn record_probe(&self, kind: ProbeType, result: &str, s: &ProbeSubject) {
        self.probe_total
            .get_or_create(&Self::probe_labels(kind, result, s))
            .inc();
    }

    /// The container's probe of `kind` is gone: its series go too (the kubelet deletes them
    /// when a probe worker stops), so `prober_probe_total` does not grow with every restart.
    pub fn forget_probe(&self, kind: ProbeType, s: &ProbeSubject) {
        for result in PROBE_RESULTS {
            self.probe_total
                .remove(&Self::probe_labels(kind, result, s));
        }
    }

    /// Registers the `/metrics` ones (every metric but the prober's) into `registry`.
    pub fn register_kubelet(&self, registry: &mut Registry) {
        registry.register(
            "kubelet_pod_start_duration_seconds",
            "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
            self.pod_start_duration.clone(),
        );
        registry.register(
            "kubelet_started_pods",
            "Cumulative number of pods started",
            self.started_pods.clone(),
        );
        registry.register(
            "kubelet_started_pods_errors",
            "Cumulative number of errors when starting pods",
            self.started_pods_errors.clone(),
        );
        registry.register(
            "kubelet_started_containers",
            "Cumulative number of containers started",
            self.started_containers.clone(),
        );
        registry.register(
            "kubelet_started_containers_errors",
            "Cumulative number of errors when starting containers",
            self.started_containers_errors.clone(),
        );
        registry.register(
            "kubelet_restarted_pods",
            "Number of pods that have been restarted because they were deleted and recreated with the same UID while the kubelet was watching them (common for static pods, extremely uncommon for API pods)",
            self.restarted_pods.clone(),
        );
        registry.register(
            "kubelet_evictions",
            "Cumulative number of pod evictions by eviction signal",
            self.evictions.clone(),
        );
        registry.register(
            "kubelet_image_garbage_collected",
            "Total number of images garbage collected by the kubelet, whether through disk usage or image age",
            self.image_garbage_collected.clone(),
        );
        registry.register(
            "kubelet_image_pull_duration_seconds",
            "Duration in seconds to pull an image",
            self.image_pull_duration.clone(),
        );
    }

    /// Registers `/metrics/probes` (`prober_probe_total`) into `registry`.
    pub fn register_probes(&self, registry: &mut Registry) {
        registry.register(
            "prober_probe",
            "Cumulative number of a liveness, readiness or startup probe for a container by result",
            self.probe_total.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(register: impl Fn(&mut Registry)) -> String {
        let mut r = Registry::default();
        register(&mut r);
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &r).expect("encode");
        out
    }

    #[test]
    fn image_size_buckets_as_the_kubelet() {
        const MB: u64 = 1024 * 1024;
        assert_eq!(image_size_bucket(0), "N/A");
        assert_eq!(image_size_bucket(1), "0-10MB");
        assert_eq!(image_size_bucket(10 * MB), "0-10MB");
        assert_eq!(image_size_bucket(10 * MB + 1), "10MB-100MB");
        assert_eq!(image_size_bucket(600 * MB), "500MB-1GB");
        assert_eq!(image_size_bucket(200 * 1024 * MB), "GT100GB");
    }

    #[test]
    fn clones_share_values_and_probe_series_are_forgotten() {
        let m = KubeletMetrics::new();
        let other = m.clone();
        let s = ProbeSubject {
            container: "web".into(),
            pod: "p-node".into(),
            namespace: "default".into(),
            pod_uid: "u1".into(),
        };
        other.record_probe(ProbeType::Readiness, "successful", &s);
        other.record_probe(ProbeType::Readiness, "successful", &s);
        other.record_probe(ProbeType::Readiness, "failed", &s);
        other.record_eviction("memory.available");
        other.record_images_collected(0);
        other.record_images_collected(3);
        other.record_image_pull(2.5, 5 * 1024 * 1024);
        let t = text(|r| m.register_probes(r));
        assert!(
            t.contains("prober_probe_total{probe_type=\"Readiness\",result=\"successful\",container=\"web\",pod=\"p-node\",namespace=\"default\",pod_uid=\"u1\"} 2\n"),
            "{t}"
        );
        m.forget_probe(ProbeType::Readiness, &s);
        assert!(!text(|r| m.register_probes(r)).contains("pod_uid"));
        let k = text(|r| m.register_kubelet(r));
        for line in [
            "kubelet_evictions_total{eviction_signal=\"memory.available\"} 1\n",
            "kubelet_image_garbage_collected_total{reason=\"space\"} 3\n",
            "kubelet_image_pull_duration_seconds_bucket{le=\"5.0\",image_size_in_bytes=\"0-10MB\"} 1\n",
            "kubelet_pod_start_duration_seconds_count 0\n",
        ] {
            assert!(k.contains(line), "{line} not in\n{k}");
        }
    }
}
