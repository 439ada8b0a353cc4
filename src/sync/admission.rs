//! admission: the kubelet's resource-fit check when a pod worker is created. A pod whose
//! effective requests do not fit next to the pods already admitted is not started: it is
//! Failed with reason `OutOfcpu` / `OutOfmemory` / `OutOfephemeral-storage` (requests
//! against the root dir's filesystem) / `OutOfhugepages-<size>` and a Warning event, until its
//! manifest
//! changes (a new uid, admitted afresh). A pod whose hostPort another admitted pod uses is
//! refused the same way (reason `NodePorts`, the message naming the other pod). Before it,
//! the eviction manager's admission refuses pods under node pressure (`sync::eviction`).
//!
//! The decision is [`admit_pod`], a pure function of the pod, the pods already admitted and
//! the node's resources (the kubelet's admit handlers hold no state either); the loop records
//! the refusal.

use super::{podstatus, PodWorker, SyncConfig, SyncLoop};
use std::collections::BTreeMap;

use crate::cgroups::allocatable::{
    admit, admit_ephemeral_storage, admit_hugepages, read_hugepages_capacity, Rejection,
};
use crate::network::hostport;
use crate::pod::netargs::host_ports;
use crate::pod::resources::{
    pod_ephemeral_storage_requests, pod_hugepages_requests, pod_requests, Amounts,
};
use crate::reason::PodReason;
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
        // The pods counted as using node resources: admitted and not terminal.
        let admitted: Vec<&PodWorker> = self
            .workers
            .values()
            .filter(|o| o.rejected.is_none() && !podstatus::is_terminal(o))
            .collect();
        if let Err(Rejection { reason, message }) = admit_pod(&self.cfg, name, w, &admitted) {
            if let Some(event) = reason.event() {
                self.event(EventType::Warning, name, None, event, &message);
            }
            w.rejected = Some((reason, format!("Pod was rejected: {message}")));
        }
    }
}

/// The kubelet's resource-fit and NodePorts admission of pod `w` (named `name` in logs) next
/// to the `admitted` pods, against the node's resources in `cfg`: a pure decision (huge page
/// capacity is read from `cfg.hugepages_dir` when the pod asks for some).
pub(super) fn admit_pod(
    cfg: &SyncConfig,
    name: &str,
    w: &PodWorker,
    admitted: &[&PodWorker],
) -> Result<(), Rejection> {
    fit(cfg, name, w, admitted)
        .and_then(|()| fit_ephemeral_storage(cfg, w, admitted))
        .and_then(|()| fit_hugepages(cfg, name, w, admitted))
        .and_then(|()| fit_host_ports(w, admitted))
}

/// cpu and memory against the node allocatable.
fn fit(
    cfg: &SyncConfig,
    name: &str,
    w: &PodWorker,
    admitted: &[&PodWorker],
) -> Result<(), Rejection> {
    let Some(allocatable) = cfg.allocatable else {
        return Ok(());
    };
    let requests = match pod_requests(&w.pod) {
        Ok(r) => r,
        Err(e) => {
            // The spec builder reports the same quantity error when a container starts.
            log::warn!("{name}: admission: {e}");
            return Ok(());
        }
    };
    let mut used = Amounts::default();
    for other in admitted {
        if let Ok(r) = pod_requests(&other.pod) {
            used.cpu_millis = used.cpu_millis.saturating_add(r.cpu_millis);
            used.memory_bytes = used.memory_bytes.saturating_add(r.memory_bytes);
        }
    }
    admit(requests, used, allocatable)
}

/// `ephemeral-storage` requests against the root dir's filesystem (limits count as requests
/// when no request is given).
fn fit_ephemeral_storage(
    cfg: &SyncConfig,
    w: &PodWorker,
    admitted: &[&PodWorker],
) -> Result<(), Rejection> {
    let Some(allocatable) = cfg.allocatable_ephemeral_storage else {
        return Ok(());
    };
    let request = pod_ephemeral_storage_requests(&w.pod)
        .ok()
        .flatten()
        .map_or(0, |a| a.bytes);
    let used = admitted
        .iter()
        .filter_map(|o| pod_ephemeral_storage_requests(&o.pod).ok().flatten())
        .fold(0u64, |acc, r| acc.saturating_add(r.bytes));
    admit_ephemeral_storage(request, used, allocatable)
}

/// The kubelet's NodePorts check: no hostPort (protocol, port, host IP) of the pod may be one
/// another admitted pod uses; the refusal names that pod.
fn fit_host_ports(w: &PodWorker, admitted: &[&PodWorker]) -> Result<(), Rejection> {
    let ports = host_ports(&w.pod);
    if ports.is_empty() {
        return Ok(());
    }
    let others = admitted
        .iter()
        .filter(|o| o.uid != w.uid)
        .map(|o| (o.spec.full_name.as_str(), host_ports(&o.pod)));
    match hostport::find_conflict(&ports, others) {
        None => Ok(()),
        Some(c) => Err(Rejection {
            reason: PodReason::NodePorts,
            message: c.message(),
        }),
    }
}

/// `hugepages-<size>` against the node's huge pages, read when a pod asks for some.
fn fit_hugepages(
    cfg: &SyncConfig,
    name: &str,
    w: &PodWorker,
    admitted: &[&PodWorker],
) -> Result<(), Rejection> {
    let Some(dir) = &cfg.hugepages_dir else {
        return Ok(());
    };
    let requests = match pod_hugepages_requests(&w.pod) {
        Ok(r) if !r.is_empty() => r,
        Ok(_) => return Ok(()),
        Err(e) => {
            log::warn!("{name}: admission: {e}");
            return Ok(());
        }
    };
    let capacity = match read_hugepages_capacity(dir) {
        Ok(c) => c,
        Err(e) => {
            log::warn!("{name}: admission: huge page capacity unknown, not checked: {e}");
            return Ok(());
        }
    };
    let mut used: BTreeMap<String, u64> = BTreeMap::new();
    for other in admitted {
        for (k, v) in pod_hugepages_requests(&other.pod).unwrap_or_default() {
            let u = used.entry(k).or_default();
            *u = u.saturating_add(v);
        }
    }
    admit_hugepages(&requests, &used, &capacity)
}
