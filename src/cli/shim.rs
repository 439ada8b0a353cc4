//! cli::shim: the hidden `podvisor shim ...` commands, the processes podvisor re-executes
//! itself as: the per-container monitor (`shim run`), the cleanup after a dead monitor, the exec
//! helper, the sandbox helper, the pod init and the spawner (the last two are dispatched
//! before argument parsing by `main`, and listed here for `shim --help`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;

use crate::runtime::{exec, monitor, sandbox, spawner};

#[derive(Subcommand)]
pub enum ShimCommand {
    /// Monitor one container (fd 3: start report pipe, fd 4: locked lock file).
    Run { dir: PathBuf },
    /// Finish the cleanup of a container whose monitor died.
    Cleanup { dir: PathBuf },
    /// Run a command in a running container (capture mode with --timeout-ms).
    Exec {
        dir: PathBuf,
        /// Capture output, report JSON on stdout, kill the command after this many ms.
        #[arg(long, conflicts_with_all = ["tty", "stdin"])]
        timeout_ms: Option<u64>,
        #[arg(long)]
        tty: bool,
        #[arg(long)]
        stdin: bool,
        #[arg(last = true, required = true)]
        cmd: Vec<String>,
    },
    /// Create and pin a pod's namespaces.
    Sandbox {
        dir: PathBuf,
        #[arg(long)]
        hostname: String,
        #[arg(long)]
        host_network: bool,
        /// Also create the pod's PID namespace with its init (shareProcessNamespace).
        #[arg(long)]
        share_pid: bool,
        /// hostUsers: false: the first host ID of the pod's user namespace.
        #[arg(long)]
        user_ns_base: Option<u32>,
    },
    /// PID 1 of a pod's shared PID namespace (started by `shim sandbox --share-pid`).
    PodInit { dir: PathBuf },
    /// Fork monitors and sandbox helpers on request (fd 3: the runtime's socket).
    Spawner {
        /// Room for the command lines of the processes it forks.
        #[arg(allow_hyphen_values = true)]
        room: Option<String>,
    },
}

/// Runs a shim command; returns the process's exit code.
pub fn run(command: &ShimCommand) -> i32 {
    match command {
        ShimCommand::Run { dir } => monitor::run(dir),
        ShimCommand::Cleanup { dir } => match monitor::cleanup(dir) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("cleanup {}: {e}", dir.display());
                1
            }
        },
        ShimCommand::Sandbox {
            dir,
            hostname,
            host_network,
            share_pid,
            user_ns_base,
        } => sandbox::helper_main(dir, hostname, *host_network, *share_pid, *user_ns_base),
        // Handled before parsing (never return); listed for `shim --help`.
        ShimCommand::PodInit { .. } => sandbox::pod_init(),
        ShimCommand::Spawner { .. } => spawner::serve(),
        ShimCommand::Exec {
            dir,
            timeout_ms,
            tty,
            stdin,
            cmd,
        } => exec::shim_exec(&exec::ExecOptions {
            dir: dir.clone(),
            cmd: cmd.clone(),
            mode: match timeout_ms {
                Some(ms) => exec::ExecMode::Capture {
                    timeout: Duration::from_millis(*ms),
                },
                None => exec::ExecMode::Interactive {
                    tty: *tty,
                    stdin: *stdin,
                },
            },
        }),
    }
}
