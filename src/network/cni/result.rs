//! result: what the runtime reads from an ADD result (spec "Section 5: Result Types", the
//! 0.3.x/0.4.0 shape included): the IP addresses of the container's interface.

use std::net::IpAddr;

use serde_json::Value;

/// The IPs of interface `ifname` in the sandbox (all the result's IPs when it names no
/// interfaces), IPv4 first as containerd orders pod IPs, without duplicates.
pub fn pod_ips(result: &Value, ifname: &str) -> Vec<IpAddr> {
    let interfaces = result.get("interfaces").and_then(Value::as_array);
    let ours = |idx: Option<u64>| -> bool {
        let (Some(list), Some(i)) = (interfaces, idx) else {
            // No interface index: the IP is the container's (0.3.x results may omit it).
            return true;
        };
        list.get(i as usize).is_some_and(|intf| {
            intf.get("name").and_then(Value::as_str) == Some(ifname)
                && intf
                    .get("sandbox")
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
        })
    };
    let mut ips: Vec<IpAddr> = result
        .get("ips")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|ip| ours(ip.get("interface").and_then(Value::as_u64)))
        .filter_map(|ip| ip.get("address").and_then(Value::as_str))
        .filter_map(|a| a.split('/').next()?.parse().ok())
        .collect();
    let mut seen = Vec::new();
    ips.retain(|ip| {
        let new = !seen.contains(ip);
        seen.push(*ip);
        new
    });
    ips.sort_by_key(|ip| ip.is_ipv6());
    ips
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ips_of_the_container_interface_ipv4_first() {
        let r = serde_json::json!({
            "cniVersion": "1.0.0",
            "interfaces": [
                {"name": "podvisor0", "mac": "aa"},
                {"name": "veth1", "mac": "bb"},
                {"name": "eth0", "mac": "cc", "sandbox": "/run/podvisor/pods/u/ns/net"}
            ],
            "ips": [
                {"address": "fd00::5/64", "interface": 2},
                {"address": "10.86.0.5/16", "gateway": "10.86.0.1", "interface": 2},
                {"address": "10.99.0.1/16", "interface": 0}
            ]
        });
        let ips: Vec<String> = pod_ips(&r, "eth0").iter().map(|i| i.to_string()).collect();
        assert_eq!(ips, ["10.86.0.5", "fd00::5"]);
        assert!(pod_ips(&r, "net1").is_empty());
        // 0.3.x without interface indices; 0.4.0's "version" fields are ignored.
        let r = serde_json::json!({"cniVersion": "0.3.1",
            "ips": [{"version": "4", "address": "10.1.2.3/24"}]});
        assert_eq!(
            pod_ips(&r, "eth0"),
            ["10.1.2.3".parse::<IpAddr>().expect("ip")]
        );
    }
}
