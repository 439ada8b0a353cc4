//! eviction::topdirs: what uses a filesystem outside podvisor's dirs, so that a pressure no
//! eviction can relieve names its cause ("what uses it: /var/log/journal (3.1Gi), ...").
//!
//! The walk stays on the filesystem, leaves out podvisor's own dirs (root, logs, images),
//! follows no symlink, and is bounded in entries and in time: each entry at the top of the
//! filesystem gets an equal share of what is left of the budget, so a huge `/usr` cannot
//! hide a full `/var`. The entries are then the top ones by bytes (or by inodes, for an
//! inode signal), each directory followed down while one of its subdirectories holds most
//! of it.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A child holding at least this share (percent) of its directory is named instead of it.
const DRILL_SHARE: u64 = 80;
/// How deep sizes are kept for the drill-down (below the filesystem's top).
const DRILL_DEPTH: usize = 4;

/// The biggest users of a filesystem.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopDirs {
    /// Path, bytes allocated, inodes; biggest first.
    pub entries: Vec<(PathBuf, u64, u64)>,
    /// The walk ran out of entries or time: the sizes are lower bounds.
    pub partial: bool,
}

/// The top of the filesystem holding `path`: its highest ancestor on the same device.
pub fn mount_root(path: &Path) -> Option<PathBuf> {
    let dev = fs::metadata(path).ok()?.dev();
    let mut top = fs::canonicalize(path).ok()?;
    while let Some(parent) = top.parent() {
        match fs::metadata(parent) {
            Ok(m) if m.dev() == dev => top = parent.to_path_buf(),
            _ => break,
        }
    }
    Some(top)
}

/// The walk's state: the budget left and the sizes kept for the drill-down.
struct Walk<'a> {
    dev: u64,
    skip: &'a [PathBuf],
    entries_left: usize,
    deadline: Instant,
    partial: bool,
    /// Directory -> (bytes, inodes), down to [`DRILL_DEPTH`].
    sizes: BTreeMap<PathBuf, (u64, u64)>,
}

impl Walk<'_> {
    /// (bytes, inodes) under `path`, at most `share` entries.
    fn size(&mut self, path: &Path, depth: usize, share: &mut usize) -> (u64, u64) {
        if *share == 0 || self.entries_left == 0 || Instant::now() >= self.deadline {
            self.partial = true;
            return (0, 0);
        }
        if self.skip.iter().any(|s| path.starts_with(s)) {
            return (0, 0);
        }
        let Ok(meta) = fs::symlink_metadata(path) else {
            return (0, 0);
        };
        if meta.dev() != self.dev {
            return (0, 0);
        }
        *share -= 1;
        self.entries_left -= 1;
        let mut total = (meta.blocks().saturating_mul(512), 1u64);
        if meta.is_dir() {
            if let Ok(rd) = fs::read_dir(path) {
                for e in rd.flatten() {
                    let (b, i) = self.size(&e.path(), depth + 1, share);
                    total = (total.0.saturating_add(b), total.1.saturating_add(i));
                }
            }
            if depth <= DRILL_DEPTH {
                self.sizes.insert(path.to_path_buf(), total);
            }
        }
        total
    }
}

/// The `n` biggest entries at the top of the filesystem `root` (by inodes when `by_inodes`),
/// leaving out `skip` (and what is under it), visiting at most `max_entries` entries and
/// stopping at `deadline`.
pub fn top_dirs(
    root: &Path,
    skip: &[PathBuf],
    n: usize,
    by_inodes: bool,
    max_entries: usize,
    deadline: Instant,
) -> TopDirs {
    let Ok(meta) = fs::metadata(root) else {
        return TopDirs::default();
    };
    // A filesystem of podvisor's own (its root dir a mount of its own): nothing else on it.
    if skip.iter().any(|s| root.starts_with(s)) {
        return TopDirs::default();
    }
    let mut children: Vec<PathBuf> = match fs::read_dir(root) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(_) => return TopDirs::default(),
    };
    children.sort();
    let mut walk = Walk {
        dev: meta.dev(),
        skip,
        entries_left: max_entries,
        deadline,
        partial: false,
        sizes: BTreeMap::new(),
    };
    let mut tops = Vec::new();
    let count = children.len();
    for (i, c) in children.into_iter().enumerate() {
        // An equal share of what is left for each entry not walked yet.
        let mut share = walk.entries_left / (count - i).max(1);
        let size = walk.size(&c, 1, &mut share);
        tops.push((c, size));
    }
    let key = |s: (u64, u64)| if by_inodes { s.1 } else { s.0 };
    tops.retain(|(_, s)| key(*s) > 0);
    tops.sort_by(|a, b| key(b.1).cmp(&key(a.1)).then_with(|| a.0.cmp(&b.0)));
    tops.truncate(n);
    let entries = tops
        .into_iter()
        .map(|(path, size)| {
            let (path, (b, i)) = drill(&walk.sizes, path, size, key);
            (path, b, i)
        })
        .collect();
    TopDirs {
        entries,
        partial: walk.partial,
    }
}

/// Follows `path` down while one child holds at least [`DRILL_SHARE`] percent of it.
fn drill(
    sizes: &BTreeMap<PathBuf, (u64, u64)>,
    mut path: PathBuf,
    mut size: (u64, u64),
    key: impl Fn((u64, u64)) -> u64,
) -> (PathBuf, (u64, u64)) {
    loop {
        let biggest = sizes
            .iter()
            .filter(|(p, _)| p.parent() == Some(path.as_path()))
            .max_by_key(|(_, s)| key(**s));
        match biggest {
            Some((p, s))
                if key(*s).saturating_mul(100) >= key(size).saturating_mul(DRILL_SHARE) =>
            {
                path = p.clone();
                size = *s;
            }
            _ => return (path, size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn write(path: &Path, bytes: usize) {
        if let Some(p) = path.parent() {
            fs::create_dir_all(p).expect("mkdir");
        }
        fs::write(path, vec![0x5a; bytes]).expect("write");
    }

    #[test]
    fn the_biggest_users_outside_podvisors_dirs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        write(&r.join("podvisor/root/big"), 4 << 20);
        write(&r.join("junk/deep/er/file"), 3 << 20);
        write(&r.join("junk/small"), 4096);
        write(&r.join("b.txt"), 5 << 19);
        write(&r.join("a"), 1 << 20);
        write(&r.join("split/x"), 1 << 20);
        write(&r.join("split/y"), 1 << 20);
        for i in 0..50 {
            write(&r.join(format!("many/f{i}")), 0);
        }
        let skip = [r.join("podvisor/root")];
        let far = Instant::now() + Duration::from_secs(60);
        let t = top_dirs(r, &skip, 3, false, 10_000, far);
        let got: Vec<(String, u64)> = t
            .entries
            .iter()
            .map(|(p, b, _)| {
                let rel = p.strip_prefix(r).expect("under root");
                (rel.display().to_string(), b >> 20)
            })
            .collect();
        // junk is followed down to the directory holding most of it; split has no such child.
        assert_eq!(
            got,
            vec![
                ("junk/deep/er".to_string(), 3),
                ("b.txt".to_string(), 2),
                ("split".to_string(), 2),
            ]
        );
        assert!(!t.partial);
        // By inodes: the directory of many empty files.
        let t = top_dirs(r, &skip, 1, true, 10_000, far);
        assert_eq!(t.entries[0].0, r.join("many"));
        assert_eq!(t.entries[0].2, 51);
        // Out of entries: a lower bound, said so.
        let t = top_dirs(r, &skip, 5, false, 5, far);
        assert!(t.partial);
        // Out of time.
        let t = top_dirs(r, &skip, 5, false, 10_000, Instant::now());
        assert!(t.partial && t.entries.is_empty());
        let top = mount_root(&r.join("junk/deep")).expect("mount root");
        assert!(
            r.starts_with(&top),
            "{} above {}",
            top.display(),
            r.display()
        );
    }
}
