//! cli::describe::container: one container's block of `describe pod` (kubectl's
//! `describeContainers`): image, ports, state and last state, readiness, restarts, resources,
//! probes, environment and mounts.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::{Container, ContainerState, ContainerStatus};

use crate::cli::time::rfc1123z;

pub(super) fn container(w: &mut String, c: &Container, status: Option<&ContainerStatus>) {
    let _ = writeln!(w, "  {}:", c.name);
    if let Some(s) = status {
        let _ = writeln!(
            w,
            "    Container ID:\t{}",
            s.container_id.as_deref().unwrap_or("")
        );
    }
    let _ = writeln!(w, "    Image:\t{}", c.image.as_deref().unwrap_or(""));
    if let Some(s) = status {
        let _ = writeln!(w, "    Image ID:\t{}", s.image_id);
    }
    let ports: Vec<String> = c
        .ports
        .iter()
        .flatten()
        .map(|p| {
            format!(
                "{}/{}",
                p.container_port,
                p.protocol.as_deref().unwrap_or("TCP")
            )
        })
        .collect();
    let host_ports: Vec<String> = c
        .ports
        .iter()
        .flatten()
        .map(|p| {
            format!(
                "{}/{}",
                p.host_port.unwrap_or(0),
                p.protocol.as_deref().unwrap_or("TCP")
            )
        })
        .collect();
    let label = if ports.len() > 1 { "Ports" } else { "Port" };
    let _ = writeln!(w, "    {label}:\t{}", or_none(&ports.join(", ")));
    let label = if host_ports.len() > 1 {
        "Host Ports"
    } else {
        "Host Port"
    };
    let _ = writeln!(w, "    {label}:\t{}", or_none(&host_ports.join(", ")));
    for (title, list) in [("Command", &c.command), ("Args", &c.args)] {
        if let Some(list) = list.as_ref().filter(|l| !l.is_empty()) {
            let _ = writeln!(w, "    {title}:");
            for arg in list {
                for line in arg.split('\n') {
                    let _ = writeln!(w, "      {line}");
                }
            }
        }
    }
    if let Some(s) = status {
        state(w, "State", s.state.as_ref());
        if let Some(last) = s.last_state.as_ref().filter(|l| l.terminated.is_some()) {
            state(w, "Last State", Some(last));
        }
        let _ = writeln!(w, "    Ready:\t{}", if s.ready { "True" } else { "False" });
        let _ = writeln!(w, "    Restart Count:\t{}", s.restart_count);
    }
    for (title, probe) in [
        ("Liveness", &c.liveness_probe),
        ("Readiness", &c.readiness_probe),
        ("Startup", &c.startup_probe),
    ] {
        if let Some(p) = probe {
            let _ = writeln!(w, "    {title}:\t{}", probe_line(p));
        }
    }
    if let Some(r) = &c.resources {
        for (title, map) in [("Limits", &r.limits), ("Requests", &r.requests)] {
            if let Some(map) = map.as_ref().filter(|m| !m.is_empty()) {
                let _ = writeln!(w, "    {title}:");
                for (name, q) in map {
                    let _ = writeln!(w, "      {name}:\t{}", q.0);
                }
            }
        }
    }
}

/// kubectl's probe line: `http-get http://:8080/healthz delay=0s timeout=1s period=10s
/// #success=1 #failure=3`.
fn probe_line(p: &k8s_openapi::api::core::v1::Probe) -> String {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    let port = |p: &IntOrString| match p {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    };
    let action = if let Some(h) = &p.http_get {
        format!(
            "http-get {}://{}:{}{}",
            h.scheme.as_deref().unwrap_or("HTTP").to_lowercase(),
            h.host.as_deref().unwrap_or(""),
            port(&h.port),
            h.path.as_deref().unwrap_or("")
        )
    } else if let Some(t) = &p.tcp_socket {
        format!(
            "tcp-socket {}:{}",
            t.host.as_deref().unwrap_or(""),
            port(&t.port)
        )
    } else if let Some(e) = &p.exec {
        format!("exec [{}]", e.command.clone().unwrap_or_default().join(" "))
    } else if let Some(g) = &p.grpc {
        format!(
            "grpc <pod>:{} {}",
            g.port,
            g.service.as_deref().unwrap_or("")
        )
    } else {
        "unknown".to_string()
    };
    format!(
        "{action} delay={}s timeout={}s period={}s #success={} #failure={}",
        p.initial_delay_seconds.unwrap_or(0),
        p.timeout_seconds.unwrap_or(1),
        p.period_seconds.unwrap_or(10),
        p.success_threshold.unwrap_or(1),
        p.failure_threshold.unwrap_or(3)
    )
}

fn or_none(s: &str) -> &str {
    if s.is_empty() {
        "<none>"
    } else {
        s
    }
}

/// kubectl's `describeStatus`.
fn state(w: &mut String, name: &str, state: Option<&ContainerState>) {
    let running = state.and_then(|s| s.running.as_ref());
    let waiting = state.and_then(|s| s.waiting.as_ref());
    let terminated = state.and_then(|s| s.terminated.as_ref());
    let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map_or_else(String::new, |t| rfc1123z(t.0))
    };
    if let Some(r) = running {
        let _ = writeln!(w, "    {name}:\tRunning");
        let _ = writeln!(w, "      Started:\t{}", time(r.started_at.as_ref()));
    } else if let Some(wt) = waiting {
        let _ = writeln!(w, "    {name}:\tWaiting");
        if let Some(r) = wt.reason.as_deref().filter(|r| !r.is_empty()) {
            let _ = writeln!(w, "      Reason:\t{r}");
        }
    } else if let Some(t) = terminated {
        let _ = writeln!(w, "    {name}:\tTerminated");
        if let Some(r) = t.reason.as_deref().filter(|r| !r.is_empty()) {
            let _ = writeln!(w, "      Reason:\t{r}");
        }
        if let Some(m) = t.message.as_deref().filter(|m| !m.is_empty()) {
            let _ = writeln!(w, "      Message:\t{m}");
        }
        let _ = writeln!(w, "      Exit Code:\t{}", t.exit_code);
        if let Some(sig) = t.signal.filter(|s| *s > 0) {
            let _ = writeln!(w, "      Signal:\t{sig}");
        }
        let _ = writeln!(w, "      Started:\t{}", time(t.started_at.as_ref()));
        let _ = writeln!(w, "      Finished:\t{}", time(t.finished_at.as_ref()));
    } else {
        let _ = writeln!(w, "    {name}:\tWaiting");
    }
}
