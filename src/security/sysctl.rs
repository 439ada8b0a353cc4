//! sysctl: which `spec.securityContext.sysctls` a node accepts, as the kubelet decides it
//! (pkg/kubelet/sysctl: the safe set and the `allowedUnsafeSysctls` allowlist; the kernel
//! namespaces of component-helpers/node/util/sysctl) plus the API server's name rules
//! (pkg/apis/core/validation `validateSysctls`).
//!
//! - Names use `.` or `/` as separators (`net/ipv4/ip_local_port_range`); the kubelet converts
//!   the `/` form to the `.` form (dots inside a `/`-separated name become slashes).
//! - The safe set is always allowed (each entry from the kernel that namespaces it on);
//!   `allowedUnsafeSysctls` adds names or prefixes ending in `*` (`net.core.*`,
//!   `kernel.msg*`), each of which must be known to be namespaced.
//! - Only namespaced sysctls can be allowed at all: IPC (`kernel.shm*`, `kernel.msg*`,
//!   `kernel.sem`, `fs.mqueue.*`) and network (`net.*`).
//! - A `net.*` sysctl on a `hostNetwork` pod would change the host: refused (the kubelet
//!   refuses it at admission, the API server at validation).

use std::fmt;

/// Longest sysctl name or pattern (the API server's `SysctlMaxLength`).
pub const MAX_LENGTH: usize = 253;

/// The kernel namespace a sysctl belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysctlNamespace {
    Ipc,
    Net,
}

impl fmt::Display for SysctlNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SysctlNamespace::Ipc => "ipc",
            SysctlNamespace::Net => "net",
        })
    }
}

/// A kernel release as `uname -r` starts it: major.minor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KernelVersion {
    pub major: u32,
    pub minor: u32,
}

impl KernelVersion {
    /// Parses the start of a release string ("6.1.0-18-amd64" -> 6.1).
    pub fn parse(release: &str) -> Option<KernelVersion> {
        let mut parts = release.split(|c: char| !c.is_ascii_digit());
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(KernelVersion { major, minor })
    }

    /// The running kernel (`uname`), if it can be read.
    pub fn running() -> Option<KernelVersion> {
        let u = nix::sys::utsname::uname().ok()?;
        KernelVersion::parse(&u.release().to_string_lossy())
    }
}

const fn kernel(major: u32, minor: u32) -> Option<KernelVersion> {
    Some(KernelVersion { major, minor })
}

/// The kubelet's safe sysctls (Kubernetes 1.32+) with the kernel that namespaces each.
const SAFE_SYSCTLS: &[(&str, Option<KernelVersion>)] = &[
    ("kernel.shm_rmid_forced", None),
    ("net.ipv4.ip_local_port_range", None),
    ("net.ipv4.tcp_syncookies", None),
    ("net.ipv4.ping_group_range", None),
    ("net.ipv4.ip_unprivileged_port_start", None),
    ("net.ipv4.ip_local_reserved_ports", kernel(3, 16)),
    ("net.ipv4.tcp_keepalive_time", kernel(4, 5)),
    ("net.ipv4.tcp_fin_timeout", kernel(4, 6)),
    ("net.ipv4.tcp_keepalive_intvl", kernel(4, 5)),
    ("net.ipv4.tcp_keepalive_probes", kernel(4, 5)),
    ("net.ipv4.tcp_rmem", kernel(4, 15)),
    ("net.ipv4.tcp_wmem", kernel(4, 15)),
];

/// Sysctls known to be namespaced: exact names, then prefixes.
const NAMESPACED_NAMES: &[(&str, SysctlNamespace)] = &[("kernel.sem", SysctlNamespace::Ipc)];
const NAMESPACED_PREFIXES: &[(&str, SysctlNamespace)] = &[
    ("kernel.shm", SysctlNamespace::Ipc),
    ("kernel.msg", SysctlNamespace::Ipc),
    ("fs.mqueue.", SysctlNamespace::Ipc),
    ("net.", SysctlNamespace::Net),
];

/// The namespace of a sysctl in `.` form, if it is known to be namespaced.
pub fn namespace_of(name: &str) -> Option<SysctlNamespace> {
    NAMESPACED_NAMES
        .iter()
        .find(|(n, _)| *n == name)
        .or_else(|| {
            NAMESPACED_PREFIXES
                .iter()
                .find(|(p, _)| name.starts_with(p))
        })
        .map(|(_, ns)| *ns)
}

/// The `.` form of a sysctl name: when the first separator is `/`, slashes become dots and
/// dots become slashes (`net/ipv4/conf/eth0.100/forwarding` is
/// `net.ipv4.conf.eth0/100.forwarding`), as the kubelet and sysctl.d(5) read it.
pub fn to_dotted(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_string(),
    }
}

/// `[a-z0-9]([-_a-z0-9]*[a-z0-9])?`
fn is_segment(s: &str) -> bool {
    let b = s.as_bytes();
    let end_ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.first().is_some_and(end_ok)
        && b.last().is_some_and(end_ok)
        && b.iter().all(|c| end_ok(c) || *c == b'-' || *c == b'_')
}

/// A valid sysctl name for the API server: segments of lowercase alphanumerics, `-` and `_`
/// (alphanumeric at both ends) separated by `.` or `/`, at most 253 characters.
pub fn is_valid_name(name: &str) -> bool {
    name.len() <= MAX_LENGTH && name.split(['.', '/']).all(is_segment)
}

/// Why a sysctl pattern or a pod's sysctl is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SysctlError {
    #[error(
        "{pattern:?} is not a sysctl name or a prefix ending in '*' (segments of lowercase \
         letters, digits, '-' and '_' separated by '.' or '/', at most {max} characters)",
        max = MAX_LENGTH
    )]
    PatternSyntax { pattern: String },
    #[error(
        "{pattern:?} is not known to be namespaced: only kernel.shm*, kernel.msg*, \
         kernel.sem, fs.mqueue.* and net.* sysctls can be set per pod"
    )]
    NotNamespaced { pattern: String },
    #[error(
        "{name:?} is not a valid sysctl name (segments of lowercase letters, digits, '-' and \
         '_' separated by '.' or '/', at most {max} characters)",
        max = MAX_LENGTH
    )]
    InvalidName { name: String },
    /// Not in the safe set nor allowed; `namespaced` says whether a node could allow it.
    #[error(
        "forbidden sysctl {name:?}: not in the safe set; {}",
        if *.namespaced {
            "add it to allowedUnsafeSysctls in the KubeletConfiguration to allow it"
        } else {
            "it is not namespaced, so a pod cannot set it without changing the host"
        }
    )]
    NotAllowed { name: String, namespaced: bool },
    #[error(
        "forbidden sysctl {name:?}: net.* sysctls are not allowed with hostNetwork (they would \
         change the host's network namespace)"
    )]
    HostNetwork { name: String },
}

/// An `allowedUnsafeSysctls` entry: an exact name, or a prefix when it ends in `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlPattern {
    /// In `.` form, without the `*`.
    name: String,
    prefix: bool,
    namespace: SysctlNamespace,
}

impl SysctlPattern {
    /// Parses a pattern as the kubelet does at start: the API's pattern syntax (segments
    /// separated by `.` or `/`, the last one optionally ending in `*`), and only namespaced
    /// sysctls.
    pub fn parse(pattern: &str) -> Result<SysctlPattern, SysctlError> {
        let syntax_ok = pattern.len() <= MAX_LENGTH && {
            let (body, last) = match pattern.rfind(['.', '/']) {
                Some(i) => (&pattern[..i], &pattern[i + 1..]),
                None => ("", pattern),
            };
            let last_ok = match last.strip_suffix('*') {
                Some("") => true,
                Some(stem) => {
                    stem.bytes().all(|c| {
                        c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-' || c == b'_'
                    }) && stem
                        .as_bytes()
                        .first()
                        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                }
                None => is_segment(last),
            };
            last_ok && (body.is_empty() || body.split(['.', '/']).all(is_segment))
        };
        if !syntax_ok {
            return Err(SysctlError::PatternSyntax {
                pattern: pattern.to_string(),
            });
        }
        let dotted = to_dotted(pattern);
        let (name, prefix) = match dotted.strip_suffix('*') {
            Some(stem) => (stem.to_string(), true),
            None => (dotted, false),
        };
        let namespace = namespace_of(&name).ok_or_else(|| SysctlError::NotNamespaced {
            pattern: pattern.to_string(),
        })?;
        Ok(SysctlPattern {
            name,
            prefix,
            namespace,
        })
    }

    fn matches(&self, dotted: &str) -> bool {
        if self.prefix {
            dotted.starts_with(&self.name)
        } else {
            dotted == self.name
        }
    }
}

impl fmt::Display for SysctlPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.name, if self.prefix { "*" } else { "" })
    }
}

/// The sysctls a node lets pods set: the safe set for its kernel plus the allowed unsafe ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysctlPolicy {
    allowed: Vec<SysctlPattern>,
}

impl SysctlPolicy {
    /// The safe set (the entries `kernel` namespaces; all of them when it is unknown) plus
    /// `allowed_unsafe`.
    pub fn new(allowed_unsafe: &[SysctlPattern], kernel: Option<KernelVersion>) -> SysctlPolicy {
        let mut allowed: Vec<SysctlPattern> = SAFE_SYSCTLS
            .iter()
            .filter(|(_, min)| match (min, kernel) {
                (Some(min), Some(k)) => k >= *min,
                _ => true,
            })
            .filter_map(|(name, _)| SysctlPattern::parse(name).ok())
            .collect();
        allowed.extend(allowed_unsafe.iter().cloned());
        SysctlPolicy { allowed }
    }

    /// Why a pod may not set `name` (as written), or `Ok` with its `.` form.
    pub fn check(&self, name: &str, host_network: bool) -> Result<String, SysctlError> {
        if !is_valid_name(name) {
            return Err(SysctlError::InvalidName {
                name: name.to_string(),
            });
        }
        let dotted = to_dotted(name);
        let Some(pattern) = self.allowed.iter().find(|p| p.matches(&dotted)) else {
            let namespaced = namespace_of(&dotted).is_some();
            return Err(SysctlError::NotAllowed {
                name: dotted,
                namespaced,
            });
        };
        if host_network && pattern.namespace == SysctlNamespace::Net {
            return Err(SysctlError::HostNetwork { name: dotted });
        }
        Ok(dotted)
    }
}

impl Default for SysctlPolicy {
    /// The kubelet's default: the safe set only, whatever the kernel.
    fn default() -> Self {
        SysctlPolicy::new(&[], None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_versions_parse_from_uname_releases() {
        assert_eq!(
            KernelVersion::parse("6.1.0-18-amd64"),
            Some(KernelVersion { major: 6, minor: 1 })
        );
        assert_eq!(
            KernelVersion::parse("4.15"),
            Some(KernelVersion {
                major: 4,
                minor: 15
            })
        );
        assert_eq!(KernelVersion::parse("x"), None);
        assert!(kernel(4, 15) > kernel(4, 5));
    }

    #[test]
    fn slash_names_convert_to_dots() {
        assert_eq!(
            to_dotted("net/ipv4/conf/eth0.100/forwarding"),
            "net.ipv4.conf.eth0/100.forwarding"
        );
        assert_eq!(to_dotted("net.ipv4.tcp_rmem"), "net.ipv4.tcp_rmem");
        assert_eq!(
            to_dotted("kernel/shm_rmid_forced"),
            "kernel.shm_rmid_forced"
        );
    }

    #[test]
    fn names_follow_the_api_rules() {
        for ok in [
            "net.ipv4.ip_local_port_range",
            "net/ipv4/conf/eth0.100/forwarding",
            "kernel.shm_rmid_forced",
            "a",
        ] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Net.core",
            "net..core",
            "net.core.",
            "_x",
            "a b",
            "net.*",
        ] {
            assert!(!is_valid_name(bad), "{bad}");
        }
        assert!(!is_valid_name(&format!("net.{}", "a".repeat(250))));
    }

    #[test]
    fn patterns_need_the_syntax_and_a_namespace() {
        for ok in [
            "net.core.*",
            "kernel.msg*",
            "kernel.sem",
            "net/core/somaxconn",
            "fs.mqueue.*",
        ] {
            assert!(SysctlPattern::parse(ok).is_ok(), "{ok}");
        }
        let e = SysctlPattern::parse("vm.swappiness").expect_err("not namespaced");
        assert!(e.to_string().contains("not known to be namespaced"), "{e}");
        assert!(SysctlPattern::parse("*").is_err());
        for bad in ["net.*.foo", "net.core.**", "Net.core", "net..x", ""] {
            assert!(SysctlPattern::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(
            SysctlPattern::parse("kernel/msg*").map(|p| p.to_string()),
            Ok("kernel.msg*".to_string())
        );
    }

    #[test]
    fn safe_set_allowed_unsafe_refused_and_globs_open_more() {
        let p = SysctlPolicy::default();
        assert_eq!(
            p.check("net/ipv4/ip_local_port_range", false),
            Ok("net.ipv4.ip_local_port_range".into())
        );
        assert!(p.check("kernel.shm_rmid_forced", true).is_ok());
        let e = p.check("net.core.somaxconn", false).expect_err("unsafe");
        assert!(e.to_string().contains("allowedUnsafeSysctls"), "{e}");
        let e = p.check("vm.swappiness", false).expect_err("not namespaced");
        assert!(e.to_string().contains("not namespaced"), "{e}");
        let open = SysctlPolicy::new(
            &[
                SysctlPattern::parse("net.core.*").expect("glob"),
                SysctlPattern::parse("kernel.msgmax").expect("name"),
            ],
            None,
        );
        assert!(open.check("net.core.somaxconn", false).is_ok());
        assert!(open.check("kernel.msgmax", false).is_ok());
        assert!(open.check("kernel.msgmnb", false).is_err());
        assert!(open.check("net.ipv4.ip_forward", false).is_err());
    }

    #[test]
    fn net_sysctls_are_refused_with_host_network() {
        let p = SysctlPolicy::new(&[SysctlPattern::parse("net.*").expect("glob")], None);
        let e = p
            .check("net.ipv4.ip_local_port_range", true)
            .expect_err("host network");
        assert!(e.to_string().contains("hostNetwork"), "{e}");
        assert!(p.check("net.core.somaxconn", true).is_err());
        assert!(p.check("kernel.shm_rmid_forced", true).is_ok());
    }

    #[test]
    fn safe_entries_follow_the_kernel() {
        let old = SysctlPolicy::new(&[], kernel(4, 4));
        assert!(old.check("net.ipv4.tcp_keepalive_time", false).is_err());
        assert!(old.check("net.ipv4.ip_local_reserved_ports", false).is_ok());
        let new = SysctlPolicy::new(&[], kernel(6, 1));
        assert!(new.check("net.ipv4.tcp_rmem", false).is_ok());
    }

    #[test]
    fn refusals_read_as_before_the_typed_error() {
        let p = SysctlPolicy::default();
        let msg = |name, host| p.check(name, host).expect_err(name).to_string();
        assert_eq!(
            msg("net.core.somaxconn", false),
            "forbidden sysctl \"net.core.somaxconn\": not in the safe set; add it to \
             allowedUnsafeSysctls in the KubeletConfiguration to allow it"
        );
        assert_eq!(
            msg("vm/swappiness", false),
            "forbidden sysctl \"vm.swappiness\": not in the safe set; it is not namespaced, so \
             a pod cannot set it without changing the host"
        );
        assert_eq!(
            msg("net.ipv4.ping_group_range", true),
            "forbidden sysctl \"net.ipv4.ping_group_range\": net.* sysctls are not allowed with \
             hostNetwork (they would change the host's network namespace)"
        );
        assert_eq!(
            msg("Bad", false),
            "\"Bad\" is not a valid sysctl name (segments of lowercase letters, digits, '-' and \
             '_' separated by '.' or '/', at most 253 characters)"
        );
        assert_eq!(
            SysctlPattern::parse("a.*b")
                .expect_err("syntax")
                .to_string(),
            "\"a.*b\" is not a sysctl name or a prefix ending in '*' (segments of lowercase \
             letters, digits, '-' and '_' separated by '.' or '/', at most 253 characters)"
        );
    }
}
