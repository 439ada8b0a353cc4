//! The container's mounts: the default filesystems, the sandbox's files (/etc/hosts,
//! hostname, resolv.conf, /dev/shm), volume mounts with propagation, and `subPath` pins.

use rustix::fs::{OFlags, ResolveFlags};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;

use super::invalid;
use super::Ctx;
use super::SandboxMounts;
use super::SpecError;
use super::SubPaths;
use crate::sys::at::open_root;
use crate::sys::at::openat2_in_root;
use oci_spec::runtime::Mount;
use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Component;
use std::path::Path;
use std::path::PathBuf;

pub(super) fn mount(dest: &str, typ: &str, source: &Path, options: &[&str]) -> Mount {
    let mut m = Mount::default();
    m.set_destination(PathBuf::from(dest));
    m.set_typ(Some(typ.to_string()));
    m.set_source(Some(source.to_path_buf()));
    m.set_options(Some(options.iter().map(|s| s.to_string()).collect()));
    m
}

pub(super) fn bind(dest: &Path, source: &Path, options: Vec<String>) -> Mount {
    let mut m = Mount::default();
    m.set_destination(dest.to_path_buf());
    m.set_typ(Some("bind".to_string()));
    m.set_source(Some(source.to_path_buf()));
    m.set_options(Some(options));
    m
}

pub(super) fn depth(p: &Path) -> usize {
    p.components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count()
}

/// The spec's mounts and the rootfs propagation volume mounts require.
pub(super) fn mounts(
    ctx: &Ctx<'_>,
    sandbox: &SandboxMounts,
    privileged: bool,
    read_only_root: bool,
    sub_paths: SubPaths<'_>,
    container_env: &[(String, String)],
) -> Result<(Vec<Mount>, Option<String>), SpecError> {
    // hostIPC: the host's /dev/shm, as containerd gives such a sandbox.
    let host_ipc = ctx.spec.host_ipc.unwrap_or(false);
    let shm: &Path = if host_ipc {
        Path::new("/dev/shm")
    } else {
        &sandbox.shm
    };
    let sys_mode = if privileged { "rw" } else { "ro" };
    let defaults = vec![
        mount(
            "/proc",
            "proc",
            Path::new("proc"),
            &["nosuid", "noexec", "nodev"],
        ),
        mount(
            "/dev",
            "tmpfs",
            Path::new("tmpfs"),
            &["nosuid", "strictatime", "mode=755", "size=65536k"],
        ),
        mount(
            "/dev/pts",
            "devpts",
            Path::new("devpts"),
            &[
                "nosuid",
                "noexec",
                "newinstance",
                "ptmxmode=0666",
                "mode=0620",
                "gid=5",
            ],
        ),
        mount(
            "/dev/mqueue",
            "mqueue",
            Path::new("mqueue"),
            &["nosuid", "noexec", "nodev"],
        ),
        mount(
            "/sys",
            "sysfs",
            Path::new("sysfs"),
            &["nosuid", "noexec", "nodev", sys_mode],
        ),
        mount(
            "/sys/fs/cgroup",
            "cgroup",
            Path::new("cgroup"),
            &["nosuid", "noexec", "nodev", "relatime", sys_mode],
        ),
    ];

    let etc_mode = if read_only_root { "ro" } else { "rw" };
    let opts = |extra: &[&str]| -> Vec<String> {
        ["rbind", "rprivate"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect()
    };
    // containerd's CRI mounts: sandbox files, then the pod's volumes.
    let mut cri: Vec<Mount> = vec![
        bind(
            Path::new("/etc/hostname"),
            &sandbox.hostname,
            opts(&[etc_mode]),
        ),
        bind(Path::new("/etc/hosts"), &sandbox.hosts, opts(&["rw"])),
        bind(
            Path::new("/etc/resolv.conf"),
            &sandbox.resolv_conf,
            opts(&[etc_mode]),
        ),
        bind(
            Path::new("/dev/shm"),
            shm,
            opts(&["nosuid", "nodev", "noexec", "rw"]),
        ),
    ];
    let mut volume_dests: HashSet<PathBuf> = HashSet::new();
    let mut volume_mounts = Vec::new();
    let mut propagation_needed: Option<&str> = None;
    for (j, vm) in ctx.container.volume_mounts.iter().flatten().enumerate() {
        let field = ctx.field(&format!("volumeMounts[{j}]"));
        let dest = Path::new(&vm.mount_path);
        if !dest.is_absolute() || dest.components().any(|c| c == Component::ParentDir) {
            return Err(invalid(
                format!("{field}.mountPath"),
                &vm.mount_path,
                "must be an absolute path without '..'",
            ));
        }
        let dest = PathBuf::from("/").join(dest.components().collect::<PathBuf>());
        if !volume_dests.insert(dest.clone()) {
            return Err(invalid(
                format!("{field}.mountPath"),
                &vm.mount_path,
                "must be unique",
            ));
        }
        let volume_path =
            sandbox
                .volumes
                .get(&vm.name)
                .ok_or_else(|| SpecError::UnknownVolume {
                    field: field.clone(),
                    volume: vm.name.clone(),
                })?;
        let read_only = vm.read_only.unwrap_or(false);
        // recursiveReadOnly (the API server requires readOnly and no propagation for it):
        // Enabled makes every submount read-only too (mount_setattr, "rro"), IfPossible does
        // where the kernel can.
        let recursive = match vm.recursive_read_only.as_deref() {
            None | Some("Disabled") => false,
            Some(r @ ("IfPossible" | "Enabled")) => {
                let rf = format!("{field}.recursiveReadOnly");
                if !read_only {
                    return Err(invalid(rf, r, "needs readOnly: true"));
                }
                if vm.mount_propagation.as_deref().is_some_and(|p| p != "None") {
                    return Err(invalid(rf, r, "needs mountPropagation None"));
                }
                let supported = crate::sys::kernel::supports_recursive_read_only();
                if r == "Enabled" && !supported {
                    return Err(invalid(
                        rf,
                        r,
                        "needs mount_setattr(2) (Linux 5.12 or later)",
                    ));
                }
                supported
            }
            Some(other) => {
                return Err(invalid(
                    format!("{field}.recursiveReadOnly"),
                    other,
                    "must be Disabled, IfPossible or Enabled",
                ))
            }
        };
        let propagation =
            match vm.mount_propagation.as_deref() {
                None | Some("None") => "rprivate",
                Some("HostToContainer") => {
                    propagation_needed.get_or_insert("rslave");
                    "rslave"
                }
                Some("Bidirectional") if privileged => {
                    propagation_needed = Some("rshared");
                    "rshared"
                }
                Some("Bidirectional") => return Err(invalid(
                    format!("{field}.mountPropagation"),
                    "Bidirectional",
                    "Bidirectional mount propagation is available only to privileged containers",
                )),
                Some(other) => {
                    return Err(invalid(
                        format!("{field}.mountPropagation"),
                        other,
                        "must be None, HostToContainer or Bidirectional",
                    ))
                }
            };
        // subPathExpr: $(VAR) expanded with the container's environment (the kubelet's
        // expandSubpath), then handled as a subPath.
        let expanded;
        let (sub, sub_field) = match vm.sub_path_expr.as_deref().filter(|s| !s.is_empty()) {
            Some(expr) => {
                if vm.sub_path.as_deref().is_some_and(|s| !s.is_empty()) {
                    return Err(invalid(
                        format!("{field}.subPathExpr"),
                        expr,
                        "subPathExpr and subPath are mutually exclusive",
                    ));
                }
                expanded = super::expand(expr, |k| {
                    container_env
                        .iter()
                        .rev()
                        .find(|(name, _)| name == k)
                        .map(|(_, v)| v.clone())
                });
                (
                    Some(expanded.as_str()).filter(|s| !s.is_empty()),
                    format!("{field}.subPathExpr"),
                )
            }
            None => (
                vm.sub_path.as_deref().filter(|s| !s.is_empty()),
                format!("{field}.subPath"),
            ),
        };
        let source =
            match sub {
                None => volume_path.clone(),
                Some(sub) if matches!(sub_paths, SubPaths::Planned) => {
                    check_sub_path_form(sub, &sub_field)?;
                    volume_path.join(sub)
                }
                Some(sub) => {
                    let (path, fd) = prepare_sub_path(volume_path, sub, &sub_field)?;
                    match sub_paths {
                        SubPaths::Pin(dir) => super::super::rootfs::pin_sub_path(dir, j, &fd)
                            .map_err(|source| SpecError::SubPath {
                                field: sub_field,
                                sub_path: sub.to_string(),
                                volume_path: volume_path.clone(),
                                source,
                            })?,
                        SubPaths::Open | SubPaths::Planned => path,
                    }
                }
            };
        let mut options = vec![
            "rbind".to_string(),
            propagation.to_string(),
            if read_only { "ro" } else { "rw" }.to_string(),
        ];
        if recursive {
            options.push("rro".to_string());
        }
        volume_mounts.push(bind(&dest, &source, options));
    }
    // A volume mounted over a sandbox file or a default mount replaces it (containerd).
    cri.retain(|m| !volume_dests.contains(m.destination()));
    cri.extend(volume_mounts);
    cri.sort_by_key(|m| depth(m.destination()));
    let mut all: Vec<Mount> = defaults
        .into_iter()
        .filter(|m| !volume_dests.contains(m.destination()))
        .collect();
    all.extend(cri);
    Ok((all, propagation_needed.map(str::to_string)))
}

/// What a subPath may be, whatever the volume holds: relative, without `..`.
fn check_sub_path_form(sub: &str, field: &str) -> Result<(), SpecError> {
    let rel = Path::new(sub);
    if rel.is_absolute() || rel.components().any(|c| c == Component::ParentDir) {
        return Err(invalid(
            field.to_string(),
            sub,
            "must be a relative path without '..'",
        ));
    }
    Ok(())
}

/// Checks that `sub` stays below `volume` (relative, no `..`, symlinks resolved beneath the
/// volume) and creates missing directories with the volume's mode, like the kubelet. Returns
/// the path and the resolved file or directory, open with `O_PATH`.
pub(super) fn prepare_sub_path(
    volume: &Path,
    sub: &str,
    field: &str,
) -> Result<(PathBuf, OwnedFd), SpecError> {
    check_sub_path_form(sub, field)?;
    let rel = Path::new(sub);
    let err = |source| SpecError::SubPath {
        field: field.to_string(),
        sub_path: sub.to_string(),
        volume_path: volume.to_path_buf(),
        source,
    };
    let root = open_root(volume).map_err(err)?;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
    match openat2_in_root(&root, rel, OFlags::PATH, resolve) {
        Ok(fd) => return Ok((volume.join(rel), fd)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let mode = std::fs::metadata(volume).map_err(err)?.permissions().mode() & 0o7777;
    let mut dir: OwnedFd = root;
    for comp in rel.components() {
        let Component::Normal(name) = comp else {
            continue;
        };
        let next = match openat2_in_root(&dir, Path::new(name), OFlags::PATH, resolve) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match nix::sys::stat::mkdirat(
                    Some(dir.as_raw_fd()),
                    name,
                    nix::sys::stat::Mode::from_bits_truncate(mode),
                ) {
                    Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
                    Err(e) => return Err(err(io::Error::from(e))),
                }
                openat2_in_root(
                    &dir,
                    Path::new(name),
                    OFlags::PATH | OFlags::DIRECTORY,
                    resolve,
                )
                .map_err(err)?
            }
            Err(e) => return Err(err(e)),
        };
        dir = next;
    }
    Ok((volume.join(rel), dir))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use serde_json::json;

    // ---- mounts ----

    #[test]
    fn default_mounts_golden() {
        let cs = ok(&pod_with(json!({}), json!({})));
        assert_eq!(
            mount_summary(&cs),
            vec![
                row("/proc", "proc", "proc", "nosuid,noexec,nodev"),
                row(
                    "/dev",
                    "tmpfs",
                    "tmpfs",
                    "nosuid,strictatime,mode=755,size=65536k"
                ),
                row(
                    "/dev/pts",
                    "devpts",
                    "devpts",
                    "nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5"
                ),
                row("/dev/mqueue", "mqueue", "mqueue", "nosuid,noexec,nodev"),
                row("/sys", "sysfs", "sysfs", "nosuid,noexec,nodev,ro"),
                row(
                    "/sys/fs/cgroup",
                    "cgroup",
                    "cgroup",
                    "nosuid,noexec,nodev,relatime,ro"
                ),
                row(
                    "/etc/hostname",
                    "bind",
                    "/var/lib/podvisor/p/hostname",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/etc/hosts",
                    "bind",
                    "/var/lib/podvisor/p/hosts",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/etc/resolv.conf",
                    "bind",
                    "/var/lib/podvisor/p/resolv.conf",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/dev/shm",
                    "bind",
                    "/var/lib/podvisor/p/shm",
                    "rbind,rprivate,nosuid,nodev,noexec,rw"
                ),
            ]
        );
    }

    #[test]
    fn read_only_root_makes_hostname_and_resolv_conf_read_only() {
        let p = pod_with(
            json!({"securityContext": {"readOnlyRootFilesystem": true}}),
            json!({}),
        );
        let cs = ok(&p);
        assert_eq!(
            cs.spec.root().as_ref().expect("root").readonly(),
            Some(true)
        );
        let m = mount_summary(&cs);
        assert_eq!(m[6].3, "rbind,rprivate,ro");
        assert_eq!(m[7].3, "rbind,rprivate,rw");
        assert_eq!(m[8].3, "rbind,rprivate,ro");
    }

    #[test]
    fn volume_mounts_sorted_by_depth_with_modes_and_propagation() {
        let p = pod_with(
            json!({"volumeMounts": [
                {"name": "logs", "mountPath": "/data/logs/app", "readOnly": true},
                {"name": "data", "mountPath": "/data", "mountPropagation": "HostToContainer"},
                {"name": "data", "mountPath": "/etc/hosts"}
            ]}),
            json!({}),
        );
        let cs = ok(&p);
        let m = mount_summary(&cs);
        let tail: Vec<_> = m[6..].to_vec();
        assert_eq!(
            tail,
            vec![
                row(
                    "/data",
                    "bind",
                    "/var/lib/podvisor/p/volumes/data",
                    "rbind,rslave,rw"
                ),
                row(
                    "/etc/hostname",
                    "bind",
                    "/var/lib/podvisor/p/hostname",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/etc/resolv.conf",
                    "bind",
                    "/var/lib/podvisor/p/resolv.conf",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/dev/shm",
                    "bind",
                    "/var/lib/podvisor/p/shm",
                    "rbind,rprivate,nosuid,nodev,noexec,rw"
                ),
                row(
                    "/etc/hosts",
                    "bind",
                    "/var/lib/podvisor/p/volumes/data",
                    "rbind,rprivate,rw"
                ),
                row(
                    "/data/logs/app",
                    "bind",
                    "/var/log/app",
                    "rbind,rprivate,ro"
                ),
            ]
        );
        assert_eq!(linux(&cs).rootfs_propagation().as_deref(), Some("rslave"));
    }

    #[test]
    fn bidirectional_propagation_needs_privileged() {
        let vm = json!([{"name": "data", "mountPath": "/d", "mountPropagation": "Bidirectional"}]);
        let p = pod_with(json!({"volumeMounts": vm.clone()}), json!({}));
        assert!(err(&p).starts_with(
            "spec.containers[0].volumeMounts[0].mountPropagation: invalid value \"Bidirectional\""
        ));
        let p = pod_with(
            json!({"volumeMounts": vm, "securityContext": {"privileged": true}}),
            json!({}),
        );
        let cs = ok(&p);
        let d = mount_summary(&cs)
            .into_iter()
            .find(|m| m.0 == "/d")
            .expect("mount");
        assert_eq!(d.3, "rbind,rshared,rw");
        assert_eq!(linux(&cs).rootfs_propagation().as_deref(), Some("rshared"));
    }

    #[test]
    fn bad_volume_mounts_are_named() {
        let cases = [
            (json!([{"name": "data", "mountPath": "/a"}, {"name": "nope", "mountPath": "/b"}]),
             "spec.containers[0].volumeMounts[1]: volume \"nope\" is not prepared by the pod sandbox"),
            (json!([{"name": "data", "mountPath": "rel"}]),
             "spec.containers[0].volumeMounts[0].mountPath: invalid value \"rel\""),
            (json!([{"name": "data", "mountPath": "/a/../b"}]),
             "spec.containers[0].volumeMounts[0].mountPath: invalid value"),
            (json!([{"name": "data", "mountPath": "/a"}, {"name": "logs", "mountPath": "/a/"}]),
             "spec.containers[0].volumeMounts[1].mountPath: invalid value \"/a/\": must be unique"),
            (json!([{"name": "data", "mountPath": "/a", "subPath": "../x"}]),
             "spec.containers[0].volumeMounts[0].subPath: invalid value \"../x\""),
            (json!([{"name": "data", "mountPath": "/a", "subPath": "/etc"}]),
             "spec.containers[0].volumeMounts[0].subPath: invalid value \"/etc\""),
            (json!([{"name": "data", "mountPath": "/a", "subPathExpr": "/$(X)"}]),
             "spec.containers[0].volumeMounts[0].subPathExpr: invalid value \"/$(X)\""),
            (json!([{"name": "data", "mountPath": "/a", "subPathExpr": "x", "subPath": "y"}]),
             "spec.containers[0].volumeMounts[0].subPathExpr: invalid value \"x\": subPathExpr and subPath are mutually exclusive"),
            (json!([{"name": "data", "mountPath": "/a", "readOnly": true, "recursiveReadOnly": "Always"}]),
             "spec.containers[0].volumeMounts[0].recursiveReadOnly: invalid value \"Always\""),
            (json!([{"name": "data", "mountPath": "/a", "mountPropagation": "Sideways"}]),
             "spec.containers[0].volumeMounts[0].mountPropagation: invalid value \"Sideways\""),
        ];
        for (vms, want) in cases {
            let e = err(&pod_with(json!({"volumeMounts": vms}), json!({})));
            assert!(e.starts_with(want), "{e}\n  expected {want}");
        }
    }

    #[test]
    fn sub_path_expr_expands_the_container_environment() {
        let vol = tempfile::tempdir().expect("volume");
        let mut sb = sandbox(false);
        sb.volumes.insert("v".into(), vol.path().to_path_buf());
        let img = image(json!({"Cmd": ["x"]}));
        let p = pod_with(
            json!({
                "env": [{"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "volumeMounts": [{"name": "v", "mountPath": "/logs", "subPathExpr": "logs/$(POD)"}]
            }),
            json!({}),
        );
        let cs = build_with(&p, &img, &sb).expect("build");
        let created = vol.path().join("logs/web-node1");
        assert!(created.is_dir());
        let m = mount_summary(&cs)
            .into_iter()
            .find(|m| m.0 == "/logs")
            .expect("mount");
        assert_eq!(m.2, created.display().to_string());
    }

    #[test]
    fn recursive_read_only_adds_rro_where_the_kernel_can() {
        let mount_opts = |rro: &str| {
            let p = pod_with(
                json!({"volumeMounts": [{"name": "data", "mountPath": "/d", "readOnly": true, "recursiveReadOnly": rro}]}),
                json!({}),
            );
            mount_summary(&ok(&p))
                .into_iter()
                .find(|m| m.0 == "/d")
                .expect("mount")
                .3
        };
        assert_eq!(mount_opts("Disabled"), "rbind,rprivate,ro");
        let supported = crate::sys::kernel::supports_recursive_read_only();
        let want = if supported {
            "rbind,rprivate,ro,rro"
        } else {
            "rbind,rprivate,ro"
        };
        assert_eq!(mount_opts("IfPossible"), want);
        if supported {
            assert_eq!(mount_opts("Enabled"), "rbind,rprivate,ro,rro");
        }
    }

    #[test]
    fn sub_path_is_created_below_the_volume_and_symlink_escapes_fail() {
        let vol = tempfile::tempdir().expect("volume");
        let outside = tempfile::tempdir().expect("outside");
        std::fs::set_permissions(vol.path(), std::fs::Permissions::from_mode(0o750))
            .expect("chmod");
        std::os::unix::fs::symlink(outside.path(), vol.path().join("escape")).expect("symlink");
        std::fs::create_dir(vol.path().join("real")).expect("real");
        std::os::unix::fs::symlink("real", vol.path().join("inside")).expect("symlink");
        let mut sb = sandbox(false);
        sb.volumes.insert("v".into(), vol.path().to_path_buf());
        let img = image(json!({"Cmd": ["x"]}));
        let with_sub = |sub: &str| {
            let p = pod_with(
                json!({"volumeMounts": [{"name": "v", "mountPath": "/m", "subPath": sub}]}),
                json!({}),
            );
            build_with(&p, &img, &sb)
        };
        let cs = with_sub("a/b").expect("created");
        let created = vol.path().join("a/b");
        assert!(created.is_dir());
        assert_eq!(
            std::fs::metadata(&created)
                .expect("meta")
                .permissions()
                .mode()
                & 0o777,
            0o750
        );
        let m = mount_summary(&cs)
            .into_iter()
            .find(|m| m.0 == "/m")
            .expect("mount");
        assert_eq!(m.2, created.display().to_string());
        with_sub("inside").expect("relative symlink within the volume");
        let e = with_sub("escape/x").expect_err("escape");
        assert!(
            e.to_string()
                .starts_with("spec.containers[0].volumeMounts[0].subPath: subPath \"escape/x\""),
            "{e}"
        );
        assert!(
            !outside.path().join("x").exists(),
            "nothing created outside"
        );
    }
}
