//! The pod sandbox verbs of [`LinuxRuntime`]: create (the pod cgroup, the user namespace
//! slot, the namespaces through a helper, the pod init's placement, the cgroup record), remove,
//! list (tearing down incomplete and dead ones), the projected volumes' refresh, the pods with
//! data on disk and a pod's pinned network namespace. The sandbox's files and namespaces
//! themselves are [`crate::runtime::sandbox`]'s; here `create`, `remove` and `list` do the
//! work on them.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;

use super::pod_cgroups::{PodCgroupRecord, POD_CGROUP_RECORD};
use super::{HelperMode, LinuxRuntime};
use crate::cgroups::resources::PodCgroupConfig;
use crate::fsutil;
use crate::runtime::sandbox::{self, SandboxPaths};
use crate::runtime::{ContainerState, Runtime, RuntimeError, SandboxInfo};
pub(super) use create::{create, refresh_projected_volumes, CreateOptions, ExecHelper};
pub(super) use list::{list_data, scan};
pub(super) use remove::{remove, remove_runtime};

mod create;
mod list;
mod remove;

impl LinuxRuntime {
    /// [`Runtime::run_pod_sandbox`].
    pub(super) fn create_sandbox(&self, pod: &Pod) -> Result<SandboxInfo, RuntimeError> {
        crate::tp!("sb.start");
        let name = pod.metadata.name.clone().unwrap_or_default();
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        sandbox::validate_uid(&uid).map_err(|source| RuntimeError::Sandbox {
            pod: name.clone(),
            source: Box::new(source),
        })?;
        let _busy = self.busy_sandboxes.enter(&uid);
        let cg = PodCgroupConfig::for_pod(pod, self.cfg.pod_pids_limit).map_err(|source| {
            RuntimeError::PodResources {
                pod: name.clone(),
                source,
            }
        })?;
        // The pod's cgroup before the warm-up: a cgroup mkdir waits for the cgroup lock, which
        // the warm-up's move holds for the whole grace period it waits for (~7 ms measured
        // here after idle: the mkdir then took 6 ms instead of 0.2). The namespaces, the
        // spec and the container's creation up to its placement then run inside that wait.
        let pod_cgroup = {
            let cgroup_path =
                self.cfg
                    .cgroup_driver
                    .pod_cgroup(&self.cfg.cgroup_parent, cg.qos, &uid);
            let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
            let existed = self.cfg.cgroup_root.dir("cpu", &cgroup_path).is_dir();
            let made = self.create_pod_cgroup(&uid, &cg)?;
            crate::tp!("sb.cgroup");
            (made, existed)
        };
        // The pod's first container is placed in its cgroup in a few ms.
        self.warmer.warm();
        let user_ns_base = if pod.spec.as_ref().and_then(|s| s.host_users) == Some(false) {
            let mapping = self
                .userns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_create(&uid)
                .map_err(|source| RuntimeError::Sandbox {
                    pod: name.clone(),
                    source: Box::new(source.into()),
                })?;
            Some(mapping.base())
        } else {
            None
        };
        let exec_helper = ExecHelper(&self.cfg.shim_binary);
        let helper: &dyn sandbox::NamespaceHelper = match self.cfg.helpers {
            HelperMode::Spawner => &self.spawner,
            HelperMode::Exec => &exec_helper,
        };
        let created = create(
            &self.cfg.sandbox_dirs(),
            pod,
            &CreateOptions {
                node: &self.cfg.node,
                dns: &self.cfg.dns,
                helper,
                user_ns_base,
                network: Some(&self.network),
                join_network: self.network_on,
            },
        );
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        let (pod_cgroup, existed) = pod_cgroup;
        let info = match created {
            Ok(info) => {
                crate::tp!("sb.created");
                info
            }
            Err(source) => {
                // A failed sandbox leaves no pod cgroup it made (nothing else would remove
                // it if the pod went away).
                if !existed {
                    if let Err(e) = self.remove_pod_cgroup(&uid) {
                        log::warn!("pod {name}: {e}");
                    }
                }
                return Err(RuntimeError::Sandbox {
                    pod: name.clone(),
                    source: Box::new(source),
                });
            }
        };
        // The shared PID namespace's init lives in the pod cgroup, as the pause container.
        let sb_paths = SandboxPaths::new(&self.cfg.sandbox_dirs(), &uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: name.clone(),
                source: Box::new(source),
            }
        })?;
        if let Some(init) = sandbox::load_pod_init(&sb_paths).filter(|i| i.is_alive()) {
            self.cfg
                .cgroup_root
                .add_process(&format!("{pod_cgroup}/pod-init"), init.pid)?;
        }
        let record = PodCgroupRecord {
            qos: cg.qos,
            cpu_request_millis: cg.requests.cpu_millis,
        };
        let path = self.cfg.pods_dir().join(&uid).join(POD_CGROUP_RECORD);
        fsutil::write_json_atomic_volatile(&path, &record).map_err(|source| RuntimeError::Io {
            what: "write",
            path: path.clone(),
            source,
        })?;
        crate::tp!("sb.cgrec");
        self.update_burstable_tier()?;
        crate::tp!("sb.burst");
        Ok(info)
    }

    /// [`Runtime::remove_pod_sandbox`].
    pub(super) fn remove_sandbox(&self, pod_uid: &str) -> Result<(), RuntimeError> {
        let _busy = self.busy_sandboxes.enter(pod_uid);
        for c in self.list_containers()? {
            if c.meta.pod_uid == pod_uid && !matches!(c.state, ContainerState::Exited(_)) {
                return Err(RuntimeError::Start {
                    id: c.meta.id,
                    message: format!("still running; stop it before removing pod {pod_uid}"),
                });
            }
        }
        // The pod init (shareProcessNamespace) lives in the pod cgroup: it goes first.
        sandbox::stop_pod_init(&self.cfg.sandbox_dirs(), pod_uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: pod_uid.to_string(),
                source: Box::new(source),
            }
        })?;
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        // All three QoS places are probed: the pod's class is not needed to find it.
        self.remove_pod_cgroup(pod_uid)?;
        remove(&self.cfg.sandbox_dirs(), pod_uid, Some(&self.network)).map_err(|source| {
            RuntimeError::Sandbox {
                pod: pod_uid.to_string(),
                source: Box::new(source),
            }
        })?;
        // The pod's files are gone: its user namespace range may go to another pod.
        self.userns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release(pod_uid);
        self.update_burstable_tier()?;
        Ok(())
    }

    /// [`Runtime::list_pod_sandboxes`].
    pub(super) fn list_sandboxes(&self) -> Result<Vec<SandboxInfo>, RuntimeError> {
        let scan = scan(&self.cfg.sandbox_dirs()).map_err(|source| RuntimeError::Sandbox {
            pod: String::new(),
            source: Box::new(source),
        })?;
        // A sandbox whose creation or removal was interrupted (daemon killed) has no record,
        // so it is listed as nothing, but its namespaces and /dev/shm may still be mounted
        // and its cgroups still there: nobody would ever remove them.
        for uid in scan.partial {
            if self.busy_sandboxes.contains(&uid) {
                continue;
            }
            log::info!(
                "pod {uid}: tearing down an incomplete sandbox (interrupted creation or removal)"
            );
            if let Err(e) = self.remove_partial_sandbox(&uid) {
                log::warn!("pod {uid}: {e}");
            }
        }
        // A sandbox that is not live is never listed (its pod gets a new one). It is torn
        // down once none of its containers lives; until then the owner stops them first.
        for (uid, why) in scan.dead {
            if self.busy_sandboxes.contains(&uid) {
                continue;
            }
            if self.pod_has_live_container(&uid) {
                log::warn!("pod {uid}: sandbox is not live ({why}) but containers still run in it");
                continue;
            }
            log::info!("pod {uid}: tearing down a sandbox that is not live ({why})");
            if let Err(e) = self.remove_partial_sandbox(&uid) {
                log::warn!("pod {uid}: {e}");
            }
        }
        let live = self.check_networks(scan.live);
        self.collect_network_attachments(&live);
        Ok(live)
    }

    /// [`Runtime::update_pod_volumes`].
    pub(super) fn refresh_volumes(&self, pod: &Pod) -> Result<(), RuntimeError> {
        refresh_projected_volumes(&self.cfg.sandbox_dirs(), pod, &self.cfg.node).map_err(|source| {
            RuntimeError::Sandbox {
                pod: pod.metadata.name.clone().unwrap_or_default(),
                source: Box::new(source),
            }
        })
    }

    /// [`Runtime::list_pod_data`].
    pub(super) fn list_data(&self) -> Result<Vec<String>, RuntimeError> {
        list_data(&self.cfg.sandbox_dirs()).map_err(|source| RuntimeError::Sandbox {
            pod: String::new(),
            source: Box::new(source),
        })
    }

    /// [`Runtime::pod_network_namespace`].
    pub(super) fn network_namespace(&self, pod_uid: &str) -> Option<PathBuf> {
        let net = sandbox::SandboxPaths::new(&self.cfg.sandbox_dirs(), pod_uid)
            .ok()?
            .ns("net");
        // Only pods with their own network namespace have it pinned.
        net.exists().then_some(net)
    }

    /// Finishes tearing down a sandbox that has no record, or one that is not live, keeping
    /// the pod's data. No container runs in it: a container starts only in a complete sandbox,
    /// a removal deletes the record only once every container of the pod exited, and a dead
    /// sandbox is only torn down once no container of its pod lives.
    pub(super) fn remove_partial_sandbox(&self, uid: &str) -> Result<(), RuntimeError> {
        let _busy = self.busy_sandboxes.enter(uid);
        sandbox::stop_pod_init(&self.cfg.sandbox_dirs(), uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: uid.to_string(),
                source: Box::new(source),
            }
        })?;
        let _guard = self.cgroup_lock.lock().unwrap_or_else(|p| p.into_inner());
        self.remove_pod_cgroup(uid)?;
        remove_runtime(&self.cfg.sandbox_dirs(), uid, Some(&self.network)).map_err(|source| {
            RuntimeError::Sandbox {
                pod: uid.to_string(),
                source: Box::new(source),
            }
        })?;
        self.update_burstable_tier()
    }
}
