//! Creating a pod's sandbox, in the daemon: its directories, its volumes, its namespaces
//! pinned by a helper process ([`NamespaceHelper`]: the spawner's child, or [`ExecHelper`],
//! an exec of `shim sandbox`), its network, its /etc files and last its record; and the
//! refresh of its projected volumes.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use k8s_openapi::api::core::v1::Pod;

use super::remove::remove_runtime_part;
use crate::fsutil;
use crate::network::{self, PodNetwork};
use crate::runtime::dns::{self, DnsSettings};
use crate::runtime::sandbox::{
    check_live, host_network, io_err, load, pod_hostname, share_process_namespace, HelperRequest,
    NamespaceHelper, SandboxDirs, SandboxError, SandboxPaths,
};
use crate::runtime::spec::NodeInfo;
use crate::runtime::{volumes, SandboxInfo};

/// What a sandbox is created with besides the pod.
pub struct CreateOptions<'a> {
    pub node: &'a NodeInfo,
    pub dns: &'a DnsSettings,
    /// Pins the pod's namespaces in a single-threaded process (the runtime's spawner, or an
    /// exec'd `shim sandbox`).
    pub helper: &'a dyn NamespaceHelper,
    /// `hostUsers: false`: the base of the pod's user namespace mapping.
    pub user_ns_base: Option<u32>,
    /// The pod network: attachments of a sandbox being torn down are DELed through it.
    pub network: Option<&'a PodNetwork>,
    /// Whether the new sandbox joins it (false: loopback only).
    pub join_network: bool,
}

/// Creates (or reuses, if complete and live) the sandbox of `pod`. The pod's data (emptyDir
/// volumes) is kept: a sandbox created again after a reboot finds it where it was.
pub fn create(
    dirs: &SandboxDirs,
    pod: &Pod,
    opts: &CreateOptions<'_>,
) -> Result<SandboxInfo, SandboxError> {
    let user_ns_base = opts.user_ns_base;
    let uid = pod_uid(pod)?;
    let paths = SandboxPaths::new(dirs, &uid)?;
    if let Some(info) = load(&paths)? {
        match check_live(&paths, info.host_network) {
            Ok(()) if paths.has_user_ns() == user_ns_base.is_some() => return Ok(info),
            Ok(()) => {
                log::warn!("pod {uid}: sandbox has another user namespace mode: creating it again")
            }
            Err(why) => log::warn!("pod {uid}: sandbox is not live ({why}): creating it again"),
        }
    }
    crate::tp!("sb.loaded");
    // A partial or dead sandbox is torn down and made again.
    if paths.dir.exists() {
        remove_runtime_part(&paths, opts.network)?;
    }
    let result = create_new(&paths, pod, opts, &uid);
    if result.is_err() {
        if let Err(e) = remove_runtime_part(&paths, opts.network) {
            log::warn!("pod {uid}: cleanup of failed sandbox: {e}");
        }
    }
    result
}

fn create_new(
    paths: &SandboxPaths,
    pod: &Pod,
    opts: &CreateOptions<'_>,
    uid: &str,
) -> Result<SandboxInfo, SandboxError> {
    let (node, user_ns_base) = (opts.node, opts.user_ns_base);
    let hostname = pod_hostname(pod);
    let host_net = host_network(pod);
    for d in [paths.dir.join("ns"), paths.dir.join("etc"), paths.shm()] {
        fs::create_dir_all(&d).map_err(io_err(&d))?;
    }
    // A hostUsers: false pod's root joins its namespaces by path: traversable, not listable.
    let mode = if user_ns_base.is_some() { 0o711 } else { 0o700 };
    fs::set_permissions(&paths.dir, fs::Permissions::from_mode(mode))
        .map_err(io_err(&paths.dir))?;
    fs::create_dir_all(&paths.data).map_err(io_err(&paths.data))?;
    fs::set_permissions(&paths.data, fs::Permissions::from_mode(0o700))
        .map_err(io_err(&paths.data))?;
    crate::tp!("sb.dirs");
    let volumes = prepare_volumes(paths, pod, node)?;
    crate::tp!("sb.volumes");

    opts.helper.pin_namespaces(&HelperRequest {
        dir: &paths.dir,
        hostname: &hostname,
        host_network: host_net,
        share_pid: share_process_namespace(pod),
        user_ns_base,
    })?;
    crate::tp!("sb.helper");
    let resolv = dns::pod_resolv_conf(pod, &dns::host_resolv_conf(opts.dns, !host_net), opts.dns);
    // The pod network, once its namespace is pinned; the sandbox is complete only after it.
    let (id, pod_ips) = match opts.network.filter(|_| opts.join_network && !host_net) {
        Some(net) => {
            let st = net.setup(&network::SetupRequest {
                pod,
                netns: &paths.ns("net"),
                result_path: &paths.network_result(),
                dns: crate::pod::netargs::DnsArgs {
                    servers: resolv.nameservers.clone(),
                    searches: resolv.searches.clone(),
                    options: resolv.options.clone(),
                },
            })?;
            let ips = st.ips.iter().map(|i| i.to_string()).collect();
            (st.id, ips)
        }
        None => (network::new_sandbox_id(uid, ""), Vec::new()),
    };
    let domain = dns::pod_domain(pod, &opts.dns.cluster_domain);
    write_etc_files(
        paths,
        pod,
        &hostname,
        host_net,
        &resolv,
        &pod_ips,
        domain.as_deref(),
    )?;
    crate::tp!("sb.etc");
    let info = SandboxInfo {
        id,
        pod_ips,
        pod_uid: uid.to_string(),
        pod_namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        pod_name: pod.metadata.name.clone().unwrap_or_default(),
        host_network: host_net,
        hostname,
        created_at: crate::runtime::now_rfc3339(),
        volumes,
    };
    // The runtime dir is a tmpfs: no fsync (a power cut takes the namespaces with it).
    fsutil::write_json_atomic_volatile(&paths.info(), &info).map_err(io_err(&paths.info()))?;
    Ok(info)
}

/// The helper as its own exec of podvisor's binary: `podvisor shim sandbox <dir> ...`.
pub struct ExecHelper<'a>(pub &'a Path);

impl NamespaceHelper for ExecHelper<'_> {
    fn pin_namespaces(&self, req: &HelperRequest<'_>) -> Result<(), SandboxError> {
        let mut cmd = Command::new(self.0);
        cmd.arg("shim")
            .arg("sandbox")
            .arg(req.dir)
            .arg("--hostname")
            .arg(req.hostname);
        if req.host_network {
            cmd.arg("--host-network");
        }
        if req.share_pid {
            cmd.arg("--share-pid");
        }
        if let Some(base) = req.user_ns_base {
            cmd.arg("--user-ns-base").arg(base.to_string());
        }
        let out = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(io_err(self.0))?;
        if !out.status.success() {
            return Err(SandboxError::Helper {
                message: format!(
                    "{} ({})",
                    String::from_utf8_lossy(&out.stderr).trim(),
                    out.status
                ),
            });
        }
        Ok(())
    }
}

fn write_etc_files(
    paths: &SandboxPaths,
    pod: &Pod,
    hostname: &str,
    host_net: bool,
    resolv: &dns::ResolvConf,
    pod_ips: &[String],
    domain: Option<&str>,
) -> Result<(), SandboxError> {
    let hosts = dns::hosts_file(
        pod,
        hostname,
        host_net,
        Path::new("/etc/hosts"),
        pod_ips,
        domain,
    );
    let hostname_content = if host_net {
        nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| hostname.to_string())
    } else {
        hostname.to_string()
    };
    let resolv = resolv.render();
    for (name, data) in [
        ("hosts", hosts),
        ("hostname", format!("{hostname_content}\n")),
        ("resolv.conf", resolv),
    ] {
        let p = paths.etc(name);
        fs::write(&p, data).map_err(io_err(&p))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).map_err(io_err(&p))?;
    }
    Ok(())
}

fn pod_uid(pod: &Pod) -> Result<String, SandboxError> {
    pod.metadata
        .uid
        .clone()
        .ok_or(SandboxError::MissingField { field: "uid" })
}

/// Writes the downwardAPI and projected volumes of a pod whose sandbox exists again, from
/// `pod` (new labels or annotations): each through the atomic writer (`..data` swapped), so a
/// container reading them sees the old files or the new ones, never a mix.
pub fn refresh_projected_volumes(
    dirs: &SandboxDirs,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<(), SandboxError> {
    let uid = pod_uid(pod)?;
    let paths = SandboxPaths::new(dirs, &uid)?;
    let spec = pod.spec.as_ref();
    let sc = spec.and_then(|s| s.security_context.as_ref());
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    for (i, v) in volumes.iter().enumerate() {
        let dir = paths.volume(&v.name);
        let projected = v.downward_api.is_some() || v.projected.is_some();
        if !projected || !dir.is_dir() {
            continue;
        }
        let (path, _) = volumes::prepare(pod, node, v, i, &dir)?;
        if let Some(sc) = sc {
            volumes::apply_fs_group(&path, sc, true, &format!("spec.volumes[{i}]"))?;
        }
    }
    Ok(())
}

fn prepare_volumes(
    paths: &SandboxPaths,
    pod: &Pod,
    node: &NodeInfo,
) -> Result<BTreeMap<String, PathBuf>, SandboxError> {
    let mut out = BTreeMap::new();
    let spec = pod.spec.as_ref();
    let volumes = spec.and_then(|s| s.volumes.as_deref()).unwrap_or(&[]);
    let sc = spec.and_then(|s| s.security_context.as_ref());
    for (i, v) in volumes.iter().enumerate() {
        if v.name.is_empty() || v.name.contains('/') || v.name == "." || v.name == ".." {
            return Err(SandboxError::Volume(volumes::VolumeError::Invalid {
                field: format!("spec.volumes[{i}].name"),
                message: format!("invalid volume name {:?}", v.name),
            }));
        }
        let (path, kind) = volumes::prepare(pod, node, v, i, &paths.volume(&v.name))?;
        if let Some(sc) = sc.filter(|_| kind != volumes::VolumeKind::HostPath) {
            let read_only = kind == volumes::VolumeKind::Projected;
            volumes::apply_fs_group(&path, sc, read_only, &format!("spec.volumes[{i}]"))?;
        }
        out.insert(v.name.clone(), path);
    }
    Ok(out)
}
