//! status: what the daemon shows about its pods — the status manager's published view.
//!
//! The sync loop owns all pod state. After every iteration that changed something it
//! publishes an immutable [`Snapshot`] into a [`SnapshotCell`]; the API thread (and anything
//! else that only reads) clones the `Arc` and never touches the sync loop's state. Pods are
//! plain `v1 Pod` objects with `status` filled in the kubelet's vocabulary, so `-o json|yaml`
//! prints what kubectl users expect; podvisor-specific detail (source errors, the reason of a
//! replacement) travels beside them in [`PodView`].

use std::collections::{BTreeMap, VecDeque};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, RwLock};

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

/// `namespace/name` of a pod (namespace `default` when unset).
pub fn full_name(pod: &Pod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

/// Whether a pod's phase is terminal (Succeeded or Failed).
pub fn is_terminal(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The id of a running container (`podvisor://<id>` in its status), `None` unless running.
pub fn running_container_id(cs: &k8s_openapi::api::core::v1::ContainerStatus) -> Option<&str> {
    cs.state.as_ref()?.running.as_ref()?;
    cs.container_id.as_deref()?.strip_prefix("podvisor://")
}

/// One pod as the daemon sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodView {
    /// The pod with defaults applied and `status` filled (phase, conditions, container
    /// statuses with kubelet reasons, restart counts, timestamps).
    pub pod: Pod,
    /// Where the manifest came from: a file path or a URL.
    pub source: String,
    /// The last error about this pod's manifest (e.g. the file became invalid and the
    /// last-known-good version keeps running), if any, with the time it was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_error: Option<SourceErrorView>,
    /// Why a newer generation of the pod was rolled back to this one (safe updates), while
    /// the manifest keeps that generation's spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<String>,
    /// Log file of each container's current (or last) instance: container name -> path.
    #[serde(default)]
    pub log_paths: std::collections::BTreeMap<String, std::path::PathBuf>,
    /// Log file of each container's previous instance, for `logs --previous`.
    #[serde(default)]
    pub previous_log_paths: std::collections::BTreeMap<String, std::path::PathBuf>,
    /// The pod's mirror pod on the API server (`--kubeconfig`): filled in by the local API
    /// from the [`ApiServerCell`] when it serves the pod, never by the sync loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror: Option<MirrorView>,
}

/// A manifest problem, shown by the CLI.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SourceErrorView {
    /// File path or URL.
    pub source: String,
    /// The full error message (file:line:column: field: message for files).
    pub message: String,
    /// RFC 3339 time the error was first seen.
    pub since: String,
}

/// Event severity, as in Kubernetes.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// An event, deduplicated like the kubelet's event recorder: the same (pod, container,
/// reason, message) bumps `count` and `last_timestamp` instead of adding a row.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    #[serde(rename = "type")]
    pub type_: EventType,
    /// The kubelet's reason, a [`crate::reason::EventReason`] (Pulled, Created, Started,
    /// Killing, BackOff, Failed, SourceError, Replaced, ...).
    pub reason: String,
    pub message: String,
    /// `namespace/name` of the pod, or empty for node-level events (a source error that
    /// cannot be tied to a pod).
    pub pod: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    pub count: u32,
    pub first_timestamp: String,
    pub last_timestamp: String,
}

/// Everything the API serves, as of one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    pub node_name: String,
    /// Pods sorted by namespace/name.
    pub pods: Vec<PodView>,
    /// Manifest errors not tied to a running pod (a new file that never parsed, a URL that
    /// fails, a duplicate name refused).
    pub source_errors: Vec<SourceErrorView>,
    /// Most recent events last. Shared with the loop's [`EventLog`]: a snapshot copies
    /// pointers, not the (up to 1,000) records, which the loop publishes after most turns.
    pub events: Vec<Arc<EventRecord>>,
    /// The node's pressure conditions (MemoryPressure, DiskPressure, PIDPressure), as a v1
    /// Node's `status.conditions`.
    #[serde(default)]
    pub node_conditions: Vec<NodeConditionView>,
    /// Whether every source has reported (or the sources-ready timeout passed): until then
    /// a pod missing from `pods` may only not have been read yet, so its mirror pod is kept.
    #[serde(default)]
    pub sources_ready: bool,
}

/// One node condition, shaped like a v1 `NodeCondition`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeConditionView {
    #[serde(rename = "type")]
    pub type_: String,
    /// "True" or "False".
    pub status: String,
    pub reason: String,
    pub message: String,
    /// RFC 3339.
    pub last_transition_time: String,
}

impl Snapshot {
    /// Finds a pod by `name`, `namespace/name`, or the manifest's name without the node
    /// suffix (`etcd` for `etcd-node1`), as users type it.
    pub fn find_pod(&self, query: &str) -> Option<&PodView> {
        let (ns, name) = match query.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, query),
        };
        let ns_ok = |v: &PodView| {
            ns.is_none_or(|ns| v.pod.metadata.namespace.as_deref().unwrap_or("default") == ns)
        };
        let pod_name = |v: &PodView| v.pod.metadata.name.clone().unwrap_or_default();
        self.pods
            .iter()
            .find(|v| ns_ok(v) && pod_name(v) == name)
            .or_else(|| {
                let suffixed = format!("{name}-{}", self.node_name);
                self.pods
                    .iter()
                    .find(|v| ns_ok(v) && pod_name(v) == suffixed)
            })
    }
}

/// Where the sync loop publishes snapshots and readers pick them up.
#[derive(Debug, Clone, Default)]
pub struct SnapshotCell {
    inner: Arc<RwLock<Arc<Snapshot>>>,
    /// Readers woken at each publish (a one-slot channel each: a wake-up never blocks the
    /// publisher and several publishes collapse into one).
    subscribers: Arc<Mutex<Vec<SyncSender<()>>>>,
}

impl SnapshotCell {
    pub fn new(snapshot: Snapshot) -> SnapshotCell {
        SnapshotCell {
            inner: Arc::new(RwLock::new(Arc::new(snapshot))),
            subscribers: Default::default(),
        }
    }

    /// Wakes `tx` (with `try_send`, so never blocking the sync loop) after every publish.
    pub fn subscribe(&self, tx: SyncSender<()>) {
        self.subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tx);
    }

    /// The current snapshot (cheap: an `Arc` clone).
    pub fn get(&self) -> Arc<Snapshot> {
        // A writer never panics while holding the lock (it only swaps an Arc), so a poisoned
        // lock still holds a complete snapshot.
        let guard = self.inner.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&guard)
    }

    /// Replaces the snapshot.
    pub fn publish(&self, snapshot: Snapshot) {
        {
            let mut guard = self.inner.write().unwrap_or_else(|p| p.into_inner());
            *guard = Arc::new(snapshot);
        }
        self.subscribers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|tx| !matches!(tx.try_send(()), Err(TrySendError::Disconnected(_))));
    }
}

/// The connection to the API server (`--kubeconfig`), as its client threads last saw it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ApiServerView {
    /// The server's URL.
    pub server: String,
    /// `Connecting` (nothing answered yet), `Connected`, or `Failing` (the last request
    /// failed: unreachable, refused, 5xx, 429).
    pub state: String,
    /// The last failure and when (RFC 3339), kept after recovery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_time: Option<String>,
    /// The last successful request (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_success_time: Option<String>,
    /// The Node's uid once registered (or found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_uid: Option<String>,
    /// The last node status patch and lease renewal (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_status_time: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_renew_time: Option<String>,
    /// Per static pod (`namespace/name`): its mirror pod.
    #[serde(default)]
    pub mirrors: BTreeMap<String, MirrorView>,
}

/// One static pod's mirror pod on the API server.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MirrorView {
    /// `Pending` (not created yet), `Synced` (exists, status as of `status_time`),
    /// `Refused` (NodeRestriction or the API server refuses it: the pod runs locally only),
    /// `Failing` (the last request for it failed and is retried).
    pub state: String,
    /// The mirror pod's uid on the API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Why it is refused or failing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// When its status was last written (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_time: Option<String>,
    /// The connection's state and last error ([`ApiServerView`]), added when served.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server_state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_error: Option<String>,
}

impl ApiServerView {
    /// `pod`'s mirror as `describe` shows it: its state plus the connection's.
    pub fn mirror_for(&self, pod: &str) -> MirrorView {
        let mut m = self
            .mirrors
            .get(pod)
            .cloned()
            .unwrap_or_else(|| MirrorView {
                state: "Pending".into(),
                ..Default::default()
            });
        m.server_state = format!("{} {}", self.server, self.state);
        m.server_error = self
            .last_error
            .as_ref()
            .map(|e| match &self.last_error_time {
                Some(t) => format!("{e} (at {t})"),
                None => e.clone(),
            });
        m
    }
}

/// Where the API server client publishes its [`ApiServerView`] (`None`: no `--kubeconfig`).
#[derive(Debug, Clone, Default)]
pub struct ApiServerCell {
    inner: Arc<RwLock<Option<Arc<ApiServerView>>>>,
}

impl ApiServerCell {
    pub fn get(&self) -> Option<Arc<ApiServerView>> {
        // Writers only swap an Arc: a poisoned lock still holds a complete view.
        self.inner.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, view: ApiServerView) {
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(view));
    }
}

/// Where the eviction manager publishes, at every pass, why it evicts no pod although a
/// threshold is met (`None`: no threshold met, or it evicts), for `podvisor node`.
#[derive(Debug, Clone, Default)]
pub struct NotEvictingCell {
    inner: Arc<RwLock<Option<Arc<str>>>>,
}

impl NotEvictingCell {
    pub fn get(&self) -> Option<Arc<str>> {
        // Writers only swap an Arc: a poisoned lock still holds a complete message.
        self.inner.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set(&self, message: Option<String>) {
        *self.inner.write().unwrap_or_else(|p| p.into_inner()) = message.map(Arc::from);
    }
}

/// A pod's ephemeral storage as the eviction manager last measured it (`/stats`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralStorageUsage {
    /// Writable layers, running instances' logs and emptyDir volumes on disk.
    pub used_bytes: u64,
    /// The pod's `ephemeral-storage` limit (the sum of its containers'), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_bytes: Option<u64>,
    /// Per running container: writable layer plus logs.
    #[serde(default)]
    pub containers: std::collections::BTreeMap<String, u64>,
    /// Per running container: the part of `containers` that is its running instance's log.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub container_logs: std::collections::BTreeMap<String, u64>,
    /// Per emptyDir volume on disk.
    #[serde(default)]
    pub volumes: std::collections::BTreeMap<String, u64>,
}

/// Where the eviction manager publishes the pods' ephemeral storage (pod uid -> usage).
#[derive(Debug, Clone, Default)]
pub struct StorageUsageCell {
    inner: Arc<RwLock<Arc<std::collections::BTreeMap<String, EphemeralStorageUsage>>>>,
}

impl StorageUsageCell {
    pub fn get(&self) -> Arc<std::collections::BTreeMap<String, EphemeralStorageUsage>> {
        // Writers only swap an Arc: a poisoned lock still holds a complete map.
        let guard = self.inner.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&guard)
    }

    pub fn set(&self, usage: std::collections::BTreeMap<String, EphemeralStorageUsage>) {
        let mut guard = self.inner.write().unwrap_or_else(|p| p.into_inner());
        *guard = Arc::new(usage);
    }
}

/// The kubelet-style event recorder: deduplicates and keeps the most recent `capacity`.
#[derive(Debug, Clone)]
pub struct EventLog {
    /// Shared with the published snapshots; a repeat copies its record only while a
    /// snapshot still holds it.
    events: VecDeque<Arc<EventRecord>>,
    capacity: usize,
}

impl EventLog {
    pub fn new(capacity: usize) -> EventLog {
        EventLog {
            events: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Records an event at time `now` (RFC 3339). Returns true if it is new (not a repeat),
    /// so callers can log only new events.
    pub fn record(
        &mut self,
        type_: EventType,
        pod: &str,
        container: Option<&str>,
        reason: &str,
        message: &str,
        now: &str,
    ) -> bool {
        if let Some(pos) = self.events.iter().position(|e| {
            e.pod == pod
                && e.container.as_deref() == container
                && e.reason == reason
                && e.message == message
        }) {
            if let Some(mut e) = self.events.remove(pos) {
                let record = Arc::make_mut(&mut e);
                record.count += 1;
                record.last_timestamp = now.to_string();
                self.events.push_back(e);
            }
            return false;
        }
        self.events.push_back(Arc::new(EventRecord {
            type_,
            reason: reason.to_string(),
            message: message.to_string(),
            pod: pod.to_string(),
            container: container.map(str::to_string),
            count: 1,
            first_timestamp: now.to_string(),
            last_timestamp: now.to_string(),
        }));
        while self.events.len() > self.capacity {
            self.events.pop_front();
        }
        true
    }

    /// The records, oldest first, for a snapshot (pointers: no record is copied).
    pub fn to_vec(&self) -> Vec<Arc<EventRecord>> {
        self.events.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::EventReason;

    #[test]
    fn snapshots_share_the_records_and_keep_their_own_counts() {
        let mut log = EventLog::new(10);
        let started = EventReason::Started.as_str();
        log.record(
            EventType::Normal,
            "default/a",
            Some("c"),
            started,
            "m",
            "t1",
        );
        log.record(
            EventType::Normal,
            "default/b",
            Some("c"),
            started,
            "m",
            "t1",
        );
        let first = log.to_vec();
        // Nothing recorded since: the next snapshot points at the same records.
        let second = log.to_vec();
        assert!(first.iter().zip(&second).all(|(x, y)| Arc::ptr_eq(x, y)));
        // A repeat of a's event: the published snapshots keep what they showed.
        assert!(!log.record(
            EventType::Normal,
            "default/a",
            Some("c"),
            started,
            "m",
            "t2"
        ));
        let third = log.to_vec();
        assert_eq!((first[0].pod.as_str(), first[0].count), ("default/a", 1));
        assert_eq!(first[0].last_timestamp, "t1");
        let a = third
            .iter()
            .find(|e| e.pod == "default/a")
            .expect("a's event");
        assert_eq!((a.count, a.last_timestamp.as_str()), (2, "t2"));
        // b's record was not copied.
        assert!(Arc::ptr_eq(&first[1], &third[0]));
    }

    #[test]
    fn repeated_events_are_counted_not_duplicated() {
        let mut log = EventLog::new(10);
        assert!(log.record(
            EventType::Warning,
            "default/a",
            Some("c"),
            EventReason::BackOff.as_str(),
            "m",
            "t1"
        ));
        assert!(log.record(
            EventType::Normal,
            "default/a",
            Some("c"),
            EventReason::Started.as_str(),
            "m",
            "t2"
        ));
        assert!(!log.record(
            EventType::Warning,
            "default/a",
            Some("c"),
            EventReason::BackOff.as_str(),
            "m",
            "t3"
        ));
        let v = log.to_vec();
        assert_eq!(v.len(), 2);
        let backoff = v
            .iter()
            .find(|e| e.reason == EventReason::BackOff)
            .expect("backoff");
        assert_eq!(backoff.count, 2);
        assert_eq!(backoff.first_timestamp, "t1");
        assert_eq!(backoff.last_timestamp, "t3");
        // The repeated event moved to the end (most recent last).
        assert_eq!(v.last().map(|e| e.reason.as_str()), Some("BackOff"));
    }

    #[test]
    fn event_log_keeps_the_most_recent() {
        let mut log = EventLog::new(3);
        for i in 0..5 {
            log.record(EventType::Normal, "p", None, "R", &format!("m{i}"), "t");
        }
        let msgs: Vec<String> = log.to_vec().iter().map(|e| e.message.clone()).collect();
        assert_eq!(msgs, vec!["m2", "m3", "m4"]);
    }

    #[test]
    fn pods_are_found_by_short_and_qualified_names() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("etcd-node1".into());
        pod.metadata.namespace = Some("kube-system".into());
        let snap = Snapshot {
            node_name: "node1".into(),
            pods: vec![PodView {
                pod,
                source: "/etc/kubernetes/manifests/etcd.yaml".into(),
                source_error: None,
                rolled_back: None,
                log_paths: Default::default(),
                previous_log_paths: Default::default(),
                mirror: None,
            }],
            ..Default::default()
        };
        assert!(snap.find_pod("etcd-node1").is_some());
        assert!(snap.find_pod("kube-system/etcd-node1").is_some());
        assert!(snap.find_pod("etcd").is_some());
        assert!(snap.find_pod("default/etcd").is_none());
        assert!(snap.find_pod("other").is_none());
    }
}
