//! kernel: what the running kernel offers, from its release (`uname -r`, read from
//! `/proc/sys/kernel/osrelease`).

/// The running kernel's (major, minor) version; (0, 0) when it cannot be read.
pub fn version() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    parse_release(release.trim())
}

fn parse_release(release: &str) -> (u32, u32) {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    (major, minor)
}

/// Whether a bind mount can be made read-only recursively (`mount_setattr(2)` with
/// `AT_RECURSIVE`, Linux 5.12): what a mount's `recursiveReadOnly` needs.
pub fn supports_recursive_read_only() -> bool {
    version() >= (5, 12)
}

/// Whether overlayfs takes the `volatile` option (Linux 5.10): no sync of the upper layer,
/// not at `fsync` and not at unmount.
pub fn supports_volatile_overlay() -> bool {
    version() >= (5, 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_are_parsed() {
        assert_eq!(parse_release("6.1.0-27-amd64"), (6, 1));
        assert_eq!(parse_release("5.12.0"), (5, 12));
        assert_eq!(parse_release("4.19.0+rpt-rpi-v7"), (4, 19));
        assert_eq!(parse_release("garbage"), (0, 0));
        assert!(version() >= (3, 0));
    }
}
