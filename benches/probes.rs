//! Prober benchmark: what one prober thread and its pool cost with 200 probed containers.
//!
//! Run from the repository (no root, no containers needed):
//!
//! ```text
//! cargo bench --bench probes          # release profile, the number for docs/benchmarks.md
//! cargo test --release --bench probes # same thing
//! cargo test --bench probes           # debug build: a pessimistic upper bound, fast to build
//! ```
//!
//! Setup: a TCP listener and a small HTTP/1.1 server (one accept thread each, in this process)
//! on 127.0.0.1. 200 targets are handed to `podvisor::prober::scheduler::Prober` (the daemon's
//! prober: one scheduler thread with a timer heap, 4 probe workers), each with a tcpSocket
//! liveness probe and an httpGet readiness probe, both `periodSeconds: 1` (400 probes per
//! second). After a 3 s warm-up (every readiness probe must have turned Ready) the bench
//! samples, over a 10 s window, the CPU time (utime + stime from /proc/self/task/<tid>/stat)
//! of the prober's threads (`prober`, `probe-N`) and of the whole process (getrusage), and
//! reports each as % of one core. `PODVISOR_BENCH_TARGETS=N` and `PODVISOR_BENCH_SECS=N`
//! change the target count and the window; `PODVISOR_BENCH_PROBES=tcp|http` keeps one kind,
//! `mixed` gives each target one probe (even targets tcp, odd http: 200 probes/s). Last, a
//! baseline: the same number of probes per second run back to back by one plain thread
//! without the scheduler, i.e. the cost of the handlers and the kernel's TCP work alone. The servers' CPU is in the process figure, not in
//! the prober figure. Target: prober < 2 % of one core.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use podvisor::prober::scheduler::{ProbeControl, ProbeTarget, Prober};
use podvisor::prober::{Action, HttpAction, ProbeKind, ProbeSpec, Scheme};
use podvisor::runtime::{
    ContainerInfo, ContainerRequest, ExecOutput, Runtime, RuntimeError, SandboxInfo,
};

/// The prober needs a runtime only for exec probes; this bench has none.
struct NoContainers;

impl Runtime for NoContainers {
    fn run_pod_sandbox(&self, _: &Pod) -> Result<SandboxInfo, RuntimeError> {
        Err(RuntimeError::NotFound { id: "bench".into() })
    }
    fn remove_pod_sandbox(&self, _: &str) -> Result<(), RuntimeError> {
        Ok(())
    }
    fn list_pod_sandboxes(&self) -> Result<Vec<SandboxInfo>, RuntimeError> {
        Ok(Vec::new())
    }
    fn start_container(&self, _: &ContainerRequest<'_>) -> Result<ContainerInfo, RuntimeError> {
        Err(RuntimeError::NotFound { id: "bench".into() })
    }
    fn signal_container(&self, id: &str, _: i32) -> Result<(), RuntimeError> {
        Err(RuntimeError::NotFound { id: id.into() })
    }
    fn remove_container(&self, _: &str) -> Result<(), RuntimeError> {
        Ok(())
    }
    fn list_containers(&self) -> Result<Vec<ContainerInfo>, RuntimeError> {
        Ok(Vec::new())
    }
    fn exec_sync(&self, id: &str, _: &[String], _: Duration) -> Result<ExecOutput, RuntimeError> {
        Err(RuntimeError::NotFound { id: id.into() })
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// (utime, stime) of the threads whose name matches, in clock ticks.
fn thread_ticks(matches: impl Fn(&str) -> bool) -> (u64, u64) {
    let mut total = (0, 0);
    let Ok(tasks) = fs::read_dir("/proc/self/task") else {
        return total;
    };
    for t in tasks.flatten() {
        let comm = fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !matches(comm.trim()) {
            continue;
        }
        let stat = fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the ")" of the comm: state is field 3; utime 14, stime 15.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let n = |i: usize| {
            f.get(i - 3)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        total.0 += n(14);
        total.1 += n(15);
    }
    total
}

fn process_cpu() -> Duration {
    let r = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(r.user_time()) + tv(r.system_time())
}

fn serve_tcp() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    thread::spawn(move || {
        for c in l.incoming() {
            drop(c);
        }
    });
    port
}

fn serve_http(requests: Arc<AtomicU64>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut s) = c else { continue };
            let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
            let mut buf = [0u8; 2048];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            requests.fetch_add(1, Ordering::Relaxed);
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    port
}

fn main() {
    let targets = env_num("PODVISOR_BENCH_TARGETS", 200) as usize;
    let secs = env_num("PODVISOR_BENCH_SECS", 10);
    // `tcp`, `http` or both (default): which probes each target gets.
    let kinds = std::env::var("PODVISOR_BENCH_PROBES").unwrap_or_default();
    let tcp_port = serve_tcp();
    let http_requests = Arc::new(AtomicU64::new(0));
    let http_port = serve_http(Arc::clone(&http_requests));
    let (tx, rx) = mpsc::channel();
    let prober = Prober::start(Arc::new(NoContainers), 4, Default::default(), move |u| {
        let _ = tx.send(u);
    })
    .expect("prober");
    let spec = |kind, action| ProbeSpec {
        kind,
        action,
        initial_delay: Duration::ZERO,
        period: Duration::from_secs(1),
        timeout: Duration::from_secs(1),
        success_threshold: 1,
        failure_threshold: 3,
        termination_grace: None,
    };
    let now = Instant::now();
    for i in 0..targets {
        prober.add(ProbeTarget {
            pod_uid: format!("pod-{i}"),
            pod_name: format!("pod-{i}"),
            namespace: "default".into(),
            container: "main".into(),
            container_id: format!("c{i}"),
            // Spread the first runs over one period, as the kubelet's jitter does.
            started_at: now + Duration::from_millis((i as u64 * 1000) / targets as u64),
            netns: None,
            probes: [
                spec(
                    ProbeKind::Liveness,
                    Action::Tcp {
                        host: "127.0.0.1".into(),
                        port: tcp_port,
                    },
                ),
                spec(
                    ProbeKind::Readiness,
                    Action::Http(HttpAction {
                        scheme: Scheme::Http,
                        host: "127.0.0.1".into(),
                        port: http_port,
                        path: "/healthz".into(),
                        headers: Vec::new(),
                    }),
                ),
            ]
            .into_iter()
            .filter(|p| match kinds.as_str() {
                "tcp" => p.kind == ProbeKind::Liveness,
                "http" => p.kind == ProbeKind::Readiness,
                // One probe per target: even targets tcp, odd targets http.
                "mixed" => (p.kind == ProbeKind::Liveness) == (i % 2 == 0),
                _ => true,
            })
            .collect(),
        });
    }
    thread::sleep(Duration::from_secs(3));
    let updates: Vec<_> = rx.try_iter().collect();
    let ready = updates
        .iter()
        .filter(|u| u.kind == ProbeKind::Readiness && u.changed == Some(true))
        .count();
    let failures = updates.iter().filter(|u| !u.result.passed()).count();
    let want_ready = match kinds.as_str() {
        "tcp" => 0,
        "mixed" => targets / 2,
        _ => targets,
    };
    assert_eq!(ready, want_ready, "every target Ready after warm-up");
    assert_eq!(failures, 0, "no probe failed: {updates:?}");

    let is_prober = |n: &str| n == "prober" || n.starts_with("probe-");
    // SAFETY: sysconf with a constant name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let stats0 = prober.stats();
    let ticks0 = thread_ticks(is_prober);
    let sched0 = thread_ticks(|n| n == "prober");
    let proc0 = process_cpu();
    let http0 = http_requests.load(Ordering::Relaxed);
    let t0 = Instant::now();
    thread::sleep(Duration::from_secs(secs));
    let wall = t0.elapsed().as_secs_f64();
    let ticks1 = thread_ticks(is_prober);
    let (user, sys) = (ticks1.0 - ticks0.0, ticks1.1 - ticks0.1);
    let sched1 = thread_ticks(|n| n == "prober");
    let sched = (sched1.0 + sched1.1) - (sched0.0 + sched0.1);
    let proc_cpu = (process_cpu() - proc0).as_secs_f64();
    let stats = prober.stats();
    let http = http_requests.load(Ordering::Relaxed) - http0;
    let late: Vec<_> = rx.try_iter().filter(|u| !u.result.passed()).collect();
    drop(prober);

    let probes = stats.probes_run - stats0.probes_run;
    println!("prober benchmark: {targets} targets x (tcp liveness + http readiness), period 1 s");
    println!(
        "  window {wall:.1} s: {probes} probes run ({:.0}/s), {http} HTTP requests served, {} skipped (still running), {} failures",
        probes as f64 / wall,
        stats.skipped_busy - stats0.skipped_busy,
        late.len()
    );
    let pct = |ticks: u64| 100.0 * (ticks as f64 / hz) / wall;
    println!(
        "  prober threads CPU: {:.2} % of one core (user {:.2} %, kernel {:.2} %; the scheduler thread alone {:.2} %) (target < 2 %)",
        pct(user + sys),
        pct(user),
        pct(sys),
        pct(sched)
    );
    println!(
        "  whole process CPU (prober + both test servers): {:.2} % of one core",
        100.0 * proc_cpu / wall
    );

    // Baseline: the same probes run back to back by one plain thread, paced per second, no
    // scheduler: the cost of the handlers themselves (mostly the kernel's TCP work, which a
    // kubelet pays as well).
    let per_sec = probes as f64 / wall;
    let (btx, brx) = mpsc::channel();
    let baseline = thread::Builder::new()
        .name("baseline".into())
        .spawn(move || {
            let tcp = Action::Tcp {
                host: "127.0.0.1".into(),
                port: tcp_port,
            };
            let http = Action::Http(HttpAction {
                scheme: Scheme::Http,
                host: "127.0.0.1".into(),
                port: http_port,
                path: "/healthz".into(),
                headers: Vec::new(),
            });
            let rt = NoContainers;
            let target = podvisor::prober::Target {
                runtime: &rt,
                container_id: "c",
                netns: None,
            };
            let n = per_sec.round() as usize;
            let t0 = Instant::now();
            let mut sec = 0;
            while brx.try_recv().is_err() {
                for k in 0..n {
                    let a = if k % 2 == 0 { &tcp } else { &http };
                    let r = podvisor::prober::run_action(a, &target, Duration::from_secs(1));
                    assert!(r.passed(), "{r:?}");
                }
                sec += 1;
                thread::sleep(
                    (t0 + Duration::from_secs(sec)).saturating_duration_since(Instant::now()),
                );
            }
        })
        .expect("baseline");
    thread::sleep(Duration::from_secs(1));
    let b0 = thread_ticks(|n| n == "baseline");
    let tb = Instant::now();
    thread::sleep(Duration::from_secs(secs.min(5)));
    let b1 = thread_ticks(|n| n == "baseline");
    let bwall = tb.elapsed().as_secs_f64();
    let _ = btx.send(());
    let _ = baseline.join();
    println!(
        "  baseline, the same {per_sec:.0} probes/s (tcp and http alternating) from one plain thread: {:.2} % of one core",
        100.0 * (((b1.0 + b1.1) - (b0.0 + b0.1)) as f64 / hz) / bwall
    );
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("  load average: {}", load.trim());
}
