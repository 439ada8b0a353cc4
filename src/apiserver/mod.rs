//! apiserver: the optional link to a Kubernetes API server (`podvisor run --kubeconfig FILE`):
//! the node registers itself and keeps its status, renews its lease in `kube-node-lease`, and
//! mirrors every static pod with its live status, as a kubelet does
//! (`pkg/kubelet/kubelet_node_status.go`, `nodestatus`, `nodelease`, `pod/mirror_client.go`,
//! `status/status_manager.go`), within what NodeRestriction lets a node write.
//!
//! It owns no pod state: three threads read the published [`Snapshot`]s and talk to the API
//! server, and the only thing they send the sync loop is a Warning event when a mirror pod
//! is refused. An API server that is down, slow, refusing the certificate or answering
//! 5xx/429 slows only these threads.
//!
//! - `apiserver-sync` ([`worker`]): registration, node status every
//!   `nodeStatusUpdateFrequency` when changed and at least every `nodeStatusReportFrequency`,
//!   mirror pod creates and deletes, pod status patches. Its queue is bounded by
//!   construction: the work is recomputed from the latest snapshot and the mirror pods the
//!   API server holds at each turn (one wake-up slot, any number of snapshots collapse into
//!   it), so 100 pods changing at once are at most 100 patches of their latest status, paced
//!   by `kubeAPIQPS`/`kubeAPIBurst`; a failing server backs every request off (200 ms
//!   doubling to 7 s, or its `Retry-After`).
//! - `apiserver-watch` ([`watch`]): lists and watches the pods bound to this node and keeps
//!   the mirror pods in [`Shared`]; a mirror deleted on the server is seen at once.
//! - `node-lease` ([`lease`]): the kubelet's lease controller, renewing every
//!   `nodeLeaseDurationSeconds`/4 on its own thread, so a slow status patch never delays it.

pub mod client;
pub mod kubeconfig;
pub mod lease;
pub mod mirror;
pub mod node;
pub mod patch;
pub mod watch;
pub mod worker;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use crate::status::{ApiServerCell, ApiServerView, MirrorView};

pub use client::{ClientError, KubeClient};
pub use kubeconfig::{Kubeconfig, KubeconfigError};

/// Errors that stop the daemon from starting with `--kubeconfig`.
#[derive(Debug, thiserror::Error)]
pub enum ApiServerError {
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    #[error("kubeconfig {path}: {source}")]
    Client {
        path: std::path::PathBuf,
        source: Box<ClientError>,
    },
    #[error("kubeconfig {path}: the client certificate is for {found:?}, but this node is {node:?} (NodeRestriction lets a node write only its own objects, as system:node:<nodeName>)")]
    Identity {
        path: std::path::PathBuf,
        found: String,
        node: String,
    },
    #[error("spawn {thread}: {source}")]
    Spawn {
        thread: &'static str,
        source: std::io::Error,
    },
}

/// RFC 3339 now, in seconds.
pub(crate) fn now_rfc3339() -> String {
    crate::logs::timestamp::format_timestamp_secs(SystemTime::now())
}

/// The mirror pods the API server holds, by `namespace/name`, as the watch last saw them.
#[derive(Debug, Default)]
pub struct MirrorCache {
    pub pods: BTreeMap<String, mirror::MirrorPod>,
    /// A full list was read (until then nothing is created or deleted).
    pub synced: bool,
}

fn newer(a: &str, b: &str) -> bool {
    match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(a), Ok(b)) => a >= b,
        _ => true,
    }
}

impl MirrorCache {
    /// Records what the server says `m` is now, unless an entry with a newer
    /// resourceVersion is already there (a late watch event after our own write).
    pub fn upsert(&mut self, m: mirror::MirrorPod) {
        let key = m.full_name();
        if let Some(cur) = self.pods.get(&key) {
            if cur.uid == m.uid && !newer(&m.resource_version, &cur.resource_version) {
                return;
            }
        }
        self.pods.insert(key, m);
    }

    /// Forgets `name` if it is still the pod with `uid`.
    pub fn remove(&mut self, name: &str, uid: &str) {
        if self.pods.get(name).is_some_and(|m| m.uid == uid) {
            self.pods.remove(name);
        }
    }
}

/// What the client threads share.
#[derive(Debug)]
pub struct Shared {
    pub mirrors: Mutex<MirrorCache>,
    /// The Node's uid once registered or found (mirror pods' and the lease's owner).
    pub node_uid: Mutex<Option<String>>,
    view: Mutex<ApiServerView>,
    cell: ApiServerCell,
    /// Wakes `apiserver-sync`.
    pub wake: SyncSender<()>,
    pub stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The holders only copy values in and out: a poisoned lock still holds a whole value.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    pub fn new(server: &str, cell: ApiServerCell, wake: SyncSender<()>) -> Shared {
        let view = ApiServerView {
            server: server.to_string(),
            state: "Connecting".into(),
            ..Default::default()
        };
        cell.set(view.clone());
        Shared {
            mirrors: Mutex::new(MirrorCache::default()),
            node_uid: Mutex::new(None),
            view: Mutex::new(view),
            cell,
            wake,
            stop: AtomicBool::new(false),
        }
    }

    pub fn node_uid(&self) -> Option<String> {
        lock(&self.node_uid).clone()
    }

    pub fn wake(&self) {
        let _ = self.wake.try_send(());
    }

    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Changes the published view.
    pub fn update(&self, f: impl FnOnce(&mut ApiServerView)) {
        let mut v = lock(&self.view);
        let before = v.clone();
        f(&mut v);
        if *v != before {
            self.cell.set(v.clone());
        }
    }

    /// A request answered (whatever its status: the server is there).
    pub fn answered(&self) {
        self.update(|v| {
            v.state = "Connected".into();
            v.last_success_time = Some(now_rfc3339());
        });
    }

    /// A request failed: `Failing` when the server is the problem, else only the error.
    /// Logged once per distinct message (flash storage).
    pub fn failed(&self, e: &ClientError) {
        let msg = e.to_string();
        self.update(|v| {
            if v.last_error.as_deref() != Some(msg.as_str()) {
                log::warn!("api server: {msg}");
            }
            if e.is_unavailable() || matches!(e, ClientError::Tls { .. }) {
                v.state = "Failing".into();
            } else if e.status().is_some() {
                v.state = "Connected".into();
            }
            v.last_error = Some(msg);
            v.last_error_time = Some(now_rfc3339());
        });
    }

    /// What the published view says of `pod`'s mirror.
    pub fn view_mirror(&self, pod: &str) -> Option<MirrorView> {
        lock(&self.view).mirrors.get(pod).cloned()
    }

    pub fn set_mirror(&self, pod: &str, m: Option<MirrorView>) {
        self.update(|v| match m {
            Some(m) => {
                v.mirrors.insert(pod.to_string(), m);
            }
            None => {
                v.mirrors.remove(pod);
            }
        });
    }
}

/// Backoff after failures: 200 ms doubling to `max` (the kubelet's registration and lease
/// backoff go to 7 s), or the server's `Retry-After` (at most `max_retry_after`).
#[derive(Debug, Clone)]
pub struct Backoff {
    pub max: Duration,
    pub max_retry_after: Duration,
    step: Duration,
    pub until: Option<Instant>,
}

impl Backoff {
    pub fn new(max: Duration, max_retry_after: Duration) -> Backoff {
        Backoff {
            max,
            max_retry_after,
            step: Duration::ZERO,
            until: None,
        }
    }

    pub fn reset(&mut self) {
        self.step = Duration::ZERO;
        self.until = None;
    }

    /// A failure at `now`; returns the wait.
    pub fn fail(&mut self, now: Instant, retry_after: Option<Duration>) -> Duration {
        self.step = (self.step * 2).clamp(Duration::from_millis(200), self.max);
        let wait = match retry_after {
            Some(ra) => ra.min(self.max_retry_after),
            None => self.step,
        };
        self.until = Some(now + wait);
        wait
    }

    pub fn active(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now < u)
    }
}

/// What the client threads need from the daemon.
pub struct Context {
    pub cfg: crate::config::ApiServerConfig,
    pub node_name: String,
    pub facts: node::NodeFacts,
    pub node_source: crate::api::node::NodeSource,
    pub snapshots: crate::status::SnapshotCell,
    /// The sync loop's turnover (the Ready condition) and how stale it may be.
    pub monitor: crate::health::SyncLoopMonitor,
    pub monitor_deadline: Duration,
    /// Where Warning events about mirror pods go (the sync loop).
    pub events: mpsc::Sender<crate::sync::SyncEvent>,
}

/// The running client threads; dropping it asks them to stop (they end at their next
/// turn; a watch ends with its request).
pub struct ApiServerLink {
    shared: Arc<Shared>,
}

impl ApiServerLink {
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

impl Drop for ApiServerLink {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.shared.wake();
    }
}

/// Checks the kubeconfig's client certificate against the node's identity: a certificate
/// for another node is refused (NodeRestriction would refuse every write); one that is not a
/// node's at all is only warned about (an administrator's credentials work, but the cluster
/// cannot tell which node wrote).
pub fn check_identity(kc: &Kubeconfig, node_name: &str) -> Result<(), ApiServerError> {
    let Some(pem) = &kc.client_cert_pem else {
        return Ok(());
    };
    let der = ureq::tls::parse_pem(pem).find_map(|i| match i {
        Ok(ureq::tls::PemItem::Certificate(c)) => Some(c.der().to_vec()),
        _ => None,
    });
    let Some((cn, orgs)) = der.and_then(|d| crate::nodeapi::tls::subject_cn_and_orgs(&d)) else {
        return Ok(());
    };
    let want = format!("system:node:{node_name}");
    match cn.strip_prefix("system:node:") {
        Some(_) if cn != want => Err(ApiServerError::Identity {
            path: kc.path.clone(),
            found: cn,
            node: node_name.to_string(),
        }),
        Some(_) => {
            if !orgs.iter().any(|o| o == "system:nodes") {
                log::warn!(
                    "kubeconfig {}: the client certificate {cn} is not in group system:nodes: the Node authorizer and NodeRestriction will not treat it as a node",
                    kc.path.display()
                );
            }
            Ok(())
        }
        None => {
            log::warn!(
                "kubeconfig {}: the client certificate is for {cn:?}, not {want:?}: NodeRestriction does not apply and the API server cannot tell which node writes",
                kc.path.display()
            );
            Ok(())
        }
    }
}

/// Reads the kubeconfig and checks the node's identity in it (at start, before anything
/// runs).
pub fn load_kubeconfig(
    cfg: &crate::config::ApiServerConfig,
    node_name: &str,
) -> Result<Kubeconfig, ApiServerError> {
    let kc = Kubeconfig::load(&cfg.kubeconfig)?;
    check_identity(&kc, node_name)?;
    Ok(kc)
}

/// Starts the three client threads.
pub fn start(
    ctx: Context,
    kc: &Kubeconfig,
    cell: ApiServerCell,
) -> Result<ApiServerLink, ApiServerError> {
    let client =
        KubeClient::new(kc, ctx.cfg.kube_api_qps, ctx.cfg.kube_api_burst).map_err(|source| {
            ApiServerError::Client {
                path: kc.path.clone(),
                source: Box::new(source),
            }
        })?;
    let (wake_tx, wake_rx) = mpsc::sync_channel(1);
    ctx.snapshots.subscribe(wake_tx.clone());
    let shared = Arc::new(Shared::new(&kc.server, cell, wake_tx));
    log::info!(
        "api server {}: registering node {} and mirroring its static pods",
        kc.server,
        ctx.node_name
    );
    let spawn = |name: &'static str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.into())
            .spawn(f)
            .map(drop)
            .map_err(|source| ApiServerError::Spawn {
                thread: name,
                source,
            })
    };
    let heartbeat = client.heartbeat(ctx.cfg.node_status_update_frequency);
    let lease = lease::LeaseController::new(
        heartbeat.clone(),
        &ctx.node_name,
        ctx.cfg.node_lease_duration,
        Arc::clone(&shared),
    );
    spawn("node-lease", Box::new(move || lease.run()))?;
    let w = watch::Watcher::new(
        client.clone(),
        &ctx.node_name,
        ctx.cfg.node_status_update_frequency,
        Arc::clone(&shared),
    );
    spawn("apiserver-watch", Box::new(move || w.run()))?;
    let worker = worker::Worker::new(ctx, client, heartbeat, Arc::clone(&shared));
    spawn("apiserver-sync", Box::new(move || worker.run(wake_rx)))?;
    Ok(ApiServerLink { shared })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_honours_retry_after() {
        let t = Instant::now();
        let mut b = Backoff::new(Duration::from_secs(7), Duration::from_secs(10));
        let waits: Vec<u64> = (0..8).map(|_| b.fail(t, None).as_millis() as u64).collect();
        assert_eq!(waits, [200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
        assert_eq!(
            b.fail(t, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            b.fail(t, Some(Duration::from_secs(60))),
            Duration::from_secs(10)
        );
        assert!(b.active(t));
        b.reset();
        assert!(!b.active(t));
    }

    #[test]
    fn late_watch_events_do_not_roll_the_cache_back() {
        let m = |rv: &str| mirror::MirrorPod {
            namespace: "ns".into(),
            name: "p".into(),
            uid: "u".into(),
            resource_version: rv.into(),
            hash: "h".into(),
            meta: String::new(),
            owner_uid: None,
            deleting: false,
            status: serde_json::json!({}),
        };
        let mut c = MirrorCache::default();
        c.upsert(m("10"));
        c.upsert(m("9"));
        assert_eq!(c.pods["ns/p"].resource_version, "10");
        c.upsert(m("11"));
        assert_eq!(c.pods["ns/p"].resource_version, "11");
        c.remove("ns/p", "other");
        assert!(c.pods.contains_key("ns/p"));
        c.remove("ns/p", "u");
        assert!(c.pods.is_empty());
    }
}
