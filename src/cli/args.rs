//! cli::args: podvisor's command line, the clap definition `main` parses and the `docs`
//! feature renders as man pages and completions: global flags, the commands and their flags.
//! Each command's body is in its own file of [`crate::cli`].

use std::path::PathBuf;

use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};

use super::apply::Connection;
use super::image::ImageCommand;
use super::shim::ShimCommand;
use crate::config::{RunFlags, DEFAULT_API_SOCKET};

#[derive(Parser)]
#[command(
    name = "podvisor",
    version,
    about = "Single-node static-pod supervisor (kubelet semantics, no cluster, no CRI)"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Args, Clone)]
pub struct Global {
    /// Directory for podvisor's persistent state: images, desired pods, container records,
    /// emptyDir volumes.
    #[arg(long, global = true, default_value = "/var/lib/podvisor")]
    pub root_dir: PathBuf,
    /// Directory for state that dies with the boot (a tmpfs): pod sandboxes, container
    /// bundles, monitor state.
    #[arg(long, global = true, default_value = crate::runtime::rundir::DEFAULT_RUNTIME_DIR)]
    pub runtime_dir: PathBuf,
    /// Test hook: read the boot ID from this file instead of the kernel's (a changed ID is a
    /// simulated reboot).
    #[arg(long, global = true, hide = true, default_value = crate::runtime::rundir::BOOT_ID_FILE)]
    pub boot_id_file: PathBuf,
    /// Root of the container log tree (CRI format, like /var/log/pods of the kubelet);
    /// overrides podLogsDir of the configuration file. Default /var/log/pods.
    #[arg(long, global = true)]
    pub log_dir: Option<PathBuf>,
    /// Top-level cgroup under which pods are placed; overrides cgroupRoot. Default podvisor.
    #[arg(long, global = true)]
    pub cgroup_parent: Option<String>,
}

#[derive(Args, Clone)]
pub struct ClientArgs {
    /// The daemon's API socket.
    #[arg(long, default_value = DEFAULT_API_SOCKET)]
    pub api_socket: PathBuf,
}

/// How `apply` and `delete` reach a node's secure port (kubectl's flag names).
#[derive(Args, Clone)]
pub struct NodeServerArgs {
    /// The node's secure port, `https://HOST:10250`.
    #[arg(long)]
    pub server: String,
    /// Bearer token (one of the node's --token-auth-file).
    #[arg(long)]
    pub token: Option<String>,
    /// File holding the bearer token (not visible in the process list, unlike --token).
    #[arg(long = "token-file", value_name = "FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// PEM client certificate (signed by the node's authentication.x509.clientCAFile).
    #[arg(long = "client-certificate", value_name = "FILE")]
    pub client_certificate: Option<PathBuf>,
    /// PEM private key of --client-certificate.
    #[arg(long = "client-key", value_name = "FILE")]
    pub client_key: Option<PathBuf>,
    /// PEM CA certificates trusted besides the system bundle (a node's self-signed
    /// <root-dir>/pki/kubelet.crt works).
    #[arg(long = "certificate-authority", value_name = "FILE")]
    pub certificate_authority: Option<PathBuf>,
    /// Do not verify the node's certificate (insecure).
    #[arg(long = "insecure-skip-tls-verify")]
    pub insecure_skip_tls_verify: bool,
    /// Namespace of the pod when the manifest names none [default: default].
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

impl NodeServerArgs {
    pub fn connection(&self) -> Connection {
        Connection {
            server: self.server.clone(),
            token: self.token.clone(),
            token_file: self.token_file.clone(),
            client_certificate: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
            certificate_authority: self.certificate_authority.clone(),
            insecure_skip_tls_verify: self.insecure_skip_tls_verify,
        }
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the supervisor daemon: keep every static pod of the manifest directory and URL
    /// running (kubelet-compatible flags and KubeletConfiguration file).
    Run {
        // Boxed: the largest variant by far.
        #[command(flatten)]
        flags: Box<RunFlags>,
    },
    /// List pods (like `kubectl get pods`).
    Pods {
        /// One pod: name, namespace/name, or the manifest name without the node suffix.
        name: Option<String>,
        /// Output format: wide, json or yaml.
        #[arg(short = 'o', long = "output", default_value = "")]
        output: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show a pod in detail: conditions, container states, source errors, events.
    Describe {
        pod: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Print a container's log.
    Logs {
        pod: String,
        /// The container (needed when the pod has several).
        #[arg(short = 'c', long)]
        container: Option<String>,
        /// Follow the log.
        #[arg(short = 'f', long)]
        follow: bool,
        /// The previous instance of the container.
        #[arg(short = 'p', long)]
        previous: bool,
        /// Only the last N lines.
        #[arg(long)]
        tail: Option<usize>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Attach to a running container's output and, with -i, its stdin (like kubectl attach).
    Attach {
        /// The pod: name, namespace/name, or the manifest name without the node suffix.
        pod: String,
        /// The container (default: the pod's first app container).
        #[arg(short = 'c', long)]
        container: Option<String>,
        /// Pass stdin to the container (it needs `stdin: true`).
        #[arg(short = 'i', long)]
        stdin: bool,
        /// Use the container's terminal (`tty: true`): this terminal goes to raw mode.
        #[arg(short = 't', long)]
        tty: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Run a command in a running container; its exit code becomes podvisor's.
    Exec {
        /// The pod: name, namespace/name, or the manifest name without the node suffix.
        pod: String,
        /// The container (default: the pod's first app container).
        #[arg(short = 'c', long)]
        container: Option<String>,
        /// Pass stdin to the command.
        #[arg(short = 'i', long)]
        stdin: bool,
        /// Allocate a pseudo-terminal in the container (this terminal goes to raw mode).
        #[arg(short = 't', long)]
        tty: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show CPU (millicores, from two samples) and memory working set of pods or containers
    /// (like `kubectl top pod`).
    Top {
        /// One pod: name, namespace/name, or the manifest name without the node suffix.
        pod: Option<String>,
        /// One line per running container instead of per pod.
        #[arg(long)]
        containers: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show the node like `kubectl describe node`: conditions (MemoryPressure, DiskPressure,
    /// PIDPressure), capacity, allocatable, images, pods with their requests.
    Node {
        /// Output format: json or yaml (the v1 Node), or empty for the description.
        #[arg(short = 'o', long = "output", default_value = "")]
        output: String,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// List events (deduplicated, with counts).
    Events {
        pod: Option<String>,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Check manifests offline with the daemon's parser and validation, against this host
    /// (AppArmor, seccomp profiles under --root-dir) and the daemon's configuration.
    Validate {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Node name used for the static-pod name suffix (default: this host's name).
        #[arg(long = "hostname-override")]
        hostname_override: Option<String>,
        /// The daemon's KubeletConfiguration file (allowedUnsafeSysctls, seccompDefault).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Run one Pod manifest in the foreground; Ctrl-C stops it gracefully.
    Play {
        /// The Pod manifest (YAML or JSON).
        file: PathBuf,
        /// Keep the pod's CRI log files after it stops.
        #[arg(long)]
        keep_logs: bool,
        /// registries.yaml (mirrors, auth, TLS) for pulls.
        #[arg(long = "registry-config", value_name = "FILE")]
        registry_config: Option<PathBuf>,
        /// Docker config.json with registry credentials.
        #[arg(long = "docker-config", value_name = "FILE")]
        docker_config: Option<PathBuf>,
        /// CNI configurations (as `podvisor run`): the pod joins the lexically first network;
        /// "" gives it loopback only [default: /etc/cni/net.d].
        #[arg(
            long = "cni-conf-dir",
            value_name = "DIR",
            value_parser = clap::builder::OsStringValueParser::new().map(PathBuf::from)
        )]
        cni_conf_dir: Option<PathBuf>,
        /// CNI plugin directories, comma-separated [default: /usr/lib/cni,/opt/cni/bin].
        #[arg(long = "cni-bin-dir", value_name = "DIRS")]
        cni_bin_dir: Option<String>,
    },
    /// Push a Pod manifest to a node's secure port (its push source), like `kubectl apply -f`:
    /// validated by the node as its manifest files are, kept across its restarts.
    Apply {
        /// The Pod manifest (YAML or JSON, one Pod).
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
        #[command(flatten)]
        node: NodeServerArgs,
    },
    /// Delete pods pushed to a node (`podvisor delete pod NAME`, or `-f FILE`).
    Delete {
        /// `pod NAME...`, `pod/NAME`, or names.
        names: Vec<String>,
        /// The manifest that was applied.
        #[arg(
            short = 'f',
            long = "filename",
            value_name = "FILE",
            conflicts_with = "names"
        )]
        file: Option<PathBuf>,
        #[command(flatten)]
        node: NodeServerArgs,
    },
    /// Verify podvisor's persistent state (image store: every blob's digest, records, layers;
    /// desired pods; container records) and repair what can be repaired. Exit status 1 when
    /// something inconsistent is left.
    Check {
        /// Only report; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Manage the local image store.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Write the man pages and shell completions into a directory (packaging; only in a
    /// build with the `docs` feature).
    #[cfg(feature = "docs")]
    #[command(hide = true)]
    GenerateDocs { out: PathBuf },
    /// Internal: processes podvisor re-executes itself as.
    #[command(hide = true)]
    Shim {
        #[command(subcommand)]
        command: ShimCommand,
    },
}
