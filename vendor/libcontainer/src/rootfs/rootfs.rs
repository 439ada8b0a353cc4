use std::collections::HashSet;
use std::path::Path;

use nix::mount::MsFlags;
use oci_spec::runtime::{Linux, Spec};

use super::device::Device;
use super::mount::{Mount, MountOptions};
use super::symlink::Symlink;
use super::utils::default_devices;
use super::{Result, RootfsError};
use crate::error::MissingSpecError;
use crate::syscall::Syscall;
use crate::syscall::syscall::create_syscall;

/// What `linux.rootfsPropagation` does to the container's mount namespace: the propagation
/// given to its whole tree before the rootfs is bound (so that nothing the container mounts
/// reaches the host unless asked), and the one given to the new root after pivot_root.
///
/// podvisor patch (vendor/README.md): every value runc accepts (its `mountPropagationMapping`:
/// `[r]private`, `[r]slave`, `[r]shared`, `[r]unbindable`, and the empty string) is accepted;
/// youki 0.7 refused the recursive names, which containerd's CRI plugin sets (`rslave` for a
/// `HostToContainer` volume, `rshared` for a `Bidirectional` one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RootfsPropagation {
    /// Applied recursively to "/" of the new mount namespace before the mounts.
    pub before_pivot: MsFlags,
    /// Applied to the new root after pivot_root, if any.
    pub after_pivot: Option<MsFlags>,
}

impl RootfsPropagation {
    /// Parses the spec's value (`None`: runc's and youki's default, recursive slave). Pure: the
    /// same function decides for a spec checked ahead of time and for the container's init.
    pub fn parse(value: Option<&str>) -> Result<Self> {
        let (before, after) = match value {
            // The tree stays at least a slave of the host until the rootfs is in place, as
            // in youki 0.7: a private tree would miss the host's later mounts, a shared one
            // would push the container's mounts to the host.
            None | Some("") | Some("slave") | Some("rslave") => (MsFlags::MS_SLAVE, None),
            Some("private") | Some("rprivate") => (MsFlags::MS_PRIVATE, None),
            Some("shared") => (MsFlags::MS_SHARED, Some(MsFlags::MS_SHARED)),
            Some("rshared") => (
                MsFlags::MS_SHARED,
                Some(MsFlags::MS_SHARED | MsFlags::MS_REC),
            ),
            // The rootfs is bound from the tree, which an unbindable mount refuses: slave
            // first, unbindable once it is the root (youki 0.7's order).
            Some("unbindable") => (MsFlags::MS_SLAVE, Some(MsFlags::MS_UNBINDABLE)),
            Some("runbindable") => (
                MsFlags::MS_SLAVE,
                Some(MsFlags::MS_UNBINDABLE | MsFlags::MS_REC),
            ),
            Some(unknown) => {
                return Err(RootfsError::UnknownRootfsPropagation(unknown.to_string()));
            }
        };
        Ok(Self {
            before_pivot: before | MsFlags::MS_REC,
            after_pivot: after,
        })
    }
}

/// Holds information about rootfs
pub struct RootFS {
    syscall: Box<dyn Syscall>,
}

impl Default for RootFS {
    fn default() -> Self {
        Self::new()
    }
}

impl RootFS {
    pub fn new() -> RootFS {
        RootFS {
            syscall: create_syscall(),
        }
    }

    pub fn mount_to_rootfs(
        &self,
        linux: &Linux,
        spec: &Spec,
        rootfs: &Path,
        cgroup_ns: bool,
    ) -> Result<()> {
        let flags = RootfsPropagation::parse(linux.rootfs_propagation().as_deref())?.before_pivot;

        self.syscall
            .mount(None, Path::new("/"), None, flags, None)
            .map_err(|err| {
                tracing::error!(
                    ?err,
                    ?flags,
                    "failed to change the mount propagation type of the root"
                );

                err
            })?;

        libcgroups::tp!("lc.r.propagation");
        let mounter = Mount::new();

        mounter.make_parent_mount_private(rootfs)?;
        libcgroups::tp!("lc.r.parent_private");

        tracing::debug!("mount root fs {:?}", rootfs);
        self.syscall
            .mount(
                Some(rootfs),
                rootfs,
                None,
                MsFlags::MS_BIND | MsFlags::MS_REC,
                None,
            )
            .map_err(|err| {
                tracing::error!(?rootfs, ?err, "failed to bind mount rootfs");
                err
            })?;

        let global_options = MountOptions {
            root: rootfs,
            label: linux.mount_label().as_deref(),
            cgroup_ns,
        };

        if let Some(mounts) = spec.mounts() {
            for mount in mounts {
                mounter.setup_mount(mount, &global_options)?;
                libcgroups::tp!("lc.r.m{}", mount.destination().display());
            }
        }
        Ok(())
    }

    pub fn prepare_rootfs(
        &self,
        spec: &Spec,
        rootfs: &Path,
        bind_devices: bool,
        cgroup_ns: bool,
    ) -> Result<()> {
        tracing::debug!(?rootfs, "prepare rootfs");
        let linux = spec.linux().as_ref().ok_or(MissingSpecError::Linux)?;

        self.mount_to_rootfs(linux, spec, rootfs, cgroup_ns)?;
        libcgroups::tp!("lc.r.mounted");

        let symlinker = Symlink::new();
        symlinker.setup_kcore_symlink(rootfs)?;
        symlinker.setup_default_symlinks(rootfs)?;
        libcgroups::tp!("lc.r.symlinks");

        let devicer = Device::new();
        if let Some(added_devices) = linux.devices() {
            let mut path_set = HashSet::new();
            let devices = default_devices();
            added_devices.iter().for_each(|d| {
                path_set.insert(d.path());
            });
            let default = devices.iter().filter(|d| !path_set.contains(d.path()));
            devicer.create_devices(rootfs, added_devices.iter().chain(default), bind_devices)
        } else {
            devicer.create_devices(rootfs, &default_devices(), bind_devices)
        }?;

        libcgroups::tp!("lc.r.devices");
        symlinker.setup_ptmx(rootfs)?;
        Ok(())
    }

    /// Change propagation type of rootfs as specified in spec.
    pub fn adjust_root_mount_propagation(&self, linux: &Linux) -> Result<()> {
        let flags = RootfsPropagation::parse(linux.rootfs_propagation().as_deref())?.after_pivot;

        if let Some(flags) = flags {
            self.syscall
                .mount(None, Path::new("/"), None, flags, None)
                .map_err(|err| {
                    tracing::error!(
                        ?err,
                        ?flags,
                        "failed to adjust the mount propagation type of the root"
                    );
                    err
                })?;
        }

        Ok(())
    }
}

#[cfg(test)]
mod propagation_tests {
    use nix::mount::MsFlags;

    use super::{RootfsError, RootfsPropagation};

    #[test]
    fn every_runc_value_is_accepted() {
        let rec = MsFlags::MS_REC;
        let cases: &[(Option<&str>, MsFlags, Option<MsFlags>)] = &[
            (None, MsFlags::MS_SLAVE | rec, None),
            (Some(""), MsFlags::MS_SLAVE | rec, None),
            (Some("slave"), MsFlags::MS_SLAVE | rec, None),
            (Some("rslave"), MsFlags::MS_SLAVE | rec, None),
            (Some("private"), MsFlags::MS_PRIVATE | rec, None),
            (Some("rprivate"), MsFlags::MS_PRIVATE | rec, None),
            (
                Some("shared"),
                MsFlags::MS_SHARED | rec,
                Some(MsFlags::MS_SHARED),
            ),
            (
                Some("rshared"),
                MsFlags::MS_SHARED | rec,
                Some(MsFlags::MS_SHARED | rec),
            ),
            (
                Some("unbindable"),
                MsFlags::MS_SLAVE | rec,
                Some(MsFlags::MS_UNBINDABLE),
            ),
            (
                Some("runbindable"),
                MsFlags::MS_SLAVE | rec,
                Some(MsFlags::MS_UNBINDABLE | rec),
            ),
        ];
        for (value, before, after) in cases {
            let got = RootfsPropagation::parse(*value).expect("accepted");
            assert_eq!(got.before_pivot, *before, "{value:?}");
            assert_eq!(got.after_pivot, *after, "{value:?}");
        }
    }

    #[test]
    fn an_unknown_value_is_named() {
        let err = RootfsPropagation::parse(Some("sideways")).expect_err("refused");
        assert!(matches!(err, RootfsError::UnknownRootfsPropagation(ref v) if v == "sideways"));
        assert_eq!(err.to_string(), "unknown rootfs propagation \"sideways\"");
    }
}
