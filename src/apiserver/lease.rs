//! apiserver::lease: the node's heartbeat, the kubelet's lease controller
//! (component-helpers `apimachinery/lease/controller.go`): the Lease `kube-node-lease/<node>`
//! (holder the node, `leaseDurationSeconds`, owned by the Node once its uid is known) is
//! renewed every `nodeLeaseDurationSeconds`/4 (4 % jitter) with an update carrying the
//! resourceVersion it read. An update that conflicts reads the lease again and retries (at
//! most 5 updates a round); a lease that cannot be read or created is tried again with a
//! backoff of 200 ms doubling to 7 s. Its own thread and a client without the rate limit:
//! pod status traffic never delays it.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use serde_json::{json, Value};

use super::{Backoff, ClientError, KubeClient, Shared};

/// Updates per renewal round (the kubelet's `maxUpdateRetries`).
const MAX_UPDATE_RETRIES: u32 = 5;
/// The lease namespace.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// `renewTime` now, a MicroTime.
fn micro_now() -> Value {
    let ts = k8s_openapi::jiff::Timestamp::try_from(SystemTime::now()).unwrap_or_default();
    serde_json::to_value(MicroTime(ts)).unwrap_or(Value::Null)
}

/// The lease `base` (as the API server returned it, whatever its shape) renewed at
/// `renew_time` for `node`: holder, duration, and owned by the Node's current uid when known.
/// Only the metadata and spec of `base` are kept, and only when they are objects, so a
/// malformed answer never panics the heartbeat thread.
pub fn renewed_lease(
    base: &Value,
    node: &str,
    duration_secs: u64,
    node_uid: Option<&str>,
    renew_time: Value,
) -> Value {
    let object = |v: &Value| match v {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    let mut metadata = object(&base["metadata"]);
    let mut spec = object(&base["spec"]);
    metadata.insert("name".into(), json!(node));
    metadata.insert("namespace".into(), json!(NODE_LEASE_NAMESPACE));
    spec.insert("holderIdentity".into(), json!(node));
    spec.insert("leaseDurationSeconds".into(), json!(duration_secs));
    spec.insert("renewTime".into(), renew_time);
    // Owned by the Node as it is now (registered again after a deletion: its new uid).
    if let Some(uid) = node_uid {
        if metadata.get("ownerReferences").map(|o| &o[0]["uid"]) != Some(&json!(uid)) {
            metadata.insert(
                "ownerReferences".into(),
                json!([{"apiVersion": "v1", "kind": "Node", "name": node, "uid": uid}]),
            );
        }
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    })
}

/// The node's lease controller.
pub struct LeaseController {
    client: KubeClient,
    node: String,
    duration: Duration,
    shared: Arc<Shared>,
    latest: Option<Value>,
}

impl LeaseController {
    pub fn new(
        client: KubeClient,
        node: &str,
        duration: Duration,
        shared: Arc<Shared>,
    ) -> LeaseController {
        LeaseController {
            client,
            node: node.to_string(),
            duration,
            shared,
            latest: None,
        }
    }

    fn path(&self) -> String {
        format!(
            "/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases/{}",
            self.node
        )
    }

    /// `base` with this node's spec, renewed now, owned by the Node when its uid is known.
    fn renewed(&self, base: &Value) -> Value {
        renewed_lease(
            base,
            &self.node,
            self.duration.as_secs(),
            self.shared.node_uid().as_deref(),
            micro_now(),
        )
    }

    fn record<T>(&self, r: Result<T, ClientError>) -> Result<T, ClientError> {
        match &r {
            Ok(_) => self.shared.answered(),
            // A lease not there yet, or changed by somebody else: handled here.
            Err(e) if e.is_not_found() || e.is_conflict() => self.shared.answered(),
            Err(e) => self.shared.failed(e),
        }
        r
    }

    /// Reads the lease, creating it when missing.
    fn ensure(&mut self) -> Result<Value, ClientError> {
        match self.record(self.client.get(&self.path())) {
            Ok(r) => Ok(r.body),
            Err(e) if e.is_not_found() => {
                let lease = self.renewed(&json!({}));
                let r = self.record(self.client.post(
                    &format!(
                        "/apis/coordination.k8s.io/v1/namespaces/{NODE_LEASE_NAMESPACE}/leases"
                    ),
                    &lease,
                ));
                match r {
                    Ok(r) => Ok(r.body),
                    // Created meanwhile (an earlier attempt whose answer was lost).
                    Err(e) if e.is_already_exists() => {
                        self.record(self.client.get(&self.path())).map(|r| r.body)
                    }
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// [`Self::ensure`] until it works (or the daemon stops).
    fn backoff_ensure(&mut self) -> Option<Value> {
        let mut b = Backoff::new(Duration::from_secs(7), Duration::from_secs(7));
        loop {
            if self.shared.stopped() {
                return None;
            }
            match self.ensure() {
                Ok(l) => return Some(l),
                Err(e) => {
                    let wait = b.fail(Instant::now(), e.retry_after());
                    std::thread::sleep(wait);
                }
            }
        }
    }

    /// One renewal round.
    pub fn sync(&mut self) {
        let mut base = match self.latest.take() {
            Some(l) => l,
            None => match self.backoff_ensure() {
                Some(l) => l,
                None => return,
            },
        };
        for _ in 0..MAX_UPDATE_RETRIES {
            let lease = self.renewed(&base);
            match self.record(self.client.put(&self.path(), &lease)) {
                Ok(r) => {
                    self.latest = Some(r.body);
                    self.shared
                        .update(|v| v.lease_renew_time = Some(super::now_rfc3339()));
                    return;
                }
                Err(e) => {
                    if e.is_conflict() || e.is_not_found() {
                        match self.backoff_ensure() {
                            Some(l) => base = l,
                            None => return,
                        }
                    }
                }
            }
        }
    }

    /// Renews until the daemon stops.
    pub fn run(mut self) {
        let interval = self.duration / 4;
        let mut n: u64 = 0;
        while !self.shared.stopped() {
            self.sync();
            // 0-4 % jitter, spread by a counter (no randomness needed for this).
            n = n.wrapping_add(1);
            let jitter = interval.mul_f64((n.wrapping_mul(2_654_435_761) % 1000) as f64 / 25_000.0);
            std::thread::sleep(interval + jitter);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewal_keeps_the_resource_version_and_survives_odd_answers() {
        let base = json!({"metadata": {"name": "n", "resourceVersion": "7", "ownerReferences": [{"uid": "old"}]},
                          "spec": {"holderIdentity": "n", "leaseTransitions": 1}});
        let l = renewed_lease(
            &base,
            "n",
            40,
            Some("new"),
            json!("2026-01-01T00:00:00.000000Z"),
        );
        assert_eq!(l["metadata"]["resourceVersion"], "7");
        assert_eq!(l["metadata"]["ownerReferences"][0]["uid"], "new");
        assert_eq!(l["spec"]["leaseTransitions"], 1);
        assert_eq!(l["spec"]["leaseDurationSeconds"], 40);
        assert_eq!(l["spec"]["renewTime"], "2026-01-01T00:00:00.000000Z");
        for odd in [
            json!("x"),
            json!([1]),
            json!({"metadata": 3, "spec": "s"}),
            json!({"metadata": {"ownerReferences": "x"}}),
        ] {
            let l = renewed_lease(&odd, "n", 40, Some("u"), json!("t"));
            assert_eq!(l["metadata"]["name"], "n");
            assert_eq!(l["metadata"]["ownerReferences"][0]["uid"], "u");
        }
    }
}
