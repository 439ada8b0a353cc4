//! podvisor: a single-node static-pod supervisor.
//!
//! The crate is laid out like the kubelet's map of managers, one module each:
//! - [`pod`]: reading Pod manifests (two-phase: raw serde types, then validated domain types).
//! - [`images`]: the content-addressed image store, archive import, layer unpacking.
//! - [`runtime`]: the container runtime boundary (`Runtime` trait) and its libcontainer
//!   implementation: per-container monitor processes ("shims"), pod sandboxes, OCI specs.
//! - [`logs`]: CRI-format container logs: writing with rotation, reading and following.
//! - [`cgroups`]: cgroup paths, OOM counters and cleanup for v1 and v2 hierarchies.
//! - [`play`]: `podvisor play`, one pod in the foreground.
//! - [`config`]: the daemon's KubeletConfiguration file and kubelet-compatible flags.
//! - [`sources`]: the manifest directory and URL sources (I/O only).
//! - [`prober`]: liveness/readiness/startup probes and lifecycle-hook handlers; the prober thread.
//! - [`sync`]: the sync loop, the one owner of pod state; pod config merge, backoff, status.
//! - [`api`], [`cli`]: the local API on a unix socket; the command line and one file per
//!   command (the CLI views over the API among them).
//! - [`nodeapi`]: the kubelet's TCP ports: healthz (10248) and the authenticated HTTPS server.
//! - [`apiserver`]: the optional link to a Kubernetes API server (`--kubeconfig`): node
//!   registration and status, the node lease, mirror pods with their status.
//! - [`daemon`]: `podvisor run`, wiring the managers together.
//! - [`reason`]: the kubelet's reason vocabulary (waiting, terminated, event and pod reasons).
//! - [`status`]: the published view of pods and events (snapshots) for the API and CLI.
//! - [`security`]: confinement: seccomp and AppArmor profiles, sysctls, device rules, and
//!   what a node can give (validated against every manifest).
//! - [`fsutil`]: small filesystem helpers (atomic and durable writes, torn records, openat2
//!   below a directory).
//! - [`gc`]: container and log garbage collection (dead containers, pod log directories,
//!   rotated log files), run on its own thread at each resync.
//! - [`eviction`]: the eviction manager: signals, thresholds, node conditions, reclaim first,
//!   then the kubelet's choice of one pod to evict (the sync loop stops it).
//! - [`check`]: `podvisor check`, the consistency check of the persistent state.
//! - [`health`]: the sync loop's turnover time, the daemon's liveness signal.
//! - [`systemd`]: `Type=notify` readiness, status and watchdog pings.
//! - [`kernel`]: what podvisor needs from the kernel (minimum 5.6), probed and checked at start.
//! - [`httpclient`]: the limits and deadlines every network read goes through.
//! - [`metrics`]: the kubelet's counters and histograms, recorded by their owning threads.

pub mod api;
pub mod apiserver;
pub mod cgroups;
pub mod check;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod duration;
pub mod eviction;
pub mod fsutil;
pub mod gc;
pub mod health;
pub mod httpclient;
pub mod httpserver;
pub mod images;
pub mod kernel;
pub mod logs;
pub mod metrics;
pub mod network;
pub mod nodeapi;
pub mod play;
pub mod pod;
pub mod prober;
pub mod reason;
pub mod runtime;
pub mod security;
pub mod sources;
pub mod staticpod;
pub mod status;
pub mod sync;
pub mod sys;
pub mod systemd;
pub mod tp;
