//! cli::describe: `podvisor describe POD` — kubectl's `describe pod` layout (same fields,
//! order and alignment) plus podvisor's manifest source and source error, and the pod's
//! events with kubectl's `(x3 over 5m)` counts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use k8s_openapi::api::core::v1::{Toleration, Volume};
use k8s_openapi::jiff::Timestamp;

use super::table::kubectl_describe;
use super::time::{event_age, rfc1123z, since, since_str};
use super::{time, write_out, CliError};
use crate::api::{client, percent_encode};
use crate::status::{EventRecord, PodView};
use container::container;

mod container;

/// The `describe` text of `view` with its `events`, ages relative to `now`.
pub fn render_describe(view: &PodView, events: &[EventRecord], now: Timestamp) -> String {
    let pod = &view.pod;
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let mut w = String::new();
    // `write!` into a String cannot fail; the results are ignored throughout.
    let _ = writeln!(w, "Name:\t{}", meta.name.as_deref().unwrap_or(""));
    let _ = writeln!(
        w,
        "Namespace:\t{}",
        meta.namespace.as_deref().unwrap_or("default")
    );
    if let Some(p) = spec.and_then(|s| s.priority) {
        let _ = writeln!(w, "Priority:\t{p}");
    }
    if let Some(pc) = spec.and_then(|s| s.priority_class_name.as_deref()) {
        let _ = writeln!(w, "Priority Class Name:\t{pc}");
    }
    let node = spec
        .and_then(|s| s.node_name.as_deref())
        .unwrap_or("<none>");
    match status.and_then(|s| s.host_ip.as_deref()) {
        Some(ip) if !ip.is_empty() => {
            let _ = writeln!(w, "Node:\t{node}/{ip}");
        }
        _ => {
            let _ = writeln!(w, "Node:\t{node}");
        }
    }
    let _ = writeln!(w, "Source:\t{}", view.source);
    if let Some(t) = status.and_then(|s| s.start_time.as_ref()) {
        let _ = writeln!(w, "Start Time:\t{}", rfc1123z(t.0));
    }
    multiline(&mut w, "Labels", meta.labels.as_ref(), |k, v| {
        format!("{k}={v}")
    });
    multiline(&mut w, "Annotations", meta.annotations.as_ref(), |k, v| {
        format!("{k}: {v}")
    });
    match &meta.deletion_timestamp {
        Some(t) => {
            let _ = writeln!(w, "Status:\tTerminating (lasts {})", since(Some(t.0), now));
        }
        None => {
            let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("");
            let _ = writeln!(w, "Status:\t{phase}");
        }
    }
    if let Some(r) = status.and_then(|s| s.reason.as_deref()) {
        let _ = writeln!(w, "Reason:\t{r}");
    }
    if let Some(m) = status.and_then(|s| s.message.as_deref()) {
        let _ = writeln!(w, "Message:\t{m}");
    }
    let _ = writeln!(
        w,
        "IP:\t{}",
        status.and_then(|s| s.pod_ip.as_deref()).unwrap_or("")
    );

    let empty_statuses = Vec::new();
    let init = spec.and_then(|s| s.init_containers.as_ref());
    if let Some(init) = init.filter(|i| !i.is_empty()) {
        let statuses = status
            .and_then(|s| s.init_container_statuses.as_ref())
            .unwrap_or(&empty_statuses);
        w.push_str("Init Containers:\n");
        for c in init {
            container(&mut w, c, statuses.iter().find(|s| s.name == c.name));
        }
    }
    if let Some(spec) = spec {
        let statuses = status
            .and_then(|s| s.container_statuses.as_ref())
            .unwrap_or(&empty_statuses);
        w.push_str("Containers:\n");
        for c in &spec.containers {
            container(&mut w, c, statuses.iter().find(|s| s.name == c.name));
        }
    }
    let conditions = status.and_then(|s| s.conditions.as_ref());
    if let Some(conditions) = conditions.filter(|c| !c.is_empty()) {
        // Reason and Message columns only when a condition has one (DisruptionTarget on an
        // evicted pod), so the usual table stays kubectl's.
        let explained = conditions.iter().any(|c| c.reason.is_some());
        w.push_str("Conditions:\n  Type\tStatus\tLastTransitionTime");
        w.push_str(if explained {
            "\tReason\tMessage\n"
        } else {
            "\n"
        });
        for c in conditions {
            let when = c
                .last_transition_time
                .as_ref()
                .map_or_else(|| "<unknown>".to_string(), |t| rfc1123z(t.0));
            let _ = write!(w, "  {}\t{}\t{when}", c.type_, c.status);
            if explained {
                let _ = write!(
                    w,
                    "\t{}\t{}",
                    c.reason.as_deref().unwrap_or(""),
                    c.message.as_deref().unwrap_or("").trim_end()
                );
            }
            w.push('\n');
        }
    }
    volumes(&mut w, spec.and_then(|s| s.volumes.as_ref()));
    if let Some(q) = status.and_then(|s| s.qos_class.as_deref()) {
        let _ = writeln!(w, "QoS Class:\t{q}");
    }
    multiline(
        &mut w,
        "Node-Selectors",
        spec.and_then(|s| s.node_selector.as_ref()),
        |k, v| format!("{k}={v}"),
    );
    tolerations(&mut w, spec.and_then(|s| s.tolerations.as_ref()));
    if let Some(e) = &view.source_error {
        let _ = writeln!(w, "Source Error:\t{}", e.message);
        let _ = writeln!(
            w,
            "\tsince {} ago; the pod keeps running from the last valid manifest",
            since_str(&e.since, now)
        );
    }
    if let Some(m) = &view.mirror {
        let mut line = m.state.clone();
        if let Some(uid) = &m.uid {
            line.push_str(&format!(" (uid {uid})"));
        }
        if let Some(t) = &m.status_time {
            line.push_str(&format!(", status written {} ago", since_str(t, now)));
        }
        let _ = writeln!(w, "Mirror Pod:\t{line}");
        if let Some(msg) = &m.message {
            let _ = writeln!(w, "\t{msg}");
        }
        let _ = writeln!(w, "API Server:\t{}", m.server_state);
        if let Some(e) = &m.server_error {
            let _ = writeln!(w, "\tlast error: {e}");
        }
    }
    if let Some(why) = &view.rolled_back {
        let _ = writeln!(w, "Update:\trolled back: {why}");
        let _ = writeln!(
            w,
            "\tthe last Ready generation runs until the manifest's spec changes again"
        );
    }
    events_section(&mut w, events, now);
    kubectl_describe(&w)
}

/// kubectl's `printLabelsMultiline` / `printAnnotationsMultiline`: sorted, one per line,
/// `<none>` when empty.
fn multiline(
    w: &mut String,
    title: &str,
    map: Option<&BTreeMap<String, String>>,
    fmt: impl Fn(&str, &str) -> String,
) {
    let _ = write!(w, "{title}:\t");
    match map.filter(|m| !m.is_empty()) {
        None => w.push_str("<none>\n"),
        Some(m) => {
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    w.push('\t');
                }
                let _ = writeln!(w, "{}", fmt(k, v));
            }
        }
    }
}

/// kubectl's `describeVolumes` for the volume kinds a static pod may use.
fn volumes(w: &mut String, volumes: Option<&Vec<Volume>>) {
    let Some(volumes) = volumes.filter(|v| !v.is_empty()) else {
        w.push_str("Volumes:\t<none>\n");
        return;
    };
    w.push_str("Volumes:\n");
    for v in volumes {
        let _ = writeln!(w, "  {}:", v.name);
        if let Some(h) = &v.host_path {
            w.push_str("    Type:\tHostPath (bare host directory volume)\n");
            let _ = writeln!(w, "    Path:\t{}", h.path);
            let _ = writeln!(w, "    HostPathType:\t{}", h.type_.as_deref().unwrap_or(""));
        } else if let Some(e) = &v.empty_dir {
            w.push_str(
                "    Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n",
            );
            let _ = writeln!(w, "    Medium:\t{}", e.medium.as_deref().unwrap_or(""));
            let limit = e.size_limit.as_ref().map_or("<unset>", |q| q.0.as_str());
            let _ = writeln!(w, "    SizeLimit:\t{limit}");
        } else if let Some(d) = &v.downward_api {
            w.push_str(
                "    Type:\tDownwardAPI (a volume populated by information about the pod)\n",
            );
            w.push_str("    Items:\n");
            for item in d.items.iter().flatten() {
                let source = match (&item.field_ref, &item.resource_field_ref) {
                    (Some(f), _) => f.field_path.clone(),
                    (None, Some(r)) => r.resource.clone(),
                    (None, None) => String::new(),
                };
                let _ = writeln!(w, "      {source} -> {}", item.path);
            }
        } else {
            w.push_str("    Type:\t<unknown>\n");
        }
    }
}

/// kubectl's `printTolerationsMultiline`: `key=value:Effect op=Exists for 300s`.
fn tolerations(w: &mut String, tolerations: Option<&Vec<Toleration>>) {
    w.push_str("Tolerations:\t");
    let Some(list) = tolerations.filter(|t| !t.is_empty()) else {
        w.push_str("<none>\n");
        return;
    };
    for (i, t) in list.iter().enumerate() {
        if i > 0 {
            w.push('\t');
        }
        let mut s = t.key.clone().unwrap_or_default();
        if let Some(v) = t.value.as_deref().filter(|v| !v.is_empty()) {
            s.push('=');
            s.push_str(v);
        }
        if let Some(e) = t.effect.as_deref().filter(|e| !e.is_empty()) {
            s.push(':');
            s.push_str(e);
        }
        if t.operator.as_deref() == Some("Exists") {
            s.push_str(" op=Exists");
        }
        if let Some(secs) = t.toleration_seconds {
            s.push_str(&format!(" for {secs}s"));
        }
        let _ = writeln!(w, "{s}");
    }
}

/// kubectl's `DescribeEvents`: `Age` is `<last> (xN over <first>)` for repeated events.
fn events_section(w: &mut String, events: &[EventRecord], now: Timestamp) {
    if events.is_empty() {
        w.push_str("Events:\t<none>\n");
        return;
    }
    w.push_str("Events:\n  Type\tReason\tAge\tFrom\tMessage\n");
    w.push_str("  ----\t------\t----\t----\t-------\n");
    for e in events {
        let type_ = e.type_.as_str();
        let age = event_age(e, now);
        let _ = writeln!(
            w,
            "  {type_}\t{}\t{age}\tpodvisor\t{}",
            e.reason,
            e.message.trim()
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::EventType;
    use crate::status::SourceErrorView;
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, ContainerState, ContainerStateRunning, ContainerStateTerminated,
        ContainerStatus, HostPathVolumeSource, Pod, PodCondition, PodSpec, PodStatus,
        ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn ts(s: &str) -> Time {
        Time(s.parse().expect("time"))
    }

    fn sample() -> PodView {
        let mut pod = Pod::default();
        pod.metadata.name = Some("web-node1".into());
        pod.metadata.namespace = Some("default".into());
        pod.metadata.labels = Some(BTreeMap::from([
            ("tier".to_string(), "edge".to_string()),
            ("app".to_string(), "web".to_string()),
        ]));
        pod.metadata.annotations = Some(BTreeMap::from([(
            "kubernetes.io/config.source".to_string(),
            "file".to_string(),
        )]));
        pod.spec = Some(PodSpec {
            node_name: Some("node1".into()),
            volumes: Some(vec![Volume {
                name: "data".into(),
                host_path: Some(HostPathVolumeSource {
                    path: "/srv/data".into(),
                    type_: Some("Directory".into()),
                }),
                ..Default::default()
            }]),
            tolerations: Some(vec![Toleration {
                operator: Some("Exists".into()),
                effect: Some("NoExecute".into()),
                ..Default::default()
            }]),
            init_containers: Some(vec![Container {
                name: "init".into(),
                image: Some("busybox".into()),
                command: Some(vec!["sh".into(), "-c".into(), "true".into()]),
                ..Default::default()
            }]),
            containers: vec![Container {
                name: "app".into(),
                image: Some("nginx:1.27".into()),
                liveness_probe: Some(k8s_openapi::api::core::v1::Probe {
                    http_get: Some(k8s_openapi::api::core::v1::HTTPGetAction {
                        path: Some("/healthz".into()),
                        port: k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(80),
                        ..Default::default()
                    }),
                    period_seconds: Some(5),
                    ..Default::default()
                }),
                ports: Some(vec![ContainerPort {
                    container_port: 80,
                    ..Default::default()
                }]),
                resources: Some(ResourceRequirements {
                    limits: Some(BTreeMap::from([(
                        "memory".to_string(),
                        Quantity("64Mi".into()),
                    )])),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        pod.status = Some(PodStatus {
            phase: Some("Running".into()),
            host_ip: Some("10.0.0.5".into()),
            qos_class: Some("Burstable".into()),
            start_time: Some(ts("2024-01-02T03:00:00Z")),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                last_transition_time: Some(ts("2024-01-02T03:01:00Z")),
                ..Default::default()
            }]),
            init_container_statuses: Some(vec![ContainerStatus {
                name: "init".into(),
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        reason: Some("Completed".into()),
                        exit_code: 0,
                        started_at: Some(ts("2024-01-02T03:00:01Z")),
                        finished_at: Some(ts("2024-01-02T03:00:02Z")),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "app".into(),
                image_id: "sha256:abc".into(),
                ready: true,
                restart_count: 2,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(ts("2024-01-02T03:03:00Z")),
                    }),
                    ..Default::default()
                }),
                last_state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        reason: Some("OOMKilled".into()),
                        exit_code: 137,
                        signal: Some(9),
                        started_at: Some(ts("2024-01-02T03:02:00Z")),
                        finished_at: Some(ts("2024-01-02T03:02:30Z")),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        PodView {
            pod,
            source: "/etc/podvisor/manifests/web.yaml".into(),
            source_error: Some(SourceErrorView {
                source: "/etc/podvisor/manifests/web.yaml".into(),
                message: "web.yaml:3:1: spec: unknown field".into(),
                since: "2024-01-02T03:04:00Z".into(),
            }),
            rolled_back: None,
            log_paths: Default::default(),
            previous_log_paths: Default::default(),
            mirror: None,
        }
    }

    fn event(type_: EventType, reason: &str, count: u32, first: &str, last: &str) -> EventRecord {
        EventRecord {
            type_,
            reason: reason.into(),
            message: format!("{reason} container app "),
            pod: "default/web-node1".into(),
            container: Some("app".into()),
            count,
            first_timestamp: first.into(),
            last_timestamp: last.into(),
        }
    }

    #[test]
    fn describe_has_kubectl_lines() {
        let now: Timestamp = "2024-01-02T03:05:00Z".parse().expect("now");
        let events = vec![
            event(
                EventType::Normal,
                "Started",
                1,
                "2024-01-02T03:03:00Z",
                "2024-01-02T03:03:00Z",
            ),
            event(
                EventType::Warning,
                "BackOff",
                3,
                "2024-01-02T03:00:00Z",
                "2024-01-02T03:04:55Z",
            ),
        ];
        let out = render_describe(&sample(), &events, now);
        let lines: Vec<&str> = out.lines().collect();
        let want = [
            "Name:         web-node1",
            "Namespace:    default",
            "Node:         node1/10.0.0.5",
            "Source:       /etc/podvisor/manifests/web.yaml",
            "Start Time:   Tue, 02 Jan 2024 03:00:00 +0000",
            "Labels:       app=web",
            "              tier=edge",
            "Annotations:  kubernetes.io/config.source: file",
            "Status:       Running",
            "Init Containers:",
            "  init:",
            "    Command:",
            "      sh",
            "      -c",
            "    State:          Terminated",
            "      Reason:       Completed",
            "      Exit Code:    0",
            "      Started:      Tue, 02 Jan 2024 03:00:01 +0000",
            "      Finished:     Tue, 02 Jan 2024 03:00:02 +0000",
            "    Ready:          False",
            "Containers:",
            "  app:",
            "    Image:          nginx:1.27",
            "    Image ID:       sha256:abc",
            "    Port:           80/TCP",
            "    Host Port:      0/TCP",
            "    State:          Running",
            "      Started:      Tue, 02 Jan 2024 03:03:00 +0000",
            "    Last State:     Terminated",
            "      Reason:       OOMKilled",
            "      Exit Code:    137",
            "      Signal:       9",
            "    Ready:          True",
            "    Restart Count:  2",
            "    Liveness:       http-get http://:80/healthz delay=0s timeout=1s period=5s #success=1 #failure=3",
            "    Limits:",
            "      memory:  64Mi",
            "Conditions:",
            "  Type   Status  LastTransitionTime",
            "  Ready  True    Tue, 02 Jan 2024 03:01:00 +0000",
            "Volumes:",
            "  data:",
            "    Type:          HostPath (bare host directory volume)",
            "    Path:          /srv/data",
            "    HostPathType:  Directory",
            "QoS Class:         Burstable",
            "Node-Selectors:    <none>",
            "Tolerations:       :NoExecute op=Exists",
            "Source Error:      web.yaml:3:1: spec: unknown field",
            "                   since 60s ago; the pod keeps running from the last valid manifest",
            "Events:",
            "  Type     Reason   Age              From      Message",
            "  ----     ------   ----             ----      -------",
            "  Normal   Started  2m               podvisor  Started container app",
            "  Warning  BackOff  5s (x3 over 5m)  podvisor  BackOff container app",
        ];
        for line in want {
            assert!(lines.contains(&line), "missing {line:?} in:\n{out}");
        }
        // Go's tabwriter semantics, as kubectl shows them: "Limits:" (no tab) ends the block,
        // so the resource lines get their own narrow alignment; "QoS Class:" shares its block
        // with the volume details above it.
        // Sections come in kubectl's order.
        let pos = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s} missing"));
        assert!(pos("Init Containers:") < pos("Containers:\n  app"));
        assert!(pos("Conditions:") < pos("QoS Class:"));
        assert!(pos("QoS Class:") < pos("Events:"));
    }

    #[test]
    fn describe_says_why_an_edit_was_rolled_back() {
        let mut v = sample();
        v.rolled_back = Some("not Ready within 5m0s".into());
        let now: Timestamp = "2024-01-02T03:05:00Z".parse().expect("now");
        let out = render_describe(&v, &[], now);
        let line = out
            .lines()
            .find(|l| l.starts_with("Update:"))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(
            line.ends_with(" rolled back: not Ready within 5m0s"),
            "{out}"
        );
        assert!(
            out.contains("the last Ready generation runs until the manifest's spec changes again"),
            "{out}"
        );
    }

    #[test]
    fn describe_shows_the_mirror_pod_and_the_connection() {
        let mut v = sample();
        let api = crate::status::ApiServerView {
            server: "https://cp:6443".into(),
            state: "Failing".into(),
            last_error: Some("GET /api/v1/pods: connection refused".into()),
            last_error_time: Some("2024-01-02T03:04:00Z".into()),
            mirrors: [(
                crate::status::full_name(&v.pod),
                crate::status::MirrorView {
                    state: "Refused".into(),
                    message: Some("namespaces \"x\" not found".into()),
                    ..Default::default()
                },
            )]
            .into(),
            ..Default::default()
        };
        v.mirror = Some(api.mirror_for(&crate::status::full_name(&v.pod)));
        let now: Timestamp = "2024-01-02T03:05:00Z".parse().expect("now");
        let out = render_describe(&v, &[], now);
        assert!(
            out.contains("Mirror Pod:") && out.contains("Refused"),
            "{out}"
        );
        assert!(out.contains("namespaces \"x\" not found"), "{out}");
        assert!(out.contains("https://cp:6443 Failing"), "{out}");
        assert!(
            out.contains(
                "last error: GET /api/v1/pods: connection refused (at 2024-01-02T03:04:00Z)"
            ),
            "{out}"
        );
        // Without --kubeconfig: nothing about it.
        v.mirror = None;
        assert!(!render_describe(&v, &[], now).contains("Mirror Pod:"));
    }

    #[test]
    fn describe_shows_why_a_pod_was_evicted() {
        let mut v = sample();
        let msg =
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki. ";
        let st = v.pod.status.as_mut().expect("status");
        st.phase = Some("Failed".into());
        st.reason = Some("Evicted".into());
        st.message = Some(msg.into());
        st.conditions
            .get_or_insert_with(Vec::new)
            .push(PodCondition {
                type_: "DisruptionTarget".into(),
                status: "True".into(),
                reason: Some("TerminationByKubelet".into()),
                message: Some(msg.into()),
                last_transition_time: Some(Time("2024-01-02T03:04:00Z".parse().expect("time"))),
                ..Default::default()
            });
        let now: Timestamp = "2024-01-02T03:05:00Z".parse().expect("now");
        let out = render_describe(&v, &[], now);
        let lines: Vec<&str> = out.lines().collect();
        for want in [
            "  Type              Status  LastTransitionTime               Reason                Message",
            "  Ready             True    Tue, 02 Jan 2024 03:01:00 +0000",
            "  DisruptionTarget  True    Tue, 02 Jan 2024 03:04:00 +0000  TerminationByKubelet  The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki.",
        ] {
            assert!(
                lines.iter().any(|l| l.trim_end() == want),
                "missing {want:?} in:\n{out}"
            );
        }
    }

    #[test]
    fn describe_without_status_or_events() {
        let mut v = sample();
        v.pod.status = None;
        v.source_error = None;
        v.pod.metadata.labels = None;
        v.pod.spec.as_mut().expect("spec").volumes = None;
        let c = &mut v.pod.spec.as_mut().expect("spec").containers[0];
        c.ports = None;
        c.resources = None;
        c.liveness_probe = None;
        let now: Timestamp = "2024-01-02T03:05:00Z".parse().expect("now");
        let out = render_describe(&v, &[], now);
        assert!(out.contains("Labels:       <none>\n"), "{out}");
        assert!(out.contains("Node:         node1\n"), "{out}");
        assert!(out.contains("    Port:        <none>\n"), "{out}");
        // Like kubectl, "Events:\t<none>" aligns with the block of tabbed lines above it.
        let tail = "    Host Port:   <none>\n\
                    Volumes:         <none>\n\
                    Node-Selectors:  <none>\n\
                    Tolerations:     :NoExecute op=Exists\n\
                    Events:          <none>\n";
        assert!(out.ends_with(tail), "{out}");
        assert!(!out.contains("State:"), "{out}");
        assert!(!out.contains("Source Error"), "{out}");
    }
}
