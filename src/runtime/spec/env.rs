//! The container environment: containerd's defaults, the image `Env`, the manifest's `env`
//! with `$(VAR)` expansion, and the downward API (`fieldRef`, `resourceFieldRef`).

use super::invalid;
use super::Ctx;
use super::NodeInfo;
use super::SpecError;
use crate::pod::quantity::parse_bytes;
use crate::pod::quantity::parse_cpu_millis;
use crate::pod::quantity::QuantityError;
use crate::pod::resources::effective_requests;
use k8s_openapi::api::core::v1::DownwardAPIVolumeFile;
use k8s_openapi::api::core::v1::EnvVar;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

pub(super) fn replace_or_append(env: &mut Vec<(String, String)>, key: &str, value: &str) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value.to_string(),
        None => env.push((key.to_string(), value.to_string())),
    }
}

/// Kubernetes `$(VAR)` expansion (third_party/forked/golang/expansion): `$$` is a literal `$`,
/// unknown references and an unclosed `$(` are kept as written.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let b = input.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut checkpoint = 0;
    let mut cursor = 0;
    while cursor < b.len() {
        if b[cursor] == b'$' && cursor + 1 < b.len() {
            out.extend_from_slice(&b[checkpoint..cursor]);
            let rest = &b[cursor + 1..];
            let advance = match rest[0] {
                b'$' => {
                    out.push(b'$');
                    1
                }
                b'(' => match rest.iter().position(|&x| x == b')') {
                    Some(close) => {
                        let name = &input[cursor + 2..cursor + 1 + close];
                        match lookup(name) {
                            Some(v) => out.extend_from_slice(v.as_bytes()),
                            None => {
                                out.extend_from_slice(b"$(");
                                out.extend_from_slice(name.as_bytes());
                                out.push(b')');
                            }
                        }
                        close + 1
                    }
                    None => {
                        out.extend_from_slice(b"$(");
                        1
                    }
                },
                other => {
                    out.push(b'$');
                    out.push(other);
                    1
                }
            };
            cursor += advance;
            checkpoint = cursor + 1;
        }
        cursor += 1;
    }
    out.extend_from_slice(&b[checkpoint.min(b.len())..]);
    // Only ASCII bytes were inserted or split around, so the result is valid UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The container's env, resolved and expanded, in manifest order (later duplicates replace the
/// value, the first position is kept).
pub(super) fn container_env(ctx: &Ctx<'_>) -> Result<Vec<(String, String)>, SpecError> {
    let mut env: Vec<(String, String)> = Vec::new();
    for (i, var) in ctx.container.env.iter().flatten().enumerate() {
        let field = ctx.field(&format!("env[{i}]"));
        if var.name.is_empty() {
            return Err(SpecError::MissingField {
                field: format!("{field}.name"),
            });
        }
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) if !v.is_empty() => expand(v, |name| {
                env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
            }),
            (_, Some(_)) => env_value_from(ctx, var, &field)?,
            _ => String::new(),
        };
        replace_or_append(&mut env, &var.name, &value);
    }
    Ok(env)
}

pub(super) fn env_value_from(
    ctx: &Ctx<'_>,
    var: &EnvVar,
    field: &str,
) -> Result<String, SpecError> {
    let Some(from) = &var.value_from else {
        return Ok(String::new());
    };
    let field = format!("{field}.valueFrom");
    if from.secret_key_ref.is_some() {
        return Err(SpecError::ApiObjectReference {
            field: format!("{field}.secretKeyRef"),
        });
    }
    if from.config_map_key_ref.is_some() {
        return Err(SpecError::ApiObjectReference {
            field: format!("{field}.configMapKeyRef"),
        });
    }
    if from.file_key_ref.is_some() {
        return Err(SpecError::NotSupportedYet {
            field: format!("{field}.fileKeyRef"),
        });
    }
    if let Some(f) = &from.field_ref {
        return field_ref(ctx, &f.field_path, f.api_version.as_deref(), &field);
    }
    if let Some(r) = &from.resource_field_ref {
        return resource_field_ref(
            ctx,
            r.container_name.as_deref(),
            &r.resource,
            r.divisor.as_ref(),
            &format!("{field}.resourceFieldRef"),
        );
    }
    Err(SpecError::MissingField { field })
}

/// The content of one downwardAPI volume file (`field` is its manifest path): a pod field
/// (`metadata.labels` and `metadata.annotations` whole, as the kubelet formats them:
/// `key="value"` lines, sorted, values quoted) or a container's resource.
pub fn downward_volume_value(
    pod: &Pod,
    node: &NodeInfo,
    item: &DownwardAPIVolumeFile,
    field: &str,
) -> Result<String, SpecError> {
    let spec = pod.spec.as_ref().ok_or(SpecError::MissingPodSpec)?;
    let first = spec
        .containers
        .first()
        .ok_or_else(|| SpecError::MissingField {
            field: "spec.containers".into(),
        })?;
    let ctx = Ctx {
        pod,
        spec,
        container: first,
        path: field.to_string(),
        node,
        // Volumes carry metadata only (validation): no IP is ever asked for here.
        pod_ips: &[],
    };
    if let Some(f) = &item.field_ref {
        let format_map = |m: Option<&std::collections::BTreeMap<String, String>>| {
            m.into_iter()
                .flatten()
                .map(|(k, v)| format!("{k}={v:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        };
        return match f.field_path.as_str() {
            "metadata.labels" => Ok(format_map(pod.metadata.labels.as_ref())),
            "metadata.annotations" => Ok(format_map(pod.metadata.annotations.as_ref())),
            "spec.nodeName"
            | "spec.serviceAccountName"
            | "status.hostIP"
            | "status.hostIPs"
            | "status.podIP"
            | "status.podIPs" => Err(invalid(
                format!("{field}.fieldRef.fieldPath"),
                &f.field_path,
                "not supported in a downwardAPI volume",
            )),
            path => field_ref(&ctx, path, f.api_version.as_deref(), field),
        };
    }
    if let Some(r) = &item.resource_field_ref {
        if r.container_name.as_deref().unwrap_or("").is_empty() {
            return Err(SpecError::MissingField {
                field: format!("{field}.resourceFieldRef.containerName"),
            });
        }
        return resource_field_ref(
            &ctx,
            r.container_name.as_deref(),
            &r.resource,
            r.divisor.as_ref(),
            &format!("{field}.resourceFieldRef"),
        );
    }
    Err(SpecError::MissingField {
        field: format!("{field}.fieldRef"),
    })
}

/// The pod's IPs, as status, the downward API, probes and hooks see them: those its network
/// gave it (IPv4 first), the host's with hostNetwork, loopback without a pod network.
pub fn pod_ips(pod: &Pod, host_ip: &str, network_ips: &[String]) -> Vec<String> {
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    if host_network {
        vec![host_ip.to_string()]
    } else if !network_ips.is_empty() {
        network_ips.to_vec()
    } else {
        vec!["127.0.0.1".to_string()]
    }
}

/// The pod's primary IP (`status.podIP`): the first of [`pod_ips`].
pub fn pod_ip(pod: &Pod, host_ip: &str, network_ips: &[String]) -> String {
    pod_ips(pod, host_ip, network_ips)
        .into_iter()
        .next()
        .unwrap_or_default()
}

pub(super) fn field_ref(
    ctx: &Ctx<'_>,
    path: &str,
    api_version: Option<&str>,
    field: &str,
) -> Result<String, SpecError> {
    let field = format!("{field}.fieldRef");
    if let Some(v) = api_version.filter(|v| *v != "v1") {
        return Err(invalid(
            format!("{field}.apiVersion"),
            v,
            "only \"v1\" is supported",
        ));
    }
    let meta = &ctx.pod.metadata;
    let subscript = |prefix: &str| -> Option<String> {
        let rest = path.strip_prefix(prefix)?.strip_suffix("']")?;
        Some(rest.to_string())
    };
    let value = match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_else(|| "default".into()),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => ctx
            .spec
            .node_name
            .clone()
            .unwrap_or_else(|| ctx.node.name.clone()),
        "spec.serviceAccountName" => ctx.spec.service_account_name.clone().unwrap_or_default(),
        "status.hostIP" | "status.hostIPs" => ctx.node.host_ip.clone(),
        "status.podIP" => pod_ip(ctx.pod, &ctx.node.host_ip, ctx.pod_ips),
        // The kubelet's downward API: the IPs comma-separated.
        "status.podIPs" => pod_ips(ctx.pod, &ctx.node.host_ip, ctx.pod_ips).join(","),
        _ => {
            if let Some(key) = subscript("metadata.labels['") {
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else if let Some(key) = subscript("metadata.annotations['") {
                meta.annotations
                    .as_ref()
                    .and_then(|l| l.get(&key))
                    .cloned()
                    .unwrap_or_default()
            } else {
                return Err(invalid(
                    format!("{field}.fieldPath"),
                    path,
                    "not a field supported in environment variables",
                ));
            }
        }
    };
    Ok(value)
}

pub(super) fn resource_field_ref(
    ctx: &Ctx<'_>,
    container_name: Option<&str>,
    resource: &str,
    divisor: Option<&Quantity>,
    field: &str,
) -> Result<String, SpecError> {
    let container = match container_name.filter(|n| !n.is_empty()) {
        None => ctx.container,
        Some(n) => ctx
            .spec
            .containers
            .iter()
            .chain(ctx.spec.init_containers.iter().flatten())
            .find(|c| c.name == n)
            .ok_or_else(|| {
                invalid(
                    format!("{field}.containerName"),
                    n,
                    "no container of the pod has this name",
                )
            })?,
    };
    let (kind, name) = resource.split_once('.').unwrap_or(("", resource));
    let r = container.resources.as_ref();
    let quantity = match kind {
        "limits" => r
            .and_then(|r| r.limits.as_ref())
            .and_then(|l| l.get(name))
            .cloned(),
        "requests" => effective_requests(r).get(name).cloned(),
        _ => None,
    };
    let parse_div = |f: fn(&Quantity) -> Result<u64, QuantityError>| -> Result<u64, SpecError> {
        // The default divisor is "1": 1000 millicores, 1 byte.
        let one = Quantity("1".to_string());
        let d = divisor.unwrap_or(&one);
        let v = f(d).map_err(|source| SpecError::Quantity {
            field: format!("{field}.divisor"),
            source,
        })?;
        if v == 0 {
            return Err(invalid(
                format!("{field}.divisor"),
                &d.0,
                "must not be zero",
            ));
        }
        Ok(v)
    };
    let quantity_err = |source| SpecError::Quantity {
        field: format!("{field}.resource ({resource})"),
        source,
    };
    let value = match (kind, name) {
        ("limits" | "requests", "cpu") => {
            let millis = match &quantity {
                Some(q) => parse_cpu_millis(q).map_err(quantity_err)?,
                None if kind == "limits" => ctx.node.cpu_millis,
                None => 0,
            };
            millis.div_ceil(parse_div(parse_cpu_millis)?)
        }
        ("limits" | "requests", "memory") => {
            let bytes = match &quantity {
                Some(q) => parse_bytes(q).map_err(quantity_err)?,
                None if kind == "limits" => ctx.node.memory_bytes,
                None => 0,
            };
            bytes.div_ceil(parse_div(parse_bytes)?)
        }
        _ => {
            return Err(invalid(
                format!("{field}.resource"),
                resource,
                "supported: limits.cpu, limits.memory, requests.cpu, requests.memory",
            ))
        }
    };
    Ok(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::DEFAULT_PATH_ENV;
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    // ---- env and expansion ----

    #[test]
    fn expansion_follows_kubernetes_rules() {
        let vars = HashMap::from([("A", "1"), ("EMPTY", "")]);
        let lookup = |n: &str| vars.get(n).map(|v| v.to_string());
        let cases = [
            ("$(A)", "1"),
            ("x$(A)y$(A)", "x1y1"),
            ("$$(A)", "$(A)"),
            ("$$$(A)", "$1"),
            ("$(B)", "$(B)"),
            ("$(A", "$(A"),
            ("$(", "$("),
            ("$", "$"),
            ("a$b", "a$b"),
            ("$()", "$()"),
            ("$(EMPTY)", ""),
            ("é$(A)é", "é1é"),
            ("$é", "$é"),
            ("$(A)$", "1$"),
            ("$$", "$"),
        ];
        for (input, want) in cases {
            assert_eq!(expand(input, lookup), want, "input {input:?}");
        }
    }

    #[test]
    fn env_order_image_then_container_with_in_place_override() {
        let p = pod_with(
            json!({"env": [
                {"name": "B", "value": "container-b"},
                {"name": "C", "value": "c"},
                {"name": "C", "value": "c2"}
            ]}),
            json!({}),
        );
        let img = image(json!({"Entrypoint": ["/bin/app"], "Env": ["A=img-a", "B=img-b"]}));
        let cs = build_with(&p, &img, &sandbox(false)).expect("build");
        assert_eq!(
            env(&cs),
            strs(&[
                &format!("PATH={DEFAULT_PATH_ENV}"),
                "HOSTNAME=web-node1",
                "A=img-a",
                "B=container-b",
                "C=c2",
            ])
        );
    }

    #[test]
    fn image_path_replaces_default_and_container_path_wins() {
        let img = image(json!({"Entrypoint": ["/bin/app"], "Env": ["PATH=/opt/bin"]}));
        let cs = build_with(&pod_with(json!({}), json!({})), &img, &sandbox(false)).expect("build");
        assert_eq!(env(&cs)[0], "PATH=/opt/bin");
        let p = pod_with(json!({"env": [{"name": "PATH", "value": "/x"}]}), json!({}));
        let cs = build_with(&p, &img, &sandbox(false)).expect("build");
        assert_eq!(env_value(&cs, "PATH").as_deref(), Some("/x"));
        assert_eq!(
            env(&cs).iter().filter(|e| e.starts_with("PATH=")).count(),
            1
        );
    }

    #[test]
    fn env_expansion_sees_only_earlier_container_vars() {
        let p = pod_with(
            json!({"env": [
                {"name": "A", "value": "a"},
                {"name": "B", "value": "$(A)-$(C)-$(IMG)-$$(A)"},
                {"name": "C", "value": "c"}
            ],
            "command": ["/bin/echo", "$(A)$(C)", "$(IMG)"],
            "args": ["$(B)"]}),
            json!({}),
        );
        let img = image(json!({"Env": ["IMG=i"]}));
        let cs = build_with(&p, &img, &sandbox(false)).expect("build");
        assert_eq!(env_value(&cs, "B").as_deref(), Some("a-$(C)-$(IMG)-$(A)"));
        assert_eq!(
            args(&cs),
            strs(&["/bin/echo", "ac", "$(IMG)", "a-$(C)-$(IMG)-$(A)"])
        );
    }

    #[test]
    fn field_refs_resolve_pod_metadata_and_node() {
        let fr = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
        let p = pod_with(
            json!({"env": [
                fr("NAME", "metadata.name"),
                fr("NS", "metadata.namespace"),
                fr("UID", "metadata.uid"),
                fr("APP", "metadata.labels['app']"),
                fr("MISSING", "metadata.labels['nope']"),
                fr("NOTE", "metadata.annotations['note']"),
                fr("NODE", "spec.nodeName"),
                fr("SA", "spec.serviceAccountName"),
                fr("HOST_IP", "status.hostIP"),
                fr("HOST_IPS", "status.hostIPs"),
                fr("POD_IP", "status.podIP"),
                fr("POD_IPS", "status.podIPs"),
                {"name": "LITERAL", "value": "$(NAME)"}
            ]}),
            json!({"serviceAccountName": "sa1"}),
        );
        let cs = ok(&p);
        let want = [
            ("NAME", "web-node1"),
            ("NS", "prod"),
            ("UID", "u-1"),
            ("APP", "web"),
            ("MISSING", ""),
            ("NOTE", "hi"),
            ("NODE", "node1"),
            ("SA", "sa1"),
            ("HOST_IP", "192.0.2.10"),
            ("HOST_IPS", "192.0.2.10"),
            ("POD_IP", "127.0.0.1"),
            ("POD_IPS", "127.0.0.1"),
            ("LITERAL", "web-node1"),
        ];
        for (k, v) in want {
            assert_eq!(env_value(&cs, k).as_deref(), Some(v), "{k}");
        }
        let host = pod_with(
            json!({"env": [fr("POD_IP", "status.podIP")]}),
            json!({"hostNetwork": true}),
        );
        assert_eq!(
            env_value(&ok(&host), "POD_IP").as_deref(),
            Some("192.0.2.10")
        );
        let bad = pod_with(json!({"env": [fr("X", "metadata.labels")]}), json!({}));
        assert!(
            err(&bad).starts_with("spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: invalid value \"metadata.labels\""),
            "{}",
            err(&bad)
        );
    }

    #[test]
    fn resource_field_refs_use_divisor_and_node_capacity() {
        let rf = |name: &str, res: &str, div: Option<&str>| {
            let mut r = json!({"resource": res});
            if let Some(d) = div {
                r["divisor"] = json!(d);
            }
            json!({"name": name, "valueFrom": {"resourceFieldRef": r}})
        };
        let p = pod_with(
            json!({
                "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "250m"}},
                "env": [
                    rf("CPU_LIMIT", "limits.cpu", None),
                    rf("CPU_LIMIT_M", "limits.cpu", Some("1m")),
                    rf("CPU_REQ", "requests.cpu", None),
                    rf("CPU_REQ_M", "requests.cpu", Some("1m")),
                    rf("MEM_LIMIT_MI", "limits.memory", Some("1Mi")),
                    rf("MEM_REQ", "requests.memory", None),
                    rf("MEM_REQ_K", "requests.memory", Some("1k"))
                ]
            }),
            json!({}),
        );
        let cs = ok(&p);
        let want = [
            ("CPU_LIMIT", "2"),
            ("CPU_LIMIT_M", "2000"),
            ("CPU_REQ", "1"),
            ("CPU_REQ_M", "250"),
            ("MEM_LIMIT_MI", "128"),
            ("MEM_REQ", "134217728"),
            ("MEM_REQ_K", "134218"),
        ];
        for (k, v) in want {
            assert_eq!(env_value(&cs, k).as_deref(), Some(v), "{k}");
        }
        let no_limit = pod_with(json!({"env": [rf("M", "limits.memory", None)]}), json!({}));
        assert_eq!(
            env_value(&ok(&no_limit), "M"),
            Some((4u64 << 30).to_string())
        );
        let bad = pod_with(
            json!({"env": [rf("E", "limits.ephemeral-storage", None)]}),
            json!({}),
        );
        assert!(
            err(&bad).starts_with("spec.containers[0].env[0].valueFrom.resourceFieldRef.resource")
        );
    }

    #[test]
    fn api_object_references_are_refused_with_field_path() {
        let p = pod_with(
            json!({"env": [
                {"name": "A", "value": "1"},
                {"name": "B", "value": "2"},
                {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
            ]}),
            json!({}),
        );
        assert_eq!(
            err(&p),
            "spec.containers[0].env[2].valueFrom.secretKeyRef: static pods cannot reference API objects"
        );
        let p = pod_with(
            json!({"env": [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]}),
            json!({}),
        );
        assert_eq!(
            err(&p),
            "spec.containers[0].env[0].valueFrom.configMapKeyRef: static pods cannot reference API objects"
        );
        let p = pod_with(
            json!({"envFrom": [{"configMapRef": {"name": "c"}}]}),
            json!({}),
        );
        assert_eq!(
            err(&p),
            "spec.containers[0].envFrom[0]: static pods cannot reference API objects"
        );
    }
}
