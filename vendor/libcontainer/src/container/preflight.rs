//! The checks of a spec that need no kernel object and no host state (podvisor patch,
//! vendor/README.md): what would make the container's creation fail, decided from the spec
//! alone. [`check_spec`] runs first in [`super::init_builder::InitContainerBuilder::build`],
//! and a caller can run the same function ahead of time (podvisor's manifest validation), so
//! that a spec it accepts is one `build` accepts for these reasons.
//!
//! Left to `build` (host state): whether AppArmor is enabled, whether the caller is
//! rootless, and whether a namespace path names the host's network namespace (the sysctl
//! check of [`Validator`] stats the paths it is given: give it paths that exist, or none).

use oci_spec::runtime::Spec;

use crate::error::{ErrInvalidSpec, MissingSpecError};
use crate::namespaces::{NamespaceError, Namespaces};
use crate::rootfs::utils::parse_mount;
use crate::rootfs::{RootfsError, RootfsPropagation};
use crate::validator::Validator;

#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(transparent)]
    MissingSpec(#[from] MissingSpecError),
    #[error(transparent)]
    InvalidSpec(#[from] ErrInvalidSpec),
    #[error("linux.namespaces: {0}")]
    Namespaces(#[from] NamespaceError),
    #[error("linux.rootfsPropagation: {0}")]
    RootfsPropagation(#[source] RootfsError),
    #[error("mounts[{index}] ({destination}): {source}")]
    Mount {
        index: usize,
        destination: String,
        #[source]
        source: crate::rootfs::MountError,
    },
    #[cfg(feature = "libseccomp")]
    #[error("linux.seccomp: {0}")]
    Seccomp(#[from] crate::seccomp::SeccompError),
}

/// Runs every check of `spec` that `build` would run before it touches the kernel, as far as
/// the spec alone decides it: the runtime spec version and youki's validator, the namespace
/// list, the rootfs propagation, each mount's options and the seccomp filter's compilation
/// (built with libseccomp in memory, never loaded).
pub fn check_spec(spec: &Spec) -> Result<(), PreflightError> {
    if !spec.version().starts_with("1.") {
        return Err(ErrInvalidSpec::UnsupportedVersion.into());
    }
    Validator::validate_spec(spec)?;
    let linux = spec.linux().as_ref().ok_or(MissingSpecError::Linux)?;
    Namespaces::try_from(linux.namespaces().as_ref())?;
    RootfsPropagation::parse(linux.rootfs_propagation().as_deref())
        .map_err(PreflightError::RootfsPropagation)?;
    for (index, mount) in spec.mounts().iter().flatten().enumerate() {
        parse_mount(mount).map_err(|source| PreflightError::Mount {
            index,
            destination: mount.destination().display().to_string(),
            source,
        })?;
    }
    #[cfg(feature = "libseccomp")]
    if let Some(seccomp) = linux.seccomp() {
        crate::seccomp::build_filter(seccomp)?;
    }
    Ok(())
}
