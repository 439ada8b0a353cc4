//! cli::image: `podvisor image import|pull|ls|rm|prune` on the local image store, with the
//! pull's progress (one updating line on a terminal, a line per layer otherwise).

use std::path::{Path, PathBuf};

use clap::Subcommand;

use crate::images::{
    ImageError, ImageStore, ImportOptions, PinnedImages, PullProgress, RegistryConfig,
    RegistryConfigError,
};

/// Errors of `podvisor image`.
#[derive(Debug, thiserror::Error)]
pub enum ImageCommandError {
    #[error(transparent)]
    Store(#[from] ImageError),
    #[error("importing {}", file.display())]
    Import {
        file: PathBuf,
        // Boxed: the image errors are large, and this one is rare.
        source: Box<ImageError>,
    },
    #[error(transparent)]
    Registry(#[from] RegistryConfigError),
    #[error("some images were not removed")]
    NotAllRemoved,
}

#[derive(Subcommand)]
pub enum ImageCommand {
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

pub fn human_size(n: u64) -> String {
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
fn manifest_pins(root_dir: &Path) -> PinnedImages {
    let pods = crate::sync::store::DesiredStore::new(root_dir.join("static-pods")).load_all();
    PinnedImages::from_pods(pods.iter().map(|p| &p.pod))
}

/// `podvisor image ...` on the store under `root_dir`.
pub fn image(root_dir: &Path, command: ImageCommand) -> Result<(), ImageCommandError> {
    let store = ImageStore::open(&root_dir.join("images"))?;
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
            let records =
                store
                    .import_archive(&file, &opts)
                    .map_err(|source| ImageCommandError::Import {
                        file: file.clone(),
                        source: Box::new(source),
                    })?;
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
                return Err(ImageCommandError::NotAllRemoved);
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
