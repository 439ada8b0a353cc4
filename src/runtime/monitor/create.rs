//! monitor::create: the monitor's container creation (steps 2-3 of the monitor, see
//! `monitor`): the overlay rootfs, the image user, the output pipes or console socket, libcontainer's create
//! and start (joining a pod's user namespace and idmapping its mounts first), and the cgroup
//! values libcontainer does not write the kubelet's way (swap off, the linear cpu.weight, the
//! systemd scope's device filter).

use super::super::container::io_err;
use super::super::container::read_json;
use super::super::container::ContainerPaths;
use super::super::container::ShimError;
use super::super::procfs::ProcessId;
use super::super::protocol::ShimConfig;
use super::super::protocol::ShimState;
use super::super::protocol::GO;
use super::super::protocol::READY_FD;
use super::super::rootfs;
use super::attach;
use super::set_nonblocking;
use crate::cgroups::CgroupRoot;
use crate::fsutil;
use nix::unistd::Pid;
use std::fs;
use std::io;
use std::io::Read;
use std::os::fd::AsFd;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::path::PathBuf;

/// Capability number of CAP_SYS_RESOURCE (linux/capability.h).
const CAP_SYS_RESOURCE: u32 = 24;

pub(super) struct Started {
    pub(super) init: Pid,
    pub(super) started_at: String,
    /// The stdout pipe, or the pty master of a tty container.
    pub(super) stdout: OwnedFd,
    /// `None` for a tty container (one stream).
    pub(super) stderr: Option<OwnedFd>,
    pub(super) io: attach::ContainerIo,
}

/// How the container's output reaches the monitor.
enum Output {
    /// Listening for the pty master libcontainer sends (tty containers).
    Console(std::os::unix::net::UnixListener),
    /// stdout and stderr pipes (read ends).
    Pipes(OwnedFd, OwnedFd),
}

/// The user namespace the spec joins by path, with the first host ID of its uidMappings.
fn user_namespace(spec: &oci_spec::runtime::Spec) -> Option<(PathBuf, u32)> {
    let linux = spec.linux().as_ref()?;
    let path = linux
        .namespaces()
        .iter()
        .flatten()
        .find(|n| n.typ() == oci_spec::runtime::LinuxNamespaceType::User)?
        .path()
        .clone()?;
    let base = linux.uid_mappings().as_ref()?.first()?.host_id();
    Some((path, base))
}

/// Binds a unix socket by its name inside `dir` (socket paths are limited to 108 bytes and
/// runtime dirs can be long), restoring the working directory.
fn bind_in(dir: &Path, name: &str) -> Result<std::os::unix::net::UnixListener, ShimError> {
    let path = dir.join(name);
    let _ = fs::remove_file(&path);
    let back = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    std::env::set_current_dir(dir).map_err(io_err(dir))?;
    let bound = std::os::unix::net::UnixListener::bind(name);
    let _ = std::env::set_current_dir(back);
    bound.map_err(io_err(&path))
}

/// A staged monitor ([`ShimConfig::staged`]) waits here for the runtime's go on `ready`.
fn await_go(ready: Option<&fs::File>) -> Result<(), ShimError> {
    let Some(mut ready) = ready else {
        return Err(ShimError::CalledOff);
    };
    let mut byte = [0u8; 1];
    loop {
        match ready.read(&mut byte) {
            Ok(1) if byte[0] == GO => return Ok(()),
            Ok(_) => return Err(ShimError::CalledOff),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(ShimError::Io {
                    path: PathBuf::from(format!("/proc/self/fd/{READY_FD}")),
                    source,
                })
            }
        }
    }
}

/// Creates and starts the container. A staged monitor mounts the rootfs first, waits for the
/// go on `ready`, then reads `cfg` again (the runtime completed it with the spec).
pub(super) fn create_and_start(
    paths: &ContainerPaths,
    cfg: &mut ShimConfig,
    state: &mut ShimState,
    ready: Option<&fs::File>,
) -> Result<Started, ShimError> {
    let rootfs = paths.rootfs();
    let staged = cfg.staged;
    if staged {
        rootfs::mount_rootfs(&rootfs, &cfg.layers_dir, &cfg.lower_layers, None)?;
        crate::tp!("mon.rootfs");
        await_go(ready)?;
        crate::tp!("mon.go");
        *cfg = ContainerPaths::open(&paths.dir)?.1;
    }
    let cfg = &*cfg;
    let config_path = paths.config();
    let mut spec: oci_spec::runtime::Spec = read_json(&config_path)?;
    // hostUsers: false: the pod's user namespace, which the rootfs and every bind mount are
    // idmapped through (the spec joins it by path; its uidMappings say where it starts).
    let userns = user_namespace(&spec)
        .map(|(path, base)| {
            fs::File::open(&path)
                .map(|f| (f, base))
                .map_err(io_err(&path))
        })
        .transpose()?;
    let idmap = userns.as_ref().map(|(f, base)| rootfs::IdMap {
        userns: f.as_fd(),
        base: *base,
    });
    if !staged {
        crate::tp!("mon.spec_read");
        rootfs::mount_rootfs(&rootfs, &cfg.layers_dir, &cfg.lower_layers, idmap)?;
        crate::tp!("mon.rootfs");
    } else if idmap.is_some() {
        return Err(ShimError::StagedUserNamespace);
    }
    if let Some(idmap) = idmap {
        let mut mounts = spec.mounts().clone().unwrap_or_default();
        rootfs::idmap_bind_sources(&rootfs.idmapped, &mut mounts, idmap)?;
        spec.set_mounts(Some(mounts));
    }
    // Resolve the user against the image's /etc/passwd and /etc/group, now that the rootfs
    // is mounted, and put it into the spec libcontainer will read.
    let user = crate::runtime::spec::resolve_user(&rootfs.rootfs, &cfg.user)?;
    let cpu_shares = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.cpu().as_ref())
        .and_then(|c| c.shares());
    let device_rules = spec
        .linux()
        .as_ref()
        .and_then(|l| l.resources().as_ref())
        .and_then(|r| r.devices().clone());
    let own_oom = fs::read_to_string("/proc/self/oom_score_adj").ok();
    if let Some(mut process) = spec.process().clone() {
        process.set_user(user);
        // Lowering oom_score_adj below our own needs CAP_SYS_RESOURCE, which some hosts
        // (containers, VMs with a reduced bounding set) do not grant even to root; the
        // container then gets our own value rather than failing to start.
        let own: Option<i32> = own_oom.as_deref().and_then(|v| v.trim().parse().ok());
        if let (Some(want), Some(own)) = (process.oom_score_adj(), own) {
            if want < own && !crate::runtime::procfs::has_effective_cap(CAP_SYS_RESOURCE) {
                log::warn!(
                    "container {}: oom_score_adj {want} needs CAP_SYS_RESOURCE; using {own}",
                    cfg.id
                );
                process.set_oom_score_adj(Some(own));
            }
        }
        spec.set_process(Some(process));
    }
    // libcontainer takes the spec as built here; config.json gets it once the container
    // started (below), off the path to the process, before anything can exec into it.
    crate::tp!("mon.spec_written");

    let tty = spec
        .process()
        .as_ref()
        .and_then(|p| p.terminal())
        .unwrap_or(false);
    let pipe = || {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|source| ShimError::Sys {
            what: "pipe",
            source,
        })
    };
    let null = || -> Result<OwnedFd, ShimError> {
        Ok(fs::File::open("/dev/null")
            .map_err(io_err(Path::new("/dev/null")))?
            .into())
    };
    let attach_listener = bind_in(&paths.dir, attach::ATTACH_SOCKET)?;
    let mut builder = libcontainer::container::builder::ContainerBuilder::new(
        cfg.id.clone(),
        libcontainer::syscall::syscall::SyscallType::default(),
    )
    .with_root_path(&cfg.youki_root)?;
    let mut stdin_w = None;
    let output = if tty {
        let listener = bind_in(&paths.dir, attach::CONSOLE_SOCKET)?;
        builder = builder
            .with_console_socket(Some(paths.dir.join(attach::CONSOLE_SOCKET)))
            .with_stdin(null()?)
            .with_stdout(null()?)
            .with_stderr(null()?);
        Output::Console(listener)
    } else {
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let stdin = if cfg.stdin {
            let (in_r, in_w) = pipe()?;
            stdin_w = Some(in_w);
            in_r
        } else {
            null()?
        };
        builder = builder
            .with_stdin(stdin)
            .with_stdout(out_w)
            .with_stderr(err_w);
        Output::Pipes(out_r, err_r)
    };
    let build = builder
        .validate_id()?
        .as_init(&paths.dir)
        .with_spec(spec.clone())
        .with_systemd(cfg.systemd_cgroup)
        .as_sibling(false)
        .with_detach(true)
        .build();
    // build() writes the container's oom_score_adj into our own; the monitor keeps its own.
    if let Some(v) = own_oom {
        let _ = fs::write("/proc/self/oom_score_adj", v.trim());
    }
    crate::tp!("mon.built");
    let mut container = build?;
    let init = container.pid().ok_or(ShimError::Sys {
        what: "libcontainer returned no init pid",
        source: nix::Error::ESRCH,
    })?;
    let (stdout, stderr, master, input) = match output {
        Output::Console(listener) => {
            let master = crate::runtime::console::receive_master(&listener).map_err(|e| {
                ShimError::Terminal {
                    message: e.to_string(),
                }
            });
            drop(listener);
            let _ = fs::remove_file(paths.dir.join(attach::CONSOLE_SOCKET));
            let master = master?;
            let dup = |what| {
                master.try_clone().map_err(|e| ShimError::Sys {
                    what,
                    source: nix::Error::from_raw(e.raw_os_error().unwrap_or(libc::EIO)),
                })
            };
            let reader = dup("dup pty master")?;
            let input = if cfg.stdin {
                let w = dup("dup pty master")?;
                set_nonblocking(&w)?;
                Some(w)
            } else {
                None
            };
            (reader, None, Some(master), input)
        }
        Output::Pipes(out_r, err_r) => {
            if let Some(w) = &stdin_w {
                set_nonblocking(w)?;
            }
            (out_r, Some(err_r), None, stdin_w)
        }
    };
    let io = attach::ContainerIo::new(
        cfg.id.clone(),
        tty,
        cfg.stdin_once,
        master,
        input,
        Some(attach_listener),
    );
    state.init = Some(ProcessId::of(init.as_raw())?);
    fsutil::write_json_atomic_volatile(&paths.state(), &state).map_err(io_err(&paths.state()))?;
    kubelet_v2_values(&cfg.cgroup_root, &cfg.cgroup_path, cpu_shares)?;
    if cfg.systemd_cgroup {
        scope_device_filter(cfg, device_rules)?;
    }
    crate::tp!("mon.created");
    container.start()?;
    crate::tp!("mon.started");
    let started_at = crate::runtime::now_rfc3339();
    // What an exec into the container reads (its user resolved above). The runtime learns of
    // the start only after this, so no exec can come first.
    fsutil::write_json_atomic_volatile(&config_path, &spec).map_err(io_err(&config_path))?;
    state.started_at = Some(started_at.clone());
    fsutil::write_json_atomic_volatile(&paths.state(), &state).map_err(io_err(&paths.state()))?;
    Ok(Started {
        init,
        started_at,
        stdout,
        stderr,
        io,
    })
}

/// cgroup v2 values libcontainer sets differently from the kubelet, written between create and
/// start so the process never runs without them (no-op on v1):
/// - `memory.swap.max=0` for every container: the kubelet's NoSwap behaviour (libcontainer
///   leaves `max`); skipped when the host has no swap accounting (no such file),
/// - `cpu.weight` from the spec's cpu shares with the kubelet's linear mapping
///   (`1 + (shares-2)*9999/262142`): libcontainer 0.7 uses runc 1.3's quadratic one, which
///   would not match the pod and tier weights podvisor writes.
fn kubelet_v2_values(
    cgroup_root: &Path,
    cgroup_path: &str,
    cpu_shares: Option<u64>,
) -> Result<(), ShimError> {
    let root = CgroupRoot::new(cgroup_root);
    if root.mode() != crate::cgroups::CgroupMode::Unified {
        return Ok(());
    }
    let dir = root.dir("memory", cgroup_path);
    let mut writes = vec![("memory.swap.max", "0".to_string())];
    if let Some(shares) = cpu_shares {
        writes.push((
            "cpu.weight",
            crate::cgroups::resources::shares_to_weight(shares).to_string(),
        ));
    }
    for (file, value) in writes {
        let path = dir.join(file);
        if path.exists() {
            fs::write(&path, value).map_err(io_err(&path))?;
        }
    }
    Ok(())
}

/// Attaches the container's device filter (the same eBPF program libcgroups' v2 manager
/// attaches with cgroupfs) to its systemd scope: libcontainer's systemd manager sets no device
/// rules (youki 0.7 maps none to `DeviceAllow=`), and without this a container holding
/// CAP_MKNOD could open any host device. Written between create and start, so the process
/// never runs without it.
#[cfg(feature = "systemd-cgroup")]
fn scope_device_filter(
    cfg: &ShimConfig,
    rules: Option<Vec<oci_spec::runtime::LinuxDeviceCgroup>>,
) -> Result<(), ShimError> {
    let dir = CgroupRoot::new(&cfg.cgroup_root).dir("devices", &cfg.cgroup_path);
    libcgroups::v2::devices::Devices::apply_devices(&dir, &rules).map_err(|e| ShimError::Devices {
        path: dir.clone(),
        message: e.to_string(),
    })
}

/// Without the systemd driver built in, no container is a systemd scope.
#[cfg(not(feature = "systemd-cgroup"))]
fn scope_device_filter(
    cfg: &ShimConfig,
    _rules: Option<Vec<oci_spec::runtime::LinuxDeviceCgroup>>,
) -> Result<(), ShimError> {
    Err(ShimError::Devices {
        path: cfg
            .cgroup_root
            .join(cfg.cgroup_path.trim_start_matches('/')),
        message: "this podvisor was built without the systemd-cgroup feature".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v2_container_gets_no_swap_and_the_kubelet_cpu_weight() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        fs::write(r.join("cgroup.controllers"), "cpu memory\n").expect("w");
        let c = r.join("pv/podu/c1");
        fs::create_dir_all(&c).expect("mkdir");
        fs::write(c.join("memory.swap.max"), "max\n").expect("w");
        fs::write(c.join("cpu.weight"), "100\n").expect("w");
        kubelet_v2_values(r, "/pv/podu/c1", Some(1024)).expect("write");
        assert_eq!(
            fs::read_to_string(c.join("memory.swap.max")).expect("r"),
            "0"
        );
        assert_eq!(fs::read_to_string(c.join("cpu.weight")).expect("r"), "39");
        // No swap accounting: the absent file is not created.
        let d = r.join("pv/podu/c2");
        fs::create_dir_all(&d).expect("mkdir");
        kubelet_v2_values(r, "/pv/podu/c2", None).expect("write");
        assert!(!d.join("memory.swap.max").exists());
        // v1 (no cgroup.controllers at the root): nothing is written.
        let v1 = tempfile::tempdir().expect("tempdir");
        kubelet_v2_values(v1.path(), "/x", Some(2)).expect("v1");
        assert!(!v1.path().join("memory/x").exists());
    }
}
