//! config::network: the pod network's settings: `podCIDR` (the default network's range, the
//! kubelet's standalone-mode field), `clusterDNS` and `clusterDomain` (pods' DNS), from the
//! file, and the CNI flags (`--cni-conf-dir`, `--cni-bin-dir`, `--cni-plugin-timeout`,
//! `--pod-cidr`; the first two are the kubelet's former flags of the same names).

use std::path::{Path, PathBuf};

use serde_saphyr::Location;

use super::checks::check_absolute;
use super::flags::invalid_flag;
use super::raw::RawKubeletConfiguration;
use super::raw::{fmt_location, non_empty};
use super::{ConfigError, RunFlags};
use crate::duration::parse_go_duration;
use crate::network::default_conf::{parse_pod_cidr, Subnet};
use crate::network::NetworkConfig;
use crate::pod::validation::is_dns1123_subdomain;

/// The network fields of a KubeletConfiguration file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkFields {
    /// `podCIDR`: one range, or an IPv4 and an IPv6 one (dual-stack).
    pub pod_cidr: Option<Vec<Subnet>>,
    /// `clusterDNS`: IP addresses.
    pub cluster_dns: Vec<String>,
    /// `clusterDomain`, without a trailing dot.
    pub cluster_domain: Option<String>,
}

pub(super) fn parse(
    raw: &RawKubeletConfiguration,
    source_name: &str,
) -> Result<NetworkFields, ConfigError> {
    let err = |field: &str, at: &Location, message: String| ConfigError::Invalid {
        source_name: source_name.into(),
        location: fmt_location(at),
        field: field.into(),
        message,
    };
    let pod_cidr = match non_empty(&raw.pod_cidr) {
        Some(s) => Some(
            parse_pod_cidr(&s.value).map_err(|e| err("podCIDR", &s.referenced, e.to_string()))?,
        ),
        None => None,
    };
    let mut cluster_dns = Vec::new();
    for (i, ip) in raw.cluster_dns.iter().flatten().enumerate() {
        if ip.value.parse::<std::net::IpAddr>().is_err() {
            return Err(err(
                &format!("clusterDNS[{i}]"),
                &ip.referenced,
                format!("{:?} is not an IP address", ip.value),
            ));
        }
        cluster_dns.push(ip.value.clone());
    }
    let cluster_domain = match non_empty(&raw.cluster_domain) {
        Some(s) => {
            let d = s.value.trim_end_matches('.');
            if !is_dns1123_subdomain(d) {
                return Err(err(
                    "clusterDomain",
                    &s.referenced,
                    format!("{:?} is not a valid DNS-1123 subdomain", s.value),
                ));
            }
            Some(d.to_string())
        }
        None => None,
    };
    Ok(NetworkFields {
        pod_cidr,
        cluster_dns,
        cluster_domain,
    })
}

/// The pod network from the flags over the file; `None` when `--cni-conf-dir ""` turns it
/// off (pods without hostNetwork then have loopback only).
pub(super) fn network_config(
    file: &NetworkFields,
    flags: &RunFlags,
    root_dir: &Path,
) -> Result<Option<NetworkConfig>, ConfigError> {
    let mut n = NetworkConfig::new(root_dir);
    match &flags.cni_conf_dir {
        Some(d) if d.as_os_str().is_empty() => return Ok(None),
        Some(d) => {
            check_absolute(d).map_err(|m| {
                invalid_flag("cni-conf-dir", &d.display().to_string(), m.to_string())
            })?;
            n.conf_dir = d.clone();
        }
        None => {}
    }
    if let Some(dirs) = &flags.cni_bin_dir {
        let list: Vec<PathBuf> = dirs
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .collect();
        if list.is_empty() {
            return Err(invalid_flag("cni-bin-dir", dirs, "no directory given"));
        }
        for d in &list {
            check_absolute(d).map_err(|m| invalid_flag("cni-bin-dir", dirs, m.to_string()))?;
        }
        n.bin_dirs = list;
    }
    if let Some(t) = &flags.cni_plugin_timeout {
        let d = parse_go_duration(t)
            .map_err(|e| invalid_flag("cni-plugin-timeout", t, e.to_string()))?;
        if d.is_zero() {
            return Err(invalid_flag(
                "cni-plugin-timeout",
                t,
                "must be greater than zero",
            ));
        }
        n.plugin_timeout = d;
    }
    match &flags.pod_cidr {
        Some(c) => {
            n.default_network.subnets =
                parse_pod_cidr(c).map_err(|e| invalid_flag("pod-cidr", c, e.to_string()))?;
        }
        None => {
            if let Some(s) = &file.pod_cidr {
                n.default_network.subnets = s.clone();
            }
        }
    }
    Ok(Some(n))
}
