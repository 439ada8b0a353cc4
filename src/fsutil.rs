//! Small filesystem helpers shared by every manager: atomic file replacement (write to a
//! temporary file in the same directory, fsync, rename, fsync the directory) so that a power
//! cut or SIGKILL never leaves a half-written state file visible (opening paths below a
//! directory with `openat2` is [`crate::sys::at`]); the volatile variant for
//! state that dies with the boot anyway; reading a JSON record that a power cut may have left
//! empty or torn ([`load_json`]); and removing a tree without crossing into mount points.
//!
//! Which records are durable (see docs/design.md, "Durability"): desired pods, image records,
//! refs and layer directories, exit records and container identities (fsynced by the monitor
//! once its container started, off the start path). Everything under the runtime directory
//! (tmpfs) is written without fsync.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Writes `data` to `path` atomically: readers see either the old content or the new one.
/// The data and the rename are made durable (fsync of the file and of the directory).
pub fn write_atomic(path: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic_with(path, data, true)
}

/// Like [`write_atomic`] but without the fsyncs: atomic against crashes of the process, not
/// against power loss. For state that is worthless after a reboot anyway (a container's
/// runtime files: no container survives a power cut) on the latency-sensitive start path.
pub fn write_atomic_volatile(path: &Path, data: &[u8]) -> io::Result<()> {
    write_atomic_with(path, data, false)
}

/// Serializes `value` as JSON and writes it with [`write_atomic_volatile`].
pub fn write_json_atomic_volatile<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let data = serde_json::to_vec(value).map_err(io::Error::other)?;
    write_atomic_volatile(path, &data)
}

fn write_atomic_with(path: &Path, data: &[u8], durable: bool) -> io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let written = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(data)?;
            if durable {
                f.sync_all()?;
            }
            Ok(())
        });
    // A full disk (ENOSPC) fails here: the partial temporary file must not keep the space.
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    if durable {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Serializes `value` as JSON and writes it atomically.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let data = serde_json::to_vec(value).map_err(io::Error::other)?;
    write_atomic(path, &data)
}

/// Makes a file written without fsync durable: fsyncs it, then each of `dirs` (the directory
/// holding it and, for a directory created with it, that directory's parent).
pub fn sync_file_and_dirs(path: &Path, dirs: &[&Path]) -> io::Result<()> {
    File::open(path)?.sync_all()?;
    for d in dirs {
        File::open(d)?.sync_all()?;
    }
    Ok(())
}

/// Whether `name` is a temporary file of [`write_atomic`] (`.<name>.tmp-<pid>`), which a crash
/// between the write and the rename leaves behind.
pub fn is_atomic_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp-")
}

/// Removes the temporary files [`write_atomic`] left in `dir` (a crash between write and
/// rename); returns how many. Only for directories whose writers are not running.
pub fn remove_atomic_temps(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        if e.file_name().to_str().is_some_and(is_atomic_temp_name)
            && e.file_type().is_ok_and(|t| t.is_file())
            && fs::remove_file(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// What reading a JSON record found.
#[derive(Debug)]
pub enum Loaded<T> {
    /// No such file.
    Missing,
    /// The file exists but is empty or does not parse: a write a power cut interrupted (ext4
    /// can leave a renamed file empty when its data never reached the disk), or damage. Callers
    /// treat it as "interrupted": clean it up and say so once.
    Torn(String),
    Ok(T),
}

/// Reads a JSON record, telling a missing file, a torn one and a good one apart.
pub fn load_json<T: serde::de::DeserializeOwned>(path: &Path) -> io::Result<Loaded<T>> {
    let data = match fs::read(path) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Loaded::Missing),
        Err(e) => return Err(e),
    };
    if data.iter().all(|b| b.is_ascii_whitespace() || *b == 0) {
        return Ok(Loaded::Torn(format!("empty ({} bytes)", data.len())));
    }
    Ok(match serde_json::from_slice(&data) {
        Ok(v) => Loaded::Ok(v),
        Err(e) => Loaded::Torn(e.to_string()),
    })
}

/// Removes a tree, refusing to descend into mount points (a directory whose st_dev differs
/// from the top's): a mount that survived an unmount attempt is never emptied through.
/// Entries that vanish meanwhile are gone as wanted: another process removing the same tree
/// (a monitor taking its runtime directory apart while the runtime removes the container)
/// is no error.
pub fn remove_tree_no_mounts(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let Some(top) = present(fs::symlink_metadata(dir))? else {
        return Ok(());
    };
    /// `None` for what another remover took first (or what was never there).
    fn present<T>(r: io::Result<T>) -> io::Result<Option<T>> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            other => other.map(Some),
        }
    }
    fn walk(p: &Path, dev: u64) -> io::Result<()> {
        let Some(md) = present(fs::symlink_metadata(p))? else {
            return Ok(());
        };
        if md.is_dir() {
            if md.dev() != dev {
                return Err(io::Error::other(format!(
                    "{} is still a mount point, not removing it",
                    p.display()
                )));
            }
            let Some(entries) = present(fs::read_dir(p))? else {
                return Ok(());
            };
            for entry in entries {
                if let Some(entry) = present(entry)? {
                    walk(&entry.path(), dev)?;
                }
            }
            present(fs::remove_dir(p)).map(drop)
        } else {
            present(fs::remove_file(p)).map(drop)
        }
    }
    walk(dir, top.dev())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_atomic_replaces_content_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("state.json");
        write_atomic(&p, b"one").expect("first write");
        write_atomic(&p, b"two").expect("second write");
        assert_eq!(fs::read(&p).expect("read"), b"two");
        let names: Vec<_> = fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }

    #[test]
    fn load_json_tells_missing_torn_and_good_apart() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("r.json");
        assert!(matches!(
            load_json::<u32>(&p).expect("read"),
            Loaded::Missing
        ));
        for torn in [&b""[..], b"\0\0\0\0", b"{\"a\": 1", b"  \n"] {
            fs::write(&p, torn).expect("write");
            assert!(
                matches!(
                    load_json::<serde_json::Value>(&p).expect("read"),
                    Loaded::Torn(_)
                ),
                "{torn:?}"
            );
        }
        write_json_atomic(&p, &7u32).expect("write");
        assert!(matches!(load_json::<u32>(&p).expect("read"), Loaded::Ok(7)));
    }

    #[test]
    fn temp_leftovers_are_recognised_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(".a.json.tmp-42"), b"x").expect("w");
        fs::write(dir.path().join("a.json"), b"{}").expect("w");
        fs::write(dir.path().join(".hidden"), b"x").expect("w");
        assert_eq!(remove_atomic_temps(dir.path()), 1);
        assert!(dir.path().join("a.json").exists() && dir.path().join(".hidden").exists());
    }

    /// Two removers of one tree (a monitor and the runtime) both succeed: what the other one
    /// removed first is gone as wanted. 30 rounds of 4 threads on ~250 entries: before
    /// vanished entries were accepted, a round lost the race within a few.
    #[test]
    fn concurrent_removers_of_one_tree_both_succeed() {
        let base = tempfile::tempdir().expect("tempdir");
        for round in 0..30 {
            let top = base.path().join(format!("t{round}"));
            for d in 0..10 {
                let sub = top.join(format!("d{d}")).join("deeper");
                fs::create_dir_all(&sub).expect("mkdir");
                for f in 0..12 {
                    fs::write(sub.join(format!("f{f}")), b"x").expect("write");
                    fs::write(top.join(format!("d{d}")).join(format!("g{f}")), b"x")
                        .expect("write");
                }
            }
            let results: Vec<io::Result<()>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..4)
                    .map(|_| s.spawn(|| remove_tree_no_mounts(&top)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("remover thread"))
                    .collect()
            });
            for r in results {
                r.unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
            assert!(!top.exists(), "round {round}: tree left");
        }
    }
}
