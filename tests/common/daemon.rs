//! A `podvisor run` child for the root integration tests: started on a manifest directory
//! with the test's private root, log dir and cgroup parent, its API socket in the test's temp
//! dir and its log in `daemon.log` there; killed and reaped on drop.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use podvisor::status::{EventRecord, PodView};

use super::{wait_until, wait_until_else, TestEnv};

/// How long the daemon may take to answer on its socket.
const API_UP: Duration = Duration::from_secs(30);

pub struct Daemon {
    child: Child,
    pub socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    pub fn start(env: &TestEnv, manifests: &Path) -> Daemon {
        Daemon::start_with(env, manifests, &[])
    }

    /// Starts `podvisor run` with `extra` flags (node name `testnode`, RUST_LOG=info); returns
    /// once its API answers.
    pub fn start_with(env: &TestEnv, manifests: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_with_env(env, manifests, extra, &[])
    }

    /// As [`Daemon::start_with`], with environment variables for the daemon.
    pub fn start_with_env(
        env: &TestEnv,
        manifests: &Path,
        extra: &[&str],
        vars: &[(&str, &Path)],
    ) -> Daemon {
        Daemon::spawn(env, manifests, extra, vars, None)
    }

    /// As [`Daemon::start_with`], the daemon in the network namespace `netns` (its pod
    /// network, host ports and rules are that namespace's).
    pub fn start_in(
        env: &TestEnv,
        manifests: &Path,
        extra: &[&str],
        netns: &super::netns::TestNetns,
    ) -> Daemon {
        Daemon::spawn(env, manifests, extra, &[], Some(netns))
    }

    fn spawn(
        env: &TestEnv,
        manifests: &Path,
        extra: &[&str],
        vars: &[(&str, &Path)],
        netns: Option<&super::netns::TestNetns>,
    ) -> Daemon {
        let socket = env.dir.path().join("api.sock");
        let log_path = env.dir.path().join("daemon.log");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("log");
        let mut cmd = env.podvisor();
        if let Some(ns) = netns {
            ns.enter(&mut cmd);
        }
        let child = cmd
            .arg("run")
            .arg("--pod-manifest-path")
            .arg(manifests)
            .arg("--api-socket")
            .arg(&socket)
            .arg("--hostname-override")
            .arg("testnode")
            .args(extra)
            // No pod network unless the test asks for one (tests/network.rs, each in a network
            // namespace of its own): nothing is written to /etc/cni/net.d, no bridge appears
            // on the host.
            .args(
                (!extra.iter().any(|a| a.starts_with("--cni-conf-dir")))
                    .then_some("--cni-conf-dir="),
            )
            // Tests must not depend on how full this host's disk is: only the memory
            // threshold (node allocatable's) unless a test sets its own.
            .args(
                (!extra.iter().any(|a| a.starts_with("--eviction-hard")))
                    .then_some("--eviction-hard=memory.available<100Mi"),
            )
            .envs(vars.iter().copied())
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start daemon");
        let d = Daemon {
            child,
            socket,
            log: log_path,
        };
        wait_until_else(
            "the daemon's API",
            API_UP,
            || d.pods().is_some(),
            || format!("daemon log:\n{}", d.log()),
        );
        d
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn pods(&self) -> Option<Vec<PodView>> {
        podvisor::api::client::get_json::<Vec<PodView>>(&self.socket, "/pods").ok()
    }

    /// The pod named `name` in its manifest (`<name>-testnode`).
    pub fn pod(&self, name: &str) -> Option<PodView> {
        self.pods()?
            .into_iter()
            .find(|v| v.pod.metadata.name.as_deref() == Some(&format!("{name}-testnode")))
    }

    pub fn events(&self) -> Vec<EventRecord> {
        podvisor::api::client::get_json::<Vec<EventRecord>>(&self.socket, "/events")
            .unwrap_or_default()
    }

    /// Waits until the daemon lists no pod and no container directory is left.
    pub fn wait_all_gone(&self, env: &TestEnv, timeout: Duration) {
        wait_until("every pod and container gone", timeout, || {
            self.pods().is_some_and(|p| p.is_empty())
                && fs::read_dir(env.root.join("containers"))
                    .map(|e| e.count() == 0)
                    .unwrap_or(false)
        });
    }

    /// Whether any container of any pod runs.
    pub fn any_running(&self) -> bool {
        self.pods()
            .into_iter()
            .flatten()
            .flat_map(|v| v.pod.status.and_then(|s| s.container_statuses))
            .flatten()
            .any(|s| s.state.is_some_and(|st| st.running.is_some()))
    }

    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
    }

    /// SIGTERM; the daemon must exit 0 (its containers keep running).
    pub fn stop(mut self) {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM");
        let st = self.child.wait().expect("wait");
        assert!(st.success(), "daemon exit: {st}");
    }

    /// Runs a client command (`pods`, `describe`, ...) against this daemon:
    /// (success, stdout, stderr).
    pub fn cli(&self, env: &TestEnv, args: &[&str]) -> (bool, String, String) {
        let out = Command::new(super::podvisor_bin())
            .arg("--root-dir")
            .arg(&env.root)
            .arg("--runtime-dir")
            .arg(&env.run)
            .args(args)
            .arg("--api-socket")
            .arg(&self.socket)
            .output()
            .expect("cli");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Keeps the daemon log of a failing test (of every run with KEEP_DAEMON_LOG set): copied
/// next to the temp dir's name under /tmp and its path printed, since the temp dir itself is
/// removed when the test ends.
pub struct KeepLogOnPanic(pub PathBuf);

impl Drop for KeepLogOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() || std::env::var_os("KEEP_DAEMON_LOG").is_some() {
            let name = self
                .0
                .parent()
                .and_then(|d| d.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let keep = std::env::temp_dir().join(format!("{name}-daemon.log"));
            if fs::copy(&self.0, &keep).is_ok() {
                eprintln!("daemon log kept at {}", keep.display());
            }
        }
    }
}
