//! cli::exec: `podvisor exec POD [-c C] [-i] [-t] -- CMD...` — finds the running container
//! through the API, then runs the command in it through a `podvisor shim exec` helper that
//! inherits this terminal (see [`crate::runtime::exec`]); the command's exit code becomes ours.
//!
//! The CLI spawns the helper itself rather than asking the daemon: the helper needs this
//! process's terminal (raw mode, window size, stdin), which a request over the daemon's HTTP
//! socket could only provide by streaming every byte through the daemon. The daemon is only
//! asked where the container is.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::api::{client, percent_encode, ApiError};
use crate::status::PodView;

/// What `podvisor exec` is asked to do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecRequest {
    /// `name`, `namespace/name`, or the manifest's name without the node suffix.
    pub pod: String,
    /// The container; default: the pod's `kubectl.kubernetes.io/default-container`
    /// annotation, else its first app container.
    pub container: Option<String>,
    pub stdin: bool,
    pub tty: bool,
    pub command: Vec<String>,
}

/// Errors of `podvisor exec` before the command runs.
#[derive(Debug, thiserror::Error)]
pub enum ExecCliError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("no command given (podvisor exec POD -- CMD...)")]
    NoCommand,
    #[error("pod {pod} has no container {container} (containers: {available})")]
    NoContainer {
        pod: String,
        container: String,
        available: String,
    },
    #[error("pod {pod} has no containers")]
    Empty { pod: String },
    #[error("container {container} of pod {pod} is not running{detail}")]
    NotRunning {
        pod: String,
        container: String,
        detail: String,
    },
    #[error("container {container} of pod {pod} ({id}) is not under {dir}: is the daemon using another --runtime-dir?")]
    NoDirectory {
        pod: String,
        container: String,
        id: String,
        dir: PathBuf,
    },
    #[error("cannot locate the podvisor binary")]
    Binary { source: std::io::Error },
    #[error("failed to run {binary}: {source}")]
    Spawn {
        binary: PathBuf,
        source: std::io::Error,
    },
}

/// The running container to exec into: (container name, container id).
pub fn target(view: &PodView, container: Option<&str>) -> Result<(String, String), ExecCliError> {
    let pod = crate::status::full_name(&view.pod);
    let spec_names: Vec<String> = view
        .pod
        .spec
        .as_ref()
        .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let default = view
        .pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("kubectl.kubernetes.io/default-container"))
        .filter(|n| spec_names.contains(n))
        .or_else(|| spec_names.first());
    let name = match (container, default) {
        (Some(c), _) => c.to_string(),
        (None, Some(d)) => d.clone(),
        (None, None) => return Err(ExecCliError::Empty { pod }),
    };
    let init_names: Vec<String> = view
        .pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map(|v| v.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    if !spec_names.contains(&name) && !init_names.contains(&name) {
        let mut available = spec_names.clone();
        available.extend(init_names);
        return Err(ExecCliError::NoContainer {
            pod,
            container: name,
            available: available.join(", "),
        });
    }
    let statuses = view.pod.status.as_ref().into_iter().flat_map(|s| {
        s.container_statuses
            .iter()
            .flatten()
            .chain(s.init_container_statuses.iter().flatten())
    });
    let status = statuses.into_iter().find(|s| s.name == name);
    let not_running = |detail: String| ExecCliError::NotRunning {
        pod: pod.clone(),
        container: name.clone(),
        detail,
    };
    let Some(status) = status else {
        return Err(not_running(" (it has not been started)".into()));
    };
    let state = status.state.as_ref();
    if state.and_then(|s| s.running.as_ref()).is_none() {
        let detail = state
            .and_then(|s| {
                s.waiting
                    .as_ref()
                    .and_then(|w| w.reason.clone())
                    .or_else(|| s.terminated.as_ref().and_then(|t| t.reason.clone()))
            })
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        return Err(not_running(detail));
    }
    let id = status
        .container_id
        .as_deref()
        .and_then(|c| c.strip_prefix("podvisor://"))
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .ok_or_else(|| not_running(" (no container id)".into()))?;
    Ok((name.clone(), id.to_string()))
}

/// `podvisor exec`: [`exec`] through this very binary's `shim exec`.
pub fn exec_here(
    socket: &Path,
    runtime_dir: &Path,
    req: &ExecRequest,
) -> Result<i32, ExecCliError> {
    let binary = std::env::current_exe().map_err(|source| ExecCliError::Binary { source })?;
    exec(socket, runtime_dir, &binary, req)
}

/// Runs the command; returns its exit code (126 when it could not be started).
pub fn exec(
    socket: &Path,
    runtime_dir: &Path,
    binary: &Path,
    req: &ExecRequest,
) -> Result<i32, ExecCliError> {
    if req.command.is_empty() {
        return Err(ExecCliError::NoCommand);
    }
    let view: PodView =
        client::get_pod_json(socket, &format!("/pods/{}", percent_encode(&req.pod)))?;
    let (name, id) = target(&view, req.container.as_deref())?;
    let dir = runtime_dir.join("containers").join(&id);
    if !dir.join("shim.json").exists() {
        return Err(ExecCliError::NoDirectory {
            pod: crate::status::full_name(&view.pod),
            container: name,
            id,
            dir: runtime_dir.join("containers"),
        });
    }
    let mut cmd = Command::new(binary);
    cmd.arg("shim").arg("exec").arg(&dir);
    if req.tty {
        cmd.arg("--tty");
    }
    if req.stdin {
        cmd.arg("--stdin");
    }
    cmd.arg("--").args(&req.command);
    // The helper reads stdin only with --stdin; with --tty it also asks it for the window size.
    cmd.stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .env("RUST_LOG", "warn");
    let mut child = cmd.spawn().map_err(|source| ExecCliError::Spawn {
        binary: binary.to_path_buf(),
        source,
    })?;
    // Terminal signals reach the helper too (same process group), which forwards them to the
    // command: this process must outlive it to pass the exit code on.
    // SAFETY: ignoring signals in this single-threaded CLI process, after the spawn so the
    // helper keeps default dispositions.
    unsafe {
        for s in [
            nix::sys::signal::Signal::SIGINT,
            nix::sys::signal::Signal::SIGQUIT,
        ] {
            let _ = nix::sys::signal::signal(s, nix::sys::signal::SigHandler::SigIgn);
        }
    }
    let status = child.wait().map_err(|source| ExecCliError::Spawn {
        binary: binary.to_path_buf(),
        source,
    })?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(doc: serde_json::Value) -> PodView {
        PodView {
            pod: serde_json::from_value(doc).expect("pod"),
            source: String::new(),
            source_error: None,
            rolled_back: None,
            log_paths: Default::default(),
            previous_log_paths: Default::default(),
            mirror: None,
        }
    }

    fn pod(statuses: serde_json::Value, annotations: serde_json::Value) -> PodView {
        view(serde_json::json!({
            "metadata": {"name": "web-n1", "namespace": "default", "annotations": annotations},
            "spec": {"containers": [{"name": "app"}, {"name": "side"}],
                     "initContainers": [{"name": "setup"}]},
            "status": {"containerStatuses": statuses}
        }))
    }

    fn running(name: &str, id: &str) -> serde_json::Value {
        serde_json::json!({"name": name, "image": "busybox", "imageID": "", "ready": true,
            "restartCount": 0, "containerID": format!("podvisor://{id}"),
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}})
    }

    #[test]
    fn default_container_is_the_first_app_container_or_the_annotated_one() {
        let v = pod(
            serde_json::json!([running("app", "a1"), running("side", "s1")]),
            serde_json::json!({}),
        );
        assert_eq!(target(&v, None).expect("t"), ("app".into(), "a1".into()));
        assert_eq!(
            target(&v, Some("side")).expect("t"),
            ("side".into(), "s1".into())
        );
        let v = pod(
            serde_json::json!([running("app", "a1"), running("side", "s1")]),
            serde_json::json!({"kubectl.kubernetes.io/default-container": "side"}),
        );
        assert_eq!(target(&v, None).expect("t").1, "s1");
    }

    #[test]
    fn unknown_or_stopped_containers_are_named_in_the_error() {
        let v = pod(
            serde_json::json!([running("app", "a1"), {"name": "side", "image": "busybox",
                "imageID": "", "ready": false, "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
            serde_json::json!({}),
        );
        let e = target(&v, Some("nope")).expect_err("unknown").to_string();
        assert_eq!(
            e,
            "pod default/web-n1 has no container nope (containers: app, side, setup)"
        );
        let e = target(&v, Some("side")).expect_err("stopped").to_string();
        assert_eq!(
            e,
            "container side of pod default/web-n1 is not running (CrashLoopBackOff)"
        );
        let e = target(&v, Some("setup"))
            .expect_err("never started")
            .to_string();
        assert!(e.contains("setup") && e.contains("not running"), "{e}");
    }
}
