//! cli::logs: `podvisor logs POD [-c C] [-p] [--tail N] [-f]` — resolves the pod, then copies
//! the API's log stream to the output as it arrives.

use std::io::Write;
use std::path::Path;

use super::CliError;
use crate::api::{client, percent_encode};
use crate::status::PodView;

/// What `logs` asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogsOptions {
    /// `name`, `namespace/name`, or the manifest's name without the node suffix.
    pub pod: String,
    pub container: Option<String>,
    pub previous: bool,
    pub tail: Option<usize>,
    pub follow: bool,
}

/// The API path of the log of pod `namespace/name` with `opts`.
pub fn log_path(namespace: &str, name: &str, opts: &LogsOptions) -> String {
    let mut path = format!(
        "/pods/{}/{}/log",
        percent_encode(namespace),
        percent_encode(name)
    );
    let mut query = Vec::new();
    if let Some(c) = &opts.container {
        query.push(format!("container={}", percent_encode(c)));
    }
    if opts.previous {
        query.push("previous=true".to_string());
    }
    if let Some(n) = opts.tail {
        query.push(format!("tail={n}"));
    }
    if opts.follow {
        query.push("follow=true".to_string());
    }
    if !query.is_empty() {
        path.push('?');
        path.push_str(&query.join("&"));
    }
    path
}

/// Prints the log; with `follow`, until the container stops or the daemon goes away.
pub fn logs(socket: &Path, opts: &LogsOptions, out: &mut dyn Write) -> Result<(), CliError> {
    let view: PodView =
        client::get_pod_json(socket, &format!("/pods/{}", percent_encode(&opts.pod)))?;
    let meta = &view.pod.metadata;
    let path = log_path(
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or(""),
        opts,
    );
    client::get_stream(socket, &path, out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{parse_request, ApiRequest};

    #[test]
    fn log_paths_parse_back() {
        let opts = LogsOptions {
            pod: "web".into(),
            container: Some("app x".into()),
            previous: false,
            tail: Some(20),
            follow: true,
        };
        let path = log_path("default", "web-n1", &opts);
        assert_eq!(
            path,
            "/pods/default/web-n1/log?container=app%20x&tail=20&follow=true"
        );
        match parse_request("GET", &path).expect("parse") {
            ApiRequest::Logs(r) => {
                assert_eq!(r.container.as_deref(), Some("app x"));
                assert_eq!(r.tail, Some(20));
                assert!(r.follow && !r.previous);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            log_path("ns", "p", &LogsOptions::default()),
            "/pods/ns/p/log"
        );
    }
}
