//! Running a command in a container ([`crate::runtime::Runtime::exec_sync`]), the daemon's
//! side of `shim exec`: spawns the helper and reads its capture report. Runs in the
//! multi-threaded daemon, so it never calls libcontainer itself (see
//! /work/shared/notes/libcontainer.md): everything that touches the container happens in
//! the helper process ([`crate::runtime::exec`]).

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::poll::{poll, PollFd, PollFlags};
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use super::LinuxRuntime;
use crate::runtime::exec::{
    poll_ready, poll_timeout, Captured, ExecError, HELPER_GRACE, HELPER_STDERR_CAP, OUTPUT_CAP,
};
use crate::runtime::protocol::CaptureReport;
use crate::runtime::{ExecOutput, RuntimeError};

impl LinuxRuntime {
    /// [`crate::runtime::Runtime::exec_sync`].
    pub(super) fn exec(
        &self,
        id: &str,
        cmd: &[String],
        timeout: Duration,
    ) -> Result<ExecOutput, RuntimeError> {
        let paths = self.container_paths(id)?;
        if !paths.meta().exists() {
            return Err(RuntimeError::NotFound { id: id.to_string() });
        }
        // Its runtime directory goes with the container's end, after its exit record: once the
        // exit is recorded (and reported), the monitor may be taking the rest apart.
        if paths.exit().exists() || !paths.shim_config().exists() {
            return Err(RuntimeError::Exec {
                id: id.to_string(),
                source: Box::new(crate::runtime::exec::ExecError::NotRunning {
                    id: id.to_string(),
                }),
            });
        }
        // libcontainer runs only in the helper process (`shim exec`), never in this one.
        exec_capture(&self.cfg.shim_binary, &paths.dir, cmd, timeout).map_err(|source| {
            RuntimeError::Exec {
                id: id.to_string(),
                source: Box::new(source),
            }
        })
    }
}

/// Runs `cmd` in the container of `dir` through a `shim exec` helper spawned from `binary`,
/// capturing its output (see [`OUTPUT_CAP`]) and killing it after `timeout`. Safe to call from
/// a multi-threaded process: libcontainer only runs in the helper.
fn exec_capture(
    binary: &Path,
    dir: &Path,
    cmd: &[String],
    timeout: Duration,
) -> Result<ExecOutput, ExecError> {
    use std::os::unix::process::CommandExt;
    if cmd.is_empty() {
        return Err(ExecError::EmptyCommand);
    }
    let mut child = Command::new(binary)
        .arg("shim")
        .arg("exec")
        .arg(dir)
        .arg("--timeout-ms")
        .arg(timeout.as_millis().max(1).to_string())
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RUST_LOG", "warn")
        // Its own process group: a Ctrl-C meant for the caller's terminal is not for it.
        .process_group(0)
        .spawn()
        .map_err(|source| ExecError::Spawn {
            binary: binary.to_path_buf(),
            source,
        })?;
    let deadline = Instant::now() + timeout + HELPER_GRACE;
    let outputs = read_helper(&mut child, deadline);
    if outputs.is_err() {
        // Ask first, so that the helper kills the command it runs; then make sure.
        let _ = signal::kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        std::thread::sleep(Duration::from_millis(200));
        let _ = child.kill();
    }
    let status = child.wait().map_err(|source| ExecError::Spawn {
        binary: binary.to_path_buf(),
        source,
    })?;
    let (stdout, stderr) = outputs?;
    match serde_json::from_slice::<CaptureReport>(&stdout) {
        Ok(CaptureReport::Finished {
            exit_code,
            stdout,
            stderr,
            timed_out,
        }) => Ok(ExecOutput {
            exit_code,
            stdout: hex::decode(stdout).map_err(|e| ExecError::Helper {
                message: format!("malformed stdout in report: {e}"),
            })?,
            stderr: hex::decode(stderr).map_err(|e| ExecError::Helper {
                message: format!("malformed stderr in report: {e}"),
            })?,
            timed_out,
        }),
        Ok(CaptureReport::Failed {
            not_running: true, ..
        }) => Err(ExecError::NotRunning {
            id: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }),
        Ok(CaptureReport::Failed { message, .. }) => Err(ExecError::Helper { message }),
        Err(_) => Err(ExecError::Helper {
            message: format!(
                "exited with {status} without a report: {}",
                String::from_utf8_lossy(&stderr).trim()
            ),
        }),
    }
}

/// Reads the helper's stdout (whole) and stderr (capped) until both close or `deadline`.
fn read_helper(
    child: &mut std::process::Child,
    deadline: Instant,
) -> Result<(Vec<u8>, Vec<u8>), ExecError> {
    let helper = |message: &str| ExecError::Helper {
        message: message.to_string(),
    };
    let out = child
        .stdout
        .take()
        .ok_or_else(|| helper("stdout not captured"))?;
    let err = child
        .stderr
        .take()
        .ok_or_else(|| helper("stderr not captured"))?;
    let mut out = Captured::new(OwnedFd::from(out))?;
    let mut err = Captured::new(OwnedFd::from(err))?;
    // The report holds at most two hex-encoded outputs and a little JSON.
    let report_cap = 4 * OUTPUT_CAP + 64 * 1024;
    let mut buf = vec![0u8; 64 * 1024];
    while out.pipe.is_some() || err.pipe.is_some() {
        if Instant::now() >= deadline {
            return Err(helper("did not finish in time"));
        }
        let mut fds = Vec::new();
        let mut idx = [None, None];
        for (i, c) in [&out, &err].into_iter().enumerate() {
            if let Some(f) = &c.pipe {
                idx[i] = Some(fds.len());
                fds.push(PollFd::new(f.as_fd(), PollFlags::POLLIN));
            }
        }
        match poll(&mut fds, poll_timeout(Some(deadline))) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(source) => {
                return Err(ExecError::Sys {
                    what: "poll",
                    source,
                })
            }
        }
        let at = |i: Option<usize>| i.is_some_and(|i| poll_ready(&fds[i]));
        let (o, e) = (at(idx[0]), at(idx[1]));
        if o {
            out.pump(&mut buf, report_cap);
        }
        if e {
            err.pump(&mut buf, HELPER_STDERR_CAP);
        }
    }
    Ok((out.kept, err.kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_reports_round_trip() {
        let r = CaptureReport::Finished {
            exit_code: 3,
            stdout: hex::encode(b"out"),
            stderr: String::new(),
            timed_out: false,
        };
        let doc = serde_json::to_string(&r).expect("json");
        assert!(doc.contains("\"result\":\"finished\""), "{doc}");
        assert_eq!(
            serde_json::from_str::<CaptureReport>(&doc).expect("parse"),
            r
        );
    }
}
