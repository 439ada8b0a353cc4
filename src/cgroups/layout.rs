//! layout: the relative cgroup paths of podvisor's tiers, pods and containers (the kubelet's
//! cgroupfs names): `/<parent>` for Guaranteed pods, `/<parent>/burstable` and
//! `/<parent>/besteffort` for the other QoS classes, `pod<uid>` below, and the container id
//! below that.

use crate::pod::qos::QosClass;

/// Name of the Burstable tier below the parent.
pub const BURSTABLE: &str = "burstable";
/// Name of the BestEffort tier below the parent.
pub const BEST_EFFORT: &str = "besteffort";

/// The cgroup holding the pods of `qos`: `/<parent>`, `/<parent>/burstable` or
/// `/<parent>/besteffort`.
pub fn qos_cgroup(parent: &str, qos: QosClass) -> String {
    let parent = parent.trim_matches('/');
    match qos {
        QosClass::Guaranteed => format!("/{parent}"),
        QosClass::Burstable => format!("/{parent}/{BURSTABLE}"),
        QosClass::BestEffort => format!("/{parent}/{BEST_EFFORT}"),
    }
}

/// The relative cgroup path of a pod: `<qos cgroup>/pod<uid>`.
pub fn pod_cgroup(parent: &str, qos: QosClass, pod_uid: &str) -> String {
    format!("{}/pod{}", qos_cgroup(parent, qos), pod_uid)
}

/// The relative cgroup path of a container: `<pod cgroup>/<container-id>`.
pub fn container_cgroup(parent: &str, qos: QosClass, pod_uid: &str, container_id: &str) -> String {
    format!("{}/{}", pod_cgroup(parent, qos, pod_uid), container_id)
}

/// The three places a pod's cgroup can be (its QoS class is not always known, e.g. after a
/// restart when only the uid is left).
pub fn pod_cgroup_candidates(parent: &str, pod_uid: &str) -> [String; 3] {
    [
        pod_cgroup(parent, QosClass::Guaranteed, pod_uid),
        pod_cgroup(parent, QosClass::Burstable, pod_uid),
        pod_cgroup(parent, QosClass::BestEffort, pod_uid),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_cgroupfs_layout() {
        assert_eq!(
            pod_cgroup("podvisor", QosClass::Guaranteed, "u1"),
            "/podvisor/podu1"
        );
        assert_eq!(
            container_cgroup("/edge/pv/", QosClass::Burstable, "u1", "c"),
            "/edge/pv/burstable/podu1/c"
        );
        assert_eq!(
            pod_cgroup("podvisor", QosClass::BestEffort, "u1"),
            "/podvisor/besteffort/podu1"
        );
        assert_eq!(
            pod_cgroup_candidates("p", "u"),
            ["/p/podu", "/p/burstable/podu", "/p/besteffort/podu"]
        );
    }
}
