//! Registry authentication: `WWW-Authenticate` challenges, bearer tokens from a token realm
//! (cached per host and scope by the [`Client`]) and Basic credentials.

use std::collections::HashMap;

use serde::Deserialize;

use crate::httpclient::{read_body, HttpError, Limits};
use crate::images::registry::{base64_encode, Credentials, Endpoint, EndpointError, Scheme};

use super::{retryable, Client, RegistryError, What, MAX_TOKEN};

/// Why a bearer token could not be had from a registry's token realm.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("bad realm: {0}")]
    BadRealm(EndpointError),
    #[error("bad realm: not an http(s) url")]
    RealmNotHttp,
    #[error("refusing a plain http token realm for an https registry")]
    InsecureRealm,
    #[error("{source} (after {attempts} attempts)")]
    Http { source: HttpError, attempts: u32 },
    #[error("HTTP {0}")]
    Status(u16),
    #[error("response is not a token: {0}")]
    Json(String),
    #[error("response holds no token")]
    NoToken,
}

#[derive(Deserialize)]
struct TokenResponse {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// A parsed `WWW-Authenticate` challenge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Challenge {
    Basic,
    Bearer {
        realm: String,
        service: Option<String>,
        scope: Option<String>,
    },
}

/// Parses `Bearer realm="..",service="..",scope=".."` or `Basic realm=".."`.
pub fn parse_challenge(h: &str) -> Option<Challenge> {
    let h = h.trim();
    let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
    if scheme.eq_ignore_ascii_case("basic") {
        return Some(Challenge::Basic);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let mut params: HashMap<String, String> = HashMap::new();
    let mut s = rest.trim();
    while !s.is_empty() {
        let (key, after) = s.split_once('=')?;
        let key = key.trim().to_ascii_lowercase();
        let after = after.trim_start();
        let (value, rest) = if let Some(q) = after.strip_prefix('"') {
            let end = q.find('"')?;
            (&q[..end], &q[end + 1..])
        } else {
            match after.find(',') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, ""),
            }
        };
        params.insert(key, value.to_string());
        s = rest.trim_start().trim_start_matches(',').trim_start();
    }
    Some(Challenge::Bearer {
        realm: params.remove("realm")?,
        service: params.remove("service"),
        scope: params.remove("scope"),
    })
}

impl Client<'_> {
    /// Answers a 401 challenge: the Authorization header value to use from now on.
    pub(super) fn authorize(
        &self,
        ep: &Endpoint,
        challenge: Option<Challenge>,
        scope: &str,
        what: &What,
    ) -> Result<String, RegistryError> {
        let creds = self.cfg.credentials(&ep.host);
        let unauthorized = || RegistryError::Unauthorized {
            reference: self.reference.clone(),
            registry: ep.to_string(),
            what: what.clone(),
            status: 401,
        };
        match challenge {
            Some(Challenge::Basic) => creds.map(basic).ok_or_else(unauthorized),
            Some(Challenge::Bearer {
                realm,
                service,
                scope: challenge_scope,
            }) => {
                let token = self.fetch_token(
                    ep,
                    &realm,
                    service.as_deref(),
                    challenge_scope.as_deref().unwrap_or(scope),
                    creds,
                )?;
                Ok(format!("Bearer {token}"))
            }
            None => Err(unauthorized()),
        }
    }

    fn fetch_token(
        &self,
        ep: &Endpoint,
        realm: &str,
        service: Option<&str>,
        scope: &str,
        creds: Option<&Credentials>,
    ) -> Result<String, RegistryError> {
        let token_err = |source: TokenError| RegistryError::Token {
            reference: self.reference.clone(),
            realm: realm.to_string(),
            source,
        };
        let realm_ep = Endpoint::parse(realm).map_err(|e| token_err(TokenError::BadRealm(e)))?;
        if realm_ep.scheme == Scheme::Http && ep.scheme == Scheme::Https {
            return Err(token_err(TokenError::InsecureRealm));
        }
        if !realm.starts_with("http://") && !realm.starts_with("https://") {
            return Err(token_err(TokenError::RealmNotHttp));
        }
        let limits = Limits {
            max_body: MAX_TOKEN,
            ..self.limits
        };
        let agent = self.agent(&realm_ep.host)?;
        let mut attempt = 0u32;
        loop {
            self.check_cancel()?;
            attempt += 1;
            let mut req = agent.get(realm).query("scope", scope);
            if let Some(s) = service {
                req = req.query("service", s);
            }
            if let Some(c) = creds {
                req = req.header("Authorization", basic(c));
            }
            let body = match limits.request(req).call() {
                Ok(mut resp) => {
                    let status = resp.status().as_u16();
                    if matches!(status, 429 | 500 | 502 | 503 | 504)
                        && attempt < self.retry.attempts
                    {
                        self.sleep(attempt, None)?;
                        continue;
                    }
                    if status != 200 {
                        return Err(token_err(TokenError::Status(status)));
                    }
                    read_body(resp.body_mut(), &limits)
                }
                Err(e) => Err(limits.error(e)),
            };
            let body = match body {
                Ok(body) => body,
                Err(e) if retryable(&e) && attempt < self.retry.attempts => {
                    log::debug!("token from {realm}: {e}; retrying");
                    self.sleep(attempt, None)?;
                    continue;
                }
                Err(source) => {
                    return Err(token_err(TokenError::Http {
                        source,
                        attempts: attempt,
                    }))
                }
            };
            let t: TokenResponse = serde_json::from_slice(&body)
                .map_err(|e| token_err(TokenError::Json(e.to_string())))?;
            return t
                .token
                .or(t.access_token)
                .filter(|t| !t.is_empty())
                .ok_or_else(|| token_err(TokenError::NoToken));
        }
    }
}

fn basic(c: &Credentials) -> String {
    format!(
        "Basic {}",
        base64_encode(format!("{}:{}", c.username, c.password).as_bytes())
    )
}
