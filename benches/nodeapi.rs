//! Node API benchmark: what the kubelet's ports cost a node with 20 pods that Prometheus
//! scrapes — scrape latency of each metrics endpoint and of the Summary API, the daemon's CPU
//! with the four metrics endpoints scraped every 15 s against the same daemon not scraped,
//! and the memory the server adds.
//!
//! Run as root, from the repository:
//!
//! ```text
//! cargo bench --bench nodeapi
//! ```
//!
//! `PODVISOR_BENCH_WINDOW=N` sets each CPU window in seconds (default 120),
//! `PODVISOR_BENCH_RUNS=N` the back-to-back requests per endpoint for the latency rows
//! (default 50).
//!
//! In a private environment (temp dir, cgroup parent `podvisor-bench-<pid>`), with a busybox
//! image imported offline:
//!
//! 1. **Without the server.** `podvisor run` with `enableServer: false` and the healthz port
//!    off, 20 pods (`sleep 3600`, no probes). Once all run and 20 s passed, the daemon's CPU
//!    (utime + stime from /proc/<pid>/stat) over the window, then its memory (RSS, PSS, USS
//!    from /proc/<pid>/smaps_rollup). The daemon is stopped (SIGTERM); the pods keep running.
//! 2. **With the server.** The same daemon with the secure port on (a token file, the
//!    self-signed certificate); it re-adopts the 20 pods. After 20 s: over the same window,
//!    every 15 s `/metrics`, `/metrics/cadvisor`, `/metrics/resource` and `/metrics/probes`
//!    are fetched with curl (TLS, bearer token, a new connection each, as Prometheus does
//!    when the kubelet closes them), and the daemon's CPU is measured; then its memory; then
//!    `RUNS` requests to each endpoint and to `/stats/summary` back to back, timed by curl
//!    (`time_total`: connect, TLS handshake, request, whole answer).
//! 3. **Teardown**: manifests removed, pods stopped by the daemon, the daemon stopped, nothing
//!    left (mounts, cgroups, processes).
//!
//! CPU is in % of one core; the ratio of the two windows is printed too. Only meaningful on an
//! otherwise idle machine: the load average is printed before and after.

mod common;

use std::fs;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use common::{cleanup, import_busybox, load_average, percentile, Env, TIMEOUT};
use podvisor::status::PodView;

const PODS: usize = 20;
const SCRAPE_EVERY: Duration = Duration::from_secs(15);
const SETTLE: Duration = Duration::from_secs(20);
const NODE: &str = "benchnode";
const TOKEN: &str = "bench-token";
const ENDPOINTS: [&str; 4] = [
    "/metrics",
    "/metrics/cadvisor",
    "/metrics/resource",
    "/metrics/probes",
];
/// The target in docs/benchmarks.md: the daemon's idle CPU stays under this with the scrapes.
const TARGET_CPU_PCT: f64 = 0.2;

fn main() {
    let code = match bench() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("node API bench failed: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn manifest(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - name: main\n    image: busybox:1.35\n    imagePullPolicy: Never\n    command: [sleep, \"3600\"]\n"
    )
}

fn bench() -> Result<()> {
    ensure!(
        nix::unistd::geteuid().is_root(),
        "the node API bench creates real containers and must run as root"
    );
    let window = Duration::from_secs(common::env_count("WINDOW", 120)? as u64);
    let runs = common::env_count("RUNS", 50)?;
    let env = Env::new()?;
    println!(
        "load average before: {} ({} CPUs)",
        load_average(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "podvisor node API bench: {PODS} pods, CPU windows of {}s, {runs} requests per \
         endpoint, temp dir {}, cgroup parent {}",
        window.as_secs(),
        env.dir.path().display(),
        env.cgroup_parent
    );
    // SAFETY: prctl with integer arguments (monitors of a killed daemon come to us).
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let measured = measure(&env, window, runs);
    let clean = cleanup(&env);
    println!("load average after: {}", load_average());
    measured?;
    clean
}

fn measure(env: &Env, window: Duration, runs: usize) -> Result<()> {
    drop(import_busybox(env)?);
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests)?;
    for i in 0..PODS {
        fs::write(
            manifests.join(format!("p{i}.yaml")),
            manifest(&format!("p{i}")),
        )?;
    }
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?.port()
    };
    let off = env.dir.path().join("off.yaml");
    fs::write(
        &off,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nenableServer: false\nhealthzPort: 0\n",
    )?;
    let on = env.dir.path().join("on.yaml");
    fs::write(
        &on,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\naddress: 127.0.0.1\nport: {port}\nhealthzPort: 0\n"
        ),
    )?;
    let tokens = env.dir.path().join("tokens.csv");
    fs::write(&tokens, format!("{TOKEN},prometheus,1,monitoring\n"))?;

    // 1. Without the server.
    let mut d = Daemon::start(env, &manifests, &off, None)?;
    d.wait_running()?;
    std::thread::sleep(SETTLE);
    let cpu_off = d.cpu_over(window, || Ok(()))?;
    let mem_off = ProcMemory::of(d.pid)?;
    d.stop()?;

    // 2. With the server.
    let mut d = Daemon::start(env, &manifests, &on, Some(&tokens))?;
    d.wait_running()?;
    let ca = env.root.join("pki/kubelet.crt");
    let base = format!("https://127.0.0.1:{port}");
    // The first scrape of each endpoint (warm-up), and a check they answer.
    for e in ENDPOINTS {
        scrape(&base, e, &ca)?;
    }
    std::thread::sleep(SETTLE);
    let mut next = Instant::now();
    let mut scraped = 0;
    let cpu_on = d.cpu_over(window, || {
        if Instant::now() >= next {
            for e in ENDPOINTS {
                scrape(&base, e, &ca)?;
                scraped += 1;
            }
            next += SCRAPE_EVERY;
        }
        Ok(())
    })?;
    let mem_on = ProcMemory::of(d.pid)?;
    let mut latency = Vec::new();
    for e in ENDPOINTS.iter().chain(["/stats/summary"].iter()) {
        let mut ms = Vec::new();
        let mut bytes = 0;
        for _ in 0..runs {
            let (t, b) = scrape(&base, e, &ca)?;
            ms.push(t);
            bytes = b;
        }
        latency.push((*e, ms, bytes));
    }

    // 3. Teardown.
    for i in 0..PODS {
        fs::remove_file(manifests.join(format!("p{i}.yaml")))?;
    }
    let deadline = Instant::now() + TIMEOUT * 4;
    while !d.pods()?.is_empty() {
        ensure!(Instant::now() < deadline, "pods not gone; {}", d.log_tail());
        std::thread::sleep(Duration::from_millis(100));
    }
    d.stop()?;

    println!();
    println!("| measure | value |");
    println!("|---|---|");
    for (e, ms, bytes) in &latency {
        println!(
            "| GET {e} ({bytes} bytes), curl time_total | p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms |",
            percentile(ms, 0.5),
            percentile(ms, 0.9),
            percentile(ms, 1.0)
        );
    }
    println!(
        "| daemon CPU, {PODS} pods, server off | {:.3} % of one core |",
        cpu_off
    );
    println!(
        "| daemon CPU, {PODS} pods, 4 endpoints scraped every 15 s ({scraped} requests) | {:.3} % of one core ({:.2}x server off) [{}] |",
        cpu_on,
        if cpu_off > 0.0 { cpu_on / cpu_off } else { f64::NAN },
        if cpu_on <= TARGET_CPU_PCT { "<= 0.2 %: met" } else { "<= 0.2 %: MISSED" }
    );
    println!(
        "| daemon memory, server off | RSS {} kB, PSS {} kB, USS {} kB, anonymous {} kB, {} threads |",
        mem_off.rss, mem_off.pss, mem_off.uss, mem_off.anon, mem_off.threads
    );
    println!(
        "| daemon memory, server on, after the scrapes | RSS {} kB, PSS {} kB, USS {} kB, anonymous {} kB, {} threads |",
        mem_on.rss, mem_on.pss, mem_on.uss, mem_on.anon, mem_on.threads
    );
    println!(
        "| memory the server adds | RSS {:+} kB, USS {:+} kB, anonymous {:+} kB |",
        mem_on.rss as i64 - mem_off.rss as i64,
        mem_on.uss as i64 - mem_off.uss as i64,
        mem_on.anon as i64 - mem_off.anon as i64
    );
    Ok(())
}

/// One GET with curl: (time_total in ms, body bytes).
fn scrape(base: &str, path: &str, ca: &Path) -> Result<(f64, usize)> {
    let out = Command::new("curl")
        .args([
            "-sS",
            "--max-time",
            "20",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{time_total} %{size_download}",
            "--cacert",
        ])
        .arg(ca)
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .arg(format!("{base}{path}"))
        .output()
        .context("curl")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut f = text.split_whitespace();
    let (code, t, size) = (f.next(), f.next(), f.next());
    ensure!(
        code == Some("200"),
        "GET {path}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: f64 = t
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| anyhow!("curl: {text}"))?;
    let size: usize = size.and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok((t * 1000.0, size))
}

/// Memory of one process, kB.
#[derive(Clone, Copy, Default)]
struct ProcMemory {
    rss: u64,
    pss: u64,
    uss: u64,
    anon: u64,
    threads: u64,
}

impl ProcMemory {
    fn of(pid: i32) -> Result<ProcMemory> {
        let status = fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))?;
        let field = |text: &str, key: &str| -> Result<u64> {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
                .ok_or_else(|| anyhow!("no {key} for process {pid}"))
        };
        Ok(ProcMemory {
            rss: field(&status, "VmRSS")?,
            pss: field(&rollup, "Pss")?,
            uss: field(&rollup, "Private_Clean")? + field(&rollup, "Private_Dirty")?,
            anon: field(&rollup, "Anonymous")?,
            threads: field(&status, "Threads")?,
        })
    }
}

/// utime + stime of `pid`, in clock ticks.
fn cpu_ticks(pid: i32) -> Result<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| anyhow!("bad /proc/{pid}/stat"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("bad /proc/{pid}/stat"))
    };
    Ok(num(11)? + num(12)?)
}

/// The `podvisor run` child.
struct Daemon {
    child: Option<Child>,
    pid: i32,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn start(env: &Env, manifests: &Path, config: &Path, tokens: Option<&Path>) -> Result<Daemon> {
        let socket = env.dir.path().join("api.sock");
        let log = env.dir.path().join("daemon.log");
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut cmd = Command::new(&env.bin);
        cmd.arg("--root-dir")
            .arg(&env.root)
            .arg("--runtime-dir")
            .arg(&env.run)
            .arg("--log-dir")
            .arg(&env.logs)
            .arg("--cgroup-parent")
            .arg(&env.cgroup_parent)
            .arg("run")
            .arg("--config")
            .arg(config)
            .arg("--pod-manifest-path")
            .arg(manifests)
            .arg("--api-socket")
            .arg(&socket)
            .arg("--hostname-override")
            .arg(NODE)
            .arg("--eviction-hard=memory.available<100Mi");
        if let Some(t) = tokens {
            cmd.arg("--token-auth-file").arg(t);
        }
        let child = cmd
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("spawn {}", env.bin.display()))?;
        let d = Daemon {
            pid: child.id() as i32,
            child: Some(child),
            socket,
            log,
        };
        let deadline = Instant::now() + TIMEOUT;
        while d.pods().is_err() {
            ensure!(
                Instant::now() < deadline,
                "daemon API not up; {}",
                d.log_tail()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(d)
    }

    fn pods(&self) -> Result<Vec<PodView>> {
        podvisor::api::client::get_json::<Vec<PodView>>(&self.socket, "/pods")
            .map_err(|e| anyhow!("GET /pods: {e}"))
    }

    fn wait_running(&self) -> Result<()> {
        let deadline = Instant::now() + TIMEOUT * 4;
        loop {
            let running = self
                .pods()?
                .iter()
                .filter(|v| {
                    v.pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .count();
            if running == PODS {
                return Ok(());
            }
            ensure!(
                Instant::now() < deadline,
                "{running} of {PODS} pods running; {}",
                self.log_tail()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The daemon's CPU (% of one core) over `window`, calling `tick` every 100 ms.
    fn cpu_over(&self, window: Duration, mut tick: impl FnMut() -> Result<()>) -> Result<f64> {
        // SAFETY: sysconf with a valid name.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let t0 = Instant::now();
        let c0 = cpu_ticks(self.pid)?;
        while t0.elapsed() < window {
            tick()?;
            std::thread::sleep(Duration::from_millis(100));
        }
        let ticks = cpu_ticks(self.pid)? - c0;
        Ok(ticks as f64 / hz / t0.elapsed().as_secs_f64() * 100.0)
    }

    /// SIGTERM; the daemon must exit 0 (its containers keep running).
    fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            bail!("daemon already stopped");
        };
        kill(Pid::from_raw(self.pid), Signal::SIGTERM)?;
        let status = child.wait()?;
        ensure!(
            status.success(),
            "daemon exit {status}; {}",
            self.log_tail()
        );
        Ok(())
    }

    fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = fs::File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(4000)));
            let _ = f.read_to_string(&mut text);
        }
        format!("daemon log ({}) ends with:\n{text}", self.log.display())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
