//! tp: the trace points of `scripts/start-profile` (docs/history/start-timeline.md), compiled in only
//! with the `start-profile` Cargo feature, which also turns on libcontainer's and libcgroups'
//! (`libcgroups::tp!`). With the feature and `PODVISOR_TP=<file>` in the environment, each
//! point appends `TP <wall-clock seconds> <pid> <name>` to the file: one open, write and close,
//! ~10 us. Without the feature, [`tp!`](crate::tp!) expands to nothing that runs (its arguments
//! are type-checked, never evaluated), so the shipped binary carries no trace of it.

#[cfg(feature = "start-profile")]
use std::io::Write;
#[cfg(feature = "start-profile")]
use std::sync::OnceLock;

#[cfg(feature = "start-profile")]
static FILE: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();

/// Appends one trace point to `$PODVISOR_TP`, when it is set.
#[cfg(feature = "start-profile")]
pub fn write(name: &str) {
    if let Some(p) = FILE.get_or_init(|| std::env::var_os("PODVISOR_TP").map(Into::into)) {
        let d = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let line = format!(
            "TP {}.{:09} {} {name}\n",
            d.as_secs(),
            d.subsec_nanos(),
            std::process::id()
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

/// A trace point of `scripts/start-profile`, named by `format!` arguments.
#[cfg(feature = "start-profile")]
#[macro_export]
macro_rules! tp {
    ($($arg:tt)*) => {
        $crate::tp::write(&::std::format!($($arg)*))
    };
}

/// A trace point of `scripts/start-profile`, compiled out (the feature is off).
#[cfg(not(feature = "start-profile"))]
#[macro_export]
macro_rules! tp {
    ($($arg:tt)*) => {
        if false {
            let _ = ::std::format_args!($($arg)*);
        }
    };
}
