//! cli::run: `podvisor run`, the daemon (see [`crate::daemon`]) with its directories from the
//! global flags and everything else from the kubelet-compatible flags and configuration file.

use super::args::Global;
use crate::config::RunFlags;
use crate::daemon::{self, DaemonError, DaemonPaths};

/// Runs the daemon until it is stopped.
pub fn run(g: &Global, flags: &RunFlags) -> Result<(), DaemonError> {
    let paths = DaemonPaths {
        root_dir: g.root_dir.clone(),
        run_dir: g.runtime_dir.clone(),
        boot_id_file: g.boot_id_file.clone(),
        log_dir: g.log_dir.clone(),
        cgroup_parent: g.cgroup_parent.clone(),
    };
    daemon::run(&paths, flags)
}
