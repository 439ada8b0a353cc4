//! nodeapi::push: podvisor's push source on the secure port (beyond the kubelet), in the API
//! server's paths and shapes so that fleet tools and `podvisor apply` can use it:
//!
//! - `PUT /api/v1/namespaces/{namespace}/pods/{name}` with a v1 Pod in YAML
//!   (`application/yaml`, `application/x-yaml`, `text/yaml`) or JSON (`application/json`), at
//!   most [`crate::sources::api::MAX_PUSH_BYTES`]: 201 with the pod as it will run when created, 200 when replaced
//!   or unchanged (`X-Podvisor-Outcome: created|configured|unchanged`); 422 `Status` naming
//!   every refused field with its line:column; 400 when it does not parse; 409 when another
//!   source defines that pod; 415 for another content type;
//! - `DELETE` of the same path: 200 with the pod as it was, 404 when no pushed pod has that
//!   name, 409 when the pod comes from another source (remove its file instead);
//! - `GET` of that path, of `/api/v1/namespaces/{namespace}/pods` and of `/api/v1/pods`: the
//!   pod or a `PodList`, whatever its source.
//!
//! The request goes to the sync loop as a typed event ([`ApiPodRequest`]); the connection
//! thread waits for its answer at most [`REPLY_WAIT`] (504 then: the request may still be
//! applied). Errors are `v1 Status` objects, as the API server writes them.

use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

use super::context::{Context, Request};
use crate::httpserver::Response;
use crate::sources::api::{valid_name, ApiPodOp, ApiPodReply, ApiPodRequest, Applied};
use crate::status::Snapshot;

/// How long a connection waits for the sync loop's answer.
pub const REPLY_WAIT: Duration = Duration::from_secs(20);

/// A `v1 Status` failure.
pub fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut v = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(d) = details {
        v["details"] = d;
    }
    Response::json_of(code, &v)
}

fn not_found(ns: &str, name: &str) -> Response {
    status(
        404,
        "NotFound",
        &format!("pods \"{name}\" not found"),
        Some(json!({"name": name, "kind": "pods", "namespace": ns})),
    )
}

/// The body's content type, if it is one podvisor reads.
fn manifest_type(req: &Request) -> Option<&'static str> {
    let ct = req.header("content-type")?;
    let base = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match base.as_str() {
        "application/json" => Some("json"),
        "application/yaml" | "application/x-yaml" | "text/yaml" | "text/x-yaml" => Some("yaml"),
        _ => None,
    }
}

/// A v1 `PodList` of `items`.
pub fn pod_list_of(items: Vec<&k8s_openapi::api::core::v1::Pod>) -> Response {
    #[derive(serde::Serialize)]
    struct PodList<'a, T> {
        kind: &'static str,
        #[serde(rename = "apiVersion")]
        api_version: &'static str,
        metadata: serde_json::Map<String, serde_json::Value>,
        items: &'a [T],
    }
    Response::json_of(
        200,
        &PodList {
            kind: "PodList",
            api_version: "v1",
            metadata: Default::default(),
            items: &items,
        },
    )
}

/// `GET /api/v1/pods` (`namespace` `None`) and `GET /api/v1/namespaces/{namespace}/pods`.
pub fn list(snap: &Snapshot, namespace: Option<&str>) -> Response {
    pod_list_of(
        snap.pods
            .iter()
            .map(|v| &v.pod)
            .filter(|p| namespace.is_none_or(|ns| p.metadata.namespace.as_deref() == Some(ns)))
            .collect(),
    )
}

/// `/api/v1/namespaces/{namespace}/pods/{name}`.
pub fn pod(ns: &str, name: &str, req: &Request, snap: &Snapshot, ctx: &Context) -> Response {
    match req.method {
        "GET" | "HEAD" => match snap.pods.iter().find(|v| {
            v.pod.metadata.namespace.as_deref() == Some(ns)
                && v.pod.metadata.name.as_deref() == Some(name)
        }) {
            Some(v) => Response::json_of(200, &v.pod),
            None => not_found(ns, name),
        },
        method => {
            if !valid_name(ns, true) || !valid_name(name, false) {
                return status(
                    400,
                    "BadRequest",
                    &format!(
                        "invalid namespace {ns:?} or pod name {name:?}: lowercase RFC 1123 names"
                    ),
                    None,
                );
            }
            let op = if method == "PUT" {
                if manifest_type(req).is_none() {
                    return status(
                        415,
                        "UnsupportedMediaType",
                        "the body must be a v1 Pod as application/json or application/yaml",
                        None,
                    );
                }
                ApiPodOp::Put {
                    data: req.body.to_vec(),
                }
            } else {
                ApiPodOp::Delete
            };
            push(ns, name, op, ctx)
        }
    }
}

fn push(ns: &str, name: &str, op: ApiPodOp, ctx: &Context) -> Response {
    let Some(sink) = &ctx.push else {
        return status(
            405,
            "MethodNotAllowed",
            "this node does not take pushed pods",
            None,
        );
    };
    let (tx, rx) = mpsc::sync_channel(1);
    let sent = sink(ApiPodRequest {
        namespace: ns.to_string(),
        name: name.to_string(),
        op,
        reply: tx,
    });
    if !sent {
        return status(
            503,
            "ServiceUnavailable",
            "the sync loop is not running",
            None,
        );
    }
    let reply = match rx.recv_timeout(REPLY_WAIT) {
        Ok(r) => r,
        Err(_) => {
            return status(
                504,
                "Timeout",
                "the sync loop did not answer in time; the request may still be applied",
                None,
            )
        }
    };
    let details = |causes: Option<Value>| {
        let mut d = json!({"name": name, "kind": "pods"});
        if let Some(c) = causes {
            d["causes"] = c;
        }
        Some(d)
    };
    match reply {
        ApiPodReply::Applied { outcome, pod } => {
            let code = if outcome == Applied::Created {
                201
            } else {
                200
            };
            let mut r = Response::json_of(code, &*pod);
            r.headers.push((
                "X-Podvisor-Outcome",
                match outcome {
                    Applied::Created => "created",
                    Applied::Configured => "configured",
                    Applied::Unchanged => "unchanged",
                }
                .to_string(),
            ));
            r
        }
        ApiPodReply::Deleted { pod } => Response::json_of(200, &*pod),
        ApiPodReply::NotFound => not_found(ns, name),
        ApiPodReply::Malformed { message } => status(400, "BadRequest", &message, None),
        ApiPodReply::Invalid { message, causes } => {
            let causes: Vec<Value> = causes
                .iter()
                .map(|c| {
                    let message = match c.position {
                        Some((line, column)) => format!("{line}:{column}: {}", c.message),
                        None => c.message.clone(),
                    };
                    json!({"reason": "FieldValueInvalid", "message": message, "field": c.field})
                })
                .collect();
            status(
                422,
                "Invalid",
                &format!("Pod {name:?} is invalid: {message}"),
                details(Some(Value::Array(causes))),
            )
        }
        ApiPodReply::Conflict { message } => status(409, "Conflict", &message, details(None)),
        ApiPodReply::StorageFailed { message } => {
            status(500, "InternalError", &message, details(None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::context::Request;
    use super::super::routes::tests::{context, snapshot};
    use super::super::routes::{answer as route, Answer};
    use super::*;
    use crate::sources::api::FieldCause;
    use std::sync::Arc;

    fn call(ctx: &Context, method: &str, path: &str, ct: Option<&str>, body: &[u8]) -> Response {
        let headers: Vec<(String, String)> = ct
            .map(|c| vec![("content-type".to_string(), c.to_string())])
            .unwrap_or_default();
        match route(
            &Request {
                method,
                path,
                query: "",
                headers: &headers,
                body,
            },
            ctx,
        ) {
            Answer::Whole(r) => r,
            other => panic!("{other:?}"),
        }
    }

    /// A context whose "sync loop" answers with `reply` and records the requests.
    fn with_loop(dir: &std::path::Path, reply: ApiPodReply) -> (Context, mpsc::Receiver<String>) {
        let mut ctx = context(snapshot(), dir);
        let (seen_tx, seen) = mpsc::channel();
        let seen_tx = std::sync::Mutex::new(seen_tx);
        ctx.push = Some(Arc::new(move |r: ApiPodRequest| {
            let what = match &r.op {
                ApiPodOp::Put { data } => format!("PUT {}/{} {}", r.namespace, r.name, data.len()),
                ApiPodOp::Delete => format!("DELETE {}/{}", r.namespace, r.name),
            };
            let _ = seen_tx.lock().expect("lock").send(what);
            r.reply.send(reply.clone()).is_ok()
        }));
        (ctx, seen)
    }

    fn json(r: &Response) -> Value {
        serde_json::from_slice(&r.body).expect("json")
    }

    #[test]
    fn put_delete_and_get_speak_the_api_servers_shapes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "default"}}))
                .expect("pod");
        let (ctx, seen) = with_loop(
            dir.path(),
            ApiPodReply::Applied {
                outcome: Applied::Created,
                pod: Box::new(pod),
            },
        );
        let path = "/api/v1/namespaces/default/pods/web";
        let r = call(&ctx, "PUT", path, Some("application/yaml"), b"kind: Pod\n");
        assert_eq!(r.status, 201);
        assert_eq!(json(&r)["kind"], "Pod");
        assert!(r
            .headers
            .contains(&("X-Podvisor-Outcome", "created".into())));
        assert_eq!(seen.try_recv().expect("sent"), "PUT default/web 10");
        let r = call(&ctx, "PUT", path, Some("text/plain"), b"x");
        assert_eq!(r.status, 415);
        assert_eq!(json(&r)["reason"], "UnsupportedMediaType");
        let r = call(&ctx, "PUT", path, None, b"x");
        assert_eq!(r.status, 415);
        let r = call(
            &ctx,
            "PUT",
            "/api/v1/namespaces/Default/pods/web",
            Some("application/json"),
            b"{}",
        );
        assert_eq!(r.status, 400);
        assert!(seen.try_recv().is_err(), "refused before the loop");
        // GETs read the snapshot, whatever the source.
        let r = call(
            &ctx,
            "GET",
            "/api/v1/namespaces/default/pods/web-node",
            None,
            b"",
        );
        assert_eq!(json(&r)["metadata"]["uid"], "u1");
        assert_eq!(call(&ctx, "GET", path, None, b"").status, 404);
        let list = json(&call(&ctx, "GET", "/api/v1/pods", None, b""));
        assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
        let list = json(&call(
            &ctx,
            "GET",
            "/api/v1/namespaces/other/pods",
            None,
            b"",
        ));
        assert_eq!(list["items"].as_array().map(Vec::len), Some(0));
    }

    #[test]
    fn refusals_become_statuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (ctx, _seen) = with_loop(
            dir.path(),
            ApiPodReply::Invalid {
                message: "api:default/web:7:5: spec.containers[0].image: required".into(),
                causes: vec![FieldCause {
                    field: "spec.containers[0].image".into(),
                    message: "required".into(),
                    position: Some((7, 5)),
                }],
            },
        );
        let path = "/api/v1/namespaces/default/pods/web";
        let r = call(&ctx, "PUT", path, Some("application/json"), b"{}");
        assert_eq!(r.status, 422);
        let v = json(&r);
        assert_eq!(v["kind"], "Status");
        assert_eq!(v["reason"], "Invalid");
        assert_eq!(v["code"], 422);
        assert_eq!(
            v["details"]["causes"][0],
            json!({"reason": "FieldValueInvalid", "message": "7:5: required", "field": "spec.containers[0].image"})
        );
        assert!(v["message"]
            .as_str()
            .expect("msg")
            .contains(":7:5: spec.containers[0].image"));
        let (ctx, _seen) = with_loop(dir.path(), ApiPodReply::NotFound);
        let r = call(&ctx, "DELETE", path, None, b"");
        assert_eq!(
            (r.status, json(&r)["reason"].clone()),
            (404, json!("NotFound"))
        );
        let (ctx, _seen) = with_loop(
            dir.path(),
            ApiPodReply::Conflict {
                message: "defined by /m/web.yaml".into(),
            },
        );
        assert_eq!(call(&ctx, "DELETE", path, None, b"").status, 409);
        // No sync loop behind the port: pushes are refused.
        let ctx = context(snapshot(), dir.path());
        assert_eq!(call(&ctx, "DELETE", path, None, b"").status, 405);
    }
}
