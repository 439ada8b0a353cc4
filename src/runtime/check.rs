//! runtime::check: the runtime's refusals of a pod, decided before it runs.
//!
//! [`check_pod`] plans every volume as the sandbox will ([`crate::runtime::volumes::plan`]),
//! builds every container's OCI spec as a start does ([`super::spec::build_spec`]) against the sandbox the
//! pod will get, and runs libcontainer's own checks of that spec
//! ([`libcontainer::container::preflight::check_spec`], the function libcontainer's `build()`
//! runs first in the monitor). The static-pod loader ([`crate::staticpod`]) reports each
//! refusal as a field error, so `podvisor validate` and last-known-good cover every refusal of
//! these functions by construction, not by a list kept by hand.
//!
//! What depends on the host or the image at start time is left to the start, which reports it
//! as the container's waiting reason and retries:
//! - the image: its entrypoint, user, environment and stop signal (the check stands in an
//!   image that sets only an entrypoint and a non-root numeric user);
//! - hostPath types against what is on the host, and the directories a `subPath` names (only
//!   their form is checked here);
//! - `Localhost` seccomp profile files (read from `<root-dir>/seccomp` at start);
//! - the daemon's capability bounding set (the check assumes every capability);
//! - whether a namespace path names the host's network namespace (a pod's own namespaces are
//!   new ones: the check gives libcontainer none of their paths);
//! - whether AppArmor is enabled and the caller is rootless (libcontainer's `build()`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use libcontainer::container::preflight::PreflightError;
use oci_spec::image::{ConfigBuilder, ImageConfiguration, ImageConfigurationBuilder};
use oci_spec::runtime::Spec;

use super::spec::{
    build_spec, capabilities_from_mask, NodeInfo, SandboxMounts, SpecError, SpecRequest, SubPaths,
};
use super::volumes;
use crate::pod::manifest::FieldError;
use crate::security::NodeSecurity;

/// Every refusal the runtime would make of `pod` on a node offering `security`, as far as the
/// pod decides it (see the module header for what is left to the start).
pub fn check_pod(pod: &Pod, security: &NodeSecurity) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(spec) = pod.spec.as_ref() else {
        // The loader's validation reports the missing spec.
        return out;
    };
    let node = planned_node(spec.node_name.as_deref().unwrap_or(""));
    let mut planned_volumes = BTreeMap::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        match volumes::plan(pod, &node, v, i) {
            Ok(_) => {}
            Err(e) => out.push(refusal_of_volume(e)),
        }
        planned_volumes.insert(v.name.clone(), planned_path(&["volumes", &v.name]));
    }
    let sandbox = planned_sandbox(pod, planned_volumes);
    let image = stand_in_image();
    let rootfs = planned_path(&["rootfs"]);
    let containers = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers);
    for c in containers {
        let built = build_spec(&SpecRequest {
            pod,
            container: c,
            image: &image,
            rootfs: &rootfs,
            sandbox: &sandbox,
            cgroups_path: "/kubepods/planned",
            node: &node,
            critical: false,
            security,
            host_devices: &[],
            sub_paths: SubPaths::Planned,
        });
        match built {
            Ok(built) => {
                if let Err(e) = check_built_spec(&built.spec) {
                    out.push(FieldError::new(
                        preflight_field(pod, &c.name, &e),
                        format!("the container runtime refuses its OCI spec: {e}"),
                    ));
                }
            }
            Err(e) if depends_on_host_or_image(&e) => {}
            Err(e) => out.push(refusal_of_spec(pod, &c.name, e)),
        }
    }
    out
}

/// libcontainer's checks of a spec built by [`build_spec`], without the paths of the
/// namespaces it joins: those are the pod's own (never the host's), and the check would stat
/// them.
pub fn check_built_spec(
    spec: &Spec,
) -> Result<(), libcontainer::container::preflight::PreflightError> {
    let mut spec = spec.clone();
    if let Some(linux) = spec.linux_mut() {
        if let Some(namespaces) = linux.namespaces_mut() {
            for ns in namespaces.iter_mut() {
                ns.set_path(None);
            }
        }
    }
    libcontainer::container::preflight::check_spec(&spec)
}

/// The manifest field behind a refusal of libcontainer's checks: a sysctl's entry in
/// `spec.securityContext.sysctls` (the pod's, copied into every container's spec), else the
/// container.
fn preflight_field(pod: &Pod, container: &str, e: &PreflightError) -> String {
    use libcontainer::error::ErrInvalidSpec as E;
    let sysctl = match e {
        PreflightError::InvalidSpec(
            E::SysctlNotAllowedInHostIpc(name)
            | E::SysctlNotAllowedInHostNet(name)
            | E::SysctlConflictsWithOci(name, _)
            | E::SysctlNotAllowedInHostUser(name)
            | E::SysctlNotInSeparateNamespace(name),
        ) => Some(name),
        _ => None,
    };
    let index = sysctl.and_then(|name| {
        pod.spec
            .as_ref()?
            .security_context
            .as_ref()?
            .sysctls
            .as_ref()?
            .iter()
            .position(|s| s.name.replace('/', ".") == *name)
    });
    match index {
        Some(i) => format!("spec.securityContext.sysctls[{i}].name"),
        None => container_field(pod, container),
    }
}

/// The refusals that depend on the image or on the host at start time.
fn depends_on_host_or_image(e: &SpecError) -> bool {
    matches!(
        e,
        SpecError::EmptyCommand { .. }
            | SpecError::SubPath { .. }
            | SpecError::SeccompProfile { .. }
            | SpecError::User(_)
    )
}

fn refusal_of_volume(e: volumes::VolumeError) -> FieldError {
    let field = volume_field(&e);
    split_field(e.to_string(), field)
}

fn refusal_of_spec(pod: &Pod, container: &str, e: SpecError) -> FieldError {
    let field = spec_field(&e).unwrap_or_else(|| container_field(pod, container));
    split_field(e.to_string(), Some(field))
}

/// `message` without its `field: ` prefix, at `field`.
fn split_field(message: String, field: Option<String>) -> FieldError {
    let Some(field) = field else {
        return FieldError::new("spec", message);
    };
    let rest = message
        .strip_prefix(&format!("{field}: "))
        .map(str::to_string)
        .unwrap_or(message);
    FieldError::new(field, rest)
}

fn volume_field(e: &volumes::VolumeError) -> Option<String> {
    match e {
        volumes::VolumeError::HostPathType { field, .. }
        | volumes::VolumeError::Io { field, .. }
        | volumes::VolumeError::Mount { field, .. }
        | volumes::VolumeError::Invalid { field, .. } => Some(field.clone()),
        volumes::VolumeError::Spec(e) => spec_field(e),
    }
}

/// The manifest field a spec error names, if it names one.
fn spec_field(e: &SpecError) -> Option<String> {
    match e {
        SpecError::MissingField { field }
        | SpecError::Unsupported { field, .. }
        | SpecError::NotSupportedYet { field }
        | SpecError::ApiObjectReference { field }
        | SpecError::InvalidField { field, .. }
        | SpecError::Quantity { field, .. }
        | SpecError::UnknownVolume { field, .. }
        | SpecError::SubPath { field, .. }
        | SpecError::SeccompProfile { field, .. } => Some(field.clone()),
        SpecError::Security(v) => Some(v.field.clone()),
        _ => None,
    }
}

/// `spec.containers[i]` or `spec.initContainers[i]` of the container named `name`.
fn container_field(pod: &Pod, name: &str) -> String {
    let Some(spec) = pod.spec.as_ref() else {
        return "spec".into();
    };
    if let Some(i) = spec.containers.iter().position(|c| c.name == name) {
        return format!("spec.containers[{i}]");
    }
    match spec
        .init_containers
        .iter()
        .flatten()
        .position(|c| c.name == name)
    {
        Some(i) => format!("spec.initContainers[{i}]"),
        None => "spec".into(),
    }
}

/// Where nothing is: the paths the planned sandbox names are never opened.
fn planned_path(parts: &[&str]) -> PathBuf {
    let mut p = PathBuf::from("/nonexistent/podvisor-check");
    for part in parts {
        p.push(part);
    }
    p
}

/// A node that offers every capability and some CPU and memory (resourceFieldRef values
/// without limits are computed from them; their amounts refuse nothing).
fn planned_node(name: &str) -> NodeInfo {
    NodeInfo {
        name: name.to_string(),
        cpu_millis: 1000,
        memory_bytes: 1 << 30,
        host_ip: "127.0.0.1".into(),
        bounding_capabilities: capabilities_from_mask(u64::MAX),
    }
}

/// The sandbox the pod will get: its own namespaces as the pod asks for them.
fn planned_sandbox(pod: &Pod, volumes: BTreeMap<String, PathBuf>) -> SandboxMounts {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    let share_pid = spec
        .and_then(|s| s.share_process_namespace)
        .unwrap_or(false);
    let own_users = spec.and_then(|s| s.host_users) == Some(false);
    let ns = |name: &str| planned_path(&["ns", name]);
    SandboxMounts {
        network_ns: (!host_network).then(|| ns("net")),
        ipc_ns: ns("ipc"),
        uts_ns: (!host_network).then(|| ns("uts")),
        pid_ns: share_pid.then(|| ns("pid")),
        user_ns: own_users.then(|| (ns("user"), crate::runtime::userns::IDS_PER_POD)),
        hosts: planned_path(&["etc", "hosts"]),
        hostname: planned_path(&["etc", "hostname"]),
        resolv_conf: planned_path(&["etc", "resolv.conf"]),
        shm: planned_path(&["shm"]),
        volumes,
        pod_ips: vec!["10.0.0.2".into()],
    }
}

/// An image that sets only an entrypoint and a non-root numeric user: what the image
/// decides is checked when it is pulled and started.
fn stand_in_image() -> ImageConfiguration {
    let config = ConfigBuilder::default()
        .entrypoint(vec!["/podvisor-check-entrypoint".to_string()])
        .user("65534".to_string())
        .build()
        .unwrap_or_default();
    ImageConfigurationBuilder::default()
        .config(config)
        .build()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
