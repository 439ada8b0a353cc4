//! apiserver::watch: the `apiserver-watch` thread, an informer for the pods bound to this
//! node (`fieldSelector=spec.nodeName=<node>`, what the kubelet watches): a list, then a
//! watch from its resourceVersion (bookmarks on, ended by the server after 5-10 minutes and
//! opened again from the last resourceVersion seen; a `410 Gone` lists again). Mirror pods
//! go into [`super::MirrorCache`] and wake `apiserver-sync`; other pods bound to the node
//! (scheduled there by the cluster: podvisor does not run them) are ignored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::mirror::MirrorPod;
use super::{lock, Backoff, ClientError, KubeClient, Shared};

/// The pods bound to this node.
pub struct Watcher {
    client: KubeClient,
    selector: String,
    backoff: Backoff,
    shared: Arc<Shared>,
    /// The watch timeout the server is asked for (5-10 minutes, spread per node).
    timeout: Duration,
}

fn rv_of(v: &Value) -> Option<String> {
    v["metadata"]["resourceVersion"].as_str().map(String::from)
}

impl Watcher {
    pub fn new(
        client: KubeClient,
        node: &str,
        max_backoff: Duration,
        shared: Arc<Shared>,
    ) -> Watcher {
        let spread = node
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        Watcher {
            client,
            selector: format!("fieldSelector=spec.nodeName%3D{node}"),
            backoff: Backoff::new(max_backoff.min(Duration::from_secs(7)), max_backoff),
            shared,
            timeout: Duration::from_secs(300 + spread % 300),
        }
    }

    fn fail(&mut self, e: &ClientError) {
        self.shared.failed(e);
        let wait = self.backoff.fail(Instant::now(), e.retry_after());
        std::thread::sleep(wait);
    }

    /// Lists the pods; returns the list's resourceVersion.
    fn list(&mut self) -> Result<String, ClientError> {
        let r = self
            .client
            .get(&format!("/api/v1/pods?{}", self.selector))?;
        self.shared.answered();
        let mut cache = lock(&self.shared.mirrors);
        cache.pods.clear();
        for item in r.body["items"].as_array().into_iter().flatten() {
            if let Some(m) = MirrorPod::from_api(item) {
                cache.pods.insert(m.full_name(), m);
            }
        }
        cache.synced = true;
        drop(cache);
        self.shared.wake();
        Ok(rv_of(&r.body).unwrap_or_default())
    }

    /// Applies one watch event; `Err(true)` asks for a new list (410 Gone).
    fn apply(&self, ev: &Value, rv: &mut String) -> Result<(), bool> {
        let obj = &ev["object"];
        match ev["type"].as_str().unwrap_or("") {
            "ERROR" => {
                let code = obj["code"].as_u64().unwrap_or(0);
                log::debug!("api server watch: {}", obj["message"]);
                return Err(code == 410);
            }
            "BOOKMARK" => {}
            t @ ("ADDED" | "MODIFIED" | "DELETED") => {
                let name = format!(
                    "{}/{}",
                    obj["metadata"]["namespace"].as_str().unwrap_or(""),
                    obj["metadata"]["name"].as_str().unwrap_or("")
                );
                let uid = obj["metadata"]["uid"].as_str().unwrap_or("");
                let mut cache = lock(&self.shared.mirrors);
                match (t, MirrorPod::from_api(obj)) {
                    ("DELETED", _) | (_, None) => cache.remove(&name, uid),
                    (_, Some(m)) => cache.upsert(m),
                }
                drop(cache);
                self.shared.wake();
            }
            _ => return Ok(()),
        }
        if let Some(v) = rv_of(obj) {
            *rv = v;
        }
        Ok(())
    }

    /// Lists and watches until the daemon stops.
    pub fn run(mut self) {
        'list: while !self.shared.stopped() {
            let mut rv = match self.list() {
                Ok(rv) => rv,
                Err(e) => {
                    self.fail(&e);
                    continue;
                }
            };
            self.backoff.reset();
            while !self.shared.stopped() {
                let path = format!(
                    "/api/v1/pods?{}&watch=1&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds={}",
                    self.selector,
                    self.timeout.as_secs()
                );
                let mut stream = match self
                    .client
                    .watch(&path, self.timeout + Duration::from_secs(30))
                {
                    Ok(s) => s,
                    Err(e) => {
                        let gone = e.status() == Some(410);
                        self.fail(&e);
                        if gone {
                            continue 'list;
                        }
                        continue;
                    }
                };
                self.shared.answered();
                self.backoff.reset();
                loop {
                    match stream.next_event() {
                        Ok(Some(ev)) => {
                            if let Err(relist) = self.apply(&ev, &mut rv) {
                                if relist {
                                    continue 'list;
                                }
                                break;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            self.fail(&e);
                            break;
                        }
                    }
                }
            }
        }
    }
}
