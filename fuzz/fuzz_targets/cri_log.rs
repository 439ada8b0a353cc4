//! The CRI log reader (`podvisor logs`, the API's log routes): arbitrary bytes as a container's
//! log, split between one rotated file and the current file, read whole, with a tail, from the
//! current file only, and followed from a tail.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use podvisor::logs::{parse_record, read_log, FollowStart, LogFollower, ReadOptions};

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        // scripts/fuzz gives a scratch dir it removes afterwards.
        let base = match std::env::var_os("PODVISOR_FUZZ_SCRATCH") {
            Some(d) => PathBuf::from(d),
            None if std::path::Path::new("/dev/shm").is_dir() => PathBuf::from("/dev/shm"),
            None => std::env::temp_dir(),
        };
        let d = base.join(format!("podvisor-fuzz-cri-log-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("scratch dir");
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&split, data)) = data.split_first() else {
        return;
    };
    let at = data.len() * usize::from(split) / 256;
    let current = dir().join("0.log");
    let rotated = dir().join("0.log.20250101-000000");
    std::fs::write(&rotated, &data[..at]).expect("write rotated log");
    std::fs::write(&current, &data[at..]).expect("write current log");
    for line in data.split_inclusive(|&b| b == b'\n') {
        let _ = parse_record(line);
    }
    let all = read_log(
        &current,
        ReadOptions {
            tail: None,
            include_rotated: true,
        },
    );
    let tail = usize::from(split % 4);
    let last = read_log(
        &current,
        ReadOptions {
            tail: Some(tail),
            include_rotated: true,
        },
    );
    if let (Ok(all), Ok(last)) = (&all, &last) {
        assert_eq!(last.as_slice(), &all[all.len().saturating_sub(tail)..]);
    }
    let _ = read_log(
        &current,
        ReadOptions {
            tail: None,
            include_rotated: false,
        },
    );
    if let Ok(mut follower) = LogFollower::new(&current, FollowStart::Tail(tail)) {
        let _ = follower.poll();
    }
});
