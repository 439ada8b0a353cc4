//! dns: the pod's `/etc/resolv.conf` and `/etc/hosts`, as the kubelet computes them
//! (pkg/kubelet/network/dns/dns.go `GetPodDNS`, kubelet_pods.go `managedHostsFileContent`)
//! and containerd writes them.
//!
//! `dnsPolicy` as the kubelet means it: `ClusterFirst` (the default) gives a pod of its own
//! network the configuration's `clusterDNS` servers, the search path
//! `<namespace>.svc.<clusterDomain> svc.<clusterDomain> <clusterDomain>` followed by the
//! node's searches, and `ndots:5`; without `clusterDNS` it falls back to `Default` (the
//! node's settings, as the kubelet does: podvisor records no MissingClusterDNS event, there
//! being no cluster). A hostNetwork pod's `ClusterFirst` is `Default`;
//! `ClusterFirstWithHostNet` is `ClusterFirst` for it too. `None` starts empty. The node's
//! settings come from the configuration's `resolvConf` (default `/etc/resolv.conf`; set to
//! "": `nameserver 127.0.0.1` and `search .`, the kubelet's "no DNS"). Then `dnsConfig` is
//! merged: nameservers and searches appended without duplicates, options merged by name (the
//! pod's win), and the result cut to the resolver's limits (3 nameservers, 32 search
//! domains, 2048 characters of searches).
//!
//! Beyond the kubelet: a pod with a network of its own cannot reach the node's loopback, so
//! when the node's resolv.conf names only loopback servers (systemd-resolved's stub,
//! 127.0.0.53) and `resolvConf` is the default, such pods get systemd-resolved's upstream
//! list (`/run/systemd/resolve/resolv.conf`), which is what kubeadm configures the kubelet
//! with on such hosts.

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

/// The kubelet's limits (validation.MaxDNSNameservers, MaxDNSSearchPaths,
/// MaxDNSSearchListChars).
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;

/// The default `resolvConf`.
const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";
/// systemd-resolved's list of upstream servers.
const RESOLVED_UPSTREAM: &str = "/run/systemd/resolve/resolv.conf";
/// The kubelet's options for cluster DNS.
const CLUSTER_OPTIONS: &[&str] = &["ndots:5"];

/// Where the node's DNS settings come from, and the cluster's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    /// The KubeletConfiguration's `resolvConf`; `None` when it is set to "" (no host
    /// settings).
    pub resolv_conf: Option<PathBuf>,
    /// `clusterDNS`: the nameservers of `ClusterFirst` pods (empty: none).
    pub cluster_dns: Vec<String>,
    /// `clusterDomain` ("" when unset).
    pub cluster_domain: String,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings {
            resolv_conf: Some(PathBuf::from(DEFAULT_RESOLV_CONF)),
            cluster_dns: Vec::new(),
            cluster_domain: String::new(),
        }
    }
}

/// A resolver configuration: nameservers, search domains, options (`name` or `name:value`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvConf {
    pub nameservers: Vec<String>,
    pub searches: Vec<String>,
    pub options: Vec<String>,
}

impl ResolvConf {
    /// Parses resolv.conf text as the kubelet does: the last `search` line wins (a `.` entry
    /// is dropped, trailing dots are trimmed), later options override earlier ones of the
    /// same name, comments and other keywords are ignored.
    pub fn parse(text: &str) -> ResolvConf {
        let mut out = ResolvConf::default();
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.first() {
                Some(&"nameserver") if fields.len() > 1 => {
                    out.nameservers.push(fields[1].to_string())
                }
                Some(&"search") => {
                    out.searches = fields[1..]
                        .iter()
                        .filter(|s| **s != ".")
                        .map(|s| s.trim_end_matches('.').to_string())
                        .collect();
                }
                Some(&"options") => {
                    for o in &fields[1..] {
                        merge_option(&mut out.options, o);
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The file containerd writes: `search`, then `nameserver` lines, then `options`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if !self.searches.is_empty() {
            s.push_str(&format!("search {}\n", self.searches.join(" ")));
        }
        for ns in &self.nameservers {
            s.push_str(&format!("nameserver {ns}\n"));
        }
        if !self.options.is_empty() {
            s.push_str(&format!("options {}\n", self.options.join(" ")));
        }
        s
    }
}

/// Replaces the option of the same name, or appends it.
fn merge_option(options: &mut Vec<String>, opt: &str) {
    let name = opt.split(':').next().unwrap_or(opt);
    match options
        .iter_mut()
        .find(|o| o.split(':').next().unwrap_or(o) == name)
    {
        Some(o) => *o = opt.to_string(),
        None => options.push(opt.to_string()),
    }
}

fn push_unique(list: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    for i in items {
        if !list.contains(&i) {
            list.push(i);
        }
    }
}

/// The kubelet's DNS type of a pod (`getPodDNSType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PodDnsType {
    Cluster,
    Host,
    None,
}

fn pod_dns_type(pod: &Pod) -> PodDnsType {
    let spec = pod.spec.as_ref();
    let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
    match spec
        .and_then(|s| s.dns_policy.as_deref())
        .unwrap_or("ClusterFirst")
    {
        "None" => PodDnsType::None,
        "ClusterFirstWithHostNet" => PodDnsType::Cluster,
        "Default" => PodDnsType::Host,
        // ClusterFirst: for a hostNetwork pod the node's settings.
        _ if host_network => PodDnsType::Host,
        _ => PodDnsType::Cluster,
    }
}

/// The pod's resolver configuration (`host` is the node's, see [`host_resolv_conf`]).
pub fn pod_resolv_conf(pod: &Pod, host: &ResolvConf, settings: &DnsSettings) -> ResolvConf {
    let spec = pod.spec.as_ref();
    let mut out = host.clone();
    let host_type = match pod_dns_type(pod) {
        PodDnsType::None => {
            out = ResolvConf::default();
            false
        }
        PodDnsType::Cluster if !settings.cluster_dns.is_empty() => {
            out.nameservers = settings.cluster_dns.clone();
            if !settings.cluster_domain.is_empty() {
                let d = &settings.cluster_domain;
                let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
                let mut searches = vec![format!("{ns}.svc.{d}"), format!("svc.{d}"), d.clone()];
                push_unique(&mut searches, out.searches);
                out.searches = searches;
            }
            out.options = CLUSTER_OPTIONS.iter().map(|o| o.to_string()).collect();
            false
        }
        // No clusterDNS: the kubelet falls back to Default.
        PodDnsType::Cluster | PodDnsType::Host => true,
    };
    if host_type && settings.resolv_conf.is_none() {
        out.nameservers = vec!["127.0.0.1".into()];
        out.searches = vec![".".into()];
    }
    if let Some(cfg) = spec.and_then(|s| s.dns_config.as_ref()) {
        push_unique(
            &mut out.nameservers,
            cfg.nameservers.clone().into_iter().flatten(),
        );
        push_unique(
            &mut out.searches,
            cfg.searches.clone().into_iter().flatten(),
        );
        for o in cfg.options.iter().flatten() {
            if let Some(name) = o.name.as_deref().filter(|n| !n.is_empty()) {
                let opt = match o.value.as_deref() {
                    Some(v) => format!("{name}:{v}"),
                    None => name.to_string(),
                };
                merge_option(&mut out.options, &opt);
            }
        }
    }
    out.nameservers.truncate(MAX_NAMESERVERS);
    out.searches.truncate(MAX_SEARCHES);
    while out.searches.join(" ").len() > MAX_SEARCH_CHARS {
        out.searches.pop();
    }
    out
}

/// The node's resolver configuration from `settings.resolv_conf`; empty when there is none
/// or it cannot be read (logged: the pod still starts, as under a kubelet). For a pod with a
/// network of its own (`own_network`), a default `/etc/resolv.conf` that names only loopback
/// servers is replaced by systemd-resolved's upstream list when there is one.
pub fn host_resolv_conf(settings: &DnsSettings, own_network: bool) -> ResolvConf {
    let Some(path) = &settings.resolv_conf else {
        return ResolvConf::default();
    };
    let read = |p: &Path| match std::fs::read_to_string(p) {
        Ok(text) => Some(ResolvConf::parse(&text)),
        Err(e) => {
            log::warn!(
                "resolvConf {}: {e}: pods get no node DNS settings",
                p.display()
            );
            None
        }
    };
    let Some(conf) = read(path) else {
        return ResolvConf::default();
    };
    let loopback_only = !conf.nameservers.is_empty()
        && conf.nameservers.iter().all(|n| {
            n.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
        });
    if own_network && loopback_only && path == Path::new(DEFAULT_RESOLV_CONF) {
        let upstream = Path::new(RESOLVED_UPSTREAM);
        if upstream.exists() {
            if let Some(up) = read(upstream) {
                return up;
            }
        }
    }
    conf
}

/// The pod's domain (`<subdomain>.<namespace>.svc.<clusterDomain>`, the kubelet's
/// `GeneratePodHostNameAndDomain`), when it has a subdomain and the node a cluster domain.
pub fn pod_domain(pod: &Pod, cluster_domain: &str) -> Option<String> {
    let sub = pod
        .spec
        .as_ref()
        .and_then(|s| s.subdomain.as_deref())
        .filter(|s| !s.is_empty())?;
    if cluster_domain.is_empty() {
        return None;
    }
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    Some(format!("{sub}.{ns}.svc.{cluster_domain}"))
}

/// The kubelet's hosts file for `pod`: the node's `/etc/hosts` (read from `node_hosts`) for
/// hostNetwork pods, the managed file otherwise, with one line per pod IP for the pod's own
/// name (its FQDN first when it has a `subdomain`; loopback when the pod has no IP: no pod
/// network); then the pod's `hostAliases`, one line per hostname.
pub fn hosts_file(
    pod: &Pod,
    hostname: &str,
    host_net: bool,
    node_hosts: &Path,
    pod_ips: &[String],
    domain: Option<&str>,
) -> String {
    let mut s = if host_net {
        std::fs::read_to_string(node_hosts).unwrap_or_else(|_| "127.0.0.1\tlocalhost\n".into())
    } else {
        let mut s = "# Kubernetes-managed hosts file.\n\
             127.0.0.1\tlocalhost\n\
             ::1\tlocalhost ip6-localhost ip6-loopback\n\
             fe00::0\tip6-localnet\n\
             fe00::0\tip6-mcastprefix\n\
             fe00::1\tip6-allnodes\n\
             fe00::2\tip6-allrouters\n"
            .to_string();
        let loopback = ["127.0.0.1".to_string()];
        let ips = if pod_ips.is_empty() {
            &loopback[..]
        } else {
            pod_ips
        };
        for ip in ips {
            match domain {
                Some(d) => s.push_str(&format!("{ip}\t{hostname}.{d}\t{hostname}\n")),
                None => s.push_str(&format!("{ip}\t{hostname}\n")),
            }
        }
        s
    };
    let aliases = pod.spec.as_ref().and_then(|s| s.host_aliases.as_ref());
    if let Some(aliases) = aliases.filter(|a| !a.is_empty()) {
        if !s.is_empty() && !s.ends_with('\n') {
            s.push('\n');
        }
        s.push_str("\n# Entries added by HostAliases.\n");
        for a in aliases {
            for h in a.hostnames.iter().flatten() {
                s.push_str(&format!("{}\t{h}\n", a.ip));
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(json: serde_json::Value) -> Pod {
        serde_json::from_value(json).expect("pod")
    }

    const HOST: &str = "# generated\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nsearch old.example\nsearch corp.example lab.example.\noptions ndots:2 timeout:1\noptions ndots:3\n";

    #[test]
    fn host_file_is_parsed_like_the_kubelet() {
        let h = ResolvConf::parse(HOST);
        assert_eq!(h.nameservers, ["10.0.0.2", "10.0.0.3"]);
        assert_eq!(h.searches, ["corp.example", "lab.example"]);
        assert_eq!(h.options, ["ndots:3", "timeout:1"]);
    }

    #[test]
    fn dns_config_is_merged_into_the_host_settings() {
        let h = ResolvConf::parse(HOST);
        let p = pod(serde_json::json!({"spec": {"containers": [], "dnsConfig": {
            "nameservers": ["10.0.0.3", "1.1.1.1", "8.8.8.8"],
            "searches": ["lab.example", "pod.example"],
            "options": [{"name": "ndots", "value": "5"}, {"name": "edns0"}]
        }}}));
        let r = pod_resolv_conf(&p, &h, &DnsSettings::default());
        assert_eq!(
            r.render(),
            "search corp.example lab.example pod.example\nnameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 1.1.1.1\noptions ndots:5 timeout:1 edns0\n"
        );
    }

    #[test]
    fn policy_none_uses_only_dns_config_and_limits_apply() {
        let h = ResolvConf::parse(HOST);
        let searches: Vec<String> = (0..40).map(|i| format!("s{i}.example")).collect();
        let p = pod(
            serde_json::json!({"spec": {"containers": [], "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["1.2.3.4"], "searches": searches}}}),
        );
        let r = pod_resolv_conf(&p, &h, &DnsSettings::default());
        assert_eq!(r.nameservers, ["1.2.3.4"]);
        assert_eq!(r.searches.len(), 32);
        assert!(r.options.is_empty());
        let p = pod(serde_json::json!({"spec": {"containers": [], "dnsPolicy": "ClusterFirst"}}));
        assert_eq!(
            pod_resolv_conf(&p, &h, &DnsSettings::default()),
            h,
            "no cluster DNS: the node's settings"
        );
    }

    #[test]
    fn host_aliases_are_added_for_every_pod() {
        let dir = tempfile::tempdir().expect("tempdir");
        let node_hosts = dir.path().join("hosts");
        std::fs::write(&node_hosts, "127.0.0.1\tlocalhost\n10.0.0.1\tnode").expect("write");
        let p = pod(
            serde_json::json!({"spec": {"containers": [], "hostAliases": [
                {"ip": "127.0.0.1", "hostnames": ["kubernetes", "api"]}
            ]}}),
        );
        let s = hosts_file(&p, "web", true, &node_hosts, &[], None);
        assert_eq!(
            s,
            "127.0.0.1\tlocalhost\n10.0.0.1\tnode\n\n# Entries added by HostAliases.\n127.0.0.1\tkubernetes\n127.0.0.1\tapi\n"
        );
        let s = hosts_file(&p, "web", false, &node_hosts, &[], None);
        assert!(s.starts_with("# Kubernetes-managed hosts file.\n"), "{s}");
        assert!(
            s.contains("127.0.0.1\tweb\n\n# Entries added by HostAliases.\n"),
            "{s}"
        );
    }

    fn cluster() -> DnsSettings {
        DnsSettings {
            cluster_dns: vec!["10.96.0.10".into()],
            cluster_domain: "cluster.local".into(),
            ..DnsSettings::default()
        }
    }

    #[test]
    fn dns_policy_has_the_kubelets_meaning() {
        let h = ResolvConf::parse(HOST);
        let with = |policy: Option<&str>, host_network: bool| {
            let mut spec = serde_json::json!({"containers": [], "hostNetwork": host_network});
            if let Some(p) = policy {
                spec["dnsPolicy"] = p.into();
            }
            pod(serde_json::json!({"metadata": {"namespace": "edge"}, "spec": spec}))
        };
        let cluster_conf = "search edge.svc.cluster.local svc.cluster.local cluster.local corp.example lab.example\nnameserver 10.96.0.10\noptions ndots:5\n";
        // ClusterFirst (also by default) with clusterDNS: the cluster's servers and searches.
        for p in [None, Some("ClusterFirst")] {
            assert_eq!(
                pod_resolv_conf(&with(p, false), &h, &cluster()).render(),
                cluster_conf
            );
        }
        // hostNetwork: ClusterFirst is Default, ClusterFirstWithHostNet is the cluster's.
        assert_eq!(
            pod_resolv_conf(&with(Some("ClusterFirst"), true), &h, &cluster()),
            h
        );
        assert_eq!(
            pod_resolv_conf(&with(Some("ClusterFirstWithHostNet"), true), &h, &cluster()).render(),
            cluster_conf
        );
        assert_eq!(
            pod_resolv_conf(&with(Some("Default"), false), &h, &cluster()),
            h
        );
        assert_eq!(
            pod_resolv_conf(&with(Some("None"), false), &h, &cluster()),
            ResolvConf::default()
        );
        // clusterDNS without clusterDomain: the node's searches; no clusterDNS: Default.
        let no_domain = DnsSettings {
            cluster_domain: String::new(),
            ..cluster()
        };
        let r = pod_resolv_conf(&with(None, false), &h, &no_domain);
        assert_eq!(r.searches, ["corp.example", "lab.example"]);
        assert_eq!(r.nameservers, ["10.96.0.10"]);
        assert_eq!(
            pod_resolv_conf(&with(None, false), &h, &DnsSettings::default()),
            h
        );
        // resolvConf "": the kubelet's loopback server and "search .".
        let none = DnsSettings {
            resolv_conf: None,
            ..DnsSettings::default()
        };
        assert_eq!(
            pod_resolv_conf(&with(Some("Default"), false), &ResolvConf::default(), &none).render(),
            "search .\nnameserver 127.0.0.1\n"
        );
    }

    #[test]
    fn hosts_file_names_the_pod_ips_and_its_fqdn() {
        let p = pod(serde_json::json!({"metadata": {"namespace": "edge"},
            "spec": {"containers": [], "subdomain": "mqtt"}}));
        let d = pod_domain(&p, "cluster.local");
        assert_eq!(d.as_deref(), Some("mqtt.edge.svc.cluster.local"));
        assert_eq!(pod_domain(&p, ""), None);
        let ips = ["10.86.0.5".to_string(), "fd86::5".to_string()];
        let s = hosts_file(
            &p,
            "broker",
            false,
            Path::new("/nonexistent"),
            &ips,
            d.as_deref(),
        );
        assert!(
            s.ends_with("fe00::2\tip6-allrouters\n10.86.0.5\tbroker.mqtt.edge.svc.cluster.local\tbroker\nfd86::5\tbroker.mqtt.edge.svc.cluster.local\tbroker\n"),
            "{s}"
        );
        let s = hosts_file(
            &p,
            "broker",
            false,
            Path::new("/nonexistent"),
            &ips[..1],
            None,
        );
        assert!(s.ends_with("\n10.86.0.5\tbroker\n"), "{s}");
    }

    #[test]
    fn a_loopback_only_node_resolver_is_replaced_for_pods_of_their_own_network() {
        // Only the default /etc/resolv.conf is replaced; a configured file is used as is.
        let dir = tempfile::tempdir().expect("tempdir");
        let stub = dir.path().join("resolv.conf");
        std::fs::write(&stub, "nameserver 127.0.0.53\nsearch lan\n").expect("write");
        let s = DnsSettings {
            resolv_conf: Some(stub),
            ..DnsSettings::default()
        };
        assert_eq!(host_resolv_conf(&s, true).nameservers, ["127.0.0.53"]);
    }
}
