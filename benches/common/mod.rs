//! Helpers shared by the benches (`startup`, `daemon`): the private environment (temp dir,
//! state and log roots, cgroup parent), sample rows and percentiles, the offline busybox OCI
//! archive, the template spec podvisor generates, the raw libcontainer baseline, and the
//! cleanup that removes and verifies everything a bench created.
#![allow(dead_code)]

use std::fs;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::Pid;
use oci_spec::runtime::Spec;

use podvisor::images::{ImageStore, ImportOptions};
use podvisor::runtime::daemon::{LinuxRuntime, RuntimeConfig};
use podvisor::runtime::rootfs::{self, RootfsPaths};
use podvisor::runtime::{ContainerKind, ContainerRequest, Runtime, RuntimeEvent};

#[path = "../../tests/common/image.rs"]
mod image;

pub use image::BUSYBOX;
pub const WARMUP: usize = 2;
pub const TIMEOUT: Duration = Duration::from_secs(30);

pub const TEMPLATE_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: bench
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: busybox:1.35
    command: [/bin/true]
";

/// The bench's private environment.
pub struct Env {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    /// The runtime dir (`--runtime-dir`), private to the bench.
    pub run: PathBuf,
    /// The raw baseline's bundles and libcontainer state (the runtime dir's counterpart).
    pub raw: PathBuf,
    pub logs: PathBuf,
    pub cgroup_parent: String,
    pub bin: PathBuf,
    /// The bench's own tmpfs holding `run` and `raw`, unless `PODVISOR_BENCH_RUN_ON_DISK`.
    pub tmpfs: Option<PathBuf>,
}

impl Env {
    /// The state root and the log root are on the temp dir's file system, as
    /// /var/lib/podvisor and /var/log are on disk. The runtime dir and the raw bundles are on
    /// a tmpfs of the bench's own, as /run is a tmpfs on every systemd machine (this build
    /// machine's /run is not: creating files on an ext4 that deleted thousands in the last
    /// seconds costs far more CPU, see docs/history/start-timeline.md).
    /// `PODVISOR_BENCH_RUN_ON_DISK=1` keeps both on the temp dir's file system.
    pub fn new() -> Result<Env> {
        let dir = tempfile::Builder::new()
            .prefix("podvisor-bench-")
            .tempdir()
            .context("create temp dir")?;
        let root = dir.path().join("root");
        let logs = dir.path().join("logs");
        fs::create_dir_all(&root).context("create state root")?;
        let tmpfs = if std::env::var_os("PODVISOR_BENCH_RUN_ON_DISK").is_some() {
            None
        } else {
            let at = dir.path().join("tmpfs");
            fs::create_dir(&at).with_context(|| format!("create {}", at.display()))?;
            nix::mount::mount(
                Some("tmpfs"),
                &at,
                Some("tmpfs"),
                nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
                Some("mode=0755"),
            )
            .with_context(|| format!("mount a tmpfs on {}", at.display()))?;
            Some(at)
        };
        let fast = tmpfs.clone().unwrap_or_else(|| dir.path().to_path_buf());
        Ok(Env {
            dir,
            root,
            run: fast.join("run"),
            raw: fast.join("raw"),
            logs,
            cgroup_parent: format!("podvisor-bench-{}", std::process::id()),
            bin: PathBuf::from(env!("CARGO_BIN_EXE_podvisor")),
            tmpfs,
        })
    }

    /// Where the runtime dir is, for the report.
    pub fn run_fs(&self) -> &'static str {
        if self.tmpfs.is_some() {
            "runtime dir and raw bundles on a tmpfs, as /run (PODVISOR_BENCH_RUN_ON_DISK=1: on disk)"
        } else {
            "runtime dir and raw bundles on the temp dir's file system (PODVISOR_BENCH_RUN_ON_DISK)"
        }
    }

    /// What the state root is on, for the report. An ext4 without a journal is named as
    /// such: every inode it allocates skips the inodes deleted in the last minutes, so a
    /// run's figures there depend on how much the runs before it deleted
    /// (docs/history/start-timeline.md, round sixteen; `TMPDIR=<dir>` puts the state root
    /// elsewhere).
    pub fn state_fs(&self) -> String {
        /// ext2/3/4 and tmpfs, as `statfs` names them.
        const EXT_SUPER_MAGIC: i64 = 0xEF53;
        const TMPFS_MAGIC: i64 = 0x0102_1994;
        #[allow(clippy::unnecessary_cast)] // f_type is an i32 on 32-bit targets
        let fs_type = nix::sys::statfs::statfs(&self.root)
            .map(|s| s.filesystem_type().0 as i64)
            .ok();
        match fs_type {
            Some(EXT_SUPER_MAGIC) => match ext4_journal(&self.root) {
                Some(true) => "state root on an ext4 with a journal".into(),
                Some(false) => "state root on an ext4 WITHOUT a journal: its figures grow with \
                                the inodes the runs of the last minutes deleted (TMPDIR=<dir> \
                                to move it)"
                    .into(),
                None => "state root on an ext4".into(),
            },
            Some(TMPFS_MAGIC) => "state root on a tmpfs".into(),
            Some(t) => format!("state root on a file system of type {t:#x}"),
            None => "state root on an unknown file system".into(),
        }
    }

    pub fn runtime_config(&self) -> Result<RuntimeConfig> {
        let mut cfg = RuntimeConfig::new(self.root.clone(), self.run.clone(), self.logs.clone())
            .context("runtime config")?;
        cfg.shim_binary = self.bin.clone();
        cfg.cgroup_parent = self.cgroup_parent.clone();
        cfg.start_timeout = TIMEOUT;
        Ok(cfg)
    }

    pub fn raw_dir(&self) -> PathBuf {
        self.raw.clone()
    }
}

/// Whether the ext4 holding `path` has a journal: its `journal_task` in sysfs reads `<none>`
/// without one. `None` when the kernel does not say.
fn ext4_journal(path: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata(path).ok()?.dev();
    let (major, minor) = (nix::sys::stat::major(dev), nix::sys::stat::minor(dev));
    let block = fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let name = block.file_name()?.to_str()?.to_string();
    let task = fs::read_to_string(format!("/sys/fs/ext4/{name}/journal_task")).ok()?;
    Some(task.trim() != "<none>")
}

/// Durations of one row, in milliseconds.
pub struct Row {
    pub name: &'static str,
    pub ms: Vec<f64>,
}

impl Row {
    pub fn new(name: &'static str) -> Row {
        Row {
            name,
            ms: Vec::new(),
        }
    }
    pub fn push(&mut self, d: Duration) {
        self.ms.push(d.as_secs_f64() * 1000.0);
    }
    pub fn percentile(&self, q: f64) -> f64 {
        percentile(&self.ms, q)
    }
}

/// Busy CPU time of the whole machine so far: user, nice, system, irq, softirq and steal of
/// every CPU (the first line of /proc/stat), at clock-tick resolution (10 ms on Debian's
/// kernels). Differences over a burst tell whether it kept every core busy.
pub fn machine_busy() -> Result<Duration> {
    let stat = fs::read_to_string("/proc/stat").context("read /proc/stat")?;
    let line = stat
        .lines()
        .next()
        .filter(|l| l.starts_with("cpu "))
        .ok_or_else(|| anyhow!("/proc/stat has no cpu line"))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().context("parse /proc/stat"))
        .collect::<Result<_>>()?;
    ensure!(f.len() >= 8, "/proc/stat cpu line has {} fields", f.len());
    // user nice system idle iowait irq softirq steal
    let ticks = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    // SAFETY: sysconf with a constant name.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    ensure!(hz > 0, "sysconf(_SC_CLK_TCK) failed");
    Ok(Duration::from_nanos(ticks * 1_000_000_000 / hz as u64))
}

/// On-CPU time of every thread of a live process so far, in ns
/// (/proc/<pid>/task/*/schedstat, the scheduler's own accounting).
pub fn process_cpu(pid: i32) -> Result<Duration> {
    let tasks = format!("/proc/{pid}/task");
    let mut ns = 0u64;
    for t in fs::read_dir(&tasks).with_context(|| format!("read {tasks}"))? {
        ns += task_cpu_ns(&t.with_context(|| format!("read {tasks}"))?.path())?.unwrap_or(0);
    }
    Ok(Duration::from_nanos(ns))
}

/// On-CPU time of one thread so far, in ns, from its `/proc/<pid>/task/<tid>` directory;
/// `None` for a thread that ended since the listing (it has no file any more).
pub fn task_cpu_ns(task: &Path) -> Result<Option<u64>> {
    let path = task.join("schedstat");
    let Ok(s) = fs::read_to_string(&path) else {
        return Ok(None);
    };
    s.split_whitespace()
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| anyhow!("parse {}", path.display()))
}

/// Linear-interpolated percentile (q in 0..=1) of unsorted samples.
pub fn percentile(samples: &[f64], q: f64) -> f64 {
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

/// The first three fields of /proc/loadavg.
pub fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// `PODVISOR_BENCH_<NAME>` as a positive number, or `default` when unset.
pub fn env_count(name: &str, default: usize) -> Result<usize> {
    let var = format!("PODVISOR_BENCH_{name}");
    match std::env::var(&var) {
        Ok(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| anyhow!("{var}={v:?} is not a positive number")),
        Err(_) => Ok(default),
    }
}

/// Builds the busybox archive in the temp dir and imports it into the state root's store.
pub fn import_busybox(env: &Env) -> Result<Arc<ImageStore>> {
    let archive = env.dir.path().join("busybox-oci.tar");
    image::build_busybox_archive(&archive).context("building the busybox archive")?;
    let images = Arc::new(ImageStore::open(&env.root.join("images")).context("open image store")?);
    images
        .import_archive(&archive, &ImportOptions::default())
        .context("import busybox")?;
    Ok(images)
}

/// The raw libcontainer rows: overlay mount, create+start joining the sandbox's namespaces,
/// and (for information) create+start with fresh namespaces.
pub struct RawRows {
    pub mount: Row,
    pub create_start: Row,
    pub fresh: Row,
}

/// Runs the raw libcontainer baseline: `WARMUP + runs` runs of each variant, alternating so
/// that drift affects both alike. The process must be single-threaded (libcontainer clones
/// its caller without exec); this is checked first.
pub fn raw_baseline(
    env: &Env,
    images: &ImageStore,
    template: &Spec,
    runs: usize,
) -> Result<RawRows> {
    let mut rows = RawRows {
        mount: Row::new("raw overlay mount"),
        create_start: Row::new("raw libcontainer create+start"),
        fresh: Row::new("  raw, fresh namespaces (info)"),
    };
    // A runtime dropped just before may leave a short-lived thread behind for a moment (the
    // cgroup attach warm-up, cgroups::warm).
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut threads = thread_count()?;
    while threads > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        threads = thread_count()?;
    }
    ensure!(
        threads == 1,
        "the raw libcontainer phase needs a single-threaded process, found {threads} threads"
    );
    let layers = lower_layers(images)?;
    for i in 0..WARMUP + runs {
        let (mount, start, _) = raw_run(env, template, &images.layers_dir(), &layers, i, false)
            .with_context(|| format!("raw run {i}"))?;
        let (_, fresh, _) = raw_run(env, template, &images.layers_dir(), &layers, i, true)
            .with_context(|| format!("raw run {i} with fresh namespaces"))?;
        if i >= WARMUP {
            rows.mount.push(mount);
            rows.create_start.push(start);
            rows.fresh.push(fresh);
        }
    }
    Ok(rows)
}

pub fn new_runtime(
    env: &Env,
    images: &Arc<ImageStore>,
) -> Result<(LinuxRuntime, Receiver<RuntimeEvent>)> {
    new_runtime_in(env, images, &env.run)
}

/// A runtime with its own runtime dir `run` (the state root, log dir and cgroup parent are
/// the bench's): sandboxes made in it are none of a daemon's on the bench's runtime dir.
pub fn new_runtime_in(
    env: &Env,
    images: &Arc<ImageStore>,
    run: &Path,
) -> Result<(LinuxRuntime, Receiver<RuntimeEvent>)> {
    let (tx, rx) = mpsc::channel();
    let mut cfg = env.runtime_config()?;
    cfg.run_dir = run.to_path_buf();
    let rt = LinuxRuntime::new(cfg, Arc::clone(images), tx).context("create runtime")?;
    Ok((rt, rx))
}

pub fn template_pod() -> Result<Pod> {
    let name = "bench.yaml";
    let data = TEMPLATE_POD.as_bytes();
    let mut pod = podvisor::pod::manifest::parse_pod(data, name).context("parse template pod")?;
    podvisor::pod::validation::validate(&pod, name).context("validate template pod")?;
    podvisor::staticpod::apply_defaults(&mut pod, name, data);
    Ok(pod)
}

pub fn pod_container(pod: &Pod) -> Result<k8s_openapi::api::core::v1::Container> {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .cloned()
        .ok_or_else(|| anyhow!("template pod has no container"))
}

/// Runs the template container through podvisor and returns the spec it was created from.
/// The container sleeps while its spec is read (a container's runtime directory goes with its
/// end) and the spec gets the template's own command back.
pub fn template_spec(
    rt: &LinuxRuntime,
    rx: &Receiver<RuntimeEvent>,
    pod: &Pod,
    env: &Env,
) -> Result<Spec> {
    template_spec_in(rt, rx, pod, &env.run)
}

/// [`template_spec`] from a runtime whose runtime dir is `run`.
pub fn template_spec_in(
    rt: &LinuxRuntime,
    rx: &Receiver<RuntimeEvent>,
    pod: &Pod,
    run: &Path,
) -> Result<Spec> {
    let template = pod_container(pod)?;
    let mut container = template.clone();
    container.command = Some(vec!["sleep".into(), "3600".into()]);
    let info = rt
        .start_container(&ContainerRequest {
            pod,
            container: &container,
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .context("start template container")?;
    let path = run
        .join("containers")
        .join(&info.meta.id)
        .join("config.json");
    let data = fs::read(&path).with_context(|| format!("read {}", path.display()));
    rt.signal_container(&info.meta.id, libc::SIGKILL)
        .context("stop template container")?;
    wait_exit(rx, &info.meta.id)?;
    rt.remove_container(&info.meta.id)
        .context("remove template container")?;
    let mut spec: Spec =
        serde_json::from_slice(&data?).with_context(|| format!("parse {}", path.display()))?;
    let mut process = spec
        .process()
        .clone()
        .ok_or_else(|| anyhow!("template spec has no process"))?;
    process.set_args(template.command.clone());
    spec.set_process(Some(process));
    Ok(spec)
}

pub fn wait_exit(rx: &Receiver<RuntimeEvent>, id: &str) -> Result<podvisor::runtime::ExitRecord> {
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

pub fn thread_count() -> Result<usize> {
    Ok(fs::read_dir("/proc/self/task")
        .context("read /proc/self/task")?
        .count())
}

/// The busybox image's layer directories relative to the layers directory, topmost first
/// (what the monitor passes to `mount_rootfs`).
pub fn lower_layers(images: &ImageStore) -> Result<Vec<String>> {
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

/// One raw libcontainer run; returns (overlay mount time, build+start time, the instant
/// libcontainer's `start()` returned). With `fresh_ns` the container creates its own
/// namespaces instead of joining the sandbox's.
pub fn raw_run(
    env: &Env,
    template: &Spec,
    layers_dir: &Path,
    layers: &[String],
    i: usize,
    fresh_ns: bool,
) -> Result<(Duration, Duration, Instant)> {
    let id = format!("raw-{}{i}", if fresh_ns { "fresh-" } else { "" });
    let bundle = env.raw_dir().join(&id);
    let youki_root = env.raw_dir().join("youki");
    fs::create_dir_all(&bundle).with_context(|| format!("create {}", bundle.display()))?;
    let paths = RootfsPaths::in_dir(&bundle);

    let t0 = Instant::now();
    rootfs::mount_rootfs(&paths, layers_dir, layers, None).context("mount rootfs")?;
    let mount = t0.elapsed();

    let result = raw_create_start(env, template, &bundle, &youki_root, &paths, &id, fresh_ns);
    // Unmount even when the run failed.
    let unmounted = rootfs::remove_rootfs(&paths).context("remove rootfs");
    let (took, started) = result?;
    unmounted?;
    fs::remove_dir_all(&bundle).with_context(|| format!("remove {}", bundle.display()))?;
    Ok((mount, took, started))
}

/// Raw libcontainer, `n` containers at once: what ten pods arriving together cost this
/// machine without podvisor. `n` processes are forked at once (this one must be
/// single-threaded, as for `raw_baseline`); each mounts its overlay, creates and starts a
/// container with fresh namespaces (a pod's sandbox is new namespaces too) in its own
/// cgroup, and reports when its `start()` returned. Returns the latest of those, measured
/// from just before the first fork: the same span as the daemon's burst, from the first
/// rename to the last container started. `round` keeps the ids of rounds apart.
pub fn raw_burst(
    env: &Env,
    template: &Spec,
    layers_dir: &Path,
    layers: &[String],
    n: usize,
    round: usize,
) -> Result<Duration> {
    use nix::unistd::{fork, pipe, ForkResult};
    use std::io::{Read, Write};

    let threads = thread_count()?;
    ensure!(
        threads == 1,
        "the raw burst forks without exec and needs a single-threaded process, found {threads} threads"
    );
    let (rd, wr) = pipe().context("pipe")?;
    let mut children = Vec::with_capacity(n);
    let t0 = Instant::now();
    for k in 0..n {
        // SAFETY: this process is single-threaded (checked above), so the child may run any
        // code; it leaves with _exit and runs no destructor of the parent's state.
        match unsafe { fork() }.context("fork")? {
            ForkResult::Child => {
                drop(rd);
                let id = 100_000 + round * 100 + k;
                let code = match raw_run(env, template, layers_dir, layers, id, true) {
                    Ok((_, _, started)) => {
                        let ns = started.duration_since(t0).as_nanos() as u64;
                        let mut out = fs::File::from(wr);
                        // One 8-byte write: atomic on a pipe (below PIPE_BUF).
                        match out.write_all(&ns.to_le_bytes()) {
                            Ok(()) => 0,
                            Err(_) => 2,
                        }
                    }
                    Err(e) => {
                        eprintln!("raw burst container {k}: {e:#}");
                        1
                    }
                };
                // SAFETY: ends the forked child without unwinding into the parent's code.
                unsafe { libc::_exit(code) }
            }
            ForkResult::Parent { child } => children.push(child),
        }
    }
    drop(wr);
    let mut data = Vec::new();
    let read = fs::File::from(rd).read_to_end(&mut data);
    let mut failed = 0;
    for child in children {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, 0)) => {}
            _ => failed += 1,
        }
    }
    read.context("read the raw burst's reports")?;
    ensure!(failed == 0, "{failed} of {n} raw burst containers failed");
    ensure!(
        data.len() == n * 8,
        "raw burst: {} bytes of reports, expected {}",
        data.len(),
        n * 8
    );
    let latest = data
        .chunks_exact(8)
        .filter_map(|c| c.try_into().ok().map(u64::from_le_bytes))
        .max()
        .unwrap_or(0);
    Ok(Duration::from_nanos(latest))
}

pub fn raw_create_start(
    env: &Env,
    template: &Spec,
    bundle: &Path,
    youki_root: &Path,
    paths: &RootfsPaths,
    id: &str,
    fresh_ns: bool,
) -> Result<(Duration, Instant)> {
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
    Ok((create + start, t1 + start))
}

/// Removes everything the bench created and verifies nothing is left: mounts under the temp
/// dir, the bench's cgroups in every hierarchy, processes rooted in or running from the temp
/// dir.
pub fn cleanup(env: &Env) -> Result<()> {
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
    let pods_dir = env.run.join("pods");
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
    // Mounts under the temp dir, deepest first; the bench's own tmpfs last.
    let own = env.tmpfs.as_ref().map(|p| p.to_string_lossy().into_owned());
    let mut mounts = mounts_under(base);
    mounts.retain(|m| Some(m) != own.as_ref());
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in &mounts {
        let _ = rootfs::unmount_if_mounted(Path::new(m));
        problems.push(format!("mount {m}"));
    }
    if let Some(at) = &env.tmpfs {
        if let Err(e) = nix::mount::umount(at) {
            problems.push(format!("unmount the bench's tmpfs {}: {e}", at.display()));
        }
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

pub fn mounts_under(base: &Path) -> Vec<String> {
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
pub fn cgroup_dirs(parent: &str) -> Vec<PathBuf> {
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

pub fn remove_cgroup_tree(dir: &Path) -> std::io::Result<()> {
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

/// Processes (other than this one) whose root, cwd or executable is under `dir`, or whose
/// command line names a path under it (the daemon's `--root-dir`, a monitor's container
/// directory).
pub fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir("/proc") else {
        return out;
    };
    let me = std::process::id() as i32;
    let base = dir.to_string_lossy().into_owned();
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmd = fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap_or_default()
            .replace('\0', " ");
        let linked = ["root", "cwd", "exe"].iter().any(|link| {
            fs::read_link(format!("/proc/{pid}/{link}")).is_ok_and(|t| t.starts_with(dir))
        });
        if linked || cmd.contains(&base) {
            out.push((pid, cmd));
        }
    }
    out
}
