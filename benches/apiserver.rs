//! API server link benchmark (issue 18's numbers): what `podvisor run --kubeconfig` costs and
//! how fast a mirror pod shows a restart, against the test API server of
//! `tests/common/apiserver` on loopback (TLS with client certificates, as a real one).
//!
//! Run as root, from the repository, with the binary to measure (a release build for
//! docs/benchmarks.md; the bench itself needs no optimisation):
//!
//! ```text
//! cargo build --release
//! PODVISOR_TEST_BIN=target/release/podvisor cargo bench --bench apiserver --profile dev
//! ```
//!
//! In a private environment (the integration tests' `TestEnv`: own state root, log root,
//! cgroup parent; the busybox image imported offline), with the kubelet's default periods
//! (`nodeStatusUpdateFrequency` 10 s, `nodeStatusReportFrequency` 5 min,
//! `nodeLeaseDurationSeconds` 40):
//!
//! 1. ten `sleep 3600` pods under a daemon without `--kubeconfig`: once all run and 10 s
//!    passed, the daemon's VmRSS, Pss and threads (the baseline of the same run);
//! 2. the same pods, the daemon restarted with `--kubeconfig` (it re-adopts them): once ten
//!    mirror pods show Running and 10 s passed, the same figures, then every request the
//!    API server receives for `PODVISOR_BENCH_SECS` (default 60), by kind;
//! 3. five more pods whose container exits after 2, 4, ... 10 s: for each first restart, the
//!    time from the local API showing `restartCount: 1` to the mirror pod showing it, both
//!    polled every 2 ms (the exit -> local status part is the daemon bench's).
//!
//! MB is 10^6 bytes. Only meaningful on an otherwise idle machine (load average printed).

#[path = "../tests/common/mod.rs"]
mod common;
#[allow(dead_code)]
#[path = "../tests/common/apiserver/mod.rs"]
mod fake;

use std::collections::BTreeMap;
use std::fs;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::TestEnv;
use fake::ApiServer;

fn field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| {
            v.trim_start_matches(':')
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// (VmRSS, Pss, threads) of `pid` in bytes.
fn memory(pid: u32) -> (u64, u64, u64) {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    (
        field(&status, "VmRSS") << 10,
        field(&rollup, "Pss") << 10,
        field(&status, "Threads"),
    )
}

fn mb(b: u64) -> String {
    format!("{:.1} MB", b as f64 / 1e6)
}

fn wait(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn load() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn manifest(name: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers:\n  - {{name: c, image: {}, imagePullPolicy: Never, command: [sh, -c, '{command}']}}\n",
        common::BUSYBOX
    )
}

fn main() {
    common::require_root();
    eprintln!("load average before: {}", load());
    let env = TestEnv::new("apiserver-bench");
    let _ = env.images();
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("manifests");
    for i in 0..10 {
        fs::write(
            manifests.join(format!("p{i}.yaml")),
            manifest(&format!("p{i}"), "exec sleep 3600"),
        )
        .expect("manifest");
    }
    let running = |d: &Daemon| {
        d.pods()
            .unwrap_or_default()
            .iter()
            .filter(|v| v.pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .count()
    };

    // 1. Without --kubeconfig.
    let d = Daemon::start(&env, &manifests);
    wait("10 pods running", Duration::from_secs(120), || {
        running(&d) == 10
    });
    std::thread::sleep(Duration::from_secs(10));
    let base = memory(d.pid());
    eprintln!(
        "without --kubeconfig, 10 pods: daemon RSS {}, Pss {}, {} threads",
        mb(base.0),
        mb(base.1),
        base.2
    );
    drop(d);

    // 2. With it: the same pods re-adopted.
    let dir = env.dir.path().join("apiserver");
    let s = ApiServer::start(&dir);
    let creds = s
        .pki
        .issue("node", "system:node:testnode", &["system:nodes"], false);
    let kubeconfig = dir.join("node.kubeconfig");
    s.kubeconfig(&kubeconfig, &creds);
    let d = Daemon::start_with(
        &env,
        &manifests,
        &["--kubeconfig", kubeconfig.to_str().expect("utf-8")],
    );
    wait("10 mirror pods Running", Duration::from_secs(120), || {
        s.list("pods")
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count()
            == 10
    });
    std::thread::sleep(Duration::from_secs(10));
    let with = memory(d.pid());
    eprintln!(
        "with --kubeconfig, 10 pods: daemon RSS {} ({:+.1} MB), Pss {} ({:+.1} MB), {} threads ({:+})",
        mb(with.0),
        (with.0 as f64 - base.0 as f64) / 1e6,
        mb(with.1),
        (with.1 as f64 - base.1 as f64) / 1e6,
        with.2,
        with.2 as i64 - base.2 as i64
    );
    let secs: u64 = std::env::var("PODVISOR_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(60);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(secs));
    let reqs = s.requests_since(t0);
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for (m, p) in &reqs {
        let kind = if p.contains("/leases") {
            "lease"
        } else if p.starts_with("/api/v1/nodes") {
            "node"
        } else {
            "pods"
        };
        *by.entry(format!("{m} {kind}")).or_default() += 1;
    }
    eprintln!(
        "steady state, 10 pods, {secs} s: {} requests = {:.1} per minute: {by:?}",
        reqs.len(),
        reqs.len() as f64 * 60.0 / secs as f64
    );

    // 3. Restart -> mirror status.
    for i in 1..=5 {
        fs::write(
            manifests.join(format!("crash{i}.yaml")),
            manifest(&format!("crash{i}"), &format!("sleep {}; exit 1", 2 * i)),
        )
        .expect("manifest");
    }
    let restarts_of = |p: Option<&k8s_openapi::api::core::v1::Pod>| -> i64 {
        p.and_then(|p| p.status.as_ref()?.container_statuses.as_ref()?.first())
            .map_or(-1, |c| i64::from(c.restart_count))
    };
    let mut seen: BTreeMap<usize, (Option<Instant>, Option<Instant>)> = BTreeMap::new();
    let t0 = Instant::now();
    while seen.len() < 5 || seen.values().any(|(l, m)| l.is_none() || m.is_none()) {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "restarts not seen: {seen:?}"
        );
        let local = d.pods().unwrap_or_default();
        let now = Instant::now();
        for i in 1..=5 {
            let name = format!("crash{i}-testnode");
            let e = seen.entry(i).or_default();
            let l = local
                .iter()
                .find(|v| v.pod.metadata.name.as_deref() == Some(name.as_str()));
            if e.0.is_none() && restarts_of(l.map(|v| &v.pod)) >= 1 {
                e.0 = Some(now);
            }
            let m = s
                .get(&format!("pods/default/{name}"))
                .and_then(|p| p["status"]["containerStatuses"][0]["restartCount"].as_i64())
                .unwrap_or(-1);
            if e.1.is_none() && m >= 1 {
                e.1 = Some(Instant::now());
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut lat: Vec<f64> = seen
        .values()
        .map(|(l, m)| match (l, m) {
            (Some(l), Some(m)) => m.saturating_duration_since(*l).as_secs_f64() * 1e3,
            _ => f64::NAN,
        })
        .collect();
    lat.sort_by(|a, b| a.total_cmp(b));
    eprintln!("restart -> mirror status (after the local status), 5 restarts: {lat:.1?} ms (median {:.1} ms)", lat[2]);
    for i in 1..=5 {
        let _ = fs::remove_file(manifests.join(format!("crash{i}.yaml")));
    }
    for i in 0..10 {
        let _ = fs::remove_file(manifests.join(format!("p{i}.yaml")));
    }
    d.wait_all_gone(&env, Duration::from_secs(60));
    drop(d);
    eprintln!("load average after: {}", load());
}
