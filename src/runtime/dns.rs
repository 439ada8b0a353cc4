//! dns: the pod's `/etc/resolv.conf` and `/etc/hosts`, as the kubelet computes them
//! (pkg/kubelet/network/dns/dns.go `GetPodDNS`, kubelet_pods.go `managedHostsFileContent`)
//! and containerd writes them.
//!
//! There is no cluster DNS: `ClusterFirst` and `ClusterFirstWithHostNet` fall back to the
//! node's settings, as the kubelet does when `clusterDNS` is empty. The node's settings come
//! from the configuration's `resolvConf` (default `/etc/resolv.conf`; empty: none). Then
//! `dnsConfig` is merged: nameservers and searches appended without duplicates, options
//! merged by name (the pod's win), and the result cut to the resolver's limits (3
//! nameservers, 32 search domains, 2048 characters of searches).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Pod;

/// The kubelet's limits (validation.MaxDNSNameservers, MaxDNSSearchPaths,
/// MaxDNSSearchListChars).
const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCHES: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;

/// Where the node's DNS settings come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsSettings {
    /// The KubeletConfiguration's `resolvConf`; `None` when it is set to "" (no host
    /// settings).
    pub resolv_conf: Option<PathBuf>,
}

impl Default for DnsSettings {
    fn default() -> Self {
        DnsSettings {
            resolv_conf: Some(PathBuf::from("/etc/resolv.conf")),
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

/// The pod's resolver configuration (`host` is the node's, see [`host_resolv_conf`]).
pub fn pod_resolv_conf(pod: &Pod, host: &ResolvConf) -> ResolvConf {
    let spec = pod.spec.as_ref();
    let policy = spec.and_then(|s| s.dns_policy.as_deref()).unwrap_or("");
    let mut out = if policy == "None" {
        ResolvConf::default()
    } else {
        host.clone()
    };
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
/// or it cannot be read (logged: the pod still starts, as under a kubelet).
pub fn host_resolv_conf(settings: &DnsSettings) -> ResolvConf {
    let Some(path) = &settings.resolv_conf else {
        return ResolvConf::default();
    };
    match std::fs::read_to_string(path) {
        Ok(text) => ResolvConf::parse(&text),
        Err(e) => {
            log::warn!(
                "resolvConf {}: {e}: pods get no node DNS settings",
                path.display()
            );
            ResolvConf::default()
        }
    }
}

/// The kubelet's hosts file for `pod`: the node's `/etc/hosts` (read from `node_hosts`) for
/// hostNetwork pods, the managed file with the pod's own name otherwise; then the pod's
/// `hostAliases`, one line per hostname.
pub fn hosts_file(pod: &Pod, hostname: &str, host_net: bool, node_hosts: &Path) -> String {
    let mut s = if host_net {
        std::fs::read_to_string(node_hosts).unwrap_or_else(|_| "127.0.0.1\tlocalhost\n".into())
    } else {
        // No pod IP yet (loopback-only pod network): the pod's name resolves to loopback.
        format!(
            "# Kubernetes-managed hosts file.\n\
             127.0.0.1\tlocalhost\n\
             ::1\tlocalhost ip6-localhost ip6-loopback\n\
             fe00::0\tip6-localnet\n\
             fe00::0\tip6-mcastprefix\n\
             fe00::1\tip6-allnodes\n\
             fe00::2\tip6-allrouters\n\
             127.0.0.1\t{hostname}\n"
        )
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
        let r = pod_resolv_conf(&p, &h);
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
        let r = pod_resolv_conf(&p, &h);
        assert_eq!(r.nameservers, ["1.2.3.4"]);
        assert_eq!(r.searches.len(), 32);
        assert!(r.options.is_empty());
        let p = pod(serde_json::json!({"spec": {"containers": [], "dnsPolicy": "ClusterFirst"}}));
        assert_eq!(
            pod_resolv_conf(&p, &h),
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
        let s = hosts_file(&p, "web", true, &node_hosts);
        assert_eq!(
            s,
            "127.0.0.1\tlocalhost\n10.0.0.1\tnode\n\n# Entries added by HostAliases.\n127.0.0.1\tkubernetes\n127.0.0.1\tapi\n"
        );
        let s = hosts_file(&p, "web", false, &node_hosts);
        assert!(s.starts_with("# Kubernetes-managed hosts file.\n"), "{s}");
        assert!(
            s.contains("127.0.0.1\tweb\n\n# Entries added by HostAliases.\n"),
            "{s}"
        );
    }
}
