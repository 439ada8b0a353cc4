//! nodeapi::context: what the secure port's endpoints serve from (the published snapshot, the
//! sync loop's health, the cgroups and node facts, the recorded metrics, the log directories,
//! where pushed pods go) and the authorized request they answer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

use super::healthz::HealthChecks;
use crate::api::stats::StatsSource;
use crate::metrics::KubeletMetrics;
use crate::sources::api::PushSink;
use crate::status::SnapshotCell;

/// What the secure port serves from (besides the snapshot).
pub struct Context {
    pub snapshots: SnapshotCell,
    pub health: HealthChecks,
    /// The cgroups and node facts for `/stats/summary` and the cadvisor and resource metrics.
    pub stats: StatsSource,
    pub metrics: KubeletMetrics,
    pub root_dir: PathBuf,
    /// `/logs`' directory (/var/log); `None` when `enableSystemLogHandler` (or
    /// `enableDebuggingHandlers`) is false.
    pub system_logs: Option<PathBuf>,
    /// `enableDebuggingHandlers`: `/containerLogs` and `/logs`.
    pub debugging_handlers: bool,
    /// Where pushed pods go (the sync loop); `None` refuses pushes.
    pub push: Option<PushSink>,
    /// The previous CPU samples, for usage rates.
    pub cpu: super::collect::CpuRates,
    /// Log followers streaming now, and their bound.
    pub followers: AtomicUsize,
    pub max_followers: usize,
    /// Set when the server stops: followers end.
    pub stop: Arc<AtomicBool>,
}

/// An authorized request.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub method: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
}

impl Request<'_> {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
