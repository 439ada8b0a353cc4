//! Pull benchmark: pulling an image from a registry on loopback with podvisor vs `skopeo copy`
//! of the same image, and unpacking a layer with podvisor's unpacker vs `tar -x`.
//!
//! Run as root, from the repository:
//!
//! ```text
//! cargo bench --bench pull
//! ```
//!
//! Needs Debian's `docker-registry`, `skopeo` and `tar`. `PODVISOR_BENCH_RUNS=N` changes the
//! number of measured runs per row (default 7; 1 warm-up run per row is not counted).
//!
//! The image has two layers: the offline busybox layer (gzip) and a realistic tree, the
//! Python standard library of this machine (`/usr/lib/python3.*`, ~1500 files), as a gzip
//! layer. A `docker-registry` is started on a free loopback port with a temporary storage
//! directory and the image is pushed with `skopeo copy --preserve-digests`. Then:
//!
//! 1. **Pull.** Each run starts from an empty destination. `skopeo copy
//!    docker://127.0.0.1:PORT/bench/img:v1 oci:DIR:v1` (downloads and verifies the blobs into
//!    an OCI layout, no unpacking) vs `podvisor --root-dir DIR image pull` (the release binary:
//!    downloads and verifies the blobs, unpacks every layer with an fsync of the result, writes
//!    the record). Both are processes spawned by the bench and timed to exit. The same pull
//!    is also run in-process with `ImageStore::pull` and split at its `Committing` progress
//!    event: download + verify (the part skopeo does) and unpack + syncfs + record.
//! 2. **Unpack.** The big layer, uncompressed and gzip: `podvisor::images::unpack_layer_file`
//!    (decompress, hash the tar stream, create the files; no fsync) into an empty directory vs
//!    `tar -xf` / `tar -xzf` of the same blob into an empty directory, on the same file
//!    system, runs interleaved. Reported as speed ratios tar time / podvisor time (target
//!    >= 0.9).
//!
//! Everything it created (registry process, temp dirs) is removed at the end.

mod common;

#[path = "../tests/common/registry.rs"]
mod registry;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use podvisor::images::{unpack_layer_file, Digest};

/// `tests/common/registry.rs` uses `super::image`.
mod image {
    pub fn sha256_hex(data: &[u8]) -> String {
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(data))
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    common::percentile(v, 0.5)
}

fn time_runs(runs: usize, mut f: impl FnMut(usize) -> Result<Duration>) -> Result<Vec<f64>> {
    f(usize::MAX)?; // warm-up
    let mut out = Vec::new();
    for i in 0..runs {
        out.push(f(i)?.as_secs_f64() * 1000.0);
    }
    Ok(out)
}

fn python_tree() -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = fs::read_dir("/usr/lib")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python3.") && p.is_dir())
        })
        .collect();
    dirs.sort();
    dirs.pop()
        .context("no /usr/lib/python3.* to build the bench layer from")
}

fn run(cmd: &mut Command) -> Result<()> {
    let out = cmd.output().with_context(|| format!("{cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn main() -> Result<()> {
    ensure!(nix::unistd::geteuid().is_root(), "run as root");
    let runs = common::env_count("PODVISOR_BENCH_RUNS", 7)?;
    let podvisor = PathBuf::from(env!("CARGO_BIN_EXE_podvisor"));
    let work = tempfile::Builder::new()
        .prefix("podvisor-bench-pull-")
        .tempdir_in("/var/tmp")?;
    let w = work.path();
    println!("load average before: {}", common::load_average());

    // The big layer: a tar of the Python standard library (as an image would hold it).
    let tree = python_tree()?;
    let rel = tree.strip_prefix("/")?;
    let plain = w.join("layer.tar");
    run(Command::new("tar")
        .arg("-C")
        .arg("/")
        .arg("--numeric-owner")
        .arg("-cf")
        .arg(&plain)
        .arg(rel))?;
    let plain_bytes = fs::read(&plain)?;
    let diff_id = format!("sha256:{}", image::sha256_hex(&plain_bytes));
    let gz = w.join("layer.tar.gz");
    {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&plain_bytes)?;
        fs::write(&gz, e.finish()?)?;
    }
    let gz_bytes = fs::read(&gz)?;
    println!(
        "layer: {} ({} files): {:.1} MB tar, {:.1} MB gzip",
        tree.display(),
        walk_count(&tree),
        plain_bytes.len() as f64 / 1e6,
        gz_bytes.len() as f64 / 1e6
    );

    // The image: busybox layer + the big layer, pushed to a loopback registry.
    let bb = registry::layer(
        &[("bin/busybox", fs::read("/bin/busybox")?)],
        registry::Comp::Gzip,
    );
    let big = registry::Layer {
        blob: gz_bytes.clone(),
        diff_id: diff_id.clone(),
        media_type: "application/vnd.oci.image.layer.v1.tar+gzip",
    };
    let img = registry::image(&host_arch(), vec![bb, big]);
    let reg = registry::Registry::start(false);
    let layout = w.join("layout");
    registry::write_layout(&layout, "v1", std::slice::from_ref(&img));
    reg.push(&layout, "v1", "bench/img:v1", false);
    let yaml = registry::registries_yaml(w, "bench.test", &reg.addr, false);
    let no_creds = w.join("no-creds.json");
    fs::write(&no_creds, "{}")?;

    // 1. Pull.
    let skopeo = time_runs(runs, |i| {
        let dest = w.join(format!("skopeo-{i}"));
        let _ = fs::remove_dir_all(&dest);
        let t = Instant::now();
        run(Command::new("skopeo")
            .args(["copy", "--quiet", "--src-tls-verify=false"])
            .arg(format!("docker://{}/bench/img:v1", reg.addr))
            .arg(format!("oci:{}:v1", dest.display())))?;
        let d = t.elapsed();
        fs::remove_dir_all(&dest)?;
        Ok(d)
    })?;
    let pulls = time_runs(runs, |i| {
        let root = w.join(format!("root-{i}"));
        let _ = fs::remove_dir_all(&root);
        let t = Instant::now();
        run(Command::new(&podvisor)
            .arg("--root-dir")
            .arg(&root)
            .args(["image", "pull", "bench.test/bench/img:v1"])
            .arg("--registry-config")
            .arg(&yaml)
            .arg("--docker-config")
            .arg(&no_creds))?;
        let d = t.elapsed();
        fs::remove_dir_all(&root)?;
        Ok(d)
    })?;

    // The same pull in-process, split at the Committing event: download + verify (what
    // skopeo does) vs unpack + fsync + record.
    let cfg = podvisor::images::RegistryConfig::load(Some(&yaml), Some(&no_creds))?;
    let mut downloads = Vec::new();
    let mut commits = Vec::new();
    for i in 0..=runs {
        let root = w.join(format!("inproc-{i}"));
        let store = podvisor::images::ImageStore::open(&root)?;
        let t = Instant::now();
        let mut committing = None;
        store.pull("bench.test/bench/img:v1", &cfg, &mut |p| {
            if matches!(p, podvisor::images::PullProgress::Committing) {
                committing = Some(t.elapsed());
            }
        })?;
        let total = t.elapsed();
        let dl = committing.context("no Committing event")?;
        if i > 0 {
            downloads.push(dl.as_secs_f64() * 1000.0);
            commits.push((total - dl).as_secs_f64() * 1000.0);
        }
        drop(store);
        fs::remove_dir_all(&root)?;
    }

    // 2. Unpack.
    let blob_digest = |b: &[u8]| Digest::parse(&format!("sha256:{}", image::sha256_hex(b)));
    let plain_digest = blob_digest(&plain_bytes)?;
    let gz_digest = blob_digest(&gz_bytes)?;
    // Interleaved (podvisor, tar, podvisor, tar ...) so load changes on this shared machine
    // hit both sides alike.
    let unpack_row =
        |blob: &Path, digest: &Digest, tar_flag: &str| -> Result<(Vec<f64>, Vec<f64>)> {
            let (mut ours, mut tar) = (Vec::new(), Vec::new());
            for i in 0..=runs {
                let dest = w.join(format!("ours-{i}"));
                fs::create_dir(&dest)?;
                let t = Instant::now();
                let got = unpack_layer_file(blob, digest, &dest)?;
                let d_ours = t.elapsed();
                ensure!(got.to_string() == diff_id, "diff_id mismatch");
                fs::remove_dir_all(&dest)?;

                let dest = w.join(format!("tar-{i}"));
                fs::create_dir(&dest)?;
                let t = Instant::now();
                run(Command::new("tar")
                    .arg("-C")
                    .arg(&dest)
                    .arg("--numeric-owner")
                    .arg(tar_flag)
                    .arg(blob))?;
                let d_tar = t.elapsed();
                fs::remove_dir_all(&dest)?;
                if i > 0 {
                    ours.push(d_ours.as_secs_f64() * 1000.0);
                    tar.push(d_tar.as_secs_f64() * 1000.0);
                }
            }
            Ok((ours, tar))
        };
    let (mut ours_plain, mut tar_plain) = unpack_row(&plain, &plain_digest, "-xf")?;
    let (mut ours_gz, mut tar_gz) = unpack_row(&gz, &gz_digest, "-xzf")?;

    let (mut skopeo, mut pulls) = (skopeo, pulls);
    let (s, p) = (median(&mut skopeo), median(&mut pulls));
    let (dl, cm) = (median(&mut downloads), median(&mut commits));
    let (op, tp) = (median(&mut ours_plain), median(&mut tar_plain));
    let (og, tg) = (median(&mut ours_gz), median(&mut tar_gz));
    println!();
    println!("| what | median | ratio |");
    println!("|---|---|---|");
    println!("| skopeo copy docker:// -> oci: (baseline) | {s:.1} ms | — |");
    println!(
        "| podvisor image pull (download, verify, unpack, record) | {p:.1} ms | {:.2}x skopeo's time (target <= 1) |",
        p / s
    );
    println!(
        "| of which download + verify (in-process, to the Committing event) | {dl:.1} ms | {:.2}x skopeo's time |",
        dl / s
    );
    println!("| of which unpack + syncfs + record (in-process) | {cm:.1} ms | — |");
    println!("| tar -xf of the uncompressed layer | {tp:.1} ms | — |");
    println!(
        "| podvisor unpack of the uncompressed layer | {op:.1} ms | {:.2}x tar's speed (target >= 0.9) |",
        tp / op
    );
    println!("| tar -xzf of the gzip layer | {tg:.1} ms | — |");
    println!(
        "| podvisor unpack of the gzip layer | {og:.1} ms | {:.2}x tar's speed (target >= 0.9) |",
        tg / og
    );
    println!();
    println!("load average after: {}", common::load_average());
    drop(reg);
    drop(work);
    Ok(())
}

fn walk_count(dir: &Path) -> usize {
    let mut n = 0;
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            n += 1;
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                n += walk_count(&e.path());
            }
        }
    }
    n
}

fn host_arch() -> String {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
    .to_string()
}
