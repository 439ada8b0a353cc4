//! Cost of measuring ephemeral storage (`eviction::usage`): one housekeeping pass's bounded
//! walk against a full walk of the same tree (what a `du` every pass would cost), and
//! `du -s` itself as the baseline, on trees of N files with warm caches (the state of a
//! tree measured every 10 s).
//!
//! ```text
//! cargo bench --bench ephemeral     # no root needed
//! ```
//!
//! `PODVISOR_BENCH_DIR` sets where the trees go (default the temp dir: the filesystem is
//! what is measured); `PODVISOR_BENCH_RUNS` the runs (default 5, medians).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use podvisor::eviction::usage::{Tree, UsageCache, ENTRIES_PER_PASS};

fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn build(dir: &Path, files: usize) {
    // 100 files a directory, like a package cache or a build tree.
    for i in 0..files {
        let sub = dir.join(format!("d{}", i / 100));
        if i % 100 == 0 {
            fs::create_dir_all(&sub).expect("mkdir");
        }
        fs::write(sub.join(format!("f{i}")), [b'x'; 700]).expect("write");
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("PODVISOR_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let base = std::env::var_os("PODVISOR_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    println!(
        "| files | du -s (wall) | full walk (CPU) | per entry | one pass, budget {ENTRIES_PER_PASS} (CPU) | passes per full measurement |"
    );
    println!("|---|---|---|---|---|---|");
    for files in [1_000usize, 10_000, 100_000] {
        let dir = tempfile::tempdir_in(&base).expect("tmp");
        build(dir.path(), files);
        let tree = [Tree::new(dir.path())];
        let (mut du, mut full, mut pass) = (Vec::new(), Vec::new(), Vec::new());
        let mut passes = 0;
        let mut bytes = 0;
        for _ in 0..runs {
            let t = Instant::now();
            let out = std::process::Command::new("du")
                .arg("-s")
                .arg(dir.path())
                .output()
                .expect("du");
            assert!(out.status.success());
            du.push(t.elapsed());
            let mut c = UsageCache::new(usize::MAX);
            let t = cpu_time();
            bytes = c.measure(&tree).0[0].expect("tree");
            full.push(cpu_time() - t);
            let mut c = UsageCache::new(ENTRIES_PER_PASS);
            passes = 0;
            loop {
                passes += 1;
                let t = cpu_time();
                let (_, cost) = c.measure(&tree);
                pass.push(cpu_time() - t);
                if cost.walks_completed == 1 {
                    break;
                }
            }
        }
        let f = median(full);
        println!(
            "| {files} ({} MiB) | {:.1} ms | {:.1} ms | {:.2} µs | {:.1} ms | {passes} |",
            bytes >> 20,
            median(du).as_secs_f64() * 1e3,
            f.as_secs_f64() * 1e3,
            f.as_secs_f64() * 1e6 / (files + files / 100) as f64,
            median(pass).as_secs_f64() * 1e3,
        );
    }
}
