//! staticpod: manifests from a file or URL -> validated static pods with the kubelet's
//! defaults (pkg/kubelet/config/common.go applyDefaults) and podvisor's content hashes.
//!
//! A pod is accepted if and only if the runtime will run it: besides the API server's and the
//! kubelet's validation ([`crate::pod::validation`]), every pod goes through the runtime's own
//! spec build and libcontainer's spec checks ([`crate::runtime::check::check_pod`]), so
//! every refusal of the runtime is a field error here, and last-known-good keeps the running
//! pod. Only what depends on the host or the image at start is left to the start (that
//! module's header lists it).
//!
//! A file holds exactly one Pod; a URL body holds a Pod, a PodList (kind `PodList` or `List`
//! with `items`) or several YAML documents, each a Pod or a PodList. apiVersion/kind are checked
//! on the raw document first (k8s-openapi's `Pod` does not keep them), then each pod is
//! deserialized, defaulted and validated; every problem of a manifest is reported at once, each
//! with its field path and, from the manifest text, its line:column.
//!
//! Identity: `spec_hash` is the sha256 of the manifest as written (canonical JSON, so comments,
//! formatting, quoting and key order do not count) minus labels, annotations and server-set
//! metadata; `meta_hash` covers labels and annotations. The UID derives from the source, the
//! node, the full name and `spec_hash`: editing labels or annotations keeps the UID (nothing
//! restarts), any other edit gives a new UID (the pod is replaced), like the kubelet's
//! content-hash UID.

use std::path::Path;

use k8s_openapi::api::core::v1::{Pod, Toleration};
use sha2::{Digest, Sha256};

use crate::pod::manifest::{self, FieldError, ManifestError, RawNode};
use crate::pod::validation::{self, ValidationOptions};
use crate::security::NodeSecurity;

/// Annotation naming the source kind (`file`, `http` or `api`).
pub const CONFIG_SOURCE_ANNOTATION: &str = "kubernetes.io/config.source";
/// Annotation holding when podvisor first read the pod (RFC 3339).
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";
/// Annotation holding the pod's UID (the content hash).
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// Where a manifest came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    /// A file in the manifest directory: one Pod per file.
    File,
    /// A URL body: a Pod, a PodList/List, or several YAML documents.
    Http,
    /// A pod pushed to the node API (`PUT /api/v1/namespaces/{ns}/pods/{name}`): one Pod,
    /// named as written (no node suffix, as the kubelet's API pods).
    Api,
}

impl SourceKind {
    /// The value of the `kubernetes.io/config.source` annotation.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::File => "file",
            SourceKind::Http => "http",
            SourceKind::Api => "api",
        }
    }
}

/// A validated pod with the static-pod defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticPod {
    /// Validated, with the static-pod defaults applied.
    pub pod: Pod,
    /// The file path or the URL the pod came from.
    pub source: String,
    /// `namespace/name` after defaults.
    pub full_name: String,
    /// Hex sha256 of the normalized manifest as written, labels and annotations left out.
    pub spec_hash: String,
    /// Hex sha256 of the labels and annotations as written.
    pub meta_hash: String,
    /// What the defaulting changed that the user should know (a volume with no source it
    /// knows became an emptyDir), each naming the file, line:column and the dropped key;
    /// recorded as Warning events of the pod. Not persisted.
    pub warnings: Vec<String>,
}

impl StaticPod {
    /// The pod's UID (derived from source, node, full name and `spec_hash`).
    pub fn uid(&self) -> &str {
        self.pod.metadata.uid.as_deref().unwrap_or("")
    }
}

/// Loads every pod of a manifest from `source` for node `node_name`, or the first error
/// (holding every problem of the failing pod), as a node with the kubelet's defaults and no
/// AppArmor would ([`NodeSecurity::default`]; the daemon uses [`load_manifest_on`]).
/// `now_rfc3339` becomes the `kubernetes.io/config.seen` annotation. An empty `node_name`
/// leaves names unsuffixed.
pub fn load_manifest(
    data: &[u8],
    source: &str,
    kind: SourceKind,
    node_name: &str,
    now_rfc3339: &str,
) -> Result<Vec<StaticPod>, ManifestError> {
    load_manifest_on(
        data,
        source,
        kind,
        node_name,
        now_rfc3339,
        &NodeSecurity::default(),
    )
}

/// [`load_manifest`] for a node offering `security`: sysctls, seccomp and AppArmor profiles
/// it cannot give are refused, naming the field.
pub fn load_manifest_on(
    data: &[u8],
    source: &str,
    kind: SourceKind,
    node_name: &str,
    now_rfc3339: &str,
    security: &NodeSecurity,
) -> Result<Vec<StaticPod>, ManifestError> {
    load(
        data,
        source,
        kind,
        &Defaults::Static {
            node_name,
            now_rfc3339,
        },
        security,
    )
}

/// A pod pushed to the node API as `namespace/name` (the request path): one Pod, validated
/// as a file's, named as written (no node suffix), `namespace`/`name` filled in when the
/// manifest leaves them out and refused (naming the field) when it says otherwise;
/// `kubernetes.io/config.source: api`. `source` is its key ([`crate::sources::api::source_key`]).
#[allow(clippy::too_many_arguments)]
pub fn load_api_pod(
    data: &[u8],
    source: &str,
    namespace: &str,
    name: &str,
    node_name: &str,
    now_rfc3339: &str,
    security: &NodeSecurity,
) -> Result<StaticPod, ManifestError> {
    let mut pods = load(
        data,
        source,
        SourceKind::Api,
        &Defaults::Api {
            node_name,
            now_rfc3339,
            namespace,
            name,
        },
        security,
    )?;
    match pods.pop() {
        Some(p) if pods.is_empty() => Ok(p),
        _ => Err(ManifestError::invalid_field(
            source,
            FieldError::new("(document)", "a pushed manifest holds exactly one Pod"),
        )),
    }
}

/// `podvisor validate FILE`: reads one manifest file (10 MB limit; the manifest directory's
/// name filter is not applied) and loads it as a file source for `node_name` on a node
/// offering `security`.
pub fn validate_file(
    path: &Path,
    node_name: &str,
    security: &NodeSecurity,
) -> Result<Vec<StaticPod>, ManifestError> {
    let data = manifest::read_manifest_file(path)?;
    load_manifest_on(
        &data,
        &path.display().to_string(),
        SourceKind::File,
        node_name,
        &crate::logs::timestamp::now_rfc3339(),
        security,
    )
}

/// `podvisor play`: one Pod from a file, validated like a static pod; the name stays as
/// written, namespace `default`, and the UID is derived like a static pod's (no node).
pub(crate) fn load_manifest_for_play(
    data: &[u8],
    source: &str,
    security: &NodeSecurity,
) -> Result<StaticPod, ManifestError> {
    let mut pods = load(data, source, SourceKind::File, &Defaults::Play, security)?;
    match pods.pop() {
        Some(p) if pods.is_empty() => Ok(p),
        _ => Err(ManifestError::invalid_field(
            source,
            FieldError::new("(document)", "a manifest file holds exactly one Pod"),
        )),
    }
}

/// The UID of a static pod: 32 hex characters of sha256 over source, node, full name and
/// spec hash.
pub fn pod_uid(source: &str, node_name: &str, full_name: &str, spec_hash: &str) -> String {
    let mut h = Sha256::new();
    for part in [source, node_name, full_name, spec_hash] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    hex::encode(&h.finalize()[..16])
}

enum Defaults<'a> {
    Static {
        node_name: &'a str,
        now_rfc3339: &'a str,
    },
    /// A pushed pod: the request path's namespace and name.
    Api {
        node_name: &'a str,
        now_rfc3339: &'a str,
        namespace: &'a str,
        name: &'a str,
    },
    Play,
}

fn load(
    data: &[u8],
    source: &str,
    kind: SourceKind,
    defaults: &Defaults<'_>,
    security: &NodeSecurity,
) -> Result<Vec<StaticPod>, ManifestError> {
    let text = manifest::manifest_text(data, source)?;
    let docs = manifest::parse_documents(text, source)?;
    if docs.is_empty() {
        return Err(ManifestError::Empty {
            source_name: source.into(),
        });
    }
    if kind != SourceKind::Http && docs.len() > 1 {
        let what = match kind {
            SourceKind::Api => "a pushed manifest",
            _ => "a manifest file",
        };
        return Err(ManifestError::invalid_field(
            source,
            FieldError::new(
                "(document)",
                format!(
                    "{what} holds exactly one Pod, found {} YAML documents",
                    docs.len()
                ),
            ),
        ));
    }
    let mut pods = Vec::new();
    for doc in &docs {
        let lenient = matches!(defaults, Defaults::Play);
        let items =
            pods_of_document(doc, kind, lenient).map_err(|errors| ManifestError::Invalid {
                source_name: source.into(),
                errors: errors
                    .into_iter()
                    .map(|e| {
                        let pos = doc.locate(&e.field);
                        e.at(pos)
                    })
                    .collect(),
            })?;
        for (prefix, node) in items {
            let pod = build(doc, &prefix, node, source, kind, defaults, security)?;
            // Like the kubelet's filterInvalidPods: one source may not name a pod twice.
            if pods
                .iter()
                .any(|p: &StaticPod| p.full_name == pod.full_name)
            {
                let field = format!("{prefix}metadata.name");
                let pos = doc.locate(&field);
                return Err(ManifestError::invalid_field(
                    source,
                    FieldError::new(
                        field,
                        format!("duplicate pod {:?} in this source", pod.full_name),
                    )
                    .at(pos),
                ));
            }
            pods.push(pod);
        }
    }
    Ok(pods)
}

/// The pods of one document with their path prefix (`""` or `items[3].`). `lenient`
/// (`podvisor play`, which always accepted them) lets a document without apiVersion and kind
/// stand for a v1 Pod; written values are still checked.
fn pods_of_document(
    doc: &RawNode,
    kind: SourceKind,
    lenient: bool,
) -> Result<Vec<(String, &RawNode)>, Vec<FieldError>> {
    if !matches!(doc, RawNode::Map(_)) {
        return Err(vec![FieldError::new(
            "(document)",
            format!("expected a Pod (a mapping), found {}", doc.type_name()),
        )]);
    }
    let mut errors = Vec::new();
    check_api_version(doc, "", !lenient, &mut errors);
    let doc_kind = doc.get("kind").map(|k| &k.value);
    let mut pods = Vec::new();
    match doc_kind {
        None | Some(RawNode::Null) if lenient => pods.push((String::new(), doc)),
        None | Some(RawNode::Null) => errors.push(FieldError::new("kind", "required")),
        Some(RawNode::String(k)) if k == "Pod" => pods.push((String::new(), doc)),
        Some(RawNode::String(k)) if (k == "PodList" || k == "List") && kind == SourceKind::Http => {
            let list = k == "List";
            match doc.get("items").map(|i| &i.value) {
                None | Some(RawNode::Null) => {}
                Some(RawNode::Seq(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        let prefix = format!("items[{i}].");
                        if !matches!(item.value, RawNode::Map(_)) {
                            errors.push(FieldError::new(
                                format!("items[{i}]"),
                                format!(
                                    "expected a Pod (a mapping), found {}",
                                    item.value.type_name()
                                ),
                            ));
                            continue;
                        }
                        check_api_version(&item.value, &prefix, list, &mut errors);
                        match item.value.get("kind").map(|k| &k.value) {
                            None | Some(RawNode::Null) if !list => {}
                            Some(RawNode::String(k)) if k == "Pod" => {}
                            None | Some(RawNode::Null) => {
                                errors.push(FieldError::new(format!("{prefix}kind"), "required"))
                            }
                            Some(other) => errors.push(FieldError::new(
                                format!("{prefix}kind"),
                                format!(
                                    "{} is not supported: list items must be Pods",
                                    describe(other)
                                ),
                            )),
                        }
                        pods.push((prefix, &item.value));
                    }
                }
                Some(other) => errors.push(FieldError::new(
                    "items",
                    format!("expected a list of Pods, found {}", other.type_name()),
                )),
            }
        }
        Some(RawNode::String(k)) if k == "PodList" || k == "List" => errors.push(FieldError::new(
            "kind",
            match kind {
                SourceKind::Api => format!("{k:?} is not supported: push one Pod per request"),
                _ => format!(
                    "{k:?} is not supported in a manifest file: a file holds exactly one Pod"
                ),
            },
        )),
        Some(other) => errors.push(FieldError::new(
            "kind",
            format!(
                "{} is not supported: expected {}",
                describe(other),
                match kind {
                    SourceKind::File | SourceKind::Api => "Pod",
                    SourceKind::Http => "Pod, PodList or List",
                }
            ),
        )),
    }
    if errors.is_empty() {
        Ok(pods)
    } else {
        Err(errors)
    }
}

fn describe(node: &RawNode) -> String {
    match node {
        RawNode::String(s) => format!("{s:?}"),
        other => other.type_name().to_string(),
    }
}

fn check_api_version(node: &RawNode, prefix: &str, required: bool, errors: &mut Vec<FieldError>) {
    let field = format!("{prefix}apiVersion");
    match node.get("apiVersion").map(|v| &v.value) {
        None | Some(RawNode::Null) if required => {
            errors.push(FieldError::new(field, "required (v1)"))
        }
        None | Some(RawNode::Null) => {}
        Some(RawNode::String(v)) if v == "v1" => {}
        Some(other) => errors.push(FieldError::new(
            field,
            format!("{} is not supported: expected v1", describe(other)),
        )),
    }
}

/// Metadata fields that are not part of what the user wrote for the pod to run.
const UNHASHED_METADATA: &[&str] = &[
    "labels",
    "annotations",
    "resourceVersion",
    "generation",
    "managedFields",
    "creationTimestamp",
    "uid",
    "selfLink",
];

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// `spec_hash` and `meta_hash` of one pod's tree.
fn hashes(node: &RawNode) -> (String, String) {
    let mut stripped = node.without_keys(&["apiVersion", "kind"]);
    if let RawNode::Map(entries) = &mut stripped {
        for (k, v) in entries.iter_mut() {
            if k.value == "metadata" {
                v.value = v.value.without_keys(UNHASHED_METADATA);
            }
        }
    }
    let meta = node.get("metadata").map(|m| &m.value);
    let field = |key: &str| {
        meta.and_then(|m| m.get(key))
            .map(|v| v.value.canonical_json())
            .unwrap_or_else(|| "null".into())
    };
    let meta_json = format!(
        "{{\"annotations\":{},\"labels\":{}}}",
        field("annotations"),
        field("labels")
    );
    (
        sha256_hex(&stripped.canonical_json()),
        sha256_hex(&meta_json),
    )
}

fn build(
    doc: &RawNode,
    prefix: &str,
    node: &RawNode,
    source: &str,
    kind: SourceKind,
    defaults: &Defaults<'_>,
    security: &NodeSecurity,
) -> Result<StaticPod, ManifestError> {
    let mut pod: Pod = manifest::from_tree(node).map_err(|e| {
        ManifestError::invalid_field(
            source,
            FieldError {
                field: format!("{prefix}{}", e.field),
                ..e
            },
        )
    })?;
    let warnings = default_volume_sources(&mut pod, node, doc, prefix, source);
    let (spec_hash, meta_hash) = hashes(node);
    if let Defaults::Api {
        namespace, name, ..
    } = defaults
    {
        api_identity(&mut pod, doc, prefix, source, namespace, name)?;
    }
    let written_name = pod.metadata.name.clone().unwrap_or_default();
    let (node_name, now) = match defaults {
        Defaults::Static {
            node_name,
            now_rfc3339,
        }
        | Defaults::Api {
            node_name,
            now_rfc3339,
            ..
        } => (*node_name, Some(*now_rfc3339)),
        Defaults::Play => ("", None),
    };
    if !written_name.is_empty() && !node_name.is_empty() && kind != SourceKind::Api {
        pod.metadata.name = Some(format!("{written_name}-{}", node_name.to_lowercase()));
    }
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some("default".into());
    }
    default_pull_policies(&mut pod);
    let full_name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    );
    let uid = pod_uid(source, node_name, &full_name, &spec_hash);
    pod.metadata.uid = Some(uid.clone());
    if let Some(now_rfc3339) = now {
        if let Some(spec) = pod.spec.as_mut() {
            if !node_name.is_empty() {
                spec.node_name = Some(node_name.to_string());
            }
            if kind == SourceKind::File {
                add_no_execute_toleration(&mut spec.tolerations);
            }
        }
        let ann = pod
            .metadata
            .annotations
            .get_or_insert_with(Default::default);
        ann.insert(CONFIG_SOURCE_ANNOTATION.into(), kind.as_str().into());
        ann.insert(CONFIG_SEEN_ANNOTATION.into(), now_rfc3339.into());
        ann.insert(CONFIG_HASH_ANNOTATION.into(), uid);
    }
    let opts = ValidationOptions {
        written_name: Some(written_name),
        security: Some(security),
    };
    let mut errors = validation::validate_pod(&pod, &opts);
    // The runtime's refusals that validation did not already report at the same field.
    for r in crate::runtime::check::check_pod(&pod, security) {
        let known = errors
            .iter()
            .any(|e| r.field.starts_with(&e.field) || e.field.starts_with(&r.field));
        if !known {
            errors.push(r);
        }
    }
    if !errors.is_empty() {
        return Err(ManifestError::Invalid {
            source_name: source.into(),
            errors: errors
                .into_iter()
                .map(|e| {
                    let field = format!("{prefix}{}", e.field);
                    let pos = doc.locate(&field);
                    FieldError {
                        field,
                        message: e.message,
                        pos,
                    }
                })
                .collect(),
        });
    }
    Ok(StaticPod {
        pod,
        source: source.into(),
        full_name,
        spec_hash,
        meta_hash,
        warnings,
    })
}

/// A pushed pod's namespace and name from the request path: filled in when the manifest
/// leaves them out; a manifest naming another one is refused, naming the field and where it is
/// (kube-apiserver refuses such a body too).
fn api_identity(
    pod: &mut Pod,
    doc: &RawNode,
    prefix: &str,
    source: &str,
    namespace: &str,
    name: &str,
) -> Result<(), ManifestError> {
    let mut errors = Vec::new();
    for (field, written, want) in [
        ("metadata.namespace", &mut pod.metadata.namespace, namespace),
        ("metadata.name", &mut pod.metadata.name, name),
    ] {
        match written.as_deref() {
            None | Some("") => *written = Some(want.to_string()),
            Some(w) if w == want => {}
            Some(w) => {
                let path = format!("{prefix}{field}");
                let pos = doc.locate(&path);
                errors.push(
                    FieldError::new(
                        path,
                        format!("{w:?} does not match {want:?} in the request path"),
                    )
                    .at(pos),
                );
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ManifestError::Invalid {
            source_name: source.into(),
            errors,
        })
    }
}

/// The API server's `SetDefaults_Volume`: a volume with no source it knows becomes an
/// emptyDir (so a misspelled `empty-dir:` runs under a kubelet, with an empty directory). The
/// key that was not understood is logged as a warning, once per manifest location and key,
/// and returned (the sync loop records it as a Warning event of the pod).
fn default_volume_sources(
    pod: &mut Pod,
    node: &RawNode,
    doc: &RawNode,
    prefix: &str,
    source: &str,
) -> Vec<String> {
    let mut warnings = Vec::new();
    let Some(volumes) = pod.spec.as_mut().and_then(|s| s.volumes.as_mut()) else {
        return warnings;
    };
    let raw = node
        .get("spec")
        .and_then(|s| s.value.get("volumes"))
        .map(|v| &v.value);
    for (i, vol) in volumes.iter_mut().enumerate() {
        let has_source = match serde_json::to_value(&*vol) {
            Ok(serde_json::Value::Object(m)) => m.iter().any(|(k, v)| k != "name" && !v.is_null()),
            _ => true,
        };
        if has_source {
            continue;
        }
        vol.empty_dir = Some(Default::default());
        let dropped: Vec<String> = match raw {
            Some(RawNode::Seq(items)) => match items.get(i).map(|n| &n.value) {
                Some(RawNode::Map(entries)) => entries
                    .iter()
                    .map(|(k, _)| k.value.clone())
                    .filter(|k| k != "name")
                    .collect(),
                _ => Vec::new(),
            },
            _ => Vec::new(),
        };
        let field = format!("{prefix}spec.volumes[{i}]");
        let what = if dropped.is_empty() {
            "no volume source".to_string()
        } else {
            format!(
                "unknown volume source {} (dropped)",
                dropped
                    .iter()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let error = FieldError::new(
            field,
            format!("{what}: defaulted to emptyDir, as the API server does"),
        )
        .at(doc.locate(&format!("{prefix}spec.volumes[{i}]")));
        let message = format!("{source}{error}");
        warn_once(message.clone());
        warnings.push(message);
    }
    warnings
}

/// Logs `message` as a warning the first time it is seen in this process: manifests are
/// read again every few seconds.
fn warn_once(message: String) {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if seen.len() < 10_000 && seen.insert(message.clone()) {
        log::warn!("{message}");
    }
}

/// The kubelet's `AddOrUpdateTolerationInPod(pod, {operator: Exists, effect: NoExecute})`.
fn add_no_execute_toleration(tolerations: &mut Option<Vec<Toleration>>) {
    let want = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Default::default()
    };
    let list = tolerations.get_or_insert_with(Vec::new);
    if !list.contains(&want) {
        list.push(want);
    }
}

/// Reads a manifest file for `podvisor play`: the same parsing and validation as static pods,
/// but the name stays as written (no node suffix) and no kubelet annotations are added;
/// namespace `default` and a deterministic UID are applied.
pub fn load_pod_file(path: &Path, security: &NodeSecurity) -> Result<Pod, ManifestError> {
    let data = manifest::read_manifest_file(path)?;
    load_manifest_for_play(&data, &path.display().to_string(), security).map(|p| p.pod)
}

/// The API server's default `imagePullPolicy` for `image` (`SetDefaults_Container`): `Always`
/// when the tag is `latest` or there is no tag (and no digest), otherwise `IfNotPresent`.
pub fn default_pull_policy(image: &str) -> &'static str {
    let (name, has_digest) = match image.split_once('@') {
        Some((n, _)) => (n, true),
        None => (image, false),
    };
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':') {
        Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
        None if has_digest => "IfNotPresent",
        None => "Always",
    }
}

/// Applies the defaults a pod gets without a node: namespace `default`, unless set a UID
/// derived from the source and the manifest bytes (the same manifest always gets the same UID),
/// and the default pull policies.
pub fn apply_defaults(pod: &mut Pod, source_name: &str, data: &[u8]) {
    if pod.metadata.namespace.as_deref().unwrap_or("").is_empty() {
        pod.metadata.namespace = Some("default".into());
    }
    if pod.metadata.uid.as_deref().unwrap_or("").is_empty() {
        let mut h = Sha256::new();
        h.update(source_name.as_bytes());
        h.update([0u8]);
        h.update(data);
        pod.metadata.uid = Some(hex::encode(&h.finalize()[..16]));
    }
    default_pull_policies(pod);
}

/// Sets every container's unset `imagePullPolicy` to [`default_pull_policy`] of its image.
pub fn default_pull_policies(pod: &mut Pod) {
    if let Some(spec) = pod.spec.as_mut() {
        let inits = spec.init_containers.iter_mut().flatten();
        for c in inits.chain(spec.containers.iter_mut()) {
            if c.image_pull_policy.as_deref().unwrap_or("").is_empty() {
                let policy = default_pull_policy(c.image.as_deref().unwrap_or(""));
                c.image_pull_policy = Some(policy.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests;
