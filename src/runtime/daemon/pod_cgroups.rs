//! Pod cgroups: the record of what each pod's cgroup was created with (`cgroup.json` in the
//! pod directory) and the Burstable tier's CPU weight summed from those records.

use super::super::RuntimeError;
use super::LinuxRuntime;
use crate::cgroups;
use std::fs;

/// File in a pod directory recording what its cgroup was created with.
pub(super) const POD_CGROUP_RECORD: &str = "cgroup.json";

/// What a pod's cgroup was created with: the QoS class (its place) and the cpu request that
/// the Burstable tier's weight sums.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct PodCgroupRecord {
    pub(super) qos: crate::pod::qos::QosClass,
    pub(super) cpu_request_millis: u64,
}

impl LinuxRuntime {
    /// Creates the pod's cgroup with `cg`'s values: podvisor's own tree (cgroupfs) or the
    /// pod's slice through systemd; returns its cgroup path below the cgroup root. Called
    /// with `cgroup_lock` held.
    pub(super) fn create_pod_cgroup(
        &self,
        uid: &str,
        cg: &cgroups::resources::PodCgroupConfig,
    ) -> Result<String, RuntimeError> {
        Ok(match &self.systemd_units {
            None => self
                .cfg
                .cgroup_root
                .create_pod(&self.cfg.cgroup_parent, uid, cg)?,
            Some(units) => {
                cgroups::systemd::create_pod(units.as_ref(), &self.cfg.cgroup_parent, uid, cg)
                    .map_err(cgroups::CgroupError::from)?
            }
        })
    }

    /// Removes the pod's cgroup wherever it is. Called with `cgroup_lock` held.
    pub(super) fn remove_pod_cgroup(&self, uid: &str) -> Result<(), RuntimeError> {
        match &self.systemd_units {
            None => {
                self.cfg
                    .cgroup_root
                    .remove_pod(&self.cfg.cgroup_parent, uid)?;
            }
            Some(units) => {
                cgroups::systemd::remove_pod(units.as_ref(), &self.cfg.cgroup_parent, uid)
                    .map_err(cgroups::CgroupError::from)?;
            }
        }
        Ok(())
    }

    /// Sets the Burstable tier's CPU weight from the cpu requests of the Burstable pods on
    /// disk. Called with `cgroup_lock` held; no-op while the tier does not exist.
    pub(super) fn update_burstable_tier(&self) -> Result<(), RuntimeError> {
        let parent = &self.cfg.cgroup_parent;
        let tier = self
            .cfg
            .cgroup_driver
            .qos_cgroup(parent, crate::pod::qos::QosClass::Burstable);
        // (systemd: the slice's cgroup may not be realized yet; a slice that is not loaded
        // is skipped by `set_burstable_cpu`.)
        if self.systemd_units.is_none() && !self.cfg.cgroup_root.dir("cpu", &tier).is_dir() {
            return Ok(());
        }
        let mut total: u64 = 0;
        if let Ok(entries) = fs::read_dir(self.cfg.pods_dir()) {
            for e in entries.flatten() {
                let path = e.path().join(POD_CGROUP_RECORD);
                let Ok(data) = fs::read(&path) else { continue };
                match serde_json::from_slice::<PodCgroupRecord>(&data) {
                    Ok(r) if r.qos == crate::pod::qos::QosClass::Burstable => {
                        total = total.saturating_add(r.cpu_request_millis);
                    }
                    Ok(_) => {}
                    Err(e) => log::warn!("{}: {e}", path.display()),
                }
            }
        }
        match &self.systemd_units {
            None => self.cfg.cgroup_root.set_burstable_cpu(parent, total)?,
            Some(units) => cgroups::systemd::set_burstable_cpu(units.as_ref(), parent, total)
                .map_err(cgroups::CgroupError::from)?,
        }
        Ok(())
    }
}
