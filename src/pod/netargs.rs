//! netargs: what a pod asks of its network, as the kubelet and containerd hand it to
//! CNI: `CNI_ARGS` (the kubelet's `K8S_POD_*` arguments) and the capability arguments
//! (`portMappings` from hostPorts, `bandwidth` from the `kubernetes.io/ingress-bandwidth` and
//! `egress-bandwidth` annotations, `dns` from the pod's resolver configuration, and `ips`
//! from podvisor's `podvisor.io/ips` annotation: fixed pod IPs for host-local).

use std::net::IpAddr;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{json, Map, Value};

use crate::pod::quantity::parse_nanos;

/// The kubelet's bandwidth annotations (`pkg/util/bandwidth`).
pub const INGRESS_BANDWIDTH: &str = "kubernetes.io/ingress-bandwidth";
pub const EGRESS_BANDWIDTH: &str = "kubernetes.io/egress-bandwidth";
/// podvisor's annotation for fixed pod IPs: comma-separated addresses (`10.86.0.50`, or
/// dual-stack `10.86.0.50,fd86::50`), the `ips` capability host-local honours.
pub const IPS_ANNOTATION: &str = "podvisor.io/ips";

/// A pod annotation the network cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata.annotations[{key}]: {message}")]
pub struct CapabilityError {
    pub key: String,
    pub message: String,
}

/// `CNI_ARGS` as the kubelet's CNI network plugin and containerd give it.
pub fn cni_args(pod: &Pod, sandbox_id: &str) -> String {
    let m = &pod.metadata;
    format!(
        "IgnoreUnknown=1;K8S_POD_NAMESPACE={};K8S_POD_NAME={};K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID={}",
        m.namespace.as_deref().unwrap_or("default"),
        m.name.as_deref().unwrap_or_default(),
        sandbox_id,
        m.uid.as_deref().unwrap_or_default(),
    )
}

/// One hostPort of the pod: what portmap gets and admission compares.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostPort {
    pub host_port: u16,
    pub container_port: u16,
    /// Upper case, as in the pod spec (TCP, UDP, SCTP).
    pub protocol: String,
    /// Empty: every address of the host.
    pub host_ip: String,
}

/// The pod's host ports: every app container port with a hostPort (the kubelet builds the
/// sandbox's port mappings from the app containers only); with hostNetwork the container
/// ports themselves, which admission counts as host ports.
pub fn host_ports(pod: &Pod) -> Vec<HostPort> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let host_network = spec.host_network.unwrap_or(false);
    let mut out = Vec::new();
    for c in &spec.containers {
        for p in c.ports.iter().flatten() {
            let hp = if host_network {
                p.container_port
            } else {
                p.host_port.unwrap_or(0)
            };
            let (Ok(hp), Ok(cp)) = (u16::try_from(hp), u16::try_from(p.container_port)) else {
                continue;
            };
            if hp == 0 {
                continue;
            }
            out.push(HostPort {
                host_port: hp,
                container_port: cp,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                host_ip: p.host_ip.clone().unwrap_or_default(),
            });
        }
    }
    out
}

/// The kubelet's bounds for a bandwidth annotation (`minRsrc`, `maxRsrc`: 1 kbit/s, 1 Pbit/s).
const MIN_BANDWIDTH: u128 = 1_000;
const MAX_BANDWIDTH: u128 = 1_000_000_000_000_000;

/// A bandwidth annotation in bits per second, checked as the kubelet's
/// `ExtractPodBandwidthResources` checks it; `None` when absent.
pub fn bandwidth(pod: &Pod, key: &str) -> Result<Option<u64>, CapabilityError> {
    let Some(v) = pod.metadata.annotations.as_ref().and_then(|a| a.get(key)) else {
        return Ok(None);
    };
    let err = |message: String| CapabilityError {
        key: key.to_string(),
        message,
    };
    let nanos = parse_nanos(&Quantity(v.clone())).map_err(|e| err(e.to_string()))?;
    let bits = nanos.div_ceil(1_000_000_000);
    if bits < MIN_BANDWIDTH {
        return Err(err(format!(
            "{v:?}: resource is unreasonably small (< 1kbit)"
        )));
    }
    if bits > MAX_BANDWIDTH {
        return Err(err(format!(
            "{v:?}: resource is unreasonably large (> 1Pbit)"
        )));
    }
    Ok(Some(bits as u64))
}

/// The `podvisor.io/ips` annotation: at most one address per family.
pub fn fixed_ips(pod: &Pod) -> Result<Vec<IpAddr>, CapabilityError> {
    let Some(v) = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(IPS_ANNOTATION))
    else {
        return Ok(Vec::new());
    };
    let err = |message: String| CapabilityError {
        key: IPS_ANNOTATION.to_string(),
        message,
    };
    let mut out: Vec<IpAddr> = Vec::new();
    for part in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let ip: IpAddr = part
            .parse()
            .map_err(|_| err(format!("{part:?} is not an IP address")))?;
        if out.iter().any(|o| o.is_ipv4() == ip.is_ipv4()) {
            return Err(err(format!("{v:?}: at most one IPv4 and one IPv6 address")));
        }
        out.push(ip);
    }
    if out.is_empty() {
        return Err(err("empty: give one address per IP family".into()));
    }
    Ok(out)
}

/// Checks every annotation the network reads (`podvisor validate` and the runtime refuse
/// the same pods).
pub fn validate(pod: &Pod) -> Result<(), CapabilityError> {
    bandwidth(pod, INGRESS_BANDWIDTH)?;
    bandwidth(pod, EGRESS_BANDWIDTH)?;
    fixed_ips(pod)?;
    Ok(())
}

/// The pod's resolver settings, for the `dns` capability.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsArgs {
    pub servers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

/// The capability arguments of `pod` (each goes only to plugins declaring it).
pub fn capability_args(pod: &Pod, dns: &DnsArgs) -> Result<Map<String, Value>, CapabilityError> {
    let mut m = Map::new();
    let ports: Vec<Value> = host_ports(pod)
        .into_iter()
        .map(|p| {
            let mut v = json!({
                "hostPort": p.host_port,
                "containerPort": p.container_port,
                "protocol": p.protocol.to_lowercase(),
            });
            if !p.host_ip.is_empty() {
                v["hostIP"] = Value::String(p.host_ip);
            }
            v
        })
        .collect();
    if !ports.is_empty() {
        m.insert("portMappings".into(), Value::Array(ports));
    }
    // containerd's toCNIBandWidth: the rate from the annotation, the burst unbounded.
    let ingress = bandwidth(pod, INGRESS_BANDWIDTH)?;
    let egress = bandwidth(pod, EGRESS_BANDWIDTH)?;
    if ingress.is_some() || egress.is_some() {
        let mut b = Map::new();
        if let Some(r) = ingress {
            b.insert("ingressRate".into(), r.into());
            b.insert("ingressBurst".into(), u64::from(u32::MAX).into());
        }
        if let Some(r) = egress {
            b.insert("egressRate".into(), r.into());
            b.insert("egressBurst".into(), u64::from(u32::MAX).into());
        }
        m.insert("bandwidth".into(), Value::Object(b));
    }
    let ips = fixed_ips(pod)?;
    if !ips.is_empty() {
        m.insert(
            "ips".into(),
            Value::Array(ips.iter().map(|i| Value::String(i.to_string())).collect()),
        );
    }
    if *dns != DnsArgs::default() {
        m.insert(
            "dns".into(),
            json!({"servers": dns.servers, "searches": dns.searches, "options": dns.options}),
        );
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).expect("pod")
    }

    #[test]
    fn cni_args_are_the_kubelets() {
        let p = pod(
            json!({"metadata": {"name": "web-node", "namespace": "edge", "uid": "u-1"},
            "spec": {"containers": []}}),
        );
        assert_eq!(
            cni_args(&p, "abc"),
            "IgnoreUnknown=1;K8S_POD_NAMESPACE=edge;K8S_POD_NAME=web-node;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u-1"
        );
    }

    #[test]
    fn host_ports_become_port_mappings_and_annotations_bandwidth_and_ips() {
        let p = pod(json!({"metadata": {"name": "w", "annotations": {
            INGRESS_BANDWIDTH: "10M", EGRESS_BANDWIDTH: "1Mi", IPS_ANNOTATION: "10.86.0.50, fd86::50"}},
        "spec": {
            "initContainers": [{"name": "i", "ports": [{"containerPort": 1, "hostPort": 1}]}],
            "containers": [{"name": "c", "ports": [
                {"containerPort": 80, "hostPort": 8080},
                {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "127.0.0.1"},
                {"containerPort": 9090}
            ]}]}}));
        let dns = DnsArgs {
            servers: vec!["10.0.0.10".into()],
            searches: vec!["svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        };
        let m = capability_args(&p, &dns).expect("args");
        assert_eq!(
            Value::Object(m),
            json!({
                "portMappings": [
                    {"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
                    {"hostPort": 5353, "containerPort": 53, "protocol": "udp", "hostIP": "127.0.0.1"}
                ],
                "bandwidth": {"ingressRate": 10_000_000u64, "ingressBurst": 4294967295u64,
                              "egressRate": 1_048_576u64, "egressBurst": 4294967295u64},
                "ips": ["10.86.0.50", "fd86::50"],
                "dns": {"servers": ["10.0.0.10"], "searches": ["svc.cluster.local"], "options": ["ndots:5"]}
            })
        );
    }

    #[test]
    fn bad_annotations_are_refused_naming_the_key() {
        let with = |k: &str, v: &str| {
            pod(json!({"metadata": {"annotations": {k: v}}, "spec": {"containers": []}}))
        };
        let e = validate(&with(INGRESS_BANDWIDTH, "10")).expect_err("small");
        assert_eq!(
            e.to_string(),
            "metadata.annotations[kubernetes.io/ingress-bandwidth]: \"10\": resource is unreasonably small (< 1kbit)"
        );
        assert!(validate(&with(EGRESS_BANDWIDTH, "2E")).is_err());
        assert!(validate(&with(EGRESS_BANDWIDTH, "ten")).is_err());
        assert!(validate(&with(IPS_ANNOTATION, "10.0.0.1,10.0.0.2")).is_err());
        assert!(validate(&with(IPS_ANNOTATION, "10.0.0.300")).is_err());
        assert!(validate(&with(IPS_ANNOTATION, "10.0.0.3")).is_ok());
        assert!(validate(&with(EGRESS_BANDWIDTH, "1k")).is_ok());
    }

    #[test]
    fn host_network_container_ports_are_host_ports() {
        let p = pod(json!({"spec": {"hostNetwork": true,
            "containers": [{"name": "c", "ports": [{"containerPort": 9100}]}]}}));
        assert_eq!(
            host_ports(&p),
            [HostPort {
                host_port: 9100,
                container_port: 9100,
                protocol: "TCP".into(),
                host_ip: String::new()
            }]
        );
    }
}
