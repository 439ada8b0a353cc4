//! cli::play: `podvisor play FILE`, one Pod manifest run in the foreground (see
//! [`crate::play`]): the runtime's directories from the global flags and the pod network from
//! `--cni-conf-dir` and `--cni-bin-dir`.

use std::path::PathBuf;

use super::args::Global;
use crate::network::NetworkConfig;
use crate::play::{PlayError, PlayOptions};
use crate::runtime::daemon::RuntimeConfig;

/// Errors of `podvisor play`.
#[derive(Debug, thiserror::Error)]
pub enum PlayCommandError {
    #[error("cannot locate the podvisor binary")]
    Binary { source: std::io::Error },
    #[error(transparent)]
    Play(#[from] PlayError),
}

/// What `podvisor play` is asked to run.
pub struct PlayArgs {
    pub file: PathBuf,
    pub keep_logs: bool,
    pub registry_config: Option<PathBuf>,
    pub docker_config: Option<PathBuf>,
    /// `Some("")`: loopback only.
    pub cni_conf_dir: Option<PathBuf>,
    /// Comma-separated.
    pub cni_bin_dir: Option<String>,
}

/// The runtime's configuration from the global flags.
pub fn runtime_config(g: &Global) -> Result<RuntimeConfig, PlayCommandError> {
    let log_dir = g
        .log_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(crate::config::DEFAULT_POD_LOGS_DIR));
    let mut cfg = RuntimeConfig::new(g.root_dir.clone(), g.runtime_dir.clone(), log_dir)
        .map_err(|source| PlayCommandError::Binary { source })?;
    cfg.boot_id_file = g.boot_id_file.clone();
    if let Some(p) = &g.cgroup_parent {
        cfg.cgroup_parent = p.clone();
    }
    Ok(cfg)
}

/// Runs the pod until it ends or Ctrl-C; returns podvisor's exit code.
pub fn play(g: &Global, args: PlayArgs) -> Result<i32, PlayCommandError> {
    let mut runtime = runtime_config(g)?;
    runtime.network = match args.cni_conf_dir {
        Some(d) if d.as_os_str().is_empty() => None,
        d => {
            let mut n = NetworkConfig::new(&g.root_dir);
            if let Some(d) = d {
                n.conf_dir = d;
            }
            if let Some(b) = args.cni_bin_dir {
                n.bin_dirs = b.split(',').map(|d| PathBuf::from(d.trim())).collect();
            }
            Some(n)
        }
    };
    let opts = PlayOptions {
        manifest: args.file,
        runtime,
        keep_logs: args.keep_logs,
        registry_config: args.registry_config,
        docker_config: args.docker_config,
    };
    Ok(crate::play::play(&opts)?)
}
