//! A small filesystem (a size-limited tmpfs, or ext4 on a loop device) for the disk-full and
//! eviction tests, filled on purpose.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which small filesystem a test runs on.
#[derive(Clone, Copy)]
pub enum Kind {
    Tmpfs,
    LoopExt4,
}

/// A small filesystem for one test (a size-limited tmpfs, or ext4 on a loop device backed by
/// a file in the test's temp dir), always unmounted when dropped, panics included (lazily, so
/// a leftover user cannot keep it; the loop device is detached with its last user, `mount -o
/// loop` sets autoclear); on a panic the test's containers are killed first.
pub struct SmallFs {
    pub dir: PathBuf,
    cgroup_parent: String,
}

impl SmallFs {
    pub fn mount(kind: Kind, dir: &Path, cgroup_parent: &str) -> SmallFs {
        SmallFs::mount_sized(kind, 24, dir, cgroup_parent)
    }

    /// A tmpfs of `size_mb` MiB (the loop ext4 is always 48 MiB).
    pub fn mount_sized(kind: Kind, size_mb: u32, dir: &Path, cgroup_parent: &str) -> SmallFs {
        fs::create_dir_all(dir).expect("mkdir");
        let mut cmd = std::process::Command::new("mount");
        match kind {
            Kind::Tmpfs => {
                cmd.args([
                    "-t",
                    "tmpfs",
                    "-o",
                    &format!("size={size_mb}m,mode=0755"),
                    "tmpfs",
                ]);
            }
            Kind::LoopExt4 => {
                let image = dir.with_extension("img");
                let f = fs::File::create(&image).expect("image");
                f.set_len(48 * 1024 * 1024).expect("size");
                let st = std::process::Command::new("mkfs.ext4")
                    .args(["-q", "-F", "-m", "0"])
                    .arg(&image)
                    .status()
                    .expect("mkfs.ext4");
                assert!(st.success(), "mkfs.ext4 {}", image.display());
                cmd.args(["-t", "ext4", "-o", "loop"]).arg(&image);
            }
        }
        let st = cmd.arg(dir).status().expect("mount");
        assert!(st.success(), "mount on {}", dir.display());
        SmallFs {
            dir: dir.to_path_buf(),
            cgroup_parent: cgroup_parent.to_string(),
        }
    }

    /// Fills the filesystem: a file grown until the write fails with ENOSPC.
    pub fn fill(&self) -> PathBuf {
        let path = self.dir.join("filler");
        let mut f = fs::File::create(&path).expect("filler");
        let chunk = vec![0x5au8; 64 * 1024];
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("fill {}: {e}", path.display()),
            }
        }
        // The last partial pages too.
        while f.write(&[0u8; 512]).is_ok_and(|n| n > 0) {}
        path
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for (pid, _) in super::processes_in_cgroup(&self.cgroup_parent) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = nix::mount::umount2(&self.dir, nix::mount::MntFlags::MNT_DETACH);
    }
}
