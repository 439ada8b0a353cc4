//! cni: a CNI runtime over the spec (1.0 and 1.1, configurations of 0.3.x and 0.4.0 too):
//! configuration lists ([`conf`]), one plugin execution ([`exec`]) and the verbs over a list,
//! as libcni runs them: ADD through every plugin in order, each given the previous one's
//! result as `prevResult`; DEL in reverse order with the ADD's result; CHECK (0.4.0 on,
//! unless `disableCheck`); STATUS and GC (1.1.0 on, GC unless `disableGC`, with the
//! `cni.dev/valid-attachments` the runtime keeps); VERSION. Capability arguments go into
//! `runtimeConfig` only for plugins that declare the capability.
//!
//! Written here rather than taken from a crate: the protocol is an exec with a few
//! environment variables and JSON on stdin and stdout, and no maintained synchronous Rust
//! implementation exists (docs/crates.md).
//!
//! Every error names the network, its configuration file, the plugin and the verb, and
//! carries the plugin's own message (`msg`, `details`, code) or, for a plugin that crashed,
//! its exit status and stderr.

pub mod conf;
pub mod exec;
pub mod result;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

pub use conf::{at_least, NetworkList, PluginConf};

/// The verbs of the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    Add,
    Del,
    Check,
    Status,
    Gc,
    Version,
}

impl Verb {
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Add => "ADD",
            Verb::Del => "DEL",
            Verb::Check => "CHECK",
            Verb::Status => "STATUS",
            Verb::Gc => "GC",
            Verb::Version => "VERSION",
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which plugin call failed: network, configuration file, plugin, verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub network: String,
    pub file: PathBuf,
    pub plugin: String,
    pub verb: Verb,
}

impl std::fmt::Display for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "network {:?} ({}): plugin {:?} {}",
            self.network,
            self.file.display(),
            self.plugin,
            self.verb
        )
    }
}

/// A failed plugin call.
#[derive(Debug, thiserror::Error)]
pub enum CniError {
    #[error("{call}: plugin binary not found in {dirs}")]
    PluginNotFound { call: Box<Call>, dirs: String },
    /// The plugin's own error (spec "Error" result): its message, details and code.
    #[error("{call}: {message}")]
    Plugin {
        call: Box<Call>,
        code: u32,
        message: String,
    },
    /// The plugin exited non-zero without an error result (crashed, killed).
    #[error("{call}: {how}")]
    Failed { call: Box<Call>, how: String },
    #[error("{call}: {source}")]
    Exec {
        call: Box<Call>,
        #[source]
        source: exec::ExecError,
    },
    #[error("{call}: invalid result: {message}")]
    BadResult { call: Box<Call>, message: String },
    #[error("{call}: {message}")]
    Unusable { call: Box<Call>, message: String },
}

impl CniError {
    /// Whether a plugin timed out (it was killed).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            CniError::Exec {
                source: exec::ExecError::Timeout { .. },
                ..
            }
        )
    }
}

/// What one attachment of a container to a network is called by (the spec's runtime
/// parameters).
#[derive(Debug, Clone, Copy)]
pub struct Attachment<'a> {
    /// CNI_CONTAINERID: the sandbox's ID.
    pub container_id: &'a str,
    /// CNI_NETNS: the pinned network namespace; empty when it is gone (DEL after a reboot).
    pub netns: &'a Path,
    /// CNI_IFNAME.
    pub ifname: &'a str,
    /// CNI_ARGS (`K=V;K=V`).
    pub args: &'a str,
    /// Capability arguments, handed to the plugins that declare them as `runtimeConfig`.
    pub capability_args: &'a Map<String, Value>,
}

/// The CNI runtime: where plugins are and how long one may take.
#[derive(Debug, Clone)]
pub struct Cni {
    pub bin_dirs: Vec<PathBuf>,
    pub timeout: Duration,
}

impl Cni {
    fn dirs_text(&self) -> String {
        self.bin_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// CNI_PATH: the plugin directories.
    fn cni_path(&self) -> String {
        self.bin_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(":")
    }

    /// The first plugin of `list` whose binary is missing, as the error ADD would give.
    pub fn missing_plugin(&self, list: &NetworkList) -> Option<CniError> {
        list.plugins.iter().find_map(|p| {
            exec::find_plugin(&self.bin_dirs, &p.plugin_type)
                .is_none()
                .then(|| CniError::PluginNotFound {
                    call: call(list, p, Verb::Add),
                    dirs: self.dirs_text(),
                })
        })
    }

    /// ADD through the list. `progress` sees each plugin, its result as it arrives (the
    /// runtime records it, so a DEL after a crash has the latest `prevResult`) and how long
    /// it took. Returns the last plugin's result.
    pub fn add(
        &self,
        list: &NetworkList,
        att: &Attachment<'_>,
        lock_fd: Option<i32>,
        mut progress: impl FnMut(&PluginConf, &Value, Duration),
    ) -> Result<Value, CniError> {
        let mut prev: Option<Value> = None;
        for p in &list.plugins {
            let stdin = plugin_config(list, p, prev.as_ref(), att.capability_args, None);
            let t0 = std::time::Instant::now();
            let out = self.invoke(list, p, Verb::Add, Some(att), &stdin, lock_fd)?;
            let took = t0.elapsed();
            let result: Value = serde_json::from_slice(&out).map_err(|e| CniError::BadResult {
                call: call(list, p, Verb::Add),
                message: format!("{e}: {}", snippet(&out)),
            })?;
            if !result.is_object() {
                return Err(CniError::BadResult {
                    call: call(list, p, Verb::Add),
                    message: format!("not a JSON object: {}", snippet(&out)),
                });
            }
            progress(p, &result, took);
            prev = Some(result);
        }
        // A list has at least one plugin (conf::parse), so there is a result.
        prev.ok_or_else(|| CniError::Unusable {
            call: Box::new(Call {
                network: list.name.clone(),
                file: list.path.clone(),
                plugin: String::new(),
                verb: Verb::Add,
            }),
            message: "the list has no plugins".into(),
        })
    }

    /// DEL through the list in reverse order, with the ADD's result as `prevResult` (0.4.0
    /// on; libcni's cached result). Stops at the first error (the caller keeps what it needs
    /// to try again).
    pub fn del(
        &self,
        list: &NetworkList,
        att: &Attachment<'_>,
        prev: Option<&Value>,
        lock_fd: Option<i32>,
    ) -> Result<(), CniError> {
        let prev = prev.filter(|_| at_least(&list.cni_version, "0.4.0"));
        for p in list.plugins.iter().rev() {
            let stdin = plugin_config(list, p, prev, att.capability_args, None);
            self.invoke(list, p, Verb::Del, Some(att), &stdin, lock_fd)?;
        }
        Ok(())
    }

    /// Whether CHECK applies to `list` (0.4.0 on, not disabled).
    pub fn can_check(list: &NetworkList) -> bool {
        at_least(&list.cni_version, "0.4.0") && !list.disable_check
    }

    /// CHECK through the list in order with the ADD's result; a no-op where it does not
    /// apply. The error comes with the index of the plugin that failed.
    pub fn check(
        &self,
        list: &NetworkList,
        att: &Attachment<'_>,
        prev: &Value,
        lock_fd: Option<i32>,
    ) -> Result<(), (usize, CniError)> {
        if !Self::can_check(list) {
            return Ok(());
        }
        for (i, p) in list.plugins.iter().enumerate() {
            let stdin = plugin_config(list, p, Some(prev), att.capability_args, None);
            self.invoke(list, p, Verb::Check, Some(att), &stdin, lock_fd)
                .map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// STATUS of every plugin (1.1.0 on; a no-op before): whether the network can take
    /// ADDs. The plugin's error says why not (code 50: unavailable, 51: also limited
    /// connectivity for existing containers).
    pub fn status(&self, list: &NetworkList) -> Result<(), CniError> {
        if !at_least(&list.cni_version, "1.1.0") {
            return Ok(());
        }
        let empty = Map::new();
        for p in &list.plugins {
            let stdin = plugin_config(list, p, None, &empty, None);
            self.invoke(list, p, Verb::Status, None, &stdin, None)?;
        }
        Ok(())
    }

    /// Whether GC applies to `list` (1.1.0 on, not disabled).
    pub fn can_gc(list: &NetworkList) -> bool {
        at_least(&list.cni_version, "1.1.0") && !list.disable_gc
    }

    /// GC: every plugin releases what it holds for attachments not in `valid` (container ID,
    /// interface name). A no-op where it does not apply.
    pub fn gc(&self, list: &NetworkList, valid: &[(String, String)]) -> Result<(), CniError> {
        if !Self::can_gc(list) {
            return Ok(());
        }
        let attachments: Vec<Value> = valid
            .iter()
            .map(|(id, ifname)| serde_json::json!({"containerID": id, "ifname": ifname}))
            .collect();
        let empty = Map::new();
        for p in &list.plugins {
            let stdin = plugin_config(list, p, None, &empty, Some(&attachments));
            self.invoke(list, p, Verb::Gc, None, &stdin, None)?;
        }
        Ok(())
    }

    /// VERSION of one plugin: the spec versions it supports.
    pub fn versions(&self, list: &NetworkList, p: &PluginConf) -> Result<Vec<String>, CniError> {
        let stdin = serde_json::to_vec(&serde_json::json!({"cniVersion": list.cni_version}))
            .unwrap_or_default();
        let out = self.invoke(list, p, Verb::Version, None, &stdin, None)?;
        let v: Value = serde_json::from_slice(&out).map_err(|e| CniError::BadResult {
            call: call(list, p, Verb::Version),
            message: format!("{e}: {}", snippet(&out)),
        })?;
        Ok(v.get("supportedVersions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Runs one plugin; its stdout on success.
    fn invoke(
        &self,
        list: &NetworkList,
        p: &PluginConf,
        verb: Verb,
        att: Option<&Attachment<'_>>,
        stdin: &[u8],
        lock_fd: Option<i32>,
    ) -> Result<Vec<u8>, CniError> {
        let c = || call(list, p, verb);
        let path = exec::find_plugin(&self.bin_dirs, &p.plugin_type).ok_or_else(|| {
            CniError::PluginNotFound {
                call: c(),
                dirs: self.dirs_text(),
            }
        })?;
        let mut vars: Vec<(&str, String)> = vec![
            ("CNI_COMMAND", verb.as_str().to_string()),
            ("CNI_PATH", self.cni_path()),
        ];
        if let Some(a) = att {
            vars.push(("CNI_CONTAINERID", a.container_id.to_string()));
            vars.push(("CNI_NETNS", a.netns.display().to_string()));
            vars.push(("CNI_IFNAME", a.ifname.to_string()));
            vars.push(("CNI_ARGS", a.args.to_string()));
        }
        let out = exec::run(&path, &vars, stdin, self.timeout, lock_fd)
            .map_err(|source| CniError::Exec { call: c(), source })?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        // The spec's error result on stdout: {"cniVersion", "code", "msg", "details"}.
        let parsed: Option<Value> = serde_json::from_slice(&out.stdout).ok();
        let msg = parsed
            .as_ref()
            .and_then(|v| v.get("msg"))
            .and_then(Value::as_str)
            .filter(|m| !m.is_empty());
        match msg {
            Some(m) => {
                let v = parsed.as_ref().unwrap_or(&Value::Null);
                let details = v
                    .get("details")
                    .and_then(Value::as_str)
                    .filter(|d| !d.is_empty());
                let code = v.get("code").and_then(Value::as_u64).unwrap_or(0) as u32;
                let mut message = m.to_string();
                if let Some(d) = details {
                    message.push_str(&format!(": {d}"));
                }
                if code != 0 {
                    message.push_str(&format!(" (code {code})"));
                }
                Err(CniError::Plugin {
                    call: c(),
                    code,
                    message,
                })
            }
            None => {
                let mut how = exec::describe_status(out.status);
                if !out.stdout.is_empty() {
                    how.push_str(&format!(" (stdout: {})", snippet(&out.stdout)));
                }
                how.push_str(&exec::tail(&out.stderr));
                Err(CniError::Failed { call: c(), how })
            }
        }
    }
}

fn call(list: &NetworkList, p: &PluginConf, verb: Verb) -> Box<Call> {
    Box::new(Call {
        network: list.name.clone(),
        file: list.path.clone(),
        plugin: p.plugin_type.clone(),
        verb,
    })
}

/// At most 300 characters of a plugin's output, for a message.
fn snippet(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let s = s.trim();
    match s.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// The configuration one plugin gets on stdin (libcni's `buildOneConfig` and
/// `injectRuntimeConfig`): its own object with the list's `name` and `cniVersion`, the
/// `prevResult`, the capability arguments it declares as `runtimeConfig`, and for GC the
/// valid attachments.
pub fn plugin_config(
    list: &NetworkList,
    p: &PluginConf,
    prev: Option<&Value>,
    capability_args: &Map<String, Value>,
    valid_attachments: Option<&[Value]>,
) -> Vec<u8> {
    let mut m = p.raw.clone();
    m.insert("name".into(), Value::String(list.name.clone()));
    m.insert("cniVersion".into(), Value::String(list.cni_version.clone()));
    if let Some(prev) = prev {
        m.insert("prevResult".into(), prev.clone());
    }
    let rc: Map<String, Value> = capability_args
        .iter()
        .filter(|(k, _)| p.capabilities.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !rc.is_empty() {
        m.insert("runtimeConfig".into(), Value::Object(rc));
    }
    if let Some(valid) = valid_attachments {
        m.insert(
            "cni.dev/valid-attachments".into(),
            Value::Array(valid.to_vec()),
        );
    }
    // Serializing a JSON map cannot fail.
    serde_json::to_vec(&Value::Object(m)).unwrap_or_default()
}
