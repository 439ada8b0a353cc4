//! Trace points of podvisor's `scripts/start-profile`, for libcgroups and libcontainer (the
//! latter reaches them as `libcgroups::tp!`). With the `start-profile` feature and
//! `PODVISOR_TP=<file>` in the environment, each point appends
//! `TP <wall-clock seconds> <pid> <name>` to the file; without the feature, `tp!` expands to
//! nothing that runs (its arguments are type-checked, never evaluated).

/// Appends one trace point to `$PODVISOR_TP` (one open, write and close: ~10 us).
#[cfg(feature = "start-profile")]
pub fn write(name: &str) {
    use std::io::Write;
    if let Some(p) = std::env::var_os("PODVISOR_TP") {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let line = format!(
            "TP {}.{:09} {} {}\n",
            d.as_secs(),
            d.subsec_nanos(),
            std::process::id(),
            name
        );
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(p)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// A trace point named by `format!` arguments.
#[cfg(feature = "start-profile")]
#[macro_export]
macro_rules! tp {
    ($($arg:tt)*) => {
        $crate::trace_point::write(&::std::format!($($arg)*))
    };
}

/// A trace point, compiled out (the `start-profile` feature is off).
#[cfg(not(feature = "start-profile"))]
#[macro_export]
macro_rules! tp {
    ($($arg:tt)*) => {
        if false {
            let _ = ::std::format_args!($($arg)*);
        }
    };
}
