//! Container and log GC reclaim throughput: how many bytes and files one pass of the daemon's
//! container GC (`gc::worker::collect`, through the real `LinuxRuntime`) frees per second,
//! against `std::fs::remove_dir_all` of a tree with the same files and sizes (the baseline:
//! what deleting that much costs on this filesystem at all).
//!
//! Run as root, from the repository:
//!
//! ```text
//! cargo bench --bench gc                 # release profile
//! cargo bench --bench gc --profile dev   # what docs/history/benchmarks.md used (see there)
//! ```
//!
//! `PODVISOR_BENCH_RUNS=N` sets the runs (default 5); `PODVISOR_BENCH_DIR` the directory the
//! state goes in (default the temp dir; the filesystem is what is measured). Each run builds,
//! in a fresh temp directory, a root dir and a log dir holding:
//!
//! - 40 running pods (the request's active pods) with one container each and 6 dead
//!   instances of it: records (`meta.json`, `exit.json`, `cleaned`, as a monitor leaves
//!   them) and a 256 KiB CRI log per instance; GC keeps the newest dead instance, so it
//!   removes 5 containers per pod and their logs (200 containers, 50 MiB);
//! - 10 pod log directories of pods no source defines (2 containers x 3 files of 256 KiB),
//!   removed whole (60 files, 15 MiB);
//!
//! then times one `collect` with the kubelet's default policy, checks what it freed, and
//! times `remove_dir_all` of a tree with the same log files and as many record directories
//! (three small files each). Medians over the runs. A fourth
//! figure: gzip compression of rotated files (8 x 4 MiB of log-like text), in input MB/s.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use podvisor::gc::worker::{collect, ErrorLog, GcSettings};
use podvisor::gc::{ContainerGcPolicy, GcRequest};
use podvisor::images::ImageStore;
use podvisor::runtime::daemon::{LinuxRuntime, RuntimeConfig};
use podvisor::runtime::{ContainerKind, ContainerMeta, ExitRecord};

const PODS: usize = 40;
const DEAD_PER_POD: u32 = 6;
const GONE_PODS: usize = 10;
const LOG_BYTES: usize = 256 * 1024;

fn log_content(len: usize, seed: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 128);
    let mut i = seed;
    while out.len() < len {
        out.extend_from_slice(
            format!(
                "2026-01-01T00:00:{:02}.{:09}Z stdout F request {i} served in {} ms path=/api/v1/items/{}\n",
                i % 60,
                i % 1_000_000_000,
                i % 997,
                i % 4093
            )
            .as_bytes(),
        );
        i += 1;
    }
    out.truncate(len);
    out
}

struct Scenario {
    _dir: tempfile::TempDir,
    root: PathBuf,
    run: PathBuf,
    logs: PathBuf,
    active: Vec<String>,
    files: u64,
    bytes: u64,
}

fn build(base: &Path, boot_id: &str) -> Scenario {
    let dir = tempfile::Builder::new()
        .prefix("podvisor-bench-gc-")
        .tempdir_in(base)
        .expect("tempdir");
    let root = dir.path().join("root");
    let run = dir.path().join("run");
    let logs = dir.path().join("logs");
    fs::create_dir_all(root.join("containers")).expect("mkdir");
    let data = log_content(LOG_BYTES, 7);
    let (mut files, mut bytes) = (0u64, 0u64);
    let mut active = Vec::new();
    for p in 0..PODS {
        let uid = format!("{p:08x}-0000-4000-8000-000000000000");
        let pod_logs = logs.join(format!("default_app{p}-node_{uid}")).join("main");
        fs::create_dir_all(&pod_logs).expect("mkdir");
        for n in 0..DEAD_PER_POD {
            let id = format!("{}-main-{n}-bench", &uid[..8]);
            let log_path = pod_logs.join(format!("{n}.log"));
            fs::write(&log_path, &data).expect("log");
            let rec = root.join("containers").join(&id);
            fs::create_dir_all(&rec).expect("mkdir");
            let created = format!("2026-01-01T00:{:02}:{:02}Z", n, p % 60);
            let meta = ContainerMeta {
                id: id.clone(),
                pod_uid: uid.clone(),
                pod_namespace: "default".into(),
                pod_name: format!("app{p}-node"),
                container_name: "main".into(),
                kind: ContainerKind::App,
                restart_count: n,
                image: "busybox:1.35".into(),
                image_digest: format!("sha256:{}", "0".repeat(64)),
                log_path: log_path.clone(),
                stop_signal: 15,
                created_at: created.clone(),
                boot_id: boot_id.to_string(),
            };
            let exit = ExitRecord {
                exit_code: 1,
                signal: None,
                oom_killed: false,
                started_at: created.clone(),
                finished_at: created,
                reason: "Error".into(),
                message: None,
            };
            fs::write(
                rec.join("meta.json"),
                serde_json::to_vec(&meta).expect("json"),
            )
            .expect("meta");
            fs::write(
                rec.join("exit.json"),
                serde_json::to_vec(&exit).expect("json"),
            )
            .expect("exit");
            fs::write(rec.join("cleaned"), b"").expect("cleaned");
            if n + 1 < DEAD_PER_POD {
                files += 1;
                bytes += LOG_BYTES as u64;
            }
        }
        active.push(uid);
    }
    for g in 0..GONE_PODS {
        let uid = format!("{g:08x}-0000-4000-8000-0000000000ff");
        for c in ["main", "side"] {
            let d = logs.join(format!("default_old{g}-node_{uid}")).join(c);
            fs::create_dir_all(&d).expect("mkdir");
            for n in 0..3 {
                fs::write(d.join(format!("{n}.log")), &data).expect("log");
                files += 1;
                bytes += LOG_BYTES as u64;
            }
        }
    }
    Scenario {
        _dir: dir,
        root,
        run,
        logs,
        active,
        files,
        bytes,
    }
}

/// A tree with `files` files of `LOG_BYTES` each, in directories of 6, and `records`
/// directories holding a container's three small record files.
fn baseline_tree(base: &Path, files: u64, records: usize) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("podvisor-bench-gc-rm-")
        .tempdir_in(base)
        .expect("tempdir");
    let data = log_content(LOG_BYTES, 7);
    for i in 0..files {
        let d = dir.path().join(format!("d{}", i / 6));
        fs::create_dir_all(&d).expect("mkdir");
        fs::write(d.join(format!("{i}.log")), &data).expect("write");
    }
    for r in 0..records {
        let d = dir.path().join(format!("r{r}"));
        fs::create_dir_all(&d).expect("mkdir");
        fs::write(d.join("meta.json"), [b'x'; 400]).expect("write");
        fs::write(d.join("exit.json"), [b'x'; 200]).expect("write");
        fs::write(d.join("cleaned"), b"").expect("write");
    }
    dir
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn sync() {
    let _ = std::process::Command::new("sync").status();
}

fn main() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("gc bench: needs root (a LinuxRuntime over a private root dir); skipped");
        return;
    }
    let runs: usize = std::env::var("PODVISOR_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let base = std::env::var_os("PODVISOR_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let boot_id =
        podvisor::runtime::rundir::read_boot_id(Path::new(podvisor::runtime::rundir::BOOT_ID_FILE))
            .expect("boot id");
    let load = || fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "gc bench: {runs} runs in {}; load {}",
        base.display(),
        load().trim()
    );
    let (mut gc_bps, mut gc_fps, mut gc_cps, mut rm_bps, mut rm_fps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in 0..runs {
        let s = build(&base, &boot_id);
        let mut cfg =
            RuntimeConfig::new(s.root.clone(), s.run.clone(), s.logs.clone()).expect("config");
        cfg.cgroup_parent = format!("podvisor-bench-gc-{}", std::process::id());
        // The runtime starts its spawner from this binary at once: it must be podvisor's, not
        // the bench's (which would run the bench again, and again).
        cfg.shim_binary = PathBuf::from(env!("CARGO_BIN_EXE_podvisor"));
        let images = Arc::new(ImageStore::open(&s.root.join("images")).expect("images"));
        let (tx, _rx) = std::sync::mpsc::channel();
        let runtime = LinuxRuntime::new(cfg, images, tx).expect("runtime");
        let settings = GcSettings {
            policy: ContainerGcPolicy::default(),
            log_root: s.logs.clone(),
            log_max_files: 5,
        };
        let req = GcRequest {
            taken_at: Some(SystemTime::now() + Duration::from_secs(1)),
            active: s.active.iter().cloned().collect(),
            removing: Default::default(),
            sources_ready: true,
        };
        sync();
        let t = Instant::now();
        let report = collect(
            &runtime,
            &settings,
            &req,
            SystemTime::now(),
            &mut ErrorLog::default(),
        );
        let took = t.elapsed().as_secs_f64();
        assert_eq!(
            report.containers_removed,
            PODS * (DEAD_PER_POD as usize - 1),
            "{report:?}"
        );
        assert_eq!(report.bytes_freed, s.bytes, "{report:?}");
        assert_eq!(report.files_removed, s.files, "{report:?}");
        drop(runtime);
        drop(s);
        let tree = baseline_tree(&base, report.files_removed, report.containers_removed);
        sync();
        let t = Instant::now();
        fs::remove_dir_all(tree.path()).expect("rm");
        let rm_took = t.elapsed().as_secs_f64();
        let mb = report.bytes_freed as f64 / 1e6;
        println!(
            "run {run}: GC freed {mb:.1} MB in {} files ({} containers) in {:.1} ms; \
             remove_dir_all of the same files {:.1} ms",
            report.files_removed,
            report.containers_removed,
            took * 1e3,
            rm_took * 1e3
        );
        gc_bps.push(mb / took);
        gc_fps.push(report.files_removed as f64 / took);
        gc_cps.push(report.containers_removed as f64 / took);
        rm_bps.push(mb / rm_took);
        rm_fps.push(report.files_removed as f64 / rm_took);
    }
    // Compression of rotated files.
    let dir = tempfile::Builder::new()
        .prefix("podvisor-bench-gc-gz-")
        .tempdir_in(&base)
        .expect("tempdir");
    let data = log_content(4 * 1024 * 1024, 11);
    let mut gz = Vec::new();
    let mut ratio = 0.0;
    for i in 0..8 {
        let p = dir.path().join(format!("0.log.20260101-0000{i:02}"));
        fs::write(&p, &data).expect("write");
        let t = Instant::now();
        let (before, after) = podvisor::gc::logs::compress(&p).expect("compress");
        gz.push(before as f64 / 1e6 / t.elapsed().as_secs_f64());
        ratio = after as f64 / before as f64;
    }
    let (gb, rb) = (median(&mut gc_bps), median(&mut rm_bps));
    let (gf, rf) = (median(&mut gc_fps), median(&mut rm_fps));
    println!("\nmedians over {runs} runs (load {})", load().trim());
    println!(
        "container+log GC: {gb:.0} MB/s, {gf:.0} files/s, {:.0} containers/s",
        median(&mut gc_cps)
    );
    println!("remove_dir_all baseline: {rb:.0} MB/s, {rf:.0} files/s");
    println!("GC / baseline: {:.2}x (bytes/s)", gb / rb);
    println!(
        "rotated-log compression: {:.1} MB/s of input, compressed to {:.1} %",
        median(&mut gz),
        ratio * 100.0
    );
}
