//! layout: the relative cgroup paths of podvisor's tiers, pods and containers (the kubelet's
//! cgroupfs names): `/<parent>` for Guaranteed pods, `/<parent>/burstable` and
//! `/<parent>/besteffort` for the other QoS classes, `pod<uid>` below, and the container id
//! below that. With `cgroupDriver: systemd` ([`CgroupDriver::Systemd`]) the same tree is made
//! of systemd units instead (the kubelet's systemd names, see [`super::systemd`]):
//! `/podvisor.slice/podvisor-burstable.slice/podvisor-burstable-pod<uid>.slice/podvisor-<id>.scope`.

use crate::pod::qos::QosClass;

use super::systemd;

/// The kubelet's `cgroupDriver`: who creates podvisor's cgroups.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CgroupDriver {
    /// podvisor writes the cgroup tree itself below `/<cgroupRoot>` (the default).
    #[default]
    Cgroupfs,
    /// Pods are transient slice units and containers transient scope units of systemd,
    /// created through its D-Bus API below the slice `cgroupRoot`.
    Systemd,
}

impl CgroupDriver {
    /// The configuration's spelling (`cgroupDriver`).
    pub fn parse(value: &str) -> Option<CgroupDriver> {
        match value {
            "cgroupfs" => Some(CgroupDriver::Cgroupfs),
            "systemd" => Some(CgroupDriver::Systemd),
            _ => None,
        }
    }

    /// The cgroup holding the pods of `qos` (relative to the cgroup root).
    pub fn qos_cgroup(self, parent: &str, qos: QosClass) -> String {
        match self {
            CgroupDriver::Cgroupfs => qos_cgroup(parent, qos),
            CgroupDriver::Systemd => systemd::expand_slice(&systemd::qos_slice(parent, qos)),
        }
    }

    /// The relative cgroup path of a pod.
    pub fn pod_cgroup(self, parent: &str, qos: QosClass, pod_uid: &str) -> String {
        match self {
            CgroupDriver::Cgroupfs => pod_cgroup(parent, qos, pod_uid),
            CgroupDriver::Systemd => {
                systemd::expand_slice(&systemd::pod_slice(parent, qos, pod_uid))
            }
        }
    }

    /// The relative cgroup path of a container (where its processes and cgroup files are).
    pub fn container_cgroup(
        self,
        parent: &str,
        qos: QosClass,
        pod_uid: &str,
        container_id: &str,
    ) -> String {
        match self {
            CgroupDriver::Cgroupfs => container_cgroup(parent, qos, pod_uid, container_id),
            CgroupDriver::Systemd => format!(
                "{}/{}",
                self.pod_cgroup(parent, qos, pod_uid),
                systemd::scope_name(container_id)
            ),
        }
    }

    /// The container's OCI `linux.cgroupsPath`: the cgroup path for cgroupfs, runc's
    /// `<slice>:<prefix>:<name>` for systemd (libcontainer's systemd manager then starts
    /// `podvisor-<id>.scope` in the pod's slice).
    pub fn cgroups_path(
        self,
        parent: &str,
        qos: QosClass,
        pod_uid: &str,
        container_id: &str,
    ) -> String {
        match self {
            CgroupDriver::Cgroupfs => container_cgroup(parent, qos, pod_uid, container_id),
            CgroupDriver::Systemd => format!(
                "{}:{}:{container_id}",
                systemd::pod_slice(parent, qos, pod_uid),
                systemd::SCOPE_PREFIX
            ),
        }
    }

    /// The three places a pod's cgroup can be.
    pub fn pod_cgroup_candidates(self, parent: &str, pod_uid: &str) -> [String; 3] {
        [
            QosClass::Guaranteed,
            QosClass::Burstable,
            QosClass::BestEffort,
        ]
        .map(|qos| self.pod_cgroup(parent, qos, pod_uid))
    }
}

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

    /// The kubelet's systemd names (`cgroup_manager_linux.go`: `ToSystemd`, `ExpandSlice`,
    /// `escapeSystemdCgroupName`) with `podvisor` for `kubepods`, and runc's scope names.
    #[test]
    fn kubelet_systemd_layout() {
        let d = CgroupDriver::Systemd;
        let uid = "8a7c-41b2";
        let cases: [(QosClass, &str); 3] = [
            (
                QosClass::Guaranteed,
                "/podvisor.slice/podvisor-pod8a7c_41b2.slice",
            ),
            (
                QosClass::Burstable,
                "/podvisor.slice/podvisor-burstable.slice/podvisor-burstable-pod8a7c_41b2.slice",
            ),
            (
                QosClass::BestEffort,
                "/podvisor.slice/podvisor-besteffort.slice/podvisor-besteffort-pod8a7c_41b2.slice",
            ),
        ];
        for (qos, want) in cases {
            assert_eq!(d.pod_cgroup("podvisor.slice", qos, uid), want, "{qos:?}");
            assert_eq!(
                d.container_cgroup("podvisor.slice", qos, uid, "c1"),
                format!("{want}/podvisor-c1.scope")
            );
        }
        assert_eq!(
            d.qos_cgroup("podvisor.slice", QosClass::Guaranteed),
            "/podvisor.slice"
        );
        assert_eq!(
            d.qos_cgroup("edge-pv.slice", QosClass::Burstable),
            "/edge.slice/edge-pv.slice/edge-pv-burstable.slice"
        );
        assert_eq!(
            d.cgroups_path("podvisor.slice", QosClass::Burstable, uid, "c1"),
            "podvisor-burstable-pod8a7c_41b2.slice:podvisor:c1"
        );
        assert_eq!(
            CgroupDriver::Cgroupfs.cgroups_path("podvisor", QosClass::Burstable, "u", "c"),
            "/podvisor/burstable/podu/c"
        );
        assert_eq!(
            d.pod_cgroup_candidates("podvisor.slice", "u")[2],
            "/podvisor.slice/podvisor-besteffort.slice/podvisor-besteffort-podu.slice"
        );
        assert_eq!(CgroupDriver::parse("systemd"), Some(d));
        assert_eq!(CgroupDriver::parse("Systemd"), None);
    }
}
