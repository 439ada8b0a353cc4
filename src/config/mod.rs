//! config: the configuration of `podvisor run`, read like a kubelet's — a KubeletConfiguration
//! file (`--config`, YAML or JSON) plus kubelet-compatible flags that take precedence over it.
//!
//! Phase one ([`raw`]) deserializes every `kubelet.config.k8s.io/v1beta1` field; unknown names
//! are errors with a line:column. Phase two ([`parse_kubelet_config`]) validates the fields
//! podvisor implements into [`KubeletConfig`] and lists the known fields it does not implement.
//! [`load`] merges that with [`RunFlags`] and the defaults into the [`DaemonConfig`] the daemon
//! runs with. As in the kubelet, a field set to its zero value ("0s", "") counts as unset and
//! takes the default; `--manifest-url-header` replaces the file's `staticPodURLHeader` and
//! accumulates over repeated flags.

mod apiserver;
mod checks;
mod decode;
mod eviction;
mod flags;
mod manifest_url;
mod network;
mod server;
mod validate;

pub use apiserver::{
    check_taint, node_may_set_label, parse_node_labels, parse_taints, ApiServerConfig,
    ApiServerFields, NodeTaint,
};
pub use manifest_url::ManifestUrlTlsFlags;
pub use network::NetworkFields;
pub use server::ServerFields;

pub use decode::parse_kubelet_config;
use flags::invalid_flag;
pub use flags::{parse_manifest_url_headers, resolve_node_name};

pub mod raw;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::builder::TypedValueParser;

use crate::cgroups::allocatable::Reservation;
pub use crate::duration::{parse_go_duration, DurationError};
use crate::eviction::EvictionConfig;
use crate::security::sysctl::SysctlPattern;
use checks::{check_absolute, check_socket_path, check_url};

/// The only accepted `apiVersion`.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The only accepted `kind`.
pub const KIND: &str = "KubeletConfiguration";
/// Largest config file accepted (the same bound as a manifest).
pub const MAX_CONFIG_BYTES: usize = 10 * 1024 * 1024;

/// Default `staticPodPath` (kubeadm's value; the kubelet itself has none).
pub const DEFAULT_STATIC_POD_PATH: &str = "/etc/kubernetes/manifests";
/// Default `podLogsDir`.
pub const DEFAULT_POD_LOGS_DIR: &str = "/var/log/pods";
/// Default `cgroupRoot`: podvisor's cgroup parent.
pub const DEFAULT_CGROUP_ROOT: &str = "podvisor";
/// Default `--api-socket`.
pub const DEFAULT_API_SOCKET: &str = "/run/podvisor/podvisor.sock";
/// Default `fileCheckFrequency`.
pub const DEFAULT_FILE_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
/// Default `httpCheckFrequency`.
pub const DEFAULT_HTTP_CHECK_FREQUENCY: Duration = Duration::from_secs(20);
/// Default `syncFrequency`.
pub const DEFAULT_SYNC_FREQUENCY: Duration = Duration::from_secs(60);
/// Default `--rollback-after` (safe updates: docs/pods.md).
pub const DEFAULT_ROLLBACK_AFTER: Duration = Duration::from_secs(300);
/// The kubelet's default `resolvConf`.
pub const DEFAULT_RESOLV_CONF: &str = "/etc/resolv.conf";
/// Default `containerLogMaxSize` ("10Mi").
pub const DEFAULT_CONTAINER_LOG_MAX_SIZE: u64 = 10 * 1024 * 1024;
/// Default `containerLogMaxFiles`.
pub const DEFAULT_CONTAINER_LOG_MAX_FILES: u32 = 5;

/// The KubeletConfiguration fields podvisor implements (besides `apiVersion` and `kind`).
/// Any other field present in a file is reported in `unimplemented_fields`.
pub const IMPLEMENTED_FIELDS: &[&str] = &[
    "address",
    "allowedUnsafeSysctls",
    "authentication",
    "authorization",
    "cgroupDriver",
    "cgroupRoot",
    "clusterDNS",
    "clusterDomain",
    "containerLogMaxFiles",
    "containerLogMaxSize",
    "enableDebuggingHandlers",
    "enableServer",
    "enableSystemLogHandler",
    "evictionHard",
    "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim",
    "evictionPressureTransitionPeriod",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "fileCheckFrequency",
    "healthzBindAddress",
    "healthzPort",
    "httpCheckFrequency",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "imageMinimumGCAge",
    "kubeAPIBurst",
    "kubeAPIQPS",
    "kubeReserved",
    "mergeDefaultEvictionSettings",
    "nodeLeaseDurationSeconds",
    "nodeStatusMaxImages",
    "nodeStatusReportFrequency",
    "nodeStatusUpdateFrequency",
    "podCIDR",
    "podLogsDir",
    "podPidsLimit",
    "port",
    "readOnlyPort",
    "registerNode",
    "registerWithTaints",
    "seccompDefault",
    "staticPodPath",
    "staticPodURL",
    "staticPodURLHeader",
    "syncFrequency",
    "systemReserved",
    "tlsCertFile",
    "tlsCipherSuites",
    "tlsMinVersion",
    "tlsPrivateKeyFile",
];

/// Errors reading the daemon configuration. Every value error names the field or flag.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to read kubelet config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{source_name}: {size} bytes is over the {max}-byte config limit")]
    TooLarge {
        source_name: String,
        size: usize,
        max: usize,
    },
    #[error("{source_name}: kubelet config file is empty")]
    Empty { source_name: String },
    #[error("{source_name}: kubelet config file is not UTF-8")]
    NotUtf8 { source_name: String },
    /// YAML syntax, wrong value type, duplicate key, parser budget exceeded.
    #[error("{source_name}{location}: {message}")]
    Syntax {
        source_name: String,
        location: String,
        message: String,
    },
    /// A field name that is not part of KubeletConfiguration (or of the nested object).
    #[error("{source_name}{location}: unknown field {field:?}{hint}")]
    UnknownField {
        source_name: String,
        location: String,
        field: String,
        /// ", did you mean \"...\"?" when a known name is close, else empty.
        hint: String,
    },
    /// A field whose value is not acceptable.
    #[error("{source_name}{location}: {field}: {message}")]
    Invalid {
        source_name: String,
        location: String,
        field: String,
        message: String,
    },
    /// A command-line flag whose value is not acceptable.
    #[error("--{flag} {value:?}: {message}")]
    InvalidFlag {
        flag: &'static str,
        value: String,
        message: String,
    },
    #[error("failed to read the system hostname: {source}")]
    Hostname { source: nix::Error },
    #[error("node name {name:?} (from {origin}): {message}")]
    InvalidNodeName {
        name: String,
        origin: &'static str,
        message: String,
    },
}

/// Flags of `podvisor run` (clap `Args`, for `#[command(flatten)]`).
#[derive(clap::Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFlags {
    /// KubeletConfiguration file (kubelet.config.k8s.io/v1beta1, YAML or JSON); flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Directory of static Pod manifests [default: /etc/kubernetes/manifests]; "" disables it.
    #[arg(
        long = "pod-manifest-path",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub pod_manifest_path: Option<PathBuf>,
    /// URL polled for static Pod manifests (a Pod or a PodList); "" disables it.
    #[arg(long = "manifest-url")]
    pub manifest_url: Option<String>,
    /// HTTP headers for --manifest-url, "Key:Value[,Key:Value...]"; repeatable, same-name headers
    /// accumulate in order; replaces staticPodURLHeader from the config file.
    #[arg(long = "manifest-url-header", value_name = "KEY:VALUE,...")]
    pub manifest_url_header: Vec<String>,
    /// Node name to use instead of the system hostname (lowercased).
    #[arg(long = "hostname-override")]
    pub hostname_override: Option<String>,
    /// Unix socket of podvisor's local API [default: /run/podvisor/podvisor.sock].
    #[arg(long = "api-socket")]
    pub api_socket: Option<PathBuf>,
    /// Registry mirrors, rewrites, auth and TLS in the k3s `registries.yaml` shape
    /// [default: /etc/podvisor/registries.yaml when it exists].
    #[arg(long = "registry-config", value_name = "FILE")]
    pub registry_config: Option<PathBuf>,
    /// Docker `config.json` with registry credentials [default: the kubelet's search order:
    /// /var/lib/kubelet/config.json, $HOME/.docker/config.json].
    #[arg(long = "docker-config", value_name = "FILE")]
    pub docker_config: Option<PathBuf>,
    /// Dead containers younger than this are never garbage-collected (a Go duration, the
    /// kubelet's flag) [default: 0s].
    #[arg(long = "minimum-container-ttl-duration", value_name = "DURATION")]
    pub minimum_container_ttl_duration: Option<String>,
    /// Dead instances kept per pod and container (for `logs --previous`); negative: no limit
    /// (the kubelet's flag) [default: 1].
    #[arg(
        long = "maximum-dead-containers-per-container",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub maximum_dead_containers_per_container: Option<i32>,
    /// Dead containers kept on the node; negative: no limit (the kubelet's flag) [default: -1].
    #[arg(
        long = "maximum-dead-containers",
        value_name = "N",
        allow_negative_numbers = true
    )]
    pub maximum_dead_containers: Option<i32>,
    /// Hard eviction thresholds, the kubelet's flag syntax (`memory.available<100Mi,
    /// nodefs.available<10%`); replaces the file's `evictionHard` ("" for none).
    #[arg(long = "eviction-hard", value_name = "THRESHOLDS")]
    pub eviction_hard: Option<String>,
    /// Which pods the eviction manager may evict under node pressure: `helpful` (only pods
    /// whose own usage of the starved resource can relieve it, in the kubelet's order) or
    /// `never` (the kubelet's rule for static pods: node-level reclaim only) [default: helpful].
    #[arg(long = "eviction-policy", value_name = "POLICY")]
    pub eviction_policy: Option<String>,
    /// Safe updates: an edited manifest's new generation that is not Ready this long after it
    /// could start is rolled back to the pod's last Ready generation (a Go duration; "0" turns
    /// rollbacks off; a pod's `podvisor.io/rollback-after` annotation overrides it)
    /// [default: 5m].
    #[arg(long = "rollback-after", value_name = "DURATION")]
    pub rollback_after: Option<String>,
    /// Bearer tokens of the secure port (`port`), one `token,user,uid,"group1,group2"` line
    /// each (kube-apiserver's --token-auth-file shape).
    #[arg(long = "token-auth-file", value_name = "FILE")]
    pub token_auth_file: Option<PathBuf>,
    /// Who may use which subresource of the secure port: `rules:` with users/groups, verbs
    /// and subresources (podvisor's stand-in for authorization mode Webhook).
    #[arg(long = "authorization-rules-file", value_name = "FILE")]
    pub authorization_rules_file: Option<PathBuf>,
    /// CNI configurations: the lexically first is the pod network; when there is none,
    /// podvisor writes its default network there; "" turns pod networking off (pods without
    /// hostNetwork get loopback only) [default: /etc/cni/net.d].
    #[arg(
        long = "cni-conf-dir",
        value_name = "DIR",
        value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
    )]
    pub cni_conf_dir: Option<PathBuf>,
    /// CNI plugin directories, comma-separated, searched in order
    /// [default: /usr/lib/cni,/opt/cni/bin].
    #[arg(long = "cni-bin-dir", value_name = "DIRS")]
    pub cni_bin_dir: Option<String>,
    /// How long one CNI plugin call may take before it is killed (a Go duration) [default: 30s].
    #[arg(long = "cni-plugin-timeout", value_name = "DURATION")]
    pub cni_plugin_timeout: Option<String>,
    /// The default network's range, when podvisor writes it: one CIDR, or an IPv4 and an IPv6
    /// one comma-separated for dual-stack; overrides the file's `podCIDR` [default: 10.86.0.0/16].
    #[arg(long = "pod-cidr", value_name = "CIDR[,CIDR]")]
    pub pod_cidr: Option<String>,
    /// The manifest URL's CA file and client certificate (podvisor's; see config::manifest_url).
    #[command(flatten)]
    pub manifest_url_tls: ManifestUrlTlsFlags,
    /// kubeconfig of a Kubernetes API server to mirror the node and its static pods to (the
    /// kubelet's flag); without it podvisor talks to no API server.
    #[arg(long = "kubeconfig", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// Labels set on the Node at registration, `key=value[,key=value...]`; keys in the
    /// kubernetes.io and k8s.io namespaces only from the set a node may set on itself.
    #[arg(long = "node-labels", value_name = "KEY=VALUE,...")]
    pub node_labels: Option<String>,
    /// Taints set on the Node at registration only, `key[=value]:Effect[,...]`; replaces the
    /// file's registerWithTaints.
    #[arg(long = "register-with-taints", value_name = "TAINTS")]
    pub register_with_taints: Option<String>,
    /// Create the Node on the API server when it is missing [default: true].
    #[arg(long = "register-node", value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub register_node: Option<bool>,
}

/// The validated content of a KubeletConfiguration file. `None` means the file leaves the
/// setting unset (absent, null, or the zero value the kubelet treats as unset).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeletConfig {
    /// `staticPodPath`: absolute.
    pub static_pod_path: Option<PathBuf>,
    /// `staticPodURL`: an http or https URL.
    pub static_pod_url: Option<String>,
    /// `staticPodURLHeader`: valid header names and values.
    pub static_pod_url_header: Option<BTreeMap<String, Vec<String>>>,
    /// `fileCheckFrequency`, greater than zero.
    pub file_check_frequency: Option<Duration>,
    /// `httpCheckFrequency`, greater than zero.
    pub http_check_frequency: Option<Duration>,
    /// `syncFrequency`, greater than zero.
    pub sync_frequency: Option<Duration>,
    /// `containerLogMaxSize` in bytes, greater than zero.
    pub container_log_max_size: Option<u64>,
    /// `containerLogMaxFiles`, at least 2.
    pub container_log_max_files: Option<u32>,
    /// `podLogsDir`: absolute, normalized, ASCII.
    pub pod_logs_dir: Option<PathBuf>,
    /// `cgroupRoot`: a cgroup below the root (a slice name with the systemd driver), as
    /// written.
    pub cgroup_root: Option<String>,
    /// `cgroupDriver`.
    pub cgroup_driver: Option<crate::cgroups::CgroupDriver>,
    /// `podPidsLimit` when it is a limit (> 0); -1 and 0 mean unlimited and give `None`.
    pub pod_pids_limit: Option<i64>,
    /// `imageGCHighThresholdPercent`, 0..=100.
    pub image_gc_high_threshold_percent: Option<u8>,
    /// `imageGCLowThresholdPercent`, 0..=100 and below the high threshold.
    pub image_gc_low_threshold_percent: Option<u8>,
    /// `imageMinimumGCAge` (zero means unset, as in the kubelet's defaulting).
    pub image_minimum_gc_age: Option<Duration>,
    /// `systemReserved`, `kubeReserved` (cpu, memory) and `evictionHard["memory.available"]`.
    pub reservation: Reservation,
    /// `evictionHard` (the kubelet's defaults when unset), `evictionSoft`,
    /// `evictionSoftGracePeriod`, `evictionMinimumReclaim`, `evictionMaxPodGracePeriod`,
    /// `evictionPressureTransitionPeriod` (5m when unset or zero), `mergeDefaultEvictionSettings`.
    pub eviction: EvictionConfig,
    /// `allowedUnsafeSysctls`: names or `*`-ended prefixes of namespaced sysctls.
    pub allowed_unsafe_sysctls: Vec<SysctlPattern>,
    /// `seccompDefault`.
    pub seccomp_default: Option<bool>,
    /// `resolvConf`: `Some(None)` when set to "" (pods get no node DNS settings).
    pub resolv_conf: Option<Option<PathBuf>>,
    /// The node API fields (`healthzPort`, `healthzBindAddress`, ...).
    pub server: ServerFields,
    /// `podCIDR`, `clusterDNS`, `clusterDomain`.
    pub network: NetworkFields,
    /// The API server fields (`nodeStatusUpdateFrequency`, `registerWithTaints`, ...).
    pub api_server: ApiServerFields,
    /// Known fields present in the file that podvisor does not implement, sorted.
    pub unimplemented_fields: Vec<String>,
}

/// What `podvisor run` runs with: the file, the flags and the defaults merged and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonConfig {
    /// `--hostname-override` or the system hostname, trimmed and lowercased; a DNS-1123
    /// subdomain.
    pub node_name: String,
    /// Directory of static Pod manifests; `None` when disabled with `--pod-manifest-path ""`.
    pub static_pod_path: Option<PathBuf>,
    /// URL polled for manifests; `None` when not configured.
    pub static_pod_url: Option<String>,
    /// Headers sent to `static_pod_url`; values of one name in order.
    pub static_pod_url_header: BTreeMap<String, Vec<String>>,
    /// `static_pod_url`'s extra CA file and client certificate.
    pub static_pod_url_tls: crate::httpclient::tls::ClientTls,
    /// Full re-read period of `static_pod_path` (besides the inotify watch).
    pub file_check_frequency: Duration,
    /// Poll period of `static_pod_url`.
    pub http_check_frequency: Duration,
    /// Period of the full pod resync.
    pub sync_frequency: Duration,
    /// Rotate a container log file above this many bytes.
    pub container_log_max_size: u64,
    /// Log files kept per container, the live one included (>= 2).
    pub container_log_max_files: u32,
    /// Root of the CRI log tree.
    pub pod_logs_dir: PathBuf,
    /// podvisor's cgroup parent, as written (see `cgroups::layout`): `podvisor` by default,
    /// `podvisor.slice` with the systemd driver.
    pub cgroup_root: String,
    /// `cgroupDriver` (cgroupfs by default).
    pub cgroup_driver: crate::cgroups::CgroupDriver,
    /// PID limit per pod; `None` = unlimited (kubelet `podPidsLimit: -1`).
    pub pod_pids_limit: Option<i64>,
    /// Image garbage collection thresholds and minimum age.
    pub image_gc: crate::images::ImageGcPolicy,
    /// Container garbage collection (the kubelet's GC flags).
    pub container_gc: crate::gc::ContainerGcPolicy,
    /// Safe updates: how long a new generation has to become Ready (zero: no rollbacks).
    pub rollback_after: Duration,
    /// What node allocatable keeps back from the pods.
    pub reservation: Reservation,
    /// The eviction manager's thresholds and periods.
    pub eviction: EvictionConfig,
    /// Sysctls pods may set beyond the kubelet's safe set.
    pub allowed_unsafe_sysctls: Vec<SysctlPattern>,
    /// RuntimeDefault seccomp for containers that set no profile (default false, as the
    /// kubelet).
    pub seccomp_default: bool,
    /// The node resolver configuration pods' DNS settings start from (`resolvConf`, default
    /// `/etc/resolv.conf`); `None` when `resolvConf` is "".
    pub resolv_conf: Option<PathBuf>,
    /// `clusterDNS`: the nameservers of ClusterFirst pods (empty: the node's).
    pub cluster_dns: Vec<String>,
    /// `clusterDomain` ("" when unset).
    pub cluster_domain: String,
    /// The pod network (CNI); `None` with `--cni-conf-dir ""`.
    pub network: Option<crate::network::NetworkConfig>,
    /// Unix socket of the local API.
    pub api_socket: PathBuf,
    /// The plain healthz port (`healthzBindAddress:healthzPort`); `None` when off.
    pub healthz: Option<std::net::SocketAddr>,
    /// The authenticated HTTPS port; `None` when `enableServer` is false.
    pub node_server: Option<crate::nodeapi::NodeServerConfig>,
    /// `--registry-config`, as given.
    pub registry_config: Option<PathBuf>,
    /// `--docker-config`, as given.
    pub docker_config: Option<PathBuf>,
    /// The API server to mirror to (`--kubeconfig`); `None`: none.
    pub api_server: Option<ApiServerConfig>,
    /// Known KubeletConfiguration fields present in the file that podvisor does not implement,
    /// sorted and deduplicated, for one warning at start.
    pub unimplemented_fields: Vec<String>,
}

/// Reads `--config` (if given), applies the flags over it and the defaults under both.
/// `root_dir` is the global `--root-dir`; it must be absolute.
pub fn load(flags: &RunFlags, root_dir: &Path) -> Result<DaemonConfig, ConfigError> {
    if !root_dir.is_absolute() {
        return Err(invalid_flag(
            "root-dir",
            &root_dir.display().to_string(),
            "must be an absolute path",
        ));
    }
    let file = match &flags.config {
        Some(path) => {
            let data = std::fs::read(path).map_err(|source| ConfigError::Read {
                path: path.display().to_string(),
                source,
            })?;
            parse_kubelet_config(&data, &path.display().to_string())?
        }
        None => KubeletConfig::default(),
    };

    let mut file = file;
    if let Some(v) = &flags.eviction_hard {
        eviction::apply_hard_flag(&mut file, v)?;
    }
    if let Some(v) = &flags.eviction_policy {
        file.eviction.policy = eviction::parse_policy_flag(v)?;
    }

    let static_pod_path = match &flags.pod_manifest_path {
        Some(p) if p.as_os_str().is_empty() => None,
        Some(p) => {
            check_absolute(p).map_err(|m| {
                invalid_flag("pod-manifest-path", &p.display().to_string(), m.to_string())
            })?;
            Some(p.clone())
        }
        None => Some(
            file.static_pod_path
                .unwrap_or_else(|| PathBuf::from(DEFAULT_STATIC_POD_PATH)),
        ),
    };
    let static_pod_url = match &flags.manifest_url {
        Some(u) if u.is_empty() => None,
        Some(u) => {
            check_url(u).map_err(|m| invalid_flag("manifest-url", u, m.to_string()))?;
            Some(u.clone())
        }
        None => file.static_pod_url,
    };
    let static_pod_url_header = if flags.manifest_url_header.is_empty() {
        file.static_pod_url_header.unwrap_or_default()
    } else {
        parse_manifest_url_headers(&flags.manifest_url_header)?
    };
    let api_socket = match &flags.api_socket {
        Some(p) => {
            check_socket_path(p)
                .map_err(|m| invalid_flag("api-socket", &p.display().to_string(), m.to_string()))?;
            p.clone()
        }
        None => PathBuf::from(DEFAULT_API_SOCKET),
    };
    let node_name = resolve_node_name(flags.hostname_override.as_deref())?;
    let container_gc = {
        let d = crate::gc::ContainerGcPolicy::default();
        let min_age = match &flags.minimum_container_ttl_duration {
            Some(v) => parse_go_duration(v)
                .map_err(|e| invalid_flag("minimum-container-ttl-duration", v, e.to_string()))?,
            None => d.min_age,
        };
        crate::gc::ContainerGcPolicy {
            min_age,
            max_per_pod_container: flags
                .maximum_dead_containers_per_container
                .unwrap_or(d.max_per_pod_container),
            max_containers: flags.maximum_dead_containers.unwrap_or(d.max_containers),
        }
    };

    let network = network::network_config(&file.network, flags, root_dir)?;
    let rollback_after = match &flags.rollback_after {
        Some(v) => {
            parse_go_duration(v).map_err(|e| invalid_flag("rollback-after", v, e.to_string()))?
        }
        None => DEFAULT_ROLLBACK_AFTER,
    };

    let static_pod_url_tls = flags.manifest_url_tls.resolve(static_pod_url.is_some())?;
    Ok(DaemonConfig {
        container_gc,
        rollback_after,
        node_name,
        static_pod_path,
        static_pod_url,
        static_pod_url_header,
        static_pod_url_tls,
        file_check_frequency: file
            .file_check_frequency
            .unwrap_or(DEFAULT_FILE_CHECK_FREQUENCY),
        http_check_frequency: file
            .http_check_frequency
            .unwrap_or(DEFAULT_HTTP_CHECK_FREQUENCY),
        sync_frequency: file.sync_frequency.unwrap_or(DEFAULT_SYNC_FREQUENCY),
        container_log_max_size: file
            .container_log_max_size
            .unwrap_or(DEFAULT_CONTAINER_LOG_MAX_SIZE),
        container_log_max_files: file
            .container_log_max_files
            .unwrap_or(DEFAULT_CONTAINER_LOG_MAX_FILES),
        pod_logs_dir: file
            .pod_logs_dir
            .unwrap_or_else(|| PathBuf::from(DEFAULT_POD_LOGS_DIR)),
        cgroup_root: file.cgroup_root.unwrap_or_else(|| {
            match file.cgroup_driver.unwrap_or_default() {
                crate::cgroups::CgroupDriver::Cgroupfs => DEFAULT_CGROUP_ROOT.to_string(),
                crate::cgroups::CgroupDriver::Systemd => {
                    crate::cgroups::systemd::DEFAULT_SLICE.to_string()
                }
            }
        }),
        cgroup_driver: file.cgroup_driver.unwrap_or_default(),
        pod_pids_limit: file.pod_pids_limit,
        resolv_conf: file
            .resolv_conf
            .unwrap_or_else(|| Some(PathBuf::from(DEFAULT_RESOLV_CONF))),
        cluster_dns: file.network.cluster_dns.clone(),
        cluster_domain: file.network.cluster_domain.clone().unwrap_or_default(),
        network,
        image_gc: {
            let d = crate::images::ImageGcPolicy::default();
            crate::images::ImageGcPolicy {
                high_threshold_percent: file
                    .image_gc_high_threshold_percent
                    .unwrap_or(d.high_threshold_percent),
                low_threshold_percent: file
                    .image_gc_low_threshold_percent
                    .unwrap_or(d.low_threshold_percent),
                minimum_age: file.image_minimum_gc_age.unwrap_or(d.minimum_age),
            }
        },
        reservation: file.reservation,
        eviction: file.eviction,
        allowed_unsafe_sysctls: file.allowed_unsafe_sysctls,
        seccomp_default: file.seccomp_default.unwrap_or(false),
        api_socket,
        healthz: file.server.healthz_addr(),
        node_server: file.server.node_server(flags)?,
        registry_config: flags.registry_config.clone(),
        docker_config: flags.docker_config.clone(),
        api_server: apiserver::resolve(&file.api_server, flags)?,
        unimplemented_fields: file.unimplemented_fields,
    })
}
