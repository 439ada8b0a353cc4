//! devices: which device nodes a container may create and open.
//!
//! Every container gets the device cgroup rules runc and containerd's CRI plugin install
//! together: deny everything, allow `mknod` of any character or block device (runc's
//! "questionable" default: creating a node is harmless while opening it is denied), and read,
//! write and mknod of /dev/null, zero, full, random, urandom, tty, console, ptmx, the pty
//! slaves (/dev/pts/*) and /dev/net/tun. libcgroups enforces them with the devices controller
//! on cgroup v1 and with an eBPF program attached to the container's cgroup on v2 (libcontainer's
//! `cgroupsv2_devices`, as runc does). Privileged containers get every host device node in
//! their /dev (containerd's `WithHostDevices`: /dev walked, pts, shm, mqueue, fd and the
//! console left out) and a rule allowing all devices.

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use oci_spec::runtime::{LinuxDevice, LinuxDeviceCgroup, LinuxDeviceType};

fn rule(
    allow: bool,
    typ: LinuxDeviceType,
    major: Option<i64>,
    minor: Option<i64>,
    access: &str,
) -> LinuxDeviceCgroup {
    let mut d = LinuxDeviceCgroup::default();
    d.set_allow(allow);
    d.set_typ(Some(typ));
    d.set_major(major);
    d.set_minor(minor);
    d.set_access(Some(access.to_string()));
    d
}

/// The device cgroup rules of a container.
pub fn cgroup_rules(privileged: bool) -> Vec<LinuxDeviceCgroup> {
    use LinuxDeviceType::{A, B, C};
    if privileged {
        return vec![rule(true, A, None, None, "rwm")];
    }
    let allow = |major, minor| rule(true, C, Some(major), minor, "rwm");
    vec![
        rule(false, A, None, None, "rwm"),
        rule(true, C, None, None, "m"),
        rule(true, B, None, None, "m"),
        allow(1, Some(3)),    // /dev/null
        allow(1, Some(8)),    // /dev/random
        allow(1, Some(7)),    // /dev/full
        allow(5, Some(0)),    // /dev/tty
        allow(1, Some(5)),    // /dev/zero
        allow(1, Some(9)),    // /dev/urandom
        allow(5, Some(1)),    // /dev/console
        allow(136, None),     // /dev/pts/*
        allow(5, Some(2)),    // /dev/ptmx
        allow(10, Some(200)), // /dev/net/tun
    ]
}

/// Directories of /dev that are not device nodes of the host to copy.
const SKIPPED_DIRS: &[&str] = &["pts", "shm", "fd", "mqueue", ".lxc", ".lxd-mounts", ".udev"];

/// Every character and block device below `dev` (normally /dev), as container devices at
/// the same path, with the host's mode and owner. Symlinks, FIFOs, sockets and `console` are
/// left out; a node that vanishes during the walk is skipped.
pub fn host_devices(dev: &Path) -> io::Result<Vec<LinuxDevice>> {
    let mut out = Vec::new();
    walk(dev, Path::new("/dev"), &mut out)?;
    out.sort_by(|a, b| a.path().cmp(b.path()));
    Ok(out)
}

fn walk(dir: &Path, container_dir: &Path, out: &mut Vec<LinuxDevice>) -> io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let md = match fs::symlink_metadata(entry.path()) {
            Ok(md) => md,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let ft = md.file_type();
        let container_path: PathBuf = container_dir.join(&name);
        if ft.is_dir() {
            if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                walk(&entry.path(), &container_path, out)?;
            }
            continue;
        }
        if name == "console" {
            continue;
        }
        let typ = if ft.is_char_device() {
            LinuxDeviceType::C
        } else if ft.is_block_device() {
            LinuxDeviceType::B
        } else {
            continue;
        };
        let rdev = md.rdev();
        let mut d = LinuxDevice::default();
        d.set_path(container_path);
        d.set_typ(typ);
        d.set_major(i64::from(libc::major(rdev)));
        d.set_minor(i64::from(libc::minor(rdev)));
        d.set_file_mode(Some(md.permissions().mode() & 0o7777));
        d.set_uid(Some(md.uid()));
        d.set_gid(Some(md.gid()));
        out.push(d);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_are_runcs_and_containerds() {
        let rules: Vec<(bool, String)> = cgroup_rules(false)
            .iter()
            .map(|d| (d.allow(), d.to_string()))
            .collect();
        let want = [
            (false, "a *:* rwm"),
            (true, "c *:* m"),
            (true, "b *:* m"),
            (true, "c 1:3 rwm"),
            (true, "c 1:8 rwm"),
            (true, "c 1:7 rwm"),
            (true, "c 5:0 rwm"),
            (true, "c 1:5 rwm"),
            (true, "c 1:9 rwm"),
            (true, "c 5:1 rwm"),
            (true, "c 136:* rwm"),
            (true, "c 5:2 rwm"),
            (true, "c 10:200 rwm"),
        ];
        assert_eq!(
            rules,
            want.iter()
                .map(|(a, s)| (*a, s.to_string()))
                .collect::<Vec<_>>()
        );
        let all: Vec<String> = cgroup_rules(true).iter().map(|d| d.to_string()).collect();
        assert_eq!(all, vec!["a *:* rwm".to_string()]);
    }

    #[test]
    fn host_devices_walks_dev_like_containerd() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let mknod = |p: &Path, kind: nix::sys::stat::SFlag, major: u64, minor: u64| {
            nix::sys::stat::mknod(
                p,
                kind,
                nix::sys::stat::Mode::from_bits_truncate(0o640),
                nix::sys::stat::makedev(major, minor),
            )
            .expect("mknod (needs root)");
        };
        use nix::sys::stat::SFlag;
        mknod(&d.join("null"), SFlag::S_IFCHR, 1, 3);
        fs::create_dir(d.join("snd")).expect("mkdir");
        mknod(&d.join("snd/pcm"), SFlag::S_IFCHR, 116, 4);
        mknod(&d.join("loop0"), SFlag::S_IFBLK, 7, 0);
        mknod(&d.join("console"), SFlag::S_IFCHR, 5, 1);
        fs::create_dir(d.join("pts")).expect("mkdir");
        mknod(&d.join("pts/0"), SFlag::S_IFCHR, 136, 0);
        mknod(&d.join("initctl"), SFlag::S_IFIFO, 0, 0);
        std::os::unix::fs::symlink("null", d.join("stdnull")).expect("symlink");
        fs::write(d.join("regular"), b"x").expect("write");
        let devs = host_devices(d).expect("walk");
        let seen: Vec<(String, String, i64, i64, Option<u32>)> = devs
            .iter()
            .map(|x| {
                (
                    x.path().display().to_string(),
                    x.typ().as_str().to_string(),
                    x.major(),
                    x.minor(),
                    x.file_mode(),
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                ("/dev/loop0".into(), "b".into(), 7, 0, Some(0o640)),
                ("/dev/null".into(), "c".into(), 1, 3, Some(0o640)),
                ("/dev/snd/pcm".into(), "c".into(), 116, 4, Some(0o640)),
            ]
        );
    }
}
