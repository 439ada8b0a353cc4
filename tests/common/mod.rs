//! Shared harness of the root integration tests: a private state root, log root and cgroup
//! parent per test (tests run in parallel), a busybox OCI archive built offline from Debian's
//! busybox-static, and leak checks (mounts, cgroups, processes) at the end of each test.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use podvisor::images::{ImageStore, ImportOptions};
use podvisor::runtime::daemon::{LinuxRuntime, RuntimeConfig};
use podvisor::runtime::{ExitRecord, RuntimeEvent};

pub mod daemon;
pub mod image;
pub mod netns;
pub mod registry;
#[allow(dead_code)]
pub mod smallfs;

pub use image::BUSYBOX;

/// The podvisor binary under test: this build's, or `PODVISOR_TEST_BIN` (to measure another
/// build with the same tests).
pub fn podvisor_bin() -> PathBuf {
    match std::env::var_os("PODVISOR_TEST_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_podvisor")),
    }
}

/// Waits for `child` (its stderr piped) and returns whether it exited 0, its stderr and its
/// peak RSS in bytes (`ru_maxrss` from wait4).
pub fn wait_with_peak_rss(mut child: std::process::Child) -> (bool, String, u64) {
    use std::io::Read;
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our child and not reaped yet (std's Child does not reap on drop);
    // both pointers are to live locals.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(rc, pid, "wait4: {}", std::io::Error::last_os_error());
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    (
        ok,
        stderr,
        u64::try_from(usage.ru_maxrss).expect("ru_maxrss") << 10,
    )
}

/// Fails unless the test runs as root. Every test that calls it (directly or through
/// [`TestEnv::new`]) is `#[ignore = "needs root: ..."]`, so a `cargo test` without root lists
/// it as ignored with its reason; `scripts/test` runs them all (`-- --include-ignored`, as
/// root) and fails if any test was ignored. Never a silent skip: run without root, such a
/// test fails here.
pub fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test creates real containers, cgroups or mounts and must run as root \
         (scripts/test, or `cargo test -- --include-ignored` as root)"
    );
    // Monitors orphaned by a killed "daemon" in a test are re-parented to the test process
    // (not to PID 1, which may not reap here), so nothing is left as a zombie.
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
}

/// How often [`wait_until`] checks its condition.
const POLL: Duration = Duration::from_millis(50);

/// Polls `cond` every 50 ms until it holds; fails naming `what` after `timeout`. The one way
/// the integration tests wait for something to happen: the timeout only bounds how long the
/// test waits before it gives up (generous, for loaded machines), it is never a performance
/// assert (those belong in benchmarks).
/// Init pid of a container (`podvisor://<id>` or `<id>`) from its monitor's state file.
pub fn init_pid(env: &TestEnv, container_id: &str) -> i32 {
    let id = container_id.trim_start_matches("podvisor://");
    let state: serde_json::Value = serde_json::from_slice(
        &fs::read(env.run.join("containers").join(id).join("state.json")).expect("state"),
    )
    .expect("json");
    state["init"]["pid"].as_i64().expect("pid") as i32
}

pub fn wait_until(what: &str, timeout: Duration, cond: impl FnMut() -> bool) {
    wait_until_else(what, timeout, cond, String::new);
}

/// [`wait_until`], with `state()` (what was seen last) appended to the failure message.
pub fn wait_until_else(
    what: &str,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
    state: impl FnOnce() -> String,
) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() >= deadline {
            let state = state();
            let sep = if state.is_empty() { "" } else { ": " };
            panic!("timed out after {timeout:?} waiting for {what}{sep}{state}");
        }
        std::thread::sleep(POLL);
    }
}

/// A private environment for one test.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    /// The runtime dir (`--runtime-dir`; on this host's disk, not a tmpfs).
    pub run: PathBuf,
    pub logs: PathBuf,
    pub cgroup_parent: String,
    /// The boot ID podvisor sees (`--boot-id-file`): the kernel's at first;
    /// [`TestEnv::simulate_boot`] changes it.
    pub boot_id_file: PathBuf,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl TestEnv {
    pub fn new(name: &str) -> TestEnv {
        require_root();
        let dir = tempfile::Builder::new()
            .prefix(&format!("podvisor-{name}-"))
            .tempdir()
            .expect("tempdir");
        let root = dir.path().join("root");
        let run = dir.path().join("run");
        let logs = dir.path().join("logs");
        fs::create_dir_all(&root).expect("root");
        let boot_id_file = dir.path().join("boot_id");
        fs::copy(podvisor::runtime::rundir::BOOT_ID_FILE, &boot_id_file).expect("boot id");
        let cgroup_parent = format!(
            "podvisor-test-{}-{}-{}",
            name,
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        TestEnv {
            dir,
            root,
            run,
            logs,
            cgroup_parent,
            boot_id_file,
        }
    }

    /// Gives podvisor a new boot ID, as a reboot would.
    pub fn simulate_boot(&self, n: u32) {
        fs::write(
            &self.boot_id_file,
            format!("00000000-0000-4000-8000-{n:012}\n"),
        )
        .expect("write boot id");
    }

    /// Does to this environment what a reboot or a power cut does to a node (the daemon must
    /// be stopped first): every container and monitor is killed, everything mounted under the
    /// temp dir (pinned namespaces, /dev/shm, rootfs overlays, memory volumes) is unmounted,
    /// the test's cgroups are removed. Then the node boots `boot`: a new boot ID, and with
    /// `clear_run_dir` an empty runtime dir (a tmpfs /run); without it the runtime dir keeps
    /// the earlier boot's files, as a runtime dir on disk would.
    pub fn simulate_reboot(&self, boot: u32, clear_run_dir: bool) {
        const KILLED: Duration = Duration::from_secs(30);
        let kill = |pids: &[i32]| {
            for &pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            reap_zombies();
        };
        // Monitors first, as a power cut would stop them: none may see its container end and
        // record an exit.
        let monitors = |run: &Path| -> Vec<i32> {
            let needle = format!("shim run {}", run.display());
            fs::read_dir("/proc")
                .map(|r| {
                    r.flatten()
                        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                        .filter(|pid| {
                            fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                                String::from_utf8_lossy(&c)
                                    .replace('\0', " ")
                                    .contains(&needle)
                            })
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        wait_until_else(
            "every monitor killed",
            KILLED,
            || {
                let pids = monitors(&self.run);
                kill(&pids);
                pids.is_empty()
            },
            || format!("alive after SIGKILL: {:?}", monitors(&self.run)),
        );
        let procs = || {
            let mut procs = processes_under(self.dir.path());
            procs.extend(processes_in_cgroup(&self.cgroup_parent));
            procs
        };
        wait_until_else(
            "every process of the test killed",
            KILLED,
            || {
                let pids: Vec<i32> = procs().into_iter().map(|(pid, _)| pid).collect();
                kill(&pids);
                pids.is_empty()
            },
            || format!("alive after SIGKILL: {:?}", procs()),
        );
        reap_zombies();
        for m in mounts_under(self.dir.path()).iter().rev() {
            match nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH) {
                // Listed twice, or gone with its parent.
                Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
                Err(e) => panic!("unmount {m}: {e}"),
            }
        }
        for top in cgroup_dirs(&self.cgroup_parent) {
            remove_cgroup_tree(&top);
        }
        if clear_run_dir {
            fs::remove_dir_all(&self.run).expect("clear the runtime dir");
        }
        self.simulate_boot(boot);
    }

    /// The podvisor binary with this environment's root, log dir and cgroup parent.
    pub fn podvisor(&self) -> std::process::Command {
        let mut c = std::process::Command::new(podvisor_bin());
        c.arg("--root-dir")
            .arg(&self.root)
            .arg("--runtime-dir")
            .arg(&self.run)
            .arg("--boot-id-file")
            .arg(&self.boot_id_file)
            .arg("--log-dir")
            .arg(&self.logs)
            .arg("--cgroup-parent")
            .arg(&self.cgroup_parent);
        c
    }

    pub fn config(&self) -> RuntimeConfig {
        let mut cfg = RuntimeConfig::new(self.root.clone(), self.run.clone(), self.logs.clone())
            .expect("config");
        cfg.boot_id_file = self.boot_id_file.clone();
        cfg.shim_binary = podvisor_bin();
        cfg.cgroup_parent = self.cgroup_parent.clone();
        cfg.start_timeout = Duration::from_secs(30);
        cfg
    }

    pub fn images(&self) -> Arc<ImageStore> {
        let store = ImageStore::open(&self.root.join("images")).expect("image store");
        if store.resolve(BUSYBOX).expect("resolve").is_none() {
            store
                .import_archive(busybox_archive(), &ImportOptions::default())
                .expect("import busybox");
        }
        Arc::new(store)
    }

    pub fn runtime(&self) -> (LinuxRuntime, Receiver<RuntimeEvent>) {
        self.runtime_with(self.config())
    }

    pub fn runtime_with(&self, cfg: RuntimeConfig) -> (LinuxRuntime, Receiver<RuntimeEvent>) {
        let (tx, rx) = mpsc::channel();
        let rt = LinuxRuntime::new(cfg, self.images(), tx).expect("runtime");
        (rt, rx)
    }

    /// Asserts that nothing of this environment is left: no mount under the temp dir, no
    /// cgroup under the test's parent, no process rooted in or running from the temp dir.
    pub fn assert_clean(&self) {
        let mounts = mounts_under(self.dir.path());
        assert!(mounts.is_empty(), "mounts left behind: {mounts:?}");
        let mut cgroups = Vec::new();
        let subdirs = |dir: &Path| -> Vec<PathBuf> {
            fs::read_dir(dir)
                .map(|entries| {
                    entries
                        .flatten()
                        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
                        .map(|e| e.path())
                        .collect()
                })
                .unwrap_or_default()
        };
        for top in cgroup_dirs(&self.cgroup_parent) {
            for dir in subdirs(&top) {
                // The QoS tiers stay for the node's life, as the kubelet's do: left empty,
                // they are not a pod's leftovers.
                let tier = dir
                    .file_name()
                    .is_some_and(|n| n == "burstable" || n == "besteffort");
                if tier {
                    cgroups.extend(subdirs(&dir));
                } else {
                    cgroups.push(dir);
                }
            }
        }
        assert!(cgroups.is_empty(), "cgroups left behind: {cgroups:?}");
        let mut procs = processes_under(self.dir.path());
        procs.extend(processes_in_cgroup(&self.cgroup_parent));
        assert!(procs.is_empty(), "processes left behind: {procs:?}");
    }
}

/// Mount points under `dir` (from /proc/self/mountinfo), sorted: parents first.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let base = dir.to_string_lossy().to_string();
    let mut mounts: Vec<String> = fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_string))
        .filter(|m| m.starts_with(&base))
        .collect();
    mounts.sort();
    mounts
}

/// Starts container `idx` of `pod` (an app container) with `restart_count`.
pub fn start_container(
    rt: &impl podvisor::runtime::Runtime,
    pod: &Pod,
    idx: usize,
    restart_count: u32,
) -> podvisor::runtime::ContainerInfo {
    let c = &pod.spec.as_ref().expect("spec").containers[idx];
    rt.start_container(&podvisor::runtime::ContainerRequest {
        pod,
        container: c,
        kind: podvisor::runtime::ContainerKind::App,
        restart_count,
    })
    .expect("start container")
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        // A test that failed half-way may leave containers, mounts and cgroups: kill what runs
        // from the temp dir, unmount everything under it (deepest first) and remove the test's
        // cgroups, so a failure never leaks into the machine or other tests.
        // First a daemon or `play` of this environment that the test did not stop (an
        // assertion failed before): it would make again what is removed below.
        for (pid, _) in processes_naming(self.dir.path()) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let mut stray = processes_under(self.dir.path());
        stray.extend(processes_in_cgroup(&self.cgroup_parent));
        for (pid, _) in stray {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        for m in mounts_under(self.dir.path()).iter().rev() {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
        for top in cgroup_dirs(&self.cgroup_parent) {
            remove_cgroup_tree(&top);
        }
        reap_zombies();
    }
}

fn remove_cgroup_tree(dir: &Path) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                remove_cgroup_tree(&e.path());
            }
        }
    }
    let _ = fs::remove_dir(dir);
}

/// The test's top-level cgroup in every hierarchy.
pub fn cgroup_dirs(parent: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    if root.join("cgroup.controllers").exists() {
        return vec![root.join(parent)];
    }
    let mut out = Vec::new();
    if let Ok(entries) = fs::read_dir(root) {
        for e in entries.flatten() {
            if e.file_name() != "unified" {
                out.push(e.path().join(parent));
            }
        }
    }
    out
}

/// Every process (pid, command line with spaces for NULs) for which `keep` holds.
fn processes_where(keep: impl Fn(i32, &str) -> bool) -> Vec<(i32, String)> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<i32>().ok())
        .filter_map(|pid| {
            let cmd = fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap_or_default()
                .replace('\0', " ");
            keep(pid, &cmd).then_some((pid, cmd))
        })
        .collect()
}

/// Processes in a cgroup below `parent` (containers live in `/<parent>/pod<uid>/<id>`; a
/// process in another mount namespace shows its own root as `/`, so this is how containers
/// are found).
pub fn processes_in_cgroup(parent: &str) -> Vec<(i32, String)> {
    let needle = format!("/{parent}/");
    processes_where(|pid, cmd| {
        !cmd.is_empty()
            && fs::read_to_string(format!("/proc/{pid}/cgroup"))
                .unwrap_or_default()
                .contains(&needle)
    })
}

/// Processes whose root, cwd or executable is under `dir`.
pub fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    processes_where(|pid, _| {
        ["root", "cwd", "exe"].iter().any(|link| {
            fs::read_link(format!("/proc/{pid}/{link}")).is_ok_and(|t| t.starts_with(dir))
        })
    })
}

/// Processes whose command line names `dir` (a daemon, `play` or monitor given this
/// environment's directories), other than this one.
pub fn processes_naming(dir: &Path) -> Vec<(i32, String)> {
    let want = format!("{}/", dir.to_string_lossy());
    let me = std::process::id() as i32;
    processes_where(|pid, cmd| pid != me && cmd.contains(&want))
}

/// Reaps zombie monitors (`podvisor-shim`) re-parented to the test process after the
/// "daemon" that spawned them was killed; every other child is reaped by its owner.
pub fn reap_zombies() {
    reap_zombies_named(&["podvisor-shim"]);
}

/// Reaps zombie children of the test process whose command name is in `names`.
pub fn reap_zombies_named(names: &[&str]) {
    let me = std::process::id() as i32;
    let Ok(entries) = fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let comm = stat
            .get(stat.find('(').map(|i| i + 1).unwrap_or(0)..close)
            .unwrap_or("");
        let mut f = stat[close + 1..].split_whitespace();
        let state = f.next().unwrap_or("");
        let ppid: i32 = f.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if state == "Z" && ppid == me && names.contains(&comm) {
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

/// Parses a manifest, validates it and gives it a unique UID.
pub fn pod(yaml: &str) -> Pod {
    let mut pod = podvisor::pod::manifest::parse_pod(yaml.as_bytes(), "test.yaml").expect("parse");
    podvisor::pod::validation::validate(&pod, "test.yaml").expect("valid");
    let seed = format!(
        "{yaml}{}{}{:?}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed),
        Instant::now()
    );
    podvisor::staticpod::apply_defaults(&mut pod, &seed, yaml.as_bytes());
    pod
}

/// Waits for the exit event of container `id`.
pub fn wait_exit(rx: &Receiver<RuntimeEvent>, id: &str, timeout: Duration) -> ExitRecord {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(RuntimeEvent::ContainerExited { id: got, exit, .. }) if got == id => return exit,
            Ok(_) => continue,
            Err(e) => panic!("no exit event for {id} within {timeout:?}: {e}"),
        }
    }
}

/// Reads whole lines of a CRI log (all rotated files included) as strings.
pub fn log_lines(path: &Path) -> Vec<String> {
    podvisor::logs::read_log(
        path,
        podvisor::logs::ReadOptions {
            tail: None,
            include_rotated: true,
        },
    )
    .expect("read log")
    .into_iter()
    .map(|l| String::from_utf8_lossy(&l.content).into_owned())
    .collect()
}

/// A busybox OCI archive (gzip layer), built once per test process from /bin/busybox.
/// The archive is a cache shared by test processes: built into a temporary name and renamed,
/// keyed by the busybox binary's hash and the image name, so it is built once per machine and never half-read.
pub fn busybox_archive() -> &'static Path {
    static ARCHIVE: OnceLock<PathBuf> = OnceLock::new();
    ARCHIVE.get_or_init(|| {
        let busybox = fs::read("/bin/busybox").expect("busybox-static must be installed");
        // The image name is part of the key: archives named differently never mix.
        let mut keyed = busybox.clone();
        keyed.extend_from_slice(BUSYBOX.as_bytes());
        let key = &image::sha256_hex(&keyed)[..16];
        let dir = std::env::temp_dir().join("podvisor-test-cache");
        fs::create_dir_all(&dir).expect("image dir");
        let path = dir.join(format!("busybox-oci-{key}.tar"));
        if !path.exists() {
            let tmp = dir.join(format!(".busybox-oci-{key}.{}.tmp", std::process::id()));
            image::build_busybox_archive(&tmp).expect("build busybox archive");
            fs::rename(&tmp, &path).expect("rename archive");
        }
        path
    })
}
