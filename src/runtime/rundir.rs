//! rundir: the runtime directory (`--runtime-dir`, default `/run/podvisor`) and the boot it
//! belongs to.
//!
//! Everything that describes a live kernel object lives there, as containerd keeps it under
//! /run/containerd and runc under /run/runc: pod sandboxes (pinned namespace files, /dev/shm,
//! the /etc files), container bundles and libcontainer state, rootfs mount points, monitor
//! state and locks. /run is a tmpfs, so a reboot or a power cut clears it together with the
//! objects it described; what must survive (image store, desired pods, container identities
//! and exit records, emptyDir data, logs) lives under the root dir and the log dir.
//!
//! Defense in depth, for a runtime dir that is not a tmpfs (a custom `--runtime-dir`, or a
//! distribution whose /run is on disk): the directory records the boot ID it was filled in
//! (`<runtime-dir>/boot_id`, from /proc/sys/kernel/random/boot_id). A daemon that finds
//! another boot's ID there removes the state of that boot (after unmounting whatever is still
//! mounted below it) before it starts. Container records under the root dir carry the boot ID
//! too, which is how a container of an earlier boot is recognised as lost with its node.
//! Namespace files are checked to be live nsfs mounts before anything joins them
//! ([`is_nsfs`]).

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::mount::{umount2, MntFlags};

use crate::fsutil::{self, Loaded};

/// Default `--runtime-dir`.
pub const DEFAULT_RUNTIME_DIR: &str = "/run/podvisor";
/// Where the kernel publishes the current boot's ID (`--boot-id-file` overrides it in tests).
pub const BOOT_ID_FILE: &str = "/proc/sys/kernel/random/boot_id";
/// The file in the runtime dir naming the boot its content belongs to.
const BOOT_RECORD: &str = "boot_id";
/// Subdirectories of the runtime dir holding per-boot state.
const STATE_DIRS: [&str; 2] = ["pods", "containers"];

/// statfs f_type of nsfs (include/uapi/linux/magic.h NSFS_MAGIC).
const NSFS_MAGIC: i64 = 0x6e73_6673;
/// statfs f_type of tmpfs (TMPFS_MAGIC).
const TMPFS_MAGIC: i64 = 0x0102_1994;
/// statfs f_type of ramfs (RAMFS_MAGIC), as volatile as tmpfs.
const RAMFS_MAGIC: i64 = 0x8584_58f6;

/// Errors of the runtime dir.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    #[error("boot id {path}: {source}")]
    BootIdRead { path: PathBuf, source: io::Error },
    #[error("boot id {path}: {value:?} is not a boot id (want 1-64 characters of [0-9a-zA-Z-])")]
    BootIdInvalid { path: PathBuf, value: String },
    #[error("runtime dir {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("runtime dir {path}: state of an earlier boot is still mounted: {source}")]
    Unmount { path: PathBuf, source: nix::Error },
    #[error(
        "{what} {path} is in use by another podvisor (daemon or play; {holder}): give this one \
         its own --root-dir, --runtime-dir and --cgroup-parent"
    )]
    InUse {
        /// "runtime dir" or "root dir".
        what: &'static str,
        path: PathBuf,
        holder: String,
    },
}

/// How often [`lock`] tries a busy lock again.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// The name of the lock file in the runtime dir.
pub const LOCK_FILE: &str = "runtime.lock";

/// An exclusive hold on a runtime dir or a root dir: one runtime (a daemon or a `play`) per
/// runtime dir and per root dir. Two would race: each removes the other's containers in
/// creation as the leftovers of an interrupted one, and the daemon would take `play`'s pods
/// for orphans; two daemons on one root dir with different runtime dirs each remove the
/// other's pods and retry failed removals forever. Released when dropped, or when the process
/// dies.
#[derive(Debug)]
pub struct RunDirLock {
    _file: fs::File,
}

/// How long [`lock`] waits for a busy lock before it refuses. A daemon killed with SIGKILL
/// can leave a child between fork and exec (a monitor being spawned) holding the lock's
/// descriptor for a moment; a restart right after it (systemd's, a test's) must not fail on
/// that. Another live runtime on the same dir holds it for good, and is refused after this.
pub const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Creates the runtime dir if needed and takes its lock, waiting up to `wait` for a holder to
/// go away; the file names the holder's pid, for the error another process gets.
pub fn lock(dir: &Path, wait: Duration) -> Result<RunDirLock, RunDirError> {
    lock_dir("runtime dir", dir, 0o711, wait)
}

/// [`lock`] for the directory `dir`, named `what` in messages ("runtime dir", "root dir") and
/// created with `mode` if missing (the root dir is root-only from its first moment).
pub fn lock_dir(
    what: &'static str,
    dir: &Path,
    mode: u32,
    wait: Duration,
) -> Result<RunDirLock, RunDirError> {
    use std::io::{Read, Seek, Write};
    let io = |path: PathBuf| move |source| RunDirError::Io { path, source };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(io(dir.to_path_buf()))?;
    let path = dir.join(LOCK_FILE);
    let mut file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io(path.clone()))?;
    let deadline = Instant::now() + wait;
    let mut logged = false;
    while !crate::sys::lock::try_lock_exclusive(&file).map_err(io(path.clone()))? {
        let now = Instant::now();
        if now >= deadline {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "pid unknown".to_string(),
                pid => format!("pid {pid}"),
            };
            return Err(RunDirError::InUse {
                what,
                path: dir.to_path_buf(),
                holder,
            });
        }
        if !logged {
            log::info!(
                "{what} {} is locked; waiting up to {wait:?} for the holder to exit",
                dir.display()
            );
            logged = true;
        }
        std::thread::sleep(LOCK_POLL.min(deadline - now));
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .map_err(io(path))?;
    Ok(RunDirLock { _file: file })
}

/// Reads a boot ID (the kernel's, or a test's file): trimmed, 1-64 characters of
/// `[0-9a-zA-Z-]`.
pub fn read_boot_id(path: &Path) -> Result<String, RunDirError> {
    let raw = fs::read_to_string(path).map_err(|source| RunDirError::BootIdRead {
        path: path.to_path_buf(),
        source,
    })?;
    let id = raw.trim().to_string();
    if id.is_empty() || id.len() > 64 || !id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    {
        return Err(RunDirError::BootIdInvalid {
            path: path.to_path_buf(),
            value: id,
        });
    }
    Ok(id)
}

/// What [`prepare`] found in the runtime dir.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunDirState {
    /// Recorded for this boot already (a daemon restart, or `play` next to the daemon).
    SameBoot,
    /// No boot recorded yet: a fresh tmpfs after boot, or a first start.
    Fresh,
    /// Filled in an earlier boot and not cleared by it (not a tmpfs): that state was removed.
    EarlierBoot { recorded: String },
}

/// Creates the runtime dir and makes sure its state belongs to `boot_id`: the state of an
/// earlier boot is unmounted and removed, then this boot is recorded.
pub fn prepare(dir: &Path, boot_id: &str) -> Result<RunDirState, RunDirError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| RunDirError::Io { path, source }
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o711)
        .create(dir)
        .map_err(io(dir))?;
    let record = dir.join(BOOT_RECORD);
    let state = match fsutil::load_json::<String>(&record).map_err(io(&record))? {
        Loaded::Ok(id) if id == boot_id => return Ok(RunDirState::SameBoot),
        Loaded::Ok(recorded) => RunDirState::EarlierBoot { recorded },
        Loaded::Torn(why) => RunDirState::EarlierBoot {
            recorded: format!("unknown ({why})"),
        },
        Loaded::Missing => RunDirState::Fresh,
    };
    if let RunDirState::EarlierBoot { recorded } = &state {
        log::warn!(
            "runtime dir {} holds the state of an earlier boot ({recorded}; this boot is \
             {boot_id}): it is not a tmpfs, so a reboot did not clear it; removing it",
            dir.display()
        );
        for sub in STATE_DIRS {
            remove_dead_state(&dir.join(sub))?;
        }
    }
    fsutil::write_json_atomic_volatile(&record, &boot_id).map_err(io(&record))?;
    if state == RunDirState::Fresh && !is_volatile_fs(dir) {
        log::info!(
            "runtime dir {} is not a tmpfs: state of an earlier boot is recognised by its boot id",
            dir.display()
        );
    }
    Ok(state)
}

/// Unmounts everything below `dir` (deepest first; these mounts describe objects of another
/// boot, or of none) and removes it.
fn remove_dead_state(dir: &Path) -> Result<(), RunDirError> {
    for m in mounts_under(dir).iter().rev() {
        match umount2(m.as_path(), MntFlags::MNT_DETACH) {
            Ok(()) | Err(nix::Error::EINVAL) | Err(nix::Error::ENOENT) => {}
            Err(source) => {
                return Err(RunDirError::Unmount {
                    path: m.clone(),
                    source,
                })
            }
        }
    }
    fsutil::remove_tree_no_mounts(dir).map_err(|source| RunDirError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Mount points at or below `dir`, sorted (parents first).
pub fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = info
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|m| PathBuf::from(super::rootfs::unescape_mountinfo(m)))
        .filter(|m| m.starts_with(dir))
        .collect();
    out.sort();
    out.dedup();
    out
}

fn fs_type(path: &Path) -> Option<i64> {
    nix::sys::statfs::statfs(path)
        .ok()
        // The type is a c_long on 64-bit and a c_int on 32-bit targets (armhf): widened there.
        .map(|s| {
            #[allow(clippy::useless_conversion)]
            i64::from(s.filesystem_type().0)
        })
}

/// Whether `path` is a live namespace file: an nsfs inode (a `/proc/<pid>/ns/*` file or a bind
/// mount of one). A namespace file left from another boot is an empty regular file on the
/// underlying filesystem; joining it fails (EINVAL) or, worse, could join something else.
pub fn is_nsfs(path: &Path) -> bool {
    fs_type(path) == Some(NSFS_MAGIC)
}

/// Whether `path` is on a filesystem a reboot clears (tmpfs, ramfs).
pub fn is_volatile_fs(path: &Path) -> bool {
    matches!(fs_type(path), Some(TMPFS_MAGIC | RAMFS_MAGIC))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_naming_the_holder_and_a_released_one_is_taken() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        let first = lock(&run, Duration::ZERO).expect("first lock");
        let root = lock_dir("root dir", dir.path(), 0o700, Duration::ZERO).expect("root dir lock");
        let e = lock_dir("root dir", dir.path(), 0o700, Duration::ZERO).expect_err("held");
        assert!(e.to_string().starts_with("root dir "), "{e}");
        drop(root);
        let e = lock(&run, Duration::from_millis(120)).expect_err("held");
        let msg = e.to_string();
        assert!(
            msg.contains(&run.display().to_string())
                && msg.contains(&format!("pid {}", std::process::id())),
            "{msg}"
        );
        // A holder that goes away while the next one waits (a child between fork and exec
        // of a killed daemon) does not make the next start fail.
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let run = run.clone();
            std::thread::spawn(move || {
                tx.send(()).expect("send");
                lock(&run, Duration::from_secs(30)).map(|_| ())
            })
        };
        rx.recv().expect("waiter started");
        std::thread::sleep(Duration::from_millis(200));
        drop(first);
        waiter
            .join()
            .expect("join")
            .expect("lock after the holder went");
    }

    #[test]
    fn boot_ids_are_read_trimmed_and_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("boot_id");
        fs::write(&p, "5c1b2a9e-0d1c-4a4e-9a57-3b1f0e2d4c6a\n").expect("write");
        assert_eq!(
            read_boot_id(&p).expect("id"),
            "5c1b2a9e-0d1c-4a4e-9a57-3b1f0e2d4c6a"
        );
        for bad in ["", "../x", "a b"] {
            fs::write(&p, bad).expect("write");
            assert!(read_boot_id(&p).is_err(), "{bad:?}");
        }
        assert!(read_boot_id(&dir.path().join("missing")).is_err());
        // The kernel's own file reads as a boot id.
        read_boot_id(Path::new(BOOT_ID_FILE)).expect("kernel boot id");
    }

    #[test]
    fn state_of_an_earlier_boot_is_removed_and_this_boot_recorded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        assert_eq!(
            prepare(&run, "boot-a").expect("prepare"),
            RunDirState::Fresh
        );
        fs::create_dir_all(run.join("pods/u1/ns")).expect("mkdir");
        fs::write(run.join("pods/u1/ns/net"), b"").expect("write");
        fs::create_dir_all(run.join("containers/c1")).expect("mkdir");
        fs::write(run.join("podvisor.sock"), b"").expect("write");
        // A daemon restart in the same boot keeps everything.
        assert_eq!(
            prepare(&run, "boot-a").expect("prepare"),
            RunDirState::SameBoot
        );
        assert!(run.join("pods/u1/ns/net").exists());
        // Another boot: the per-boot state goes, other files (the API socket) stay.
        assert_eq!(
            prepare(&run, "boot-b").expect("prepare"),
            RunDirState::EarlierBoot {
                recorded: "boot-a".into()
            }
        );
        assert!(!run.join("pods").exists() && !run.join("containers").exists());
        assert!(run.join("podvisor.sock").exists());
        assert_eq!(
            prepare(&run, "boot-b").expect("prepare"),
            RunDirState::SameBoot
        );
    }

    #[test]
    fn only_nsfs_files_count_as_namespaces() {
        assert!(is_nsfs(Path::new("/proc/self/ns/net")));
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("net");
        fs::write(&f, b"").expect("write");
        assert!(!is_nsfs(&f), "an empty file left by a reboot");
        assert!(!is_nsfs(&dir.path().join("missing")));
    }
}
