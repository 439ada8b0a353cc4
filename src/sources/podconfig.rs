//! podconfig: merges what the sources say into the desired set of static pods (the kubelet's
//! pkg/kubelet/config merge), with podvisor's last-known-good rule.
//!
//! Each source key (a manifest file path, or the manifest URL) holds the pods it last defined
//! successfully. A key whose new content is empty, unparseable or invalid, or a URL that fails,
//! keeps those pods (last-known-good) and carries an error instead; only removing the file, or
//! the pod from the URL body, removes a pod. Two keys defining the same namespace/name: the
//! key seen first keeps it, the other is refused with an error naming both.
//!
//! At daemon start the pods persisted by the previous run seed their keys as unconfirmed
//! last-known-good: a source that fails at start keeps them; a file that no longer exists when
//! the first directory scan completes drops them.
//!
//! Manifests are validated against what the node offers ([`NodeSecurity`]): a seccomp or
//! AppArmor profile that is not there yet refuses the manifest. Sources only report changed
//! content, so a refused manifest (up to [`RECHECK_MAX_BYTES`]) is kept and checked again by
//! [`PodConfig::recheck`]: loading the profile later starts the pod without an edit.

use std::collections::BTreeMap;

use super::api::{source_key, Applied, StoredPod, API_SOURCE_PREFIX};
use super::SourceEvent;
use crate::pod::manifest::ManifestError;
use crate::security::NodeSecurity;
use crate::staticpod::{load_api_pod, load_manifest_on, SourceKind, StaticPod};
use crate::status::SourceErrorView;

/// What happened, for events and logs (the sync loop records them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigNotice {
    /// A source's content is bad or unreachable. `pods` are the last-known-good pods that
    /// keep running. `repeated` is true when the same message was already reported.
    SourceError {
        source: String,
        message: String,
        pods: Vec<String>,
        repeated: bool,
    },
    /// A source is good again after an error.
    SourceRecovered { source: String },
    /// A pod name is defined by two sources; `refused` lost.
    Duplicate {
        full_name: String,
        kept: String,
        refused: String,
    },
}

#[derive(Debug, Clone)]
struct Entry {
    kind: SourceKind,
    pods: Vec<StaticPod>,
    error: Option<SourceErrorView>,
    /// Order in which keys were first seen: the earlier key wins a duplicate name.
    seq: u64,
    /// False for pods seeded from disk until the source confirms the key.
    confirmed: bool,
    /// The content that failed to load, kept to be checked again (node state may change).
    refused: Option<Vec<u8>>,
    /// `pods` came from the source itself in this run (not only seeded from disk).
    loaded: bool,
}

/// Why a pushed manifest is refused (nothing changes).
#[derive(Debug, thiserror::Error)]
pub enum PushRefusal {
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error("{0}")]
    Conflict(String),
}

/// Largest refused manifest kept for [`PodConfig::recheck`].
pub const RECHECK_MAX_BYTES: usize = 256 * 1024;

/// The merged configuration.
#[derive(Debug, Clone)]
pub struct PodConfig {
    node_name: String,
    security: NodeSecurity,
    entries: BTreeMap<String, Entry>,
    next_seq: u64,
    /// Node-level errors of keys without pods (e.g. the directory is missing).
    dir_error: Option<SourceErrorView>,
}

impl PodConfig {
    pub fn new(node_name: &str, security: NodeSecurity) -> PodConfig {
        PodConfig {
            node_name: node_name.to_string(),
            security,
            entries: BTreeMap::new(),
            next_seq: 0,
            dir_error: None,
        }
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Seeds last-known-good pods persisted by a previous run (unconfirmed).
    pub fn seed(&mut self, pods: Vec<StaticPod>, kind_of: impl Fn(&StaticPod) -> SourceKind) {
        for p in pods {
            let seq = self.seq();
            let kind = kind_of(&p);
            let e = self.entries.entry(p.source.clone()).or_insert(Entry {
                kind,
                pods: Vec::new(),
                error: None,
                seq,
                confirmed: false,
                refused: None,
                loaded: false,
            });
            e.pods.push(p);
        }
    }

    /// Applies one source event; returns notices to record.
    pub fn apply(&mut self, ev: SourceEvent, now: &str) -> Vec<ConfigNotice> {
        match ev {
            SourceEvent::FileChanged { path, data } => {
                let key = path.display().to_string();
                self.load(key, SourceKind::File, data, now)
            }
            SourceEvent::FileRemoved { path } => {
                self.entries.remove(&path.display().to_string());
                Vec::new()
            }
            SourceEvent::FileError { path, message } => {
                let key = path.display().to_string();
                self.set(key, SourceKind::File, Err(message), now)
            }
            SourceEvent::DirError { dir, message } => {
                let source = dir.display().to_string();
                let repeated = self
                    .dir_error
                    .as_ref()
                    .is_some_and(|e| e.message == message);
                if !repeated {
                    self.dir_error = Some(SourceErrorView {
                        source: source.clone(),
                        message: message.clone(),
                        since: now.to_string(),
                    });
                }
                vec![ConfigNotice::SourceError {
                    source,
                    message,
                    pods: Vec::new(),
                    repeated,
                }]
            }
            SourceEvent::FileScanComplete { .. } => {
                self.dir_error = None;
                // Files seeded from disk that the scan did not see were removed meanwhile.
                self.entries
                    .retain(|_, e| e.confirmed || e.kind != SourceKind::File);
                Vec::new()
            }
            SourceEvent::UrlChanged { url, data } => {
                // As with the kubelet, an empty body means "no pods" (not an error).
                if data.iter().all(u8::is_ascii_whitespace) {
                    self.set(url, SourceKind::Http, Ok(Vec::new()), now)
                } else {
                    self.load(url, SourceKind::Http, data, now)
                }
            }
            SourceEvent::UrlError { url, message } => {
                self.set(url, SourceKind::Http, Err(message), now)
            }
        }
    }

    /// Decodes and validates `data` of source `key` as its kind requires.
    fn parse(
        &self,
        key: &str,
        kind: SourceKind,
        data: &[u8],
        now: &str,
    ) -> Result<Vec<StaticPod>, ManifestError> {
        match kind {
            SourceKind::Api => {
                let (ns, name) = key
                    .strip_prefix(API_SOURCE_PREFIX)
                    .and_then(|k| k.split_once('/'))
                    .unwrap_or(("", ""));
                load_api_pod(data, key, ns, name, &self.node_name, now, &self.security)
                    .map(|p| vec![p])
            }
            _ => load_manifest_on(data, key, kind, &self.node_name, now, &self.security),
        }
    }

    /// Loads a source's new content, keeping it when it is refused (see the module docs).
    fn load(
        &mut self,
        key: String,
        kind: SourceKind,
        data: Vec<u8>,
        now: &str,
    ) -> Vec<ConfigNotice> {
        let parsed = self
            .parse(&key, kind, &data, now)
            .map_err(|e| e.to_string());
        let refused = (parsed.is_err() && data.len() <= RECHECK_MAX_BYTES).then_some(data);
        let notices = self.set(key.clone(), kind, parsed, now);
        if let Some(e) = self.entries.get_mut(&key) {
            e.refused = refused;
        }
        notices
    }

    /// The pushed pods an earlier run stored (at start, after [`PodConfig::seed`]): loaded as
    /// a file's content (a refused one keeps its seeded last-known-good pod and is checked
    /// again); seeded pushed pods with no stored manifest any more are dropped, since the
    /// store is this source's whole truth.
    pub fn load_api_stored(&mut self, stored: Vec<StoredPod>, now: &str) -> Vec<ConfigNotice> {
        let mut notices = Vec::new();
        for p in stored {
            notices.extend(self.load(
                source_key(&p.namespace, &p.name),
                SourceKind::Api,
                p.data,
                now,
            ));
        }
        self.entries
            .retain(|_, e| e.confirmed || e.kind != SourceKind::Api);
        notices
    }

    /// Checks a pushed manifest for `namespace/name` without changing anything: the pod it
    /// defines, or why it is refused (a manifest error, or another source defining that pod).
    pub fn api_check(
        &self,
        namespace: &str,
        name: &str,
        data: &[u8],
        now: &str,
    ) -> Result<StaticPod, PushRefusal> {
        let key = source_key(namespace, name);
        let mut pods = self.parse(&key, SourceKind::Api, data, now)?;
        let pod = pods
            .pop()
            .ok_or_else(|| PushRefusal::Conflict("the manifest defines no pod".to_string()))?;
        if let Some((other, _)) = self
            .entries
            .iter()
            .find(|(k, e)| **k != key && e.pods.iter().any(|p| p.full_name == pod.full_name))
        {
            return Err(PushRefusal::Conflict(format!(
                "pod {} is defined by {other}: it cannot also be pushed",
                pod.full_name
            )));
        }
        Ok(pod)
    }

    /// Applies a pushed pod [`PodConfig::api_check`] accepted (and the store saved).
    pub fn api_apply(&mut self, pod: StaticPod) -> Applied {
        let key = pod.source.clone();
        let outcome = match self.entries.get(&key).and_then(|e| e.pods.first()) {
            None => Applied::Created,
            Some(old)
                if old.spec_hash == pod.spec_hash
                    && old.meta_hash == pod.meta_hash
                    && self.entries.get(&key).is_some_and(|e| e.loaded) =>
            {
                Applied::Unchanged
            }
            Some(_) => Applied::Configured,
        };
        if outcome == Applied::Unchanged {
            return outcome;
        }
        self.set(key, SourceKind::Api, Ok(vec![pod]), "");
        outcome
    }

    /// Removes the pushed pod `namespace/name`; its pod as it was, `None` when there is none.
    pub fn api_delete(
        &mut self,
        namespace: &str,
        name: &str,
    ) -> Option<k8s_openapi::api::core::v1::Pod> {
        let e = self.entries.remove(&source_key(namespace, name))?;
        Some(e.pods.into_iter().next().map(|p| p.pod).unwrap_or_default())
    }

    /// Whether `namespace/name` is a pushed pod.
    pub fn api_has(&self, namespace: &str, name: &str) -> bool {
        self.entries.contains_key(&source_key(namespace, name))
    }

    /// The pod a source other than the push source defines as `full_name`, if any.
    pub fn defined_elsewhere(&self, full_name: &str) -> Option<String> {
        self.entries
            .iter()
            .find(|(_, e)| {
                e.kind != SourceKind::Api && e.pods.iter().any(|p| p.full_name == full_name)
            })
            .map(|(k, _)| k.clone())
    }

    /// True if some refused content waits to be checked again.
    pub fn has_refused(&self) -> bool {
        self.entries.values().any(|e| e.refused.is_some())
    }

    /// Checks refused content again against the node as it is now; notices as for new
    /// content (a repeated error is marked `repeated`).
    pub fn recheck(&mut self, now: &str) -> Vec<ConfigNotice> {
        let pending: Vec<(String, SourceKind, Vec<u8>)> = self
            .entries
            .iter_mut()
            .filter_map(|(k, e)| e.refused.take().map(|d| (k.clone(), e.kind, d)))
            .collect();
        pending
            .into_iter()
            .flat_map(|(key, kind, data)| self.load(key, kind, data, now))
            .collect()
    }

    fn set(
        &mut self,
        key: String,
        kind: SourceKind,
        parsed: Result<Vec<StaticPod>, String>,
        now: &str,
    ) -> Vec<ConfigNotice> {
        let seq = self.seq();
        let e = self.entries.entry(key.clone()).or_insert(Entry {
            kind,
            pods: Vec::new(),
            error: None,
            seq,
            confirmed: true,
            refused: None,
            loaded: false,
        });
        e.confirmed = true;
        e.refused = None;
        match parsed {
            Ok(pods) => {
                e.pods = pods;
                e.loaded = true;
                if e.error.take().is_some() {
                    vec![ConfigNotice::SourceRecovered { source: key }]
                } else {
                    Vec::new()
                }
            }
            Err(message) => {
                let repeated = e.error.as_ref().is_some_and(|x| x.message == message);
                if !repeated {
                    e.error = Some(SourceErrorView {
                        source: key.clone(),
                        message: message.clone(),
                        since: now.to_string(),
                    });
                }
                vec![ConfigNotice::SourceError {
                    source: key,
                    message,
                    pods: e.pods.iter().map(|p| p.full_name.clone()).collect(),
                    repeated,
                }]
            }
        }
    }

    /// The desired pods by namespace/name, and the duplicate refusals (as notices).
    pub fn desired(&self) -> (BTreeMap<String, StaticPod>, Vec<ConfigNotice>) {
        let mut keys: Vec<(&String, &Entry)> = self.entries.iter().collect();
        keys.sort_by_key(|(_, e)| e.seq);
        let mut out: BTreeMap<String, StaticPod> = BTreeMap::new();
        let mut dups = Vec::new();
        for (key, e) in keys {
            for p in &e.pods {
                match out.get(&p.full_name) {
                    Some(kept) if kept.source != *key => dups.push(ConfigNotice::Duplicate {
                        full_name: p.full_name.clone(),
                        kept: kept.source.clone(),
                        refused: key.clone(),
                    }),
                    Some(_) => {}
                    None => {
                        out.insert(p.full_name.clone(), p.clone());
                    }
                }
            }
        }
        (out, dups)
    }

    /// Whether the pods of key `source` came from the source in this run, rather than only
    /// from the previous run's records (a source that has not answered, or only with errors).
    pub fn loaded_from_source(&self, source: &str) -> bool {
        self.entries.get(source).is_some_and(|e| e.loaded)
    }

    /// The error of the key that defines `full_name`, if any.
    pub fn error_for(&self, full_name: &str, source: &str) -> Option<SourceErrorView> {
        self.entries
            .get(source)
            .filter(|e| e.pods.iter().any(|p| p.full_name == full_name))
            .and_then(|e| e.error.clone())
    }

    /// Errors of keys that define no pod (nothing keeps running on their behalf), plus a
    /// directory error.
    pub fn orphan_errors(&self) -> Vec<SourceErrorView> {
        let mut v: Vec<SourceErrorView> = self
            .entries
            .values()
            .filter(|e| e.pods.is_empty())
            .filter_map(|e| e.error.clone())
            .collect();
        if let Some(d) = &self.dir_error {
            v.push(d.clone());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    const NOW: &str = "2026-01-01T00:00:00Z";

    fn manifest(name: &str, image: &str) -> Vec<u8> {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  containers:\n  - name: c\n    image: {image}\n"
        )
        .into_bytes()
    }

    fn changed(path: &str, data: Vec<u8>) -> SourceEvent {
        SourceEvent::FileChanged {
            path: PathBuf::from(path),
            data,
        }
    }

    #[test]
    fn refused_content_is_checked_again_when_the_node_changes() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().expect("tempdir");
        let security = NodeSecurity {
            seccomp_root: root.path().to_path_buf(),
            ..NodeSecurity::default()
        };
        let mut c = PodConfig::new("n", security);
        let m = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  securityContext:\n    seccompProfile: {type: Localhost, localhostProfile: x.json}\n  containers:\n  - {name: c, image: busybox}\n";
        let n = c.apply(changed("/m/p.yaml", m.as_bytes().to_vec()), NOW);
        assert!(
            matches!(&n[..], [ConfigNotice::SourceError { message, .. }] if message.contains("localhostProfile")),
            "{n:?}"
        );
        assert!(c.has_refused() && c.desired().0.is_empty());
        // Still missing: the same error again, marked repeated.
        let n = c.recheck(NOW);
        assert!(
            matches!(&n[..], [ConfigNotice::SourceError { repeated: true, .. }]),
            "{n:?}"
        );
        let p = root.path().join("x.json");
        std::fs::write(&p, r#"{"defaultAction": "SCMP_ACT_ALLOW"}"#).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let n = c.recheck(NOW);
        assert_eq!(
            n,
            vec![ConfigNotice::SourceRecovered {
                source: "/m/p.yaml".into()
            }]
        );
        assert!(!c.has_refused());
        assert!(c.desired().0.contains_key("default/p-n"));
        // Content too large to keep is not checked again.
        let mut big = m.as_bytes().to_vec();
        big.extend(std::iter::repeat_n(b'#', RECHECK_MAX_BYTES));
        std::fs::remove_file(&p).expect("rm");
        c.apply(changed("/m/q.yaml", big), NOW);
        assert!(!c.has_refused());
    }

    #[test]
    fn bad_content_keeps_the_last_known_good_pod() {
        let mut c = PodConfig::new("node1", NodeSecurity::default());
        assert!(c
            .apply(changed("/m/web.yaml", manifest("web", "busybox")), NOW)
            .is_empty());
        let (d, _) = c.desired();
        let uid = d["default/web-node1"].pod.metadata.uid.clone();
        for bad in [b"".to_vec(), b"kind: [".to_vec(), manifest("Bad_Name", "x")] {
            let n = c.apply(changed("/m/web.yaml", bad), NOW);
            assert!(
                matches!(&n[..], [ConfigNotice::SourceError { pods, .. }] if pods == &vec!["default/web-node1".to_string()]),
                "{n:?}"
            );
            let (d, _) = c.desired();
            assert_eq!(d["default/web-node1"].pod.metadata.uid, uid);
            assert!(c.error_for("default/web-node1", "/m/web.yaml").is_some());
        }
        // Fixing it clears the error.
        let n = c.apply(changed("/m/web.yaml", manifest("web", "busybox")), NOW);
        assert_eq!(
            n,
            vec![ConfigNotice::SourceRecovered {
                source: "/m/web.yaml".into()
            }]
        );
        // Only removing the file removes the pod.
        c.apply(
            SourceEvent::FileRemoved {
                path: PathBuf::from("/m/web.yaml"),
            },
            NOW,
        );
        assert!(c.desired().0.is_empty());
    }

    #[test]
    fn repeated_errors_are_flagged_for_rate_limited_logging() {
        let mut c = PodConfig::new("n", NodeSecurity::default());
        c.apply(changed("/m/a.yaml", manifest("a", "x")), NOW);
        let first = c.apply(changed("/m/a.yaml", b"{".to_vec()), NOW);
        let second = c.apply(changed("/m/a.yaml", b"{".to_vec()), NOW);
        assert!(matches!(
            &first[..],
            [ConfigNotice::SourceError {
                repeated: false,
                ..
            }]
        ));
        assert!(matches!(
            &second[..],
            [ConfigNotice::SourceError { repeated: true, .. }]
        ));
    }

    #[test]
    fn duplicate_names_keep_the_first_source() {
        let mut c = PodConfig::new("n", NodeSecurity::default());
        c.apply(changed("/m/b.yaml", manifest("web", "first")), NOW);
        c.apply(changed("/m/a.yaml", manifest("web", "second")), NOW);
        let (d, dups) = c.desired();
        assert_eq!(d.len(), 1);
        assert_eq!(d["default/web-n"].source, "/m/b.yaml");
        assert_eq!(
            dups,
            vec![ConfigNotice::Duplicate {
                full_name: "default/web-n".into(),
                kept: "/m/b.yaml".into(),
                refused: "/m/a.yaml".into()
            }]
        );
        // When the first goes away the second takes over.
        c.apply(
            SourceEvent::FileRemoved {
                path: PathBuf::from("/m/b.yaml"),
            },
            NOW,
        );
        let (d, dups) = c.desired();
        assert_eq!(d["default/web-n"].source, "/m/a.yaml");
        assert!(dups.is_empty());
    }

    #[test]
    fn url_errors_keep_pods_and_an_empty_body_removes_them() {
        let mut c = PodConfig::new("n", NodeSecurity::default());
        let url = "http://127.0.0.1:1/pods".to_string();
        let body = [
            manifest("a", "x"),
            b"---\n".to_vec(),
            manifest("b", "other"),
        ]
        .concat();
        c.apply(
            SourceEvent::UrlChanged {
                url: url.clone(),
                data: body,
            },
            NOW,
        );
        assert_eq!(c.desired().0.len(), 2, "{:?}", c.orphan_errors());
        let n = c.apply(
            SourceEvent::UrlError {
                url: url.clone(),
                message: "timed out".into(),
            },
            NOW,
        );
        assert!(matches!(&n[..], [ConfigNotice::SourceError { pods, .. }] if pods.len() == 2));
        assert_eq!(c.desired().0.len(), 2);
        c.apply(
            SourceEvent::UrlChanged {
                url,
                data: Vec::new(),
            },
            NOW,
        );
        assert!(c.desired().0.is_empty());
    }

    #[test]
    fn seeded_pods_survive_a_failing_source_and_go_when_the_file_is_gone() {
        let mut fresh = PodConfig::new("n", NodeSecurity::default());
        fresh.apply(changed("/m/a.yaml", manifest("a", "x")), NOW);
        fresh.apply(changed("/m/b.yaml", manifest("b", "x")), NOW);
        let persisted: Vec<StaticPod> = fresh.desired().0.into_values().collect();

        let mut c = PodConfig::new("n", NodeSecurity::default());
        c.seed(persisted, |_| SourceKind::File);
        assert_eq!(c.desired().0.len(), 2);
        // a.yaml is now broken: it keeps its pod; b.yaml is not seen by the scan: removed.
        c.apply(changed("/m/a.yaml", b"{".to_vec()), NOW);
        c.apply(
            SourceEvent::FileScanComplete {
                dir: PathBuf::from("/m"),
            },
            NOW,
        );
        let (d, _) = c.desired();
        assert_eq!(d.keys().cloned().collect::<Vec<_>>(), vec!["default/a-n"]);
        // a.yaml's pod is still the seeded one: the source has not given valid content yet.
        assert!(!c.loaded_from_source("/m/a.yaml"));
        let n = c.apply(changed("/m/a.yaml", manifest("a", "x2")), NOW);
        assert!(c.loaded_from_source("/m/a.yaml"), "{n:?}");
    }
}
