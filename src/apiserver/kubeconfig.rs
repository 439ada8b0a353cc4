//! apiserver::kubeconfig: a kubeconfig file as client-go reads it for one client —
//! `current-context` -> its cluster (`server`, `certificate-authority[-data]`,
//! `insecure-skip-tls-verify`) and user (`client-certificate[-data]`, `client-key[-data]`,
//! `token`, `tokenFile`). Relative paths are relative to the kubeconfig's directory, as in
//! client-go. Authentication podvisor cannot do (exec plugins, auth providers, basic auth) is
//! refused naming the field, rather than connecting anonymously. Read through the manifests'
//! YAML tree (`pod::manifest::parse_documents`, its parsing budget included): no second
//! deserializer in the binary for a file read once at start.

use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::pod::manifest::RawNode;

/// Largest kubeconfig read.
const MAX_KUBECONFIG: u64 = 1 << 20;

/// A kubeconfig that cannot be used; each names the file and the field.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error("kubeconfig {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("kubeconfig {path}: {message}")]
    Syntax { path: PathBuf, message: String },
    #[error("kubeconfig {path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
}

/// A named entry of `clusters`, `users` or `contexts`: its name and its `cluster`/`user`/
/// `context` mapping.
fn named<'a>(root: &'a RawNode, list: &str, item: &str) -> Vec<(String, &'a RawNode)> {
    match root.get(list).map(|v| &v.value) {
        Some(RawNode::Seq(items)) => items
            .iter()
            .map(|i| {
                (
                    i.value.get_str("name").unwrap_or("").to_string(),
                    i.value.get(item).map_or(&RawNode::Null, |v| &v.value),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn str_of(node: &RawNode, key: &str) -> Option<String> {
    node.get_str(key).map(String::from)
}

/// What podvisor connects with.
#[derive(Clone, PartialEq, Eq)]
pub struct Kubeconfig {
    /// The kubeconfig file (for messages).
    pub path: PathBuf,
    /// `https://host:port` (a path prefix kept, no trailing slash).
    pub server: String,
    /// PEM of the cluster's CA; `None`: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
    pub insecure_skip_tls_verify: bool,
    /// PEM client certificate chain and key.
    pub client_cert_pem: Option<Vec<u8>>,
    pub client_key_pem: Option<Vec<u8>>,
    /// A bearer token written in the file.
    pub token: Option<String>,
    /// A file holding the bearer token, read again as it changes (client-go rereads it).
    pub token_file: Option<PathBuf>,
}

impl std::fmt::Debug for Kubeconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // No key or token in logs.
        f.debug_struct("Kubeconfig")
            .field("path", &self.path)
            .field("server", &self.server)
            .field("client_cert", &self.client_cert_pem.is_some())
            .field("token", &self.token.is_some())
            .field("token_file", &self.token_file)
            .finish_non_exhaustive()
    }
}

impl Kubeconfig {
    /// Reads and resolves `path`.
    pub fn load(path: &Path) -> Result<Kubeconfig, KubeconfigError> {
        use std::io::Read as _;
        let read = |source| KubeconfigError::Read {
            path: path.to_path_buf(),
            source,
        };
        let mut text = String::new();
        std::fs::File::open(path)
            .map_err(read)?
            .take(MAX_KUBECONFIG)
            .read_to_string(&mut text)
            .map_err(read)?;
        Kubeconfig::parse(&text, path)
    }

    /// Resolves the kubeconfig `text` read from `path`.
    pub fn parse(text: &str, path: &Path) -> Result<Kubeconfig, KubeconfigError> {
        // The manifests' YAML reader (its tree and budget): no second deserializer for this.
        let root = crate::pod::manifest::parse_documents(text, &path.display().to_string())
            .map_err(|e| KubeconfigError::Syntax {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?
            .into_iter()
            .next()
            .unwrap_or(RawNode::Null);
        let invalid = |field: &str, message: String| KubeconfigError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &str| {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                dir.join(p)
            }
        };
        let clusters = named(&root, "clusters", "cluster");
        let users = named(&root, "users", "user");
        let contexts = named(&root, "contexts", "context");
        let current = str_of(&root, "current-context").unwrap_or_default();
        let (ctx_name, ctx) = if current.is_empty() {
            match contexts.as_slice() {
                [only] => (only.0.clone(), only.1),
                [] => (String::new(), &RawNode::Null),
                _ => {
                    return Err(invalid(
                        "current-context",
                        "is not set and the file has several contexts".into(),
                    ))
                }
            }
        } else {
            let c = contexts.iter().find(|c| c.0 == current).ok_or_else(|| {
                invalid("current-context", format!("no context named {current:?}"))
            })?;
            (c.0.clone(), c.1)
        };
        let ctx_cluster = str_of(ctx, "cluster").unwrap_or_default();
        let ctx_user = str_of(ctx, "user").unwrap_or_default();
        // Without contexts, a file with one cluster and at most one user is still usable.
        let pick = |list: &[String], wanted: &str, what: &str| -> Result<Option<usize>, _> {
            if wanted.is_empty() {
                return match list.len() {
                    0 => Ok(None),
                    1 => Ok(Some(0)),
                    _ => Err(invalid(
                        &format!("contexts[{ctx_name}].{what}"),
                        format!("is not set and the file has several {what}s"),
                    )),
                };
            }
            list.iter()
                .position(|n| n == wanted)
                .map(Some)
                .ok_or_else(|| {
                    invalid(
                        &format!("contexts[{ctx_name}].{what}"),
                        format!("no {what} named {wanted:?}"),
                    )
                })
        };
        let cluster_names: Vec<String> = clusters.iter().map(|c| c.0.clone()).collect();
        let user_names: Vec<String> = users.iter().map(|u| u.0.clone()).collect();
        let ci = pick(&cluster_names, &ctx_cluster, "cluster")?
            .ok_or_else(|| invalid("clusters", "no cluster to connect to".into()))?;
        let cluster = clusters[ci].1;
        let cf = format!("clusters[{}].cluster", cluster_names[ci]);
        let written = str_of(cluster, "server").unwrap_or_default();
        let server = written.trim_end_matches('/').to_string();
        if !server.starts_with("https://") {
            return Err(invalid(
                &format!("{cf}.server"),
                format!(
                    "{written:?} must be an https:// URL (the API server's credentials and the \
                     node's are never sent in clear)"
                ),
            ));
        }
        if cluster.get("tls-server-name").is_some() {
            return Err(invalid(
                &format!("{cf}.tls-server-name"),
                "is not supported: name the server in `server` as its certificate does".into(),
            ));
        }
        if cluster.get("proxy-url").is_some() {
            return Err(invalid(
                &format!("{cf}.proxy-url"),
                "is not supported".into(),
            ));
        }
        let data = |field: String, b64: &str| {
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .map_err(|e| invalid(&field, format!("not base64: {e}")))
        };
        let file = |field: String, p: &str| {
            let p = resolve(p);
            std::fs::read(&p).map_err(|e| invalid(&field, format!("{}: {e}", p.display())))
        };
        let ca_pem = match (
            str_of(cluster, "certificate-authority-data"),
            str_of(cluster, "certificate-authority"),
        ) {
            (Some(d), _) => Some(data(format!("{cf}.certificate-authority-data"), &d)?),
            (None, Some(p)) => Some(file(format!("{cf}.certificate-authority"), &p)?),
            (None, None) => None,
        };
        let mut kc = Kubeconfig {
            path: path.to_path_buf(),
            server,
            ca_pem,
            insecure_skip_tls_verify: matches!(
                cluster.get("insecure-skip-tls-verify").map(|v| &v.value),
                Some(RawNode::Bool(true))
            ),
            client_cert_pem: None,
            client_key_pem: None,
            token: None,
            token_file: None,
        };
        let Some(ui) = pick(&user_names, &ctx_user, "user")? else {
            return Ok(kc);
        };
        let user = users[ui].1;
        let uf = format!("users[{}].user", user_names[ui]);
        for (field, what) in [
            ("exec", "exec credential plugins"),
            ("auth-provider", "auth providers"),
            ("username", "basic authentication (removed from Kubernetes)"),
        ] {
            if user.get(field).is_some() {
                return Err(invalid(
                    &format!("{uf}.{field}"),
                    format!(
                        "podvisor does not support {what}: use a client certificate or a token"
                    ),
                ));
            }
        }
        kc.client_cert_pem = match (
            str_of(user, "client-certificate-data"),
            str_of(user, "client-certificate"),
        ) {
            (Some(d), _) => Some(data(format!("{uf}.client-certificate-data"), &d)?),
            (None, Some(p)) => Some(file(format!("{uf}.client-certificate"), &p)?),
            (None, None) => None,
        };
        kc.client_key_pem = match (str_of(user, "client-key-data"), str_of(user, "client-key")) {
            (Some(d), _) => Some(data(format!("{uf}.client-key-data"), &d)?),
            (None, Some(p)) => Some(file(format!("{uf}.client-key"), &p)?),
            (None, None) => None,
        };
        if kc.client_cert_pem.is_some() != kc.client_key_pem.is_some() {
            return Err(invalid(
                &uf,
                "a client certificate needs its key and a key its certificate".into(),
            ));
        }
        kc.token = str_of(user, "token").filter(|t| !t.is_empty());
        kc.token_file = str_of(user, "tokenFile").as_deref().map(resolve);
        if let Some(p) = &kc.token_file {
            std::fs::read_to_string(p).map_err(|e| {
                invalid(&format!("{uf}.tokenFile"), format!("{}: {e}", p.display()))
            })?;
        }
        Ok(kc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Kubeconfig, String> {
        Kubeconfig::parse(text, Path::new("/nonexistent/kubeconfig")).map_err(|e| e.to_string())
    }

    #[test]
    fn current_context_picks_cluster_and_user() {
        let kc = parse(
            "apiVersion: v1\nkind: Config\ncurrent-context: b\n\
             clusters:\n- name: one\n  cluster: {server: 'https://one:6443'}\n\
             - name: two\n  cluster: {server: 'https://two:6443/', certificate-authority-data: 'UEVN', insecure-skip-tls-verify: false}\n\
             users:\n- name: u1\n  user: {token: abc}\n- name: u2\n  user: {client-certificate-data: 'Q0VSVA==', client-key-data: 'S0VZ'}\n\
             contexts:\n- name: a\n  context: {cluster: one, user: u1}\n- name: b\n  context: {cluster: two, user: u2, namespace: x}\n\
             preferences: {}\n",
        )
        .expect("valid");
        assert_eq!(kc.server, "https://two:6443");
        assert_eq!(kc.ca_pem.as_deref(), Some(&b"PEM"[..]));
        assert_eq!(kc.client_cert_pem.as_deref(), Some(&b"CERT"[..]));
        assert_eq!(kc.client_key_pem.as_deref(), Some(&b"KEY"[..]));
        assert_eq!(kc.token, None);
    }

    #[test]
    fn refusals_name_the_field() {
        let cases = [
            ("current-context: nope\nclusters: []\ncontexts: []\n", "current-context"),
            (
                "clusters:\n- name: c\n  cluster: {server: 'http://x:8080'}\n",
                "clusters[c].cluster.server",
            ),
            (
                "clusters:\n- name: c\n  cluster: {server: 'https://x'}\nusers:\n- name: u\n  user: {exec: {command: aws}}\n",
                "users[u].user.exec",
            ),
            (
                "clusters:\n- name: c\n  cluster: {server: 'https://x', certificate-authority: ca.crt}\n",
                "/nonexistent/ca.crt",
            ),
            (
                "clusters:\n- name: c\n  cluster: {server: 'https://x'}\nusers:\n- name: u\n  user: {client-certificate-data: 'QQ=='}\n",
                "certificate needs its key",
            ),
            (
                "clusters:\n- name: c\n  cluster: {server: 'https://x', certificate-authority-data: '!!'}\n",
                "not base64",
            ),
        ];
        for (text, want) in cases {
            let e = parse(text).expect_err(text);
            assert!(e.contains(want), "{text}: {e}");
            assert!(e.starts_with("kubeconfig /nonexistent/kubeconfig"), "{e}");
        }
    }
}
