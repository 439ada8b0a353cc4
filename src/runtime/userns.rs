//! userns: the user namespaces of `hostUsers: false` pods, as the kubelet's user namespace
//! manager (`pkg/kubelet/userns`) hands them to containerd 2.
//!
//! Every such pod gets 65536 IDs of its own, `0..65536` inside mapped to `base..base+65536`
//! on the host, the same for UIDs and GIDs and for every container of the pod. The bases are
//! slots of 65536 IDs from a range: the `/etc/subuid` and `/etc/subgid` entry of the user
//! `podvisor` (or `kubelet`, as the kubelet reads it), which must be equal, aligned to 65536
//! and not start at 0; without one, the kubelet's default, IDs `65536..2^32` (slot 0, the
//! host's own IDs, is never handed out).
//!
//! The mapping is persisted as the kubelet persists it: `<root-dir>/pods/<uid>/userns` (the
//! pod's data directory, kept across reboots while the pod exists), JSON
//! `{"uidMappings":[{"hostId":..,"containerId":0,"length":65536}],"gidMappings":[..]}`,
//! written atomically and fsynced before the sandbox uses it. A restarted daemon records
//! every file it finds before it allocates anything, so it never hands out a range in use,
//! and a pod adopted again keeps its mapping. The slot is released when the pod's data
//! directory goes (sandbox removal).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fsutil::{self, Loaded};

/// IDs per pod: the kubelet's `userNsUnitLength` and default `idsPerPod`.
pub const IDS_PER_POD: u32 = 65536;

/// The file of a pod's mapping in its data directory (the kubelet's name).
pub const MAPPINGS_FILE: &str = "userns";

/// Errors of the user namespace manager.
#[derive(Debug, thiserror::Error)]
pub enum UsernsError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}: invalid user namespace mapping: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("{path}: invalid user namespace mapping: {source}")]
    Mapping { path: PathBuf, source: MappingError },
    #[error("{path}: {reason}")]
    Range { path: PathBuf, reason: String },
    #[error("no free user namespace left: all {slots} ranges of 65536 IDs are in use")]
    Exhausted { slots: u32 },
    #[error("pod {pod}: user namespace range {host_id} is already used by pod {other}")]
    Taken {
        pod: String,
        host_id: u32,
        other: String,
    },
}

/// Why a persisted mapping is refused: the kubelet's checks of the file, or a range that
/// another pod, or no configured slot, holds.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MappingError {
    #[error("exactly one uid mapping is allowed")]
    NotOneMapping,
    #[error("gid and uid mappings must be identical")]
    GidsDiffer,
    #[error("uid 0 must be mapped")]
    RootNotMapped,
    #[error("length {length} is not {IDS_PER_POD}")]
    Length { length: u32 },
    #[error("host id {host_id} is not a non-zero multiple of {IDS_PER_POD}")]
    Unaligned { host_id: u32 },
    #[error("pod already holds the range at {held}")]
    AlreadyHolds { held: u32 },
    #[error("host id {host_id} is outside the configured range")]
    OutsideRange { host_id: u32 },
    #[error("range {host_id} is already used by pod {other}")]
    UsedBy { host_id: u32, other: String },
}

/// One line of a uid_map/gid_map (the kubelet's `idMapping`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IdMapping {
    pub host_id: u32,
    pub container_id: u32,
    pub length: u32,
}

/// A pod's user namespace (the kubelet's `userNamespace` file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodUserNamespace {
    pub uid_mappings: Vec<IdMapping>,
    pub gid_mappings: Vec<IdMapping>,
}

impl PodUserNamespace {
    /// `0..65536` mapped to `base..`, for UIDs and GIDs.
    pub fn at(base: u32) -> PodUserNamespace {
        let m = IdMapping {
            host_id: base,
            container_id: 0,
            length: IDS_PER_POD,
        };
        PodUserNamespace {
            uid_mappings: vec![m],
            gid_mappings: vec![m],
        }
    }

    /// The host ID of the pod's root: its range's first ID.
    pub fn base(&self) -> u32 {
        self.uid_mappings.first().map(|m| m.host_id).unwrap_or(0)
    }

    /// The text written to /proc/<pid>/uid_map (and gid_map): `0 <base> 65536`.
    pub fn map_line(&self) -> String {
        format!("0 {} {}\n", self.base(), IDS_PER_POD)
    }

    /// The kubelet's checks of a mappings file: one mapping, UIDs and GIDs identical, root
    /// mapped, 65536 IDs, an aligned base that is not the host's own IDs.
    pub fn check(&self) -> Result<u32, MappingError> {
        let [u] = self.uid_mappings.as_slice() else {
            return Err(MappingError::NotOneMapping);
        };
        if self.gid_mappings.as_slice() != [*u] {
            return Err(MappingError::GidsDiffer);
        }
        if u.container_id != 0 {
            return Err(MappingError::RootNotMapped);
        }
        if u.length != IDS_PER_POD {
            return Err(MappingError::Length { length: u.length });
        }
        if u.host_id == 0 || u.host_id % IDS_PER_POD != 0 {
            return Err(MappingError::Unaligned { host_id: u.host_id });
        }
        Ok(u.host_id)
    }
}

/// The IDs pods' user namespaces are allocated from: slots `first_slot..first_slot+slots` of
/// 65536 IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    pub first_slot: u32,
    pub slots: u32,
}

impl Default for IdRange {
    /// The kubelet's default without a subuid entry: IDs 65536 up to 2^32.
    fn default() -> Self {
        IdRange {
            first_slot: 1,
            slots: u32::MAX / IDS_PER_POD,
        }
    }
}

/// The range of `user` (or the first of `users` found) in a subuid/subgid text (`name:first:count`
/// lines); `None` when no line names one of them. An entry must be aligned to 65536, not
/// start at 0, and hold at least one pod.
pub fn parse_subid(text: &str, users: &[&str]) -> Result<Option<IdRange>, String> {
    for user in users {
        for (n, line) in text.lines().enumerate() {
            let mut parts = line.trim().split(':');
            if parts.next() != Some(*user) {
                continue;
            }
            let (Some(first), Some(count), None) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(format!("line {}: want name:first:count", n + 1));
            };
            let (Ok(first), Ok(count)) = (first.parse::<u64>(), count.parse::<u64>()) else {
                return Err(format!("line {}: first and count must be numbers", n + 1));
            };
            let unit = u64::from(IDS_PER_POD);
            if first == 0 || first % unit != 0 || count % unit != 0 || count == 0 {
                return Err(format!(
                    "line {}: the range of {user} must start at a non-zero multiple of 65536 and hold a multiple of 65536 IDs",
                    n + 1
                ));
            }
            if first + count > 1 << 32 {
                return Err(format!("line {}: the range ends beyond 2^32", n + 1));
            }
            return Ok(Some(IdRange {
                first_slot: (first / unit) as u32,
                slots: (count / unit) as u32,
            }));
        }
    }
    Ok(None)
}

/// The range from /etc/subuid and /etc/subgid (both must name the same one), else the
/// default.
pub fn read_id_range(subuid: &Path, subgid: &Path) -> Result<IdRange, UsernsError> {
    const USERS: &[&str] = &["podvisor", "kubelet"];
    let read = |p: &Path| match fs::read_to_string(p) {
        Ok(t) => parse_subid(&t, USERS).map_err(|reason| UsernsError::Range {
            path: p.to_path_buf(),
            reason,
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(UsernsError::Io {
            path: p.to_path_buf(),
            source,
        }),
    };
    let (u, g) = (read(subuid)?, read(subgid)?);
    if u != g {
        return Err(UsernsError::Range {
            path: subgid.to_path_buf(),
            reason: format!(
                "the podvisor range ({g:?}) differs from {}'s ({u:?})",
                subuid.display()
            ),
        });
    }
    Ok(u.unwrap_or_default())
}

/// The allocation bitmap (the kubelet's `AllocationBitmap` plus `usedBy`): which slot each
/// pod holds. Pure: files are the caller's.
#[derive(Debug, Clone, Default)]
pub struct Allocator {
    range: IdRange,
    used: BTreeSet<u32>,
    by_pod: BTreeMap<String, u32>,
}

impl Allocator {
    pub fn new(range: IdRange) -> Allocator {
        Allocator {
            range,
            used: BTreeSet::new(),
            by_pod: BTreeMap::new(),
        }
    }

    /// The base `pod` holds, if any.
    pub fn get(&self, pod: &str) -> Option<u32> {
        self.by_pod.get(pod).copied()
    }

    /// Records a persisted mapping: the same base again is fine; another pod's slot or a
    /// base outside the range is refused.
    pub fn record(&mut self, pod: &str, base: u32) -> Result<(), MappingError> {
        if let Some(prev) = self.get(pod) {
            return if prev == base {
                Ok(())
            } else {
                Err(MappingError::AlreadyHolds { held: prev })
            };
        }
        let slot = base / IDS_PER_POD;
        if base % IDS_PER_POD != 0
            || slot < self.range.first_slot
            || slot - self.range.first_slot >= self.range.slots
        {
            return Err(MappingError::OutsideRange { host_id: base });
        }
        if !self.used.insert(slot) {
            let other = self
                .by_pod
                .iter()
                .find(|(_, b)| **b == base)
                .map(|(p, _)| p.clone())
                .unwrap_or_default();
            return Err(MappingError::UsedBy {
                host_id: base,
                other,
            });
        }
        self.by_pod.insert(pod.to_string(), base);
        Ok(())
    }

    /// The base of `pod`, allocating the lowest free slot if it has none.
    pub fn allocate(&mut self, pod: &str) -> Result<u32, UsernsError> {
        if let Some(b) = self.get(pod) {
            return Ok(b);
        }
        let first = self.range.first_slot;
        let end = first.saturating_add(self.range.slots);
        // Lowest free slot: walk the used set in order.
        let mut candidate = first;
        for &s in self.used.range(first..end) {
            if s != candidate {
                break;
            }
            candidate += 1;
        }
        if candidate >= end {
            return Err(UsernsError::Exhausted {
                slots: self.range.slots,
            });
        }
        let base = candidate * IDS_PER_POD;
        self.used.insert(candidate);
        self.by_pod.insert(pod.to_string(), base);
        Ok(base)
    }

    /// Frees the slot of `pod` (nothing if it holds none).
    pub fn release(&mut self, pod: &str) {
        if let Some(base) = self.by_pod.remove(pod) {
            self.used.remove(&(base / IDS_PER_POD));
        }
    }

    /// How many pods hold a range.
    pub fn in_use(&self) -> usize {
        self.by_pod.len()
    }
}

/// The manager: the allocator and the pods' mapping files below `pods_dir`
/// (`<root-dir>/pods`).
#[derive(Debug)]
pub struct UsernsManager {
    pods_dir: PathBuf,
    alloc: Allocator,
}

impl UsernsManager {
    /// Records every mapping file below `pods_dir` first (a restarted daemon). A file that
    /// is invalid or collides is logged and left out: its pod fails at its next start with
    /// the same error, and its range stays unused rather than handed out twice.
    pub fn load(pods_dir: &Path, range: IdRange) -> UsernsManager {
        let mut m = UsernsManager {
            pods_dir: pods_dir.to_path_buf(),
            alloc: Allocator::new(range),
        };
        let Ok(entries) = fs::read_dir(pods_dir) else {
            return m;
        };
        let mut uids: Vec<String> = entries
            .flatten()
            .filter_map(|e| e.file_name().into_string().ok())
            .collect();
        uids.sort();
        for uid in uids {
            match m.read(&uid) {
                Ok(None) => {}
                Ok(Some(ns)) => {
                    let path = m.file(&uid);
                    if let Err(reason) = ns.check().and_then(|b| m.alloc.record(&uid, b)) {
                        log::warn!("{}: {reason}", path.display());
                        // Keep the slot: another pod must not get IDs that own files.
                        m.alloc.used.insert(ns.base() / IDS_PER_POD);
                    }
                }
                Err(e) => log::warn!("{e}"),
            }
        }
        m
    }

    fn file(&self, uid: &str) -> PathBuf {
        self.pods_dir.join(uid).join(MAPPINGS_FILE)
    }

    fn read(&self, uid: &str) -> Result<Option<PodUserNamespace>, UsernsError> {
        let path = self.file(uid);
        match fsutil::load_json::<PodUserNamespace>(&path) {
            Ok(Loaded::Ok(ns)) => Ok(Some(ns)),
            Ok(Loaded::Missing) => Ok(None),
            Ok(Loaded::Torn(reason)) => Err(UsernsError::Invalid { path, reason }),
            Err(source) => Err(UsernsError::Io { path, source }),
        }
    }

    /// The pod's mapping: the persisted one, or a new range written (durably) to its data
    /// directory before it is returned.
    pub fn get_or_create(&mut self, uid: &str) -> Result<PodUserNamespace, UsernsError> {
        if let Some(ns) = self.read(uid)? {
            let path = self.file(uid);
            let base = ns
                .check()
                .map_err(|source| UsernsError::Mapping { path, source })?;
            self.alloc
                .record(uid, base)
                .map_err(|source| UsernsError::Mapping {
                    path: self.file(uid),
                    source,
                })?;
            return Ok(ns);
        }
        let base = self.alloc.allocate(uid)?;
        let ns = PodUserNamespace::at(base);
        let dir = self.pods_dir.join(uid);
        let written =
            fs::create_dir_all(&dir).and_then(|()| fsutil::write_json_atomic(&self.file(uid), &ns));
        if let Err(source) = written {
            self.alloc.release(uid);
            return Err(UsernsError::Io {
                path: self.file(uid),
                source,
            });
        }
        Ok(ns)
    }

    /// Releases the pod's range and removes its file (the pod is gone).
    pub fn release(&mut self, uid: &str) {
        let _ = fs::remove_file(self.file(uid));
        self.alloc.release(uid);
    }

    /// The base `uid` holds, if any.
    pub fn base_of(&self, uid: &str) -> Option<u32> {
        self.alloc.get(uid)
    }
}

#[cfg(test)]
mod tests;
