//! sources: where pod manifests come from — the I/O half of the kubelet's config sources.
//!
//! A source watches a directory ([`start_file_source`]) or polls a URL ([`start_url_source`])
//! on its own thread (the push source, [`api`], has none: the node API's connection threads
//! send its requests) and sends raw bytes to the daemon's sync loop as [`SourceEvent`]s over a
//! `std::sync::mpsc::Sender`. Sources never parse: the receiver decodes and validates, and
//! keeps the last-known-good pod when a file or URL turns bad. Each `start_*` function returns
//! a [`SourceHandle`]; dropping it (or calling [`SourceHandle::stop`]) ends the source, and no
//! event is sent once `stop` has returned. A source also ends by itself when it has something
//! to send and finds the receiver dropped.
//!
//! Differences from the kubelet, on purpose:
//! - Only `*.yaml`, `*.yml` and `*.json` files are manifests ([`is_manifest_name`]), so editor
//!   and package-manager leftovers (`x.yaml.bak`, `x.yaml.dpkg-new`, `.x.yaml.swp`) are never
//!   pods.
//! - Bursts of writes are debounced and content is compared by hash, so an editor save is one
//!   event and an unchanged file never produces one.

pub mod api;
mod file;
pub mod podconfig;
mod url;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

pub use file::{
    start_file_source, FileSourceConfig, DEBOUNCE_MAX_WAIT, DEFAULT_DEBOUNCE,
    DEFAULT_FILE_CHECK_FREQUENCY, DIR_RETRY_MAX, DIR_RETRY_MIN,
};
pub use url::{
    start_url_source, UrlSourceConfig, DEFAULT_URL_CHECK_FREQUENCY, DEFAULT_URL_TIMEOUT,
    TLS_FLAG_NAMES,
};

/// Largest manifest accepted from a file or a URL: 10 MiB, the kubelet's `maxConfigLength`.
pub const MAX_MANIFEST_BYTES: u64 = 10 * 1024 * 1024;

/// How long [`SourceHandle::stop`] waits for the source thread before leaving it to finish on
/// its own (only a TCP connect or name resolution in progress can take that long).
const STOP_GRACE: Duration = Duration::from_millis(80);

/// What a source tells the sync loop. Paths are the configured directory (made absolute)
/// joined with the file name; a symbolic link is reported under its own name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEvent {
    /// A manifest file's content is new or changed (also sent for every file on the first
    /// scan, and again for every file on the first scan after a [`SourceEvent::DirError`]).
    FileChanged { path: PathBuf, data: Vec<u8> },
    /// A manifest file is gone (deleted, renamed away, replaced by a directory, or no longer
    /// matches the name filter).
    FileRemoved { path: PathBuf },
    /// A manifest file could not be read (too large, permission, not a regular file, broken
    /// symbolic link...): the receiver keeps the last-known-good pod. Sent each time the file
    /// is examined and still fails.
    FileError { path: PathBuf, message: String },
    /// The directory is missing, unreadable, or cannot be watched. The source keeps retrying
    /// (backoff 1 s doubling to 20 s, never slower than the check frequency) and sends this
    /// again on every failed attempt. It does not mean the files are gone: when the directory
    /// is readable again, the next scan sends `FileChanged` for every file present and
    /// `FileRemoved` for every file known before that is no longer there. When only the
    /// watch failed, periodic re-reads go on as usual.
    DirError { dir: PathBuf, message: String },
    /// The first complete scan of the directory is done: every manifest present was sent.
    /// A receiver that seeded pods from a previous run can now drop those whose file is gone.
    FileScanComplete { dir: PathBuf },
    /// The URL answered 200 with a body different from the last one (also the first
    /// successful poll, and the first one after an error). An empty body is a valid body.
    UrlChanged { url: String, data: Vec<u8> },
    /// The URL poll failed (status other than 200 and 304, timeout, connection error, body
    /// too large...): the receiver keeps the last-known-good pods. Sent on every failed poll.
    UrlError { url: String, message: String },
}

/// Why a source could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("invalid source configuration: {field}: {reason}")]
    InvalidConfig { field: &'static str, reason: String },
    #[error("invalid manifest url {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("invalid header {name:?} for manifest url: {reason}")]
    InvalidHeader { name: String, reason: String },
    #[error("manifest url: {0}")]
    Tls(crate::httpclient::tls::TlsFileError),
    #[error("cannot resolve relative manifest directory {dir}: {source}")]
    CurrentDir {
        dir: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot spawn the {what} source thread: {source}")]
    Spawn {
        what: &'static str,
        source: std::io::Error,
    },
}

/// A running source. Dropping it stops the source like [`SourceHandle::stop`].
pub struct SourceHandle {
    gate: Arc<Gate>,
    wake: Option<Box<dyn FnOnce() + Send>>,
    /// Disconnects when the source thread ends (its sender is dropped with the thread).
    done: Receiver<()>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for SourceHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceHandle")
            .field("running", &self.is_running())
            .finish()
    }
}

impl SourceHandle {
    fn new(
        gate: Arc<Gate>,
        wake: Box<dyn FnOnce() + Send>,
        done: Receiver<()>,
        thread: JoinHandle<()>,
    ) -> Self {
        SourceHandle {
            gate,
            wake: Some(wake),
            done,
            thread: Some(thread),
        }
    }

    /// Stops the source. Returns within ~80 ms; once it has returned, the source sends no
    /// more events. An HTTP request in flight is aborted; in the rare case the thread is
    /// inside a TCP connect or a name resolution, it is left to end on its own (bounded by
    /// the request timeout) without sending anything.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Whether the source thread is still running (it ends by itself when it finds the
    /// receiver dropped).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    fn shutdown(&mut self) {
        self.gate.close();
        if let Some(wake) = self.wake.take() {
            wake();
        }
        let Some(thread) = self.thread.take() else {
            return;
        };
        match self.done.recv_timeout(STOP_GRACE) {
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                if thread.join().is_err() {
                    log::error!("a manifest source thread panicked");
                }
            }
            // Still inside a connect or a resolve: the closed gate keeps it silent and it
            // ends when that returns.
            Err(RecvTimeoutError::Timeout) => {}
        }
    }
}

impl Drop for SourceHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The only way a source thread sends: closed by `stop`, so that nothing is sent after
/// `stop` returns (the lock is held during the send).
#[derive(Debug)]
struct Gate {
    open: Mutex<bool>,
}

impl Gate {
    fn new() -> Arc<Gate> {
        Arc::new(Gate {
            open: Mutex::new(true),
        })
    }

    /// Sends `event`; false when the source is stopped or the receiver is gone.
    fn send(&self, tx: &Sender<SourceEvent>, event: SourceEvent) -> bool {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        *open && tx.send(event).is_ok()
    }

    fn is_open(&self) -> bool {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn close(&self) {
        *self.open.lock().unwrap_or_else(PoisonError::into_inner) = false;
    }
}

/// Whether a directory entry named `file_name` is a manifest: it does not start with `.`
/// (dotfiles, vim's `.x.yaml.swp`, emacs' `.#x.yaml`) and ends with `.yaml`, `.yml` or
/// `.json` (any letter case) after a non-empty stem. The extension rule alone keeps out
/// editor and package leftovers, which all add a suffix: `x.yaml~`, `x.yaml.swp`, `.swx`,
/// `.bak`, `.orig`, `.tmp`, `.dpkg-new`/`.dpkg-old`/`.dpkg-dist`, `.rpmnew`, `.rpmsave`,
/// emacs' `#x.yaml#`.
pub fn is_manifest_name(file_name: &OsStr) -> bool {
    let name = file_name.as_bytes();
    if name.is_empty() || name[0] == b'.' {
        return false;
    }
    [&b".yaml"[..], b".yml", b".json"].iter().any(|ext| {
        name.len() > ext.len() && name[name.len() - ext.len()..].eq_ignore_ascii_case(ext)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn sources_manifest_names() {
        let cases: &[(&str, bool)] = &[
            ("kube-apiserver.yaml", true),
            ("etcd.yml", true),
            ("pod.json", true),
            ("POD.YAML", true),
            ("a.b.yaml", true),
            (".hidden.yaml", false),
            (".x.yaml.swp", false),
            (".x.yaml.swx", false),
            (".#x.yaml", false),
            ("#x.yaml#", false),
            ("x.yaml~", false),
            ("x.yaml.swp", false),
            ("x.yaml.bak", false),
            ("x.yaml.orig", false),
            ("x.yaml.tmp", false),
            ("x.yaml.dpkg-new", false),
            ("x.yaml.dpkg-old", false),
            ("x.yaml.dpkg-dist", false),
            ("x.yaml.rpmnew", false),
            ("x.yaml.rpmsave", false),
            ("x.yaml.kate-swp", false),
            ("x.txt", false),
            ("yaml", false),
            (".yaml", false),
            ("x.yamlx", false),
            ("xyaml", false),
            ("", false),
        ];
        for (name, want) in cases {
            assert_eq!(is_manifest_name(OsStr::new(name)), *want, "{name:?}");
        }
        // Not UTF-8, still a manifest by its extension.
        let raw = OsString::from_vec(b"caf\xe9.yaml".to_vec());
        assert!(is_manifest_name(&raw));
    }
}
