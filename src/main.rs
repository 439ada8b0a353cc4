//! The `podvisor` binary: command-line parsing and the error edge (anyhow lives only here).
//!
//! User commands: `play`, `image import|ls|rm`. Hidden commands re-executed by podvisor
//! itself: `shim run` (the per-container monitor), `shim cleanup`, `shim sandbox`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};

use podvisor::images::{ImageStore, ImportOptions};
use podvisor::play::{play, PlayOptions};
use podvisor::runtime::linux::RuntimeConfig;
use podvisor::runtime::shim;

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
    /// Directory for podvisor's state: images, pod sandboxes, containers.
    #[arg(long, global = true, default_value = "/var/lib/podvisor")]
    root_dir: PathBuf,
    /// Root of the container log tree (CRI format, like /var/log/pods of the kubelet).
    #[arg(long, global = true, default_value = "/var/log/pods")]
    log_dir: PathBuf,
    /// Top-level cgroup under which pods are placed.
    #[arg(long, global = true, default_value = "podvisor")]
    cgroup_parent: String,
}

#[derive(Subcommand)]
enum Command {
    /// Run one Pod manifest in the foreground; Ctrl-C stops it gracefully.
    Play {
        /// The Pod manifest (YAML or JSON).
        file: PathBuf,
        /// Keep the pod's CRI log files after it stops.
        #[arg(long)]
        keep_logs: bool,
    },
    /// Manage the local image store.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
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
}

#[derive(Subcommand)]
enum ShimCommand {
    /// Monitor one container (fd 3: start report pipe, fd 4: locked lock file).
    Run { dir: PathBuf },
    /// Finish the cleanup of a container whose monitor died.
    Cleanup { dir: PathBuf },
    /// Create and pin a pod's namespaces.
    Sandbox {
        dir: PathBuf,
        #[arg(long)]
        hostname: String,
        #[arg(long)]
        host_network: bool,
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
            } => shim::sandbox(dir, hostname, *host_network),
        };
        return ExitCode::from(code.clamp(0, 255) as u8);
    }
    init_logging("info");
    match run(cli) {
        Ok(code) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}

fn runtime_config(g: &Global) -> anyhow::Result<RuntimeConfig> {
    let mut cfg = RuntimeConfig::new(g.root_dir.clone(), g.log_dir.clone())
        .context("cannot locate the podvisor binary")?;
    cfg.cgroup_parent = g.cgroup_parent.clone();
    Ok(cfg)
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    let g = cli.global;
    match cli.command {
        Command::Play { file, keep_logs } => {
            let opts = PlayOptions {
                manifest: file,
                runtime: runtime_config(&g)?,
                keep_logs,
            };
            Ok(play(&opts)?)
        }
        Command::Image { command } => {
            let store = ImageStore::open(&g.root_dir.join("images"))?;
            image_command(&store, command)?;
            Ok(0)
        }
        // Handled in main before logging is set up.
        Command::Shim { .. } => Ok(2),
    }
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

fn image_command(store: &ImageStore, command: ImageCommand) -> anyhow::Result<()> {
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
        ImageCommand::Ls { no_trunc } => {
            let mut list = store.list()?;
            list.sort_by(|a, b| a.reference.cmp(&b.reference));
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
                    if r.pinned { "yes" } else { "no" }
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
    }
    Ok(())
}
