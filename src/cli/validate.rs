//! cli::validate: `podvisor validate FILE...`, manifests checked offline with the daemon's
//! parser and validation, against this host's confinement (AppArmor, seccomp profiles under
//! `--root-dir`) and the daemon's configuration file.

use std::path::{Path, PathBuf};

use crate::config::{self, ConfigError};
use crate::security;

/// Errors of `podvisor validate` before any manifest is read (an invalid manifest is a line
/// of the report, not an error).
#[derive(Debug, thiserror::Error)]
pub enum ValidateError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("failed to read kubelet config file {}", path.display())]
    ReadConfig {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// `podvisor validate`: every file is checked; exit 1 if any is invalid.
pub fn validate(
    files: &[PathBuf],
    hostname_override: Option<&str>,
    config: Option<&Path>,
    root_dir: &Path,
) -> Result<i32, ValidateError> {
    let node = config::resolve_node_name(hostname_override)?;
    let kubelet = match config {
        Some(path) => {
            let data = std::fs::read(path).map_err(|source| ValidateError::ReadConfig {
                path: path.to_path_buf(),
                source,
            })?;
            config::parse_kubelet_config(&data, &path.display().to_string())?
        }
        None => config::KubeletConfig::default(),
    };
    let security = security::NodeSecurity::for_host(
        root_dir,
        &kubelet.allowed_unsafe_sysctls,
        kubelet.seccomp_default.unwrap_or(false),
        security::apparmor::AppArmorHost::detect(),
    );
    let mut bad = 0;
    for f in files {
        match crate::staticpod::validate_file(f, &node, &security) {
            Ok(pods) => {
                for p in pods {
                    println!("{}: ok: pod {} (uid {})", f.display(), p.full_name, p.uid());
                }
            }
            Err(e) => {
                eprintln!("{e}");
                bad += 1;
            }
        }
    }
    Ok(if bad > 0 { 1 } else { 0 })
}
