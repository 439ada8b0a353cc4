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
//!    `container app started (pid N)`; the pod is a single busybox shell that exits 0 on
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

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use oci_spec::runtime::Spec;

#[path = "../tests/common/image.rs"]
mod image;

use podvisor::images::{ImageStore, ImportOptions};
use podvisor::runtime::linux::{LinuxRuntime, RuntimeConfig};
use podvisor::runtime::rootfs::{self, RootfsPaths};
use podvisor::runtime::{ContainerKind, ContainerRequest, ContainerState, Runtime, RuntimeEvent};

use image::BUSYBOX;
const WARMUP: usize = 2;
const DEFAULT_RUNS: usize = 30;
const TIMEOUT: Duration = Duration::from_secs(30);

const TEMPLATE_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: bench
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: busybox
    command: [/bin/true]
";

const PLAY_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: benchplay
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox
    command: [sh, -c, 'trap \"exit 0\" TERM; sleep 1000 & wait']
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

/// The bench's private environment.
struct Env {
    dir: tempfile::TempDir,
    root: PathBuf,
    logs: PathBuf,
    cgroup_parent: String,
    bin: PathBuf,
}

impl Env {
    fn new() -> Result<Env> {
        let dir = tempfile::Builder::new()
            .prefix("podvisor-bench-")
            .tempdir()
            .context("create temp dir")?;
        let root = dir.path().join("root");
        let logs = dir.path().join("logs");
        fs::create_dir_all(&root).context("create state root")?;
        Ok(Env {
            dir,
            root,
            logs,
            cgroup_parent: format!("podvisor-bench-{}", std::process::id()),
            bin: PathBuf::from(env!("CARGO_BIN_EXE_podvisor")),
        })
    }

    fn runtime_config(&self) -> Result<RuntimeConfig> {
        let mut cfg =
            RuntimeConfig::new(self.root.clone(), self.logs.clone()).context("runtime config")?;
        cfg.shim_binary = self.bin.clone();
        cfg.cgroup_parent = self.cgroup_parent.clone();
        cfg.start_timeout = TIMEOUT;
        Ok(cfg)
    }

    fn raw_dir(&self) -> PathBuf {
        self.dir.path().join("raw")
    }
}

/// Durations of one row, in milliseconds.
struct Row {
    name: &'static str,
    ms: Vec<f64>,
}

impl Row {
    fn new(name: &'static str) -> Row {
        Row {
            name,
            ms: Vec::new(),
        }
    }
    fn push(&mut self, d: Duration) {
        self.ms.push(d.as_secs_f64() * 1000.0);
    }
    fn percentile(&self, q: f64) -> f64 {
        percentile(&self.ms, q)
    }
}

/// Linear-interpolated percentile (q in 0..=1) of unsorted samples.
fn percentile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = pos.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

fn bench() -> Result<()> {
    ensure!(
        nix::unistd::geteuid().is_root(),
        "the startup bench creates real containers and must run as root"
    );
    let runs = match std::env::var("PODVISOR_BENCH_RUNS") {
        Ok(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| anyhow!("PODVISOR_BENCH_RUNS={v:?} is not a positive number"))?,
        Err(_) => DEFAULT_RUNS,
    };
    let env = Env::new()?;
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average before: {} ({} CPUs)",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "podvisor startup bench: {runs} runs per row (+{WARMUP} warm-up), temp dir {}, cgroup parent {}",
        env.dir.path().display(),
        env.cgroup_parent
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
    let archive = env.dir.path().join("busybox-oci.tar");
    image::build_busybox_archive(&archive).context("building the busybox archive")?;
    let images = Arc::new(ImageStore::open(&env.root.join("images")).context("open image store")?);
    images
        .import_archive(&archive, &ImportOptions::default())
        .context("import busybox")?;
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
    let mut raw_mount = Row::new("raw overlay mount");
    let mut raw = Row::new("raw libcontainer create+start");
    let mut raw_fresh = Row::new("  raw, fresh namespaces (info)");
    let threads = thread_count()?;
    ensure!(
        threads == 1,
        "the raw libcontainer phase needs a single-threaded process, found {threads} threads"
    );
    let layers = lower_layers(&images)?;
    // The two variants alternate so that drift affects both alike.
    for i in 0..WARMUP + runs {
        let (mount, start) = raw_run(env, &template, &images.layers_dir(), &layers, i, false)
            .with_context(|| format!("raw run {i}"))?;
        let (_, fresh) = raw_run(env, &template, &images.layers_dir(), &layers, i, true)
            .with_context(|| format!("raw run {i} with fresh namespaces"))?;
        if i >= WARMUP {
            raw_mount.push(mount);
            raw.push(start);
            raw_fresh.push(fresh);
        }
    }

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

fn new_runtime(
    env: &Env,
    images: &Arc<ImageStore>,
) -> Result<(LinuxRuntime, Receiver<RuntimeEvent>)> {
    let (tx, rx) = mpsc::channel();
    let rt = LinuxRuntime::new(env.runtime_config()?, Arc::clone(images), tx)
        .context("create runtime")?;
    Ok((rt, rx))
}

fn template_pod() -> Result<Pod> {
    let name = "bench.yaml";
    let data = TEMPLATE_POD.as_bytes();
    let mut pod = podvisor::pod::manifest::parse_pod(data, name).context("parse template pod")?;
    podvisor::pod::manifest::validate(&pod, name).context("validate template pod")?;
    podvisor::pod::manifest::apply_defaults(&mut pod, name, data);
    Ok(pod)
}

fn pod_container(pod: &Pod) -> Result<k8s_openapi::api::core::v1::Container> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .cloned()
        .ok_or_else(|| anyhow!("template pod has no container"))
}

/// Runs the template container through podvisor and returns the spec it was created from.
fn template_spec(
    rt: &LinuxRuntime,
    rx: &Receiver<RuntimeEvent>,
    pod: &Pod,
    env: &Env,
) -> Result<Spec> {
    let container = pod_container(pod)?;
    let info = rt
        .start_container(&ContainerRequest {
            pod,
            container: &container,
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .context("start template container")?;
    let exit = wait_exit(rx, &info.meta.id)?;
    ensure!(
        exit.exit_code == 0,
        "template container exited with {exit:?}"
    );
    let path = env
        .root
        .join("containers")
        .join(&info.meta.id)
        .join("config.json");
    let data = fs::read(&path).with_context(|| format!("read {}", path.display()))?;
    rt.remove_container(&info.meta.id)
        .context("remove template container")?;
    serde_json::from_slice(&data).with_context(|| format!("parse {}", path.display()))
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

fn wait_exit(rx: &Receiver<RuntimeEvent>, id: &str) -> Result<podvisor::runtime::ExitRecord> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(RuntimeEvent::ContainerExited { id: got, exit, .. }) if got == id => {
                return Ok(exit)
            }
            Ok(_) => continue,
            Err(e) => bail!("no exit event for container {id} within {TIMEOUT:?}: {e}"),
        }
    }
}

fn thread_count() -> Result<usize> {
    Ok(fs::read_dir("/proc/self/task")
        .context("read /proc/self/task")?
        .count())
}

/// The busybox image's layer directories relative to the layers directory, topmost first
/// (what the monitor passes to `mount_rootfs`).
fn lower_layers(images: &ImageStore) -> Result<Vec<String>> {
    let rec = images
        .resolve(BUSYBOX)
        .context("resolve busybox")?
        .ok_or_else(|| anyhow!("busybox not in the image store after import"))?;
    let layers_dir = images.layers_dir();
    let mut lower: Vec<String> = images
        .layer_dirs(&rec)
        .context("busybox layers")?
        .iter()
        .map(|p| {
            p.strip_prefix(&layers_dir)
                .unwrap_or(p)
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    lower.reverse();
    Ok(lower)
}

/// One raw libcontainer run; returns (overlay mount time, build+start time). With
/// `fresh_ns` the container creates its own namespaces instead of joining the sandbox's.
fn raw_run(
    env: &Env,
    template: &Spec,
    layers_dir: &Path,
    layers: &[String],
    i: usize,
    fresh_ns: bool,
) -> Result<(Duration, Duration)> {
    let id = format!("raw-{}{i}", if fresh_ns { "fresh-" } else { "" });
    let bundle = env.raw_dir().join(&id);
    let youki_root = env.raw_dir().join("youki");
    fs::create_dir_all(&bundle).with_context(|| format!("create {}", bundle.display()))?;
    let paths = RootfsPaths::in_dir(&bundle);

    let t0 = Instant::now();
    rootfs::mount_rootfs(&paths, layers_dir, layers).context("mount rootfs")?;
    let mount = t0.elapsed();

    let result = raw_create_start(env, template, &bundle, &youki_root, &paths, &id, fresh_ns);
    // Unmount even when the run failed.
    let unmounted = rootfs::remove_rootfs(&paths).context("remove rootfs");
    let took = result?;
    unmounted?;
    fs::remove_dir_all(&bundle).with_context(|| format!("remove {}", bundle.display()))?;
    Ok((mount, took))
}

fn raw_create_start(
    env: &Env,
    template: &Spec,
    bundle: &Path,
    youki_root: &Path,
    paths: &RootfsPaths,
    id: &str,
    fresh_ns: bool,
) -> Result<Duration> {
    let mut spec = template.clone();
    let mut root = spec
        .root()
        .clone()
        .ok_or_else(|| anyhow!("spec has no root"))?;
    root.set_path(paths.rootfs.clone());
    spec.set_root(Some(root));
    let mut process = spec
        .process()
        .clone()
        .ok_or_else(|| anyhow!("spec has no process"))?;
    process.set_args(Some(vec!["/bin/true".to_string()]));
    spec.set_process(Some(process));
    let mut linux = spec
        .linux()
        .clone()
        .ok_or_else(|| anyhow!("spec has no linux section"))?;
    linux.set_cgroups_path(Some(PathBuf::from(format!(
        "/{}/raw/{id}",
        env.cgroup_parent
    ))));
    if fresh_ns {
        let namespaces = linux.namespaces().clone().map(|list| {
            list.into_iter()
                .map(|mut ns| {
                    ns.set_path(None);
                    ns
                })
                .collect()
        });
        linux.set_namespaces(namespaces);
    }
    spec.set_linux(Some(linux));
    let config = bundle.join("config.json");
    fs::write(&config, serde_json::to_vec(&spec)?)
        .with_context(|| format!("write {}", config.display()))?;

    let null = || -> Result<OwnedFd> {
        Ok(OwnedFd::from(
            fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")
                .context("open /dev/null")?,
        ))
    };
    let (stdin, stdout, stderr) = (null()?, null()?, null()?);
    let own_oom = fs::read_to_string("/proc/self/oom_score_adj").ok();

    let t0 = Instant::now();
    let built = libcontainer::container::builder::ContainerBuilder::new(
        id.to_string(),
        libcontainer::syscall::syscall::SyscallType::default(),
    )
    .with_root_path(youki_root)?
    .with_stdin(stdin)
    .with_stdout(stdout)
    .with_stderr(stderr)
    .validate_id()?
    .as_init(bundle)
    .with_systemd(false)
    .as_sibling(false)
    .with_detach(true)
    .build();
    let create = t0.elapsed();
    // build() writes the container's oom_score_adj into ours (not timed).
    if let Some(v) = &own_oom {
        let _ = fs::write("/proc/self/oom_score_adj", v.trim());
    }
    let mut container = built.context("libcontainer build")?;
    let init = container
        .pid()
        .ok_or_else(|| anyhow!("libcontainer returned no init pid"))?;
    let t1 = Instant::now();
    let started = container.start();
    let start = t1.elapsed();
    if let Err(e) = started {
        let _ = container.delete(true);
        return Err(e).context("libcontainer start");
    }
    let status = waitpid(init, None).context("waitpid init")?;
    container.delete(true).context("libcontainer delete")?;
    ensure!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "/bin/true ended with {status:?}"
    );
    Ok(create + start)
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
        .arg("--log-dir")
        .arg(&env.logs)
        .arg("--cgroup-parent")
        .arg(&env.cgroup_parent)
        .arg("play")
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
            s.lines().any(|l| l.contains("container app started (pid "))
        })?;
    let took = t0.elapsed();
    if !found {
        bail!("play never reported the container started; its stderr:\n{seen}");
    }
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
    let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    writeln!(
        out,
        "load average after: {}",
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    )?;
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

/// Removes everything the bench created and verifies nothing is left: mounts under the temp
/// dir, the bench's cgroups in every hierarchy, processes rooted in or running from the temp
/// dir.
fn cleanup(env: &Env) -> Result<()> {
    let base = env.dir.path();
    let mut problems = Vec::new();
    // Raw containers a failed run may have left (normally none).
    if let Ok(entries) = fs::read_dir(env.raw_dir().join("youki")) {
        for e in entries.flatten() {
            if let Ok(mut c) = libcontainer::container::Container::load(e.path()) {
                let _ = c.delete(true);
            }
            problems.push(format!("raw container {}", e.path().display()));
        }
    }
    // podvisor containers and sandboxes (normally none): a runtime cleans them up.
    let pods_dir = env.root.join("pods");
    let leftover_pods: Vec<PathBuf> = fs::read_dir(&pods_dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    let leftover_containers = fs::read_dir(env.root.join("containers"))
        .map(|d| d.count())
        .unwrap_or(0);
    if !leftover_pods.is_empty() || leftover_containers > 0 {
        problems.push(format!(
            "{} pod sandbox(es), {leftover_containers} container(s)",
            leftover_pods.len()
        ));
        if let Ok(cfg) = env.runtime_config() {
            if let Ok(images) = ImageStore::open(&env.root.join("images")) {
                let (tx, _rx) = mpsc::channel();
                if let Ok(rt) = LinuxRuntime::new(cfg, Arc::new(images), tx) {
                    if let Ok(list) = rt.list_containers() {
                        for c in list {
                            let _ = rt.signal_container(&c.meta.id, libc::SIGKILL);
                        }
                    }
                    std::thread::sleep(Duration::from_millis(500));
                    if let Ok(list) = rt.list_containers() {
                        for c in list {
                            let _ = rt.remove_container(&c.meta.id);
                        }
                    }
                    for p in &leftover_pods {
                        if let Some(uid) = p.file_name().and_then(|n| n.to_str()) {
                            let _ = rt.remove_pod_sandbox(uid);
                        }
                    }
                }
            }
        }
    }
    // Processes rooted in or running from the temp dir.
    for (pid, cmd) in processes_under(base) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        problems.push(format!("process {pid} ({cmd})"));
    }
    // Mounts under the temp dir, deepest first.
    let mut mounts = mounts_under(base);
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in &mounts {
        let _ = rootfs::unmount_if_mounted(Path::new(m));
        problems.push(format!("mount {m}"));
    }
    // The bench's cgroup parent in every hierarchy (libcontainer leaves parents behind).
    for dir in cgroup_dirs(&env.cgroup_parent) {
        if let Err(e) = remove_cgroup_tree(&dir) {
            problems.push(format!("cgroup {}: {e}", dir.display()));
        }
    }

    // Verify.
    let mounts = mounts_under(base);
    let cgroups: Vec<PathBuf> = cgroup_dirs(&env.cgroup_parent)
        .into_iter()
        .filter(|d| d.exists())
        .collect();
    let procs = processes_under(base);
    let dir_path = base.to_path_buf();
    let removed = fs::remove_dir_all(&dir_path);
    ensure!(
        mounts.is_empty() && cgroups.is_empty() && procs.is_empty(),
        "leftovers after cleanup: mounts {mounts:?}, cgroups {cgroups:?}, processes {procs:?}"
    );
    removed.with_context(|| format!("remove {}", dir_path.display()))?;
    ensure!(
        problems.is_empty(),
        "the bench had to clean up leftovers of its runs: {problems:?}"
    );
    println!(
        "cleanup verified: no mounts under {}, no cgroup {} in any hierarchy, no processes left, temp dir removed",
        dir_path.display(),
        env.cgroup_parent
    );
    Ok(())
}

fn mounts_under(base: &Path) -> Vec<String> {
    let base = base.to_string_lossy().to_string();
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(rootfs::unescape_mountinfo)
        .filter(|m| m.starts_with(&base))
        .collect()
}

/// The cgroup parent's directory in every mounted hierarchy (v1 controllers, the v2 mount of
/// a hybrid host, or the unified tree).
fn cgroup_dirs(parent: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        return vec![root.join(parent)];
    }
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(root) {
        for e in entries.flatten() {
            // Skip the symlinks of co-mounted controllers (cpu -> cpu,cpuacct).
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                out.push(e.path().join(parent));
            }
        }
    }
    out
}

fn remove_cgroup_tree(dir: &Path) -> std::io::Result<()> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            remove_cgroup_tree(&e.path())?;
        }
    }
    fs::remove_dir(dir)
}

/// Processes whose root, cwd or executable is under `dir`.
fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        for link in ["root", "cwd", "exe"] {
            if let Ok(target) = fs::read_link(format!("/proc/{pid}/{link}")) {
                if target.starts_with(dir) {
                    let cmd = fs::read_to_string(format!("/proc/{pid}/cmdline"))
                        .unwrap_or_default()
                        .replace('\0', " ");
                    out.push((pid, cmd));
                    break;
                }
            }
        }
    }
    out
}
