//! cli: podvisor's commands, one file each, behind the command line of [`args`] (which the
//! binary's `main` parses and dispatches). The daemon's commands ([`run`], [`play`],
//! [`validate`], [`check`], [`image`], the hidden [`shim`] processes) call into their modules;
//! the client commands are kubectl-like views of the daemon — pure renderers from API data to
//! text ([`pods`], [`describe`], [`events`], [`node`], [`top`]) and thin command functions that
//! fetch through [`crate::api::client`] and print. Output mirrors kubectl (`get pods`,
//! `describe pod`, `get events`, `logs`, `top pod`) so its users read it without surprises.

use std::io::{self, Write};
use std::str::FromStr;

use crate::api::ApiError;

pub mod apply;
pub mod args;
pub mod attach;
pub mod check;
pub mod describe;
#[cfg(any(feature = "docs", test))]
pub mod docs;
pub mod events;
pub mod exec;
pub mod image;
pub mod logs;
pub mod node;
pub mod play;
pub mod pods;
pub mod run;
pub mod shim;
pub mod summary;
pub mod table;
pub mod time;
pub mod top;
pub mod validate;

pub use describe::{describe_pod, render_describe};
pub use events::{get_events, render_events};
pub use logs::{logs, LogsOptions};
pub use node::get_node;
pub use pods::{get_pods, list_document, render_pods, render_warnings};
pub use summary::{pod_summary, PodSummary};
pub use top::{render_top, top};

/// Errors of the CLI commands.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error("cannot write the output")]
    Output { source: io::Error },
    #[error("cannot print {what} as JSON")]
    Json {
        what: String,
        source: serde_json::Error,
    },
    #[error("cannot print {what} as YAML")]
    Yaml {
        what: String,
        source: serde_saphyr::SerializeError,
    },
    #[error("unknown output format {format:?}, expected wide, json or yaml")]
    UnknownOutput { format: String },
}

/// `-o` of `pods`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OutputFormat {
    #[default]
    Table,
    Wide,
    Json,
    Yaml,
}

impl FromStr for OutputFormat {
    type Err = CliError;

    fn from_str(s: &str) -> Result<OutputFormat, CliError> {
        match s {
            "" => Ok(OutputFormat::Table),
            "wide" => Ok(OutputFormat::Wide),
            "json" => Ok(OutputFormat::Json),
            "yaml" => Ok(OutputFormat::Yaml),
            _ => Err(CliError::UnknownOutput {
                format: s.to_string(),
            }),
        }
    }
}

fn write_out(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|source| CliError::Output { source })
}

/// kubectl's `-o json` (4-space indentation) or `-o yaml` of `value`.
pub fn render_document(
    value: &serde_json::Value,
    format: OutputFormat,
    what: &str,
) -> Result<String, CliError> {
    if format == OutputFormat::Yaml {
        return serde_saphyr::to_string(value).map_err(|source| CliError::Yaml {
            what: what.to_string(),
            source,
        });
    }
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    serde::Serialize::serialize(value, &mut ser).map_err(|source| CliError::Json {
        what: what.to_string(),
        source,
    })?;
    buf.push(b'\n');
    // serde_json writes UTF-8 only.
    Ok(String::from_utf8_lossy(&buf).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_formats() {
        assert_eq!(
            "wide".parse::<OutputFormat>().ok(),
            Some(OutputFormat::Wide)
        );
        assert_eq!(
            "yaml".parse::<OutputFormat>().ok(),
            Some(OutputFormat::Yaml)
        );
        let err = "xml".parse::<OutputFormat>().expect_err("xml");
        assert_eq!(
            err.to_string(),
            "unknown output format \"xml\", expected wide, json or yaml"
        );
    }

    #[test]
    fn documents_in_json_and_yaml() {
        let doc = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-n1"}}
        ]});
        let json = render_document(&doc, OutputFormat::Json, "x").expect("json");
        assert!(json.starts_with("{\n    \"apiVersion\": \"v1\""), "{json}");
        let back: serde_json::Value = serde_json::from_str(&json).expect("parse json");
        assert_eq!(back, doc);
        let yaml = render_document(&doc, OutputFormat::Yaml, "x").expect("yaml");
        assert!(yaml.contains("kind: List"), "{yaml}");
        assert!(yaml.contains("name: web-n1"), "{yaml}");
        let back: serde_json::Value = serde_saphyr::from_str(&yaml).expect("parse yaml");
        assert_eq!(back, doc);
    }
}
