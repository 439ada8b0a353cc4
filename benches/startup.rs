//! Startup benchmark: how long podvisor takes to get a container's process running, compared
//! with raw libcontainer creating and starting the very same bundle.
//!
//! Run as root, from the repository:
//!
//! ```text
//! cargo bench --bench startup
//! ```
//!
//! Cargo builds `target/release/podvisor` (the bench profile inherits the release profile,
//! including `strip = true`) before the bench and passes its path as `CARGO_BIN_EXE_podvisor`,
//! so nothing has to be built by hand. `PODVISOR_BENCH_RUNS=N` changes the number of measured
//! runs per row (default 30; 2 warm-up runs per row are not counted).
//!
//! Everything happens in one process, in a private environment: a temp directory holding the
//! state root, the log root and the bundles, and a cgroup parent `podvisor-bench-<pid>`. A
//! busybox OCI archive is built offline from `/bin/busybox` (as the integration tests do) and
//! imported with `ImageStore`. Then, in this order:
//!
//! 1. **Template.** One pod sandbox is created and one `/bin/true` container is run through
//!    `LinuxRuntime`; its `config.json` (the OCI spec podvisor generated, with the image user
//!    already resolved by the monitor) is copied before the container is removed. The
//!    runtime is then dropped (which joins its exit-watcher thread); the sandbox stays.
//! 2. **Raw libcontainer.** For each run: a fresh bundle whose rootfs is an overlay of the same
//!    unpacked busybox layer (`rootfs::mount_rootfs` with its own upper/work directories) and
//!    the template spec with only `root.path`, `process.args` (`/bin/true`) and
//!    `linux.cgroupsPath` (unique per run) rewritten. It still joins the sandbox's pinned
//!    network/IPC/UTS namespaces and bind-mounts its `/etc` files and `/dev/shm`, exactly as
//!    podvisor's container did. Timed: `ContainerBuilder::build()` + `start()` (create+start,
//!    to the process being exec'd). The overlay mount is timed separately; waitpid, delete and
//!    unmount are not timed. libcontainer clones its caller without exec, so this phase runs
//!    while the bench process is single-threaded (checked through /proc/self/task). For
//!    information, alternate runs drop the namespace paths (fresh namespaces instead of the
//!    sandbox's).
//! 3. **podvisor `start_container` (in-process).** A new `LinuxRuntime` on the same sandbox;
//!    timed: `Runtime::start_container` of the `/bin/true` container, which returns once the
//!    monitor reports the process started (spawn monitor, mount, spec, libcontainer create and
//!    start, report). No manifest parsing, no process startup of podvisor itself. For
//!    information, a second series creates a fresh sandbox each run and times
//!    `run_pod_sandbox` + `start_container`: what play does after its own startup.
//! 4. **`podvisor play` (end to end).** Timed: from spawning
//!    `podvisor --root-dir .. --log-dir .. --cgroup-parent .. play pod.yaml` to its stderr line
//!    `container app started (ID)`; the pod is a single busybox shell that exits 0 on
//!    SIGTERM. Each run then SIGTERMs play and requires it to exit 0 (the pod torn down).
//!    The time to play's `pod benchplay sandbox ready` line is reported as a part of it.
//!
//! The report gives median, p10 and p90 in ms per row, the ratios podvisor/raw (the target is
//! play <= 2x raw create+start), and the size of the stripped release binary (target
//! <= 10 MB). At the end every container, mount, cgroup and temp file of the bench is removed
//! and the absence of leftovers (mounts under the temp dir, cgroups, processes) is verified.
//!
//! The numbers are only meaningful on an otherwise idle machine: the load average is printed
//! before and after the run (a parallel `cargo build` on 2 cores multiplies every row).

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use common::{
    cleanup, import_busybox, load_average, new_runtime, percentile, pod_container, raw_baseline,
    template_pod, template_spec, wait_exit, Env, Row, TIMEOUT, WARMUP,
};
use podvisor::runtime::daemon::LinuxRuntime;
use podvisor::runtime::{ContainerKind, ContainerRequest, ContainerState, Runtime, RuntimeEvent};

const DEFAULT_RUNS: usize = 30;

const PLAY_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: benchplay
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.35
    command: [sh, -c, 'trap \"exit 0\" TERM; echo trapped; sleep 1000 & wait']
";

fn main() {
    let code = match bench() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("startup bench failed: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

fn bench() -> Result<()> {
    ensure!(
        nix::unistd::geteuid().is_root(),
        "the startup bench creates real containers and must run as root"
    );
    let runs = common::env_count("RUNS", DEFAULT_RUNS)?;
    let env = Env::new()?;
    println!(
        "load average before: {} ({} CPUs)",
        load_average(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "podvisor startup bench: {runs} runs per row (+{WARMUP} warm-up), temp dir {}, cgroup parent {}; {}; {}",
        env.dir.path().display(),
        env.cgroup_parent,
        env.run_fs(),
        env.state_fs()
    );
    let reported = measure(&env, runs).and_then(|rows| report(&rows, &env.bin));
    // Cleanup runs whatever happened; its verdict is printed even when measuring failed.
    let clean = cleanup(&env);
    reported?;
    clean
}

struct Rows {
    raw_mount: Row,
    raw: Row,
    raw_fresh: Row,
    in_process: Row,
    in_process_pod: Row,
    play_sandbox: Row,
    play: Row,
}

fn measure(env: &Env, runs: usize) -> Result<Rows> {
    let images = import_busybox(env)?;
    let pod = template_pod()?;

    // 1. Template spec from podvisor itself.
    let template = {
        let (rt, rx) = new_runtime(env, &images)?;
        rt.run_pod_sandbox(&pod).context("create sandbox")?;
        let spec = template_spec(&rt, &rx, &pod, env)?;
        drop(rt);
        spec
    };

    // 2. Raw libcontainer, single-threaded.
    let common::RawRows {
        mount: raw_mount,
        create_start: raw,
        fresh: raw_fresh,
    } = raw_baseline(env, &images, &template, runs)?;

    // 3. podvisor start_container, in-process.
    // Then, for information, a fresh pod each run: run_pod_sandbox + start_container, what
    // play does once it has parsed its manifest and opened the image store.
    let mut in_process = Row::new("podvisor start_container (in-process)");
    let mut in_process_pod = Row::new("  in-process sandbox+start (info)");
    {
        let (rt, rx) = new_runtime(env, &images)?;
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        rt.run_pod_sandbox(&pod).context("reuse sandbox")?;
        for i in 0..WARMUP + runs {
            let took = start_once(&rt, &rx, &pod).with_context(|| format!("run {i}"))?;
            if i >= WARMUP {
                in_process.push(took);
            }
        }
        rt.remove_pod_sandbox(&uid).context("remove sandbox")?;
        for i in 0..WARMUP + runs {
            let t0 = Instant::now();
            rt.run_pod_sandbox(&pod).context("create sandbox")?;
            let sandbox = t0.elapsed();
            let start = start_once(&rt, &rx, &pod).with_context(|| format!("fresh pod run {i}"))?;
            rt.remove_pod_sandbox(&uid).context("remove sandbox")?;
            if i >= WARMUP {
                in_process_pod.push(sandbox + start);
            }
        }
    }

    // 4. podvisor play, end to end.
    let mut play_sandbox = Row::new("  play: spawn to sandbox ready (part)");
    let mut play = Row::new("podvisor play (spawn to started)");
    let manifest = env.dir.path().join("pod.yaml");
    fs::write(&manifest, PLAY_POD).context("write pod.yaml")?;
    for i in 0..WARMUP + runs {
        let (sandbox, started) =
            play_run(env, &manifest).with_context(|| format!("play run {i}"))?;
        if i >= WARMUP {
            play_sandbox.push(sandbox);
            play.push(started);
        }
    }
    Ok(Rows {
        raw_mount,
        raw,
        raw_fresh,
        in_process,
        in_process_pod,
        play_sandbox,
        play,
    })
}

/// Starts the pod's container, waits for it to exit 0 and removes it; returns the time
/// `start_container` took.
fn start_once(rt: &LinuxRuntime, rx: &Receiver<RuntimeEvent>, pod: &Pod) -> Result<Duration> {
    let container = pod_container(pod)?;
    let req = ContainerRequest {
        pod,
        container: &container,
        kind: ContainerKind::App,
        restart_count: 0,
    };
    let t0 = Instant::now();
    let info = rt.start_container(&req).context("start_container")?;
    let took = t0.elapsed();
    ensure!(
        matches!(info.state, ContainerState::Running { .. }),
        "container is not running after start: {:?}",
        info.state
    );
    let exit = wait_exit(rx, &info.meta.id)?;
    ensure!(
        exit.exit_code == 0,
        "container {} exited with {exit:?}",
        info.meta.id
    );
    rt.remove_container(&info.meta.id)
        .with_context(|| format!("remove container {}", info.meta.id))?;
    Ok(took)
}

/// Kills the play process if a run is abandoned half-way.
struct PlayGuard(Option<Child>);

impl Drop for PlayGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One `podvisor play` run; returns the times from spawn to the sandbox-ready line and to the
/// container's start line.
fn play_run(env: &Env, manifest: &Path) -> Result<(Duration, Duration)> {
    let t0 = Instant::now();
    let child = Command::new(&env.bin)
        .arg("--root-dir")
        .arg(&env.root)
        .arg("--runtime-dir")
        .arg(&env.run)
        .arg("--log-dir")
        .arg(&env.logs)
        .arg("--cgroup-parent")
        .arg(&env.cgroup_parent)
        .arg("play")
        .arg("--cni-conf-dir=")
        .arg(manifest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawn {}", env.bin.display()))?;
    let mut guard = PlayGuard(Some(child));
    let child = guard
        .0
        .as_mut()
        .ok_or_else(|| anyhow!("play child vanished"))?;
    let mut stderr = child
        .stderr
        .take()
        .ok_or_else(|| anyhow!("play has no stderr pipe"))?;
    let mut seen = String::new();
    let sandbox_ready = read_until(&mut stderr, &mut seen, |s| {
        s.lines().any(|l| l.contains("pod benchplay sandbox ready"))
    })?;
    let sandbox = t0.elapsed();
    let found = sandbox_ready
        && read_until(&mut stderr, &mut seen, |s| {
            s.lines().any(|l| l.contains("container app started ("))
        })?;
    let took = t0.elapsed();
    if !found {
        bail!("play never reported the container started; its stderr:\n{seen}");
    }
    // The shell must have its trap before the SIGTERM (a container's PID 1 ignores a signal
    // it has no handler for: it would be SIGKILLed after the grace period and play exit 1).
    // Not timed.
    wait_for_log_line(&env.logs, "trapped")?;
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).context("SIGTERM play")?;
    // Drain stderr to EOF (play exits after its teardown), then reap it.
    read_until(&mut stderr, &mut seen, |_| false)?;
    let status = child.wait().context("wait for play")?;
    guard.0 = None;
    ensure!(
        status.success(),
        "play exited with {status} after SIGTERM; its stderr:\n{seen}"
    );
    Ok((sandbox, took))
}

/// Waits until a CRI log under `dir` holds a line ending in `text`.
fn wait_for_log_line(dir: &Path, text: &str) -> Result<()> {
    fn found(dir: &Path, text: &str) -> bool {
        fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let p = e.path();
                if p.is_dir() {
                    found(&p, text)
                } else {
                    fs::read_to_string(&p).is_ok_and(|s| s.lines().any(|l| l.ends_with(text)))
                }
            })
        })
    }
    let deadline = Instant::now() + TIMEOUT;
    while !found(dir, text) {
        ensure!(
            Instant::now() < deadline,
            "no log line {text:?} under {} within {TIMEOUT:?}",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Appends what `pipe` yields to `seen` until `done(seen)` (returns true), EOF (false) or
/// the timeout (error).
fn read_until(
    pipe: &mut std::process::ChildStderr,
    seen: &mut String,
    done: impl Fn(&str) -> bool,
) -> Result<bool> {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = [0u8; 4096];
    loop {
        if done(seen) {
            return Ok(true);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("play stalled for {TIMEOUT:?}; its stderr so far:\n{seen}");
        }
        let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(nix::Error::EINTR) => {}
            Err(e) => return Err(e).context("poll play's stderr"),
        }
        if fds[0].revents().is_none_or(|r| r.is_empty()) {
            continue;
        }
        match pipe.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("read play's stderr"),
        }
    }
}

fn report(rows: &Rows, bin: &Path) -> Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "load average after: {}", load_average())?;
    writeln!(out)?;
    writeln!(
        out,
        "{:<40} {:>5} {:>9} {:>9} {:>9}",
        "startup (ms)", "runs", "median", "p10", "p90"
    )?;
    for row in [
        &rows.raw_mount,
        &rows.raw,
        &rows.raw_fresh,
        &rows.in_process,
        &rows.in_process_pod,
        &rows.play,
        &rows.play_sandbox,
    ] {
        writeln!(
            out,
            "{:<40} {:>5} {:>9.2} {:>9.2} {:>9.2}",
            row.name,
            row.ms.len(),
            row.percentile(0.5),
            row.percentile(0.1),
            row.percentile(0.9)
        )?;
    }
    let mount_and_start: Vec<f64> = rows
        .raw_mount
        .ms
        .iter()
        .zip(&rows.raw.ms)
        .map(|(a, b)| a + b)
        .collect();
    let raw = rows.raw.percentile(0.5);
    let raw_full = percentile(&mount_and_start, 0.5);
    writeln!(out)?;
    writeln!(
        out,
        "raw mount+create+start median: {raw_full:.2} ms (per-run sums)"
    )?;
    for (row, target) in [(&rows.in_process, None), (&rows.play, Some(2.0))] {
        let ratio = row.percentile(0.5) / raw;
        let verdict = match target {
            Some(t) if ratio <= t => format!(" (target <= {t}x: met)"),
            Some(t) => format!(" (target <= {t}x: MISSED)"),
            None => String::new(),
        };
        writeln!(
            out,
            "ratio {} / raw create+start: {ratio:.2}x{verdict}; / raw mount+create+start: {:.2}x",
            row.name,
            row.percentile(0.5) / raw_full
        )?;
    }
    let data = fs::read(bin).with_context(|| format!("read {}", bin.display()))?;
    let stripped = !data.windows(8).any(|w| w == b".symtab\0");
    let mb = data.len() as f64 / 1_000_000.0;
    writeln!(
        out,
        "binary {}: {mb:.2} MB ({} bytes, {:.2} MiB), {}; target <= 10 MB: {}",
        bin.display(),
        data.len(),
        data.len() as f64 / (1024.0 * 1024.0),
        if stripped {
            "stripped"
        } else {
            "NOT stripped (has .symtab)"
        },
        if mb <= 10.0 { "met" } else { "MISSED" }
    )?;
    Ok(())
}
