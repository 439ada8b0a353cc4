//! config::apiserver: what `podvisor run --kubeconfig FILE` needs to talk to a Kubernetes API
//! server — the KubeletConfiguration fields `nodeStatusUpdateFrequency`,
//! `nodeStatusReportFrequency`, `nodeLeaseDurationSeconds`, `nodeStatusMaxImages`,
//! `registerNode`, `registerWithTaints`, `kubeAPIQPS`, `kubeAPIBurst` (with the kubelet's
//! defaults) and the flags `--kubeconfig`, `--node-labels`, `--register-with-taints` and
//! `--register-node`, checked into [`ApiServerConfig`].
//!
//! `--node-labels` follows the kubelet's start-up check: a label in the `kubernetes.io` or
//! `k8s.io` namespaces (or their subdomains) must be one a kubelet may set on its own Node
//! (NodeRestriction's set), else podvisor refuses to start naming the label, rather than
//! have every registration refused by the API server.

use k8s_openapi::api::core::v1::Taint;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_saphyr::{Location, Spanned};

use super::flags::invalid_flag;
use super::raw::RawKubeletConfiguration;
use super::raw::{fmt_location, non_empty};
use super::{ConfigError, RunFlags};
use crate::duration::parse_go_duration;

/// A taint to register the Node with (`Taint` without `timeAdded`, comparable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeTaint {
    pub key: String,
    pub value: Option<String>,
    pub effect: String,
}

impl From<&Taint> for NodeTaint {
    fn from(t: &Taint) -> NodeTaint {
        NodeTaint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.clone(),
        }
    }
}

/// Default `nodeStatusUpdateFrequency`.
pub const DEFAULT_NODE_STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(10);
/// Default `nodeStatusReportFrequency` (when `nodeStatusUpdateFrequency` is not set either).
pub const DEFAULT_NODE_STATUS_REPORT_FREQUENCY: Duration = Duration::from_secs(300);
/// Default `nodeLeaseDurationSeconds`.
pub const DEFAULT_NODE_LEASE_DURATION_SECONDS: u32 = 40;
/// Default `nodeStatusMaxImages`.
pub const DEFAULT_NODE_STATUS_MAX_IMAGES: usize = 50;
/// Default `kubeAPIQPS`.
pub const DEFAULT_KUBE_API_QPS: u32 = 50;
/// Default `kubeAPIBurst`.
pub const DEFAULT_KUBE_API_BURST: u32 = 100;

/// The file's API server fields (`None`: unset or the zero value the kubelet treats as unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiServerFields {
    pub node_status_update_frequency: Option<Duration>,
    pub node_status_report_frequency: Option<Duration>,
    pub node_lease_duration_seconds: Option<u32>,
    /// `Some(None)`: -1, no limit.
    pub node_status_max_images: Option<Option<usize>>,
    pub register_node: Option<bool>,
    pub register_with_taints: Option<Vec<NodeTaint>>,
    pub kube_api_qps: Option<u32>,
    pub kube_api_burst: Option<u32>,
}

/// How podvisor talks to the API server (`--kubeconfig` given).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiServerConfig {
    /// `--kubeconfig`.
    pub kubeconfig: PathBuf,
    /// `registerNode` / `--register-node` (default true): create the Node if it is missing.
    pub register_node: bool,
    /// `--node-labels`: set on the Node at registration, besides the kubelet's own labels.
    pub node_labels: BTreeMap<String, String>,
    /// `registerWithTaints` / `--register-with-taints`: set at registration only.
    pub register_with_taints: Vec<NodeTaint>,
    pub node_status_update_frequency: Duration,
    pub node_status_report_frequency: Duration,
    pub node_lease_duration: Duration,
    /// Images listed in the Node's status; `None`: all.
    pub node_status_max_images: Option<usize>,
    pub kube_api_qps: u32,
    pub kube_api_burst: u32,
}

/// Phase two for the API server fields; every bad value names its field and line.
pub(super) fn parse(
    raw: &RawKubeletConfiguration,
    source_name: &str,
) -> Result<ApiServerFields, ConfigError> {
    let err = |field: &str, at: &Location, message: String| ConfigError::Invalid {
        source_name: source_name.into(),
        location: fmt_location(at),
        field: field.into(),
        message,
    };
    let duration = |field: &str, v: &Option<Spanned<String>>| -> Result<_, ConfigError> {
        match non_empty(v) {
            Some(s) => {
                let d = parse_go_duration(&s.value)
                    .map_err(|e| err(field, &s.referenced, e.to_string()))?;
                Ok((!d.is_zero()).then_some(d))
            }
            None => Ok(None),
        }
    };
    let non_negative = |field: &str, v: &Option<Spanned<i32>>| -> Result<_, ConfigError> {
        match v {
            Some(n) if n.value < 0 => Err(err(
                field,
                &n.referenced,
                format!("{} must not be negative", n.value),
            )),
            // Zero is the kubelet's "unset".
            Some(n) if n.value > 0 => Ok(Some(n.value.unsigned_abs())),
            _ => Ok(None),
        }
    };
    let node_status_max_images = match &raw.node_status_max_images {
        Some(n) if n.value < -1 => {
            return Err(err(
                "nodeStatusMaxImages",
                &n.referenced,
                format!("{} must be -1 (no limit) or at least 0", n.value),
            ))
        }
        Some(n) if n.value == -1 => Some(None),
        Some(n) => Some(Some(n.value.unsigned_abs() as usize)),
        None => None,
    };
    let register_with_taints = match &raw.register_with_taints {
        Some(taints) => {
            for (i, t) in taints.iter().enumerate() {
                check_taint(t).map_err(|e| ConfigError::Invalid {
                    source_name: source_name.into(),
                    location: String::new(),
                    field: format!("registerWithTaints[{i}]"),
                    message: e.to_string(),
                })?;
            }
            Some(taints.iter().map(NodeTaint::from).collect())
        }
        None => None,
    };
    Ok(ApiServerFields {
        node_status_update_frequency: duration(
            "nodeStatusUpdateFrequency",
            &raw.node_status_update_frequency,
        )?,
        node_status_report_frequency: duration(
            "nodeStatusReportFrequency",
            &raw.node_status_report_frequency,
        )?,
        node_lease_duration_seconds: non_negative(
            "nodeLeaseDurationSeconds",
            &raw.node_lease_duration_seconds,
        )?,
        node_status_max_images,
        register_node: raw.register_node,
        register_with_taints,
        kube_api_qps: non_negative("kubeAPIQPS", &raw.kube_api_qps)?,
        kube_api_burst: non_negative("kubeAPIBurst", &raw.kube_api_burst)?,
    })
}

/// The settings with the flags applied, `None` without `--kubeconfig`.
pub(super) fn resolve(
    file: &ApiServerFields,
    flags: &RunFlags,
) -> Result<Option<ApiServerConfig>, ConfigError> {
    let node_labels = match &flags.node_labels {
        Some(v) => parse_node_labels(v)?,
        None => BTreeMap::new(),
    };
    let flag_taints = match &flags.register_with_taints {
        Some(v) => Some(parse_taints(v)?),
        None => None,
    };
    let Some(kubeconfig) = flags
        .kubeconfig
        .as_ref()
        .filter(|p| !p.as_os_str().is_empty())
    else {
        return Ok(None);
    };
    let update = file
        .node_status_update_frequency
        .unwrap_or(DEFAULT_NODE_STATUS_UPDATE_FREQUENCY);
    // The kubelet's defaulting: the report frequency follows an explicitly set update
    // frequency, else 5 minutes.
    let report = file.node_status_report_frequency.unwrap_or(
        if file.node_status_update_frequency.is_some() {
            update
        } else {
            DEFAULT_NODE_STATUS_REPORT_FREQUENCY
        },
    );
    Ok(Some(ApiServerConfig {
        kubeconfig: kubeconfig.clone(),
        register_node: flags.register_node.or(file.register_node).unwrap_or(true),
        node_labels,
        register_with_taints: flag_taints
            .or_else(|| file.register_with_taints.clone())
            .unwrap_or_default(),
        node_status_update_frequency: update,
        node_status_report_frequency: report,
        node_lease_duration: Duration::from_secs(u64::from(
            file.node_lease_duration_seconds
                .unwrap_or(DEFAULT_NODE_LEASE_DURATION_SECONDS),
        )),
        node_status_max_images: file
            .node_status_max_images
            .unwrap_or(Some(DEFAULT_NODE_STATUS_MAX_IMAGES)),
        kube_api_qps: file.kube_api_qps.unwrap_or(DEFAULT_KUBE_API_QPS),
        kube_api_burst: file.kube_api_burst.unwrap_or(DEFAULT_KUBE_API_BURST),
    }))
}

/// The label key's prefix (before `/`), empty without one.
fn label_namespace(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

fn in_domain(ns: &str, domain: &str) -> bool {
    ns == domain || ns.strip_suffix(domain).is_some_and(|p| p.ends_with('.'))
}

/// Labels a kubelet may set on its own Node although they are in `kubernetes.io`
/// (k8s.io/kubelet's `kubeletLabels`).
const KUBELET_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// Whether NodeRestriction lets a node set label `key` on itself: anything outside the
/// `kubernetes.io` and `k8s.io` namespaces, the kubelet's own labels, and the
/// `kubelet.kubernetes.io` and `node.kubernetes.io` namespaces; never
/// `node-restriction.kubernetes.io` (nor `node-role.kubernetes.io`, which is simply not
/// allowed).
pub fn node_may_set_label(key: &str) -> bool {
    let ns = label_namespace(key);
    if in_domain(ns, "node-restriction.kubernetes.io") {
        return false;
    }
    let kubernetes = in_domain(ns, "kubernetes.io") || in_domain(ns, "k8s.io");
    !kubernetes
        || KUBELET_LABELS.contains(&key)
        || in_domain(ns, "kubelet.kubernetes.io")
        || in_domain(ns, "node.kubernetes.io")
}

/// `--node-labels`: `key=value[,key=value...]`, each a valid label the node may set on
/// itself.
pub fn parse_node_labels(value: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut labels = BTreeMap::new();
    for pair in value.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(invalid_flag(
                "node-labels",
                value,
                format!("malformed pair {pair:?}, expected key=value"),
            ));
        };
        let (k, v) = (k.trim(), v.trim());
        crate::pod::validation::check_qualified_name(k)
            .map_err(|e| invalid_flag("node-labels", value, format!("label key {k:?}: {e}")))?;
        if !crate::pod::validation::is_label_value(v) {
            return Err(invalid_flag(
                "node-labels",
                value,
                format!(
                    "label {k}: value {v:?} must be at most 63 characters: alphanumerics, \
                     '-', '_' or '.', alphanumeric at both ends"
                ),
            ));
        }
        if !node_may_set_label(k) {
            return Err(invalid_flag(
                "node-labels",
                value,
                format!(
                    "label {k:?} is in the 'kubernetes.io' or 'k8s.io' namespace and not one \
                     a node may set on itself (NodeRestriction): allowed are the prefixes \
                     kubelet.kubernetes.io/ and node.kubernetes.io/ and the labels {}",
                    KUBELET_LABELS.join(", ")
                ),
            ));
        }
        labels.insert(k.to_string(), v.to_string());
    }
    Ok(labels)
}

/// Why a taint is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintError {
    #[error("key {key:?}: {source}")]
    Key {
        key: String,
        source: crate::pod::validation::QualifiedNameError,
    },
    #[error("value {value:?} must be at most 63 characters: alphanumerics, '-', '_' or '.', alphanumeric at both ends")]
    Value { value: String },
    #[error("effect {effect:?} is not one of NoSchedule, PreferNoSchedule, NoExecute")]
    Effect { effect: String },
}

/// A taint's key, value and effect as the API server validates them.
pub fn check_taint(t: &Taint) -> Result<(), TaintError> {
    check_node_taint(&NodeTaint::from(t))
}

fn check_node_taint(t: &NodeTaint) -> Result<(), TaintError> {
    crate::pod::validation::check_qualified_name(&t.key).map_err(|source| TaintError::Key {
        key: t.key.clone(),
        source,
    })?;
    if let Some(v) = &t.value {
        if !crate::pod::validation::is_label_value(v) {
            return Err(TaintError::Value { value: v.clone() });
        }
    }
    match t.effect.as_str() {
        "NoSchedule" | "PreferNoSchedule" | "NoExecute" => Ok(()),
        e => Err(TaintError::Effect {
            effect: e.to_string(),
        }),
    }
}

/// `--register-with-taints`: `key[=value]:Effect[,...]`, the kubelet's syntax.
pub fn parse_taints(value: &str) -> Result<Vec<NodeTaint>, ConfigError> {
    let mut out = Vec::new();
    for spec in value.split(',').filter(|p| !p.trim().is_empty()) {
        let spec = spec.trim();
        let Some((kv, effect)) = spec.rsplit_once(':') else {
            return Err(invalid_flag(
                "register-with-taints",
                value,
                format!("{spec:?}: expected key=value:Effect or key:Effect"),
            ));
        };
        let (key, val) = match kv.split_once('=') {
            Some((k, v)) => (k, Some(v.to_string())),
            None => (kv, None),
        };
        let t = NodeTaint {
            key: key.to_string(),
            value: val,
            effect: effect.to_string(),
        };
        check_node_taint(&t)
            .map_err(|e| invalid_flag("register-with-taints", value, format!("{spec:?}: {e}")))?;
        if out
            .iter()
            .any(|o: &NodeTaint| o.key == t.key && o.effect == t.effect)
        {
            return Err(invalid_flag(
                "register-with-taints",
                value,
                format!("{spec:?}: taint {key}:{effect} is given twice"),
            ));
        }
        out.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_labels_follow_node_restriction() {
        let ok = parse_node_labels(
            "kubernetes.io/hostname=a,node.kubernetes.io/instance-type=pi4,\
             kubelet.kubernetes.io/x=1,sub.node.kubernetes.io/y=2,example.com/site=berlin,tier=edge",
        )
        .expect("allowed");
        assert_eq!(ok.len(), 6);
        for bad in [
            "node-role.kubernetes.io/control-plane=",
            "kubernetes.io/role=master",
            "example.k8s.io/x=1",
            "node-restriction.kubernetes.io/x=1",
            "a.node-restriction.kubernetes.io/x=1",
        ] {
            let e = parse_node_labels(bad).expect_err(bad).to_string();
            let key = bad.split('=').next().unwrap_or_default();
            assert!(e.contains(&format!("{key:?}")), "{bad}: {e}");
            assert!(e.contains("--node-labels"), "{e}");
        }
        assert!(parse_node_labels("a").is_err());
        assert!(parse_node_labels("a=-x").is_err());
        assert!(parse_node_labels("Bad_Prefix/a=b").is_err());
    }

    #[test]
    fn taints_in_the_kubelets_syntax() {
        let t =
            parse_taints("dedicated=edge:NoSchedule,podvisor.io/static:NoExecute").expect("taints");
        assert_eq!(t[0].key, "dedicated");
        assert_eq!(t[0].value.as_deref(), Some("edge"));
        assert_eq!(t[0].effect, "NoSchedule");
        assert_eq!(t[1].value, None);
        assert_eq!(t[1].effect, "NoExecute");
        for bad in [
            "a=b",
            "a=b:Sometimes",
            "-a:NoSchedule",
            "a:NoSchedule,a=x:NoSchedule",
        ] {
            assert!(parse_taints(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn kubelet_defaults_and_file_fields() {
        let flags = RunFlags {
            kubeconfig: Some(PathBuf::from("/etc/podvisor/kubeconfig")),
            ..Default::default()
        };
        let c = resolve(&ApiServerFields::default(), &flags)
            .expect("ok")
            .expect("configured");
        assert!(c.register_node);
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(10));
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(300));
        assert_eq!(c.node_lease_duration, Duration::from_secs(40));
        assert_eq!(c.node_status_max_images, Some(50));
        assert_eq!((c.kube_api_qps, c.kube_api_burst), (50, 100));
        // An explicit update frequency is also the report frequency (the kubelet's
        // backward-compatible default).
        let file = ApiServerFields {
            node_status_update_frequency: Some(Duration::from_secs(4)),
            ..Default::default()
        };
        let c = resolve(&file, &flags).expect("ok").expect("configured");
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(4));
        assert_eq!(resolve(&file, &RunFlags::default()).expect("ok"), None);

        let raw = crate::config::parse_kubelet_config(
            b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
              nodeLeaseDurationSeconds: -3\n",
            "c.yaml",
        )
        .expect_err("negative")
        .to_string();
        assert!(raw.contains("nodeLeaseDurationSeconds"), "{raw}");
        assert!(raw.contains("c.yaml:3:"), "{raw}");
        let cfg = crate::config::parse_kubelet_config(
            b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
              nodeStatusUpdateFrequency: 3s\nnodeStatusReportFrequency: 1m\n\
              nodeLeaseDurationSeconds: 20\nregisterNode: false\nnodeStatusMaxImages: -1\n\
              registerWithTaints: [{key: a, value: b, effect: NoSchedule}]\n",
            "c.yaml",
        )
        .expect("valid");
        assert!(
            cfg.unimplemented_fields.is_empty(),
            "{:?}",
            cfg.unimplemented_fields
        );
        let c = resolve(&cfg.api_server, &flags)
            .expect("ok")
            .expect("configured");
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(3));
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(60));
        assert_eq!(c.node_lease_duration, Duration::from_secs(20));
        assert_eq!(c.node_status_max_images, None);
        assert!(!c.register_node);
        assert_eq!(c.register_with_taints.len(), 1);
        let bad = crate::config::parse_kubelet_config(
            b"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
              registerWithTaints: [{key: a, effect: Never}]\n",
            "c.yaml",
        )
        .expect_err("bad effect")
        .to_string();
        assert!(bad.contains("registerWithTaints[0]"), "{bad}");
    }
}
