//! cli::pods: `podvisor pods` — the kubectl `get pods` table (READY, STATUS and RESTARTS
//! from [`super::summary`]), `-o wide`, `-o json|yaml` documents, and the warnings about
//! manifest errors printed below the table.

use std::io::Write;
use std::path::Path;

use k8s_openapi::jiff::Timestamp;

use super::summary::pod_summary;
use super::table::kubectl_table;
use super::time::since;
use super::{render_document, time, write_out, CliError, OutputFormat};
use crate::api::{client, percent_encode};
use crate::status::{PodView, SourceErrorView};

/// The `get pods` table; `wide` adds NODE and SOURCE.
pub fn render_pods(views: &[PodView], now: Timestamp, wide: bool) -> String {
    let mut text = String::from("NAME\tREADY\tSTATUS\tRESTARTS\tAGE");
    if wide {
        text.push_str("\tNODE\tSOURCE");
    }
    text.push('\n');
    for v in views {
        let s = pod_summary(&v.pod, now);
        let age = since(v.pod.metadata.creation_timestamp.as_ref().map(|t| t.0), now);
        text.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}",
            v.pod.metadata.name.as_deref().unwrap_or(""),
            s.ready,
            s.status,
            s.restarts,
            age
        ));
        if wide {
            let node = v
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .unwrap_or("<none>");
            text.push_str(&format!("\t{node}\t{}", v.source));
        }
        text.push('\n');
    }
    kubectl_table(&text)
}

/// One `warning: <source>: <message>` line per manifest error: those of pods (which keep
/// running from their last valid manifest) and those not tied to a pod, without repeats; and
/// one `warning: pod <name>: rolled back: <why>` line per pod whose edit was rolled back.
pub fn render_warnings(views: &[PodView], source_errors: &[SourceErrorView]) -> String {
    let mut out = String::new();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for v in views {
        if let Some(why) = &v.rolled_back {
            out.push_str(&format!(
                "warning: pod {}: rolled back: {why} (its last Ready generation runs until the manifest's spec changes again)\n",
                v.pod.metadata.name.as_deref().unwrap_or("")
            ));
        }
        if let Some(e) = &v.source_error {
            seen.push((&e.source, &e.message));
            out.push_str(&format!(
                "warning: {}: {} (pod {} keeps running from the last valid manifest)\n",
                e.source,
                e.message,
                v.pod.metadata.name.as_deref().unwrap_or("")
            ));
        }
    }
    for e in source_errors {
        if !seen.contains(&(e.source.as_str(), e.message.as_str())) {
            out.push_str(&format!("warning: {}: {}\n", e.source, e.message));
        }
    }
    out
}

/// `{"apiVersion":"v1","kind":"List","items":[Pod...]}` as kubectl prints lists.
pub fn list_document(views: &[PodView]) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "List",
        "items": views.iter().map(|v| &v.pod).collect::<Vec<_>>(),
        "metadata": { "resourceVersion": "" },
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn now() -> Timestamp {
        "2024-01-02T03:04:05Z".parse().expect("now")
    }

    fn ts(s: &str) -> Time {
        Time(s.parse().expect("time"))
    }

    /// A running pod with one ready container `a`.
    fn running_pod() -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some("p".into());
        p.spec = Some(PodSpec {
            containers: vec![Container {
                name: "a".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            container_statuses: Some(vec![ContainerStatus {
                name: "a".into(),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning::default()),
                    ..Default::default()
                }),
                ready: true,
                started: Some(true),
                ..Default::default()
            }]),
            conditions: Some(vec![]),
            ..Default::default()
        });
        p
    }

    fn view(p: Pod) -> PodView {
        PodView {
            pod: p,
            source: "/etc/podvisor/manifests/web.yaml".into(),
            source_error: None,
            rolled_back: None,
            log_paths: Default::default(),
            previous_log_paths: Default::default(),
            mirror: None,
        }
    }

    #[test]
    fn table_wide_and_warnings() {
        let mut p = running_pod();
        p.metadata.name = Some("web-node1".into());
        p.metadata.creation_timestamp = Some(ts("2024-01-02T03:00:45Z"));
        p.spec.as_mut().expect("spec").node_name = Some("node1".into());
        let mut v = view(p);
        let table = render_pods(std::slice::from_ref(&v), now(), false);
        assert_eq!(
            table,
            "NAME        READY   STATUS    RESTARTS   AGE\n\
             web-node1   1/1     Running   0          3m20s\n"
        );
        let wide = render_pods(std::slice::from_ref(&v), now(), true);
        assert!(
            wide.starts_with("NAME        READY   STATUS    RESTARTS   AGE     NODE    SOURCE\n"),
            "{wide}"
        );
        assert!(
            wide.contains("3m20s   node1   /etc/podvisor/manifests/web.yaml\n"),
            "{wide}"
        );

        v.source_error = Some(SourceErrorView {
            source: "/etc/podvisor/manifests/web.yaml".into(),
            message: "web.yaml:4:3: spec.containers: missing field".into(),
            since: "2024-01-02T03:04:00Z".into(),
        });
        let errors = vec![
            v.source_error.clone().expect("error"),
            SourceErrorView {
                source: "/etc/podvisor/manifests/new.yaml".into(),
                message: "new.yaml:1:1: not a Pod".into(),
                since: "2024-01-02T03:04:00Z".into(),
            },
        ];
        assert_eq!(
            render_warnings(std::slice::from_ref(&v), &errors),
            "warning: /etc/podvisor/manifests/web.yaml: web.yaml:4:3: spec.containers: missing field (pod web-node1 keeps running from the last valid manifest)\n\
             warning: /etc/podvisor/manifests/new.yaml: new.yaml:1:1: not a Pod\n"
        );
        // Status of the pod itself is untouched by the source error.
        assert!(render_pods(std::slice::from_ref(&v), now(), false).contains("Running"));
        v.source_error = None;
        v.rolled_back = Some("container main is crash-looping (last exit code 1)".into());
        assert_eq!(
            render_warnings(std::slice::from_ref(&v), &[]),
            "warning: pod web-node1: rolled back: container main is crash-looping (last exit code 1) (its last Ready generation runs until the manifest's spec changes again)\n"
        );

        let doc = list_document(&[v]);
        assert_eq!(doc["kind"], "List");
        assert_eq!(doc["items"][0]["kind"], "Pod");
        assert_eq!(doc["items"][0]["apiVersion"], "v1");
        assert_eq!(doc["items"][0]["metadata"]["name"], "web-node1");
    }
}
