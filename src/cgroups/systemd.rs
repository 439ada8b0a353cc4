//! systemd: the `cgroupDriver: systemd` side of the cgroup tree, as the kubelet's systemd
//! driver builds it: pods are transient slice units, started and changed through systemd's
//! D-Bus API (the daemon side, an executor thread), containers transient scope units started
//! by libcontainer's systemd manager in the monitor.
//!
//! Names (the kubelet's `ToSystemd`/`ExpandSlice` with `podvisor` for `kubepods`):
//!
//! | unit | cgroup (relative to the root) |
//! |---|---|
//! | `podvisor.slice` | `/podvisor.slice` (Guaranteed pods) |
//! | `podvisor-burstable.slice` | `/podvisor.slice/podvisor-burstable.slice` |
//! | `podvisor-besteffort.slice` | `/podvisor.slice/podvisor-besteffort.slice` |
//! | `podvisor-<qos>-pod<uid, - as _>.slice` | below its tier (Guaranteed: `podvisor-pod<uid>.slice`) |
//! | `podvisor-<container id>.scope` | below its pod slice |
//!
//! A slice's parent is implied by its name (systemd.slice(5): `a-b.slice` lives in `a.slice`
//! and requires it), which is what the kubelet's `Wants=` of the parent spells out.
//!
//! Pod slice properties (runc's systemd properties of the kubelet's `ResourceConfigForPod`):
//!
//! | property | value |
//! |---|---|
//! | `CPUWeight` | the kubelet's linear mapping of the pod's cpu shares |
//! | `CPUQuotaPerSecUSec` | quota × 1 s / period, rounded up to 10 ms (runc), or infinity |
//! | `MemoryMax` | the pod's memory limit, or infinity |
//! | `MemorySwapMax` | 0 when the pod has a memory limit (podvisor's cgroupfs value) |
//! | `TasksMax` | `podPidsLimit`, or infinity |
//! | `{CPU,Memory,IO,Tasks}Accounting` | yes |
//! | `DefaultDependencies` | no (runc) |
//!
//! `Delegate=yes` is set on the container scopes (libcontainer): systemd refuses it on slices
//! ("Delegation not available for unit type"). The QoS slices are kept once created (as the
//! kubelet keeps `kubepods-burstable.slice`); a pod slice is stopped with its pod. Transient
//! units are gone after a reboot, as `/run` is.

#[cfg(feature = "systemd-cgroup")]
mod dbus;

use std::path::Path;

use super::resources::{shares_to_weight, PodCgroupConfig, CPU_PERIOD_US, MIN_SHARES};
use super::{CgroupError, CgroupMode, CgroupRoot};
use crate::pod::qos::QosClass;

/// Prefix of the container scopes (`<prefix>-<container id>.scope`) and the middle part of
/// the containers' `linux.cgroupsPath`.
pub const SCOPE_PREFIX: &str = "podvisor";
/// Default `cgroupRoot` with the systemd driver.
pub const DEFAULT_SLICE: &str = "podvisor.slice";
/// Exists when the host was booted with systemd (sd_booted(3)).
pub const BOOTED_MARKER: &str = "/run/systemd/system";

const SLICE_SUFFIX: &str = ".slice";
/// systemd's "infinity" for the u64 properties.
pub const INFINITY: u64 = u64::MAX;

/// A systemd unit property value (D-Bus `s`, `b` or `t`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnitValue {
    Str(String),
    Bool(bool),
    U64(u64),
}

/// A list of unit properties in the order they are sent.
pub type UnitProperties = Vec<(&'static str, UnitValue)>;

/// Why a `cgroupRoot` is not a slice the systemd driver can use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SliceError {
    #[error("{name:?} must be a systemd slice name ending in \".slice\" with cgroupDriver: systemd (e.g. {:?})", DEFAULT_SLICE)]
    NoSuffix { name: String },
    #[error("{name:?} is not a slice podvisor can create")]
    Root { name: String },
    #[error("{name:?}: a slice name has no leading, trailing or doubled \"-\" (systemd.slice(5))")]
    Dashes { name: String },
    #[error("{name:?}: {c:?} is not allowed in a systemd unit name")]
    Char { name: String, c: char },
}

/// Checks a `cgroupRoot` for the systemd driver: a slice name (`podvisor.slice`,
/// `edge-podvisor.slice`) that systemd accepts and that is not the root slice.
pub fn validate_slice(name: &str) -> Result<(), SliceError> {
    let name_ = || name.to_string();
    let Some(base) = name.strip_suffix(SLICE_SUFFIX) else {
        return Err(SliceError::NoSuffix { name: name_() });
    };
    if base.is_empty() || base == "-" {
        return Err(SliceError::Root { name: name_() });
    }
    if base.starts_with('-') || base.ends_with('-') || base.contains("--") {
        return Err(SliceError::Dashes { name: name_() });
    }
    if let Some(c) = base
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
    {
        return Err(SliceError::Char { name: name_(), c });
    }
    Ok(())
}

/// The prefix of the children of slice `parent`: `podvisor.slice` -> `podvisor-`.
fn child_prefix(parent: &str) -> String {
    format!("{}-", parent.strip_suffix(SLICE_SUFFIX).unwrap_or(parent))
}

/// The slice holding the pods of `qos` below `parent`.
pub fn qos_slice(parent: &str, qos: QosClass) -> String {
    match qos {
        QosClass::Guaranteed => parent.to_string(),
        QosClass::Burstable => format!("{}burstable{SLICE_SUFFIX}", child_prefix(parent)),
        QosClass::BestEffort => format!("{}besteffort{SLICE_SUFFIX}", child_prefix(parent)),
    }
}

/// A pod's slice: `<qos slice prefix>pod<uid with "-" as "_">.slice` (the kubelet's
/// `escapeSystemdCgroupName`).
pub fn pod_slice(parent: &str, qos: QosClass, pod_uid: &str) -> String {
    format!(
        "{}pod{}{SLICE_SUFFIX}",
        child_prefix(&qos_slice(parent, qos)),
        pod_uid.replace('-', "_")
    )
}

/// A container's scope unit.
pub fn scope_name(container_id: &str) -> String {
    format!("{SCOPE_PREFIX}-{container_id}.scope")
}

/// The cgroup path of a slice (systemd's and the kubelet's `ExpandSlice`):
/// `a-b-c.slice` -> `/a.slice/a-b.slice/a-b-c.slice`.
pub fn expand_slice(slice: &str) -> String {
    let base = slice.strip_suffix(SLICE_SUFFIX).unwrap_or(slice);
    let mut path = String::new();
    let mut prefix = String::new();
    for part in base.split('-') {
        prefix.push_str(part);
        path.push('/');
        path.push_str(&prefix);
        path.push_str(SLICE_SUFFIX);
        prefix.push('-');
    }
    path
}

/// runc's `CPUQuotaPerSecUSec`: the quota per second of CPU time, rounded up to whole 10 ms
/// (systemd keeps a percentage, so a child must not get less than the cfs quota it expects).
pub fn cpu_quota_per_sec_usec(quota_us: Option<u64>) -> u64 {
    match quota_us {
        None => INFINITY,
        Some(q) => {
            let per_sec = q.saturating_mul(1_000_000) / CPU_PERIOD_US;
            per_sec.div_ceil(10_000).saturating_mul(10_000)
        }
    }
}

/// The accounting properties runc gives every transient unit.
fn accounting(description: String) -> UnitProperties {
    vec![
        ("Description", UnitValue::Str(description)),
        ("DefaultDependencies", UnitValue::Bool(false)),
        ("MemoryAccounting", UnitValue::Bool(true)),
        ("CPUAccounting", UnitValue::Bool(true)),
        ("IOAccounting", UnitValue::Bool(true)),
        ("TasksAccounting", UnitValue::Bool(true)),
    ]
}

/// The limits of a pod slice (the table in the module header).
pub fn pod_limits(cfg: &PodCgroupConfig) -> UnitProperties {
    let mut p = vec![
        (
            "CPUWeight",
            UnitValue::U64(shares_to_weight(cfg.cpu_shares)),
        ),
        (
            "CPUQuotaPerSecUSec",
            UnitValue::U64(cpu_quota_per_sec_usec(cfg.cpu_quota_us)),
        ),
        (
            "MemoryMax",
            UnitValue::U64(cfg.memory_max.unwrap_or(INFINITY)),
        ),
    ];
    if cfg.memory_max.is_some() {
        p.push(("MemorySwapMax", UnitValue::U64(0)));
    }
    let tasks = cfg
        .pids_max
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(INFINITY);
    p.push(("TasksMax", UnitValue::U64(tasks)));
    p
}

/// All properties of a new pod slice.
pub fn pod_slice_properties(pod_uid: &str, cfg: &PodCgroupConfig) -> UnitProperties {
    let mut p = accounting(format!("podvisor pod {pod_uid}"));
    p.extend(pod_limits(cfg));
    p
}

/// The properties of a QoS slice (the top slice for Guaranteed): BestEffort gets the
/// minimum CPU weight, Burstable its weight from its pods' requests
/// ([`burstable_weight`]).
pub fn qos_slice_properties(qos: QosClass) -> UnitProperties {
    let name = match qos {
        QosClass::Guaranteed => "podvisor pods",
        QosClass::Burstable => "podvisor Burstable pods",
        QosClass::BestEffort => "podvisor BestEffort pods",
    };
    let mut p = accounting(name.to_string());
    if qos == QosClass::BestEffort {
        p.push(("CPUWeight", UnitValue::U64(shares_to_weight(MIN_SHARES))));
    }
    p
}

/// The Burstable slice's `CPUWeight` from the summed cpu requests of its pods.
pub fn burstable_weight(requests_millis: u64) -> UnitProperties {
    vec![(
        "CPUWeight",
        UnitValue::U64(shares_to_weight(super::resources::milli_cpu_to_shares(
            requests_millis,
        ))),
    )]
}

/// Errors of a systemd unit operation.
#[derive(Debug, thiserror::Error)]
pub enum SystemdError {
    #[error("systemd unit {unit}: {action} failed: {message}")]
    Unit {
        unit: String,
        action: &'static str,
        message: String,
    },
    #[error("cgroupDriver: systemd needs a host booted with systemd ({marker} is missing)")]
    NotBooted { marker: String },
    #[error("cgroupDriver: systemd needs the unified cgroup v2 hierarchy; {root} is a cgroup v1 or hybrid mount (use cgroupDriver: cgroupfs, or boot with systemd.unified_cgroup_hierarchy=1)")]
    NotUnified { root: String },
    /// `StartTransientUnit` of a unit systemd has loaded already.
    #[error("systemd unit {unit} is already loaded")]
    UnitExists { unit: String },
    /// `StopUnit`/`SetUnitProperties` of a unit systemd does not have.
    #[error("systemd unit {unit} is not loaded")]
    NoSuchUnit { unit: String },
    #[error("cgroup parent {source}")]
    Slice { source: SliceError },
    #[error("cgroupDriver: systemd: this podvisor was built without the systemd-cgroup feature")]
    NotBuilt,
}

/// systemd's unit operations podvisor uses (a trait so tests drive a fake). Existence is
/// never asked first (that would race with systemd's own job queue and with implicitly
/// loaded slices): the operations report [`SystemdError::UnitExists`] and
/// [`SystemdError::NoSuchUnit`] instead.
pub trait SystemdUnits: Send + Sync {
    /// `StartTransientUnit(unit, "replace", properties)`.
    fn start_transient(&self, unit: &str, properties: &UnitProperties) -> Result<(), SystemdError>;
    /// `SetUnitProperties(unit, runtime=true, properties)`.
    fn set_properties(&self, unit: &str, properties: &UnitProperties) -> Result<(), SystemdError>;
    /// `StopUnit(unit, "replace")`.
    fn stop(&self, unit: &str) -> Result<(), SystemdError>;
}

/// Refuses the systemd driver where it cannot work: no systemd (`marker` missing), no
/// unified hierarchy, or a build without it.
pub fn check_host(root: &CgroupRoot, marker: &Path) -> Result<(), SystemdError> {
    if !cfg!(feature = "systemd-cgroup") {
        return Err(SystemdError::NotBuilt);
    }
    if !marker.is_dir() {
        return Err(SystemdError::NotBooted {
            marker: marker.display().to_string(),
        });
    }
    if root.mode() != CgroupMode::Unified {
        return Err(SystemdError::NotUnified {
            root: root.path().display().to_string(),
        });
    }
    Ok(())
}

/// systemd's units on this host, after [`check_host`].
pub fn system_units(root: &CgroupRoot) -> Result<Box<dyn SystemdUnits>, SystemdError> {
    check_host(root, Path::new(BOOTED_MARKER))?;
    #[cfg(feature = "systemd-cgroup")]
    return Ok(Box::new(dbus::DbusUnits));
    #[cfg(not(feature = "systemd-cgroup"))]
    Err(SystemdError::NotBuilt)
}

/// Starts `unit` with `properties`, or updates the properties when it is already loaded
/// (a daemon restart, a pod sandbox created again).
fn ensure_unit(
    units: &dyn SystemdUnits,
    unit: &str,
    properties: UnitProperties,
    limits: Option<UnitProperties>,
) -> Result<(), SystemdError> {
    match units.start_transient(unit, &properties) {
        Err(SystemdError::UnitExists { .. }) => match limits {
            Some(l) if !l.is_empty() => units.set_properties(unit, &l),
            _ => Ok(()),
        },
        other => other,
    }
}

/// Starts the QoS slices and the slice of pod `pod_uid` with the limits of `cfg` (or sets
/// them on a slice that is already there); returns the pod cgroup's relative path.
pub fn create_pod(
    units: &dyn SystemdUnits,
    parent: &str,
    pod_uid: &str,
    cfg: &PodCgroupConfig,
) -> Result<String, SystemdError> {
    for qos in [
        QosClass::Guaranteed,
        QosClass::Burstable,
        QosClass::BestEffort,
    ] {
        ensure_unit(
            units,
            &qos_slice(parent, qos),
            qos_slice_properties(qos),
            None,
        )?;
    }
    let slice = pod_slice(parent, cfg.qos, pod_uid);
    ensure_unit(
        units,
        &slice,
        pod_slice_properties(pod_uid, cfg),
        Some(pod_limits(cfg)),
    )?;
    Ok(expand_slice(&slice))
}

/// Stops the slice of pod `pod_uid` in whichever QoS slice it is (systemd removes its
/// cgroup, killing anything left in it).
pub fn remove_pod(
    units: &dyn SystemdUnits,
    parent: &str,
    pod_uid: &str,
) -> Result<(), SystemdError> {
    for qos in [
        QosClass::Guaranteed,
        QosClass::Burstable,
        QosClass::BestEffort,
    ] {
        match units.stop(&pod_slice(parent, qos, pod_uid)) {
            Ok(()) | Err(SystemdError::NoSuchUnit { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Sets the Burstable slice's CPU weight; no-op while it is not loaded.
pub fn set_burstable_cpu(
    units: &dyn SystemdUnits,
    parent: &str,
    requests_millis: u64,
) -> Result<(), SystemdError> {
    let slice = qos_slice(parent, QosClass::Burstable);
    match units.set_properties(&slice, &burstable_weight(requests_millis)) {
        Err(SystemdError::NoSuchUnit { .. }) => Ok(()),
        other => other,
    }
}

impl From<SystemdError> for CgroupError {
    fn from(e: SystemdError) -> CgroupError {
        CgroupError::Systemd(Box::new(e))
    }
}

#[cfg(test)]
mod tests;
