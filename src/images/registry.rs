//! Where and how to pull: [`RegistryConfig`] built from a k3s-style `registries.yaml`
//! (per-registry mirrors with endpoint rewrites, per-host auth and TLS) and a docker-style
//! `config.json` (`auths`). Resolves a reference to the ordered list of endpoints to try, the
//! credentials for a host and the TLS roots of a host.
//!
//! `registries.yaml` shape (as k3s):
//! ```yaml
//! mirrors:
//!   docker.io:
//!     endpoint: ["https://mirror.local:5000", "http://10.0.0.2:5000"]
//!     rewrite: {"^library/(.*)": "dockerhub/$1"}
//! configs:
//!   mirror.local:5000:
//!     auth: {username: u, password: p}
//!     tls: {ca_file: /etc/ssl/mirror-ca.pem, insecure_skip_verify: false}
//! ```
//! Plain http is used only for endpoints written with `http://`.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Docker Hub's registry name in references and its API host.
pub const DOCKER_HUB: &str = "docker.io";
pub const DOCKER_HUB_API: &str = "registry-1.docker.io";
/// The system CA bundle (Debian's ca-certificates).
pub use crate::httpclient::tls::SYSTEM_CA_BUNDLE;

/// Errors loading registry configuration.
#[derive(Debug, thiserror::Error)]
pub enum RegistryConfigError {
    #[error("reading registry config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("registry config {path} is invalid: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("registry config {path}: mirror {registry:?} endpoint {endpoint:?}: {source}")]
    BadEndpoint {
        path: PathBuf,
        registry: String,
        endpoint: String,
        #[source]
        source: EndpointError,
    },
    #[error(
        "registry config {path}: mirror {registry:?} rewrite {pattern:?} is not supported: \
         podvisor supports patterns of the form \"^prefix(.*)\" with \"$1\" in the replacement"
    )]
    BadRewrite {
        path: PathBuf,
        registry: String,
        pattern: String,
    },
    #[error("docker config {path}: auth entry {host:?} is invalid: {source}")]
    BadAuth {
        path: PathBuf,
        host: String,
        #[source]
        source: AuthError,
    },
}

/// An endpoint that is not `[http[s]://]host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("only http:// and https:// endpoints are supported")]
    Scheme,
    #[error("invalid host")]
    Host,
}

/// An `auth` entry (registries.yaml `configs.<host>.auth`, docker `auths`) without usable
/// credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("\"auth\" is not valid base64")]
    NotBase64,
    #[error("\"auth\" is not utf-8")]
    NotUtf8,
    #[error("\"auth\" must encode \"username:password\"")]
    NotUserPassword,
}

// ---- raw documents ----

#[derive(Debug, Default, Deserialize)]
struct RawRegistries {
    #[serde(default)]
    mirrors: BTreeMap<String, RawMirror>,
    #[serde(default)]
    configs: BTreeMap<String, RawHostConfig>,
}

#[derive(Debug, Default, Deserialize)]
struct RawMirror {
    #[serde(default)]
    endpoint: Vec<String>,
    #[serde(default)]
    rewrite: BTreeMap<String, String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawHostConfig {
    #[serde(default)]
    auth: Option<RawAuth>,
    #[serde(default)]
    tls: Option<RawTls>,
}

#[derive(Debug, Default, Deserialize)]
struct RawAuth {
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
    #[serde(default)]
    auth: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct RawTls {
    #[serde(default)]
    ca_file: Option<PathBuf>,
    #[serde(default)]
    insecure_skip_verify: bool,
}

#[derive(Debug, Default, Deserialize)]
struct RawDockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, RawAuth>,
}

// ---- validated configuration ----

/// Username and password for Basic auth (also sent to Bearer token endpoints).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Credentials({}, <redacted>)", self.username)
    }
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

/// One registry API endpoint: scheme, `host[:port]` and the API base path (`/v2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub scheme: Scheme,
    pub host: String,
    pub base: String,
}

impl Endpoint {
    /// `https://<host>/v2` (Docker Hub's API host for `docker.io`).
    pub fn default_for(registry: &str) -> Endpoint {
        let host = if registry == DOCKER_HUB {
            DOCKER_HUB_API
        } else {
            registry
        };
        Endpoint {
            scheme: Scheme::Https,
            host: host.to_string(),
            base: "/v2".to_string(),
        }
    }

    /// Parses `scheme://host[:port][/path]`; a missing scheme means https; an empty path
    /// means `/v2`.
    pub fn parse(s: &str) -> Result<Endpoint, EndpointError> {
        let (scheme, rest) = if let Some(r) = s.strip_prefix("https://") {
            (Scheme::Https, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (Scheme::Http, r)
        } else if s.contains("://") {
            return Err(EndpointError::Scheme);
        } else {
            (Scheme::Https, s)
        };
        let (host, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if host.is_empty()
            || !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        {
            return Err(EndpointError::Host);
        }
        let path = path.trim_end_matches('/');
        let base = if path.is_empty() { "/v2" } else { path };
        Ok(Endpoint {
            scheme,
            host: host.to_string(),
            base: base.to_string(),
        })
    }

    /// `scheme://host`.
    pub fn origin(&self) -> String {
        let s = match self.scheme {
            Scheme::Http => "http",
            Scheme::Https => "https",
        };
        format!("{s}://{}", self.host)
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.origin(), self.base)
    }
}

/// A rewrite of the repository path `^prefix(.*)` -> `replacement` with `$1`.
#[derive(Debug, Clone)]
struct Rewrite {
    prefix: String,
    replacement: String,
}

impl Rewrite {
    fn parse(pattern: &str, replacement: &str) -> Option<Rewrite> {
        let body = pattern.strip_prefix('^')?;
        let body = body.strip_suffix('$').unwrap_or(body);
        let prefix = body.strip_suffix("(.*)")?;
        // Only literal prefixes (an unescaped '.' is taken literally too).
        if prefix
            .replace("\\.", "")
            .chars()
            .any(|c| "\\^$*+?()[]{}|".contains(c))
        {
            return None;
        }
        let literal = prefix.replace("\\.", ".");
        Some(Rewrite {
            prefix: literal,
            replacement: replacement.to_string(),
        })
    }

    fn apply(&self, repo: &str) -> Option<String> {
        let rest = repo.strip_prefix(&self.prefix)?;
        Some(self.replacement.replace("$1", rest).replace("${1}", rest))
    }
}

#[derive(Debug, Clone, Default)]
struct Mirror {
    endpoints: Vec<Endpoint>,
    rewrites: Vec<Rewrite>,
}

/// TLS settings of one host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// Extra CA certificates (PEM) trusted besides the system bundle.
    pub ca_file: Option<PathBuf>,
    /// Skips certificate verification (registries.yaml `insecure_skip_verify`).
    pub insecure_skip_verify: bool,
}

/// One place to fetch a repository from: an endpoint and the repository path there (after
/// rewrites).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub endpoint: Endpoint,
    pub repository: String,
}

/// Where and how to pull (built once by the daemon or the CLI from flags and files).
#[derive(Debug, Clone, Default)]
pub struct RegistryConfig {
    mirrors: BTreeMap<String, Mirror>,
    host_auth: BTreeMap<String, Credentials>,
    host_tls: BTreeMap<String, TlsSettings>,
    docker_auths: BTreeMap<String, Credentials>,
    /// Where the docker credentials came from (for logs).
    docker_config: Option<PathBuf>,
}

/// Default docker `config.json` locations, searched in this order like the kubelet's
/// credential keyring (its `--root-dir`, then `$HOME/.docker`, then `/.docker`; the kubelet
/// also looks in its working directory, which podvisor does not).
pub fn default_docker_config_paths() -> Vec<PathBuf> {
    let mut out = vec![PathBuf::from("/var/lib/kubelet/config.json")];
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        out.push(Path::new(&home).join(".docker/config.json"));
    }
    out.push(PathBuf::from("/.docker/config.json"));
    out
}

impl RegistryConfig {
    /// Loads `registries_yaml` (none: no mirrors, default endpoints) and `docker_config` (none:
    /// the first of [`default_docker_config_paths`] that reads and parses; an unreadable or
    /// invalid default file is logged and skipped, an explicit one is an error).
    pub fn load(
        registries_yaml: Option<&Path>,
        docker_config: Option<&Path>,
    ) -> Result<RegistryConfig, RegistryConfigError> {
        let mut cfg = RegistryConfig::default();
        if let Some(path) = registries_yaml {
            let text = fs::read_to_string(path).map_err(|source| RegistryConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            cfg.apply_registries(path, &text)?;
        }
        match docker_config {
            Some(path) => {
                let text =
                    fs::read_to_string(path).map_err(|source| RegistryConfigError::Read {
                        path: path.to_path_buf(),
                        source,
                    })?;
                cfg.apply_docker_config(path, &text)?;
                cfg.docker_config = Some(path.to_path_buf());
            }
            // Like the kubelet's keyring: the first default location that reads and parses;
            // a bad file there is logged and skipped.
            None => {
                for path in default_docker_config_paths() {
                    let text = match fs::read_to_string(&path) {
                        Ok(t) => t,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                        Err(e) => {
                            log::warn!("skipping docker config {}: {e}", path.display());
                            continue;
                        }
                    };
                    let mut with = cfg.clone();
                    match with.apply_docker_config(&path, &text) {
                        Ok(()) => {
                            with.docker_config = Some(path);
                            cfg = with;
                            break;
                        }
                        Err(e) => log::warn!("skipping {e}"),
                    }
                }
            }
        }
        Ok(cfg)
    }

    /// Parses a `registries.yaml` document into this configuration.
    pub fn apply_registries(&mut self, path: &Path, text: &str) -> Result<(), RegistryConfigError> {
        let raw: RawRegistries = if text.trim().is_empty() {
            RawRegistries::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| RegistryConfigError::Invalid {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?
        };
        for (registry, m) in raw.mirrors {
            let mut mirror = Mirror::default();
            for e in &m.endpoint {
                let ep = Endpoint::parse(e).map_err(|source| RegistryConfigError::BadEndpoint {
                    path: path.to_path_buf(),
                    registry: registry.clone(),
                    endpoint: e.clone(),
                    source,
                })?;
                mirror.endpoints.push(ep);
            }
            for (pattern, replacement) in &m.rewrite {
                let rw = Rewrite::parse(pattern, replacement).ok_or_else(|| {
                    RegistryConfigError::BadRewrite {
                        path: path.to_path_buf(),
                        registry: registry.clone(),
                        pattern: pattern.clone(),
                    }
                })?;
                mirror.rewrites.push(rw);
            }
            // Longest prefix first so the most specific rewrite wins.
            mirror
                .rewrites
                .sort_by_key(|r| std::cmp::Reverse(r.prefix.len()));
            self.mirrors.insert(normalize_registry(&registry), mirror);
        }
        for (host, c) in raw.configs {
            let host = normalize_host_key(&host);
            if let Some(a) = c.auth {
                let creds = creds_from_raw(&a).map_err(|reason| RegistryConfigError::Invalid {
                    path: path.to_path_buf(),
                    reason: format!("configs.{host}.auth: {reason}"),
                })?;
                if let Some(creds) = creds {
                    self.host_auth.insert(host.clone(), creds);
                }
            }
            if let Some(t) = c.tls {
                self.host_tls.insert(
                    host,
                    TlsSettings {
                        ca_file: t.ca_file,
                        insecure_skip_verify: t.insecure_skip_verify,
                    },
                );
            }
        }
        Ok(())
    }

    /// Parses a docker `config.json` (`auths` only; credential helpers are not run).
    pub fn apply_docker_config(
        &mut self,
        path: &Path,
        text: &str,
    ) -> Result<(), RegistryConfigError> {
        let raw: RawDockerConfig =
            serde_json::from_str(text).map_err(|e| RegistryConfigError::Invalid {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
        for (key, a) in raw.auths {
            let host = normalize_host_key(&key);
            match creds_from_raw(&a) {
                Ok(Some(c)) => {
                    self.docker_auths.insert(host, c);
                }
                Ok(None) => {}
                Err(source) => {
                    return Err(RegistryConfigError::BadAuth {
                        path: path.to_path_buf(),
                        host: key,
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    /// The docker config file credentials were read from, if any.
    pub fn docker_config_path(&self) -> Option<&Path> {
        self.docker_config.as_deref()
    }

    /// Endpoints to try for `repository` of `registry`, in order: the registry's mirrors (or
    /// the `*` mirrors), then the registry itself unless a mirror already is it.
    pub fn sources(&self, registry: &str, repository: &str) -> Vec<Source> {
        let mut out: Vec<Source> = Vec::new();
        let reg = normalize_registry(registry);
        if let Some(m) = self.mirrors.get(&reg).or_else(|| self.mirrors.get("*")) {
            let repo = m
                .rewrites
                .iter()
                .find_map(|r| r.apply(repository))
                .unwrap_or_else(|| repository.to_string());
            for ep in &m.endpoints {
                out.push(Source {
                    endpoint: ep.clone(),
                    repository: repo.clone(),
                });
            }
        }
        let default = Endpoint::default_for(&reg);
        if !out.iter().any(|s| s.endpoint.host == default.host) {
            out.push(Source {
                endpoint: default,
                repository: repository.to_string(),
            });
        }
        out
    }

    /// Credentials for an endpoint host: registries.yaml `configs` first, then config.json
    /// (Docker Hub's aliases are treated as one host).
    pub fn credentials(&self, host: &str) -> Option<&Credentials> {
        let host = normalize_host_key(host);
        if let Some(c) = self.host_auth.get(&host) {
            return Some(c);
        }
        if let Some(c) = self.docker_auths.get(&host) {
            return Some(c);
        }
        if is_docker_hub_host(&host) {
            return self
                .docker_auths
                .iter()
                .find(|(k, _)| is_docker_hub_host(k))
                .map(|(_, c)| c);
        }
        None
    }

    /// TLS settings of an endpoint host.
    pub fn tls(&self, host: &str) -> TlsSettings {
        self.host_tls
            .get(&normalize_host_key(host))
            .cloned()
            .unwrap_or_default()
    }
}

fn is_docker_hub_host(h: &str) -> bool {
    matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io")
}

fn normalize_registry(r: &str) -> String {
    match r {
        "index.docker.io" | "registry-1.docker.io" => DOCKER_HUB.to_string(),
        other => other.to_string(),
    }
}

/// `https://index.docker.io/v1/` -> `index.docker.io`.
fn normalize_host_key(k: &str) -> String {
    let k = k
        .strip_prefix("https://")
        .or_else(|| k.strip_prefix("http://"))
        .unwrap_or(k);
    k.split('/').next().unwrap_or(k).to_ascii_lowercase()
}

fn creds_from_raw(a: &RawAuth) -> Result<Option<Credentials>, AuthError> {
    if let (Some(u), Some(p)) = (&a.username, &a.password) {
        if !u.is_empty() {
            return Ok(Some(Credentials {
                username: u.clone(),
                password: p.clone(),
            }));
        }
    }
    if let Some(enc) = a.auth.as_deref().filter(|s| !s.is_empty()) {
        let bytes = base64_decode(enc).ok_or(AuthError::NotBase64)?;
        let s = String::from_utf8(bytes).map_err(|_| AuthError::NotUtf8)?;
        let (u, p) = s.split_once(':').ok_or(AuthError::NotUserPassword)?;
        return Ok(Some(Credentials {
            username: u.to_string(),
            password: p.to_string(),
        }));
    }
    Ok(None)
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes standard base64 (padding optional, whitespace ignored).
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for c in s.bytes() {
        if c == b'=' {
            break;
        }
        if c.is_ascii_whitespace() {
            continue;
        }
        let v = B64.iter().position(|&x| x == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trip() {
        for s in ["", "a", "ab", "abc", "user:pa:ss", "ünïcode"] {
            let e = base64_encode(s.as_bytes());
            assert_eq!(base64_decode(&e).expect("decode"), s.as_bytes(), "{e}");
        }
        assert_eq!(base64_encode(b"user:pass"), "dXNlcjpwYXNz");
        assert!(base64_decode("%%%").is_none());
    }

    #[test]
    fn registries_yaml_mirrors_rewrites_and_auth() {
        let mut cfg = RegistryConfig::default();
        let yaml = r#"
mirrors:
  docker.io:
    endpoint: ["http://127.0.0.1:5000", "https://mirror.example/v2/hub"]
    rewrite:
      "^library/(.*)": "hub/library/$1"
  "*":
    endpoint: ["https://all.example"]
configs:
  "127.0.0.1:5000":
    auth: {username: u, password: p}
    tls: {insecure_skip_verify: true}
"#;
        cfg.apply_registries(Path::new("r.yaml"), yaml)
            .expect("parse");
        let s = cfg.sources("docker.io", "library/busybox");
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[0].endpoint.scheme, Scheme::Http);
        assert_eq!(s[0].repository, "hub/library/busybox");
        assert_eq!(s[1].endpoint.base, "/v2/hub");
        assert_eq!(s[2].endpoint.host, DOCKER_HUB_API);
        assert_eq!(s[2].repository, "library/busybox");
        let q = cfg.sources("quay.io", "a/b");
        assert_eq!(q[0].endpoint.host, "all.example");
        assert_eq!(q[1].endpoint.host, "quay.io");
        assert_eq!(
            cfg.credentials("127.0.0.1:5000")
                .map(|c| c.username.as_str()),
            Some("u")
        );
        assert!(cfg.tls("127.0.0.1:5000").insecure_skip_verify);
        assert!(cfg.credentials("quay.io").is_none());
    }

    #[test]
    fn unsupported_rewrite_and_endpoint_are_named() {
        let mut cfg = RegistryConfig::default();
        let err = cfg
            .apply_registries(
                Path::new("r.yaml"),
                "mirrors:\n  docker.io:\n    rewrite: {\"lib(rary|x)/(.*)\": \"$2\"}\n",
            )
            .expect_err("rewrite");
        assert!(err.to_string().contains("lib(rary|x)"), "{err}");
        let err = cfg
            .apply_registries(
                Path::new("r.yaml"),
                "mirrors:\n  docker.io:\n    endpoint: [\"ftp://x\"]\n",
            )
            .expect_err("endpoint");
        assert!(err.to_string().contains("ftp://x"), "{err}");
    }

    #[test]
    fn docker_config_auths() {
        let mut cfg = RegistryConfig::default();
        let json = format!(
            r#"{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{}"}},
                "reg.example:5000": {{"username": "a", "password": "b"}},
                "empty.example": {{}}}}, "credsStore": "desktop"}}"#,
            base64_encode(b"hub:secret")
        );
        cfg.apply_docker_config(Path::new("c.json"), &json)
            .expect("parse");
        let hub = cfg.credentials("registry-1.docker.io").expect("hub");
        assert_eq!(
            (hub.username.as_str(), hub.password.as_str()),
            ("hub", "secret")
        );
        assert_eq!(
            cfg.credentials("reg.example:5000")
                .map(|c| c.password.as_str()),
            Some("b")
        );
        assert!(cfg.credentials("empty.example").is_none());
        let err = cfg
            .apply_docker_config(
                Path::new("c.json"),
                r#"{"auths": {"x": {"auth": "bm9jb2xvbg=="}}}"#,
            )
            .expect_err("no colon");
        assert!(err.to_string().contains("\"x\""), "{err}");
    }
}
