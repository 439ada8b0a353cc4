//! Rotated log files: naming (`<name>.<YYYYMMDD-HHMMSS>`, then `.1`, `.2`... when that name is
//! taken; `.gz` appended once container GC compressed one, as the kubelet's container log
//! manager does), recognising them next to the current file, and ordering them oldest first. The
//! writer hands out strictly increasing keys (it never reuses an older stamp even if the wall
//! clock goes back), so key order is write order; the readers rely on that.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::timestamp::format_rotation_stamp;
use super::LogError;

/// Position of a rotated file in the rotation sequence: stamp first, then collision counter.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RotationKey {
    /// `YYYYMMDD-HHMMSS` (UTC), so string order is time order.
    pub stamp: String,
    /// 0 for the bare name, N for the `.N` suffix.
    pub counter: u64,
}

impl RotationKey {
    /// The key following `last` for a rotation happening at `now`: the stamp of `now`, unless
    /// that would not sort after `last` (same second, or the clock went back).
    pub fn next_after(last: Option<&RotationKey>, now: SystemTime) -> RotationKey {
        let stamp = format_rotation_stamp(now);
        match last {
            Some(l) if l.stamp >= stamp => RotationKey {
                stamp: l.stamp.clone(),
                counter: l.counter + 1,
            },
            _ => RotationKey { stamp, counter: 0 },
        }
    }

    fn suffix(&self) -> String {
        if self.counter == 0 {
            self.stamp.clone()
        } else {
            format!("{}.{}", self.stamp, self.counter)
        }
    }

    /// Parses the part of a file name after `<name>.`.
    fn parse_suffix(s: &str) -> Option<RotationKey> {
        let (stamp, counter) = match s.get(15..) {
            Some("") => (s, 0),
            Some(rest) => {
                let n = rest.strip_prefix('.')?;
                if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) || n.starts_with('0') {
                    return None;
                }
                (&s[..15], n.parse().ok()?)
            }
            None => return None,
        };
        let b = stamp.as_bytes();
        let shape_ok = b.len() == 15
            && b[8] == b'-'
            && b[..8].iter().all(u8::is_ascii_digit)
            && b[9..].iter().all(u8::is_ascii_digit);
        shape_ok.then(|| RotationKey {
            stamp: stamp.to_owned(),
            counter,
        })
    }
}

/// A rotated file found next to a current log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotatedFile {
    pub key: RotationKey,
    pub path: PathBuf,
    /// gzip-compressed (`<rotated name>.gz`).
    pub compressed: bool,
}

/// Suffix of a compressed rotated file (the kubelet's `compressSuffix`).
pub const COMPRESSED_SUFFIX: &str = ".gz";

fn split_path(current: &Path) -> Result<(&Path, &str), LogError> {
    let name = current
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| LogError::NoFileName {
            path: current.to_owned(),
        })?;
    let dir = match current.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    Ok((dir, name))
}

/// The path a current file gets when rotated with `key`.
pub fn rotated_path(current: &Path, key: &RotationKey) -> Result<PathBuf, LogError> {
    let (dir, name) = split_path(current)?;
    Ok(dir.join(format!("{name}.{}", key.suffix())))
}

/// The rotated files of `current`, oldest first. A missing directory means none.
pub fn list_rotated(current: &Path) -> Result<Vec<RotatedFile>, LogError> {
    let (dir, name) = split_path(current)?;
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(LogError::ListDir {
                path: dir.to_owned(),
                source,
            })
        }
    };
    let prefix = format!("{name}.");
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| LogError::ListDir {
            path: dir.to_owned(),
            source,
        })?;
        let fname = entry.file_name();
        let Some(suffix) = fname.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let (suffix, compressed) = match suffix.strip_suffix(COMPRESSED_SUFFIX) {
            Some(s) => (s, true),
            None => (suffix, false),
        };
        let Some(key) = RotationKey::parse_suffix(suffix) else {
            continue;
        };
        out.push(RotatedFile {
            key,
            path: entry.path(),
            compressed,
        });
    }
    // While a file is being compressed both forms exist for a moment: the plain one (complete
    // for sure) is listed, once.
    out.sort_by(|a, b| a.key.cmp(&b.key).then(a.compressed.cmp(&b.compressed)));
    out.dedup_by(|later, earlier| later.key == earlier.key);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn key(stamp: &str, counter: u64) -> RotationKey {
        RotationKey {
            stamp: stamp.into(),
            counter,
        }
    }

    #[test]
    fn parses_only_rotation_suffixes() {
        assert_eq!(
            RotationKey::parse_suffix("20240102-030405"),
            Some(key("20240102-030405", 0))
        );
        assert_eq!(
            RotationKey::parse_suffix("20240102-030405.12"),
            Some(key("20240102-030405", 12))
        );
        for bad in [
            "20240102-03040",
            "20240102_030405",
            "20240102-030405.",
            "20240102-030405.x",
            "20240102-030405.01",
            "20240102-030405.gz",
            "20240102-030405.tmp",
            "2024010a-030405",
        ] {
            assert_eq!(RotationKey::parse_suffix(bad), None, "{bad}");
        }
    }

    #[test]
    fn next_key_never_goes_backwards() {
        let t = UNIX_EPOCH + Duration::from_secs(1_704_164_645);
        let first = RotationKey::next_after(None, t);
        assert_eq!(first, key("20240102-030405", 0));
        let same_second = RotationKey::next_after(Some(&first), t);
        assert_eq!(same_second, key("20240102-030405", 1));
        let earlier = RotationKey::next_after(Some(&same_second), t - Duration::from_secs(3600));
        assert_eq!(earlier, key("20240102-030405", 2));
        let later = RotationKey::next_after(Some(&earlier), t + Duration::from_secs(1));
        assert_eq!(later, key("20240102-030406", 0));
        assert!(first < same_second && same_second < earlier && earlier < later);
    }

    #[test]
    fn lists_rotated_files_in_numeric_counter_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cur = dir.path().join("0.log");
        for name in [
            "0.log",
            "0.log.20240102-030405.10",
            "0.log.20240102-030405",
            "0.log.20240102-030405.2",
            "0.log.20231231-235959",
            "0.log.20240102-030405.gz",
            "0.log.20240101-000000.gz",
            "0.log.20240101-000000.gz.tmp",
            "1.log.20240102-030405",
            "0.logx.20240102-030405",
        ] {
            fs::write(dir.path().join(name), b"").expect("write");
        }
        let got: Vec<String> = list_rotated(&cur)
            .expect("list")
            .into_iter()
            .map(|r| {
                r.path
                    .file_name()
                    .expect("name")
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            got,
            [
                "0.log.20231231-235959",
                "0.log.20240101-000000.gz",
                "0.log.20240102-030405",
                "0.log.20240102-030405.2",
                "0.log.20240102-030405.10",
            ]
        );
        assert_eq!(
            rotated_path(&cur, &key("20240102-030405", 3)).expect("path"),
            dir.path().join("0.log.20240102-030405.3")
        );
    }

    #[test]
    fn missing_directory_has_no_rotated_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cur = dir.path().join("nope").join("0.log");
        assert_eq!(list_rotated(&cur).expect("list"), Vec::new());
    }
}
