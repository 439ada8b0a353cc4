//! eviction::usage: disk usage of the trees the ephemeral storage limits are measured on
//! (writable layers, container logs, emptyDir volumes) at a bounded cost per housekeeping
//! pass.
//!
//! A `du` of every tree every 10 s costs one `lstat` per file, forever, however large the
//! trees are. [`UsageCache`] instead spends at most a budget of entries (`lstat`s) per pass,
//! across all trees: a walk that runs out of budget keeps its place (the open directory and
//! the directories still to read) and goes on at the next pass, the trees least recently
//! measured first. A tree's usage is the larger of its last complete walk and the walk in
//! progress (a lower bound of the present usage, so a limit is acted on as soon as a partial
//! walk passes it). A tree of N entries is thus measured again every ⌈N / budget⌉ passes
//! at worst; small trees, the usual case, every pass.
//!
//! Project quotas (the kubelet's `LocalStorageCapacityIsolationFSQuotaMonitoring`) would make
//! a measurement O(1), but they need a filesystem mounted with `prjquota` (ext4 with the
//! `project` feature, XFS) and only cover emptyDir volumes; edge nodes' root filesystems
//! rarely have either, and the walk works on all of them.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Entries (`lstat` calls) one housekeeping pass spends at most on all trees together.
pub const ENTRIES_PER_PASS: usize = 10_000;

/// A tree to measure.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tree {
    pub path: PathBuf,
    /// Only the top-level entries whose name starts with this (a container instance's log
    /// files `<restartCount>.log*` in its log directory).
    pub prefix: Option<String>,
}

impl Tree {
    pub fn new(path: impl Into<PathBuf>) -> Tree {
        Tree {
            path: path.into(),
            prefix: None,
        }
    }
}

#[derive(Debug)]
struct Walk {
    /// The tree's filesystem: other mounts below it are not counted.
    dev: u64,
    bytes: u64,
    /// The directory being read, and the ones still to read.
    current: Option<(fs::ReadDir, bool)>,
    pending: Vec<PathBuf>,
}

#[derive(Debug)]
struct TreeState {
    /// The root's (dev, inode): a tree removed and created again starts afresh.
    root: (u64, u64),
    /// Bytes of the last complete walk.
    last: Option<u64>,
    /// The pass that last completed a walk (0: never).
    completed_at: u64,
    walk: Option<Walk>,
    seen: bool,
}

/// What a pass spent (for the log and docs/eviction.md's numbers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassCost {
    pub entries: usize,
    pub walks_completed: usize,
}

/// Usage of trees measured across passes with a bounded number of entries per pass.
#[derive(Debug)]
pub struct UsageCache {
    budget: usize,
    pass: u64,
    trees: BTreeMap<Tree, TreeState>,
}

impl UsageCache {
    pub fn new(budget: usize) -> UsageCache {
        UsageCache {
            budget: budget.max(1),
            pass: 0,
            trees: BTreeMap::new(),
        }
    }

    /// One pass over `trees`: the usage of each in bytes (`None` when the tree does not
    /// exist). Trees not asked for are forgotten (a pod gone or stopped).
    pub fn measure(&mut self, trees: &[Tree]) -> (Vec<Option<u64>>, PassCost) {
        self.pass += 1;
        for s in self.trees.values_mut() {
            s.seen = false;
        }
        let mut present = Vec::with_capacity(trees.len());
        for t in trees {
            let root = fs::symlink_metadata(&t.path)
                .ok()
                .map(|m| (m.dev(), m.ino(), m.is_dir()));
            let Some((dev, ino, _)) = root else {
                present.push(false);
                continue;
            };
            present.push(true);
            let s = self.trees.entry(t.clone()).or_insert(TreeState {
                root: (dev, ino),
                last: None,
                completed_at: 0,
                walk: None,
                seen: true,
            });
            if s.root != (dev, ino) {
                *s = TreeState {
                    root: (dev, ino),
                    last: None,
                    completed_at: 0,
                    walk: None,
                    seen: true,
                };
            }
            s.seen = true;
        }
        self.trees.retain(|_, s| s.seen);
        // The least recently measured first: a walk in progress goes on before new ones.
        let mut order: Vec<&Tree> = trees
            .iter()
            .zip(&present)
            .filter(|(_, p)| **p)
            .map(|(t, _)| t)
            .collect();
        order.sort_by_key(|t| self.trees.get(*t).map_or(0, |s| s.completed_at));
        order.dedup();
        let mut cost = PassCost::default();
        let mut left = self.budget;
        for t in order {
            if left == 0 {
                break;
            }
            let Some(s) = self.trees.get_mut(t) else {
                continue;
            };
            let walk = s.walk.get_or_insert_with(|| Walk {
                dev: s.root.0,
                bytes: 0,
                current: None,
                pending: vec![t.path.clone()],
            });
            let before = left;
            let done = step(walk, &t.path, t.prefix.as_deref(), &mut left);
            cost.entries += before - left;
            if done {
                s.last = Some(walk.bytes);
                s.walk = None;
                s.completed_at = self.pass;
                cost.walks_completed += 1;
            }
        }
        let usage = trees
            .iter()
            .zip(present)
            .map(|(t, p)| {
                let s = self.trees.get(t).filter(|_| p)?;
                let partial = s.walk.as_ref().map_or(0, |w| w.bytes);
                Some(s.last.unwrap_or(0).max(partial))
            })
            .collect();
        (usage, cost)
    }
}

/// Walks on until the tree is done (true) or `left` is spent.
fn step(w: &mut Walk, root: &Path, prefix: Option<&str>, left: &mut usize) -> bool {
    loop {
        if *left == 0 {
            return false;
        }
        if let Some((dir, top)) = w.current.as_mut() {
            let top = *top;
            match dir.next() {
                Some(Ok(e)) => {
                    if top
                        && prefix.is_some_and(|p| !e.file_name().to_string_lossy().starts_with(p))
                    {
                        continue;
                    }
                    *left -= 1;
                    let Ok(m) = fs::symlink_metadata(e.path()) else {
                        continue;
                    };
                    if m.dev() != w.dev {
                        continue;
                    }
                    w.bytes = w.bytes.saturating_add(m.blocks().saturating_mul(512));
                    if m.is_dir() {
                        w.pending.push(e.path());
                    }
                }
                // A directory that went away or cannot be read any more: what it held is gone.
                Some(Err(_)) | None => w.current = None,
            }
            continue;
        }
        let Some(dir) = w.pending.pop() else {
            return true;
        };
        *left -= 1;
        let top = dir == root;
        let Ok(m) = fs::symlink_metadata(&dir) else {
            continue;
        };
        if m.dev() != w.dev {
            continue;
        }
        if top {
            // The root itself (below it, each directory was counted when it was found).
            w.bytes = w.bytes.saturating_add(m.blocks().saturating_mul(512));
        }
        if m.is_dir() {
            if let Ok(rd) = fs::read_dir(&dir) {
                w.current = Some((rd, top));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree_of(dir: &Path, files: usize, size: usize) {
        for i in 0..files {
            let sub = dir.join(format!("d{}", i % 7));
            fs::create_dir_all(&sub).expect("mkdir");
            fs::write(sub.join(format!("f{i}")), vec![1u8; size]).expect("write");
        }
    }

    fn du(path: &Path) -> u64 {
        let mut c = UsageCache::new(usize::MAX);
        c.measure(&[Tree::new(path)]).0[0].expect("exists")
    }

    #[test]
    fn a_walk_out_of_budget_goes_on_at_the_next_pass_and_reports_a_lower_bound() {
        let d = tempfile::tempdir().expect("tmp");
        tree_of(d.path(), 100, 8192);
        let full = du(d.path());
        assert!(full >= 100 * 8192, "{full}");
        let mut c = UsageCache::new(30);
        let t = [Tree::new(d.path())];
        let mut passes = 0;
        let mut prev = 0;
        loop {
            passes += 1;
            let (u, cost) = c.measure(&t);
            let u = u[0].expect("exists");
            assert!(cost.entries <= 30, "{cost:?}");
            assert!(u >= prev && u <= full, "{u} within {prev}..={full}");
            prev = u;
            if cost.walks_completed == 1 {
                break;
            }
            assert!(passes < 20, "never completes");
        }
        // 115 entries (the root, 7 directories found and read, 100 files), 30 a pass.
        assert_eq!(passes, 4);
        assert_eq!(prev, full);
        // Once complete, the last total stands while the next walk runs.
        let (u, _) = c.measure(&t);
        assert_eq!(u[0], Some(full));
    }

    #[test]
    fn budget_is_shared_least_recently_measured_first_and_gone_trees_are_forgotten() {
        let d = tempfile::tempdir().expect("tmp");
        let (a, b) = (d.path().join("a"), d.path().join("b"));
        tree_of(&a, 20, 4096);
        tree_of(&b, 20, 4096);
        let trees = [Tree::new(&a), Tree::new(&b)];
        let mut c = UsageCache::new(40);
        // Pass 1 completes a (35 entries) and starts b; pass 2 finishes b first.
        let (_, c1) = c.measure(&trees);
        assert_eq!(c1.walks_completed, 1);
        let (u2, c2) = c.measure(&trees);
        assert!(c2.walks_completed >= 1);
        assert_eq!(u2[1], Some(du(&b)));
        // A tree removed and made again is measured afresh, not from the old total.
        fs::remove_dir_all(&b).expect("rm");
        let (u, _) = c.measure(&trees);
        assert_eq!(u[1], None);
        fs::create_dir_all(&b).expect("mkdir");
        let (u, _) = c.measure(&trees);
        assert!(u[1].expect("b") < 20 * 4096);
        c.measure(&trees[..1]);
        assert_eq!(c.trees.len(), 1);
    }

    #[test]
    fn prefix_selects_one_instance_of_a_log_directory() {
        let d = tempfile::tempdir().expect("tmp");
        fs::write(d.path().join("0.log"), vec![b'x'; 64 << 10]).expect("0");
        fs::write(d.path().join("1.log"), vec![b'x'; 4096]).expect("1");
        fs::write(d.path().join("1.log.20250101-000000.gz"), vec![b'x'; 4096]).expect("1r");
        let mut c = UsageCache::new(100);
        let t = Tree {
            path: d.path().to_path_buf(),
            prefix: Some("1.log".into()),
        };
        let u = c.measure(&[t]).0[0].expect("exists");
        assert!((8192..64 << 10).contains(&u), "{u}");
    }
}
