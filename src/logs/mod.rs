//! CRI-format container logs, as the kubelet and containerd write and read them: the on-disk
//! layout (`<log_root>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log`), the record
//! format (`<RFC3339Nano> <stdout|stderr> <P|F> <content>\n`), the size-based rotating writer
//! used by a container's monitor process, and the readers (`read_log`, `LogFollower`) used by
//! `podvisor play` and `podvisor logs`.
//!
//! Submodules:
//! - [`timestamp`]: UTC timestamp formatting (RFC3339Nano, rotation suffixes) and validation.
//! - [`rotation`]: naming, listing and ordering of rotated files (`<name>.<YYYYMMDD-HHMMSS>[.N]`).
//! - [`writer`]: [`CriLogWriter`], per-stream line buffering, P/F splitting and rotation.
//! - [`reader`]: [`parse_record`], [`read_log`] and [`LogFollower`].

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub mod reader;
pub mod rotation;
pub mod timestamp;
pub mod writer;

pub use reader::{
    parse_record, read_log, CriLogRecord, FollowStart, LogFollower, LogLine, ReadOptions,
};
pub use writer::{CriLogWriter, LogOptions};

/// The kubelet's default directory for pod logs.
pub const DEFAULT_LOG_ROOT: &str = "/var/log/pods";

/// Errors of the log module.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid log option {field}: {reason}")]
    InvalidOptions {
        field: &'static str,
        reason: &'static str,
    },
    #[error("cannot create log directory {path}")]
    CreateDir { path: PathBuf, source: io::Error },
    #[error("cannot open log file {path}")]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot write to log file {path}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot sync log file {path}")]
    Sync { path: PathBuf, source: io::Error },
    #[error("cannot read log file {path}")]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot list log directory {path}")]
    ListDir { path: PathBuf, source: io::Error },
    #[error("cannot rotate log file {from} to {to}")]
    Rotate {
        from: PathBuf,
        to: PathBuf,
        source: io::Error,
    },
    #[error("cannot remove rotated log file {path}")]
    RemoveRotated { path: PathBuf, source: io::Error },
    #[error("log path {path} has no file name")]
    NoFileName { path: PathBuf },
    #[error("malformed log record: no space after the {field}")]
    MissingField { field: &'static str },
    #[error("malformed log record: invalid timestamp {timestamp:?}: {reason}")]
    InvalidTimestamp {
        timestamp: String,
        reason: &'static str,
    },
    #[error("malformed log record: unknown stream {stream:?}, expected stdout or stderr")]
    InvalidStream { stream: String },
    #[error("malformed log record: unknown tag {tag:?}, expected P or F")]
    InvalidTag { tag: String },
}

/// Which output stream of the container a record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// The name used in CRI records: `stdout` or `stderr`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }

    /// Parses the record's stream field.
    pub fn from_bytes(b: &[u8]) -> Option<Stream> {
        match b {
            b"stdout" => Some(Stream::Stdout),
            b"stderr" => Some(Stream::Stderr),
            _ => None,
        }
    }

    fn index(self) -> usize {
        match self {
            Stream::Stdout => 0,
            Stream::Stderr => 1,
        }
    }
}

impl fmt::Display for Stream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The directory holding every container log of one pod:
/// `<log_root>/<namespace>_<pod_name>_<pod_uid>`.
pub fn pod_log_dir(log_root: &Path, namespace: &str, pod_name: &str, pod_uid: &str) -> PathBuf {
    log_root.join(format!("{namespace}_{pod_name}_{pod_uid}"))
}

/// The current log file of one run of a container:
/// `<pod_log_dir>/<container>/<restart_count>.log`.
pub fn container_log_path(
    log_root: &Path,
    namespace: &str,
    pod_name: &str,
    pod_uid: &str,
    container: &str,
    restart_count: u32,
) -> PathBuf {
    pod_log_dir(log_root, namespace, pod_name, pod_uid)
        .join(container)
        .join(format!("{restart_count}.log"))
}

/// The highest restart count among a container's log files in `container_log_dir`
/// (`<n>.log`, rotated `<n>.log.<suffix>` included), `None` without any. The kubelet computes a
/// new container's restart count from these when the runtime lost the previous instance's
/// status (calcRestartCountByLogDir: "when nodes are rebooted, some container runtimes clear
/// their state"), so a restarted container never reuses and appends to an earlier log file.
pub fn highest_restart_count(container_log_dir: &Path) -> Option<u32> {
    std::fs::read_dir(container_log_dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let (n, rest) = name.split_once(".log")?;
            (rest.is_empty() || rest.starts_with('.'))
                .then(|| n.parse::<u32>().ok())
                .flatten()
        })
        .max()
}

/// Shortens external text quoted in an error message so a garbage line cannot flood the log.
fn quote_prefix(b: &[u8]) -> String {
    const MAX: usize = 64;
    let s = String::from_utf8_lossy(&b[..b.len().min(MAX)]).into_owned();
    if b.len() > MAX {
        format!("{s}...")
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_kubelet_layout() {
        let root = Path::new("/var/log/pods");
        assert_eq!(
            pod_log_dir(root, "default", "web-node1", "0123abcd"),
            PathBuf::from("/var/log/pods/default_web-node1_0123abcd")
        );
        assert_eq!(
            container_log_path(root, "kube-system", "etcd-n", "u1", "etcd", 3),
            PathBuf::from("/var/log/pods/kube-system_etcd-n_u1/etcd/3.log")
        );
    }

    #[test]
    fn highest_restart_count_reads_current_and_rotated_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(highest_restart_count(dir.path()), None);
        for f in [
            "0.log",
            "2.log.20240102-030405",
            "1.log",
            "x.log",
            "10.logx",
            ".3.log",
        ] {
            std::fs::write(dir.path().join(f), b"").expect("write");
        }
        assert_eq!(highest_restart_count(dir.path()), Some(2));
        assert_eq!(highest_restart_count(&dir.path().join("missing")), None);
    }

    #[test]
    fn stream_names_round_trip() {
        for s in [Stream::Stdout, Stream::Stderr] {
            assert_eq!(Stream::from_bytes(s.as_str().as_bytes()), Some(s));
            assert_eq!(s.to_string(), s.as_str());
        }
        assert_eq!(Stream::from_bytes(b"stdin"), None);
    }

    #[test]
    fn quote_prefix_truncates_long_input() {
        assert_eq!(quote_prefix(b"abc"), "abc");
        let long = vec![b'x'; 100];
        let q = quote_prefix(&long);
        assert_eq!(q.len(), 67);
        assert!(q.ends_with("..."));
    }
}
