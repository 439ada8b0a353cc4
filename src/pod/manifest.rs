//! manifest: reading one Pod manifest (YAML or JSON) into a validated, defaulted `v1 Pod`.
//!
//! Phase one parses with serde-saphyr into k8s-openapi's raw `Pod`; syntax and type errors
//! name the source and its line:column, and alias bombs are stopped by the parser's budget.
//! Phase two checks what podvisor needs to run the pod (kind, names, containers, images) and
//! applies the defaults every static pod gets (namespace `default`, a deterministic UID).

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use sha2::{Digest, Sha256};

/// Largest manifest accepted (the kubelet's maxConfigLength).
pub const MAX_MANIFEST_BYTES: usize = 10 * 1024 * 1024;

/// Errors reading a manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{source_name}: {size} bytes is over the {max}-byte manifest limit")]
    TooLarge {
        source_name: String,
        size: usize,
        max: usize,
    },
    #[error("{source_name}: manifest is empty")]
    Empty { source_name: String },
    #[error("{source_name}: manifest is not UTF-8")]
    NotUtf8 { source_name: String },
    #[error("{source_name}{location}: {message}")]
    Syntax {
        source_name: String,
        location: String,
        message: String,
    },
    #[error("{source_name}: {field}: {message}")]
    Invalid {
        source_name: String,
        field: String,
        message: String,
    },
    #[error("failed to read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

fn yaml_options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    // A Pod manifest needs few aliases; these limits stop "billion laughs" expansions early.
    budget.max_aliases = 1_000;
    budget.max_anchors = 1_000;
    budget.max_events = 200_000;
    let mut opts = serde_saphyr::Options::default();
    opts.budget = Some(budget);
    opts.with_snippet = false;
    opts
}

/// Parses manifest bytes into a raw Pod. `source_name` names the file or URL in errors.
pub fn parse_pod(data: &[u8], source_name: &str) -> Result<Pod, ManifestError> {
    if data.len() > MAX_MANIFEST_BYTES {
        return Err(ManifestError::TooLarge {
            source_name: source_name.into(),
            size: data.len(),
            max: MAX_MANIFEST_BYTES,
        });
    }
    let text = std::str::from_utf8(data).map_err(|_| ManifestError::NotUtf8 {
        source_name: source_name.into(),
    })?;
    if text.trim().is_empty() {
        return Err(ManifestError::Empty {
            source_name: source_name.into(),
        });
    }
    serde_saphyr::from_str_with_options::<Pod>(text, yaml_options()).map_err(|e| {
        let location = e
            .location()
            .map(|l| format!(":{}:{}", l.line(), l.column()))
            .unwrap_or_default();
        ManifestError::Syntax {
            source_name: source_name.into(),
            location,
            message: e.without_snippet().to_string(),
        }
    })
}

/// Reads and parses a manifest file, validates it and applies the static-pod defaults.
pub fn load_pod_file(path: &Path) -> Result<Pod, ManifestError> {
    let data = std::fs::read(path).map_err(|source| ManifestError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let name = path.display().to_string();
    let mut pod = parse_pod(&data, &name)?;
    validate(&pod, &name)?;
    apply_defaults(&mut pod, &name, &data);
    Ok(pod)
}

fn invalid(
    source_name: &str,
    field: impl Into<String>,
    message: impl Into<String>,
) -> ManifestError {
    ManifestError::Invalid {
        source_name: source_name.into(),
        field: field.into(),
        message: message.into(),
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

/// The checks podvisor needs before it can run a pod.
pub fn validate(pod: &Pod, source_name: &str) -> Result<(), ManifestError> {
    // k8s-openapi's Pod does not keep apiVersion/kind (they are implied by the type), so a
    // manifest of another kind is caught by its missing or foreign fields below.
    let name = pod.metadata.name.as_deref().unwrap_or("");
    if name.is_empty() {
        return Err(invalid(source_name, "metadata.name", "required"));
    }
    if !is_dns1123_subdomain(name) {
        return Err(invalid(
            source_name,
            "metadata.name",
            format!("{name:?} is not a valid DNS-1123 subdomain (lowercase letters, digits, '-' and '.')"),
        ));
    }
    if let Some(ns) = pod.metadata.namespace.as_deref() {
        if !is_dns1123_label(ns) {
            return Err(invalid(
                source_name,
                "metadata.namespace",
                format!("{ns:?} is not a valid DNS-1123 label"),
            ));
        }
    }
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| invalid(source_name, "spec", "required"))?;
    if spec.containers.is_empty() {
        return Err(invalid(
            source_name,
            "spec.containers",
            "at least one container is required",
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let lists = [
        (
            "spec.initContainers",
            spec.init_containers.as_deref().unwrap_or(&[]),
        ),
        ("spec.containers", &spec.containers[..]),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            let field = format!("{list}[{i}]");
            if !is_dns1123_label(&c.name) {
                return Err(invalid(
                    source_name,
                    format!("{field}.name"),
                    format!("{:?} is not a valid DNS-1123 label", c.name),
                ));
            }
            if !seen.insert(c.name.clone()) {
                return Err(invalid(
                    source_name,
                    format!("{field}.name"),
                    format!("duplicate container name {:?}", c.name),
                ));
            }
            if c.image.as_deref().unwrap_or("").trim().is_empty() {
                return Err(invalid(source_name, format!("{field}.image"), "required"));
            }
        }
    }
    if spec
        .ephemeral_containers
        .as_ref()
        .is_some_and(|e| !e.is_empty())
    {
        return Err(invalid(
            source_name,
            "spec.ephemeralContainers",
            "static pods cannot have ephemeral containers",
        ));
    }
    Ok(())
}

/// Applies the defaults a static pod gets: namespace `default` and, unless set, a UID derived
/// from the source and the manifest bytes (the same manifest always gets the same UID).
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: busybox\n    resources:\n      limits: {memory: 64Mi, cpu: 500m}\n";

    #[test]
    fn parses_and_defaults_a_pod() {
        let mut pod = parse_pod(GOOD.as_bytes(), "web.yaml").expect("parse");
        validate(&pod, "web.yaml").expect("valid");
        apply_defaults(&mut pod, "web.yaml", GOOD.as_bytes());
        assert_eq!(pod.metadata.namespace.as_deref(), Some("default"));
        let uid = pod.metadata.uid.clone().expect("uid");
        assert_eq!(uid.len(), 32);
        let mut again = parse_pod(GOOD.as_bytes(), "web.yaml").expect("parse");
        apply_defaults(&mut again, "web.yaml", GOOD.as_bytes());
        assert_eq!(again.metadata.uid, Some(uid));
    }

    #[test]
    fn json_manifests_parse_too() {
        let json = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"j"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
        let pod = parse_pod(json.as_bytes(), "j.json").expect("parse");
        assert_eq!(pod.metadata.name.as_deref(), Some("j"));
    }

    #[test]
    fn syntax_error_names_file_line_and_column() {
        let bad =
            "metadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    image: [unclosed\n";
        let err = parse_pod(bad.as_bytes(), "bad.yaml").expect_err("must fail");
        let msg = err.to_string();
        assert!(msg.starts_with("bad.yaml:"), "{msg}");
        assert!(
            msg.split(':')
                .nth(1)
                .is_some_and(|l| l.parse::<u64>().is_ok()),
            "{msg}"
        );
    }

    #[test]
    fn type_error_names_location() {
        let bad = "metadata:\n  name: web\nspec:\n  containers: 12\n";
        let msg = parse_pod(bad.as_bytes(), "t.yaml")
            .expect_err("must fail")
            .to_string();
        assert!(msg.starts_with("t.yaml:4:"), "{msg}");
    }

    #[test]
    fn billion_laughs_is_refused_quickly() {
        let mut y = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let mut prev = 'a';
        for c in "bcdefghij".chars() {
            y.push_str(&format!("{c}: &{c} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
            prev = c;
        }
        y.push_str("metadata: {name: x}\nspec: {containers: []}\n");
        let start = std::time::Instant::now();
        let err = parse_pod(y.as_bytes(), "bomb.yaml").expect_err("must fail");
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "took {:?}",
            start.elapsed()
        );
        assert!(err.to_string().starts_with("bomb.yaml"), "{err}");
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            ("metadata: {name: Web}\nspec: {containers: [{name: a, image: b}]}\n", "metadata.name"),
            ("metadata: {name: w}\nspec: {containers: []}\n", "spec.containers"),
            ("metadata: {name: w}\nspec: {containers: [{name: a}]}\n", "spec.containers[0].image"),
            ("metadata: {name: w}\nspec: {initContainers: [{name: a, image: x}], containers: [{name: a, image: b}]}\n", "spec.containers[0].name"),
            ("metadata: {name: w}\n", "spec"),
        ];
        for (y, field) in cases {
            let pod = parse_pod(y.as_bytes(), "v.yaml").expect("parse");
            let msg = validate(&pod, "v.yaml").expect_err(y).to_string();
            assert!(msg.contains(&format!(": {field}:")), "{field} not in {msg}");
        }
    }

    #[test]
    fn empty_and_oversized_manifests_are_refused() {
        assert!(matches!(
            parse_pod(b"  \n", "e.yaml"),
            Err(ManifestError::Empty { .. })
        ));
        let big = vec![b'#'; MAX_MANIFEST_BYTES + 1];
        assert!(matches!(
            parse_pod(&big, "b.yaml"),
            Err(ManifestError::TooLarge { .. })
        ));
    }
}
