//! eviction::ranking: which pod goes first (the kubelet's `rankMemoryPressure`,
//! `rankDiskPressureFunc`, `rankPIDPressure`), which pods are never evicted (critical ones),
//! and the message an evicted pod carries (`evictionMessage`).

use std::cmp::Ordering;
use std::time::Duration;

use super::threshold::{format_binary_si, Signal};

pub use crate::pod::priority::{is_critical, priority, SYSTEM_CRITICAL_PRIORITY};

/// One container's usage against its request, for the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerUsage {
    pub name: String,
    /// Memory working set.
    pub memory: u64,
    /// The memory request as written ("64Mi"), or "0".
    pub memory_request: String,
    pub memory_request_bytes: u64,
    /// Writable layer plus logs.
    pub disk: u64,
    pub disk_request: String,
    pub disk_request_bytes: u64,
}

/// A running pod the manager may evict, with what it uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodCandidate {
    pub uid: String,
    /// `namespace/name`.
    pub name: String,
    pub priority: i32,
    pub critical: bool,
    /// QoS class Guaranteed: never evicted for memory or disk while its usage stays within
    /// its requests (podvisor's rule; the kubelet evicts such pods last).
    pub guaranteed: bool,
    /// `terminationGracePeriodSeconds`.
    pub grace: Duration,
    /// Memory working set of the pod cgroup; `None` when unknown.
    pub memory: Option<u64>,
    pub memory_request: u64,
    /// Ephemeral storage: writable layers, logs, emptyDir volumes on disk.
    pub disk: Option<u64>,
    pub disk_request: u64,
    /// Inodes the same storage uses (measured only for the inode signals); no container can
    /// request inodes, so any use is above requests.
    pub inodes: Option<u64>,
    pub pids: Option<u64>,
    pub containers: Vec<ContainerUsage>,
}

/// `a` before `b` when true.
fn first_if(a: bool, b: bool) -> Ordering {
    b.cmp(&a)
}

fn above(usage: Option<u64>, request: u64) -> i128 {
    i128::from(usage.unwrap_or(0)) - i128::from(request)
}

fn exceeds(usage: Option<u64>, request: u64) -> bool {
    usage.is_some_and(|u| u > request)
}

/// The kubelet's order for `signal`, most evictable first:
/// - memory: usage above requests first, then lower priority, then more usage above requests;
/// - disk space: the same with ephemeral storage;
/// - inodes (`rankDiskPressureFunc` with `resourceInodes`): using any inode first (the inode
///   request is always 0), then lower priority, then more inodes. The kubelet's last key
///   subtracts the ephemeral-storage request (bytes) from the inode count, mixing units; here
///   it is the inode count alone;
/// - pids: lower priority, then more processes.
///
/// Pods without usage data count as using nothing.
pub fn compare(signal: Signal, a: &PodCandidate, b: &PodCandidate) -> Ordering {
    let prio = a.priority.cmp(&b.priority);
    match signal {
        Signal::MemoryAvailable => first_if(
            exceeds(a.memory, a.memory_request),
            exceeds(b.memory, b.memory_request),
        )
        .then(prio)
        .then_with(|| above(b.memory, b.memory_request).cmp(&above(a.memory, a.memory_request))),
        Signal::PidAvailable => prio.then_with(|| b.pids.unwrap_or(0).cmp(&a.pids.unwrap_or(0))),
        Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => {
            first_if(exceeds(a.inodes, 0), exceeds(b.inodes, 0))
                .then(prio)
                .then_with(|| b.inodes.unwrap_or(0).cmp(&a.inodes.unwrap_or(0)))
        }
        _ => first_if(
            exceeds(a.disk, a.disk_request),
            exceeds(b.disk, b.disk_request),
        )
        .then(prio)
        .then_with(|| above(b.disk, b.disk_request).cmp(&above(a.disk, a.disk_request))),
    }
}

/// Whether `p` may be evicted for `signal`: never a critical pod, nor a Guaranteed one whose
/// usage of the resource is within its requests.
pub fn evictable(signal: Signal, p: &PodCandidate) -> bool {
    if p.critical {
        return false;
    }
    let within = match signal {
        Signal::MemoryAvailable => !exceeds(p.memory, p.memory_request),
        Signal::PidAvailable => false,
        Signal::NodeFsInodesFree | Signal::ImageFsInodesFree => !exceeds(p.inodes, 0),
        _ => !exceeds(p.disk, p.disk_request),
    };
    !(p.guaranteed && within)
}

/// The evictable pods of `pods` in the kubelet's order for `signal` (names break ties, so
/// the order is reproducible).
pub fn rank<'a>(
    signal: Signal,
    pods: impl IntoIterator<Item = &'a PodCandidate>,
) -> Vec<&'a PodCandidate> {
    let mut ranked: Vec<&PodCandidate> =
        pods.into_iter().filter(|p| evictable(signal, p)).collect();
    ranked.sort_by(|a, b| compare(signal, a, b).then_with(|| a.name.cmp(&b.name)));
    ranked
}

/// The kubelet's victim for `signal`: the first evictable pod in its order (at most one pod
/// per pass). podvisor's manager chooses with [`super::relief::decide`], which keeps this
/// order among the pods that can relieve the pressure.
#[cfg(test)]
pub fn pick_victim(signal: Signal, pods: &[PodCandidate]) -> Option<&PodCandidate> {
    rank(signal, pods).first().copied()
}

/// The kubelet's eviction message: "The node was low on resource: memory. Threshold
/// quantity: 100Mi, available: 51200Ki. Container x was using 200Mi, request is 0, has larger
/// consumption of memory. " (the trailing space is the kubelet's).
pub fn eviction_message(
    signal: Signal,
    threshold: u64,
    available: u64,
    pod: &PodCandidate,
) -> String {
    let resource = signal.resource();
    let fmt_amount = |n: u64| match signal {
        Signal::MemoryAvailable | Signal::NodeFsAvailable | Signal::ImageFsAvailable => {
            format_binary_si(n)
        }
        _ => n.to_string(),
    };
    let mut m = format!(
        "The node was low on resource: {resource}. Threshold quantity: {}, available: {}. ",
        fmt_amount(threshold),
        fmt_amount(available)
    );
    for c in &pod.containers {
        let (usage, request, request_bytes) = match signal {
            Signal::MemoryAvailable => (c.memory, &c.memory_request, c.memory_request_bytes),
            Signal::NodeFsAvailable | Signal::ImageFsAvailable => {
                (c.disk, &c.disk_request, c.disk_request_bytes)
            }
            _ => continue,
        };
        if usage > request_bytes {
            m.push_str(&format!(
                "Container {} was using {}, request is {request}, has larger consumption of {resource}. ",
                c.name,
                format_binary_si(usage)
            ));
        }
    }
    m
}
