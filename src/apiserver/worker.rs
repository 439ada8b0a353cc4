//! apiserver::worker: the `apiserver-sync` thread. Each turn (a published snapshot, a watch
//! event, a timer) it recomputes what the API server lacks from the latest Snapshot and the
//! mirror pods the watch holds, then: registers the Node (or finds it), patches the node
//! status when due, creates and deletes mirror pods ([`super::mirror::plan`]) and patches the
//! status of every mirror pod whose status differs ([`super::mirror::status_patch`]). A
//! failure of the server (transport, 429, 5xx) ends the turn and backs every request off;
//! the next turn starts over from the latest state, so nothing queues up while it is down.

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::mirror::{self, MirrorAction, MirrorPod};
use super::node::{self, Readiness};
use super::patch::merge_diff;
use super::{lock, now_rfc3339, Backoff, ClientError, Context, KubeClient, Shared};
use crate::reason::EventReason;
use crate::status::{full_name, MirrorView, Snapshot};
use crate::sync::SyncEvent;

/// Node status patches per turn when they conflict (the kubelet's `nodeStatusUpdateRetry`).
const NODE_STATUS_RETRIES: u32 = 5;
/// Status patches of one pod per turn when they conflict.
const POD_STATUS_RETRIES: u32 = 3;

/// The `apiserver-sync` thread's state (nothing of it is pod state: all of it can be
/// recomputed from the snapshot and the API server).
pub struct Worker {
    ctx: Context,
    client: KubeClient,
    heartbeat: KubeClient,
    shared: Arc<Shared>,
    backoff: Backoff,
    /// The Node as the API server last returned it (status and resourceVersion).
    server_node: Option<Value>,
    /// The last status sent, without heartbeat times, and when.
    last_sent: Option<Value>,
    last_report: Option<Instant>,
    next_node_check: Instant,
    /// Read the Node again before the next status patch (after a conflict or an outage).
    node_stale: bool,
    ready: Readiness,
    started: String,
    /// Mirror pods refused by the API server or NodeRestriction: `namespace/name` -> the
    /// config hash refused, and when to ask again.
    refused: BTreeMap<String, (String, Instant)>,
}

impl Worker {
    pub fn new(
        ctx: Context,
        client: KubeClient,
        heartbeat: KubeClient,
        shared: Arc<Shared>,
    ) -> Worker {
        let max = ctx
            .cfg
            .node_status_update_frequency
            .min(Duration::from_secs(7));
        let status_period = ctx.cfg.node_status_update_frequency;
        let now = now_rfc3339();
        Worker {
            ctx,
            client,
            heartbeat,
            shared,
            backoff: Backoff::new(max, status_period),
            server_node: None,
            last_sent: None,
            last_report: None,
            next_node_check: Instant::now(),
            node_stale: true,
            ready: Readiness {
                ready: false,
                message: "podvisor is starting".into(),
                since: now.clone(),
            },
            started: now,
            refused: BTreeMap::new(),
        }
    }

    fn node_path(&self) -> String {
        format!("/api/v1/nodes/{}", self.ctx.node_name)
    }

    /// Records an answer or a failure in the published view.
    fn seen<T>(&self, r: Result<T, ClientError>) -> Result<T, ClientError> {
        match &r {
            Ok(_) => self.shared.answered(),
            Err(e) => self.shared.failed(e),
        }
        r
    }

    /// Registers the Node, or finds it (`registerNode: false`, or already registered).
    fn ensure_node(&mut self, snap: &Snapshot) -> Result<String, ClientError> {
        if let Some(uid) = self.shared.node_uid() {
            return Ok(uid);
        }
        let existing = if self.ctx.cfg.register_node {
            let status = self.node_status(snap);
            let body = node::initial_node(
                &self.ctx.facts,
                &self.ctx.cfg,
                node::with_heartbeat(&status, &now_rfc3339()),
            );
            match self.seen(self.heartbeat.post("/api/v1/nodes", &body)) {
                Ok(r) => {
                    log::info!("api server: registered node {}", self.ctx.node_name);
                    self.last_sent = Some(status);
                    self.last_report = Some(Instant::now());
                    Some(r.body)
                }
                Err(e) if e.is_already_exists() => None,
                Err(e) => return Err(e),
            }
        } else {
            None
        };
        let node = match existing {
            Some(n) => n,
            None => {
                let n = self.seen(self.heartbeat.get(&self.node_path()))?.body;
                // The kubelet's updateDefaultLabels: hostname, os and arch kept in line.
                let want = node::node_labels(&self.ctx.facts, &self.ctx.cfg);
                if let Some(mut patch) = node::default_labels_patch(&want, &n["metadata"]["labels"])
                {
                    patch["metadata"]["resourceVersion"] = n["metadata"]["resourceVersion"].clone();
                    let r = self.seen(
                        self.heartbeat
                            .merge_patch(&format!("{}/status", self.node_path()), &patch),
                    )?;
                    r.body
                } else {
                    n
                }
            }
        };
        let uid = node["metadata"]["uid"].as_str().unwrap_or("").to_string();
        *lock(&self.shared.node_uid) = Some(uid.clone());
        self.shared.update(|v| v.node_uid = Some(uid.clone()));
        self.server_node = Some(node);
        self.node_stale = false;
        Ok(uid)
    }

    fn node_status(&mut self, snap: &Snapshot) -> Value {
        let now = Instant::now();
        let ready = self.ctx.monitor.healthy(now, self.ctx.monitor_deadline);
        if ready != self.ready.ready || self.ready.message == "podvisor is starting" {
            let message = if ready {
                "kubelet is posting ready status".to_string()
            } else {
                match self.ctx.monitor.since_latest(now) {
                    Some(d) => format!("the sync loop has not turned over for {}s", d.as_secs()),
                    None => "the sync loop has not started".to_string(),
                }
            };
            if ready != self.ready.ready {
                self.ready.since = now_rfc3339();
            }
            self.ready.ready = ready;
            self.ready.message = message;
        }
        node::node_status(
            snap,
            &self.ctx.node_source,
            &self.ctx.facts,
            &self.ready,
            &self.started,
            self.ctx.cfg.node_status_max_images,
        )
    }

    /// Patches the node status when it changed, or the report frequency passed.
    fn update_node_status(&mut self, snap: &Snapshot, now: Instant) -> Result<(), ClientError> {
        let status = self.node_status(snap);
        let due = self
            .last_report
            .is_none_or(|t| now >= t + self.ctx.cfg.node_status_report_frequency);
        if !due && !self.node_stale && self.last_sent.as_ref() == Some(&status) {
            return Ok(());
        }
        for _ in 0..NODE_STATUS_RETRIES {
            if self.node_stale || self.server_node.is_none() {
                match self.seen(self.heartbeat.get(&self.node_path())) {
                    Ok(r) => self.server_node = Some(r.body),
                    Err(e) if e.is_not_found() => {
                        log::warn!(
                            "api server: node {} is gone, registering it again",
                            self.ctx.node_name
                        );
                        *lock(&self.shared.node_uid) = None;
                        self.server_node = None;
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                }
                self.node_stale = false;
            }
            let server = self.server_node.clone().unwrap_or_default();
            let server_status = server.get("status").cloned().unwrap_or_else(|| json!({}));
            let mut want = node::with_heartbeat(&status, &now_rfc3339());
            node::merge_foreign_conditions(&mut want, &server_status);
            let mut full = server_status.clone();
            if let (Some(f), Some(w)) = (full.as_object_mut(), want.as_object()) {
                for (k, v) in w {
                    f.insert(k.clone(), v.clone());
                }
            }
            let patch = json!({
                "metadata": {"resourceVersion": server["metadata"]["resourceVersion"]},
                "status": merge_diff(&server_status, &full).unwrap_or_else(|| json!({})),
            });
            match self.seen(
                self.heartbeat
                    .merge_patch(&format!("{}/status", self.node_path()), &patch),
            ) {
                Ok(r) => {
                    self.server_node = Some(r.body);
                    self.last_sent = Some(status);
                    self.last_report = Some(now);
                    self.shared
                        .update(|v| v.node_status_time = Some(now_rfc3339()));
                    return Ok(());
                }
                Err(e) if e.is_conflict() => self.node_stale = true,
                Err(e) if e.is_not_found() => {
                    *lock(&self.shared.node_uid) = None;
                    self.server_node = None;
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn refuse(&mut self, pod: &str, hash: &str, message: String) {
        let again = Instant::now() + self.ctx.cfg.node_status_report_frequency;
        let first = self
            .refused
            .insert(pod.to_string(), (hash.to_string(), again))
            .is_none_or(|(h, _)| h != hash);
        if first {
            let _ = self.ctx.events.send(SyncEvent::MirrorPod {
                pod: pod.to_string(),
                reason: EventReason::MirrorPodRefused,
                message: format!(
                    "the API server refuses this pod's mirror pod, it runs locally only: {message}"
                ),
            });
        }
        self.shared.set_mirror(
            pod,
            Some(MirrorView {
                state: "Refused".into(),
                uid: None,
                message: Some(message),
                status_time: None,
                ..Default::default()
            }),
        );
    }

    /// Creates and deletes mirror pods.
    fn sync_mirrors(&mut self, snap: &Snapshot, node_uid: &str) -> Result<(), ClientError> {
        let now = Instant::now();
        self.refused.retain(|_, (_, again)| *again > now);
        // NodeRestriction's rules, checked before asking.
        for v in &snap.pods {
            if let Some(why) = mirror::node_restriction_refusal(&v.pod, &self.ctx.node_name) {
                let name = full_name(&v.pod);
                let hash = mirror::config_hash(&v.pod).to_string();
                self.refuse(&name, &hash, why);
            }
        }
        let refused: BTreeMap<String, String> = self
            .refused
            .iter()
            .map(|(k, (h, _))| (k.clone(), h.clone()))
            .collect();
        let actions = {
            let cache = lock(&self.shared.mirrors);
            if !cache.synced {
                return Ok(());
            }
            mirror::plan(snap, &cache.pods, &self.ctx.node_name, node_uid, &refused)
        };
        for a in actions {
            match a {
                MirrorAction::Delete {
                    pod,
                    namespace,
                    name,
                    uid,
                    why,
                } => {
                    let body = json!({
                        "apiVersion": "v1",
                        "kind": "DeleteOptions",
                        "gracePeriodSeconds": 0,
                        "preconditions": {"uid": uid},
                    });
                    match self.seen(self.client.delete(
                        &format!("/api/v1/namespaces/{namespace}/pods/{name}"),
                        &body,
                    )) {
                        Ok(_) => log::info!("api server: deleted mirror pod {pod} ({why})"),
                        // Already gone, or replaced by another pod of that name: the watch
                        // tells which.
                        Err(e) if e.is_not_found() || e.is_conflict() => {}
                        Err(e) if e.is_unavailable() => return Err(e),
                        Err(e) => log::warn!("api server: delete mirror pod {pod}: {e}"),
                    }
                    lock(&self.shared.mirrors).remove(&pod, &uid);
                    if !snap.pods.iter().any(|v| full_name(&v.pod) == pod) {
                        self.shared.set_mirror(&pod, None);
                    }
                }
                MirrorAction::Create { pod, body } => {
                    let ns = body["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or("default")
                        .to_string();
                    let hash = body["metadata"]["annotations"][mirror::MIRROR_ANNOTATION]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    match self.seen(
                        self.client
                            .post(&format!("/api/v1/namespaces/{ns}/pods"), &body),
                    ) {
                        Ok(r) => {
                            log::info!("api server: created mirror pod {pod}");
                            if let Some(m) = MirrorPod::from_api(&r.body) {
                                self.shared.set_mirror(&pod, Some(synced(&m, None)));
                                lock(&self.shared.mirrors).upsert(m);
                            }
                            self.refused.remove(&pod);
                        }
                        // The watch shows the one there; the next plan replaces it if stale.
                        Err(e) if e.is_already_exists() => {}
                        Err(e) if e.is_unavailable() => return Err(e),
                        Err(e) if e.is_refusal() || e.is_not_found() => {
                            self.refuse(&pod, &hash, e.to_string())
                        }
                        Err(e) => return Err(e),
                    }
                }
            }
        }
        Ok(())
    }

    /// Patches each mirror pod's status that differs from its static pod's.
    /// Each pod's status is taken from the latest snapshot when its turn comes, so changes
    /// published while earlier pods are patched collapse into the same patch.
    fn sync_statuses(&mut self, snap: &Snapshot) -> Result<(), ClientError> {
        for name in snap.pods.iter().map(|v| full_name(&v.pod)) {
            let latest = self.ctx.snapshots.get();
            let Some(v) = latest.pods.iter().find(|v| full_name(&v.pod) == name) else {
                continue;
            };
            let hash = mirror::config_hash(&v.pod);
            for _ in 0..POD_STATUS_RETRIES {
                let m = match lock(&self.shared.mirrors).pods.get(&name) {
                    Some(m) if m.hash == hash && !m.deleting => m.clone(),
                    _ => break,
                };
                let Some(patch) = mirror::status_patch(&m, &v.pod) else {
                    if !self.shared_has_synced(&name, &m.uid) {
                        self.shared.set_mirror(&name, Some(synced(&m, None)));
                    }
                    break;
                };
                let path = format!("/api/v1/namespaces/{}/pods/{}/status", m.namespace, m.name);
                match self.seen(self.client.merge_patch(&path, &patch)) {
                    Ok(r) => {
                        if let Some(nm) = MirrorPod::from_api(&r.body) {
                            self.shared
                                .set_mirror(&name, Some(synced(&nm, Some(now_rfc3339()))));
                            lock(&self.shared.mirrors).upsert(nm);
                        }
                        break;
                    }
                    Err(e) if e.is_conflict() => {
                        // Read it again (another writer, or our view is behind the watch).
                        match self.seen(self.client.get(&format!(
                            "/api/v1/namespaces/{}/pods/{}",
                            m.namespace, m.name
                        ))) {
                            Ok(r) => match MirrorPod::from_api(&r.body) {
                                Some(nm) => {
                                    let mut cache = lock(&self.shared.mirrors);
                                    cache.pods.insert(name.clone(), nm);
                                }
                                None => break,
                            },
                            Err(e) if e.is_not_found() => {
                                lock(&self.shared.mirrors).remove(&name, &m.uid);
                                break;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Err(e) if e.is_not_found() => {
                        lock(&self.shared.mirrors).remove(&name, &m.uid);
                        break;
                    }
                    Err(e) if e.status() == Some(422) => {
                        // A transition the API server does not allow on this pod (out of a
                        // terminal phase): replace the mirror pod.
                        log::info!(
                            "api server: mirror pod {name} refuses its status ({e}); replacing it"
                        );
                        if let Some(c) = lock(&self.shared.mirrors).pods.get_mut(&name) {
                            c.deleting = true;
                        }
                        self.shared.wake();
                        break;
                    }
                    Err(e) if e.is_unavailable() => return Err(e),
                    Err(e) => {
                        self.shared.set_mirror(
                            &name,
                            Some(MirrorView {
                                state: "Failing".into(),
                                uid: Some(m.uid.clone()),
                                message: Some(e.to_string()),
                                status_time: None,
                                ..Default::default()
                            }),
                        );
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    fn shared_has_synced(&self, name: &str, uid: &str) -> bool {
        self.shared
            .view_mirror(name)
            .is_some_and(|m| m.state == "Synced" && m.uid.as_deref() == Some(uid))
    }

    /// One turn.
    fn step(&mut self, now: Instant) -> Result<(), ClientError> {
        let snap = self.ctx.snapshots.get();
        let node_uid = self.ensure_node(&snap)?;
        if now >= self.next_node_check {
            self.next_node_check = now + self.ctx.cfg.node_status_update_frequency;
            self.update_node_status(&snap, now)?;
        }
        self.sync_mirrors(&snap, &node_uid)?;
        self.sync_statuses(&snap)?;
        for v in &snap.pods {
            let name = full_name(&v.pod);
            if !self.refused.contains_key(&name) && self.shared.view_mirror(&name).is_none() {
                self.shared.set_mirror(
                    &name,
                    Some(MirrorView {
                        state: "Pending".into(),
                        ..Default::default()
                    }),
                );
            }
        }
        Ok(())
    }

    /// Runs turns until the daemon stops: at each wake-up, and at least when the node status
    /// is due or a backoff ends.
    pub fn run(mut self, wake: Receiver<()>) {
        while !self.shared.stopped() {
            let now = Instant::now();
            if !self.backoff.active(now) {
                match self.step(now) {
                    Ok(()) => self.backoff.reset(),
                    Err(e) => {
                        self.node_stale = true;
                        // The status is due again as soon as the server answers.
                        self.next_node_check = now;
                        let wait = self.backoff.fail(now, e.retry_after());
                        log::debug!("api server: {e}; next attempt in {wait:?}");
                    }
                }
            }
            let now = Instant::now();
            let mut next = self.next_node_check;
            if let Some(u) = self.backoff.until {
                next = next.max(u);
            }
            if let Some(t) = self.refused.values().map(|(_, t)| *t).min() {
                next = next.min(t);
            }
            match wake.recv_timeout(
                next.saturating_duration_since(now)
                    .max(Duration::from_millis(5)),
            ) {
                Ok(()) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self.backoff.active(Instant::now()) {
                // Wake-ups during a backoff wait for its end.
                if let Some(u) = self.backoff.until {
                    std::thread::sleep(u.saturating_duration_since(Instant::now()));
                }
            }
        }
    }
}

fn synced(m: &MirrorPod, status_time: Option<String>) -> MirrorView {
    MirrorView {
        state: "Synced".into(),
        uid: Some(m.uid.clone()),
        message: None,
        status_time,
        ..Default::default()
    }
}
