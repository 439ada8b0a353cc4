//! Layer tar unpacking (`podvisor image import`/`pull`): an arbitrary tar stream unpacked into
//! a fresh scratch root. Nothing may change outside it: the scratch root's parent holds only
//! the root, and a canary directory next to it (`../podvisor-fuzz-outside`, reachable by
//! `../` and by its absolute path) keeps its entries, metadata, link counts and content.
#![no_main]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

/// The directory below which every run's scratch root and the canary live (tmpfs if possible).
/// scripts/fuzz gives a scratch dir (`PODVISOR_FUZZ_SCRATCH`) it removes afterwards.
fn base() -> PathBuf {
    if let Some(d) = std::env::var_os("PODVISOR_FUZZ_SCRATCH") {
        return PathBuf::from(d);
    }
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

struct Sandbox {
    /// `<base>/podvisor-fuzz-unpack-<pid>`: holds `root` only.
    parent: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    outside_state: BTreeMap<PathBuf, String>,
}

/// Every entry below `dir` (itself included) with what an escape could change.
fn state(dir: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = fs::symlink_metadata(&p).expect("stat outside entry");
        let content = if m.is_file() {
            fs::read(&p).expect("read outside file")
        } else {
            Vec::new()
        };
        out.insert(
            p.clone(),
            format!(
                "{:o} {}:{} {} {} {} {:?}",
                m.mode(),
                m.uid(),
                m.gid(),
                m.len(),
                m.mtime(),
                m.nlink(),
                content
            ),
        );
        if m.is_dir() {
            for e in fs::read_dir(&p).expect("list outside dir") {
                todo.push(e.expect("outside entry").path());
            }
        }
    }
    out
}

fn sandbox() -> &'static Sandbox {
    static SANDBOX: OnceLock<Sandbox> = OnceLock::new();
    SANDBOX.get_or_init(|| {
        let base = base();
        let outside = base.join("podvisor-fuzz-outside");
        fs::create_dir_all(outside.join("dir")).expect("outside dir");
        fs::write(outside.join("canary"), b"canary\n").expect("canary");
        fs::write(outside.join("dir/canary"), b"canary\n").expect("canary");
        let parent = base.join(format!("podvisor-fuzz-unpack-{}", std::process::id()));
        let _ = fs::remove_dir_all(&parent);
        fs::create_dir_all(&parent).expect("scratch parent");
        Sandbox {
            root: parent.join("root"),
            parent,
            outside_state: state(&outside),
            outside,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let s = sandbox();
    fs::create_dir(&s.root).expect("scratch root");
    let _ = podvisor::images::unpack(data, &s.root);
    let names: Vec<_> = fs::read_dir(&s.parent)
        .expect("list scratch parent")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(
        names,
        ["root"],
        "an entry was written next to the layer root"
    );
    assert!(
        fs::symlink_metadata(&s.root).expect("root").is_dir(),
        "the layer root was replaced"
    );
    assert!(
        state(&s.outside) == s.outside_state,
        "the canary directory outside the layer root changed"
    );
    fs::remove_dir_all(&s.root).expect("remove scratch root");
});
