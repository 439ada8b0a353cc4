//! cli: podvisor's kubectl-like views of the daemon — pure renderers from API data to text
//! ([`pods`], [`describe`], [`events`]) and thin command functions that fetch through
//! [`crate::api::client`] and print. Output mirrors kubectl (`get pods`, `describe pod`,
//! `get events`, `logs`, `top pod`) so its users read it without surprises.

use std::io::{self, Write};
use std::path::Path;
use std::str::FromStr;

use crate::api::{client, percent_encode, ApiError};
use crate::status::{EventRecord, PodView, SourceErrorView};

pub mod apply;
pub mod attach;
pub mod describe;
#[cfg(any(feature = "docs", test))]
pub mod docs;
pub mod events;
pub mod exec;
pub mod logs;
pub mod node;
pub mod pods;
pub mod summary;
pub mod table;
pub mod time;
pub mod top;

pub use describe::render_describe;
pub use events::render_events;
pub use logs::{logs, LogsOptions};
pub use pods::{list_document, render_pods, render_warnings};
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

/// `podvisor pods [NAME] [-o wide|json|yaml]`: the table (manifest warnings go to `err`
/// after it), or the List / Pod document.
pub fn get_pods(
    socket: &Path,
    name: Option<&str>,
    format: OutputFormat,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let views: Vec<PodView> = match name {
        Some(n) => vec![client::get_pod_json(
            socket,
            &format!("/pods/{}", percent_encode(n)),
        )?],
        None => client::get_pod_json(socket, "/pods")?,
    };
    match format {
        OutputFormat::Json | OutputFormat::Yaml => {
            let doc = match (name, views.first()) {
                (Some(_), Some(v)) => {
                    serde_json::to_value(&v.pod).map_err(|source| CliError::Json {
                        what: "the pod".into(),
                        source,
                    })?
                }
                _ => list_document(&views),
            };
            write_out(out, &render_document(&doc, format, "the pods")?)
        }
        OutputFormat::Table | OutputFormat::Wide => {
            let source_errors: Vec<SourceErrorView> = match name {
                Some(_) => Vec::new(),
                None => client::get_json(socket, "/source-errors")?,
            };
            if views.is_empty() {
                write_out(err, "No resources found\n")?;
            } else {
                let table = render_pods(&views, time::now(), format == OutputFormat::Wide);
                write_out(out, &table)?;
            }
            write_out(err, &render_warnings(&views, &source_errors))
        }
    }
}

/// `podvisor describe POD`.
pub fn describe_pod(socket: &Path, pod: &str, out: &mut dyn Write) -> Result<(), CliError> {
    let view: PodView = client::get_pod_json(socket, &format!("/pods/{}", percent_encode(pod)))?;
    let key = crate::api::handlers::pod_key(&view.pod);
    let events: Vec<EventRecord> =
        client::get_json(socket, &format!("/events?pod={}", percent_encode(&key)))?;
    write_out(out, &render_describe(&view, &events, time::now()))
}

/// `podvisor events [POD]`.
pub fn get_events(
    socket: &Path,
    pod: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let path = match pod {
        Some(p) => format!("/events?pod={}", percent_encode(p)),
        None => "/events".to_string(),
    };
    let events: Vec<EventRecord> = client::get_json(socket, &path)?;
    if events.is_empty() {
        return write_out(err, "No events found\n");
    }
    write_out(out, &render_events(&events, time::now()))
}

/// `podvisor node`: the node described, or as a v1 Node document (`-o json|yaml`).
pub fn get_node(socket: &Path, format: OutputFormat, out: &mut dyn Write) -> Result<(), CliError> {
    let node: serde_json::Value = client::get_json(socket, "/node")?;
    match format {
        OutputFormat::Json | OutputFormat::Yaml => {
            write_out(out, &render_document(&node, format, "the node")?)
        }
        OutputFormat::Table | OutputFormat::Wide => write_out(out, &node::render_node(&node)),
    }
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
