//! The `podvisor` binary: command-line parsing and the error edge (anyhow lives only here).
//!
//! User commands: `run` (the daemon), `pods`, `describe`, `logs`, `exec`, `events`, `check`,
//! `validate`, `play`, `image import|pull|ls|rm|prune`, `apply` and `delete` (a node's push
//! source). Hidden commands re-executed by podvisor itself: `shim spawner` (forks the
//! per-container monitors, `shim run`, and the sandbox helpers, `shim sandbox`), `shim cleanup`,
//! `shim exec`, `shim pod-init`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::builder::TypedValueParser;
use clap::{Args, Parser, Subcommand};

use podvisor::cli::{self as views, LogsOptions, OutputFormat};
use podvisor::config::{RunFlags, DEFAULT_API_SOCKET};
use podvisor::images::{ImageStore, ImportOptions, PinnedImages, PullProgress, RegistryConfig};
use podvisor::play::{play, PlayOptions};
use podvisor::runtime::linux::RuntimeConfig;
use podvisor::runtime::{exec, shim};

#[derive(Parser)]
#[command(
    name = "podvisor",
    version,
    about = "Single-node static-pod supervisor (kubelet semantics, no cluster, no CRI)"
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct Global {
    /// Directory for podvisor's persistent state: images, desired pods, container records,
    /// emptyDir volumes.
    #[arg(long, global = true, default_value = "/var/lib/podvisor")]
    root_dir: PathBuf,
    /// Directory for state that dies with the boot (a tmpfs): pod sandboxes, container
    /// bundles, monitor state.
    #[arg(long, global = true, default_value = podvisor::runtime::rundir::DEFAULT_RUNTIME_DIR)]
    runtime_dir: PathBuf,
    /// Test hook: read the boot ID from this file instead of the kernel's (a changed ID is a
    /// simulated reboot).
    #[arg(long, global = true, hide = true, default_value = podvisor::runtime::rundir::BOOT_ID_FILE)]
    boot_id_file: PathBuf,
    /// Root of the container log tree (CRI format, like /var/log/pods of the kubelet);
    /// overrides podLogsDir of the configuration file. Default /var/log/pods.
    #[arg(long, global = true)]
    log_dir: Option<PathBuf>,
    /// Top-level cgroup under which pods are placed; overrides cgroupRoot. Default podvisor.
    #[arg(long, global = true)]
    cgroup_parent: Option<String>,
}

#[derive(Args, Clone)]
struct ClientArgs {
    /// The daemon's API socket.
    #[arg(long, default_value = DEFAULT_API_SOCKET)]
    api_socket: PathBuf,
}

/// How `apply` and `delete` reach a node's secure port (kubectl's flag names).
#[derive(Args, Clone)]
struct NodeServerArgs {
    /// The node's secure port, `https://HOST:10250`.
    #[arg(long)]
    server: String,
    /// Bearer token (one of the node's --token-auth-file).
    #[arg(long)]
    token: Option<String>,
    /// File holding the bearer token (not visible in the process list, unlike --token).
    #[arg(long = "token-file", value_name = "FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// PEM client certificate (signed by the node's authentication.x509.clientCAFile).
    #[arg(long = "client-certificate", value_name = "FILE")]
    client_certificate: Option<PathBuf>,
    /// PEM private key of --client-certificate.
    #[arg(long = "client-key", value_name = "FILE")]
    client_key: Option<PathBuf>,
    /// PEM CA certificates trusted besides the system bundle (a node's self-signed
    /// <root-dir>/pki/kubelet.crt works).
    #[arg(long = "certificate-authority", value_name = "FILE")]
    certificate_authority: Option<PathBuf>,
    /// Do not verify the node's certificate (insecure).
    #[arg(long = "insecure-skip-tls-verify")]
    insecure_skip_tls_verify: bool,
    /// Namespace of the pod when the manifest names none [default: default].
    #[arg(short = 'n', long)]
    namespace: Option<String>,
}

impl NodeServerArgs {
    fn connection(&self) -> views::apply::Connection {
        views::apply::Connection {
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
enum Command {
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

#[derive(Subcommand)]
enum ImageCommand {
    /// Import an OCI-archive or docker-archive tarball (gzip, zstd or plain layers).
    Import {
        file: PathBuf,
        /// Name the image (needed when the archive carries no full reference).
        #[arg(long = "ref")]
        reference: Option<String>,
        /// Protect the image from garbage collection.
        #[arg(long)]
        pin: bool,
    },
    /// Pull an image from its registry (or a configured mirror) for this machine's platform.
    Pull {
        reference: String,
        /// k3s-style registries.yaml: mirrors, endpoint rewrites, per-host auth and TLS.
        #[arg(long)]
        registry_config: Option<PathBuf>,
        /// Docker config.json with `auths` (default: the kubelet's search paths).
        #[arg(long)]
        docker_config: Option<PathBuf>,
    },
    /// List images: reference, digest, size, created.
    Ls {
        /// Print full digests.
        #[arg(long)]
        no_trunc: bool,
    },
    /// Remove images by reference or digest.
    Rm {
        #[arg(required = true)]
        images: Vec<String>,
    },
    /// Remove every image no container uses and nothing pins (preloaded images and images of
    /// the pods podvisor runs are pinned).
    Prune {
        /// Only list what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Subcommand)]
enum ShimCommand {
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

fn init_logging(default: &str) {
    // libcontainer logs through `tracing`, which has no subscriber here: its noise never
    // reaches the terminal or a container's stderr.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
        .format_target(false)
        .init();
}

fn main() -> ExitCode {
    // The pod init lives as long as its pod: it skips clap and the logger (never touching
    // their pages keeps its memory small). Its arguments are fixed by the sandbox helper.
    let mut args = std::env::args_os().skip(1);
    if args.next().is_some_and(|a| a == "shim") {
        match args.next() {
            Some(a) if a == "pod-init" => podvisor::runtime::sandbox::pod_init(),
            // The spawner, likewise: the monitors it forks share its pages, so it touches as
            // few as it can (its last argument is room for their command lines).
            Some(a) if a == "spawner" => podvisor::runtime::spawner::serve(),
            _ => {}
        }
    }
    let cli = Cli::parse();
    if let Command::Shim { command } = &cli.command {
        init_logging("warn");
        let code = match command {
            ShimCommand::Run { dir } => shim::run(dir),
            ShimCommand::Cleanup { dir } => match shim::cleanup(dir) {
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
            } => shim::sandbox(dir, hostname, *host_network, *share_pid, *user_ns_base),
            // Handled before parsing (never return); listed for `shim --help`.
            ShimCommand::PodInit { .. } => podvisor::runtime::sandbox::pod_init(),
            ShimCommand::Spawner { .. } => podvisor::runtime::spawner::serve(),
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
                        timeout: std::time::Duration::from_millis(*ms),
                    },
                    None => exec::ExecMode::Interactive {
                        tty: *tty,
                        stdin: *stdin,
                    },
                },
            }),
        };
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    init_logging("info");
    match run(cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            ExitCode::from(1)
        }
    }
}

/// The error and its causes joined with ": ", leaving out a cause whose message the one
/// before it already shows (podvisor's errors embed their source in their message, as
/// `anyhow`'s context does not, so `{:#}` would print it twice).
fn error_chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let msg = cause.to_string();
        if !out.ends_with(&msg) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&msg);
        }
    }
    out
}

fn runtime_config(g: &Global) -> anyhow::Result<RuntimeConfig> {
    let log_dir = g
        .log_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(podvisor::config::DEFAULT_POD_LOGS_DIR));
    let mut cfg = RuntimeConfig::new(g.root_dir.clone(), g.runtime_dir.clone(), log_dir)
        .context("cannot locate the podvisor binary")?;
    cfg.boot_id_file = g.boot_id_file.clone();
    if let Some(p) = &g.cgroup_parent {
        cfg.cgroup_parent = p.clone();
    }
    Ok(cfg)
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    let g = cli.global;
    // Client commands write to these; the daemon never takes them (a held stdio lock would
    // block every other thread's logging).
    let out = || std::io::stdout().lock();
    let err = || std::io::stderr().lock();
    match cli.command {
        Command::Run { flags } => {
            let paths = podvisor::daemon::DaemonPaths {
                root_dir: g.root_dir.clone(),
                run_dir: g.runtime_dir.clone(),
                boot_id_file: g.boot_id_file.clone(),
                log_dir: g.log_dir.clone(),
                cgroup_parent: g.cgroup_parent.clone(),
            };
            podvisor::daemon::run(&paths, &flags)?;
            Ok(0)
        }
        Command::Pods {
            name,
            output,
            client,
        } => {
            let format: OutputFormat = output.parse()?;
            views::get_pods(
                &client.api_socket,
                name.as_deref(),
                format,
                &mut out(),
                &mut err(),
            )?;
            Ok(0)
        }
        Command::Apply { file, node } => {
            views::apply::apply(
                &node.connection(),
                &file,
                node.namespace.as_deref(),
                &mut out(),
            )?;
            Ok(0)
        }
        Command::Delete { names, file, node } => {
            let targets = match &file {
                Some(f) => vec![views::apply::read_target(f, node.namespace.as_deref())?.1],
                None => views::apply::delete_targets(&names, node.namespace.as_deref())?,
            };
            let conn = node.connection();
            for t in &targets {
                views::apply::delete(&conn, t, &mut out())?;
            }
            Ok(0)
        }
        Command::Describe { pod, client } => {
            views::describe_pod(&client.api_socket, &pod, &mut out())?;
            Ok(0)
        }
        Command::Logs {
            pod,
            container,
            follow,
            previous,
            tail,
            client,
        } => {
            let opts = LogsOptions {
                pod,
                container,
                previous,
                tail,
                follow,
            };
            views::logs(&client.api_socket, &opts, &mut out())?;
            Ok(0)
        }
        Command::Attach {
            pod,
            container,
            stdin,
            tty,
            client,
        } => {
            let req = views::attach::AttachRequest {
                pod,
                container,
                stdin,
                tty,
            };
            Ok(views::attach::attach(
                &client.api_socket,
                &g.runtime_dir,
                &req,
            )?)
        }
        Command::Exec {
            pod,
            container,
            stdin,
            tty,
            command,
            client,
        } => {
            let req = views::exec::ExecRequest {
                pod,
                container,
                stdin,
                tty,
                command,
            };
            let binary = std::env::current_exe().context("cannot locate the podvisor binary")?;
            Ok(views::exec::exec(
                &client.api_socket,
                &g.runtime_dir,
                &binary,
                &req,
            )?)
        }
        Command::Top {
            pod,
            containers,
            client,
        } => {
            views::top(
                &client.api_socket,
                pod.as_deref(),
                containers,
                std::time::Duration::from_secs(1),
                &mut out(),
                &mut err(),
            )?;
            Ok(0)
        }
        Command::Node { output, client } => {
            let format: OutputFormat = output.parse()?;
            views::get_node(&client.api_socket, format, &mut out())?;
            Ok(0)
        }
        Command::Events { pod, client } => {
            views::get_events(&client.api_socket, pod.as_deref(), &mut out(), &mut err())?;
            Ok(0)
        }
        Command::Validate {
            files,
            hostname_override,
            config,
        } => validate(
            &files,
            hostname_override.as_deref(),
            config.as_deref(),
            &g.root_dir,
        ),
        Command::Play {
            file,
            keep_logs,
            registry_config,
            docker_config,
            cni_conf_dir,
            cni_bin_dir,
        } => {
            let mut runtime = runtime_config(&g)?;
            runtime.network = match cni_conf_dir {
                Some(d) if d.as_os_str().is_empty() => None,
                d => {
                    let mut n = podvisor::network::NetworkConfig::new(&g.root_dir);
                    if let Some(d) = d {
                        n.conf_dir = d;
                    }
                    if let Some(b) = cni_bin_dir {
                        n.bin_dirs = b.split(',').map(|d| PathBuf::from(d.trim())).collect();
                    }
                    Some(n)
                }
            };
            let opts = PlayOptions {
                manifest: file,
                runtime,
                keep_logs,
                registry_config,
                docker_config,
            };
            Ok(play(&opts)?)
        }
        Command::Check { dry_run } => state_check(&g.root_dir, dry_run),
        Command::Image { command } => {
            let store = ImageStore::open(&g.root_dir.join("images"))?;
            image_command(&store, &g.root_dir, command)?;
            Ok(0)
        }
        #[cfg(feature = "docs")]
        Command::GenerateDocs { out } => {
            use clap::CommandFactory;
            for f in views::docs::generate(Cli::command(), &out)? {
                println!("{}", f.display());
            }
            Ok(0)
        }
        // Handled in main before logging is set up.
        Command::Shim { .. } => Ok(2),
    }
}

/// `podvisor check`: one line per finding, a summary, exit 1 if something inconsistent is left.
fn state_check(root_dir: &std::path::Path, dry_run: bool) -> anyhow::Result<i32> {
    use podvisor::images::FindingKind;
    let report = podvisor::check::check(root_dir, !dry_run)?;
    for f in report.all_findings() {
        let kind = match f.kind {
            FindingKind::Interrupted => "interrupted",
            FindingKind::Inconsistent => "INCONSISTENT",
        };
        let action = match &f.repaired {
            Some(what) => what.as_str(),
            None if dry_run => "not repaired (dry run)",
            None => "not repaired",
        };
        println!("{kind}: {}: {action}", f.message);
    }
    let consistent = report.consistent();
    println!(
        "checked {} blob(s), {} layer(s), {} image record(s), {} desired pod(s), {} container \
         record(s): {} finding(s); {}",
        report.images.blobs,
        report.images.layers,
        report.images.records,
        report.desired_pods,
        report.containers,
        report.all_findings().count(),
        if consistent {
            "consistent"
        } else {
            "NOT consistent"
        }
    );
    Ok(if consistent { 0 } else { 1 })
}

/// `podvisor validate`: every file is checked; exit 1 if any is invalid.
fn validate(
    files: &[PathBuf],
    hostname_override: Option<&str>,
    config: Option<&std::path::Path>,
    root_dir: &std::path::Path,
) -> anyhow::Result<i32> {
    let node = podvisor::config::resolve_node_name(hostname_override)?;
    let kubelet = match config {
        Some(path) => {
            let data = std::fs::read(path).with_context(|| {
                format!("failed to read kubelet config file {}", path.display())
            })?;
            podvisor::config::parse_kubelet_config(&data, &path.display().to_string())?
        }
        None => podvisor::config::KubeletConfig::default(),
    };
    let security = podvisor::security::NodeSecurity::for_host(
        root_dir,
        &kubelet.allowed_unsafe_sysctls,
        kubelet.seccomp_default.unwrap_or(false),
        podvisor::security::apparmor::AppArmorHost::detect(),
    );
    let mut bad = 0;
    for f in files {
        match podvisor::staticpod::validate_file(f, &node, &security) {
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

fn human_size(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{n}B")
    } else {
        format!("{v:.1}{}", UNITS[u])
    }
}

/// Pull progress: one updating total line on a terminal, a line per layer otherwise.
#[derive(Default)]
struct PullView {
    sizes: std::collections::HashMap<String, u64>,
    done: std::collections::HashMap<String, u64>,
    finished: usize,
    shown: bool,
}

impl PullView {
    fn show(&mut self, p: &PullProgress, tty: bool) {
        use std::io::Write;
        match p {
            PullProgress::Resolved {
                reference,
                digest,
                registry,
                layers,
            } => {
                self.sizes = layers.iter().map(|(d, s)| (d.to_string(), *s)).collect();
                if !tty {
                    let total: u64 = layers.iter().map(|(_, s)| s).sum();
                    println!(
                        "resolved {reference} {digest} on {registry}: {} layers, {}",
                        layers.len(),
                        human_size(total)
                    );
                }
            }
            PullProgress::Layer { digest, done, .. } => {
                self.done.insert(digest.to_string(), *done);
            }
            PullProgress::LayerDone { digest, cached } => {
                let size = self.sizes.get(&digest.to_string()).copied().unwrap_or(0);
                self.done.insert(digest.to_string(), size);
                self.finished += 1;
                if !tty {
                    let what = if *cached {
                        "already present"
                    } else {
                        "downloaded"
                    };
                    println!("layer {digest} {what} ({})", human_size(size));
                }
            }
            PullProgress::Committing => {
                if !tty {
                    println!("unpacking layers");
                }
            }
        }
        if tty {
            let total: u64 = self.sizes.values().sum();
            let done: u64 = self.done.values().sum();
            let phase = if matches!(p, PullProgress::Committing) {
                "unpacking"
            } else {
                "downloading"
            };
            print!(
                "\r\x1b[K{phase}: {}/{} layers, {} / {}",
                self.finished,
                self.sizes.len(),
                human_size(done),
                human_size(total)
            );
            let _ = std::io::stdout().flush();
            self.shown = true;
        }
    }
}

/// Images pinned by the pods the daemon runs (its persisted desired pods under `root_dir`).
fn manifest_pins(root_dir: &std::path::Path) -> PinnedImages {
    let pods = podvisor::sync::store::DesiredStore::new(root_dir.join("static-pods")).load_all();
    PinnedImages::from_pods(pods.iter().map(|p| &p.pod))
}

fn image_command(
    store: &ImageStore,
    root_dir: &std::path::Path,
    command: ImageCommand,
) -> anyhow::Result<()> {
    match command {
        ImageCommand::Import {
            file,
            reference,
            pin,
        } => {
            let opts = ImportOptions {
                reference,
                pinned: pin,
            };
            let records = store
                .import_archive(&file, &opts)
                .with_context(|| format!("importing {}", file.display()))?;
            for r in records {
                println!("imported {} {}", r.reference, r.digest);
            }
        }
        ImageCommand::Pull {
            reference,
            registry_config,
            docker_config,
        } => {
            let cfg = RegistryConfig::load(registry_config.as_deref(), docker_config.as_deref())?;
            let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
            let mut view = PullView::default();
            let rec = store.pull(&reference, &cfg, &mut |p| view.show(p, tty));
            if tty && view.shown {
                println!();
            }
            let rec = rec?;
            println!("pulled {} {}", rec.reference, rec.digest);
        }
        ImageCommand::Ls { no_trunc } => {
            // One record per name, sorted by reference; a pin belongs to the image (digest).
            let pins = manifest_pins(root_dir);
            let usage = store.image_usage(&pins)?;
            let pinned_by: std::collections::BTreeMap<&str, &str> = usage
                .iter()
                .filter_map(|u| u.pinned.map(|why| (u.digest.as_str(), why)))
                .collect();
            let list = store.list()?;
            println!(
                "{:<50} {:<20} {:>9}  {:<25} PINNED",
                "REFERENCE", "DIGEST", "SIZE", "CREATED"
            );
            for r in list {
                let digest = if no_trunc {
                    r.digest.clone()
                } else {
                    r.digest.chars().take(19).collect()
                };
                println!(
                    "{:<50} {:<20} {:>9}  {:<25} {}",
                    r.reference,
                    digest,
                    human_size(r.size),
                    r.created.clone().unwrap_or_else(|| "-".into()),
                    pinned_by.get(r.digest.as_str()).copied().unwrap_or("no")
                );
            }
        }
        ImageCommand::Rm { images } => {
            let mut failed = false;
            for i in images {
                match store.remove(&i) {
                    Ok(r) => println!("removed {} {}", r.reference, r.digest),
                    Err(e) => {
                        eprintln!("error: {e}");
                        failed = true;
                    }
                }
            }
            if failed {
                anyhow::bail!("some images were not removed");
            }
        }
        ImageCommand::Prune { dry_run } => {
            let removed = store.prune(&manifest_pins(root_dir), dry_run)?;
            let verb = if dry_run { "would remove" } else { "removed" };
            let mut total = 0;
            for r in &removed {
                total += r.size;
                println!(
                    "{verb} {} {} ({})",
                    r.references.join(", "),
                    r.digest,
                    human_size(r.size)
                );
            }
            println!("{verb} {} image(s), {}", removed.len(), human_size(total));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[derive(Debug, thiserror::Error)]
    #[error("runtime: {source}")]
    struct Embeds {
        source: std::io::Error,
    }

    #[test]
    fn error_chain_prints_each_message_once() {
        let io = || std::io::Error::other("runtime dir /run/x is in use by pid 7");
        let embedded = anyhow::Error::new(Embeds { source: io() });
        assert_eq!(
            error_chain(&embedded),
            "runtime: runtime dir /run/x is in use by pid 7"
        );
        let context = anyhow::Error::new(io()).context("starting the daemon");
        assert_eq!(
            error_chain(&context),
            "starting the daemon: runtime dir /run/x is in use by pid 7"
        );
    }
}
