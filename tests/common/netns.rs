//! A network namespace of one test (`ip netns add`, a name unique to the test and process):
//! the pod network tests run their daemon in it, so its bridge, veths, iptables and nftables
//! rules and sysctls are the test's own and never the host's or another test's. Removed (with
//! whatever is still in it) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static SEQ: AtomicU32 = AtomicU32::new(0);

pub struct TestNetns {
    pub name: String,
    /// `/run/netns/<name>`.
    pub path: PathBuf,
}

impl TestNetns {
    pub fn new(tag: &str) -> TestNetns {
        let name = format!(
            "pvt-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        run_ok(Command::new("ip").args(["netns", "add", &name]));
        run_ok(Command::new("ip").args(["-n", &name, "link", "set", "lo", "up"]));
        TestNetns {
            path: PathBuf::from("/run/netns").join(&name),
            name,
        }
    }

    /// A command run in the namespace (`ip netns exec`: for one-shot clients such as curl,
    /// iptables-save, nft).
    pub fn cmd(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `program args` in the namespace: its stdout; panics naming the command on failure.
    pub fn run(&self, program: &str, args: &[&str]) -> String {
        let out = run_ok(self.cmd(program).args(args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `curl` in the namespace: the body, or None when it fails (3 s bound).
    pub fn curl(&self, url: &str) -> Option<String> {
        let out = self
            .cmd("curl")
            .args(["-sS", "-m", "3", "-g", url])
            .output()
            .expect("curl");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Makes `cmd` (not yet spawned) run in this namespace: setns before exec, so the
    /// process keeps the test's mount namespace (its mounts are visible to the test).
    pub fn enter(&self, cmd: &mut Command) {
        use std::os::fd::AsRawFd;
        use std::os::unix::process::CommandExt;
        let f = std::fs::File::open(&self.path).expect("open netns");
        // SAFETY: setns(2) in the child before exec, on a descriptor opened before the fork
        // (kept open by the closure); async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }

    /// Network interfaces in the namespace other than `lo` and the bridges in `bridges`.
    pub fn veths(&self) -> Vec<String> {
        self.run("ip", &["-br", "link"])
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .map(|n| n.split('@').next().unwrap_or(n).to_string())
            .filter(|n| n.starts_with("veth"))
            .collect()
    }

    /// Rules and chains of one attachment the plugins make (iptables and nftables views):
    /// portmap's `CNI-DN-*` chains, bridge's per-container masquerade chain `CNI-<24 hex>`,
    /// any rule naming one of `ips` or carrying a container id comment.
    pub fn per_pod_rules(&self, ips: &[String]) -> Vec<String> {
        let mut text = self.run("iptables-save", &[]);
        text.push_str(&self.run("ip6tables-save", &[]));
        let mut out: Vec<String> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| {
                l.contains("CNI-DN-")
                    || l.contains(" id: \\\"")
                    || is_masq_chain(l)
                    || ips.iter().any(|ip| l.contains(&format!("{ip}/")))
            })
            .map(String::from)
            .collect();
        if Path::new("/usr/sbin/nft").exists() {
            let nft = self.run("nft", &["list", "ruleset"]);
            out.extend(
                nft.lines()
                    .filter(|l| {
                        l.contains("CNI-DN-")
                            || is_masq_chain(l)
                            || ips.iter().any(|ip| l.contains(ip.as_str()))
                    })
                    .map(|l| format!("nft: {}", l.trim())),
            );
        }
        out
    }
}

/// A bridge plugin masquerade chain name (`CNI-` + 24 hex digits) anywhere in `line`.
fn is_masq_chain(line: &str) -> bool {
    line.match_indices("CNI-").any(|(i, _)| {
        let rest = &line[i + 4..];
        rest.len() >= 24
            && rest[..24].chars().all(|c| c.is_ascii_hexdigit())
            && !rest[24..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn");
    assert!(
        out.status.success(),
        "{cmd:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}
