//! libct_trace: what libcontainer says when a container start fails.
//!
//! libcontainer's container process reports a failed setup to its parent as a bare summary
//! ("failed to prepare rootfs", "failed to run intermediate process"); the mount, path,
//! device or syscall that failed is only in the `tracing` events it emits just before
//! (`failed to mount Mount { destination: "/etc/x", .. }: ENOENT`). The monitor
//! (`podvisor shim run`, single-threaded) installs [`install`] before it creates the container:
//! every ERROR and WARN event of libcontainer, from the monitor and from the processes
//! libcontainer clones (which share the file descriptor), is appended as one line to a file in
//! the container's runtime dir; [`detail`] reads the lines back so the start error names the
//! thing that failed.

use std::fmt::{self, Write as _};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Most lines kept from one failed start (the last ones are the most specific).
const MAX_LINES: usize = 6;

struct ErrorLog {
    file: Mutex<fs::File>,
}

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.0.is_empty() {
            self.0.push_str(", ");
        }
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            if !self.0.is_empty() {
                self.0.push_str(", ");
            }
            self.0.push_str(value);
        } else {
            self.record_debug(field, &value);
        }
    }
}

impl Subscriber for ErrorLog {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN && metadata.target().starts_with("libcontainer")
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        let text = line.0.replace('\n', " ");
        // One write(2) per line on an O_APPEND file: lines of the cloned processes do not mix.
        if let Ok(mut f) = self.file.lock() {
            let _ = f.write_all(format!("{text}\n").as_bytes());
        }
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Sends libcontainer's warnings and errors to `path` (truncated first). Call once, in the
/// monitor process, before the container is built.
pub fn install(path: &Path) -> std::io::Result<()> {
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.set_len(0)?;
    // A second install in the same process (not expected) keeps the first subscriber.
    let _ = tracing::subscriber::set_global_default(ErrorLog {
        file: Mutex::new(file),
    });
    Ok(())
}

/// The last lines libcontainer logged to `path`, `; `-joined; empty when there are none.
pub fn detail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(MAX_LINES);
    lines[start..].join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_keeps_the_last_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        let text: String = (0..10).map(|i| format!("line {i}\n")).collect();
        fs::write(&p, text).expect("write");
        assert_eq!(detail(&p), "line 4; line 5; line 6; line 7; line 8; line 9");
        assert_eq!(detail(&dir.path().join("missing")), "");
    }

    #[test]
    fn events_become_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("log");
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .expect("open");
        let sub = ErrorLog {
            file: Mutex::new(file),
        };
        tracing::subscriber::with_default(sub, || {
            let err = std::io::Error::from_raw_os_error(libc::ENOENT);
            tracing::error!(target: "libcontainer::rootfs", ?err, "failed to mount {:?}", "/etc/x");
            tracing::info!(target: "libcontainer::rootfs", "not kept");
            tracing::error!(target: "other", "not libcontainer");
        });
        let d = detail(&p);
        assert!(d.starts_with("failed to mount \"/etc/x\", err=Os"), "{d}");
        assert!(
            !d.contains("not kept") && !d.contains("not libcontainer"),
            "{d}"
        );
    }
}
