//! config::flags: the kubelet flags whose values need more than clap: `--manifest-url-header`
//! (the kubelet's ColonSeparatedMultimapStringString) and `--hostname-override` (the node
//! name), and the error naming a bad flag value.

use std::collections::BTreeMap;

use super::checks::check_header;
use super::ConfigError;
use crate::pod::validation::is_dns1123_subdomain;

/// Parses `--manifest-url-header` values the way the kubelet's ColonSeparatedMultimapStringString
/// does: each value is a comma-separated list of `key:value` pairs split at the first colon,
/// key and value trimmed, empty pairs skipped; values of one key accumulate in order across
/// pairs and repeated flags. Header names and values are then validated.
pub fn parse_manifest_url_headers(
    values: &[String],
) -> Result<BTreeMap<String, Vec<String>>, ConfigError> {
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for value in values {
        for pair in value.split(',') {
            if pair.is_empty() {
                continue;
            }
            let Some((key, val)) = pair.split_once(':') else {
                return Err(invalid_flag(
                    "manifest-url-header",
                    value,
                    format!("malformed pair {pair:?}, expected key:value"),
                ));
            };
            headers
                .entry(key.trim().to_string())
                .or_default()
                .push(val.trim().to_string());
        }
    }
    for (name, vals) in &headers {
        check_header(name, vals)
            .map_err(|m| invalid_flag("manifest-url-header", &values.join(" "), m.to_string()))?;
    }
    Ok(headers)
}

/// `--hostname-override` when non-empty, else the system hostname; trimmed, lowercased and
/// checked as a DNS-1123 subdomain (the kubelet's GetHostname plus node name validation).
pub fn resolve_node_name(hostname_override: Option<&str>) -> Result<String, ConfigError> {
    let (raw, origin) = match hostname_override.filter(|h| !h.is_empty()) {
        Some(h) => (h.to_string(), "--hostname-override"),
        None => {
            let h =
                nix::unistd::gethostname().map_err(|source| ConfigError::Hostname { source })?;
            (h.to_string_lossy().into_owned(), "the system hostname")
        }
    };
    let name = raw.trim().to_lowercase();
    if name.is_empty() {
        return Err(ConfigError::InvalidNodeName {
            name: raw,
            origin,
            message: "is empty".into(),
        });
    }
    if !is_dns1123_subdomain(&name) {
        return Err(ConfigError::InvalidNodeName {
            name,
            origin,
            message: "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', \
                      at most 253 characters, labels starting and ending with a letter or digit"
                .into(),
        });
    }
    Ok(name)
}

pub(super) fn invalid_flag(
    flag: &'static str,
    value: &str,
    message: impl Into<String>,
) -> ConfigError {
    ConfigError::InvalidFlag {
        flag,
        value: value.into(),
        message: message.into(),
    }
}
