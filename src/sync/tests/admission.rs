//! Admission against node allocatable.

use super::*;

fn small_node(rt: FakeRuntime, dir: &tempfile::TempDir) -> Harness {
    harness_allocatable(
        rt,
        dir.path().join("static-pods"),
        Some(crate::pod::resources::Amounts {
            cpu_millis: 1000,
            memory_bytes: 1 << 30,
        }),
    )
}

fn requests(cpu: &str, memory: &str) -> String {
    format!("    resources: {{requests: {{cpu: {cpu}, memory: {memory}}}}}\n")
}

fn status_of(h: &Harness, pod: &str) -> k8s_openapi::api::core::v1::PodStatus {
    h.snap()
        .find_pod(pod)
        .and_then(|v| v.pod.status.clone())
        .expect("status")
}

#[test]
fn pod_that_does_not_fit_is_rejected_not_started() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("600m", "100Mi")),
    );
    assert_eq!(h.rt.starts().len(), 1);
    let calls_before = h.rt.calls().len();
    h.file(
        "b.yaml",
        &(pod_yaml("b", "busybox", "") + &requests("500m", "100Mi")),
    );
    assert_eq!(
        h.rt.calls().len(),
        calls_before,
        "no sandbox, no container: {:?}",
        h.rt.calls()
    );
    let st = status_of(&h, "b");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(st.container_statuses, None);
    let view = h.snap().find_pod("b").cloned().expect("view");
    let summary = crate::cli::pod_summary(&view.pod, k8s_openapi::jiff::Timestamp::now());
    assert_eq!(summary.status, "OutOfcpu");
    assert_eq!(
        st.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 500, used: 600, capacity: 1000"
        )
    );
    let ev = h
        .snap()
        .events
        .iter()
        .find(|e| e.reason == "OutOfcpu")
        .cloned()
        .expect("event");
    assert_eq!(ev.type_, crate::status::EventType::Warning);
    assert!(ev.pod.ends_with("b-node1"), "{}", ev.pod);
    // A pod without requests always fits.
    h.file("c.yaml", &pod_yaml("c", "busybox", ""));
    assert_eq!(status_of(&h, "c").phase.as_deref(), Some("Running"));
}

#[test]
fn memory_is_checked_with_init_containers_by_the_max_rule() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    // The init container alone asks for more memory than the node has.
    let init = "  initContainers:\n  - name: init\n    image: busybox\n    resources: {requests: {memory: 2Gi}}\n";
    h.file("big.yaml", &pod_yaml("big", "busybox", init));
    let st = status_of(&h, "big");
    assert_eq!(st.reason.as_deref(), Some("OutOfmemory"));
    assert!(h.rt.starts().is_empty());
}

#[test]
fn rejected_pod_is_admitted_again_when_its_manifest_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("2", "100Mi")),
    );
    assert_eq!(status_of(&h, "a").reason.as_deref(), Some("OutOfcpu"));
    assert!(h.rt.starts().is_empty());
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("500m", "100Mi")),
    );
    let st = status_of(&h, "a");
    assert_eq!(st.phase.as_deref(), Some("Running"));
    assert_eq!(st.reason, None);
    assert_eq!(h.rt.starts().len(), 1);
}

#[test]
fn removed_pods_free_their_requests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    h.scan_done();
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("800m", "100Mi")),
    );
    h.remove_file("a.yaml");
    h.file(
        "b.yaml",
        &(pod_yaml("b", "busybox", "") + &requests("800m", "100Mi")),
    );
    assert_eq!(status_of(&h, "b").reason, None);
    assert_eq!(h.rt.starts().len(), 2);
}

#[test]
fn after_a_restart_running_pods_are_counted_before_new_ones_are_admitted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = FakeRuntime::default();
    let mut h1 = small_node(rt.clone(), &dir);
    h1.scan_done();
    h1.file(
        "z.yaml",
        &(pod_yaml("z", "busybox", "") + &requests("800m", "100Mi")),
    );
    h1.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &requests("800m", "100Mi")),
    );
    assert_eq!(status_of(&h1, "a").reason.as_deref(), Some("OutOfcpu"));
    drop(h1);
    // Both pods are persisted; "a" sorts first but "z" runs: z must be counted first.
    let starts = rt.starts().len();
    let h2 = small_node(rt.clone(), &dir);
    assert_eq!(status_of(&h2, "a").reason.as_deref(), Some("OutOfcpu"));
    assert_eq!(status_of(&h2, "z").phase.as_deref(), Some("Running"));
    assert_eq!(rt.starts().len(), starts, "{:?}", rt.calls());
}

#[test]
fn ephemeral_storage_requests_count_against_the_allocatable_storage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    h.sync.cfg.allocatable_ephemeral_storage = Some(1 << 30);
    let storage = |q: &str| format!("    resources: {{requests: {{ephemeral-storage: {q}}}}}\n");
    h.file(
        "a.yaml",
        &(pod_yaml("a", "busybox", "") + &storage("600Mi")),
    );
    assert_eq!(h.rt.starts().len(), 1);
    // Limits count as requests when no request is given.
    h.file(
        "b.yaml",
        &(pod_yaml("b", "busybox", "") + "    resources: {limits: {ephemeral-storage: 500Mi}}\n"),
    );
    let st = status_of(&h, "b");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("OutOfephemeral-storage"));
    assert_eq!(
        st.message.as_deref(),
        Some(&*format!(
            "Pod was rejected: Node didn't have enough resource: ephemeral-storage, requested: {}, used: {}, capacity: {}",
            500u64 << 20,
            600u64 << 20,
            1u64 << 30
        ))
    );
    assert!(h
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "OutOfephemeral-storage"));
    h.file(
        "c.yaml",
        &(pod_yaml("c", "busybox", "") + &storage("400Mi")),
    );
    assert_eq!(h.rt.starts().len(), 2, "400Mi fits beside 600Mi");
}

#[test]
fn hugepages_beyond_the_node_capacity_are_rejected_with_out_of_hugepages() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = small_node(FakeRuntime::default(), &dir);
    // The node has 4 pages of 2Mi (the harness reads <dir>/hugepages).
    let size = dir.path().join("hugepages/hugepages-2048kB");
    std::fs::create_dir_all(&size).expect("mkdir");
    std::fs::write(size.join("nr_hugepages"), "4\n").expect("write");
    let huge =
        |n: &str| format!("    resources: {{limits: {{hugepages-2Mi: {n}, memory: 10Mi}}}}\n");
    h.file("a.yaml", &(pod_yaml("a", "busybox", "") + &huge("6Mi")));
    assert_eq!(status_of(&h, "a").phase.as_deref(), Some("Running"));
    h.file("b.yaml", &(pod_yaml("b", "busybox", "") + &huge("4Mi")));
    let st = status_of(&h, "b");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("OutOfhugepages-2Mi"));
    assert_eq!(
        st.message.as_deref(),
        Some(
            "Pod was rejected: Node didn't have enough resource: hugepages-2Mi, requested: 4194304, used: 6291456, capacity: 8388608"
        )
    );
    assert!(h
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "OutOfhugepages-2Mi"));
    // A size the node does not have at all.
    h.file(
        "c.yaml",
        &(pod_yaml("c", "busybox", "")
            + "    resources: {limits: {hugepages-1Gi: 1Gi, memory: 10Mi}}\n"),
    );
    assert_eq!(
        status_of(&h, "c").reason.as_deref(),
        Some("OutOfhugepages-1Gi")
    );
    assert_eq!(h.rt.starts().len(), 1);
}

#[test]
fn a_host_port_taken_by_another_pod_is_refused_naming_it() {
    let mut h = harness();
    let ports =
        |port: u32, ip: &str| format!("    ports: [{{containerPort: 80, hostPort: {port}{ip}}}]\n");
    h.file("a.yaml", &(pod_yaml("a", "busybox", "") + &ports(8080, "")));
    assert_eq!(status_of(&h, "a").phase.as_deref(), Some("Running"));
    let calls_before = h.rt.calls().len();
    // Same port on a specific host IP: collides with a's wildcard.
    h.file(
        "b.yaml",
        &(pod_yaml("b", "busybox", "") + &ports(8080, ", hostIP: 127.0.0.1")),
    );
    assert_eq!(h.rt.calls().len(), calls_before, "nothing created for b");
    let st = status_of(&h, "b");
    assert_eq!(st.phase.as_deref(), Some("Failed"));
    assert_eq!(st.reason.as_deref(), Some("NodePorts"));
    assert_eq!(
        st.message.as_deref(),
        Some(
            "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports: hostPort 8080/TCP on 127.0.0.1 is used by pod default/a-node1 (hostPort 8080/TCP)"
        )
    );
    assert!(h
        .snap()
        .events
        .iter()
        .any(|e| e.reason == "NodePorts" && e.pod.ends_with("b-node1")));
    // Another port, or a hostNetwork pod's own container port elsewhere, is fine.
    h.file("c.yaml", &(pod_yaml("c", "busybox", "") + &ports(8081, "")));
    assert_eq!(status_of(&h, "c").phase.as_deref(), Some("Running"));
    // A hostNetwork pod's container port counts as a host port.
    h.file(
        "d.yaml",
        &(pod_yaml("d", "busybox", "  hostNetwork: true\n")
            + "    ports: [{containerPort: 8081}]\n"),
    );
    assert_eq!(status_of(&h, "d").reason.as_deref(), Some("NodePorts"));
}

#[test]
fn the_sandbox_ips_are_the_pod_ips() {
    let rt = FakeRuntime::default();
    rt.state.lock().expect("lock").pod_ips = vec!["10.86.0.7".into(), "fd86::7".into()];
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = harness_with(rt, dir.path().join("static-pods"));
    h.file("a.yaml", &pod_yaml("a", "busybox", ""));
    let st = status_of(&h, "a");
    assert_eq!(st.pod_ip.as_deref(), Some("10.86.0.7"));
    let ips: Vec<String> = st
        .pod_ips
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.ip)
        .collect();
    assert_eq!(ips, ["10.86.0.7", "fd86::7"]);
    // hostNetwork: the host's IP, whatever the sandbox says.
    h.file("h.yaml", &pod_yaml("h", "busybox", "  hostNetwork: true\n"));
    assert_ne!(status_of(&h, "h").pod_ip.as_deref(), Some("10.86.0.7"));
}
