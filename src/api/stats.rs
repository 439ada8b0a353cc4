//! api::stats: `GET /stats[?pod=<query>]` — cgroup usage of every pod and of its running
//! containers, read on the API thread from the cgroup files (read-only; the sync loop is not
//! involved). The pods and container ids come from the published snapshot; the cgroup paths
//! follow [`crate::cgroups::layout`].

use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Pod;
use serde::{Deserialize, Serialize};

use super::ApiError;
use crate::cgroups::stats::CgroupStats;
use crate::cgroups::{CgroupDriver, CgroupRoot};
use crate::pod::qos::QosClass;
use crate::status::{PodView, Snapshot};

/// Where the API finds podvisor's cgroups.
#[derive(Debug, Clone)]
pub struct StatsSource {
    pub root: CgroupRoot,
    /// podvisor's cgroup parent (`--cgroup-parent` / cgroupRoot).
    pub parent: String,
    /// Whose names the tree uses (`cgroupDriver`).
    pub driver: CgroupDriver,
    /// What `GET /node` shows besides the snapshot (and the pods' ephemeral storage).
    pub node: super::node::NodeSource,
}

/// Usage of one running container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    pub container_id: String,
    /// The cgroup path relative to the cgroup root.
    pub cgroup: String,
    /// `None` when the cgroup is gone (the container just exited).
    pub stats: Option<CgroupStats>,
}

/// Usage of one pod (its pod cgroup, containers included) and of its running containers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub qos_class: String,
    pub cgroup: String,
    /// When the files were read, microseconds since the Unix epoch (CPU rates divide CPU time
    /// differences by differences of this).
    pub timestamp_usec: u64,
    pub stats: Option<CgroupStats>,
    pub containers: Vec<ContainerStats>,
    /// Writable layers, logs and emptyDir volumes on disk (measured every housekeeping
    /// pass; absent before the first one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<crate::status::EphemeralStorageUsage>,
}

fn qos_of(pod: &Pod) -> Option<QosClass> {
    QosClass::from_name(pod.status.as_ref()?.qos_class.as_deref()?)
}

fn now_usec() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn stats_of(root: &CgroupRoot, rel: &str) -> Option<CgroupStats> {
    match root.stats(rel) {
        Ok(s) => s,
        Err(e) => {
            log::debug!("api: stats of {rel}: {e}");
            None
        }
    }
}

fn pod_stats(view: &PodView, src: &StatsSource) -> Option<PodStats> {
    let pod = &view.pod;
    let uid = pod.metadata.uid.clone()?;
    let qos = qos_of(pod)?;
    let rel = src.driver.pod_cgroup(&src.parent, qos, &uid);
    let status = pod.status.as_ref()?;
    let mut containers = Vec::new();
    for c in status
        .init_container_statuses
        .iter()
        .flatten()
        .chain(status.container_statuses.iter().flatten())
    {
        let running = c.state.as_ref().is_some_and(|s| s.running.is_some());
        let id = c
            .container_id
            .as_deref()
            .and_then(|i| i.strip_prefix("podvisor://"));
        let (true, Some(id)) = (running, id) else {
            continue;
        };
        let crel = src.driver.container_cgroup(&src.parent, qos, &uid, id);
        containers.push(ContainerStats {
            name: c.name.clone(),
            container_id: id.to_string(),
            stats: stats_of(&src.root, &crel),
            cgroup: crel,
        });
    }
    Some(PodStats {
        namespace: pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into()),
        name: pod.metadata.name.clone().unwrap_or_default(),
        qos_class: format!("{qos:?}"),
        timestamp_usec: now_usec(),
        stats: stats_of(&src.root, &rel),
        ephemeral_storage: src.node.storage.get().get(&uid).cloned(),
        uid,
        cgroup: rel,
        containers,
    })
}

/// The stats of every pod of `snap` (or of the one `pod` names). Pods without a uid or a QoS
/// class (not yet admitted) are left out.
pub fn collect(
    snap: &Snapshot,
    pod: Option<&str>,
    src: &StatsSource,
) -> Result<Vec<PodStats>, ApiError> {
    match pod {
        Some(q) => {
            let view = snap.find_pod(q).ok_or_else(|| ApiError::PodNotFound {
                query: q.to_string(),
            })?;
            Ok(pod_stats(view, src).into_iter().collect())
        }
        None => Ok(snap.pods.iter().filter_map(|v| pod_stats(v, src)).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn view(uid: &str, qos: &str, running_id: &str) -> PodView {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web-n1", "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "main"}, {"name": "side"}]},
            "status": {"qosClass": qos, "containerStatuses": [
                {"name": "main", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                 "containerID": format!("podvisor://{running_id}"),
                 "state": {"running": {}}},
                {"name": "side", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "containerID": "podvisor://old",
                 "state": {"terminated": {"exitCode": 0}}}
            ]}
        }))
        .expect("pod");
        PodView {
            pod,
            source: "/m/web.yaml".into(),
            source_error: None,
            rolled_back: None,
            log_paths: Default::default(),
            previous_log_paths: Default::default(),
            mirror: None,
        }
    }

    #[test]
    fn stats_follow_the_qos_layout_and_skip_exited_containers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = dir.path();
        fs::write(r.join("cgroup.controllers"), "cpu memory pids\n").expect("w");
        let c = r.join("pv/burstable/podu1/c1");
        fs::create_dir_all(&c).expect("mkdir");
        fs::write(c.join("memory.current"), "4096\n").expect("w");
        fs::write(r.join("pv/burstable/podu1/memory.current"), "8192\n").expect("w");
        let snap = Snapshot {
            node_name: "n1".into(),
            pods: vec![view("u1", "Burstable", "c1")],
            ..Default::default()
        };
        let src = StatsSource {
            root: CgroupRoot::new(r),
            parent: "pv".into(),
            driver: CgroupDriver::Cgroupfs,
            node: Default::default(),
        };
        let all = collect(&snap, None, &src).expect("collect");
        assert_eq!(all.len(), 1);
        let p = &all[0];
        assert_eq!(p.cgroup, "/pv/burstable/podu1");
        assert_eq!(
            p.stats.as_ref().and_then(|s| s.memory_usage_bytes),
            Some(8192)
        );
        assert_eq!(p.containers.len(), 1, "{:?}", p.containers);
        assert_eq!(p.containers[0].cgroup, "/pv/burstable/podu1/c1");
        assert_eq!(
            p.containers[0]
                .stats
                .as_ref()
                .and_then(|s| s.memory_working_set_bytes),
            Some(4096)
        );
        let err = collect(&snap, Some("nope"), &src).expect_err("missing pod");
        assert_eq!(err.status(), 404);
        assert_eq!(collect(&snap, Some("web"), &src).expect("one").len(), 1);
    }

    #[test]
    fn stats_route_parses() {
        use crate::api::{parse_request, ApiRequest};
        assert_eq!(
            parse_request("GET", "/stats").expect("parse"),
            ApiRequest::Stats { pod: None }
        );
        assert_eq!(
            parse_request("GET", "/stats?pod=kube-system%2Fetcd").expect("parse"),
            ApiRequest::Stats {
                pod: Some("kube-system/etcd".into())
            }
        );
        assert!(parse_request("GET", "/stats?bogus=1").is_err());
    }
}
