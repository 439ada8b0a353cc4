//! conf: CNI network configurations as the runtime reads them (spec 1.0 "Section 1: Network
//! configuration format", libcni's `ConfFiles`/`ConfListFromBytes`), and the one network the
//! runtime uses: the lexically first file of the configuration directory, as containerd
//! picks it.
//!
//! A `.conflist` is a list (`name`, `cniVersion` or 1.1's `cniVersions`, `disableCheck`,
//! `disableGC`, `plugins`); a `.conf` or `.json` file is one plugin's configuration, read as
//! a list of one. Versions 0.3.0 to 1.1.0 are understood; a file with another one, or without
//! a `name`, a `type`, or any plugin, is an error naming the file (containerd stops at a
//! broken first file too: it never silently falls through to the next one).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The spec versions this runtime speaks (configs and results), oldest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// File name endings libcni (and so containerd) reads from a configuration directory.
pub const CONF_EXTENSIONS: &[&str] = &["conf", "conflist", "json"];

/// Largest configuration file read (a conflist is a few hundred bytes).
const MAX_CONF_BYTES: u64 = 1024 * 1024;

/// Why a configuration cannot be used; always names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

/// A `major.minor.patch` version, comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.split('.').map(|p| p.parse::<u32>().ok());
        let v = Version(it.next()??, it.next()??, it.next()??);
        it.next().is_none().then_some(v)
    }
}

/// Whether `version` (a config's cniVersion) is at least `min`; unparsable is never.
pub fn at_least(version: &str, min: &str) -> bool {
    match (Version::parse(version), Version::parse(min)) {
        (Some(v), Some(m)) => v >= m,
        _ => false,
    }
}

/// One plugin of a list: its configuration object as written, its type and the capabilities
/// it declares (`"capabilities": {"portMappings": true}`).
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConf {
    pub plugin_type: String,
    pub capabilities: BTreeSet<String>,
    pub raw: Map<String, Value>,
}

/// A network configuration list, and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct NetworkList {
    pub name: String,
    pub cni_version: String,
    pub disable_check: bool,
    pub disable_gc: bool,
    pub plugins: Vec<PluginConf>,
    /// The file it was read from.
    pub path: PathBuf,
    /// The file's content (recorded with each attachment: DEL and CHECK use the
    /// configuration the ADD used, as libcni's cache does).
    pub bytes: String,
}

fn invalid(path: &Path, message: impl Into<String>) -> ConfError {
    ConfError::Invalid {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// The configuration files of `dir`, sorted by name (libcni's `ConfFiles` + sort). A missing
/// directory has none.
pub fn conf_files(dir: &Path) -> Result<Vec<PathBuf>, ConfError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(ConfError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| CONF_EXTENSIONS.contains(&e))
                && !p.is_dir()
        })
        .collect();
    files.sort();
    Ok(files)
}

/// The network of `dir`: its lexically first configuration file, parsed; `None` when the
/// directory has none.
pub fn load_first(dir: &Path) -> Result<Option<NetworkList>, ConfError> {
    match conf_files(dir)?.into_iter().next() {
        Some(path) => load_file(&path).map(Some),
        None => Ok(None),
    }
}

/// Reads and parses one configuration file.
pub fn load_file(path: &Path) -> Result<NetworkList, ConfError> {
    use std::io::Read;
    let io = |source| ConfError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut text = String::new();
    std::fs::File::open(path)
        .map_err(io)?
        .take(MAX_CONF_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(io)?;
    if text.len() as u64 > MAX_CONF_BYTES {
        return Err(invalid(path, "larger than 1 MiB"));
    }
    let list = path.extension().is_some_and(|e| e == "conflist");
    parse(&text, path, list)
}

/// Parses `text` (the content of `path`): a list, or with `list == false` one plugin's
/// configuration.
pub fn parse(text: &str, path: &Path, list: bool) -> Result<NetworkList, ConfError> {
    let value: Value = serde_json::from_str(text).map_err(|e| {
        invalid(
            path,
            format!("line {} column {}: {e}", e.line(), e.column()),
        )
    })?;
    let Value::Object(obj) = value else {
        return Err(invalid(path, "not a JSON object"));
    };
    let name = match obj.get("name") {
        Some(Value::String(n)) if valid_name(n) => n.clone(),
        Some(Value::String(n)) => {
            return Err(invalid(
                path,
                format!("network name {n:?} must match ^[a-zA-Z0-9][a-zA-Z0-9_.-]*$"),
            ))
        }
        _ => return Err(invalid(path, "no network \"name\"")),
    };
    let cni_version = pick_version(&obj, path)?;
    let flag = |key: &str| -> Result<bool, ConfError> {
        match obj.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            // libcni accepts "true"/"false" strings for disableCheck.
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
            Some(_) => Err(invalid(path, format!("\"{key}\" must be true or false"))),
        }
    };
    let (disable_check, disable_gc) = (flag("disableCheck")?, flag("disableGC")?);
    let plugins = if list {
        match obj.get("plugins") {
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .enumerate()
                .map(|(i, p)| plugin(p, path, &format!("plugins[{i}]")))
                .collect::<Result<Vec<_>, _>>()?,
            Some(Value::Array(_)) => return Err(invalid(path, "\"plugins\" is empty")),
            _ => return Err(invalid(path, "no \"plugins\" list")),
        }
    } else {
        if obj.contains_key("plugins") {
            return Err(invalid(
                path,
                "has a \"plugins\" list: a configuration list must be named *.conflist",
            ));
        }
        vec![plugin(
            &Value::Object(obj.clone()),
            path,
            "the configuration",
        )?]
    };
    Ok(NetworkList {
        name,
        cni_version,
        disable_check,
        disable_gc,
        plugins,
        path: path.to_path_buf(),
        bytes: text.to_string(),
    })
}

/// `cniVersion`, or with 1.1's `cniVersions` the highest one this runtime supports.
fn pick_version(obj: &Map<String, Value>, path: &Path) -> Result<String, ConfError> {
    let supported = |v: &str| SUPPORTED_VERSIONS.contains(&v);
    if let Some(Value::Array(vs)) = obj.get("cniVersions") {
        let best = vs
            .iter()
            .filter_map(Value::as_str)
            .filter(|v| supported(v))
            .max_by_key(|v| Version::parse(v));
        if let Some(v) = best {
            return Ok(v.to_string());
        }
    }
    match obj.get("cniVersion") {
        Some(Value::String(v)) if supported(v) => Ok(v.clone()),
        Some(Value::String(v)) => Err(invalid(
            path,
            format!(
                "cniVersion {v:?} is not supported (supported: {})",
                SUPPORTED_VERSIONS.join(", ")
            ),
        )),
        _ => Err(invalid(path, "no \"cniVersion\"")),
    }
}

fn plugin(v: &Value, path: &Path, at: &str) -> Result<PluginConf, ConfError> {
    let Value::Object(raw) = v else {
        return Err(invalid(path, format!("{at} is not a JSON object")));
    };
    let plugin_type = match raw.get("type") {
        Some(Value::String(t)) if valid_type(t) => t.clone(),
        Some(Value::String(t)) => {
            return Err(invalid(path, format!("{at}: invalid plugin type {t:?}")))
        }
        _ => return Err(invalid(path, format!("{at} has no plugin \"type\""))),
    };
    let capabilities = match raw.get("capabilities") {
        Some(Value::Object(c)) => c
            .iter()
            .filter(|(_, on)| on.as_bool() == Some(true))
            .map(|(k, _)| k.clone())
            .collect(),
        _ => BTreeSet::new(),
    };
    Ok(PluginConf {
        plugin_type,
        capabilities,
        raw: raw.clone(),
    })
}

/// The spec's network name: `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`.
fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

/// A plugin type names a binary in a plugin directory: never a path.
fn valid_type(t: &str) -> bool {
    !t.is_empty() && !t.contains('/') && t != "." && t != ".."
}

/// The container ID the spec allows: `^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`, as a network name.
pub fn valid_container_id(id: &str) -> bool {
    valid_name(id)
}
