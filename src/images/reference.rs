//! Image reference parsing and normalization, following Docker's `distribution/reference`
//! rules as the kubelet applies them: `busybox` -> `docker.io/library/busybox:latest`,
//! explicit registries (`localhost:5000/x`, `quay.io/a/b`) kept, tags and `sha256` digests
//! validated and kept.

use std::fmt;

use super::digest::Digest;

/// The default registry of unqualified names.
pub const DEFAULT_REGISTRY: &str = "docker.io";
/// The namespace of single-component names on the default registry.
const OFFICIAL_NAMESPACE: &str = "library";
/// The tag given to a name that has neither tag nor digest.
pub const DEFAULT_TAG: &str = "latest";
/// Longest allowed name (registry + repository), as in Docker.
const MAX_NAME_LEN: usize = 255;
/// Longest allowed tag.
const MAX_TAG_LEN: usize = 128;

/// Why a reference string was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReferenceError {
    #[error("invalid image reference {reference:?}: empty reference")]
    Empty { reference: String },
    #[error("invalid image reference {reference:?}: name longer than {MAX_NAME_LEN} characters")]
    NameTooLong { reference: String },
    #[error("invalid image reference {reference:?}: invalid registry {registry:?}")]
    InvalidRegistry { reference: String, registry: String },
    #[error(
        "invalid image reference {reference:?}: invalid repository path component {component:?} \
         (lowercase letters, digits and single separators . _ __ - only)"
    )]
    InvalidComponent {
        reference: String,
        component: String,
    },
    #[error("invalid image reference {reference:?}: invalid tag {tag:?}")]
    InvalidTag { reference: String, tag: String },
    #[error(
        "invalid image reference {reference:?}: invalid digest {digest:?} (want sha256:<64 hex>)"
    )]
    InvalidDigest { reference: String, digest: String },
    #[error(
        "invalid image reference {reference:?}: a 64-character hexadecimal name looks like an \
         image id, not a repository"
    )]
    LooksLikeId { reference: String },
}

/// A validated, normalized image reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reference {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

impl Reference {
    /// Parses and normalizes `s`. A reference without tag and digest gets the tag `latest`.
    pub fn parse(s: &str) -> Result<Reference, ReferenceError> {
        let err_ref = || s.to_string();
        if s.is_empty() {
            return Err(ReferenceError::Empty {
                reference: err_ref(),
            });
        }
        let (rest, digest) = match s.split_once('@') {
            Some((name, d)) => {
                let digest = Digest::parse(d).map_err(|_| ReferenceError::InvalidDigest {
                    reference: err_ref(),
                    digest: d.to_string(),
                })?;
                (name, Some(digest))
            }
            None => (s, None),
        };
        // The tag separator is the last ':' after the last '/'.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => {
                let i = last_slash + i;
                (&rest[..i], Some(&rest[i + 1..]))
            }
            None => (rest, None),
        };
        if let Some(t) = tag {
            if !valid_tag(t) {
                return Err(ReferenceError::InvalidTag {
                    reference: err_ref(),
                    tag: t.to_string(),
                });
            }
        }
        if name.is_empty() {
            return Err(ReferenceError::Empty {
                reference: err_ref(),
            });
        }
        if name.len() > MAX_NAME_LEN {
            return Err(ReferenceError::NameTooLong {
                reference: err_ref(),
            });
        }
        let (registry, path) = split_registry(name);
        if let Some(reg) = registry {
            if !valid_registry(reg) {
                return Err(ReferenceError::InvalidRegistry {
                    reference: err_ref(),
                    registry: reg.to_string(),
                });
            }
        }
        if registry.is_none() && path.len() == 64 && path.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ReferenceError::LooksLikeId {
                reference: err_ref(),
            });
        }
        for component in path.split('/') {
            if !valid_path_component(component) {
                return Err(ReferenceError::InvalidComponent {
                    reference: err_ref(),
                    component: component.to_string(),
                });
            }
        }
        let registry = match registry {
            None | Some("index.docker.io") => DEFAULT_REGISTRY.to_string(),
            Some(r) => r.to_string(),
        };
        let repository = if registry == DEFAULT_REGISTRY && !path.contains('/') {
            format!("{OFFICIAL_NAMESPACE}/{path}")
        } else {
            path.to_string()
        };
        let tag = match (tag, &digest) {
            (Some(t), _) => Some(t.to_string()),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_TAG.to_string()),
        };
        Ok(Reference {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The registry host (with port), e.g. `docker.io` or `localhost:5000`.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository path inside the registry, e.g. `library/busybox`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    /// The tag, `None` only for a digest-only reference.
    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    /// The pinned manifest digest, if the reference has one.
    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `registry/repository` without tag or digest.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The short Docker form: `busybox:latest`, `foo/bar:1`, `quay.io/a/b:2`.
    pub fn familiar(&self) -> String {
        let name = if self.registry == DEFAULT_REGISTRY {
            self.repository
                .strip_prefix("library/")
                .filter(|r| !r.contains('/'))
                .unwrap_or(&self.repository)
                .to_string()
        } else {
            self.name()
        };
        format!("{name}{}", self.suffix())
    }

    /// The same name with another tag (and no digest).
    pub fn with_tag(&self, tag: &str) -> Result<Reference, ReferenceError> {
        if !valid_tag(tag) {
            return Err(ReferenceError::InvalidTag {
                reference: self.to_string(),
                tag: tag.to_string(),
            });
        }
        Ok(Reference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: Some(tag.to_string()),
            digest: None,
        })
    }

    fn suffix(&self) -> String {
        let mut s = String::new();
        if let Some(t) = &self.tag {
            s.push(':');
            s.push_str(t);
        }
        if let Some(d) = &self.digest {
            s.push('@');
            s.push_str(&d.to_string());
        }
        s
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}{}", self.registry, self.repository, self.suffix())
    }
}

impl std::str::FromStr for Reference {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Reference::parse(s)
    }
}

/// Splits off the registry: the first component is a registry when it contains `.` or `:`,
/// is `localhost`, or has uppercase letters (Docker's rule).
fn split_registry(name: &str) -> (Option<&str>, &str) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains(['.', ':'])
                || first == "localhost"
                || first.bytes().any(|b| b.is_ascii_uppercase()) =>
        {
            (Some(first), rest)
        }
        _ => (None, name),
    }
}

fn valid_registry(reg: &str) -> bool {
    let (host, port) = if let Some(stripped) = reg.strip_prefix('[') {
        // IPv6 literal: [addr]:port
        match stripped.split_once(']') {
            Some((addr, rest)) => {
                if addr.is_empty() || !addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') {
                    return false;
                }
                match rest {
                    "" => return true,
                    r => match r.strip_prefix(':') {
                        Some(p) => return !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()),
                        None => return false,
                    },
                }
            }
            None => return false,
        }
    } else {
        match reg.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (reg, None),
        }
    };
    if let Some(p) = port {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return false;
        }
    }
    !host.is_empty()
        && host.split('.').all(|c| {
            let b = c.as_bytes();
            !b.is_empty()
                && b.iter().all(|x| x.is_ascii_alphanumeric() || *x == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        })
}

/// `[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*`
fn valid_path_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() {
        return false;
    }
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        // A separator run: '.', '_', '__' or one or more '-'.
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

/// `[\w][\w.-]{0,127}`
fn valid_tag(t: &str) -> bool {
    let b = t.as_bytes();
    let word = |x: u8| x.is_ascii_alphanumeric() || x == b'_';
    !b.is_empty()
        && b.len() <= MAX_TAG_LEN
        && word(b[0])
        && b.iter().all(|x| word(*x) || *x == b'.' || *x == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn normalization_table() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "busybox",
                "docker.io/library/busybox:latest",
                "busybox:latest",
            ),
            (
                "busybox:1.36",
                "docker.io/library/busybox:1.36",
                "busybox:1.36",
            ),
            ("foo/bar", "docker.io/foo/bar:latest", "foo/bar:latest"),
            (
                "docker.io/busybox",
                "docker.io/library/busybox:latest",
                "busybox:latest",
            ),
            (
                "index.docker.io/foo/bar:v1",
                "docker.io/foo/bar:v1",
                "foo/bar:v1",
            ),
            ("localhost/x", "localhost/x:latest", "localhost/x:latest"),
            (
                "localhost:5000/x",
                "localhost:5000/x:latest",
                "localhost:5000/x:latest",
            ),
            (
                "localhost:5000/x:y",
                "localhost:5000/x:y",
                "localhost:5000/x:y",
            ),
            (
                "quay.io/a/b/c:2.0-rc_1",
                "quay.io/a/b/c:2.0-rc_1",
                "quay.io/a/b/c:2.0-rc_1",
            ),
            ("Registry/x", "Registry/x:latest", "Registry/x:latest"),
            ("[::1]:5000/x", "[::1]:5000/x:latest", "[::1]:5000/x:latest"),
            (
                "a__b/c.d/e--f_g",
                "docker.io/a__b/c.d/e--f_g:latest",
                "a__b/c.d/e--f_g:latest",
            ),
        ];
        for (input, full, familiar) in cases {
            let r = Reference::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(r.to_string(), *full, "{input}");
            assert_eq!(r.familiar(), *familiar, "{input}");
            // Normalization is idempotent.
            assert_eq!(Reference::parse(full).expect("reparse").to_string(), *full);
        }
    }

    #[test]
    fn digests_are_kept() {
        let r = Reference::parse(&format!("busybox@{D}")).expect("parse");
        assert_eq!(r.to_string(), format!("docker.io/library/busybox@{D}"));
        assert_eq!(r.tag(), None);
        assert_eq!(r.digest().map(|d| d.to_string()), Some(D.to_string()));
        let r = Reference::parse(&format!("localhost:5000/x:1@{D}")).expect("parse");
        assert_eq!(r.registry(), "localhost:5000");
        assert_eq!(r.repository(), "x");
        assert_eq!(r.tag(), Some("1"));
        assert_eq!(r.to_string(), format!("localhost:5000/x:1@{D}"));
        assert_eq!(r.familiar(), format!("localhost:5000/x:1@{D}"));
    }

    #[test]
    fn invalid_references_are_rejected_naming_the_reference() {
        let long_tag = format!("x:{}", "a".repeat(129));
        let long_name = "a".repeat(256);
        let id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let cases: &[&str] = &[
            "",
            "Busybox",
            "foo/Bar",
            "foo//bar",
            "foo/bar/",
            "-foo",
            "foo-",
            "foo..bar",
            "foo___bar",
            "busybox:",
            "busybox:-x",
            "busybox:a/b",
            &long_tag,
            &long_name,
            "busybox@sha256:abc",
            "busybox@md5:0123",
            "bad_host.io:/x",
            "-bad.io/x",
            "foo.io:abc/x",
            id,
            ":tag",
        ];
        for input in cases {
            let err = Reference::parse(input).expect_err(input);
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("{input:?}")),
                "{msg} must name {input}"
            );
        }
    }

    #[test]
    fn with_tag_replaces_tag_and_drops_digest() {
        let r = Reference::parse(&format!("x/y:1@{D}")).expect("parse");
        assert_eq!(r.with_tag("2").expect("tag").to_string(), "docker.io/x/y:2");
        assert!(r.with_tag("-bad").is_err());
    }
}
