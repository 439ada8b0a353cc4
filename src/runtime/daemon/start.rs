//! Starting a container: its directories, its image and the image lease, its sandbox, its
//! spec and monitor config (`prepare`); then the monitor ([`super::launch`]).

use super::super::container;
use super::super::container::ContainerPaths;
use super::super::protocol::ShimConfig;
use super::super::sandbox;
use super::super::sandbox::SandboxPaths;
use super::super::spec;
use super::super::spec::SandboxMounts;
use super::super::spec::SpecRequest;
use super::super::ContainerInfo;
use super::super::ContainerMeta;
use super::super::ContainerRequest;
use super::super::RuntimeError;
use super::list::remove_container_dirs;
use super::LinuxRuntime;
use crate::cgroups;
use crate::fsutil;
use crate::images::ImageRecord;
use crate::runtime::spec::UserRequest;
use crate::security;
use crate::security::apparmor;
use crate::security::apparmor::AppArmorHost;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

/// A container's image as the start needs it: the stored image, its config and its layers.
pub(super) struct ResolvedImage {
    image: ImageRecord,
    config: oci_spec::image::ImageConfiguration,
    layers_dir: PathBuf,
    /// Layer directories relative to `layers_dir`, topmost first (overlay's lowerdir order).
    lower: Vec<String>,
}

impl LinuxRuntime {
    /// [`crate::runtime::Runtime::start_container`]: the directories, the image and its lease, the
    /// spec and the monitor's config, then the monitor and its start report.
    pub(super) fn start(&self, req: &ContainerRequest<'_>) -> Result<ContainerInfo, RuntimeError> {
        crate::tp!("st.start");
        let uid = req.pod.metadata.uid.clone().unwrap_or_default();
        sandbox::validate_uid(&uid).map_err(|source| RuntimeError::Sandbox {
            pod: req.pod.metadata.name.clone().unwrap_or_default(),
            source: Box::new(source),
        })?;
        self.warmer.warm();
        let id = new_container_id(&uid, &req.container.name, req.restart_count);
        let paths = self.container_paths(&id)?;
        // Until its start is reported the container is incomplete: listings leave it alone.
        let _busy = self.busy_containers.enter(&id);
        self.make_container_dirs(req, &paths)?;
        crate::tp!("st.dirs");
        let prepared = self.resolve_image(req).and_then(|image| {
            let (meta, _) = self.prepare(req, &id, &paths, &image, false)?;
            crate::tp!("st.prepared");
            self.add_lease(&id, &image)?;
            Ok(meta)
        });
        let meta = match prepared {
            Ok(m) => m,
            Err(e) => {
                let _ = self.images.remove_lease(&id);
                let _ = remove_container_dirs(&paths);
                return Err(e);
            }
        };
        crate::tp!("st.leased");
        let r = self.spawn_monitor(&meta, &paths);
        crate::tp!("st.reported");
        r
    }

    /// Makes the container's two directories, the record directory first: a runtime directory
    /// without one is an interrupted removal, removed at the next start. Nothing is left when
    /// it fails.
    pub(super) fn make_container_dirs(
        &self,
        req: &ContainerRequest<'_>,
        paths: &ContainerPaths,
    ) -> Result<(), RuntimeError> {
        // A hostUsers: false container's root must reach its rootfs mount point (see `new`).
        let run_mode = if req.pod.spec.as_ref().and_then(|s| s.host_users) == Some(false) {
            0o711
        } else {
            0o700
        };
        for (dir, mode) in [(&paths.record, 0o700), (&paths.dir, run_mode)] {
            let made = fs::DirBuilder::new()
                .mode(mode)
                .create(dir)
                .and_then(|()| fs::set_permissions(dir, fs::Permissions::from_mode(mode)));
            if let Err(source) = made {
                let _ = remove_container_dirs(paths);
                return Err(RuntimeError::Io {
                    what: "create",
                    path: dir.clone(),
                    source,
                });
            }
        }
        Ok(())
    }

    /// The container's lease on its image: image GC leaves the image alone while it exists.
    pub(super) fn add_lease(&self, id: &str, image: &ResolvedImage) -> Result<(), RuntimeError> {
        self.images
            .add_lease(id, &image.image)
            .map_err(|source| RuntimeError::Lease {
                id: id.to_string(),
                source: Box::new(source),
            })
    }

    /// Finds the container's image in the store, with its config and layers.
    pub(super) fn resolve_image(
        &self,
        req: &ContainerRequest<'_>,
    ) -> Result<ResolvedImage, RuntimeError> {
        let pod_name = || req.pod.metadata.name.clone().unwrap_or_default();
        let image_ref = req.container.image.clone().unwrap_or_default();
        let failed = |source| RuntimeError::Image {
            pod: pod_name(),
            source: Box::new(source),
        };
        let image = self
            .images
            .resolve(&image_ref)
            .map_err(failed)?
            .ok_or_else(|| RuntimeError::ImageNotPresent {
                pod: pod_name(),
                image: image_ref.clone(),
            })?;
        let config = self.images.image_config(&image).map_err(failed)?;
        let layers_dir = self.images.layers_dir();
        let dirs = self.images.layer_dirs(&image).map_err(failed)?;
        let mut lower: Vec<String> = dirs
            .iter()
            .map(|p| {
                p.strip_prefix(&layers_dir)
                    .unwrap_or(p)
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        if let Some(name) = self.images.mount_targets_layer(&image, &dirs) {
            lower.push(name.to_string());
        }
        lower.reverse();
        Ok(ResolvedImage {
            image,
            config,
            layers_dir,
            lower,
        })
    }

    /// What the monitor is told (`shim.json`); `user` is the spec's user request, resolved by
    /// the monitor against the image once the rootfs is mounted.
    pub(super) fn shim_config(
        &self,
        req: &ContainerRequest<'_>,
        id: &str,
        paths: &ContainerPaths,
        image: &ResolvedImage,
        user: UserRequest,
        staged: bool,
    ) -> Result<ShimConfig, RuntimeError> {
        let pod = req.pod;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let qos = crate::pod::qos::qos_class(pod).map_err(|source| RuntimeError::Spec {
            pod: pod.metadata.name.clone().unwrap_or_default(),
            container: req.container.name.clone(),
            source: Box::new(spec::SpecError::from(source)),
        })?;
        let driver = self.cfg.cgroup_driver;
        Ok(ShimConfig {
            id: id.to_string(),
            record_dir: paths.record.clone(),
            youki_root: paths.dir.join("youki"),
            layers_dir: image.layers_dir.clone(),
            lower_layers: image.lower.clone(),
            log_path: crate::logs::container_log_path(
                &self.cfg.log_dir,
                pod.metadata.namespace.as_deref().unwrap_or("default"),
                pod.metadata.name.as_deref().unwrap_or_default(),
                &uid,
                &req.container.name,
                req.restart_count,
            ),
            log_max_size: self.cfg.log_max_size,
            log_max_files: self.cfg.log_max_files,
            user,
            cgroup_root: self.cfg.cgroup_root.path().to_path_buf(),
            cgroup_path: driver.container_cgroup(&self.cfg.cgroup_parent, qos, &uid, id),
            systemd_cgroup: driver == cgroups::CgroupDriver::Systemd,
            stdin: req.container.stdin.unwrap_or(false),
            stdin_once: req.container.stdin_once.unwrap_or(false),
            staged,
        })
    }

    /// Writes everything the monitor reads: the spec (which needs the pod's sandbox),
    /// `shim.json`, the exit record's reserve and, last, the container's identity.
    pub(super) fn prepare(
        &self,
        req: &ContainerRequest<'_>,
        id: &str,
        paths: &ContainerPaths,
        image: &ResolvedImage,
        staged: bool,
    ) -> Result<(ContainerMeta, ShimConfig), RuntimeError> {
        let pod = req.pod;
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        let pod_ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let cname = req.container.name.clone();
        let image_ref = req.container.image.clone().unwrap_or_default();
        let sb_paths = SandboxPaths::new(&self.cfg.sandbox_dirs(), &uid).map_err(|source| {
            RuntimeError::Sandbox {
                pod: pod_name.clone(),
                source: Box::new(source),
            }
        })?;
        let sb = sandbox::load(&sb_paths)
            .map_err(|source| RuntimeError::Sandbox {
                pod: pod_name.clone(),
                source: Box::new(source),
            })?
            .ok_or_else(|| RuntimeError::SandboxNotReady {
                pod: pod_name.clone(),
                message: "the pod has no sandbox".into(),
            })?;
        // Never join a namespace file that is not a live nsfs mount (one left by an earlier
        // boot is an empty file): the owner creates the sandbox again.
        sandbox::check_namespaces(&sb_paths, sb.host_network).map_err(|why| {
            RuntimeError::SandboxNotReady {
                pod: pod_name.clone(),
                message: why.to_string(),
            }
        })?;
        let user_ns = if sb_paths.has_user_ns() {
            let base = self
                .userns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .base_of(&uid)
                .ok_or_else(|| RuntimeError::SandboxNotReady {
                    pod: pod_name.clone(),
                    message: "the pod's user namespace has no recorded mapping".into(),
                })?;
            Some((sb_paths.ns("user"), base))
        } else {
            None
        };
        let mounts = SandboxMounts {
            network_ns: (!sb.host_network).then(|| sb_paths.ns("net")),
            ipc_ns: sb_paths.ns("ipc"),
            uts_ns: (!sb.host_network).then(|| sb_paths.ns("uts")),
            pid_ns: sb_paths.shares_pid().then(|| sb_paths.ns("pid")),
            user_ns,
            hosts: sb_paths.etc("hosts"),
            hostname: sb_paths.etc("hostname"),
            resolv_conf: sb_paths.etc("resolv.conf"),
            shm: sb_paths.shm(),
            volumes: sb.volumes.clone(),
            pod_ips: sb.pod_ips.clone(),
        };
        let qos = crate::pod::qos::qos_class(pod).map_err(|source| RuntimeError::Spec {
            pod: pod_name.clone(),
            container: cname.clone(),
            source: Box::new(spec::SpecError::from(source)),
        })?;
        let oci_cgroups_path =
            self.cfg
                .cgroup_driver
                .cgroups_path(&self.cfg.cgroup_parent, qos, &uid, id);
        let rootfs = paths.rootfs().rootfs;
        let host_devices = if security::is_privileged(req.container) {
            security::devices::host_devices(Path::new("/dev")).map_err(|source| {
                RuntimeError::Io {
                    what: "list host devices in",
                    path: PathBuf::from("/dev"),
                    source,
                }
            })?
        } else {
            Vec::new()
        };
        crate::tp!("st.pre_spec");
        let built = spec::build_spec(&SpecRequest {
            pod,
            container: req.container,
            image: &image.config,
            rootfs: &rootfs,
            sandbox: &mounts,
            cgroups_path: &oci_cgroups_path,
            node: &self.cfg.node,
            // Static pods are critical; the kubelet's -997 is for node-critical ones.
            critical: pod
                .spec
                .as_ref()
                .and_then(|s| s.priority_class_name.as_deref())
                == Some("system-node-critical"),
            security: &self.cfg.security,
            host_devices: &host_devices,
            sub_paths: spec::SubPaths::Pin(&paths.rootfs().sub_paths),
        })
        .map_err(|source| RuntimeError::Spec {
            pod: pod_name.clone(),
            container: cname.clone(),
            source: Box::new(source),
        })?;
        crate::tp!("st.spec");
        self.ensure_apparmor_profile(&built.spec, id)?;
        let shim_cfg = self.shim_config(req, id, paths, image, built.user, staged)?;
        let meta = ContainerMeta {
            id: id.to_string(),
            pod_uid: uid,
            pod_namespace: pod_ns,
            pod_name,
            container_name: cname,
            kind: req.kind,
            restart_count: req.restart_count,
            image: image_ref,
            image_digest: image.image.digest.clone(),
            log_path: shim_cfg.log_path.clone(),
            stop_signal: built.stop_signal,
            created_at: super::super::now_rfc3339(),
            boot_id: self.boot_id.clone(),
        };
        let write = |path: PathBuf, r: io::Result<()>| {
            r.map_err(|source| RuntimeError::Io {
                what: "write",
                path,
                source,
            })
        };
        write(
            paths.config(),
            fsutil::write_json_atomic_volatile(&paths.config(), &built.spec),
        )?;
        write(
            paths.shim_config(),
            fsutil::write_json_atomic_volatile(&paths.shim_config(), &shim_cfg),
        )?;
        // No fsync on the start path: the runtime files live on a tmpfs, and the monitor makes
        // meta.json durable once the container started (a torn one after a power cut is an
        // interrupted creation: the directories are removed).
        // A container starts only if its exit can be recorded on a full disk (a staged one
        // reserved it before its monitor was forked).
        if !staged {
            write(paths.exit_reserve(), container::reserve_exit_record(paths))?;
        }
        // meta.json last: its presence marks a container as complete.
        write(
            paths.meta(),
            fsutil::write_json_atomic_volatile(&paths.meta(), &meta),
        )?;
        Ok((meta, shim_cfg))
    }

    /// Loads podvisor's default AppArmor profile if the spec uses it and a policy reload (or
    /// `aa-teardown`) removed it since start, as containerd checks before every container.
    pub(super) fn ensure_apparmor_profile(
        &self,
        spec: &oci_spec::runtime::Spec,
        id: &str,
    ) -> Result<(), RuntimeError> {
        let wants_default = spec
            .process()
            .as_ref()
            .and_then(|p| p.apparmor_profile().as_deref())
            == Some(apparmor::DEFAULT_PROFILE);
        match &self.cfg.security.apparmor {
            AppArmorHost::Enabled { securityfs, .. } if wants_default => {
                apparmor::ensure_default_profile(securityfs).map_err(|e| RuntimeError::Start {
                    id: id.to_string(),
                    message: format!("AppArmor: {e}"),
                })
            }
            _ => Ok(()),
        }
    }
}

pub(super) fn new_container_id(uid: &str, name: &str, restart_count: u32) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!(
        "{uid}/{name}/{restart_count}/{nanos}/{}/{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    use sha2::Digest;
    let h = hex::encode(sha2::Sha256::digest(seed.as_bytes()));
    let short_uid: String = uid.chars().filter(|c| *c != '-').take(8).collect();
    format!("{short_uid}-{name}-{restart_count}-{}", &h[..8])
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_ids_are_unique_and_valid_for_libcontainer() {
        let a = new_container_id("0d1e2f3a-aaaa", "web", 0);
        let b = new_container_id("0d1e2f3a-aaaa", "web", 0);
        assert_ne!(a, b);
        assert!(a.starts_with("0d1e2f3a-web-0-"), "{a}");
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+-.".contains(c)));
    }
}
