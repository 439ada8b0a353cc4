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
        let mut l = base.clone();
        l["apiVersion"] = json!("coordination.k8s.io/v1");
        l["kind"] = json!("Lease");
        l["metadata"]["name"] = json!(self.node);
        l["metadata"]["namespace"] = json!(NODE_LEASE_NAMESPACE);
        l["spec"]["holderIdentity"] = json!(self.node);
        l["spec"]["leaseDurationSeconds"] = json!(self.duration.as_secs());
        l["spec"]["renewTime"] = micro_now();
        // Owned by the Node as it is now (registered again after a deletion: its new uid).
        if let Some(uid) = self.shared.node_uid() {
            if l["metadata"]["ownerReferences"][0]["uid"] != uid.as_str() {
                l["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": "v1", "kind": "Node", "name": self.node, "uid": uid,
                }]);
            }
        }
        l
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
