//! sync::apipods: the push source's requests on the sync loop (`SyncEvent::ApiPod`): a PUT
//! is validated like a file's content ([`PodConfig::api_check`]), stored durably in
//! `<root>/api-pods` and only then applied, so an accepted pod survives a restart; a DELETE
//! removes the stored manifest, then the pod. The answer goes back to the node API's
//! connection thread, which waits for it. A refused manifest changes nothing: the pod pushed
//! before keeps running (last-known-good), and the client has the reason.

use super::SyncLoop;
use crate::pod::manifest::ManifestError;
use crate::reason::EventReason;
use crate::sources::api::{ApiPodOp, ApiPodReply, ApiPodRequest, Applied, FieldCause};
use crate::sources::podconfig::PushRefusal;
use crate::status::EventType;

/// The reply for a refused manifest: 422 with every field, or 400 when it does not parse.
pub fn refusal_reply(r: PushRefusal) -> ApiPodReply {
    match r {
        PushRefusal::Conflict(message) => ApiPodReply::Conflict { message },
        PushRefusal::Manifest(e) => {
            let message = e.to_string();
            match e {
                ManifestError::Invalid { errors, .. } => ApiPodReply::Invalid {
                    message,
                    causes: errors
                        .into_iter()
                        .map(|f| FieldCause {
                            field: f.field,
                            message: f.message,
                            position: f.pos.map(|p| (p.line, p.column)),
                        })
                        .collect(),
                },
                _ => ApiPodReply::Malformed { message },
            }
        }
    }
}

impl SyncLoop {
    pub(super) fn on_api_pod(&mut self, req: ApiPodRequest) {
        let reply = self.answer_api_pod(&req);
        // The connection thread may have given up waiting: the outcome stands either way.
        let _ = req.reply.try_send(reply);
    }

    fn answer_api_pod(&mut self, req: &ApiPodRequest) -> ApiPodReply {
        let (ns, name) = (req.namespace.as_str(), req.name.as_str());
        let Some(store) = self.records.api.clone() else {
            return ApiPodReply::Conflict {
                message: "this podvisor runs one pod (play): nothing can be pushed".into(),
            };
        };
        match &req.op {
            ApiPodOp::Put { data } => {
                let now = self.now_str();
                let pod = match self.config.api_check(ns, name, data, &now) {
                    Ok(p) => p,
                    Err(r) => return refusal_reply(r),
                };
                if let Err(e) = store.save(ns, name, data) {
                    log::warn!("pushed pod {ns}/{name}: {e}");
                    return ApiPodReply::StorageFailed {
                        message: e.to_string(),
                    };
                }
                let shown = pod.pod.clone();
                let outcome = self.config.api_apply(pod);
                let full = format!("{ns}/{name}");
                let what = match outcome {
                    Applied::Created => "pushed to the node API: created",
                    Applied::Configured => "pushed to the node API: configured",
                    Applied::Unchanged => "pushed to the node API: unchanged",
                };
                if outcome != Applied::Unchanged {
                    self.event(EventType::Normal, &full, None, EventReason::Pushed, what);
                }
                self.status.dirty = true;
                ApiPodReply::Applied {
                    outcome,
                    pod: Box::new(shown),
                }
            }
            ApiPodOp::Delete => {
                let full = format!("{ns}/{name}");
                if !self.config.api_has(ns, name) {
                    return match self.config.defined_elsewhere(&full) {
                        Some(src) => ApiPodReply::Conflict {
                            message: format!(
                                "pod {full} is defined by {src}, not pushed: remove it there"
                            ),
                        },
                        None => ApiPodReply::NotFound,
                    };
                }
                if let Err(e) = store.remove(ns, name) {
                    log::warn!("pushed pod {full}: {e}");
                    return ApiPodReply::StorageFailed {
                        message: e.to_string(),
                    };
                }
                let pod = self.config.api_delete(ns, name).unwrap_or_default();
                self.event(
                    EventType::Normal,
                    &full,
                    None,
                    EventReason::Pushed,
                    "deleted through the node API",
                );
                self.status.dirty = true;
                ApiPodReply::Deleted { pod: Box::new(pod) }
            }
        }
    }
}
