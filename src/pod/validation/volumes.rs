//! validation::volumes: the checks of `spec.volumes` and of the containers' `volumeMounts`
//! that the API server and podvisor's runtime apply, so that every volume the runtime would
//! refuse is refused here, naming the field (runtime::volumes prepares them, runtime::spec
//! mounts them).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, DownwardAPIVolumeFile, PodSpec, Volume, VolumeMount};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::{check_name, is_metadata_subscript, Errors, STATIC_REF};
use crate::pod::quantity;

/// The volume sources podvisor prepares.
const SUPPORTED: &[&str] = &["hostPath", "emptyDir", "downwardAPI", "projected"];

/// hostPath `type` values (the empty string is "no check").
const HOST_PATH_TYPES: &[&str] = &[
    "",
    "DirectoryOrCreate",
    "Directory",
    "FileOrCreate",
    "File",
    "Socket",
    "CharDevice",
    "BlockDevice",
];

/// The page size of a `HugePages[-<size>]` medium (`2M` when unsized, the usual default).
pub fn hugepage_size(medium: &str) -> Option<String> {
    match medium {
        "HugePages" => Some("2M".into()),
        m => {
            let size = m.strip_prefix("HugePages-")?;
            let bytes = crate::pod::quantity::parse_bytes(
                &k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.into()),
            )
            .ok()?;
            (bytes > 0).then(|| bytes.to_string())
        }
    }
}

/// Checks the volumes; returns the declared names.
pub(super) fn validate_volumes(spec: &PodSpec, v: &mut Errors) -> BTreeSet<String> {
    let volumes = spec.volumes.as_deref().unwrap_or(&[]);
    let mut names = BTreeSet::new();
    for (i, vol) in volumes.iter().enumerate() {
        let field = format!("spec.volumes[{i}]");
        check_name(&vol.name, &format!("{field}.name"), "volume", &mut names, v);
        let sources = volume_source_names(vol);
        if sources.len() > 1 {
            v.push(
                &field,
                format!(
                    "may not specify more than 1 volume type (found {})",
                    sources.join(", ")
                ),
            );
        }
        refuse_api_objects(vol, &field, v);
        if let Some(key) = sources
            .iter()
            .find(|k| !SUPPORTED.contains(&k.as_str()) && !refused_elsewhere(k))
        {
            v.push(
                format!("{field}.{key}"),
                format!(
                    "{key} volumes are not supported by podvisor (supported: {})",
                    SUPPORTED.join(", ")
                ),
            );
        }
        if let Some(hp) = &vol.host_path {
            let hf = format!("{field}.hostPath");
            if hp.path.is_empty() {
                v.push(format!("{hf}.path"), "required");
            } else if !hp.path.starts_with('/') {
                v.push(
                    format!("{hf}.path"),
                    format!("{:?} must be an absolute path", hp.path),
                );
            } else if hp.path.split('/').any(|s| s == "..") {
                v.push(
                    format!("{hf}.path"),
                    format!("{:?} must not contain '..'", hp.path),
                );
            }
            let t = hp.type_.as_deref().unwrap_or("");
            if !HOST_PATH_TYPES.contains(&t) {
                v.push(
                    format!("{hf}.type"),
                    format!(
                        "{t:?} is not one of DirectoryOrCreate, Directory, FileOrCreate, File, Socket, CharDevice, BlockDevice"
                    ),
                );
            }
        }
        if let Some(ed) = &vol.empty_dir {
            let ef = format!("{field}.emptyDir");
            match ed.medium.as_deref().unwrap_or("") {
                "" | "Memory" => {}
                m if hugepage_size(m).is_some() => {}
                m => v.push(
                    format!("{ef}.medium"),
                    format!("{m:?} is not one of \"\", Memory, HugePages, HugePages-<size>"),
                ),
            }
            if let Some(q) = &ed.size_limit {
                if let Err(e) = quantity::parse_bytes(q) {
                    v.push(format!("{ef}.sizeLimit"), e.to_string());
                }
            }
        }
        if let Some(d) = &vol.downward_api {
            let df = format!("{field}.downwardAPI");
            check_mode(d.default_mode, &format!("{df}.defaultMode"), v);
            let mut paths = BTreeSet::new();
            check_items(spec, d.items.as_deref().unwrap_or(&[]), &df, &mut paths, v);
        }
        if let Some(p) = &vol.projected {
            let pf = format!("{field}.projected");
            check_mode(p.default_mode, &format!("{pf}.defaultMode"), v);
            let mut paths = BTreeSet::new();
            for (j, src) in p.sources.iter().flatten().enumerate() {
                if let Some(d) = &src.downward_api {
                    let sf = format!("{pf}.sources[{j}].downwardAPI");
                    check_items(spec, d.items.as_deref().unwrap_or(&[]), &sf, &mut paths, v);
                }
            }
        }
    }
    names
}

/// Sources refused by [`refuse_api_objects`] with their own message.
fn refused_elsewhere(key: &str) -> bool {
    matches!(
        key,
        "secret"
            | "configMap"
            | "persistentVolumeClaim"
            | "ephemeral"
            | "csi"
            | "azureFile"
            | "scaleIO"
    )
}

fn refuse_api_objects(vol: &Volume, field: &str, v: &mut Errors) {
    let refused: [(&str, bool, &str); 5] = [
        ("secret", vol.secret.is_some(), "secrets"),
        ("configMap", vol.config_map.is_some(), "config maps"),
        (
            "persistentVolumeClaim",
            vol.persistent_volume_claim.is_some(),
            "persistent volume claims",
        ),
        (
            "ephemeral",
            vol.ephemeral.is_some(),
            "persistent volume claims",
        ),
        ("csi", vol.csi.is_some(), "CSI drivers"),
    ];
    for (key, present, what) in refused {
        if present {
            v.push(format!("{field}.{key}"), format!("{STATIC_REF} ({what})"));
        }
    }
    let secret_refs = [
        ("azureFile", vol.azure_file.is_some()),
        (
            "cephfs.secretRef",
            vol.cephfs.as_ref().is_some_and(|s| s.secret_ref.is_some()),
        ),
        (
            "cinder.secretRef",
            vol.cinder.as_ref().is_some_and(|s| s.secret_ref.is_some()),
        ),
        (
            "flexVolume.secretRef",
            vol.flex_volume
                .as_ref()
                .is_some_and(|s| s.secret_ref.is_some()),
        ),
        (
            "iscsi.secretRef",
            vol.iscsi.as_ref().is_some_and(|s| s.secret_ref.is_some()),
        ),
        (
            "rbd.secretRef",
            vol.rbd.as_ref().is_some_and(|s| s.secret_ref.is_some()),
        ),
        ("scaleIO.secretRef", vol.scale_io.is_some()),
        (
            "storageos.secretRef",
            vol.storageos
                .as_ref()
                .is_some_and(|s| s.secret_ref.is_some()),
        ),
    ];
    for (key, present) in secret_refs {
        if present {
            v.push(format!("{field}.{key}"), format!("{STATIC_REF} (secrets)"));
        }
    }
    if let Some(p) = &vol.projected {
        for (j, src) in p.sources.iter().flatten().enumerate() {
            let sf = format!("{field}.projected.sources[{j}]");
            let refused = [
                (
                    "serviceAccountToken",
                    src.service_account_token.is_some(),
                    "static pods cannot get service account tokens",
                ),
                (
                    "secret",
                    src.secret.is_some(),
                    "static pods cannot reference API objects (secrets)",
                ),
                (
                    "configMap",
                    src.config_map.is_some(),
                    "static pods cannot reference API objects (config maps)",
                ),
                (
                    "clusterTrustBundle",
                    src.cluster_trust_bundle.is_some(),
                    "static pods cannot reference API objects (cluster trust bundles)",
                ),
                (
                    "podCertificate",
                    src.pod_certificate.is_some(),
                    "static pods cannot get pod certificates",
                ),
            ];
            for (key, present, msg) in refused {
                if present {
                    v.push(format!("{sf}.{key}"), msg);
                }
            }
        }
    }
}

/// The volume source fields set on `vol` (their JSON names).
fn volume_source_names(vol: &Volume) -> Vec<String> {
    match serde_json::to_value(vol) {
        Ok(serde_json::Value::Object(m)) => m
            .into_iter()
            .filter(|(k, v)| k != "name" && !v.is_null())
            .map(|(k, _)| k)
            .collect(),
        _ => Vec::new(),
    }
}

fn check_mode(mode: Option<i32>, field: &str, v: &mut Errors) {
    if let Some(m) = mode {
        if !(0..=0o777).contains(&m) {
            v.push(field, format!("{m} must be between 0 and 0777 (511)"));
        }
    }
}

/// Field paths a downwardAPI volume file can hold.
fn is_volume_field_path(path: &str) -> bool {
    is_metadata_subscript(path)
        || matches!(
            path,
            "metadata.name"
                | "metadata.namespace"
                | "metadata.uid"
                | "metadata.labels"
                | "metadata.annotations"
        )
}

/// Resources a resourceFieldRef can name (podvisor's runtime gives cpu and memory).
pub(super) const RESOURCE_FIELD_REFS: &[&str] = &[
    "limits.cpu",
    "limits.memory",
    "requests.cpu",
    "requests.memory",
];

/// Checks a resourceFieldRef's resource and divisor.
pub(super) fn check_resource_ref(
    resource: &str,
    divisor: Option<&Quantity>,
    field: &str,
    v: &mut Errors,
) {
    if !RESOURCE_FIELD_REFS.contains(&resource) {
        v.push(
            format!("{field}.resource"),
            format!(
                "{resource:?} is not supported (supported: {})",
                RESOURCE_FIELD_REFS.join(", ")
            ),
        );
        return;
    }
    if let Some(d) = divisor {
        let parsed = if resource.ends_with(".cpu") {
            quantity::parse_cpu_millis(d)
        } else {
            quantity::parse_bytes(d)
        };
        match parsed {
            Ok(0) => v.push(format!("{field}.divisor"), "must not be zero"),
            Ok(_) => {}
            Err(e) => v.push(format!("{field}.divisor"), e.to_string()),
        }
    }
}

fn check_items(
    spec: &PodSpec,
    items: &[DownwardAPIVolumeFile],
    field: &str,
    paths: &mut BTreeSet<String>,
    v: &mut Errors,
) {
    for (k, item) in items.iter().enumerate() {
        let f = format!("{field}.items[{k}]");
        let p = &item.path;
        if p.is_empty() {
            v.push(format!("{f}.path"), "required");
        } else if p.starts_with('/') || p.starts_with("..") || p.split('/').any(|s| s == "..") {
            v.push(
                format!("{f}.path"),
                format!("{p:?} must be a relative path without '..' that does not start with '..'"),
            );
        } else if !paths.insert(p.clone()) {
            v.push(format!("{f}.path"), format!("duplicate path {p:?}"));
        }
        check_mode(item.mode, &format!("{f}.mode"), v);
        match (&item.field_ref, &item.resource_field_ref) {
            (Some(fr), None) => {
                if fr.api_version.as_deref().is_some_and(|a| a != "v1") {
                    v.push(
                        format!("{f}.fieldRef.apiVersion"),
                        "only \"v1\" is supported",
                    );
                }
                if !is_volume_field_path(&fr.field_path) {
                    v.push(
                        format!("{f}.fieldRef.fieldPath"),
                        format!(
                            "{:?} is not supported in a downwardAPI volume (supported: metadata.name, metadata.namespace, metadata.uid, metadata.labels, metadata.annotations, metadata.labels['<key>'], metadata.annotations['<key>'])",
                            fr.field_path
                        ),
                    );
                }
            }
            (None, Some(r)) => {
                let rf = format!("{f}.resourceFieldRef");
                match r.container_name.as_deref().filter(|n| !n.is_empty()) {
                    None => v.push(format!("{rf}.containerName"), "required in a volume"),
                    Some(n) => {
                        let known = spec
                            .containers
                            .iter()
                            .chain(spec.init_containers.iter().flatten())
                            .any(|c| c.name == n);
                        if !known {
                            v.push(
                                format!("{rf}.containerName"),
                                format!("{n:?} is not a container of the pod"),
                            );
                        }
                    }
                }
                check_resource_ref(&r.resource, r.divisor.as_ref(), &rf, v);
            }
            _ => v.push(&f, "must set exactly one of fieldRef and resourceFieldRef"),
        }
    }
}

/// Checks one `volumeMounts[j]` (`mf`) of container `c`.
pub(super) fn validate_mount(c: &Container, m: &VolumeMount, mf: &str, v: &mut Errors) {
    let sub_path = m.sub_path.as_deref().filter(|s| !s.is_empty());
    let sub_path_expr = m.sub_path_expr.as_deref().filter(|s| !s.is_empty());
    if let Some(sp) = sub_path {
        if sp.starts_with('/') || sp.split('/').any(|s| s == "..") {
            v.push(
                format!("{mf}.subPath"),
                format!("{sp:?} must be a relative path without '..'"),
            );
        }
    }
    if let Some(e) = sub_path_expr {
        if sub_path.is_some() {
            v.push(
                format!("{mf}.subPathExpr"),
                "subPathExpr and subPath are mutually exclusive",
            );
        } else if e.starts_with('/') || e.split('/').any(|s| s == "..") {
            v.push(
                format!("{mf}.subPathExpr"),
                format!("{e:?} must be a relative path without '..'"),
            );
        }
    }
    let privileged = c
        .security_context
        .as_ref()
        .and_then(|s| s.privileged)
        .unwrap_or(false);
    let propagation = m.mount_propagation.as_deref();
    match propagation {
        None | Some("None") | Some("HostToContainer") => {}
        Some("Bidirectional") if privileged => {}
        Some("Bidirectional") => v.push(
            format!("{mf}.mountPropagation"),
            "Bidirectional mount propagation is available only to privileged containers",
        ),
        Some(other) => v.push(
            format!("{mf}.mountPropagation"),
            format!("{other:?} is not one of None, HostToContainer, Bidirectional"),
        ),
    }
    match m.recursive_read_only.as_deref() {
        None | Some("Disabled") => {}
        Some(r @ ("IfPossible" | "Enabled")) => {
            let rf = format!("{mf}.recursiveReadOnly");
            if !m.read_only.unwrap_or(false) {
                v.push(&rf, format!("{r} needs readOnly: true"));
            } else if propagation.is_some_and(|p| p != "None") {
                v.push(&rf, format!("{r} needs mountPropagation None"));
            } else if r == "Enabled" && !crate::sys::kernel::supports_recursive_read_only() {
                v.push(
                    &rf,
                    "Enabled needs mount_setattr(2) (Linux 5.12 or later); this kernel has not",
                );
            }
        }
        Some(other) => v.push(
            format!("{mf}.recursiveReadOnly"),
            format!("{other:?} is not one of Disabled, IfPossible, Enabled"),
        ),
    }
}
