//! Value checks of configuration fields and flags: paths, the manifest URL and its headers.
//! Their errors say what is wrong with the value; the caller wraps them into a
//! [`super::ConfigError`] that names the field (with file:line:column) or the flag.

use std::path::Path;

/// Longest path a unix socket address can hold (sun_path is 108 bytes with the final NUL).
pub(super) const MAX_SOCKET_PATH_BYTES: usize = 107;

/// A path value that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum PathError {
    #[error("must be an absolute path")]
    NotAbsolute,
    #[error("{path:?} must be an absolute path")]
    PodLogsDirNotAbsolute { path: String },
    #[error("{path:?} must be normalized (no \"//\", \".\", \"..\" or trailing \"/\")")]
    NotNormalized { path: String },
    #[error("{path:?} must contain ASCII characters only")]
    NotAscii { path: String },
    #[error("is {len} bytes, a unix socket path holds at most {max}")]
    SocketPathTooLong { len: usize, max: usize },
}

/// A URL value that is not an absolute http or https URL with a host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum UrlError {
    #[error("must not contain {c:?}")]
    Character { c: char },
    #[error("must be an absolute http or https URL (scheme://host/...)")]
    NotAbsolute,
    #[error("scheme {scheme:?} is not http or https")]
    Scheme { scheme: String },
    #[error("has an unterminated IPv6 address")]
    UnterminatedIpv6,
    #[error("host [{addr}] is not an IPv6 address")]
    NotIpv6 { addr: String },
    #[error("unexpected {rest:?} after the IPv6 address")]
    AfterIpv6 { rest: String },
    #[error("has no host")]
    NoHost,
    #[error("host {host:?} has characters not allowed in a host name")]
    HostCharacters { host: String },
    #[error("port {port:?} is not a number from 1 to 65535")]
    Port { port: String },
}

/// An HTTP header that cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum HeaderError {
    #[error("header name is empty")]
    EmptyName,
    #[error("header name {name:?} is not a valid HTTP token")]
    Name { name: String },
    #[error("header {name:?} value {value:?} contains control characters")]
    Value { name: String, value: String },
}

pub(super) fn check_absolute(p: &Path) -> Result<(), PathError> {
    if p.is_absolute() {
        Ok(())
    } else {
        Err(PathError::NotAbsolute)
    }
}

/// The kubelet's podLogsDir rules: absolute, normalized (`filepath.Clean(p) == p`), ASCII.
pub(super) fn check_pod_logs_dir(p: &str) -> Result<(), PathError> {
    let path = || p.to_string();
    if !p.starts_with('/') {
        return Err(PathError::PodLogsDirNotAbsolute { path: path() });
    }
    let clean = p == "/"
        || (!p.ends_with('/')
            && p[1..]
                .split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."));
    if !clean {
        return Err(PathError::NotNormalized { path: path() });
    }
    if !p.is_ascii() {
        return Err(PathError::NotAscii { path: path() });
    }
    Ok(())
}

pub(super) fn check_socket_path(p: &Path) -> Result<(), PathError> {
    check_absolute(p)?;
    let len = p.as_os_str().len();
    if len > MAX_SOCKET_PATH_BYTES {
        return Err(PathError::SocketPathTooLong {
            len,
            max: MAX_SOCKET_PATH_BYTES,
        });
    }
    Ok(())
}

/// An absolute http or https URL with a host (and a valid port if any).
pub(super) fn check_url(url: &str) -> Result<(), UrlError> {
    if let Some(c) = url.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(UrlError::Character { c });
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(UrlError::NotAbsolute);
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(UrlError::Scheme {
            scheme: scheme.to_string(),
        });
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let (host, port) = if let Some(v6) = host_port.strip_prefix('[') {
        let Some((addr, after)) = v6.split_once(']') else {
            return Err(UrlError::UnterminatedIpv6);
        };
        if addr.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(UrlError::NotIpv6 {
                addr: addr.to_string(),
            });
        }
        match after {
            "" => (addr, None),
            p => match p.strip_prefix(':') {
                Some(port) => (addr, Some(port)),
                None => {
                    return Err(UrlError::AfterIpv6 {
                        rest: p.to_string(),
                    })
                }
            },
        }
    } else {
        match host_port.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (host_port, None),
        }
    };
    if host.is_empty() {
        return Err(UrlError::NoHost);
    }
    if !host_port.starts_with('[')
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(UrlError::HostCharacters {
            host: host.to_string(),
        });
    }
    if let Some(port) = port {
        let ok = !port.is_empty()
            && port.bytes().all(|b| b.is_ascii_digit())
            && port.parse::<u16>().is_ok_and(|p| p > 0);
        if !ok {
            return Err(UrlError::Port {
                port: port.to_string(),
            });
        }
    }
    Ok(())
}

/// An HTTP header name is an RFC 9110 token; values must not hold control characters other
/// than tab (Go's httpguts.ValidHeaderFieldValue).
pub(super) fn check_header(name: &str, values: &[String]) -> Result<(), HeaderError> {
    if name.is_empty() {
        return Err(HeaderError::EmptyName);
    }
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if !name.bytes().all(token) {
        return Err(HeaderError::Name {
            name: name.to_string(),
        });
    }
    for value in values {
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(HeaderError::Value {
                name: name.to_string(),
                value: value.clone(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The messages users see after the field or flag name (file:line:column: field: ...).
    #[test]
    fn messages_name_the_offending_part_of_the_value() {
        let url = |u| check_url(u).expect_err(u).to_string();
        assert_eq!(url("http://a b/"), "must not contain ' '");
        assert_eq!(url("ftp://x/"), "scheme \"ftp\" is not http or https");
        assert_eq!(url("http://[::1/"), "has an unterminated IPv6 address");
        assert_eq!(url("http://[zz]/"), "host [zz] is not an IPv6 address");
        assert_eq!(
            url("http://[::1]x/"),
            "unexpected \"x\" after the IPv6 address"
        );
        assert_eq!(url("http://:80/"), "has no host");
        assert_eq!(
            url("http://ho%st/"),
            "host \"ho%st\" has characters not allowed in a host name"
        );
        assert_eq!(
            url("http://h:0/"),
            "port \"0\" is not a number from 1 to 65535"
        );
        assert_eq!(
            check_pod_logs_dir("/var//log").expect_err("//").to_string(),
            r#""/var//log" must be normalized (no "//", ".", ".." or trailing "/")"#
        );
        assert_eq!(
            check_pod_logs_dir("var/log")
                .expect_err("relative")
                .to_string(),
            "\"var/log\" must be an absolute path"
        );
        let long = format!("/{}", "s".repeat(MAX_SOCKET_PATH_BYTES));
        assert_eq!(
            check_socket_path(Path::new(&long))
                .expect_err("long")
                .to_string(),
            "is 108 bytes, a unix socket path holds at most 107"
        );
        assert_eq!(
            check_header("X-A", &["ok".into(), "b\u{1}".into()])
                .expect_err("control")
                .to_string(),
            "header \"X-A\" value \"b\\u{1}\" contains control characters"
        );
        assert_eq!(
            check_header("a b", &[]).expect_err("token").to_string(),
            "header name \"a b\" is not a valid HTTP token"
        );
    }
}
