//! kernel: what podvisor needs from the Linux kernel, probed once at start, and the pure
//! decision whether this kernel can run the daemon (the kubelet's "system verification" of
//! kubeadm preflight, done by the binary itself).
//!
//! The minimum is **Linux 5.6** (`openat2`); the table below says what each feature is for
//! and since when the kernel has it. Features are probed, never inferred from the version
//! string (vendor kernels backport, and a disabled controller is a boot option, not a
//! version). [`probe`] reads the host; [`check`] is a pure function over what was probed, so
//! every refusal is table-tested. `podvisor run` and `podvisor play` stop at start with one
//! error naming every missing feature instead of failing later in the middle of a pod.
//!
//! | feature | since | what podvisor does with it |
//! |---|---|---|
//! | `pidfd_open(2)`, polling a pidfd | 5.3 | the exit watcher waits on monitors by pidfd (no pid reuse) |
//! | `pidfd_send_signal(2)` | 5.1 | stop signals go to a container's init through its pidfd |
//! | `openat2(2)` with `RESOLVE_IN_ROOT`/`RESOLVE_BENEATH` | 5.6 | subPaths, image layers, `/etc/passwd` of images resolved below their root |
//! | mount, pid, network, IPC, UTS and cgroup namespaces | 4.6 | every container and pod sandbox |
//! | overlay filesystem | 4.0 (multiple lower layers) | container root filesystems |
//! | cgroup `cpu`, `memory`, `pids` controllers (v2: 4.15 for `cpu`) | 4.15 | pod and container limits, OOM detection, `podPidsLimit` |

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;

/// The oldest kernel podvisor supports (the newest of the features in the table).
pub const MINIMUM_KERNEL: &str = "5.6";

/// Namespaces every container uses (`/proc/self/ns/<name>`).
pub const REQUIRED_NAMESPACES: [&str; 6] = ["mnt", "pid", "net", "ipc", "uts", "cgroup"];

/// cgroup controllers pod and container limits need.
pub const REQUIRED_CONTROLLERS: [&str; 3] = ["cpu", "memory", "pids"];

/// The cgroup layout the host booted with, as far as the check cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupProbe {
    /// cgroup v2 mounted at /sys/fs/cgroup: the controllers listed in its root
    /// `cgroup.controllers`.
    Unified { controllers: BTreeSet<String> },
    /// cgroup v1 (or hybrid): the controllers /proc/cgroups lists as enabled and mounted.
    Legacy { controllers: BTreeSet<String> },
    /// Neither a v2 root nor any v1 hierarchy at /sys/fs/cgroup.
    NotMounted,
}

/// What the running kernel offers, as probed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelFeatures {
    /// `uname -r`.
    pub release: String,
    pub pidfd_open: bool,
    pub pidfd_send_signal: bool,
    pub openat2: bool,
    /// Namespace kinds present under /proc/self/ns.
    pub namespaces: BTreeSet<String>,
    /// overlay is registered (/proc/filesystems) or loadable (built in or a module of this
    /// kernel listed in modules.dep / modules.builtin).
    pub overlay: bool,
    pub cgroup: CgroupProbe,
}

/// One thing the kernel lacks, with what it is needed for and how to get it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingFeature {
    /// The feature, as a user would search for it (`openat2(2)`, `memory cgroup controller`).
    pub feature: String,
    /// Why podvisor needs it and what provides it.
    pub detail: String,
}

/// The kernel cannot run podvisor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "kernel {release} lacks what podvisor needs (minimum Linux {MINIMUM_KERNEL}): {}",
    .missing.iter().map(|m| format!("{} ({})", m.feature, m.detail)).collect::<Vec<_>>().join("; ")
)]
pub struct KernelError {
    pub release: String,
    pub missing: Vec<MissingFeature>,
}

fn missing(feature: &str, detail: &str) -> MissingFeature {
    MissingFeature {
        feature: feature.to_string(),
        detail: detail.to_string(),
    }
}

/// Decides whether `f` can run podvisor; the error names every missing feature.
pub fn check(f: &KernelFeatures) -> Result<(), KernelError> {
    let mut out = Vec::new();
    if !f.pidfd_open {
        out.push(missing(
            "pidfd_open(2)",
            "Linux 5.3: container monitors are watched through pidfds",
        ));
    }
    if !f.pidfd_send_signal {
        out.push(missing(
            "pidfd_send_signal(2)",
            "Linux 5.1: stop signals reach a container's init through its pidfd",
        ));
    }
    if !f.openat2 {
        out.push(missing(
            "openat2(2)",
            "Linux 5.6: subPaths and image layers are resolved below their root with it",
        ));
    }
    for ns in REQUIRED_NAMESPACES {
        if !f.namespaces.contains(ns) {
            out.push(missing(
                &format!("{ns} namespace"),
                &format!("CONFIG_{}_NS: every container gets one", ns_config(ns)),
            ));
        }
    }
    if !f.overlay {
        out.push(missing(
            "overlay filesystem",
            "CONFIG_OVERLAY_FS (module overlay): container root filesystems",
        ));
    }
    match &f.cgroup {
        CgroupProbe::NotMounted => out.push(missing(
            "cgroup filesystem",
            "nothing is mounted at /sys/fs/cgroup (cgroup2, or v1 hierarchies)",
        )),
        CgroupProbe::Unified { controllers } | CgroupProbe::Legacy { controllers } => {
            for c in REQUIRED_CONTROLLERS {
                if !controllers.contains(c) {
                    out.push(missing(
                        &format!("{c} cgroup controller"),
                        &controller_hint(c),
                    ));
                }
            }
        }
    }
    if out.is_empty() {
        Ok(())
    } else {
        Err(KernelError {
            release: f.release.clone(),
            missing: out,
        })
    }
}

fn ns_config(ns: &str) -> &'static str {
    match ns {
        "mnt" => "NAMESPACES",
        "pid" => "PID",
        "net" => "NET",
        "ipc" => "IPC",
        "uts" => "UTS",
        _ => "CGROUP",
    }
}

fn controller_hint(c: &str) -> String {
    match c {
        // Raspberry Pi kernels ship the memory controller disabled (cgroup_disable=memory).
        "memory" => "not enabled: add `cgroup_enable=memory cgroup_memory=1` to the kernel \
                     command line (/boot/firmware/cmdline.txt or /boot/cmdline.txt on a \
                     Raspberry Pi) and reboot"
            .to_string(),
        "cpu" => "not enabled: pod and container CPU limits and weights need it (Linux 4.15 \
                  on cgroup v2)"
            .to_string(),
        _ => format!("not enabled: {c} limits need it (CONFIG_CGROUP_PIDS for pids)"),
    }
}

/// Probes the running kernel (syscalls, /proc, /sys/fs/cgroup). Never fails: what cannot be
/// read counts as missing.
pub fn probe() -> KernelFeatures {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "(unknown)".to_string());
    let pidfd = probe_pidfd_open();
    let pidfd_send_signal = match &pidfd {
        Ok(fd) => syscall_exists(probe_pidfd_send_signal(fd)),
        Err(_) => false,
    };
    let namespaces = fs::read_dir("/proc/self/ns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    let overlay = overlay_available(
        &fs::read_to_string("/proc/filesystems").unwrap_or_default(),
        &Path::new("/lib/modules").join(&release),
    );
    KernelFeatures {
        pidfd_open: syscall_exists(pidfd.map(drop)),
        pidfd_send_signal,
        openat2: syscall_exists(probe_openat2()),
        namespaces,
        overlay,
        cgroup: probe_cgroup(
            Path::new("/sys/fs/cgroup"),
            &fs::read_to_string("/proc/cgroups").unwrap_or_default(),
        ),
        release,
    }
}

/// A syscall exists unless it failed with ENOSYS (a seccomp filter's EPERM still means the
/// kernel has it; podvisor's own use will report that error where it happens).
fn syscall_exists(r: io::Result<()>) -> bool {
    !matches!(r, Err(e) if e.raw_os_error() == Some(libc::ENOSYS))
}

fn probe_pidfd_open() -> io::Result<OwnedFd> {
    crate::runtime::procfs::pidfd_open(std::process::id() as i32)
}

fn probe_pidfd_send_signal(fd: &OwnedFd) -> io::Result<()> {
    // Signal 0: permission and existence check only, nothing is delivered.
    crate::runtime::procfs::pidfd_send_signal(fd, 0)
}

fn probe_openat2() -> io::Result<()> {
    use crate::sys::at::{open_root, openat2_in_root};
    use rustix::fs::{OFlags, ResolveFlags};
    let root = open_root(Path::new("/"))?;
    openat2_in_root(
        &root,
        Path::new("."),
        OFlags::PATH,
        ResolveFlags::NO_MAGICLINKS,
    )
    .map(drop)
}

/// Whether overlay is registered, built in, or a module of the running kernel.
fn overlay_available(proc_filesystems: &str, modules_dir: &Path) -> bool {
    if proc_filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("overlay"))
    {
        return true;
    }
    ["modules.builtin", "modules.dep"].iter().any(|f| {
        fs::read_to_string(modules_dir.join(f))
            .map(|t| t.lines().any(lists_overlay_module))
            .unwrap_or(false)
    })
}

/// A modules.dep / modules.builtin line for overlay.ko (compressed or not).
fn lists_overlay_module(line: &str) -> bool {
    let path = line.split(':').next().unwrap_or("");
    let name = path.rsplit('/').next().unwrap_or("");
    name == "overlay.ko" || name.starts_with("overlay.ko.")
}

/// The cgroup layout under `root`; `proc_cgroups` is /proc/cgroups (v1 enablement).
fn probe_cgroup(root: &Path, proc_cgroups: &str) -> CgroupProbe {
    if let Ok(text) = fs::read_to_string(root.join("cgroup.controllers")) {
        return CgroupProbe::Unified {
            controllers: text.split_whitespace().map(str::to_string).collect(),
        };
    }
    let enabled = v1_enabled_controllers(proc_cgroups);
    // A v1 controller counts when it is enabled and mounted (/sys/fs/cgroup/<name>, often a
    // symlink to a co-mounted hierarchy such as cpu,cpuacct).
    let controllers: BTreeSet<String> = enabled
        .into_iter()
        .filter(|c| root.join(c).is_dir())
        .collect();
    if controllers.is_empty() {
        CgroupProbe::NotMounted
    } else {
        CgroupProbe::Legacy { controllers }
    }
}

/// Controllers /proc/cgroups lists with `enabled` 1 (`#subsys_name hierarchy num_cgroups
/// enabled`).
fn v1_enabled_controllers(proc_cgroups: &str) -> BTreeSet<String> {
    proc_cgroups
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4 && f[3] == "1").then(|| f[0].to_string())
        })
        .collect()
}

/// Probes this kernel and checks it (what `podvisor run` and `play` call first).
pub fn verify() -> Result<KernelFeatures, KernelError> {
    let f = probe();
    check(&f)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn complete() -> KernelFeatures {
        KernelFeatures {
            release: "6.1.0-28-arm64".into(),
            pidfd_open: true,
            pidfd_send_signal: true,
            openat2: true,
            namespaces: set(&["mnt", "pid", "net", "ipc", "uts", "cgroup", "user", "time"]),
            overlay: true,
            cgroup: CgroupProbe::Unified {
                controllers: set(&["cpuset", "cpu", "io", "memory", "hugetlb", "pids"]),
            },
        }
    }

    #[test]
    fn check_names_every_missing_feature() {
        type Edit = fn(&mut KernelFeatures);
        let cases: &[(&str, Edit, &[&str])] = &[
            ("complete v2", |_| {}, &[]),
            (
                "complete hybrid",
                |f| {
                    f.cgroup = CgroupProbe::Legacy {
                        controllers: set(&["cpu", "cpuacct", "memory", "pids", "devices"]),
                    }
                },
                &[],
            ),
            (
                "5.4: no openat2",
                |f| f.openat2 = false,
                &["openat2(2) (Linux 5.6"],
            ),
            (
                "5.0: no pidfds at all",
                |f| {
                    f.pidfd_open = false;
                    f.pidfd_send_signal = false;
                    f.openat2 = false;
                },
                &["pidfd_open(2) (Linux 5.3", "pidfd_send_signal(2)", "openat2(2)"],
            ),
            (
                "Raspberry Pi without the memory controller",
                |f| {
                    f.cgroup = CgroupProbe::Unified {
                        controllers: set(&["cpuset", "cpu", "io", "pids"]),
                    }
                },
                &["memory cgroup controller (not enabled: add `cgroup_enable=memory cgroup_memory=1`"],
            ),
            (
                "v1 without pids",
                |f| {
                    f.cgroup = CgroupProbe::Legacy {
                        controllers: set(&["cpu", "memory"]),
                    }
                },
                &["pids cgroup controller"],
            ),
            (
                "no cgroup mount",
                |f| f.cgroup = CgroupProbe::NotMounted,
                &["cgroup filesystem (nothing is mounted at /sys/fs/cgroup"],
            ),
            (
                "no cgroup namespace (before 4.6)",
                |f| {
                    f.namespaces.remove("cgroup");
                }, &["cgroup namespace (CONFIG_CGROUP_NS"],
            ),
            (
                "no overlay",
                |f| f.overlay = false,
                &["overlay filesystem (CONFIG_OVERLAY_FS"],
            ),
        ];
        for (name, edit, want) in cases {
            let mut f = complete();
            edit(&mut f);
            match check(&f) {
                Ok(()) => assert!(want.is_empty(), "{name}: accepted, want {want:?}"),
                Err(e) => {
                    assert_eq!(e.missing.len(), want.len(), "{name}: {e}");
                    let msg = e.to_string();
                    assert!(
                        msg.starts_with(
                            "kernel 6.1.0-28-arm64 lacks what podvisor needs (minimum Linux 5.6): "
                        ),
                        "{name}: {msg}"
                    );
                    for w in *want {
                        assert!(msg.contains(w), "{name}: {msg:?} does not say {w:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn v1_controllers_need_enabled_and_mounted() {
        let dir = tempfile::tempdir().expect("tempdir");
        for c in ["cpu", "memory"] {
            fs::create_dir(dir.path().join(c)).expect("mkdir");
        }
        let proc_cgroups = "#subsys_name\thierarchy\tnum_cgroups\tenabled\n\
                            cpu\t3\t10\t1\nmemory\t4\t10\t0\npids\t5\t10\t1\n";
        // memory is mounted but disabled, pids enabled but not mounted.
        assert_eq!(
            probe_cgroup(dir.path(), proc_cgroups),
            CgroupProbe::Legacy {
                controllers: set(&["cpu"])
            }
        );
        fs::write(dir.path().join("cgroup.controllers"), "cpu memory pids\n").expect("write");
        assert_eq!(
            probe_cgroup(dir.path(), proc_cgroups),
            CgroupProbe::Unified {
                controllers: set(&["cpu", "memory", "pids"])
            }
        );
        let empty = tempfile::tempdir().expect("tempdir");
        assert_eq!(probe_cgroup(empty.path(), ""), CgroupProbe::NotMounted);
    }

    #[test]
    fn overlay_from_proc_or_modules() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(overlay_available(
            "nodev\tproc\nnodev\toverlay\n",
            dir.path()
        ));
        assert!(!overlay_available("nodev\tproc\n", dir.path()));
        fs::write(
            dir.path().join("modules.dep"),
            "kernel/fs/fuse/fuse.ko.xz:\nkernel/fs/overlayfs/overlay.ko.xz:\n",
        )
        .expect("write");
        assert!(overlay_available("nodev\tproc\n", dir.path()));
        fs::write(
            dir.path().join("modules.dep"),
            "kernel/fs/overlayfs2/overlayx.ko:\n",
        )
        .expect("write");
        assert!(!overlay_available("", dir.path()));
    }

    #[test]
    fn this_host_runs_podvisor() {
        let f = probe();
        assert!(f.pidfd_open && f.pidfd_send_signal && f.openat2, "{f:?}");
        check(&f).expect("the development and CI kernels are supported");
    }
}
