//! config::decode: a KubeletConfiguration document from bytes: size and UTF-8 limits,
//! `apiVersion`/`kind`, serde-saphyr decoding with file:line:column errors and a "did you
//! mean" hint for a misspelt field name; `validate` (in `mod.rs`) checks the values.

use serde::Deserialize;
use serde_saphyr::{MessageFormatter, Spanned};

use super::raw::{fmt_location, RawKubeletConfiguration};
use super::validate::validate;
use super::{ConfigError, KubeletConfig, API_VERSION, KIND, MAX_CONFIG_BYTES};
use crate::pod::manifest::yaml_options;

/// Just the type fields, read first so that a document of another kind (a Pod given as
/// `--config`) is reported as such rather than as a list of unknown fields.
#[derive(Deserialize)]
struct TypeMeta {
    #[serde(rename = "apiVersion")]
    api_version: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
}

/// Parses and validates a KubeletConfiguration document. `source_name` names the file in errors.
pub fn parse_kubelet_config(data: &[u8], source_name: &str) -> Result<KubeletConfig, ConfigError> {
    if data.len() > MAX_CONFIG_BYTES {
        return Err(ConfigError::TooLarge {
            source_name: source_name.into(),
            size: data.len(),
            max: MAX_CONFIG_BYTES,
        });
    }
    let text = std::str::from_utf8(data).map_err(|_| ConfigError::NotUtf8 {
        source_name: source_name.into(),
    })?;
    if text.trim().is_empty() {
        return Err(ConfigError::Empty {
            source_name: source_name.into(),
        });
    }
    let meta: TypeMeta = from_yaml(text, source_name)?;
    check_type_field(
        meta.api_version.as_ref(),
        "apiVersion",
        API_VERSION,
        source_name,
    )?;
    check_type_field(meta.kind.as_ref(), "kind", KIND, source_name)?;
    let raw: RawKubeletConfiguration = from_yaml(text, source_name)?;
    validate(&raw, source_name)
}

fn from_yaml<T: serde::de::DeserializeOwned>(
    text: &str,
    source_name: &str,
) -> Result<T, ConfigError> {
    serde_saphyr::from_str_with_options::<T>(text, yaml_options()).map_err(|e| {
        let e = e.without_snippet();
        match e {
            serde_saphyr::Error::SerdeUnknownField {
                field,
                expected,
                location,
            } => ConfigError::UnknownField {
                source_name: source_name.into(),
                location: fmt_location(location),
                field: field.clone(),
                hint: suggestion(field, expected)
                    .map(|s| format!(", did you mean {s:?}?"))
                    .unwrap_or_default(),
            },
            other => ConfigError::Syntax {
                source_name: source_name.into(),
                location: other
                    .location()
                    .map(|l| fmt_location(&l))
                    .unwrap_or_default(),
                // The user-facing wording, without the location (already in the prefix).
                message: serde_saphyr::UserMessageFormatter
                    .format_message(other)
                    .into_owned(),
            },
        }
    })
}

/// The known name closest to `field`: same spelling ignoring case, or within a small edit
/// distance.
fn suggestion<'a>(field: &str, expected: &[&'a str]) -> Option<&'a str> {
    let lower = field.to_ascii_lowercase();
    let mut best: Option<(usize, &'a str)> = None;
    for &name in expected {
        let d = edit_distance(&lower, &name.to_ascii_lowercase());
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, name));
        }
    }
    let limit = (field.chars().count() / 4).clamp(1, 3);
    best.filter(|&(d, _)| d <= limit).map(|(_, name)| name)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = Vec::with_capacity(b.len() + 1);
        cur.push(i + 1);
        for (j, &cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur.push((prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

fn check_type_field(
    value: Option<&Spanned<String>>,
    field: &str,
    expected: &str,
    source_name: &str,
) -> Result<(), ConfigError> {
    match value {
        Some(v) if v.value == expected => Ok(()),
        Some(v) => Err(ConfigError::Invalid {
            source_name: source_name.into(),
            location: fmt_location(&v.referenced),
            field: field.into(),
            message: format!("is {:?}, expected {expected:?}", v.value),
        }),
        None => Err(ConfigError::Invalid {
            source_name: source_name.into(),
            location: String::new(),
            field: field.into(),
            message: format!("is missing, expected {expected:?}"),
        }),
    }
}
