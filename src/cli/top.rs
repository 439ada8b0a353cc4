//! cli::top: `podvisor top [POD] [--containers]`, like `kubectl top pod`: CPU in millicores
//! from two `/stats` samples and the memory working set in Mi.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use super::{table, write_out, CliError};
use crate::api::stats::{ContainerStats, PodStats};
use crate::api::{client, percent_encode};
use crate::cgroups::stats::{millicores, CgroupStats};

/// CPU rate between two samples, as kubectl prints it (`12m`); `<unknown>` without both.
fn cpu_cell(
    before: Option<&CgroupStats>,
    after: Option<&CgroupStats>,
    elapsed_usec: u64,
) -> String {
    match (
        before.and_then(|s| s.cpu_usage_usec),
        after.and_then(|s| s.cpu_usage_usec),
    ) {
        (Some(b), Some(a)) if elapsed_usec > 0 => format!("{}m", millicores(b, a, elapsed_usec)),
        _ => "<unknown>".into(),
    }
}

/// Working set in whole Mi, as kubectl prints it (`5Mi`).
fn memory_cell(s: Option<&CgroupStats>) -> String {
    match s.and_then(|s| s.memory_working_set_bytes) {
        Some(b) => format!("{}Mi", b / (1024 * 1024)),
        None => "<unknown>".into(),
    }
}

fn find_container<'a>(p: &'a PodStats, c: &ContainerStats) -> Option<&'a ContainerStats> {
    p.containers
        .iter()
        .find(|x| x.container_id == c.container_id)
}

/// The table of `after`, with CPU rates against `before` (pods absent from `before`, e.g.
/// just started, show `<unknown>` CPU).
pub fn render_top(before: &[PodStats], after: &[PodStats], containers: bool) -> String {
    let show_ns = after.iter().any(|p| p.namespace != "default");
    let mut text = String::new();
    if show_ns {
        text.push_str("NAMESPACE\t");
    }
    if containers {
        text.push_str("POD\tNAME\tCPU(cores)\tMEMORY(bytes)\n");
    } else {
        text.push_str("NAME\tCPU(cores)\tMEMORY(bytes)\n");
    }
    for p in after {
        let prev = before.iter().find(|b| b.uid == p.uid);
        let elapsed = prev.map_or(0, |b| p.timestamp_usec.saturating_sub(b.timestamp_usec));
        let ns = if show_ns {
            format!("{}\t", p.namespace)
        } else {
            String::new()
        };
        if containers {
            for c in &p.containers {
                let b = prev.and_then(|b| find_container(b, c));
                text.push_str(&format!(
                    "{ns}{}\t{}\t{}\t{}\n",
                    p.name,
                    c.name,
                    cpu_cell(b.and_then(|b| b.stats.as_ref()), c.stats.as_ref(), elapsed),
                    memory_cell(c.stats.as_ref())
                ));
            }
        } else {
            text.push_str(&format!(
                "{ns}{}\t{}\t{}\n",
                p.name,
                cpu_cell(
                    prev.and_then(|b| b.stats.as_ref()),
                    p.stats.as_ref(),
                    elapsed
                ),
                memory_cell(p.stats.as_ref())
            ));
        }
    }
    table::kubectl_table(&text)
}

/// `podvisor top [POD] [--containers]`: two samples `interval` apart, then the table.
pub fn top(
    socket: &Path,
    pod: Option<&str>,
    containers: bool,
    interval: Duration,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let path = match pod {
        Some(p) => format!("/stats?pod={}", percent_encode(p)),
        None => "/stats".to_string(),
    };
    let before: Vec<PodStats> = client::get_json(socket, &path)?;
    std::thread::sleep(interval);
    let after: Vec<PodStats> = client::get_json(socket, &path)?;
    if after.is_empty() {
        return write_out(err, "No resources found\n");
    }
    write_out(out, &render_top(&before, &after, containers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(cpu: u64, ws_mi: u64) -> CgroupStats {
        CgroupStats {
            cpu_usage_usec: Some(cpu),
            memory_working_set_bytes: Some(ws_mi << 20),
            ..Default::default()
        }
    }

    fn pod(name: &str, ts: u64, cpu: u64, containers: &[(&str, u64)]) -> PodStats {
        PodStats {
            namespace: "default".into(),
            name: name.into(),
            uid: format!("uid-{name}"),
            qos_class: "Burstable".into(),
            cgroup: format!("/pv/burstable/poduid-{name}"),
            timestamp_usec: ts,
            stats: Some(stats(cpu, 12)),
            ephemeral_storage: None,
            containers: containers
                .iter()
                .map(|(c, cpu)| ContainerStats {
                    name: (*c).into(),
                    container_id: format!("{name}-{c}"),
                    cgroup: String::new(),
                    stats: Some(stats(*cpu, 5)),
                })
                .collect(),
        }
    }

    #[test]
    fn pods_and_containers_like_kubectl_top() {
        let before = vec![pod("web-n1", 1_000_000, 100_000, &[("main", 40_000)])];
        let after = vec![
            pod("web-n1", 2_000_000, 350_000, &[("main", 240_000)]),
            pod("new-n1", 2_000_000, 5_000, &[]),
        ];
        assert_eq!(
            render_top(&before, &after, false),
            "NAME     CPU(cores)   MEMORY(bytes)\n\
             web-n1   250m         12Mi\n\
             new-n1   <unknown>    12Mi\n"
        );
        assert_eq!(
            render_top(&before, &after, true),
            "POD      NAME   CPU(cores)   MEMORY(bytes)\n\
             web-n1   main   200m         5Mi\n"
        );
    }
}
