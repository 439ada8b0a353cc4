//! default_conf: the network podvisor writes when the CNI configuration directory has none
//! (as podman writes `87-podman-bridge.conflist` and k3s its flannel list): a bridge
//! (`podvisor0`) with host-local IPAM on a private range, portmap for hostPorts, firewall
//! for hosts whose FORWARD policy drops, bandwidth for the kubelet's bandwidth annotations.
//! Loopback is not part of it: it is a separate invocation, as containerd does for `lo`.
//!
//! The range is `podCIDR` (KubeletConfiguration) or `--pod-cidr`, default 10.86.0.0/16:
//! not podman's 10.88.0.0/16 (nor the 10.89.x.0/24 of its other networks), cri-o's
//! 10.85.0.0/16, k3s' 10.42/10.43, flannel's and kubeadm's 10.244, Docker's
//! 172.17-31/192.168. A second, IPv6 range makes it dual-stack (`10.86.0.0/16,fd86::/64`).
//! host-local keeps its allocations under podvisor's root dir (`<root-dir>/network/ipam`,
//! kept across reboots; released by DEL with the recorded attachments, see [`super`]).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// The file name: after most vendors' lists (a CNI plugin installed later with a lower
/// number takes precedence, as under containerd).
pub const FILE_NAME: &str = "87-podvisor-bridge.conflist";
/// The network's name (host-local's directory, iptables comments).
pub const NETWORK_NAME: &str = "podvisor";
/// The bridge.
pub const BRIDGE: &str = "podvisor0";
/// The default range.
pub const DEFAULT_POD_CIDR: &str = "10.86.0.0/16";

/// A range of the default network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subnet {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl std::fmt::Display for Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// Why a `podCIDR` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodCidrError {
    #[error("{part:?} is not a CIDR (such as {})", DEFAULT_POD_CIDR)]
    NotCidr { part: String },
    #[error("{part:?}: {addr:?} is not an IP address")]
    Address { part: String, addr: String },
    #[error("{part:?}: {prefix:?} is not a prefix length")]
    Prefix { part: String, prefix: String },
    #[error("{part:?}: a /{prefix} leaves no room for pods (at most /{max})")]
    NoRoom { part: String, prefix: u8, max: u8 },
    #[error("{part:?} is not a network address (host bits set)")]
    HostBits { part: String },
    #[error("{cidr:?}: at most one IPv4 and one IPv6 range (dual-stack)")]
    Families { cidr: String },
}

/// Parses `podCIDR`: one range, or an IPv4 and an IPv6 range separated by a comma
/// (dual-stack). Each must be a network address with room for pods.
pub fn parse_pod_cidr(s: &str) -> Result<Vec<Subnet>, PodCidrError> {
    let mut out: Vec<Subnet> = Vec::new();
    for part in s.split(',').map(str::trim) {
        let (a, p) = part.split_once('/').ok_or_else(|| PodCidrError::NotCidr {
            part: part.to_string(),
        })?;
        let addr: IpAddr = a.parse().map_err(|_| PodCidrError::Address {
            part: part.to_string(),
            addr: a.to_string(),
        })?;
        let prefix: u8 = p.parse().map_err(|_| PodCidrError::Prefix {
            part: part.to_string(),
            prefix: p.to_string(),
        })?;
        let (bits, max) = match addr {
            IpAddr::V4(v) => (u128::from(u32::from(v)), (32u8, 30u8)),
            IpAddr::V6(v) => (u128::from(v), (128u8, 120u8)),
        };
        if prefix > max.1 {
            return Err(PodCidrError::NoRoom {
                part: part.to_string(),
                prefix,
                max: max.1,
            });
        }
        let host_bits = u32::from(max.0 - prefix);
        if host_bits < 128 && bits & ((1u128 << host_bits) - 1) != 0 {
            return Err(PodCidrError::HostBits {
                part: part.to_string(),
            });
        }
        if out.iter().any(|o| o.addr.is_ipv4() == addr.is_ipv4()) {
            return Err(PodCidrError::Families {
                cidr: s.to_string(),
            });
        }
        out.push(Subnet { addr, prefix });
    }
    Ok(out)
}

/// The default network's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultNetwork {
    pub subnets: Vec<Subnet>,
    /// host-local's `dataDir`.
    pub ipam_dir: PathBuf,
}

impl DefaultNetwork {
    /// The default range, allocations under `root_dir`.
    pub fn new(root_dir: &Path) -> DefaultNetwork {
        DefaultNetwork {
            // A constant that parses.
            subnets: parse_pod_cidr(DEFAULT_POD_CIDR).unwrap_or_default(),
            ipam_dir: root_dir.join("network").join("ipam"),
        }
    }

    /// The conflist.
    pub fn conflist(&self) -> Value {
        let ranges: Vec<Value> = self
            .subnets
            .iter()
            .map(|s| json!([{"subnet": s.to_string()}]))
            .collect();
        let routes: Vec<Value> = self
            .subnets
            .iter()
            .map(|s| json!({"dst": if s.addr.is_ipv4() { "0.0.0.0/0" } else { "::/0" }}))
            .collect();
        json!({
            "cniVersion": "1.0.0",
            "name": NETWORK_NAME,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": true,
                    "ipMasq": true,
                    "hairpinMode": true,
                    "capabilities": {"ips": true},
                    "ipam": {
                        "type": "host-local",
                        "ranges": ranges,
                        "routes": routes,
                        "dataDir": self.ipam_dir.display().to_string(),
                    }
                },
                {"type": "portmap", "capabilities": {"portMappings": true}},
                {"type": "firewall"},
                {"type": "bandwidth", "capabilities": {"bandwidth": true}}
            ]
        })
    }

    /// Writes the conflist into `dir` (durably) and returns its path.
    pub fn write(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(FILE_NAME);
        let mut text =
            serde_json::to_string_pretty(&self.conflist()).map_err(std::io::Error::other)?;
        text.push('\n');
        crate::fsutil::write_atomic(&path, text.as_bytes())?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cidr_parses_single_and_dual_stack_and_says_what_is_wrong() {
        let s = parse_pod_cidr("10.86.0.0/16").expect("v4");
        assert_eq!(s[0].to_string(), "10.86.0.0/16");
        let s = parse_pod_cidr("10.86.0.0/16, fd86::/64").expect("dual");
        assert_eq!(s.len(), 2);
        for (bad, why) in [
            ("10.86.0.1/16", "host bits"),
            ("10.86.0.0", "not a CIDR"),
            ("10.86.0.0/31", "no room"),
            ("10.0.0.0/8,10.1.0.0/16", "at most one IPv4"),
            ("x/16", "not an IP"),
        ] {
            let e = parse_pod_cidr(bad).expect_err(bad).to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_default_list_parses_as_a_cni_list() {
        let d = DefaultNetwork {
            subnets: parse_pod_cidr("10.86.0.0/16,fd86::/64").expect("cidr"),
            ipam_dir: PathBuf::from("/var/lib/podvisor/network/ipam"),
        };
        let text = serde_json::to_string(&d.conflist()).expect("json");
        let l = super::super::cni::conf::parse(&text, Path::new(FILE_NAME), true).expect("parse");
        let types: Vec<&str> = l.plugins.iter().map(|p| p.plugin_type.as_str()).collect();
        assert_eq!(types, ["bridge", "portmap", "firewall", "bandwidth"]);
        assert_eq!(l.cni_version, "1.0.0");
        let ipam = &l.plugins[0].raw["ipam"];
        assert_eq!(
            ipam["ranges"],
            json!([[{"subnet": "10.86.0.0/16"}], [{"subnet": "fd86::/64"}]])
        );
        assert_eq!(
            ipam["routes"],
            json!([{"dst": "0.0.0.0/0"}, {"dst": "::/0"}])
        );
    }
}
