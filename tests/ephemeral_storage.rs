//! Root integration test of the local storage limits in `podvisor run` (the kubelet's
//! `localStorageEviction`): a container writing past its `ephemeral-storage` limit, a pod
//! past its emptyDir `sizeLimit` and a pod past the sum of its containers' limits are each
//! evicted with the kubelet's message (phase Failed, reason Evicted, an Evicted event), their
//! containers stopped, while a well-behaved pod with the same kinds of limits keeps running;
//! an evicted pod starts again only after its eviction backoff. `podvisor node` shows the
//! usage.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, KeepLogOnPanic};
use common::{wait_until, TestEnv};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(90);
const SLEEP: &str = "trap \"exit 0\" TERM; while true; do sleep 1; done";

fn phase(v: &PodView) -> (String, String, String) {
    let st = v.pod.status.clone().unwrap_or_default();
    (
        st.phase.unwrap_or_default(),
        st.reason.unwrap_or_default(),
        st.message.unwrap_or_default(),
    )
}

fn running(d: &Daemon, pod: &str) -> bool {
    d.pod(pod).is_some_and(|v| {
        phase(&v).0 == "Running"
            && v.pod
                .status
                .and_then(|s| s.container_statuses)
                .into_iter()
                .flatten()
                .all(|c| c.state.is_some_and(|s| s.running.is_some()))
    })
}

/// A container: name, `ephemeral-storage` limit (or none), shell command.
fn container(name: &str, limit: Option<&str>, command: &str) -> String {
    let mut c = format!(
        "  - name: {name}\n    image: busybox:1.35\n    command: [sh, -c, '{command}']\n    volumeMounts:\n    - {{name: scratch, mountPath: /scratch}}\n"
    );
    if let Some(l) = limit {
        c.push_str(&format!(
            "    resources: {{limits: {{ephemeral-storage: {l}}}}}\n"
        ));
    }
    c
}

fn pod(name: &str, size_limit: Option<&str>, containers: &[String]) -> String {
    let empty_dir = match size_limit {
        Some(l) => format!("{{sizeLimit: {l}}}"),
        None => "{}".into(),
    };
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n  volumes:\n  - name: scratch\n    emptyDir: {empty_dir}\n  containers:\n{}",
        containers.concat()
    )
}

/// Writes `mib` MiB to `path` in the container, then sleeps.
fn write_then_sleep(path: &str, mib: u32) -> String {
    format!("dd if=/dev/zero of={path} bs=1M count={mib} 2>/dev/null; {SLEEP}")
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn pods_past_their_local_storage_limits_are_evicted_and_a_well_behaved_one_stays() {
    let env = TestEnv::new("ephemeral");
    let _ = env.images();
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("mkdir");
    let d = Daemon::start(&env, &manifests);
    // Within every limit: 2 MiB in its writable layer, 2 MiB in its emptyDir.
    fs::write(
        manifests.join("steady.yaml"),
        pod(
            "steady",
            Some("16Mi"),
            &[container(
                "main",
                Some("32Mi"),
                &format!(
                    "dd if=/dev/zero of=/scratch/f bs=1M count=2 2>/dev/null; {}",
                    write_then_sleep("/layer", 2)
                ),
            )],
        ),
    )
    .expect("write");
    wait_until("steady running", T, || running(&d, "steady"));
    // Container `big` writes 12 MiB into its writable layer, past its own 8Mi; the pod stays
    // within the sum (8Mi + 32Mi).
    fs::write(
        manifests.join("writer.yaml"),
        pod(
            "writer",
            None,
            &[
                container("big", Some("8Mi"), &write_then_sleep("/big", 12)),
                container("idle", Some("32Mi"), SLEEP),
            ],
        ),
    )
    .expect("write");
    // 6 MiB in a 4Mi emptyDir (no container limits).
    fs::write(
        manifests.join("scratchy.yaml"),
        pod(
            "scratchy",
            Some("4Mi"),
            &[container("main", None, &write_then_sleep("/scratch/f", 6))],
        ),
    )
    .expect("write");
    // Two containers within their 5Mi each (4 MiB of writable layer), plus 4 MiB in the
    // emptyDir: 12 MiB past the pod's 10Mi.
    fs::write(
        manifests.join("sum.yaml"),
        pod(
            "sum",
            None,
            &[
                container(
                    "a",
                    Some("5Mi"),
                    &format!(
                        "dd if=/dev/zero of=/scratch/a bs=1M count=4 2>/dev/null; {}",
                        write_then_sleep("/a", 4)
                    ),
                ),
                container("b", Some("5Mi"), &write_then_sleep("/b", 4)),
            ],
        ),
    )
    .expect("write");
    let cases = [
        (
            "writer",
            "Container big exceeded its local ephemeral storage limit \"8Mi\". ",
        ),
        (
            "scratchy",
            "Usage of EmptyDir volume \"scratch\" exceeds the limit \"4Mi\". ",
        ),
        (
            "sum",
            "Pod ephemeral local storage usage exceeds the total limit of containers 10Mi. ",
        ),
    ];
    let mut evicted_at = Vec::new();
    for (name, message) in cases {
        wait_until(&format!("{name} evicted"), T, || {
            d.pod(name).is_some_and(|v| {
                (phase(&v).0.as_str(), phase(&v).1.as_str()) == ("Failed", "Evicted")
            })
        });
        evicted_at.push(Instant::now());
        let v = d.pod(name).expect("pod");
        assert_eq!(phase(&v).2, message, "{name}");
        assert!(
            d.events().iter().any(|e| e.reason == "Evicted"
                && e.pod.starts_with(&format!("default/{name}-"))
                && e.message == message.trim_end()),
            "{name}: {:?}",
            d.events()
        );
    }
    assert!(running(&d, "steady"), "the well-behaved pod keeps running");
    // Stopped: their cgroups are empty.
    for name in ["writer", "scratchy", "sum"] {
        let uid = d.pod(name).and_then(|v| v.pod.metadata.uid).expect("uid");
        wait_until(&format!("{name}'s containers gone"), T, || {
            common::processes_in_cgroup(&format!("{}/burstable/pod{uid}", env.cgroup_parent))
                .is_empty()
                && common::processes_in_cgroup(&format!(
                    "{}/besteffort/pod{uid}",
                    env.cgroup_parent
                ))
                .is_empty()
        });
    }
    // The usage shows in `podvisor node` (and /stats), measured at every pass: 2 MiB of
    // writable layer and 2 MiB of emptyDir.
    wait_until("steady's usage in podvisor node", T, || {
        let (ok, out, _) = d.cli(&env, &["node", "-o", "json"]);
        ok && serde_json::from_str::<serde_json::Value>(&out)
            .ok()
            .and_then(|v| {
                let p = v["pods"]
                    .as_array()?
                    .iter()
                    .find(|p| p["name"].as_str().is_some_and(|n| n.starts_with("steady-")))?
                    .clone();
                p["ephemeralStorageUsed"]
                    .as_str()?
                    .strip_suffix("Mi")?
                    .parse::<u64>()
                    .ok()
            })
            .is_some_and(|mi| (4..16).contains(&mi))
    });
    let (ok, text, _) = d.cli(&env, &["node"]);
    assert!(ok && text.contains("Ephemeral Storage Used"), "{text}");
    assert!(text.contains("ephemeral-storage:"), "{text}");
    // The evicted pods start again after the eviction backoff (10 s), not at once, and the
    // writer is evicted again once it has written past its limit again.
    wait_until("writer started again", T, || {
        d.events()
            .iter()
            .any(|e| e.reason == "EvictionRecovered" && e.pod.starts_with("default/writer-"))
    });
    assert!(
        evicted_at[0].elapsed() >= Duration::from_secs(9),
        "restarted within the backoff"
    );
    wait_until("writer evicted again", T, || {
        d.events()
            .iter()
            .find(|e| e.reason == "Evicted" && e.pod.starts_with("default/writer-"))
            .is_some_and(|e| e.count >= 2)
    });
    assert!(running(&d, "steady"), "the well-behaved pod still runs");
    for f in ["steady.yaml", "writer.yaml", "scratchy.yaml", "sum.yaml"] {
        fs::remove_file(manifests.join(f)).expect("rm");
    }
    d.wait_all_gone(&env, T);
    d.stop();
}
