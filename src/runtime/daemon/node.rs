//! Node facts the specs need (downward API, OOM score, capabilities): name, CPUs, memory,
//! the host's address.

use super::super::spec;
use super::super::spec::NodeInfo;
use crate::cgroups;
use std::fs;
use std::thread;

/// Node facts used by specs (downward API, OOM score): name, CPUs, memory, an address.
pub fn detect_node_info() -> NodeInfo {
    let name = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().to_lowercase())
        .unwrap_or_else(|_| "localhost".into());
    let cpus = thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1);
    let memory = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| cgroups::allocatable::parse_mem_total(&m))
        .unwrap_or(0);
    NodeInfo {
        name,
        cpu_millis: cpus * 1000,
        memory_bytes: memory,
        host_ip: host_ip().unwrap_or_else(|| "127.0.0.1".into()),
        // Unreadable status is not expected on Linux; assume nothing is missing then.
        bounding_capabilities: spec::current_bounding_capabilities()
            .unwrap_or_else(|_| spec::capabilities_from_mask(u64::MAX)),
    }
}

/// The address the host would use to reach the outside (no packet is sent: a UDP connect
/// only picks a route). Falls back to loopback.
fn host_ip() -> Option<String> {
    let sock = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    sock.connect("192.0.2.1:9").ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then(|| ip.to_string())
}
