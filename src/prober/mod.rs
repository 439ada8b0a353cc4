//! prober: container probes and lifecycle-hook handlers (the kubelet's pkg/probe and
//! pkg/kubelet/prober, without goroutines).
//!
//! It owns: the validated form of a v1 `Probe` / `LifecycleHandler` ([`ProbeSpec`],
//! [`Action`]), the handlers that run one action and return the kubelet's `probe.Result`
//! ([`ProbeResult`]) — [`http`] (httpGet), [`tcp`] (tcpSocket), [`grpc`] (grpc.health.v1 over a
//! minimal HTTP/2 cleartext client, with [`hpack`] header coding) and exec through
//! [`Runtime::exec_sync`] — and the [`scheduler`]: ONE thread with a timer heap that owns every
//! probe schedule, threshold counter and startup gate, and runs due probes on a small bounded
//! pool. The sync loop only hears about results that matter (a state change, a failure or a
//! warning, for events), as [`scheduler::ProbeUpdate`]s.

pub mod grpc;
pub mod hpack;
pub mod http;
pub mod scheduler;
pub mod tcp;

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::runtime::Runtime;

/// Errors turning a manifest's probe or hook into something runnable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProbeError {
    #[error("container {container}: {what} has no handler (exec, httpGet, tcpSocket, grpc)")]
    NoHandler {
        container: String,
        what: &'static str,
    },
    #[error("container {container}: {what} has more than one handler")]
    MultipleHandlers {
        container: String,
        what: &'static str,
    },
    #[error("container {container}: {what}: port {port:?} is not a named port of the container")]
    NamedPort {
        container: String,
        what: &'static str,
        port: String,
    },
    #[error("container {container}: {what}: port {port} is out of range 1-65535")]
    PortRange {
        container: String,
        what: &'static str,
        port: i64,
    },
    #[error("container {container}: {what}: {field} must be {rule}, got {value}")]
    Field {
        container: String,
        what: &'static str,
        field: &'static str,
        rule: &'static str,
        value: i64,
    },
    #[error("container {container}: {what}: exec command is empty")]
    EmptyCommand {
        container: String,
        what: &'static str,
    },
}

/// The kubelet's `probe.Result`: what one run of a handler says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    /// Counts as a success, but the kubelet records a ProbeWarning event (e.g. a redirect to
    /// another host was not followed).
    Warning {
        message: String,
    },
    Failure {
        message: String,
    },
}

impl ProbeResult {
    /// Success and Warning both count as a passing probe.
    pub fn passed(&self) -> bool {
        !matches!(self, ProbeResult::Failure { .. })
    }

    fn failure(message: impl Into<String>) -> ProbeResult {
        ProbeResult::Failure {
            message: message.into(),
        }
    }
}

/// Which probe of a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    /// "Liveness", "Readiness", "Startup": as the kubelet writes it in events.
    pub fn title(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }
    fn field(self) -> &'static str {
        match self {
            ProbeKind::Startup => "startupProbe",
            ProbeKind::Liveness => "livenessProbe",
            ProbeKind::Readiness => "readinessProbe",
        }
    }
}

/// HTTP or HTTPS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// A validated httpGet action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAction {
    pub scheme: Scheme,
    pub host: String,
    pub port: u16,
    /// Path with query, starting with `/`.
    pub path: String,
    pub headers: Vec<(String, String)>,
}

/// What a probe or hook does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Runs in the container through [`Runtime::exec_sync`]; exit code 0 passes.
    Exec {
        command: Vec<String>,
    },
    Http(HttpAction),
    Tcp {
        host: String,
        port: u16,
    },
    /// grpc.health.v1.Health/Check; an empty service asks about the server as a whole.
    Grpc {
        host: String,
        port: u16,
        service: String,
    },
    /// Hooks only: waits, then succeeds.
    Sleep {
        duration: Duration,
    },
}

/// A validated probe with the kubelet's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    pub kind: ProbeKind,
    pub action: Action,
    pub initial_delay: Duration,
    pub period: Duration,
    pub timeout: Duration,
    pub success_threshold: u32,
    pub failure_threshold: u32,
    /// Probe-level terminationGracePeriodSeconds (liveness/startup kills only).
    pub termination_grace: Option<Duration>,
}

/// The kubelet's probe User-Agent: `kube-probe/<major>.<minor>` of the API it speaks.
pub const USER_AGENT: &str = "kube-probe/1.35";

/// Where the handlers run: the container (exec), the runtime that can reach it, and the
/// pod's network namespace (network handlers connect from inside it; None: the host's).
pub struct Target<'a> {
    pub runtime: &'a dyn Runtime,
    pub container_id: &'a str,
    pub netns: Option<&'a Path>,
}

/// Runs one action once, within `timeout`.
pub fn run_action(action: &Action, target: &Target<'_>, timeout: Duration) -> ProbeResult {
    let network = || match action {
        Action::Http(h) => http::probe(h, timeout),
        Action::Tcp { host, port } => tcp::probe(host, *port, timeout),
        Action::Grpc {
            host,
            port,
            service,
        } => grpc::probe(host, *port, service, timeout),
        Action::Exec { .. } | Action::Sleep { .. } => ProbeResult::Success,
    };
    match action {
        Action::Exec { command } => run_exec(target, command, timeout),
        Action::Sleep { duration } => {
            std::thread::sleep((*duration).min(timeout));
            ProbeResult::Success
        }
        _ => match target.netns {
            None => network(),
            Some(ns) => {
                in_netns(ns, network).unwrap_or_else(|e| ProbeResult::failure(e.to_string()))
            }
        },
    }
}

/// Why a probe could not enter the pod's network namespace.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    #[error("open own network namespace: {source}")]
    OpenOwn { source: std::io::Error },
    #[error("open pod network namespace {path}: {source}")]
    Open {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("enter pod network namespace {path}: {source}")]
    Enter {
        path: std::path::PathBuf,
        source: nix::Error,
    },
}

/// Runs `f` on this thread inside the network namespace pinned at `netns`, then returns the
/// thread to its own. Sockets keep the namespace they were created in, so everything `f`
/// opens talks to the pod's network (its 127.0.0.1), whatever thread reads it later.
pub fn in_netns<T>(netns: &Path, f: impl FnOnce() -> T) -> Result<T, NetnsError> {
    use nix::sched::{setns, CloneFlags};
    let own = std::fs::File::open("/proc/thread-self/ns/net")
        .map_err(|source| NetnsError::OpenOwn { source })?;
    let target = std::fs::File::open(netns).map_err(|source| NetnsError::Open {
        path: netns.to_path_buf(),
        source,
    })?;
    setns(&target, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Enter {
        path: netns.to_path_buf(),
        source,
    })?;
    let out = f();
    if let Err(e) = setns(&own, CloneFlags::CLONE_NEWNET) {
        // Returning to a namespace this thread was in, through a descriptor still open, with
        // the privilege that just entered another one, does not fail in practice. If it ever
        // did, this thread would silently use the pod's network for every later connection:
        // stopping is the only safe answer.
        log::error!("cannot return to the host network namespace: {e}");
        std::process::abort();
    }
    Ok(out)
}

fn run_exec(target: &Target<'_>, command: &[String], timeout: Duration) -> ProbeResult {
    match target
        .runtime
        .exec_sync(target.container_id, command, timeout)
    {
        Err(e) => ProbeResult::failure(e.to_string()),
        Ok(out) if out.timed_out => ProbeResult::failure(format!(
            "command {:?} timed out after {}s",
            command.join(" "),
            timeout.as_secs_f64()
        )),
        Ok(out) if out.exit_code == 0 => ProbeResult::Success,
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            let text = text.trim();
            ProbeResult::failure(if text.is_empty() {
                format!(
                    "command {:?} exited with {}",
                    command.join(" "),
                    out.exit_code
                )
            } else {
                text.to_string()
            })
        }
    }
}

/// Resolves a port (number or name of one of the container's ports).
fn resolve_port(
    port: &IntOrString,
    container: &Container,
    what: &'static str,
) -> Result<u16, ProbeError> {
    let n = match port {
        IntOrString::Int(n) => i64::from(*n),
        IntOrString::String(s) => match s.parse::<i64>() {
            Ok(n) => n,
            Err(_) => container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .map(|p| i64::from(p.container_port))
                .ok_or_else(|| ProbeError::NamedPort {
                    container: container.name.clone(),
                    what,
                    port: s.clone(),
                })?,
        },
    };
    u16::try_from(n)
        .ok()
        .filter(|p| *p != 0)
        .ok_or(ProbeError::PortRange {
            container: container.name.clone(),
            what,
            port: n,
        })
}

struct Handlers<'a> {
    exec: Option<&'a k8s_openapi::api::core::v1::ExecAction>,
    http: Option<&'a k8s_openapi::api::core::v1::HTTPGetAction>,
    tcp: Option<&'a k8s_openapi::api::core::v1::TCPSocketAction>,
    grpc: Option<&'a k8s_openapi::api::core::v1::GRPCAction>,
    sleep: Option<&'a k8s_openapi::api::core::v1::SleepAction>,
}

fn action_of(
    h: Handlers<'_>,
    container: &Container,
    pod_ip: &str,
    what: &'static str,
) -> Result<Action, ProbeError> {
    let count = [
        h.exec.is_some(),
        h.http.is_some(),
        h.tcp.is_some(),
        h.grpc.is_some(),
        h.sleep.is_some(),
    ]
    .iter()
    .filter(|b| **b)
    .count();
    if count > 1 {
        return Err(ProbeError::MultipleHandlers {
            container: container.name.clone(),
            what,
        });
    }
    let host_or = |h: &Option<String>| {
        h.as_deref()
            .filter(|h| !h.is_empty())
            .unwrap_or(pod_ip)
            .to_string()
    };
    if let Some(e) = h.exec {
        let command = e.command.clone().unwrap_or_default();
        if command.is_empty() {
            return Err(ProbeError::EmptyCommand {
                container: container.name.clone(),
                what,
            });
        }
        return Ok(Action::Exec { command });
    }
    if let Some(g) = h.http {
        let scheme = match g.scheme.as_deref() {
            Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
            _ => Scheme::Http,
        };
        let path = g.path.clone().unwrap_or_default();
        let path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        return Ok(Action::Http(HttpAction {
            scheme,
            host: host_or(&g.host),
            port: resolve_port(&g.port, container, what)?,
            path,
            headers: g
                .http_headers
                .iter()
                .flatten()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect(),
        }));
    }
    if let Some(t) = h.tcp {
        return Ok(Action::Tcp {
            host: host_or(&t.host),
            port: resolve_port(&t.port, container, what)?,
        });
    }
    if let Some(g) = h.grpc {
        return Ok(Action::Grpc {
            host: pod_ip.to_string(),
            port: resolve_port(&IntOrString::Int(g.port), container, what)?,
            service: g.service.clone().unwrap_or_default(),
        });
    }
    if let Some(s) = h.sleep {
        if s.seconds < 0 {
            return Err(ProbeError::Field {
                container: container.name.clone(),
                what,
                field: "sleep.seconds",
                rule: "non-negative",
                value: s.seconds,
            });
        }
        return Ok(Action::Sleep {
            duration: Duration::from_secs(s.seconds as u64),
        });
    }
    Err(ProbeError::NoHandler {
        container: container.name.clone(),
        what,
    })
}

/// Validates a container's probe of `kind`, applying the kubelet's defaults (period 10 s,
/// timeout 1 s, thresholds 1 and 3). `pod_ip` is the default host of httpGet/tcpSocket/grpc.
pub fn probe_spec(
    kind: ProbeKind,
    probe: &Probe,
    container: &Container,
    pod_ip: &str,
) -> Result<ProbeSpec, ProbeError> {
    let what = kind.field();
    let action = action_of(
        Handlers {
            exec: probe.exec.as_ref(),
            http: probe.http_get.as_ref(),
            tcp: probe.tcp_socket.as_ref(),
            grpc: probe.grpc.as_ref(),
            sleep: None,
        },
        container,
        pod_ip,
        what,
    )?;
    let field = |field: &'static str, v: Option<i32>, default: i32, min: i32| {
        let v = v.unwrap_or(default);
        if v < min {
            return Err(ProbeError::Field {
                container: container.name.clone(),
                what,
                field,
                rule: if min == 0 {
                    "non-negative"
                } else {
                    "at least 1"
                },
                value: i64::from(v),
            });
        }
        Ok(v as u64)
    };
    let success_threshold = field("successThreshold", probe.success_threshold, 1, 1)?;
    if kind != ProbeKind::Readiness && success_threshold != 1 {
        return Err(ProbeError::Field {
            container: container.name.clone(),
            what,
            field: "successThreshold",
            rule: "1 for liveness and startup probes",
            value: success_threshold as i64,
        });
    }
    let termination_grace = match probe.termination_grace_period_seconds {
        Some(s) if s < 1 => {
            return Err(ProbeError::Field {
                container: container.name.clone(),
                what,
                field: "terminationGracePeriodSeconds",
                rule: "at least 1",
                value: s,
            })
        }
        Some(s) if kind != ProbeKind::Readiness => Some(Duration::from_secs(s as u64)),
        _ => None,
    };
    Ok(ProbeSpec {
        kind,
        action,
        initial_delay: Duration::from_secs(field(
            "initialDelaySeconds",
            probe.initial_delay_seconds,
            0,
            0,
        )?),
        period: Duration::from_secs(field("periodSeconds", probe.period_seconds, 10, 1)?),
        timeout: Duration::from_secs(field("timeoutSeconds", probe.timeout_seconds, 1, 1)?),
        success_threshold: success_threshold as u32,
        failure_threshold: field("failureThreshold", probe.failure_threshold, 3, 1)? as u32,
        termination_grace,
    })
}

/// Which lifecycle hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    PostStart,
    PreStop,
}

/// Validates a lifecycle hook (exec, httpGet, sleep; tcpSocket is accepted by the API but the
/// kubelet never runs it, so it is rejected here with the same clear error as no handler).
pub fn hook_action(
    kind: HookKind,
    handler: &LifecycleHandler,
    container: &Container,
    pod_ip: &str,
) -> Result<Action, ProbeError> {
    let what = match kind {
        HookKind::PostStart => "lifecycle.postStart",
        HookKind::PreStop => "lifecycle.preStop",
    };
    action_of(
        Handlers {
            exec: handler.exec.as_ref(),
            http: handler.http_get.as_ref(),
            tcp: None,
            grpc: None,
            sleep: handler.sleep.as_ref(),
        },
        container,
        pod_ip,
        what,
    )
}

/// Every probe of a container, validated (startup first).
pub fn container_probes(container: &Container, pod_ip: &str) -> Result<Vec<ProbeSpec>, ProbeError> {
    let mut out = Vec::new();
    for (kind, p) in [
        (ProbeKind::Startup, &container.startup_probe),
        (ProbeKind::Liveness, &container.liveness_probe),
        (ProbeKind::Readiness, &container.readiness_probe),
    ] {
        if let Some(p) = p {
            out.push(probe_spec(kind, p, container, pod_ip)?);
        }
    }
    Ok(out)
}

/// A runtime for prober tests that only answers `exec_sync` (with the closure); every other
/// call is a test bug.
#[cfg(test)]
pub(crate) struct ExecOnlyRuntime<F>(pub F);

#[cfg(test)]
impl<F> Runtime for ExecOnlyRuntime<F>
where
    F: Fn(
            &str,
            &[String],
            Duration,
        ) -> Result<crate::runtime::ExecOutput, crate::runtime::RuntimeError>
        + Send
        + Sync,
{
    fn run_pod_sandbox(
        &self,
        _: &k8s_openapi::api::core::v1::Pod,
    ) -> Result<crate::runtime::SandboxInfo, crate::runtime::RuntimeError> {
        unreachable!("prober tests only exec")
    }
    fn remove_pod_sandbox(&self, _: &str) -> Result<(), crate::runtime::RuntimeError> {
        unreachable!("prober tests only exec")
    }
    fn list_pod_sandboxes(
        &self,
    ) -> Result<Vec<crate::runtime::SandboxInfo>, crate::runtime::RuntimeError> {
        unreachable!("prober tests only exec")
    }
    fn start_container(
        &self,
        _: &crate::runtime::ContainerRequest<'_>,
    ) -> Result<crate::runtime::ContainerInfo, crate::runtime::RuntimeError> {
        unreachable!("prober tests only exec")
    }
    fn signal_container(&self, _: &str, _: i32) -> Result<(), crate::runtime::RuntimeError> {
        unreachable!("prober tests only exec")
    }
    fn remove_container(&self, _: &str) -> Result<(), crate::runtime::RuntimeError> {
        unreachable!("prober tests only exec")
    }
    fn list_containers(
        &self,
    ) -> Result<Vec<crate::runtime::ContainerInfo>, crate::runtime::RuntimeError> {
        unreachable!("prober tests only exec")
    }
    fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<crate::runtime::ExecOutput, crate::runtime::RuntimeError> {
        (self.0)(id, cmd, timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_pod_network_namespace_is_named_and_f_does_not_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ns = dir.path().join("ns/net");
        let mut ran = false;
        let e = in_netns(&ns, || ran = true).expect_err("no namespace file");
        assert!(!ran);
        assert!(
            matches!(&e, NetnsError::Open { path, .. } if *path == ns),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("open pod network namespace {}: ", ns.display())),
            "{e}"
        );
    }

    fn container(yaml: &str) -> Container {
        serde_saphyr::from_str(yaml).expect("container yaml")
    }

    #[test]
    fn defaults_named_ports_and_hosts() {
        let c = container(
            "name: web\nimage: x\nports:\n- {name: http, containerPort: 8080}\nlivenessProbe:\n  httpGet: {path: healthz, port: http, httpHeaders: [{name: X-A, value: b}]}\nreadinessProbe:\n  tcpSocket: {port: 81, host: 10.1.2.3}\n  successThreshold: 2\nstartupProbe:\n  grpc: {port: 9000, service: etcd}\n  terminationGracePeriodSeconds: 5\n",
        );
        let probes = container_probes(&c, "127.0.0.1").expect("valid");
        assert_eq!(probes.len(), 3);
        assert_eq!(probes[0].kind, ProbeKind::Startup);
        assert_eq!(
            probes[0].action,
            Action::Grpc {
                host: "127.0.0.1".into(),
                port: 9000,
                service: "etcd".into()
            }
        );
        assert_eq!(probes[0].termination_grace, Some(Duration::from_secs(5)));
        let live = &probes[1];
        assert_eq!(
            live.action,
            Action::Http(HttpAction {
                scheme: Scheme::Http,
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/healthz".into(),
                headers: vec![("X-A".into(), "b".into())],
            })
        );
        assert_eq!(live.period, Duration::from_secs(10));
        assert_eq!(live.timeout, Duration::from_secs(1));
        assert_eq!((live.success_threshold, live.failure_threshold), (1, 3));
        assert_eq!(
            probes[2].action,
            Action::Tcp {
                host: "10.1.2.3".into(),
                port: 81
            }
        );
        assert_eq!(probes[2].success_threshold, 2);
    }

    #[test]
    fn bad_probes_name_the_problem() {
        for (yaml, needle) in [
            ("livenessProbe: {periodSeconds: 3}", "has no handler"),
            (
                "livenessProbe: {tcpSocket: {port: metrics}}",
                "\"metrics\" is not a named port",
            ),
            ("livenessProbe: {tcpSocket: {port: 70000}}", "out of range"),
            (
                "livenessProbe: {tcpSocket: {port: 80}, successThreshold: 2}",
                "1 for liveness",
            ),
            (
                "readinessProbe: {tcpSocket: {port: 80}, periodSeconds: 0}",
                "periodSeconds must be at least 1",
            ),
            (
                "readinessProbe: {exec: {command: []}}",
                "exec command is empty",
            ),
            (
                "readinessProbe: {exec: {command: [x]}, tcpSocket: {port: 1}}",
                "more than one handler",
            ),
        ] {
            let c = container(&format!("name: c\nimage: x\n{yaml}\n"));
            let e = container_probes(&c, "127.0.0.1").expect_err(yaml);
            assert!(e.to_string().contains(needle), "{yaml}: {e}");
        }
    }

    #[test]
    fn network_probes_connect_from_the_pod_network_namespace() {
        use std::sync::mpsc;
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            // This thread alone moves to a fresh network namespace with loopback up.
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
            let up = std::process::Command::new("ip")
                .args(["link", "set", "lo", "up"])
                .status()
                .expect("ip");
            assert!(up.success());
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            let port = l.local_addr().expect("addr").port();
            let tid = nix::unistd::gettid();
            tx.send((port, tid)).expect("send");
            let _ = stop_rx.recv();
        });
        let (port, tid) = rx.recv().expect("port");
        let ns =
            std::path::PathBuf::from(format!("/proc/{}/task/{tid}/ns/net", std::process::id()));
        let rt = ExecOnlyRuntime(|id: &str, _: &[String], _: Duration| {
            Err(crate::runtime::RuntimeError::NotFound { id: id.into() })
        });
        let action = Action::Tcp {
            host: "127.0.0.1".into(),
            port,
        };
        let inside = Target {
            runtime: &rt,
            container_id: "c",
            netns: Some(&ns),
        };
        assert_eq!(
            run_action(&action, &inside, Duration::from_secs(1)),
            ProbeResult::Success
        );
        let missing = Target {
            runtime: &rt,
            container_id: "c",
            netns: Some(Path::new("/nonexistent/ns/net")),
        };
        assert!(!run_action(&action, &missing, Duration::from_secs(1)).passed());
        // An exec probe whose container is gone is a failure that says so.
        match run_action(
            &Action::Exec {
                command: vec!["true".into()],
            },
            &inside,
            Duration::from_secs(1),
        ) {
            ProbeResult::Failure { message } => {
                assert!(message.contains("container c not found"), "{message}")
            }
            r => panic!("{r:?}"),
        }
        let _ = stop_tx.send(());
        t.join().expect("join");
    }

    #[test]
    fn hooks_accept_exec_http_sleep() {
        let c = container(
            "name: c\nimage: x\nlifecycle:\n  postStart: {sleep: {seconds: 2}}\n  preStop: {exec: {command: [sh, -c, 'kill 1']}}\n",
        );
        let lc = c.lifecycle.clone().expect("lifecycle");
        let post = lc.post_start.expect("post");
        assert_eq!(
            hook_action(HookKind::PostStart, &post, &c, "127.0.0.1"),
            Ok(Action::Sleep {
                duration: Duration::from_secs(2)
            })
        );
        let pre = lc.pre_stop.expect("pre");
        assert!(matches!(
            hook_action(HookKind::PreStop, &pre, &c, "127.0.0.1"),
            Ok(Action::Exec { .. })
        ));
    }
}
