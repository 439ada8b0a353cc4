//! The objects of the test API server and the REST semantics over them.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::admission;
use super::http::Request;
use super::validate::{merge_patch, strict_kind};

/// An answer.
pub enum Reply {
    Json(u16, Value),
}

/// A `metav1.Status` failure.
pub fn status_error(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code,
    })
}

fn err(code: u16, reason: &str, message: impl Into<String>) -> Reply {
    Reply::Json(code, status_error(code, reason, &message.into()))
}

fn now() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    k8s_openapi::jiff::Timestamp::from_second(t as i64)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// What a request addresses.
#[derive(Debug, Clone)]
struct Target {
    kind: String,
    ns: String,
    name: String,
    sub: String,
}

fn parse_target(path: &str) -> Option<Target> {
    let p: Vec<&str> = path.trim_matches('/').split('/').collect();
    let t = |kind: &str, ns: &str, name: &str, sub: &str| {
        Some(Target {
            kind: kind.into(),
            ns: ns.into(),
            name: name.into(),
            sub: sub.into(),
        })
    };
    match p.as_slice() {
        ["api", "v1", "namespaces", ns, kind, rest @ ..] => match rest {
            [] => t(kind, ns, "", ""),
            [name] => t(kind, ns, name, ""),
            [name, sub] => t(kind, ns, name, sub),
            _ => None,
        },
        ["api", "v1", "namespaces"] => t("namespaces", "", "", ""),
        ["api", "v1", "namespaces", name] => t("namespaces", "", name, ""),
        ["api", "v1", kind] => t(kind, "", "", ""),
        ["api", "v1", kind, name] => t(kind, "", name, ""),
        ["api", "v1", kind, name, sub] => t(kind, "", name, sub),
        ["apis", "coordination.k8s.io", "v1", "namespaces", ns, "leases", rest @ ..] => {
            match rest {
                [] => t("leases", ns, "", ""),
                [name] => t("leases", ns, name, ""),
                _ => None,
            }
        }
        ["apis", "coordination.k8s.io", "v1", "leases"] => t("leases", "", "", ""),
        _ => None,
    }
}

fn singular(kind: &str) -> &str {
    kind.trim_end_matches('s')
}

/// Whether `pod` matches a field selector (`a=b`, `a==b`, `a!=b`, comma-joined).
pub fn matches(pod: &Value, selector: &str) -> bool {
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (path, want, neg) = if let Some((p, v)) = term.split_once("!=") {
            (p, v, true)
        } else if let Some((p, v)) = term.split_once("==") {
            (p, v, false)
        } else if let Some((p, v)) = term.split_once('=') {
            (p, v, false)
        } else {
            return true;
        };
        let mut cur = pod;
        for part in path.split('.') {
            cur = &cur[part];
        }
        (cur.as_str().unwrap_or("") == want) != neg
    })
}

fn qos(pod: &Value) -> &'static str {
    let cs = pod["spec"]["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut any = false;
    let mut guaranteed = !cs.is_empty();
    for c in &cs {
        let r = &c["resources"];
        for res in ["cpu", "memory"] {
            let l = &r["limits"][res];
            let q = if r["requests"][res].is_null() {
                l
            } else {
                &r["requests"][res]
            };
            any |= !l.is_null() || !q.is_null();
            guaranteed &= !l.is_null() && l == q;
        }
    }
    if guaranteed {
        "Guaranteed"
    } else if any {
        "Burstable"
    } else {
        "BestEffort"
    }
}

/// Every object, the resourceVersion counter and the pods' event history.
pub struct Store {
    pub objects: BTreeMap<String, Value>,
    pub rv: u64,
    history: Vec<(u64, Value)>,
    uids: u64,
}

impl Store {
    pub fn new() -> Store {
        let mut s = Store {
            objects: BTreeMap::new(),
            rv: 100,
            history: Vec::new(),
            uids: 0,
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            s.stamp_new(obj, &format!("namespaces//{ns}"));
        }
        s
    }

    fn stamp_new(&mut self, mut obj: Value, key: &str) -> Value {
        self.rv += 1;
        self.uids += 1;
        obj["metadata"]["uid"] =
            json!(format!("{:08x}-0000-4000-8000-{:012x}", self.uids, self.rv));
        obj["metadata"]["creationTimestamp"] = json!(now());
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.objects.insert(key.to_string(), obj.clone());
        obj
    }

    fn write(&mut self, key: &str, mut obj: Value) -> Value {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.objects.insert(key.to_string(), obj.clone());
        obj
    }

    fn record(&mut self, kind: &str, t: &str, obj: &Value) {
        if kind == "pods" {
            self.history
                .push((self.rv, json!({"type": t, "object": obj})));
        }
    }

    /// The oldest resourceVersion a watch may start from.
    pub fn oldest_history(&self) -> u64 {
        self.history
            .first()
            .map_or(0, |(rv, _)| rv.saturating_sub(1))
    }

    /// Pod events after `rv` matching `selector`.
    pub fn pod_events_after(&self, rv: u64, selector: &str) -> Vec<(u64, Value)> {
        self.history
            .iter()
            .filter(|(r, ev)| *r > rv && matches(&ev["object"], selector))
            .cloned()
            .collect()
    }

    /// Forgets the history (watches from before now get 410).
    pub fn compact(&mut self) {
        self.history.clear();
        self.rv += 1;
        self.history
            .push((self.rv, json!({"type": "BOOKMARK", "object": {}})));
    }

    fn key(t: &Target, name: &str) -> String {
        format!("{}/{}/{}", t.kind, t.ns, name)
    }

    fn node_uid(&self, node: &str) -> Option<String> {
        self.objects
            .get(&format!("nodes//{node}"))
            .and_then(|n| n["metadata"]["uid"].as_str().map(String::from))
    }

    pub fn handle(&mut self, req: &Request) -> Reply {
        if req.method == "GET" {
            if let Some(d) = discovery(&req.path) {
                return Reply::Json(200, d);
            }
        }
        let Some(t) = parse_target(&req.path) else {
            return err(
                404,
                "NotFound",
                format!(
                    "the server could not find the requested resource ({})",
                    req.path
                ),
            );
        };
        if !matches!(
            t.kind.as_str(),
            "pods" | "nodes" | "leases" | "namespaces" | "events"
        ) {
            return err(
                404,
                "NotFound",
                "the server could not find the requested resource",
            );
        }
        if !t.ns.is_empty() && !self.objects.contains_key(&format!("namespaces//{}", t.ns)) {
            return err(
                404,
                "NotFound",
                format!("namespaces \"{}\" not found", t.ns),
            );
        }
        let body: Option<Value> = if req.body.is_empty() {
            None
        } else {
            match serde_json::from_slice(&req.body) {
                Ok(v) => Some(v),
                Err(e) => return err(400, "BadRequest", format!("invalid JSON: {e}")),
            }
        };
        let node = req.user.node().map(String::from);
        match (req.method.as_str(), t.name.is_empty()) {
            ("GET", true) => self.list(&t, req),
            ("GET", false) => match self.objects.get(&Self::key(&t, &t.name)) {
                Some(o) => Reply::Json(200, o.clone()),
                None => err(
                    404,
                    "NotFound",
                    format!("{} \"{}\" not found", t.kind, t.name),
                ),
            },
            ("POST", true) => self.create(&t, body.unwrap_or(Value::Null), node.as_deref()),
            ("PUT", false) => self.update(&t, body.unwrap_or(Value::Null), node.as_deref()),
            ("PATCH", false) => {
                if req.content_type != "application/merge-patch+json" {
                    return err(415, "UnsupportedMediaType", format!("the body of the request was in an unknown format: {} (this server applies application/merge-patch+json)", req.content_type));
                }
                self.patch(&t, body.unwrap_or(Value::Null), node.as_deref())
            }
            ("DELETE", false) => self.delete(&t, body, node.as_deref()),
            _ => err(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ),
        }
    }

    fn list(&self, t: &Target, req: &Request) -> Reply {
        let selector = req.param("fieldSelector").unwrap_or("");
        let prefix = if t.ns.is_empty() {
            format!("{}/", t.kind)
        } else {
            format!("{}/{}/", t.kind, t.ns)
        };
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(k, _)| k.starts_with(&prefix))
            .map(|(_, v)| v.clone())
            .filter(|v| t.kind != "pods" || matches(v, selector))
            .collect();
        let (api_version, kind) = match t.kind.as_str() {
            "leases" => ("coordination.k8s.io/v1", "LeaseList"),
            "pods" => ("v1", "PodList"),
            "nodes" => ("v1", "NodeList"),
            "events" => ("v1", "EventList"),
            _ => ("v1", "NamespaceList"),
        };
        Reply::Json(
            200,
            json!({
                "apiVersion": api_version, "kind": kind,
                "metadata": {"resourceVersion": self.rv.to_string()},
                "items": items,
            }),
        )
    }

    fn create(&mut self, t: &Target, mut obj: Value, node: Option<&str>) -> Reply {
        if !t.sub.is_empty() {
            return err(405, "MethodNotAllowed", "create on a subresource");
        }
        if let Err(e) = strict_kind(&t.kind, &obj) {
            return err(400, "BadRequest", e);
        }
        let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
        if name.is_empty() {
            return err(422, "Invalid", format!("{} \"\" is invalid: metadata.name: Required value: name or generateName is required", singular(&t.kind)));
        }
        if !obj["metadata"]["resourceVersion"].is_null() {
            return err(
                400,
                "BadRequest",
                "resourceVersion should not be set on objects to be created",
            );
        }
        if !t.ns.is_empty() {
            let ns = obj["metadata"]["namespace"]
                .as_str()
                .unwrap_or(&t.ns)
                .to_string();
            if ns != t.ns {
                return err(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request");
            }
            obj["metadata"]["namespace"] = json!(t.ns);
        }
        if let Some(node) = node {
            let r = match t.kind.as_str() {
                "pods" => admission::pod_create(node, &obj, self.node_uid(node).as_deref()),
                "nodes" => admission::node_write(node, &name, &obj, None),
                "leases" => admission::lease(node, &t.ns, &name),
                _ => Err("forbidden".to_string()),
            };
            if let Err(m) = r {
                return err(
                    403,
                    "Forbidden",
                    format!("{} \"{name}\" is forbidden: {m}", t.kind),
                );
            }
        }
        let key = Self::key(t, &name);
        if self.objects.contains_key(&key) {
            return err(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", t.kind),
            );
        }
        if t.kind == "pods" {
            // The pod strategy: status is the server's at creation.
            let q = qos(&obj);
            obj["status"] = json!({"phase": "Pending", "qosClass": q});
        }
        let created = self.stamp_new(obj, &key);
        self.record(&t.kind, "ADDED", &created);
        Reply::Json(201, created)
    }

    fn check_rv(&self, t: &Target, cur: &Value, obj: &Value) -> Option<Reply> {
        let rv = &obj["metadata"]["resourceVersion"];
        if rv.is_null() || rv == "" {
            if t.kind == "leases" {
                return Some(err(422, "Invalid", format!("Lease.coordination.k8s.io \"{}\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update", t.name)));
            }
            return None;
        }
        (rv != &cur["metadata"]["resourceVersion"]).then(|| {
            err(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again", t.kind, t.name))
        })
    }

    /// Writes `new` over `cur` (update or patch result) with the subresource's rules.
    fn store_update(
        &mut self,
        t: &Target,
        cur: Value,
        mut new: Value,
        node: Option<&str>,
    ) -> Reply {
        let uid = &new["metadata"]["uid"];
        if !uid.is_null() && uid != &cur["metadata"]["uid"] {
            return err(409, "Conflict", format!(
                "Operation cannot be fulfilled on {} \"{}\": Precondition failed: UID in precondition: {}, UID in object meta: {}",
                t.kind, t.name, uid.as_str().unwrap_or(""), cur["metadata"]["uid"].as_str().unwrap_or("")
            ));
        }
        if let Err(e) = strict_kind(&t.kind, &new) {
            return err(400, "BadRequest", e);
        }
        // Fields the server keeps.
        for k in ["uid", "creationTimestamp", "namespace", "name"] {
            new["metadata"][k] = cur["metadata"][k].clone();
        }
        match (t.kind.as_str(), t.sub.as_str()) {
            ("pods", "status") => {
                new["spec"] = cur["spec"].clone();
                new["metadata"]["deletionTimestamp"] = cur["metadata"]["deletionTimestamp"].clone();
                new["metadata"]["ownerReferences"] = cur["metadata"]["ownerReferences"].clone();
                if let Some(node) = node {
                    if let Err(m) = admission::pod_status(node, &cur, &new) {
                        return err(
                            403,
                            "Forbidden",
                            format!("pods \"{}\" is forbidden: {m}", t.name),
                        );
                    }
                }
                let from = cur["status"]["phase"].as_str().unwrap_or("");
                let to = new["status"]["phase"].as_str().unwrap_or("");
                if matches!(from, "Succeeded" | "Failed") && from != to {
                    return err(422, "Invalid", format!("Pod \"{}\" is invalid: status.phase: Forbidden: may not be transitioned to non-terminal state", t.name));
                }
            }
            ("pods", "") => {
                if let Some(node) = node {
                    return err(403, "Forbidden", format!("pods \"{}\" is forbidden: unexpected operation \"UPDATE\", node {node:?} can only create and delete mirror pods", t.name));
                }
                new["status"] = cur["status"].clone();
            }
            ("nodes", "status") => new["spec"] = cur["spec"].clone(),
            ("nodes", "") => new["status"] = cur["status"].clone(),
            _ => {}
        }
        if let Some(node) = node {
            let r = match t.kind.as_str() {
                "nodes" => admission::node_write(node, &t.name, &new, Some(&cur)),
                "leases" => admission::lease(node, &t.ns, &t.name),
                _ => Ok(()),
            };
            if let Err(m) = r {
                return err(
                    403,
                    "Forbidden",
                    format!("{} \"{}\" is forbidden: {m}", t.kind, t.name),
                );
            }
        }
        if new == cur {
            return Reply::Json(200, cur);
        }
        let key = Self::key(t, &t.name);
        let written = self.write(&key, new);
        self.record(&t.kind, "MODIFIED", &written);
        Reply::Json(200, written)
    }

    fn update(&mut self, t: &Target, obj: Value, node: Option<&str>) -> Reply {
        let Some(cur) = self.objects.get(&Self::key(t, &t.name)).cloned() else {
            return err(
                404,
                "NotFound",
                format!("{} \"{}\" not found", t.kind, t.name),
            );
        };
        if obj["metadata"]["name"] != t.name.as_str() {
            return err(
                400,
                "BadRequest",
                "the name of the object does not match the name on the URL",
            );
        }
        if let Some(r) = self.check_rv(t, &cur, &obj) {
            return r;
        }
        self.store_update(t, cur, obj, node)
    }

    fn patch(&mut self, t: &Target, patch: Value, node: Option<&str>) -> Reply {
        let Some(cur) = self.objects.get(&Self::key(t, &t.name)).cloned() else {
            return err(
                404,
                "NotFound",
                format!("{} \"{}\" not found", t.kind, t.name),
            );
        };
        if let Some(r) = (!patch["metadata"]["resourceVersion"].is_null())
            .then(|| self.check_rv(t, &cur, &patch))
            .flatten()
        {
            return r;
        }
        let mut new = merge_patch(&cur, &patch);
        if patch["metadata"]["resourceVersion"].is_null() {
            new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
        }
        self.store_update(t, cur, new, node)
    }

    fn delete(&mut self, t: &Target, opts: Option<Value>, node: Option<&str>) -> Reply {
        let opts = opts.unwrap_or_else(|| json!({}));
        if let Err(e) = strict_kind("deleteoptions", &opts) {
            return err(400, "BadRequest", e);
        }
        let key = Self::key(t, &t.name);
        let Some(cur) = self.objects.get(&key).cloned() else {
            return err(
                404,
                "NotFound",
                format!("{} \"{}\" not found", t.kind, t.name),
            );
        };
        if let Some(uid) = opts["preconditions"]["uid"].as_str() {
            if cur["metadata"]["uid"] != uid {
                return err(409, "Conflict", format!(
                    "Operation cannot be fulfilled on {} \"{}\": Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    t.kind, t.name, cur["metadata"]["uid"].as_str().unwrap_or("")
                ));
            }
        }
        if let Some(rv) = opts["preconditions"]["resourceVersion"].as_str() {
            if cur["metadata"]["resourceVersion"] != rv {
                return err(409, "Conflict", "Precondition failed: resourceVersion");
            }
        }
        if let Some(node) = node {
            let r = match t.kind.as_str() {
                "pods" => admission::pod_delete(node, &cur),
                "leases" => admission::lease(node, &t.ns, &t.name),
                "nodes" if t.name == node => Ok(()),
                _ => Err(format!("node {node:?} may not delete this")),
            };
            if let Err(m) = r {
                return err(
                    403,
                    "Forbidden",
                    format!("{} \"{}\" is forbidden: {m}", t.kind, t.name),
                );
            }
        }
        let grace = opts["gracePeriodSeconds"].as_i64();
        Reply::Json(200, self.remove(&key, &t.kind, &cur, grace))
    }

    fn remove(&mut self, key: &str, kind: &str, cur: &Value, grace: Option<i64>) -> Value {
        let bound = cur["spec"]["nodeName"]
            .as_str()
            .is_some_and(|n| !n.is_empty());
        let grace = grace.unwrap_or_else(|| {
            cur["spec"]["terminationGracePeriodSeconds"]
                .as_i64()
                .unwrap_or(30)
        });
        if kind == "pods" && bound && grace > 0 {
            // A graceful delete of a bound pod: marked; its node finishes it.
            if !cur["metadata"]["deletionTimestamp"].is_null() {
                return cur.clone();
            }
            let mut m = cur.clone();
            m["metadata"]["deletionTimestamp"] = json!(now());
            m["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
            let written = self.write(key, m);
            self.record(kind, "MODIFIED", &written);
            return written;
        }
        self.objects.remove(key);
        self.rv += 1;
        let mut gone = cur.clone();
        gone["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        self.record(kind, "DELETED", &gone);
        gone
    }

    /// An administrator's delete (kubectl delete), graceful unless `grace0`.
    pub fn delete_as_admin(&mut self, key: &str, grace0: bool) {
        if let Some(cur) = self.objects.get(key).cloned() {
            let kind = key.split('/').next().unwrap_or("").to_string();
            self.remove(key, &kind, &cur, grace0.then_some(0));
        }
    }

    /// An administrator's edit of an object (a merge patch, no admission).
    pub fn admin_patch(&mut self, key: &str, patch: &Value) {
        if let Some(cur) = self.objects.get(key).cloned() {
            let new = merge_patch(&cur, patch);
            let kind = key.split('/').next().unwrap_or("").to_string();
            let written = self.write(key, new);
            self.record(&kind, "MODIFIED", &written);
        }
    }
}

/// The discovery documents kubectl reads.
fn discovery(path: &str) -> Option<Value> {
    let verbs = json!(["create", "delete", "get", "list", "patch", "update", "watch"]);
    Some(match path {
        "/version" => {
            json!({"major": "1", "minor": "35", "gitVersion": "v1.35.0-podvisor-test", "platform": "linux/amd64"})
        }
        "/api" => {
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        }
        "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [{
            "name": "coordination.k8s.io",
            "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
        }]}),
        "/api/v1" => json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod", "verbs": verbs, "shortNames": ["po"], "categories": ["all"]},
            {"name": "pods/status", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get", "patch", "update"]},
            {"name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node", "verbs": verbs, "shortNames": ["no"]},
            {"name": "nodes/status", "singularName": "", "namespaced": false, "kind": "Node", "verbs": ["get", "patch", "update"]},
            {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace", "verbs": ["get", "list"], "shortNames": ["ns"]},
            {"name": "events", "singularName": "event", "namespaced": true, "kind": "Event", "verbs": ["get", "list"], "shortNames": ["ev"]},
        ]}),
        "/apis/coordination.k8s.io" => {
            json!({"kind": "APIGroup", "apiVersion": "v1", "name": "coordination.k8s.io",
            "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
            "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"}})
        }
        "/apis/coordination.k8s.io/v1" => {
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "coordination.k8s.io/v1", "resources": [
                {"name": "leases", "singularName": "lease", "namespaced": true, "kind": "Lease", "verbs": verbs},
            ]})
        }
        _ => return None,
    })
}
