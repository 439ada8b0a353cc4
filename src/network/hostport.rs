//! hostport: the kubelet's NodePorts admission check (the scheduler's `HostPortInfo`): a pod
//! whose hostPort (protocol, port, host IP) is already taken by another admitted pod is
//! refused. Host IPs conflict when equal or when either is a wildcard ("", 0.0.0.0, ::).
//! Pure; the sync loop runs it when it admits a pod.

use crate::pod::netargs::HostPort;

/// The kubelet's rejection: reason `NodePorts`, the predicate's message.
pub const REASON: &str = "NodePorts";
pub const MESSAGE: &str =
    "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports";

/// A hostPort of the pod that another pod already uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConflict {
    pub port: HostPort,
    /// The other pod (namespace/name).
    pub other_pod: String,
    pub other: HostPort,
}

impl PortConflict {
    /// The rejection message: the kubelet's, then which port and which pod (podvisor names
    /// the pod holding it).
    pub fn message(&self) -> String {
        let ip = |p: &HostPort| {
            if p.host_ip.is_empty() {
                String::new()
            } else {
                format!(" on {}", p.host_ip)
            }
        };
        format!(
            "{MESSAGE}: hostPort {}/{}{} is used by pod {} (hostPort {}/{}{})",
            self.port.host_port,
            self.port.protocol,
            ip(&self.port),
            self.other_pod,
            self.other.host_port,
            self.other.protocol,
            ip(&self.other),
        )
    }
}

fn wildcard(ip: &str) -> bool {
    matches!(ip, "" | "0.0.0.0" | "::")
}

/// Whether two host ports collide.
pub fn conflicts(a: &HostPort, b: &HostPort) -> bool {
    a.host_port == b.host_port
        && a.protocol.eq_ignore_ascii_case(&b.protocol)
        && (wildcard(&a.host_ip) || wildcard(&b.host_ip) || a.host_ip == b.host_ip)
}

/// The first of `ports` another pod of `others` (name, its host ports) already holds.
pub fn find_conflict<'a>(
    ports: &[HostPort],
    others: impl IntoIterator<Item = (&'a str, Vec<HostPort>)>,
) -> Option<PortConflict> {
    for (name, theirs) in others {
        for p in ports {
            if let Some(o) = theirs.iter().find(|o| conflicts(p, o)) {
                return Some(PortConflict {
                    port: p.clone(),
                    other_pod: name.to_string(),
                    other: o.clone(),
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(port: u16, proto: &str, ip: &str) -> HostPort {
        HostPort {
            host_port: port,
            container_port: 80,
            protocol: proto.into(),
            host_ip: ip.into(),
        }
    }

    #[test]
    fn conflicts_like_the_schedulers_host_port_info() {
        let table = [
            (hp(8080, "TCP", ""), hp(8080, "TCP", ""), true),
            (hp(8080, "TCP", ""), hp(8080, "UDP", ""), false),
            (hp(8080, "TCP", ""), hp(8081, "TCP", ""), false),
            (hp(8080, "TCP", "127.0.0.1"), hp(8080, "TCP", ""), true),
            (
                hp(8080, "TCP", "127.0.0.1"),
                hp(8080, "TCP", "0.0.0.0"),
                true,
            ),
            (
                hp(8080, "TCP", "127.0.0.1"),
                hp(8080, "TCP", "10.0.0.1"),
                false,
            ),
            (
                hp(8080, "TCP", "10.0.0.1"),
                hp(8080, "TCP", "10.0.0.1"),
                true,
            ),
            (hp(53, "UDP", "::"), hp(53, "UDP", "10.0.0.1"), true),
        ];
        for (a, b, want) in table {
            assert_eq!(conflicts(&a, &b), want, "{a:?} {b:?}");
            assert_eq!(conflicts(&b, &a), want, "{b:?} {a:?}");
        }
    }

    #[test]
    fn the_message_names_the_port_and_the_other_pod() {
        let others = vec![
            ("default/db-node", vec![hp(5432, "TCP", "")]),
            ("default/web-node", vec![hp(8080, "TCP", "127.0.0.1")]),
        ];
        let c =
            find_conflict(&[hp(9000, "TCP", ""), hp(8080, "TCP", "")], others).expect("conflict");
        assert_eq!(c.other_pod, "default/web-node");
        assert_eq!(
            c.message(),
            "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: \
             hostPort 8080/TCP is used by pod default/web-node (hostPort 8080/TCP on 127.0.0.1)"
        );
        assert!(find_conflict(&[hp(9000, "TCP", "")], Vec::new()).is_none());
    }
}
