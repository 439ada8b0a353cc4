//! protocol: what the runtime's processes say to each other, in one place.
//!
//! - daemon -> spawner, on the `SOCK_SEQPACKET` socket (fd [`SOCKET_FD`] in the spawner): one
//!   JSON [`Request`] per message with its descriptors, one [`Reply`] back (a pidfd with
//!   [`Reply::Forked`], the namespace files with [`Reply::Spare`]);
//! - sandbox helper -> daemon: [`HELPER_OK`] (or the error's text) on its result pipe;
//! - daemon -> monitor: `shim.json` ([`ShimConfig`]) in the container's runtime directory,
//!   the ready pipe at fd [`READY_FD`] and the locked `shim.lock` at fd [`LOCK_FD`]; a staged
//!   monitor's go ([`GO`]) on fd 3, a socket then;
//! - monitor -> daemon: the [`StartReport`] on fd 3, and `state.json` ([`ShimState`]: its own
//!   and the init's identity), read by the daemon's signals and listings and by `shim exec`;
//! - exec helper -> daemon: the capture mode's [`CaptureReport`] on its stdout.
//!
//! The files a container leaves for its next reader (identity, exit record) are
//! [`super::container`]'s; the attach socket's frames are [`super::monitor::attach`]'s.

use std::os::fd::RawFd;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::procfs::ProcessId;
use super::spec::UserRequest;

/// The spawner's socket (fd 3 in the spawner process).
pub const SOCKET_FD: RawFd = 3;
/// Largest request or reply.
pub(crate) const MAX_MESSAGE: usize = 8192;

/// What the runtime asks the spawner for.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Request {
    /// Fork a monitor for the container directory `dir`. Descriptors: the ready pipe's write
    /// end, the locked `shim.lock`, `shim.log` (the monitor's stderr).
    Monitor { dir: PathBuf },
    /// Fork a sandbox helper. Descriptors: the result pipe's write end.
    Sandbox {
        dir: PathBuf,
        hostname: String,
        host_network: bool,
        share_pid: bool,
        user_ns_base: Option<u32>,
    },
    /// Hand over the spare pod namespaces, if the spawner holds them (`spare`), with
    /// `hostname` set in their UTS namespace: answered with [`Reply::Spare`] and their files,
    /// or [`Reply::NoSpare`].
    TakeSpare { hostname: String },
}

/// The spawner's answer: the child's pid (with a pidfd as the message's descriptor) or why
/// there is no child.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Reply {
    Forked {
        pid: i32,
    },
    Failed {
        message: String,
    },
    /// The spare namespaces' files come with the message (IPC, network, UTS).
    Spare,
    NoSpare,
}

/// What a sandbox helper writes on its result pipe when the namespaces are pinned.
pub(crate) const HELPER_OK: &[u8] = b"ok\n";

/// The fd on which a monitor reports the start result.
pub const READY_FD: i32 = 3;
/// The fd of the monitor's lock file (already flock'ed by the spawner).
pub const LOCK_FD: i32 = 4;

/// What the spawner tells the monitor (`shim.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShimConfig {
    pub id: String,
    /// The container's record directory under the root dir (identity, exit record, writable
    /// layer). Empty in containers of podvisor's earlier single-directory layout, which keep
    /// everything in one directory.
    #[serde(default)]
    pub record_dir: PathBuf,
    /// Directory that holds libcontainer's state for this container.
    pub youki_root: PathBuf,
    /// The image layers directory; `lower_layers` are relative to it, topmost first.
    pub layers_dir: PathBuf,
    pub lower_layers: Vec<String>,
    pub log_path: PathBuf,
    pub log_max_size: u64,
    pub log_max_files: u32,
    pub user: UserRequest,
    pub cgroup_root: PathBuf,
    /// The container's cgroup path relative to the cgroup root.
    pub cgroup_path: String,
    /// The container is a systemd scope (`cgroupDriver: systemd`): libcontainer's systemd
    /// manager starts and stops it. Absent in records of earlier versions: cgroupfs.
    #[serde(default)]
    pub systemd_cgroup: bool,
    /// `stdin: true`: the container's stdin stays open for attach sessions.
    #[serde(default)]
    pub stdin: bool,
    /// `stdinOnce: true`: closed when the first attach session ends.
    #[serde(default)]
    pub stdin_once: bool,
    /// Forked while its pod's sandbox is still being made (the pod's first container): the
    /// monitor mounts the rootfs, then waits for the runtime's go on fd 3, a socket ([`GO`];
    /// `shim.json` is then complete and the spec written), and reads this file again. The
    /// runtime's end closing instead means the sandbox failed or the daemon died: the monitor
    /// takes the rootfs apart and exits without a report.
    #[serde(default)]
    pub staged: bool,
}

/// The byte a staged monitor waits for ([`ShimConfig::staged`]).
pub const GO: u8 = b'g';

/// What the monitor records about itself and the container (`state.json`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ShimState {
    pub shim: Option<ProcessId>,
    pub init: Option<ProcessId>,
    pub started_at: Option<String>,
}

/// The start report sent on [`READY_FD`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StartReport {
    Started { pid: i32, started_at: String },
    Failed { message: String },
}

/// The capture-mode report, one JSON document on the helper's stdout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "result")]
pub(crate) enum CaptureReport {
    Finished {
        exit_code: i32,
        /// Hex of the kept stdout bytes.
        stdout: String,
        stderr: String,
        timed_out: bool,
    },
    Failed {
        message: String,
        #[serde(default)]
        not_running: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_replies_round_trip_as_json() {
        let req = Request::Sandbox {
            dir: PathBuf::from("/run/podvisor/pods/u1"),
            hostname: "web".into(),
            host_network: false,
            share_pid: true,
            user_ns_base: Some(65536),
        };
        let data = serde_json::to_vec(&req).expect("json");
        assert!(data.len() < MAX_MESSAGE);
        assert_eq!(serde_json::from_slice::<Request>(&data).expect("back"), req);
        let reply = Reply::Forked { pid: 42 };
        let data = serde_json::to_vec(&reply).expect("json");
        assert_eq!(serde_json::from_slice::<Reply>(&data).expect("back"), reply);
    }
}
