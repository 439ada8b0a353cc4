//! nodeapi::auth: who a request on the secure port is, and whether they may do what it asks —
//! the kubelet's filter (`pkg/kubelet/server/auth.go`) without an API server.
//!
//! Authentication, in the kubelet's order: a client certificate verified against
//! `authentication.x509.clientCAFile` (user = subject CN, groups = subject O), then a bearer
//! token from the token file (`--token-auth-file`), then, only with
//! `authentication.anonymous.enabled`, `system:anonymous` in `system:unauthenticated`.
//! Anything else is 401 `Unauthorized`.
//!
//! The token file has the kube-apiserver `--token-auth-file` shape k3s and static-token
//! setups use: one `token,user,uid,"group1,group2"` line per token (uid and groups optional,
//! `#` comments and blank lines skipped). Tokens are kept as SHA-256 digests.
//!
//! Authorization: attributes as the kubelet derives them (verb from the method, resource
//! `nodes`, subresource `stats`, `metrics`, `log` or `proxy` from the path; podvisor's push
//! API under `/api/` is resource `pods`, named `pods` in rule files), then `AlwaysAllow` or a
//! rule file ([`Rules`]); a refusal is 403 `Forbidden (user=..., verb=..., resource=nodes,
//! subresource=...)`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The user anonymous requests run as.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of anonymous requests.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group every authenticated user is in.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";

/// Errors loading the token or rule files, each naming the file (and line).
#[derive(Debug, thiserror::Error)]
pub enum AuthFileError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Rules { path: PathBuf, message: String },
}

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
}

/// The bearer tokens of the token file, by SHA-256 digest.
#[derive(Debug, Clone, Default)]
pub struct TokenFile {
    users: HashMap<[u8; 32], UserInfo>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl TokenFile {
    pub fn load(path: &Path) -> Result<TokenFile, AuthFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        TokenFile::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<TokenFile, AuthFileError> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: &str| AuthFileError::Line {
                path: path.to_owned(),
                line: i + 1,
                message: message.into(),
            };
            let mut fields = line.splitn(4, ',');
            let token = fields.next().unwrap_or("").trim();
            let user = fields.next().unwrap_or("").trim();
            let _uid = fields.next();
            let groups = fields.next().unwrap_or("").trim().trim_matches('"');
            if token.is_empty() || user.is_empty() {
                return Err(err("expected token,user[,uid[,\"group1,group2\"]]"));
            }
            let mut groups: Vec<String> = groups
                .split(',')
                .map(str::trim)
                .filter(|g| !g.is_empty())
                .map(String::from)
                .collect();
            groups.push(AUTHENTICATED_GROUP.into());
            let info = UserInfo {
                name: user.into(),
                groups,
            };
            if users.insert(digest(token), info).is_some() {
                return Err(err("duplicate token"));
            }
        }
        Ok(TokenFile { users })
    }

    fn user(&self, token: &str) -> Option<&UserInfo> {
        self.users.get(&digest(token))
    }
}

/// How requests are authenticated.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    /// Whether a verified client certificate is accepted (`clientCAFile` set).
    pub x509: bool,
    pub tokens: Option<TokenFile>,
    pub anonymous: bool,
}

/// What the client presented.
#[derive(Debug, Clone, Default)]
pub struct Credentials<'a> {
    /// Subject CN and O of a client certificate the TLS layer verified.
    pub cert_subject: Option<(String, Vec<String>)>,
    /// The `Authorization` header.
    pub authorization: Option<&'a str>,
}

impl Authenticator {
    /// The user of a request, or `None` (401).
    pub fn authenticate(&self, c: &Credentials) -> Option<UserInfo> {
        if let (true, Some((cn, orgs))) = (self.x509, &c.cert_subject) {
            if !cn.is_empty() {
                let mut groups = orgs.clone();
                groups.push(AUTHENTICATED_GROUP.into());
                return Some(UserInfo {
                    name: cn.clone(),
                    groups,
                });
            }
        }
        if let Some(h) = c.authorization {
            // A bearer token that is wrong is refused even with anonymous access on, as the
            // API server's union authenticator does.
            let token = h.strip_prefix("Bearer ").map(str::trim)?;
            return self.tokens.as_ref()?.user(token).cloned();
        }
        self.anonymous.then(|| UserInfo {
            name: ANONYMOUS_USER.into(),
            groups: vec![UNAUTHENTICATED_GROUP.into()],
        })
    }
}

/// The kubelet's authorization attributes of a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: &'static str,
    /// `stats`, `metrics`, `log`, `proxy`, or `pods` (the push API: resource `pods`).
    pub subresource: &'static str,
}

/// Verb and subresource as the kubelet derives them from a request.
pub fn attributes(method: &str, path: &str) -> Attributes {
    let verb = match method {
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "get",
    };
    let under = |p: &str| path == p || path.starts_with(&format!("{p}/"));
    let subresource = if under("/stats") {
        "stats"
    } else if under("/metrics") {
        "metrics"
    } else if under("/logs") {
        "log"
    } else if under("/api") {
        "pods"
    } else {
        "proxy"
    };
    Attributes { verb, subresource }
}

/// One rule of the rule file: who (users or groups, `*` for any authenticated user) may use
/// which verbs on which subresources (`*` for all).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub users: Vec<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    pub verbs: Vec<String>,
    pub subresources: Vec<String>,
}

/// The rule file (`--authorization-rules-file`): `rules:` as a YAML or JSON list of [`Rule`].
/// A request is allowed when one rule matches its user, verb and subresource.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    pub rules: Vec<Rule>,
}

impl Rules {
    pub fn load(path: &Path) -> Result<Rules, AuthFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| AuthFileError::Read {
            path: path.to_owned(),
            source,
        })?;
        Rules::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<Rules, AuthFileError> {
        let rules: Rules = serde_saphyr::from_str(text).map_err(|e| AuthFileError::Rules {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        for (i, r) in rules.rules.iter().enumerate() {
            let bad = |message: String| AuthFileError::Rules {
                path: path.to_owned(),
                message: format!("rules[{i}]: {message}"),
            };
            if r.users.is_empty() && r.groups.is_empty() {
                return Err(bad("names no users and no groups".into()));
            }
            for v in &r.verbs {
                if !["*", "get", "create", "update", "patch", "delete"].contains(&v.as_str()) {
                    return Err(bad(format!(
                        "unknown verb {v:?} (get, create, update, patch, delete or *)"
                    )));
                }
            }
            for s in &r.subresources {
                if !["*", "stats", "metrics", "log", "proxy", "pods"].contains(&s.as_str()) {
                    return Err(bad(format!(
                        "unknown subresource {s:?} (stats, metrics, log, proxy, pods or *)"
                    )));
                }
            }
        }
        Ok(rules)
    }

    fn allows(&self, user: &UserInfo, a: &Attributes) -> bool {
        let anonymous = user.name == ANONYMOUS_USER;
        self.rules.iter().any(|r| {
            let who = r
                .users
                .iter()
                .any(|u| u == &user.name || (u == "*" && !anonymous))
                || r.groups.iter().any(|g| user.groups.contains(g));
            let any = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
            who && any(&r.verbs, a.verb) && any(&r.subresources, a.subresource)
        })
    }
}

/// How authenticated requests are authorized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorizer {
    AlwaysAllow,
    Rules(Rules),
}

impl Authorizer {
    pub fn allows(&self, user: &UserInfo, a: &Attributes) -> bool {
        match self {
            Authorizer::AlwaysAllow => true,
            Authorizer::Rules(r) => r.allows(user, a),
        }
    }
}

/// The kubelet's 403 message (`resource=pods` for the push API).
pub fn forbidden_message(user: &UserInfo, a: &Attributes) -> String {
    if a.subresource == "pods" {
        return format!(
            "Forbidden (user={}, verb={}, resource=pods)",
            user.name, a.verb
        );
    }
    format!(
        "Forbidden (user={}, verb={}, resource=nodes, subresource={})",
        user.name, a.verb, a.subresource
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens() -> TokenFile {
        TokenFile::parse(
            "# comment\n\nsecret1,prometheus,uid1,\"monitoring,ops\"\nsecret2,fleet\n",
            Path::new("tokens.csv"),
        )
        .expect("tokens")
    }

    #[test]
    fn token_file_lines() {
        let t = tokens();
        let u = t.user("secret1").expect("user");
        assert_eq!(u.name, "prometheus");
        assert_eq!(u.groups, ["monitoring", "ops", AUTHENTICATED_GROUP]);
        assert_eq!(t.user("secret2").expect("fleet").name, "fleet");
        assert!(t.user("nope").is_none());
        for (bad, want) in [
            ("x\n", "tokens.csv:1: expected token,user"),
            ("a,b\n,c\n", "tokens.csv:2: expected"),
            ("a,b\na,c\n", "tokens.csv:2: duplicate token"),
        ] {
            let e = TokenFile::parse(bad, Path::new("tokens.csv")).expect_err(bad);
            assert!(e.to_string().starts_with(want), "{e}");
        }
    }

    #[test]
    fn authentication_order_and_refusals() {
        let a = Authenticator {
            x509: true,
            tokens: Some(tokens()),
            anonymous: false,
        };
        let cert = Some(("node-admin".to_string(), vec!["system:masters".to_string()]));
        let who = |c: Credentials| a.authenticate(&c).map(|u| u.name);
        assert_eq!(
            who(Credentials {
                cert_subject: cert.clone(),
                authorization: Some("Bearer secret2"),
            }),
            Some("node-admin".into())
        );
        assert_eq!(
            who(Credentials {
                cert_subject: None,
                authorization: Some("Bearer secret2"),
            }),
            Some("fleet".into())
        );
        for h in ["Bearer wrong", "Basic abc", "Bearer "] {
            assert_eq!(
                who(Credentials {
                    cert_subject: None,
                    authorization: Some(h),
                }),
                None,
                "{h}"
            );
        }
        assert_eq!(who(Credentials::default()), None);
        let anon = Authenticator {
            anonymous: true,
            ..Default::default()
        };
        let u = anon.authenticate(&Credentials::default()).expect("anon");
        assert_eq!(u.name, ANONYMOUS_USER);
        // A bad token is not downgraded to anonymous.
        assert!(anon
            .authenticate(&Credentials {
                cert_subject: None,
                authorization: Some("Bearer x"),
            })
            .is_none());
        // Without a client CA, a certificate identifies nobody.
        assert!(Authenticator::default()
            .authenticate(&Credentials {
                cert_subject: cert,
                authorization: None,
            })
            .is_none());
    }

    #[test]
    fn attributes_as_the_kubelet() {
        for (method, path, verb, sub) in [
            ("GET", "/stats/summary", "get", "stats"),
            ("GET", "/stats", "get", "stats"),
            ("GET", "/statsx", "get", "proxy"),
            ("GET", "/metrics", "get", "metrics"),
            ("GET", "/metrics/cadvisor", "get", "metrics"),
            ("HEAD", "/logs/syslog", "get", "log"),
            ("GET", "/pods", "get", "proxy"),
            ("GET", "/healthz", "get", "proxy"),
            ("POST", "/run/x", "create", "proxy"),
            ("PUT", "/a", "update", "proxy"),
            ("PATCH", "/a", "patch", "proxy"),
            ("DELETE", "/a", "delete", "proxy"),
            (
                "PUT",
                "/api/v1/namespaces/default/pods/web",
                "update",
                "pods",
            ),
            ("GET", "/api/v1/pods", "get", "pods"),
            ("GET", "/apis", "get", "proxy"),
            ("GET", "/containerLogs/default/web/main", "get", "proxy"),
        ] {
            assert_eq!(
                attributes(method, path),
                Attributes {
                    verb,
                    subresource: sub
                },
                "{method} {path}"
            );
        }
    }

    #[test]
    fn rules_match_user_group_verb_and_subresource() {
        let rules = Rules::parse(
            "rules:\n- users: [prometheus]\n  verbs: [get]\n  subresources: [metrics, stats]\n\
             - groups: [ops]\n  verbs: ['*']\n  subresources: ['*']\n\
             - users: ['*']\n  verbs: [get]\n  subresources: [proxy]\n",
            Path::new("rules.yaml"),
        )
        .expect("rules");
        let z = Authorizer::Rules(rules);
        let user = |name: &str, groups: &[&str]| UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
        };
        let prom = user("prometheus", &[AUTHENTICATED_GROUP]);
        assert!(z.allows(&prom, &attributes("GET", "/metrics/cadvisor")));
        assert!(z.allows(&prom, &attributes("GET", "/pods")));
        assert!(!z.allows(&prom, &attributes("GET", "/logs/x")));
        assert!(!z.allows(&prom, &attributes("DELETE", "/metrics")));
        let op = user("alice", &["ops", AUTHENTICATED_GROUP]);
        assert!(z.allows(&op, &attributes("DELETE", "/logs/x")));
        let anon = user(ANONYMOUS_USER, &[UNAUTHENTICATED_GROUP]);
        assert!(!z.allows(&anon, &attributes("GET", "/pods")));
        assert_eq!(
            forbidden_message(&prom, &attributes("GET", "/logs/x")),
            "Forbidden (user=prometheus, verb=get, resource=nodes, subresource=log)"
        );
        for (bad, want) in [
            (
                "rules:\n- verbs: [get]\n  subresources: [stats]\n",
                "names no users",
            ),
            (
                "rules:\n- users: [a]\n  verbs: [list]\n  subresources: [stats]\n",
                "unknown verb \"list\"",
            ),
            (
                "rules:\n- users: [a]\n  verbs: [get]\n  subresources: [exec]\n",
                "unknown subresource",
            ),
            ("rules:\n- users: [a]\n  verb: [get]\n", "rules.yaml"),
        ] {
            let e = Rules::parse(bad, Path::new("rules.yaml")).expect_err(bad);
            assert!(e.to_string().contains(want), "{e}");
        }
    }
}
