//! cli::apply: `podvisor apply -f FILE --server https://node:10250` and `podvisor delete`,
//! kubectl-like clients of a node's push source (`PUT`/`DELETE
//! /api/v1/namespaces/{namespace}/pods/{name}` on the secure port), authenticated with a
//! bearer token or a client certificate, verifying the node against the system CA bundle plus
//! `--certificate-authority` (the node's self-signed `<root-dir>/pki/kubelet.crt` works).
//!
//! A manifest holds one Pod (as a file of the manifest directory). Its namespace is the
//! manifest's, else `--namespace`, else `default`; they must agree, as kubectl requires. The
//! node validates it as it validates its files: refusals come back as kubectl prints them,
//! each field with the manifest's `FILE:line:column`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use ureq::Agent;

use crate::httpclient::tls::{ClientTls, TlsFileError};
use crate::httpclient::{read_body, HttpError, Limits};
use crate::pod::manifest::{manifest_text, parse_documents, read_manifest_file, RawNode};
use crate::sources::api::{valid_name, MAX_PUSH_BYTES};

/// How a client reaches and proves itself to a node (kubectl's flag names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// `https://node:10250`.
    pub server: String,
    pub token: Option<String>,
    pub token_file: Option<PathBuf>,
    pub client_certificate: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    pub certificate_authority: Option<PathBuf>,
    pub insecure_skip_tls_verify: bool,
}

/// Errors of `apply` and `delete`, each naming the file, flag or server answer.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    #[error("{0}")]
    Manifest(#[from] crate::pod::manifest::ManifestError),
    #[error("{file}: {message}")]
    File { file: String, message: String },
    #[error("{flag}: {message}")]
    Flag { flag: &'static str, message: String },
    #[error(transparent)]
    Tls(#[from] TlsFileError),
    #[error("{server}: {source}")]
    Http { server: String, source: HttpError },
    /// What the node answered, as kubectl prints it (`Error from server (Reason): ...`).
    #[error("{0}")]
    Server(String),
    #[error("cannot write the output: {0}")]
    Output(std::io::Error),
}

/// Which pod a manifest defines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub namespace: String,
    pub name: String,
}

/// Reads `file` and finds its pod's namespace and name (`namespace_flag` when the manifest
/// has none); the bytes are sent as they are.
pub fn read_target(
    file: &Path,
    namespace_flag: Option<&str>,
) -> Result<(Vec<u8>, Target), ApplyError> {
    let shown = file.display().to_string();
    let data = read_manifest_file(file)?;
    if data.len() > MAX_PUSH_BYTES {
        return Err(ApplyError::File {
            file: shown,
            message: format!(
                "{} bytes is over the node's {MAX_PUSH_BYTES}-byte limit for a pushed pod",
                data.len()
            ),
        });
    }
    let docs = parse_documents(manifest_text(&data, &shown)?, &shown)?;
    let doc = match docs.as_slice() {
        [d] => d,
        _ => {
            return Err(ApplyError::File {
                file: shown,
                message: format!("holds {} YAML documents: push one Pod per file", docs.len()),
            })
        }
    };
    let meta = doc.get("metadata").map(|m| &m.value);
    let field = |k: &str| match meta.and_then(|m| m.get(k)).map(|v| &v.value) {
        Some(RawNode::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let Some(name) = field("name") else {
        return Err(ApplyError::File {
            file: shown,
            message: "metadata.name is required".into(),
        });
    };
    let namespace = match (field("namespace"), namespace_flag) {
        (Some(m), Some(f)) if m != f => {
            return Err(ApplyError::File {
                file: shown,
                message: format!(
                    "the namespace from the provided object {m:?} does not match the namespace \
                     {f:?}: pass --namespace={m}"
                ),
            })
        }
        (Some(m), _) => m,
        (None, Some(f)) => f.to_string(),
        (None, None) => "default".to_string(),
    };
    if !valid_name(&namespace, true) || !valid_name(&name, false) {
        return Err(ApplyError::File {
            file: shown,
            message: format!("{namespace}/{name}: not a valid namespace and pod name"),
        });
    }
    Ok((data, Target { namespace, name }))
}

const LIMITS: Limits = Limits {
    max_body: 16 * 1024 * 1024,
    max_head: 64 * 1024,
    max_redirects: 0,
    connect: Duration::from_secs(10),
    head: Duration::from_secs(40),
    body: Duration::from_secs(30),
    total: Duration::from_secs(60),
};

impl Connection {
    fn agent(&self) -> Result<Agent, ApplyError> {
        if !(self.server.starts_with("https://") || self.server.starts_with("http://")) {
            return Err(ApplyError::Flag {
                flag: "--server",
                message: format!("{:?}: expected https://HOST:PORT", self.server),
            });
        }
        let tls = ClientTls {
            ca_file: self.certificate_authority.clone(),
            client_cert: self.client_certificate.clone(),
            client_key: self.client_key.clone(),
            names: [
                "--certificate-authority",
                "--client-certificate",
                "--client-key",
            ],
        };
        if tls.client_cert.is_some() != tls.client_key.is_some() {
            return Err(ApplyError::Flag {
                flag: "--client-certificate",
                message: "--client-certificate and --client-key go together".into(),
            });
        }
        let mut config = tls.config()?;
        if self.insecure_skip_tls_verify {
            config = ureq::tls::TlsConfig::builder()
                .client_cert(config.client_cert().cloned())
                .disable_verification(true)
                .build();
        }
        Ok(LIMITS.agent_config().tls_config(config).build().new_agent())
    }

    fn bearer(&self) -> Result<Option<String>, ApplyError> {
        if let Some(t) = &self.token {
            return Ok(Some(t.clone()));
        }
        match &self.token_file {
            None => Ok(None),
            Some(f) => std::fs::read_to_string(f)
                .map(|t| Some(t.trim().to_string()))
                .map_err(|e| ApplyError::Flag {
                    flag: "--token-file",
                    message: format!("{}: {e}", f.display()),
                }),
        }
    }

    fn url(&self, t: &Target) -> String {
        format!(
            "{}/api/v1/namespaces/{}/pods/{}",
            self.server.trim_end_matches('/'),
            t.namespace,
            t.name
        )
    }

    /// Sends one request: (status, `X-Podvisor-Outcome`, body).
    fn send(
        &self,
        method: &str,
        t: &Target,
        body: Option<(&str, &[u8])>,
    ) -> Result<(u16, String, Vec<u8>), ApplyError> {
        let agent = self.agent()?;
        let url = self.url(t);
        let http = |e: ureq::Error| ApplyError::Http {
            server: self.server.clone(),
            source: LIMITS.error(e),
        };
        let mut headers = vec![("Accept", "application/json".to_string())];
        if let Some(tok) = self.bearer()? {
            headers.push(("Authorization", format!("Bearer {tok}")));
        }
        let mut resp = match (method, body) {
            ("PUT", Some((ct, data))) => {
                let mut r = agent.put(&url).header("Content-Type", ct);
                for (k, v) in &headers {
                    r = r.header(*k, v);
                }
                r.send(data).map_err(http)?
            }
            _ => {
                let mut r = agent.delete(&url);
                for (k, v) in &headers {
                    r = r.header(*k, v);
                }
                r.call().map_err(http)?
            }
        };
        let status = resp.status().as_u16();
        let outcome = resp
            .headers()
            .get("x-podvisor-outcome")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = read_body(resp.body_mut(), &LIMITS).map_err(|source| ApplyError::Http {
            server: self.server.clone(),
            source,
        })?;
        Ok((status, outcome, body))
    }
}

/// A refusal as kubectl prints it, causes located in `file`.
pub fn server_error(status: u16, body: &[u8], file: Option<&str>) -> String {
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        // 401/403 come as the kubelet's plain text.
        Err(_) => {
            let text = String::from_utf8_lossy(body).trim().to_string();
            return format!("error: the server answered {status}: {text}");
        }
    };
    let reason = v["reason"].as_str().unwrap_or("Unknown");
    let message = v["message"].as_str().unwrap_or("");
    let causes = v["details"]["causes"].as_array();
    match (causes, file) {
        (Some(causes), Some(file)) if !causes.is_empty() => {
            let mut out = format!("Error from server ({reason}): the node refused {file}:");
            for c in causes {
                let msg = c["message"].as_str().unwrap_or("");
                let field = c["field"].as_str().unwrap_or("");
                // The node puts `line:column: ` in front of the message.
                let (pos, msg) = match msg.split_once(": ") {
                    Some((p, m)) if p.split(':').all(|n| n.parse::<u64>().is_ok()) => {
                        (format!(":{p}"), m)
                    }
                    _ => (String::new(), msg),
                };
                out.push_str(&format!("\n{file}{pos}: {field}: {msg}"));
            }
            out
        }
        _ => format!("Error from server ({reason}): {message}"),
    }
}

/// `podvisor apply -f FILE`: prints `pod/NAME created|configured|unchanged`.
pub fn apply(
    conn: &Connection,
    file: &Path,
    namespace: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), ApplyError> {
    let (data, t) = read_target(file, namespace)?;
    let json = data
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| *b == b'{');
    let ct = if json {
        "application/json"
    } else {
        "application/yaml"
    };
    let (status, outcome, body) = conn.send("PUT", &t, Some((ct, &data)))?;
    if !(200..300).contains(&status) {
        return Err(ApplyError::Server(server_error(
            status,
            &body,
            Some(&file.display().to_string()),
        )));
    }
    let what = match (status, outcome.as_str()) {
        (_, "unchanged") => "unchanged",
        (201, _) | (_, "created") => "created",
        _ => "configured",
    };
    writeln!(out, "pod/{} {what}", t.name).map_err(ApplyError::Output)
}

/// `podvisor delete`: prints `pod "NAME" deleted`.
pub fn delete(conn: &Connection, t: &Target, out: &mut dyn Write) -> Result<(), ApplyError> {
    let (status, _, body) = conn.send("DELETE", t, None)?;
    if !(200..300).contains(&status) {
        return Err(ApplyError::Server(server_error(status, &body, None)));
    }
    writeln!(out, "pod \"{}\" deleted", t.name).map_err(ApplyError::Output)
}

/// `podvisor delete`: the pods of the applied manifest `file`, else those `names` names.
pub fn delete_pods(
    conn: &Connection,
    names: &[String],
    file: Option<&Path>,
    namespace: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), ApplyError> {
    let targets = match file {
        Some(f) => vec![read_target(f, namespace)?.1],
        None => delete_targets(names, namespace)?,
    };
    for t in &targets {
        delete(conn, t, out)?;
    }
    Ok(())
}

/// The pods `delete` names: `pod NAME...`, `pod/NAME...`, or bare names.
pub fn delete_targets(args: &[String], namespace: Option<&str>) -> Result<Vec<Target>, ApplyError> {
    let ns = namespace.unwrap_or("default").to_string();
    let mut names: Vec<&str> = Vec::new();
    let mut rest = args;
    if let Some(first) = args.first() {
        if ["pod", "pods", "po"].contains(&first.as_str()) {
            rest = &args[1..];
        }
    }
    for a in rest {
        let n = match a.split_once('/') {
            Some((kind, n)) if ["pod", "pods", "po"].contains(&kind) => n,
            Some(_) => {
                return Err(ApplyError::Flag {
                    flag: "NAME",
                    message: format!("{a:?}: only pods can be deleted"),
                })
            }
            None => a.as_str(),
        };
        names.push(n);
    }
    if names.is_empty() {
        return Err(ApplyError::Flag {
            flag: "NAME",
            message: "name a pod (`podvisor delete pod NAME`) or a file (-f FILE)".into(),
        });
    }
    names
        .into_iter()
        .map(|n| {
            if valid_name(n, false) && valid_name(&ns, true) {
                Ok(Target {
                    namespace: ns.clone(),
                    name: n.to_string(),
                })
            } else {
                Err(ApplyError::Flag {
                    flag: "NAME",
                    message: format!("{ns}/{n}: not a valid namespace and pod name"),
                })
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_from_manifests_and_arguments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let f = dir.path().join("web.yaml");
        std::fs::write(
            &f,
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec: {}\n",
        )
        .expect("w");
        let (_, t) = read_target(&f, None).expect("target");
        assert_eq!(
            t,
            Target {
                namespace: "default".into(),
                name: "web".into()
            }
        );
        assert_eq!(
            read_target(&f, Some("edge")).expect("ns").1.namespace,
            "edge"
        );
        std::fs::write(
            &f,
            "metadata:\n  name: web\n  namespace: a\n---\nmetadata:\n  name: b\n",
        )
        .expect("w");
        assert!(read_target(&f, None)
            .expect_err("two")
            .to_string()
            .contains("2 YAML documents"));
        std::fs::write(&f, "metadata:\n  name: web\n  namespace: a\n").expect("w");
        assert!(read_target(&f, Some("b"))
            .expect_err("mismatch")
            .to_string()
            .contains("--namespace=a"));
        std::fs::write(&f, "metadata: {}\n").expect("w");
        assert!(read_target(&f, None).is_err());
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let names = |ts: Vec<Target>| ts.into_iter().map(|t| t.name).collect::<Vec<_>>();
        assert_eq!(
            names(delete_targets(&args(&["pod", "a", "b"]), None).expect("pods")),
            ["a", "b"]
        );
        assert_eq!(
            names(delete_targets(&args(&["pod/a"]), Some("x")).expect("slash")),
            ["a"]
        );
        assert!(delete_targets(&args(&["deploy/a"]), None).is_err());
        assert!(delete_targets(&args(&["pod"]), None).is_err());
        assert!(delete_targets(&args(&["Bad_Name"]), None).is_err());
    }

    #[test]
    fn refusals_print_like_kubectl_with_file_positions() {
        let body = br#"{"kind":"Status","reason":"Invalid","message":"Pod \"web\" is invalid",
            "details":{"causes":[{"field":"spec.containers[0].image","message":"7:5: required"}]}}"#;
        assert_eq!(
            server_error(422, body, Some("web.yaml")),
            "Error from server (Invalid): the node refused web.yaml:\nweb.yaml:7:5: spec.containers[0].image: required"
        );
        let nf = br#"{"kind":"Status","reason":"NotFound","message":"pods \"x\" not found"}"#;
        assert_eq!(
            server_error(404, nf, None),
            "Error from server (NotFound): pods \"x\" not found"
        );
        assert_eq!(
            server_error(401, b"Unauthorized\n", None),
            "error: the server answered 401: Unauthorized"
        );
    }
}
