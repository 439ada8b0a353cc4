//! eviction::ephemeral: the kubelet's local storage limits (`localStorageEviction` in
//! `eviction_manager.go`), as a pure decision over what each pod uses.
//!
//! At every housekeeping pass, before any node threshold, each running pod is checked, in
//! the kubelet's order, and evicted on the first limit it exceeds:
//! 1. an emptyDir volume on disk above its `sizeLimit` (`emptyDirLimitEviction`; a
//!    `medium: Memory` volume is a tmpfs of that size and cannot exceed it);
//! 2. the pod's ephemeral storage (writable layers, logs, emptyDir volumes on disk) above the
//!    sum of its containers' `ephemeral-storage` limits (`podEphemeralStorageLimitEviction`,
//!    the `PodLimits` rule: set as soon as one container sets a limit);
//! 3. an app container's writable layer plus logs above its own limit
//!    (`containerEphemeralStorageLimitEviction`; a limit of 0 is no limit there).
//!
//! Every such eviction has no grace period and the kubelet's message; critical pods are
//! never evicted (the kubelet's `evictPod` refuses them too).

/// A limit: bytes, and the quantity as apimachinery's `String()` prints it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub bytes: u64,
    pub text: String,
}

/// A running container: its writable layer plus its logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerStorage {
    pub name: String,
    /// `resources.limits.ephemeral-storage` (app containers only, as the kubelet).
    pub limit: Option<Limit>,
    /// The writable layer (overlay upperdir) plus the instance's log files, in bytes.
    pub used: u64,
}

/// An emptyDir volume on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeStorage {
    pub name: String,
    pub size_limit: Option<Limit>,
    pub used: u64,
}

/// A running pod's ephemeral storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodStorage {
    pub uid: String,
    /// `namespace/name`.
    pub name: String,
    pub critical: bool,
    /// The sum of the containers' limits (`None`: no container sets one).
    pub pod_limit: Option<Limit>,
    pub containers: Vec<ContainerStorage>,
    pub volumes: Vec<VolumeStorage>,
}

impl PodStorage {
    /// The pod's ephemeral storage: containers (writable layers, logs) and emptyDir volumes
    /// on disk.
    pub fn used(&self) -> u64 {
        self.containers
            .iter()
            .map(|c| c.used)
            .chain(self.volumes.iter().map(|v| v.used))
            .fold(0, u64::saturating_add)
    }
}

/// Which limit a pod exceeded (the kubelet's eviction metric's signal names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// `ephemeralpodfs.limit` via an emptyDir `sizeLimit`.
    EmptyDir,
    /// `ephemeralpodfs.limit`.
    Pod,
    /// `ephemeralcontainerfs.limit`.
    Container,
}

/// The limit a pod exceeds first, and the kubelet's message, or `None`.
pub fn limit_exceeded(p: &PodStorage) -> Option<(LimitKind, String)> {
    for v in &p.volumes {
        if let Some(l) = v.size_limit.as_ref().filter(|l| l.bytes > 0) {
            if v.used > l.bytes {
                return Some((
                    LimitKind::EmptyDir,
                    format!(
                        "Usage of EmptyDir volume {:?} exceeds the limit {:?}. ",
                        v.name, l.text
                    ),
                ));
            }
        }
    }
    if let Some(l) = &p.pod_limit {
        if p.used() > l.bytes {
            return Some((
                LimitKind::Pod,
                format!(
                    "Pod ephemeral local storage usage exceeds the total limit of containers {}. ",
                    l.text
                ),
            ));
        }
    }
    for c in &p.containers {
        if let Some(l) = c.limit.as_ref().filter(|l| l.bytes > 0) {
            if c.used > l.bytes {
                return Some((
                    LimitKind::Container,
                    format!(
                        "Container {} exceeded its local ephemeral storage limit {:?}. ",
                        c.name, l.text
                    ),
                ));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(bytes: u64, text: &str) -> Option<Limit> {
        Some(Limit {
            bytes,
            text: text.into(),
        })
    }

    fn pod(
        pod_limit: Option<Limit>,
        containers: &[(&str, Option<Limit>, u64)],
        volumes: &[(&str, Option<Limit>, u64)],
    ) -> PodStorage {
        PodStorage {
            uid: "u".into(),
            name: "default/p".into(),
            critical: false,
            pod_limit,
            containers: containers
                .iter()
                .map(|(n, l, u)| ContainerStorage {
                    name: n.to_string(),
                    limit: l.clone(),
                    used: *u,
                })
                .collect(),
            volumes: volumes
                .iter()
                .map(|(n, l, u)| VolumeStorage {
                    name: n.to_string(),
                    size_limit: l.clone(),
                    used: *u,
                })
                .collect(),
        }
    }

    const MI: u64 = 1 << 20;

    #[test]
    fn limits_table() {
        type Case = (&'static str, PodStorage, Option<(LimitKind, &'static str)>);
        let cases: Vec<Case> = vec![
            ("nothing set", pod(None, &[("a", None, 900 * MI)], &[("v", None, 900 * MI)]), None),
            (
                "container within its limit",
                pod(limit(10 * MI, "10Mi"), &[("a", limit(10 * MI, "10Mi"), 10 * MI)], &[]),
                None,
            ),
            (
                "container above its limit (the pod limit is the same sum: the pod's message)",
                pod(limit(10 * MI, "10Mi"), &[("a", limit(10 * MI, "10Mi"), 10 * MI + 1)], &[]),
                Some((
                    LimitKind::Pod,
                    "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ",
                )),
            ),
            (
                "one container above its own limit, the pod within the sum",
                pod(
                    limit(30 * MI, "30Mi"),
                    &[("a", limit(10 * MI, "10Mi"), 11 * MI), ("b", limit(20 * MI, "20Mi"), MI)],
                    &[],
                ),
                Some((
                    LimitKind::Container,
                    "Container a exceeded its local ephemeral storage limit \"10Mi\". ",
                )),
            ),
            (
                "emptyDir usage counts toward the pod limit",
                pod(
                    limit(10 * MI, "10Mi"),
                    &[("a", limit(10 * MI, "10Mi"), 2 * MI)],
                    &[("v", None, 9 * MI)],
                ),
                Some((
                    LimitKind::Pod,
                    "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ",
                )),
            ),
            (
                "emptyDir above its sizeLimit comes first",
                pod(
                    limit(MI, "1Mi"),
                    &[("a", limit(MI, "1Mi"), 5 * MI)],
                    &[("cache", limit(4 * MI, "4Mi"), 4 * MI + 4096)],
                ),
                Some((
                    LimitKind::EmptyDir,
                    "Usage of EmptyDir volume \"cache\" exceeds the limit \"4Mi\". ",
                )),
            ),
            (
                "emptyDir at its sizeLimit exactly",
                pod(None, &[("a", None, MI)], &[("cache", limit(4 * MI, "4Mi"), 4 * MI)]),
                None,
            ),
            (
                "a zero container limit is no container limit, but the pod limit of 0 holds",
                pod(limit(0, "0"), &[("a", limit(0, "0"), 1)], &[]),
                Some((
                    LimitKind::Pod,
                    "Pod ephemeral local storage usage exceeds the total limit of containers 0. ",
                )),
            ),
            (
                "a zero sizeLimit is no limit",
                pod(None, &[], &[("v", limit(0, "0"), 5 * MI)]),
                None,
            ),
        ];
        for (what, p, want) in cases {
            let got = limit_exceeded(&p);
            assert_eq!(got.as_ref().map(|(k, m)| (*k, m.as_str())), want, "{what}");
        }
    }

    #[test]
    fn usage_is_containers_and_volumes() {
        let p = pod(None, &[("a", None, 3), ("b", None, 4)], &[("v", None, 5)]);
        assert_eq!(p.used(), 12);
    }
}
