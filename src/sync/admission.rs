//! admission: the kubelet's resource-fit check when a pod worker is created. A pod whose
//! effective requests do not fit next to the pods already admitted is not started: it is
//! Failed with reason `OutOfcpu` / `OutOfmemory` and a Warning event, until its manifest
//! changes (a new uid, admitted afresh). Before it, the eviction manager's admission refuses
//! pods under node pressure (`sync::eviction`).

use super::{podstatus, PodWorker, SyncLoop};
use crate::cgroups::allocatable::{admit, Rejection};
use crate::pod::resources::{pod_requests, Amounts};
use crate::status::EventType;

impl SyncLoop {
    /// Checks `w` against the node's allocatable; marks it rejected if it does not fit.
    /// Pods re-adopted from a previous run (sandbox or containers on disk) are not checked.
    pub(super) fn admit_worker(&mut self, name: &str, w: &mut PodWorker, adopted: bool) {
        if adopted {
            return;
        }
        // The eviction manager's admission comes first, as in the kubelet's handler chain.
        self.admit_under_pressure(name, w);
        if w.rejected.is_some() {
            return;
        }
        let Some(allocatable) = self.cfg.allocatable else {
            return;
        };
        let requests = match pod_requests(&w.pod) {
            Ok(r) => r,
            Err(e) => {
                // The spec builder reports the same quantity error when a container starts.
                log::warn!("{name}: admission: {e}");
                return;
            }
        };
        let mut used = Amounts::default();
        for other in self.workers.values() {
            if other.rejected.is_some() || podstatus::is_terminal(other) {
                continue;
            }
            if let Ok(r) = pod_requests(&other.pod) {
                used.cpu_millis = used.cpu_millis.saturating_add(r.cpu_millis);
                used.memory_bytes = used.memory_bytes.saturating_add(r.memory_bytes);
            }
        }
        if let Err(Rejection { reason, message }) = admit(requests, used, allocatable) {
            if let Some(event) = reason.event() {
                self.event(EventType::Warning, name, None, event, &message);
            }
            w.rejected = Some((reason, format!("Pod was rejected: {message}")));
        }
    }
}
