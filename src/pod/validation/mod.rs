//! validation: the checks the API server (ValidatePodCreate, NodeRestriction and the
//! ServiceAccount admission for mirror pods) and the kubelet apply to a static Pod, reported as
//! field errors that name the field path (`spec.containers[1].ports[0].containerPort`).
//!
//! Every problem of a pod is collected, not just the first. Locations (line:column) are added
//! by the caller, which has the manifest text ([`crate::staticpod`]).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};

use super::manifest::{FieldError, ManifestError};
use super::quantity;
use crate::security::{self, NodeSecurity};

mod resources;
mod volumes;
pub use volumes::hugepage_size;

/// What the validation is told beyond the pod.
#[derive(Debug, Clone, Default)]
pub struct ValidationOptions<'a> {
    /// The name as it was written, when `metadata.name` carries a node suffix: messages then
    /// say which part is too long.
    pub written_name: Option<String>,
    /// The confinement the node offers (sysctls, seccomp and AppArmor profiles); `None`: the
    /// kubelet's defaults on a host without AppArmor.
    pub security: Option<&'a NodeSecurity>,
}

/// Validates `pod` as a static pod; empty when it is valid.
pub fn validate_pod(pod: &Pod, opts: &ValidationOptions<'_>) -> Vec<FieldError> {
    let mut v = Errors::default();
    validate_metadata(pod, opts, &mut v);
    match &pod.spec {
        None => v.push("spec", "required"),
        Some(spec) => validate_spec(spec, &mut v),
    }
    let default_node;
    let node = match opts.security {
        Some(n) => n,
        None => {
            default_node = NodeSecurity::default();
            &default_node
        }
    };
    for e in security::validate_pod(pod, node) {
        v.push(e.field, e.message);
    }
    // What the pod network reads (bandwidth annotations, podvisor.io/ips): the runtime would
    // refuse the sandbox.
    if let Err(e) = super::netargs::validate(pod) {
        v.push(
            format!("metadata.annotations{}", key_segment(&e.key)),
            e.message,
        );
    }
    v.0
}

/// Validates a parsed Pod as a static pod (its name as written), reporting every problem
/// (without line numbers: use [`crate::staticpod::load_manifest`] for those).
pub fn validate(pod: &Pod, source_name: &str) -> Result<(), ManifestError> {
    let errors = validate_pod(pod, &ValidationOptions::default());
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ManifestError::Invalid {
            source_name: source_name.into(),
            errors,
        })
    }
}

/// RFC 1123 DNS label: lowercase alphanumerics and '-', 1-63 characters, alphanumeric ends.
pub fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 DNS subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

#[derive(Default)]
pub(super) struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }
}

fn validate_metadata(pod: &Pod, opts: &ValidationOptions<'_>, v: &mut Errors) {
    let name = pod.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() || opts.written_name.as_deref() == Some("") {
        v.push("metadata.name", "required");
    } else if name.len() > 253 {
        let how = match &opts.written_name {
            Some(w) if w != name => format!(
                "{name:?} (the name with its node suffix) must be no more than 253 characters"
            ),
            _ => format!("{name:?} must be no more than 253 characters"),
        };
        v.push("metadata.name", how);
    } else if !is_dns1123_subdomain(name) {
        v.push(
            "metadata.name",
            format!(
                "{name:?} is not a valid DNS-1123 subdomain (lowercase letters, digits, '-' and '.', alphanumeric at both ends)"
            ),
        );
    }
    if let Some(ns) = pod.metadata.namespace.as_deref() {
        if !ns.is_empty() && !is_dns1123_label(ns) {
            v.push(
                "metadata.namespace",
                format!("{ns:?} is not a valid DNS-1123 label"),
            );
        }
    }
    for (k, val) in pod.metadata.labels.iter().flatten() {
        let field = format!("metadata.labels{}", key_segment(k));
        if let Err(m) = check_qualified_name(k) {
            v.push(&field, format!("key {k:?}: {m}"));
        }
        if !is_label_value(val) {
            v.push(
                &field,
                format!("{val:?} is not a valid label value (at most 63 characters: alphanumerics, '-', '_' or '.', alphanumeric at both ends)"),
            );
        }
    }
    let mut total = 0;
    for (k, val) in pod.metadata.annotations.iter().flatten() {
        total += k.len() + val.len();
        if let Err(m) = check_qualified_name(k) {
            v.push(
                format!("metadata.annotations{}", key_segment(k)),
                format!("key {k:?}: {m}"),
            );
        }
    }
    if let Err(e) = rollback_after(pod) {
        v.push(
            format!(
                "metadata.annotations{}",
                key_segment(ROLLBACK_AFTER_ANNOTATION)
            ),
            e.to_string(),
        );
    }
    if total > 256 * 1024 {
        v.push(
            "metadata.annotations",
            format!("annotations total {total} bytes, more than the 262144 allowed"),
        );
    }
}

/// podvisor's rollback deadline of a pod (safe updates): a Go duration ("5m", "90s"); "0"
/// turns rollbacks off for the pod. Unset: the daemon's default (`--rollback-after`).
pub const ROLLBACK_AFTER_ANNOTATION: &str = "podvisor.io/rollback-after";

/// Why a pod's `podvisor.io/rollback-after` is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} (a duration such as \"5m\" or \"90s\"; \"0\" turns rollbacks off)")]
pub struct RollbackAfterError {
    pub value: String,
    pub reason: crate::duration::DurationError,
}

/// The pod's `podvisor.io/rollback-after`: `Ok(None)` when unset, `Ok(Some(ZERO))` when off.
pub fn rollback_after(pod: &Pod) -> Result<Option<std::time::Duration>, RollbackAfterError> {
    match pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ROLLBACK_AFTER_ANNOTATION))
    {
        None => Ok(None),
        Some(v) => crate::duration::parse_go_duration(v)
            .map(Some)
            .map_err(|reason| RollbackAfterError {
                value: v.clone(),
                reason,
            }),
    }
}

/// `.key`, or `[key]` for keys with '.' or '/' (so the path stays splittable).
fn key_segment(k: &str) -> String {
    if k.contains('.') || k.contains('/') || k.is_empty() {
        format!("[{k}]")
    } else {
        format!(".{k}")
    }
}

/// Why a label or annotation key is not a qualified name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QualifiedNameError {
    #[error("prefix {prefix:?} is not a valid DNS-1123 subdomain")]
    Prefix { prefix: String },
    #[error("name part must not be empty")]
    EmptyName,
    #[error("name part must be at most 63 characters: alphanumerics, '-', '_' or '.', alphanumeric at both ends")]
    Name,
}

/// A Kubernetes qualified name: `[prefix/]name`, prefix a DNS subdomain, name at most 63
/// characters of alphanumerics, '-', '_' and '.', alphanumeric at both ends.
pub fn check_qualified_name(k: &str) -> Result<(), QualifiedNameError> {
    let (prefix, name) = match k.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        if !is_dns1123_subdomain(p) {
            return Err(QualifiedNameError::Prefix {
                prefix: p.to_string(),
            });
        }
    }
    if name.is_empty() {
        return Err(QualifiedNameError::EmptyName);
    }
    if name.len() > 63 || !is_label_value(name) {
        return Err(QualifiedNameError::Name);
    }
    Ok(())
}

/// A label value: empty, or at most 63 alphanumerics, '-', '_' and '.', alphanumeric at both
/// ends.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty()
        || (s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && s.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
            && s.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric))
}

/// IANA_SVC_NAME: at most 15 characters, lowercase alphanumerics and '-', at least one
/// letter, no '-' at either end and no "--".
pub fn is_port_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 15
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.bytes().any(|b| b.is_ascii_lowercase())
        && !s.starts_with('-')
        && !s.ends_with('-')
        && !s.contains("--")
}

/// An environment variable name: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
pub fn is_env_var_name(s: &str) -> bool {
    let ok = |b: u8, first: bool| {
        b.is_ascii_alphabetic() || matches!(b, b'-' | b'.' | b'_') || (!first && b.is_ascii_digit())
    };
    let bytes = s.as_bytes();
    !bytes.is_empty() && ok(bytes[0], true) && bytes[1..].iter().all(|&b| ok(b, false))
}

pub(super) const STATIC_REF: &str = "static pods cannot reference API objects";

fn validate_spec(spec: &PodSpec, v: &mut Errors) {
    if spec.containers.is_empty() {
        v.push("spec.containers", "at least one container is required");
    }
    if let Some(p) = spec.restart_policy.as_deref() {
        if !matches!(p, "Always" | "OnFailure" | "Never") {
            v.push(
                "spec.restartPolicy",
                format!("{p:?} is not one of Always, OnFailure, Never"),
            );
        }
    }
    if let Some(g) = spec.termination_grace_period_seconds {
        if g < 0 {
            v.push(
                "spec.terminationGracePeriodSeconds",
                format!("{g} must be greater than or equal to 0"),
            );
        }
    }
    if let Some(d) = spec.active_deadline_seconds {
        if d <= 0 {
            v.push(
                "spec.activeDeadlineSeconds",
                format!("{d} must be greater than 0"),
            );
        }
    }
    if let Some(p) = spec.dns_policy.as_deref() {
        if !matches!(
            p,
            "ClusterFirst" | "ClusterFirstWithHostNet" | "Default" | "None"
        ) {
            v.push(
                "spec.dnsPolicy",
                format!("{p:?} is not one of ClusterFirst, ClusterFirstWithHostNet, Default, None"),
            );
        }
    }
    validate_static_restrictions(spec, v);
    if spec.share_process_namespace == Some(true) && spec.host_pid == Some(true) {
        v.push(
            "spec.shareProcessNamespace",
            "ShareProcessNamespace and HostPID cannot both be enabled",
        );
    }
    if spec.host_users == Some(false) {
        // The API server's rule: a pod in its own user namespace shares none of the host's.
        for (field, set) in [
            ("spec.hostNetwork", spec.host_network),
            ("spec.hostPID", spec.host_pid),
            ("spec.hostIPC", spec.host_ipc),
        ] {
            if set == Some(true) {
                v.push(field, "forbidden when `hostUsers` is false");
            }
        }
    }
    let volumes = volumes::validate_volumes(spec, v);
    if let Some(r) = &spec.resources {
        resources::validate_resources(r, "spec.resources", true, v);
    }

    let host_network = spec.host_network == Some(true);
    let facts = PodFacts {
        host_network,
        host_users: spec.host_users != Some(false),
        volumes,
        container_names: spec
            .containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .map(|c| c.name.as_str())
            .collect(),
    };
    let mut names = BTreeSet::new();
    let lists = [
        (
            "spec.initContainers",
            spec.init_containers.as_deref().unwrap_or(&[]),
            true,
        ),
        ("spec.containers", &spec.containers[..], false),
    ];
    for (list, containers, init) in lists {
        let mut host_ports = BTreeSet::new();
        for (i, c) in containers.iter().enumerate() {
            let field = format!("{list}[{i}]");
            check_name(
                &c.name,
                &format!("{field}.name"),
                "container",
                &mut names,
                v,
            );
            validate_container(c, &field, init, &facts, &mut host_ports, v);
        }
    }
}

fn validate_static_restrictions(spec: &PodSpec, v: &mut Errors) {
    for (field, sa) in [
        ("spec.serviceAccountName", &spec.service_account_name),
        ("spec.serviceAccount", &spec.service_account),
    ] {
        if let Some(sa) = sa.as_deref().filter(|s| !s.is_empty()) {
            v.push(
                field,
                format!("static pods cannot reference service accounts (found {sa:?})"),
            );
        }
    }
    if spec.automount_service_account_token == Some(true) {
        v.push(
            "spec.automountServiceAccountToken",
            "static pods cannot get service account tokens",
        );
    }
    for (i, _) in spec.image_pull_secrets.iter().flatten().enumerate() {
        v.push(
            format!("spec.imagePullSecrets[{i}]"),
            format!("{STATIC_REF} (secrets)"),
        );
    }
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        v.push(
            "spec.ephemeralContainers",
            "static pods cannot have ephemeral containers",
        );
    }
    if spec.resource_claims.as_ref().is_some_and(|e| !e.is_empty()) {
        v.push(
            "spec.resourceClaims",
            format!("{STATIC_REF} (resource claims)"),
        );
    }
}

/// What a container's checks need to know about its pod.
struct PodFacts<'a> {
    host_network: bool,
    /// The pod runs in the host's user namespace (`hostUsers` not false).
    host_users: bool,
    /// Declared volume names.
    volumes: BTreeSet<String>,
    /// Every container's name (regular and init).
    container_names: BTreeSet<&'a str>,
}

fn validate_container(
    c: &Container,
    field: &str,
    init: bool,
    pod: &PodFacts<'_>,
    host_ports: &mut BTreeSet<(String, i32, String)>,
    v: &mut Errors,
) {
    let (host_network, volumes, container_names) =
        (pod.host_network, &pod.volumes, &pod.container_names);
    if c.image.as_deref().unwrap_or("").trim().is_empty() {
        v.push(format!("{field}.image"), "required");
    }
    if let Some(p) = c.image_pull_policy.as_deref() {
        if !matches!(p, "Always" | "IfNotPresent" | "Never") {
            v.push(
                format!("{field}.imagePullPolicy"),
                format!("{p:?} is not one of Always, IfNotPresent, Never"),
            );
        }
    }
    if let Some(p) = c.restart_policy.as_deref() {
        if !init {
            v.push(
                format!("{field}.restartPolicy"),
                "may only be set on init containers (sidecars)",
            );
        } else if p != "Always" {
            v.push(
                format!("{field}.restartPolicy"),
                format!("{p:?} is not supported: only Always (a sidecar) is allowed"),
            );
        }
    }
    match c
        .security_context
        .as_ref()
        .and_then(|s| s.proc_mount.as_deref())
    {
        None | Some("Default") => {}
        // The API server's rule: an unmasked /proc only inside the pod's own user namespace.
        Some("Unmasked") if pod.host_users => v.push(
            format!("{field}.securityContext.procMount"),
            "`hostUsers` must be false to use `Unmasked`",
        ),
        Some("Unmasked") => {}
        Some(pm) => v.push(
            format!("{field}.securityContext.procMount"),
            format!("{pm:?} is not one of Default, Unmasked"),
        ),
    }
    validate_ports(c, field, host_network, host_ports, v);
    validate_env(c, field, container_names, v);
    if let Some(r) = &c.resources {
        resources::validate_resources(r, &format!("{field}.resources"), false, v);
    }
    let mut paths = BTreeSet::new();
    for (j, m) in c.volume_mounts.iter().flatten().enumerate() {
        let mf = format!("{field}.volumeMounts[{j}]");
        if m.name.is_empty() {
            v.push(format!("{mf}.name"), "required");
        } else if !volumes.contains(&m.name) {
            v.push(
                format!("{mf}.name"),
                format!("volume {:?} is not declared in spec.volumes", m.name),
            );
        }
        if m.mount_path.is_empty() {
            v.push(format!("{mf}.mountPath"), "required");
        } else if !m.mount_path.starts_with('/') {
            v.push(
                format!("{mf}.mountPath"),
                format!("{:?} must be an absolute path", m.mount_path),
            );
        } else if !paths.insert(m.mount_path.trim_end_matches('/').to_string()) {
            v.push(
                format!("{mf}.mountPath"),
                format!(
                    "{:?} is mounted more than once in this container",
                    m.mount_path
                ),
            );
        }
        volumes::validate_mount(c, m, &mf, v);
    }
    for (j, d) in c.volume_devices.iter().flatten().enumerate() {
        v.push(
            format!("{field}.volumeDevices[{j}]"),
            format!(
                "block device {:?} needs a persistentVolumeClaim volume, which static pods cannot use",
                d.name
            ),
        );
    }
}

fn validate_ports(
    c: &Container,
    field: &str,
    host_network: bool,
    host_ports: &mut BTreeSet<(String, i32, String)>,
    v: &mut Errors,
) {
    let mut names = BTreeSet::new();
    for (j, p) in c.ports.iter().flatten().enumerate() {
        let pf = format!("{field}.ports[{j}]");
        if !(1..=65535).contains(&p.container_port) {
            v.push(
                format!("{pf}.containerPort"),
                format!("{} is not a valid port (1-65535)", p.container_port),
            );
        }
        if let Some(hp) = p.host_port {
            if !(0..=65535).contains(&hp) {
                v.push(
                    format!("{pf}.hostPort"),
                    format!("{hp} is not a valid port (0-65535)"),
                );
            } else if host_network && hp != 0 && hp != p.container_port {
                v.push(
                    format!("{pf}.hostPort"),
                    format!(
                        "{hp} must match containerPort {} when hostNetwork is true",
                        p.container_port
                    ),
                );
            }
        }
        let proto = p.protocol.as_deref().unwrap_or("TCP");
        if !matches!(proto, "TCP" | "UDP" | "SCTP") {
            v.push(
                format!("{pf}.protocol"),
                format!("{proto:?} is not one of TCP, UDP, SCTP"),
            );
        }
        if let Some(name) = p.name.as_deref() {
            if !is_port_name(name) {
                v.push(
                    format!("{pf}.name"),
                    format!("{name:?} is not a valid port name (IANA_SVC_NAME: at most 15 lowercase alphanumerics or '-', at least one letter, no '-' at the ends or twice in a row)"),
                );
            } else if !names.insert(name.to_string()) {
                v.push(
                    format!("{pf}.name"),
                    format!("duplicate port name {name:?}"),
                );
            }
        }
        let host_port = if host_network {
            p.container_port
        } else {
            p.host_port.unwrap_or(0)
        };
        if host_port > 0 {
            let key = (
                p.host_ip.clone().unwrap_or_default(),
                host_port,
                proto.to_string(),
            );
            if !host_ports.insert(key) {
                v.push(
                    format!("{pf}.hostPort"),
                    format!("host port {host_port}/{proto} is already used by another port"),
                );
            }
        }
    }
}

/// A DNS-1123 label not seen before in `seen` (a container or volume name).
pub(super) fn check_name(
    name: &str,
    field: &str,
    what: &str,
    seen: &mut BTreeSet<String>,
    v: &mut Errors,
) {
    if !is_dns1123_label(name) {
        v.push(
            field,
            if name.is_empty() {
                "required".to_string()
            } else {
                format!("{name:?} is not a valid DNS-1123 label")
            },
        );
    } else if !seen.insert(name.to_string()) {
        v.push(field, format!("duplicate {what} name {name:?}"));
    }
}

/// `metadata.labels['<key>']` or `metadata.annotations['<key>']`.
pub(super) fn is_metadata_subscript(path: &str) -> bool {
    ["metadata.labels['", "metadata.annotations['"]
        .iter()
        .any(|prefix| {
            path.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix("']"))
                .is_some_and(|k| !k.is_empty())
        })
}

/// Field paths an environment variable can hold.
fn is_env_field_path(path: &str) -> bool {
    is_metadata_subscript(path)
        || matches!(
            path,
            "metadata.name"
                | "metadata.namespace"
                | "metadata.uid"
                | "spec.nodeName"
                | "spec.serviceAccountName"
                | "status.hostIP"
                | "status.hostIPs"
                | "status.podIP"
                | "status.podIPs"
        )
}

fn validate_env(c: &Container, field: &str, container_names: &BTreeSet<&str>, v: &mut Errors) {
    for (j, e) in c.env.iter().flatten().enumerate() {
        let ef = format!("{field}.env[{j}]");
        if e.name.is_empty() {
            v.push(format!("{ef}.name"), "required");
        } else if !is_env_var_name(&e.name) {
            v.push(
                format!("{ef}.name"),
                format!(
                    "{:?} is not a valid environment variable name ([-._a-zA-Z][-._a-zA-Z0-9]*)",
                    e.name
                ),
            );
        }
        if let Some(from) = &e.value_from {
            if e.value.as_deref().is_some_and(|s| !s.is_empty()) {
                v.push(
                    format!("{ef}.valueFrom"),
                    "may not be specified when value is not empty",
                );
            }
            if from.secret_key_ref.is_some() {
                v.push(
                    format!("{ef}.valueFrom.secretKeyRef"),
                    format!("{STATIC_REF} (secrets)"),
                );
            }
            if from.config_map_key_ref.is_some() {
                v.push(
                    format!("{ef}.valueFrom.configMapKeyRef"),
                    format!("{STATIC_REF} (config maps)"),
                );
            }
            if from.file_key_ref.is_some() {
                v.push(format!("{ef}.valueFrom.fileKeyRef"), "not supported yet");
            }
            if let Some(f) = &from.field_ref {
                if f.api_version.as_deref().is_some_and(|a| a != "v1") {
                    v.push(
                        format!("{ef}.valueFrom.fieldRef.apiVersion"),
                        "only \"v1\" is supported",
                    );
                }
                if !is_env_field_path(&f.field_path) {
                    v.push(
                        format!("{ef}.valueFrom.fieldRef.fieldPath"),
                        format!(
                            "{:?} is not supported in environment variables (supported: metadata.name, metadata.namespace, metadata.uid, metadata.labels['<key>'], metadata.annotations['<key>'], spec.nodeName, spec.serviceAccountName, status.hostIP, status.hostIPs, status.podIP, status.podIPs)",
                            f.field_path
                        ),
                    );
                }
            }
            if let Some(r) = &from.resource_field_ref {
                let rf = format!("{ef}.valueFrom.resourceFieldRef");
                if let Some(n) = r.container_name.as_deref().filter(|n| !n.is_empty()) {
                    if !container_names.contains(n) {
                        v.push(
                            format!("{rf}.containerName"),
                            format!("{n:?} is not a container of the pod"),
                        );
                    }
                }
                volumes::check_resource_ref(&r.resource, r.divisor.as_ref(), &rf, v);
            }
        }
    }
    for (j, e) in c.env_from.iter().flatten().enumerate() {
        let ef = format!("{field}.envFrom[{j}]");
        if e.secret_ref.is_some() {
            v.push(format!("{ef}.secretRef"), format!("{STATIC_REF} (secrets)"));
        }
        if e.config_map_ref.is_some() {
            v.push(
                format!("{ef}.configMapRef"),
                format!("{STATIC_REF} (config maps)"),
            );
        }
    }
}

#[cfg(test)]
mod tests;
