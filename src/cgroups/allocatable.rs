//! allocatable: node capacity, the kubelet's node allocatable (capacity minus
//! `systemReserved`, `kubeReserved` and the hard eviction threshold `memory.available`) and
//! the resource-fit admission of a pod (`pkg/kubelet/lifecycle/predicate.go`).
//!
//! Capacity is read from the online CPUs, /proc/meminfo and, per huge page size,
//! /sys/kernel/mm/hugepages (`hugepages-<size>` = `nr_hugepages` x the page size, as cadvisor
//! reports it to the kubelet); all are parameters so tests use fixtures.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::pod::quantity::QuantityError;
use crate::pod::resources::Amounts;
use crate::reason::PodReason;

/// Errors reading node capacity.
#[derive(Debug, thiserror::Error)]
pub enum CapacityError {
    #[error("failed to read {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: {reason}")]
    Parse { path: PathBuf, reason: String },
}

/// A `systemReserved`/`kubeReserved` entry that is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{resource}: {source}")]
pub struct ReservedError {
    /// The map key: `cpu` or `memory`.
    pub resource: &'static str,
    #[source]
    pub source: QuantityError,
}

/// An `evictionHard` `memory.available` value that is neither a quantity nor a percentage.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ThresholdError {
    #[error("{value:?} is not a percentage between 0% and 100%")]
    Percentage { value: String },
    #[error(transparent)]
    Quantity(#[from] QuantityError),
}

/// The hard eviction threshold of `memory.available`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryThreshold {
    Bytes(u64),
    /// Hundredths of a percent of capacity (`10%` = 1000).
    Basis(u64),
}

impl Default for MemoryThreshold {
    /// The kubelet's default `memory.available<100Mi`.
    fn default() -> Self {
        MemoryThreshold::Bytes(100 << 20)
    }
}

/// What is kept back from the pods (KubeletConfiguration `systemReserved`, `kubeReserved`,
/// `evictionHard["memory.available"]`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reservation {
    pub system_reserved: Amounts,
    pub kube_reserved: Amounts,
    pub eviction_memory: MemoryThreshold,
    /// `systemReserved` plus `kubeReserved` `ephemeral-storage`, in bytes.
    pub ephemeral_storage: u64,
}

/// The kubelet's allocatable: capacity minus reservations and the eviction threshold, at
/// least 0.
pub fn allocatable(capacity: Amounts, r: &Reservation) -> Amounts {
    let eviction = match r.eviction_memory {
        MemoryThreshold::Bytes(b) => b,
        MemoryThreshold::Basis(bp) => {
            u64::try_from(u128::from(capacity.memory_bytes) * u128::from(bp) / 10_000)
                .unwrap_or(u64::MAX)
        }
    };
    Amounts {
        cpu_millis: capacity
            .cpu_millis
            .saturating_sub(r.system_reserved.cpu_millis)
            .saturating_sub(r.kube_reserved.cpu_millis),
        memory_bytes: capacity
            .memory_bytes
            .saturating_sub(r.system_reserved.memory_bytes)
            .saturating_sub(r.kube_reserved.memory_bytes)
            .saturating_sub(eviction),
    }
}

/// Number of CPUs in a `/sys/devices/system/cpu/online` list ("0-3,6").
pub fn parse_cpu_list(text: &str) -> Option<u64> {
    let mut n = 0u64;
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u64, u64) = (a.parse().ok()?, b.parse().ok()?);
                n += b.checked_sub(a)? + 1;
            }
            None => {
                part.parse::<u64>().ok()?;
                n += 1;
            }
        }
    }
    (n > 0).then_some(n)
}

/// `MemTotal` of a /proc/meminfo text, in bytes.
pub fn parse_mem_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// Node capacity from a CPU list file (normally /sys/devices/system/cpu/online) and a meminfo
/// file (normally /proc/meminfo).
pub fn read_capacity(cpu_online: &Path, meminfo: &Path) -> Result<Amounts, CapacityError> {
    let read = |p: &Path| {
        fs::read_to_string(p).map_err(|source| CapacityError::Read {
            path: p.to_path_buf(),
            source,
        })
    };
    let cpus = parse_cpu_list(&read(cpu_online)?).ok_or_else(|| CapacityError::Parse {
        path: cpu_online.to_path_buf(),
        reason: "not a CPU list".into(),
    })?;
    let memory = parse_mem_total(&read(meminfo)?).ok_or_else(|| CapacityError::Parse {
        path: meminfo.to_path_buf(),
        reason: "no MemTotal line".into(),
    })?;
    Ok(Amounts {
        cpu_millis: cpus * 1000,
        memory_bytes: memory,
    })
}

/// Reads a `systemReserved` / `kubeReserved` map: `cpu` and `memory` quantities (see
/// [`parse_reserved_storage`] for `ephemeral-storage`); `pid` is not reserved by podvisor and
/// ignored. An error names the key.
pub fn parse_reserved(
    map: &std::collections::BTreeMap<String, String>,
) -> Result<Amounts, ReservedError> {
    use crate::pod::quantity::{parse_bytes, parse_cpu_millis};
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    let mut a = Amounts::default();
    if let Some(v) = map.get("cpu") {
        a.cpu_millis = parse_cpu_millis(&Quantity(v.clone())).map_err(|source| ReservedError {
            resource: "cpu",
            source,
        })?;
    }
    if let Some(v) = map.get("memory") {
        a.memory_bytes = parse_bytes(&Quantity(v.clone())).map_err(|source| ReservedError {
            resource: "memory",
            source,
        })?;
    }
    Ok(a)
}

/// The `ephemeral-storage` entry of a `systemReserved` / `kubeReserved` map, in bytes.
pub fn parse_reserved_storage(
    map: &std::collections::BTreeMap<String, String>,
) -> Result<u64, ReservedError> {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    map.get("ephemeral-storage")
        .map(|v| {
            crate::pod::quantity::parse_bytes(&Quantity(v.clone())).map_err(|source| {
                ReservedError {
                    resource: "ephemeral-storage",
                    source,
                }
            })
        })
        .transpose()
        .map(Option::unwrap_or_default)
}

/// The kubelet's allocatable `ephemeral-storage`: the capacity of the root dir's filesystem
/// (nodefs) minus the reservations and the hard `nodefs.available` threshold.
pub fn allocatable_ephemeral_storage(capacity: u64, reserved: u64, hard_nodefs: u64) -> u64 {
    capacity
        .saturating_sub(reserved)
        .saturating_sub(hard_nodefs)
}

/// Reads the `memory.available` value of `evictionHard`: a quantity ("100Mi") or a
/// percentage of capacity ("5%", "7.5%").
pub fn parse_memory_threshold(value: &str) -> Result<MemoryThreshold, ThresholdError> {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    if let Some(pct) = value.strip_suffix('%') {
        let (whole, frac) = pct.split_once('.').unwrap_or((pct, ""));
        let digits_ok = !whole.is_empty()
            && whole.bytes().all(|b| b.is_ascii_digit())
            && frac.len() <= 2
            && frac.bytes().all(|b| b.is_ascii_digit());
        let bad = || ThresholdError::Percentage {
            value: value.to_string(),
        };
        if !digits_ok {
            return Err(bad());
        }
        let whole: u64 = whole.parse().map_err(|_| bad())?;
        let frac: u64 = format!("{frac:0<2}").parse().map_err(|_| bad())?;
        let basis = whole.saturating_mul(100).saturating_add(frac);
        if basis > 10_000 {
            return Err(bad());
        }
        return Ok(MemoryThreshold::Basis(basis));
    }
    crate::pod::quantity::parse_bytes(&Quantity(value.to_string()))
        .map(MemoryThreshold::Bytes)
        .map_err(ThresholdError::from)
}

/// This host's capacity.
pub fn host_capacity() -> Result<Amounts, CapacityError> {
    read_capacity(
        Path::new("/sys/devices/system/cpu/online"),
        Path::new("/proc/meminfo"),
    )
}

/// The resource fit of `ephemeral-storage` (after cpu and memory, as the scheduler's
/// `Fits`): a positive request fits if at most what `allocatable` has left after `used`.
pub fn admit_ephemeral_storage(request: u64, used: u64, allocatable: u64) -> Result<(), Rejection> {
    if request > 0 && request > allocatable.saturating_sub(used) {
        return Err(Rejection {
            reason: PodReason::OutOfEphemeralStorage,
            message: format!(
                "Node didn't have enough resource: ephemeral-storage, requested: {request}, used: {used}, capacity: {allocatable}"
            ),
        });
    }
    Ok(())
}

/// Why a pod was not admitted: the kubelet's `OutOf<resource>` reason and its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// `OutOfcpu`, `OutOfmemory`, `OutOfephemeral-storage` or `OutOfhugepages-<size>`.
    pub reason: PodReason,
    pub message: String,
}

/// The kubelet's resource fit: a pod fits if, for cpu then memory, a positive request is at
/// most what `allocatable` has left after `used` (the requests of the pods already admitted).
/// A pod without requests always fits.
pub fn admit(requests: Amounts, used: Amounts, allocatable: Amounts) -> Result<(), Rejection> {
    let checks = [
        (
            PodReason::OutOfCpu,
            "cpu",
            requests.cpu_millis,
            used.cpu_millis,
            allocatable.cpu_millis,
        ),
        (
            PodReason::OutOfMemory,
            "memory",
            requests.memory_bytes,
            used.memory_bytes,
            allocatable.memory_bytes,
        ),
    ];
    for (reason, name, req, used, cap) in checks {
        if req > 0 && req > cap.saturating_sub(used) {
            return Err(Rejection {
                reason,
                message: format!(
                    "Node didn't have enough resource: {name}, requested: {req}, used: {used}, capacity: {cap}"
                ),
            });
        }
    }
    Ok(())
}

/// The kubelet's resource name of a huge page size given in kB (`2048` -> `hugepages-2Mi`):
/// the page size as a canonical binary quantity.
pub fn hugepages_resource_name(kb: u64) -> String {
    let size = if kb % (1 << 20) == 0 {
        format!("{}Gi", kb >> 20)
    } else if kb % (1 << 10) == 0 {
        format!("{}Mi", kb >> 10)
    } else {
        format!("{kb}Ki")
    };
    format!("hugepages-{size}")
}

/// Huge page capacity by resource name (`hugepages-2Mi` -> bytes) from a
/// /sys/kernel/mm/hugepages directory: one `hugepages-<n>kB/nr_hugepages` per page size. A
/// missing directory (no hugetlb support) is no capacity.
pub fn read_hugepages_capacity(dir: &Path) -> Result<BTreeMap<String, u64>, CapacityError> {
    let mut out = BTreeMap::new();
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(CapacityError::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    for entry in entries {
        let entry = entry.map_err(|source| CapacityError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name();
        let Some(kb) = name
            .to_str()
            .and_then(|n| n.strip_prefix("hugepages-")?.strip_suffix("kB"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let path = entry.path().join("nr_hugepages");
        let text = fs::read_to_string(&path).map_err(|source| CapacityError::Read {
            path: path.clone(),
            source,
        })?;
        let pages: u64 = text.trim().parse().map_err(|_| CapacityError::Parse {
            path: path.clone(),
            reason: format!("{:?} is not a page count", text.trim()),
        })?;
        out.insert(
            hugepages_resource_name(kb),
            pages.saturating_mul(kb).saturating_mul(1024),
        );
    }
    Ok(out)
}

/// This host's huge page capacity.
pub fn host_hugepages_capacity() -> Result<BTreeMap<String, u64>, CapacityError> {
    read_hugepages_capacity(Path::new("/sys/kernel/mm/hugepages"))
}

/// The kubelet's fit for `hugepages-<size>`: every positive request must be at most the
/// node's capacity of that size (none when the node does not have the size) minus what the
/// pods already admitted requested. The reason is `OutOf<resource>`
/// (`UnexpectedAdmissionError` for a size no kernel has, which podvisor has no reason for).
pub fn admit_hugepages(
    requests: &BTreeMap<String, u64>,
    used: &BTreeMap<String, u64>,
    capacity: &BTreeMap<String, u64>,
) -> Result<(), Rejection> {
    for (name, &req) in requests {
        let cap = capacity.get(name).copied().unwrap_or(0);
        let used = used.get(name).copied().unwrap_or(0);
        if req > 0 && req > cap.saturating_sub(used) {
            return Err(Rejection {
                reason: PodReason::out_of(name).unwrap_or(PodReason::UnexpectedAdmissionError),
                message: format!(
                    "Node didn't have enough resource: {name}, requested: {req}, used: {used}, capacity: {cap}"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GI: u64 = 1 << 30;

    #[test]
    fn allocatable_subtracts_reservations_and_eviction_threshold() {
        let cap = Amounts {
            cpu_millis: 4000,
            memory_bytes: 8 * GI,
        };
        assert_eq!(
            allocatable(cap, &Reservation::default()),
            Amounts {
                cpu_millis: 4000,
                memory_bytes: 8 * GI - (100 << 20)
            }
        );
        let r = Reservation {
            system_reserved: Amounts {
                cpu_millis: 500,
                memory_bytes: GI,
            },
            kube_reserved: Amounts {
                cpu_millis: 250,
                memory_bytes: GI / 2,
            },
            eviction_memory: MemoryThreshold::Basis(1000),
            ephemeral_storage: 0,
        };
        assert_eq!(
            allocatable(cap, &r),
            Amounts {
                cpu_millis: 3250,
                memory_bytes: 8 * GI - GI - GI / 2 - (8 * GI) / 10
            }
        );
        let huge = Reservation {
            system_reserved: Amounts {
                cpu_millis: 10_000,
                memory_bytes: 100 * GI,
            },
            ..Reservation::default()
        };
        assert_eq!(allocatable(cap, &huge), Amounts::default());
    }

    #[test]
    fn reservations_and_thresholds_parse_like_the_kubelet() {
        let m: std::collections::BTreeMap<String, String> = [
            ("cpu", "500m"),
            ("memory", "1Gi"),
            ("ephemeral-storage", "1Gi"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(
            parse_reserved(&m),
            Ok(Amounts {
                cpu_millis: 500,
                memory_bytes: GI
            })
        );
        let bad: std::collections::BTreeMap<String, String> =
            [("memory".to_string(), "lots".to_string())].into();
        let e = parse_reserved(&bad).expect_err("bad");
        assert_eq!(e.resource, "memory");
        assert_eq!(
            e.to_string(),
            "memory: invalid quantity \"lots\": no digits"
        );
        assert_eq!(
            parse_memory_threshold("100Mi"),
            Ok(MemoryThreshold::Bytes(100 << 20))
        );
        assert_eq!(
            parse_memory_threshold("5%"),
            Ok(MemoryThreshold::Basis(500))
        );
        assert_eq!(
            parse_memory_threshold("7.5%"),
            Ok(MemoryThreshold::Basis(750))
        );
        assert_eq!(
            parse_memory_threshold("101%")
                .expect_err("101%")
                .to_string(),
            "\"101%\" is not a percentage between 0% and 100%"
        );
        assert!(parse_memory_threshold("-1%").is_err());
        assert!(parse_memory_threshold("x").is_err());
    }

    #[test]
    fn capacity_from_fixture_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let online = dir.path().join("online");
        let meminfo = dir.path().join("meminfo");
        fs::write(&online, "0-3,6\n").expect("w");
        fs::write(&meminfo, "MemTotal:        2048000 kB\nMemFree: 1 kB\n").expect("w");
        assert_eq!(
            read_capacity(&online, &meminfo).expect("capacity"),
            Amounts {
                cpu_millis: 5000,
                memory_bytes: 2_048_000 * 1024
            }
        );
        fs::write(&meminfo, "MemFree: 1 kB\n").expect("w");
        let err = read_capacity(&online, &meminfo).expect_err("no MemTotal");
        assert!(err.to_string().contains("MemTotal"), "{err}");
        assert_eq!(parse_cpu_list("0"), Some(1));
        assert_eq!(parse_cpu_list("x"), None);
        assert_eq!(parse_cpu_list("3-1"), None);
    }

    #[test]
    fn ephemeral_storage_fit_and_allocatable() {
        assert_eq!(
            allocatable_ephemeral_storage(100 * GI, 2 * GI, 10 * GI),
            88 * GI
        );
        assert_eq!(allocatable_ephemeral_storage(GI, 2 * GI, 0), 0);
        assert_eq!(admit_ephemeral_storage(0, 90 * GI, 88 * GI), Ok(()));
        assert_eq!(admit_ephemeral_storage(8 * GI, 80 * GI, 88 * GI), Ok(()));
        let r = admit_ephemeral_storage(8 * GI + 1, 80 * GI, 88 * GI).expect_err("too much");
        assert_eq!(r.reason.as_str(), "OutOfephemeral-storage");
        assert_eq!(
            r.message,
            format!(
                "Node didn't have enough resource: ephemeral-storage, requested: {}, used: {}, capacity: {}",
                8 * GI + 1,
                80 * GI,
                88 * GI
            )
        );
        let mut m = std::collections::BTreeMap::new();
        m.insert("ephemeral-storage".to_string(), "1Gi".to_string());
        assert_eq!(parse_reserved_storage(&m), Ok(GI));
        m.insert("ephemeral-storage".to_string(), "x".to_string());
        assert_eq!(
            parse_reserved_storage(&m).expect_err("bad").resource,
            "ephemeral-storage"
        );
    }

    #[test]
    fn admission_follows_the_kubelet_fit_rule() {
        let alloc = Amounts {
            cpu_millis: 2000,
            memory_bytes: GI,
        };
        let used = Amounts {
            cpu_millis: 1500,
            memory_bytes: GI / 2,
        };
        let ok = Amounts {
            cpu_millis: 500,
            memory_bytes: GI / 2,
        };
        assert_eq!(admit(ok, used, alloc), Ok(()));
        let too_much_cpu = Amounts {
            cpu_millis: 600,
            memory_bytes: 2 * GI,
        };
        let r = admit(too_much_cpu, used, alloc).expect_err("cpu");
        assert_eq!(r.reason, PodReason::OutOfCpu);
        assert_eq!(
            r.message,
            "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"
        );
        let r = admit(
            Amounts {
                cpu_millis: 0,
                memory_bytes: GI,
            },
            used,
            alloc,
        )
        .expect_err("memory");
        assert_eq!(r.reason, PodReason::OutOfMemory);
        // No requests: always admitted, even on a full node.
        assert_eq!(admit(Amounts::default(), alloc, alloc), Ok(()));
    }

    #[test]
    fn hugepages_capacity_and_fit_as_the_kubelet() {
        assert_eq!(hugepages_resource_name(2048), "hugepages-2Mi");
        assert_eq!(hugepages_resource_name(1 << 20), "hugepages-1Gi");
        assert_eq!(hugepages_resource_name(64), "hugepages-64Ki");
        assert_eq!(hugepages_resource_name(16 << 20), "hugepages-16Gi");
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(read_hugepages_capacity(&dir.path().join("absent"))
            .expect("absent")
            .is_empty());
        for (sub, n) in [("hugepages-2048kB", "3\n"), ("hugepages-1048576kB", "0\n")] {
            fs::create_dir(dir.path().join(sub)).expect("mkdir");
            fs::write(dir.path().join(sub).join("nr_hugepages"), n).expect("w");
        }
        fs::create_dir(dir.path().join("other")).expect("mkdir");
        let cap = read_hugepages_capacity(dir.path()).expect("capacity");
        let want: BTreeMap<String, u64> = [
            ("hugepages-1Gi".to_string(), 0),
            ("hugepages-2Mi".to_string(), 6 << 20),
        ]
        .into();
        assert_eq!(cap, want);
        fs::write(dir.path().join("hugepages-2048kB/nr_hugepages"), "x").expect("w");
        let e = read_hugepages_capacity(dir.path()).expect_err("bad count");
        assert!(e.to_string().contains("nr_hugepages"), "{e}");

        let m = |v: &[(&str, u64)]| -> BTreeMap<String, u64> {
            v.iter().map(|(k, v)| (k.to_string(), *v)).collect()
        };
        // (requests, used, expected reason)
        type Amount<'a> = &'a [(&'a str, u64)];
        let cases: [(Amount, Amount, Option<&str>); 6] = [
            (&[("hugepages-2Mi", 6 << 20)], &[], None),
            (
                &[("hugepages-2Mi", 4 << 20)],
                &[("hugepages-2Mi", 2 << 20)],
                None,
            ),
            (
                &[("hugepages-2Mi", 4 << 20)],
                &[("hugepages-2Mi", 4 << 20)],
                Some("OutOfhugepages-2Mi"),
            ),
            (
                &[("hugepages-2Mi", 8 << 20)],
                &[],
                Some("OutOfhugepages-2Mi"),
            ),
            (
                &[("hugepages-1Gi", 1 << 30)],
                &[],
                Some("OutOfhugepages-1Gi"),
            ),
            (
                &[("hugepages-3Mi", 3 << 20)],
                &[],
                Some("UnexpectedAdmissionError"),
            ),
        ];
        for (req, used, want) in cases {
            let got = admit_hugepages(&m(req), &m(used), &cap);
            assert_eq!(
                got.as_ref().err().map(|r| r.reason.as_str()),
                want,
                "{req:?} {used:?}"
            );
        }
        let r = admit_hugepages(&m(&[("hugepages-2Mi", 8 << 20)]), &m(&[]), &cap).expect_err("8Mi");
        assert_eq!(
            r.message,
            "Node didn't have enough resource: hugepages-2Mi, requested: 8388608, used: 0, capacity: 6291456"
        );
        assert_eq!(admit_hugepages(&m(&[]), &m(&[]), &BTreeMap::new()), Ok(()));
    }
}
