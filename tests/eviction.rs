//! Root integration tests of the eviction manager in `podvisor run`:
//! - memory: the memory signal read from a fake /proc and cgroup tree (the test hook
//!   `PODVISOR_TEST_NODE_SIGNALS`; the host's memory cannot be pressed safely): crossing
//!   memory.available evicts the BestEffort pod (its working set covers what the node lacks),
//!   never the Guaranteed or the critical one, with the kubelet's message; MemoryPressure shows and clears; the evicted pod starts again;
//! - disk: the root and log dirs on a small tmpfs filled on purpose: node-level reclaim (a
//!   gone pod's logs) first, then the pod filling an emptyDir is evicted, its volume removed,
//!   and it starts again once DiskPressure has cleared;
//! - a filler file outside the pods (on a tmpfs and on a loop ext4): DiskPressure, new pods refused, but no pod evicted (none
//!   can give the space back), the reason naming the filler in `podvisor node` and an
//!   `EvictionSkipped` event;
//!   the critical pod listed as never evicted; once the filler goes, admission resumes.

mod common;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use common::daemon::{Daemon, KeepLogOnPanic};
use common::smallfs::{Kind, SmallFs};
use common::{wait_until, TestEnv};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(90);

fn phase(v: &PodView) -> (String, String) {
    let st = v.pod.status.clone().unwrap_or_default();
    (st.phase.unwrap_or_default(), st.reason.unwrap_or_default())
}

fn running(d: &Daemon, pod: &str) -> bool {
    d.pod(pod).is_some_and(|v| {
        v.pod
            .status
            .and_then(|s| s.container_statuses)
            .into_iter()
            .flatten()
            .all(|c| c.state.is_some_and(|s| s.running.is_some()))
            && phase(&d.pod(pod).expect("pod")).0 == "Running"
    })
}

fn condition(d: &Daemon, env: &TestEnv, t: &str) -> Option<String> {
    let (ok, out, _) = d.cli(env, &["node", "-o", "json"]);
    if !ok {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    v["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .map(|c| c["status"].as_str().unwrap_or_default().to_string())
}

fn node_json(d: &Daemon, env: &TestEnv) -> serde_json::Value {
    let (ok, out, err) = d.cli(env, &["node", "-o", "json"]);
    assert!(ok, "podvisor node: {err}");
    serde_json::from_str(&out).expect("node json")
}

fn write_meminfo(dir: &Path, total_mb: u64, free_mb: u64) {
    let text = format!(
        "MemTotal:       {} kB\nMemFree:        {} kB\n",
        total_mb * 1024,
        free_mb * 1024
    );
    let tmp = dir.join("proc/meminfo.tmp");
    fs::write(&tmp, text).expect("meminfo");
    fs::rename(&tmp, dir.join("proc/meminfo")).expect("rename");
}

fn pod(name: &str, extra_spec: &str, resources: &str, command: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  terminationGracePeriodSeconds: 1\n{extra_spec}  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, '{command}']\n{resources}"
    )
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn memory_pressure_evicts_best_effort_first_and_it_comes_back() {
    let env = TestEnv::new("evict-memory");
    let _ = env.images();
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let signals = env.dir.path().join("signals");
    fs::create_dir_all(signals.join("proc/sys/kernel")).expect("mkdir");
    fs::create_dir_all(signals.join("cgroup")).expect("mkdir");
    fs::write(signals.join("proc/sys/kernel/pid_max"), "4194304\n").expect("pid_max");
    fs::write(signals.join("proc/loadavg"), "0.00 0.00 0.00 1/200 1000\n").expect("loadavg");
    fs::write(
        signals.join("cgroup/memory.stat"),
        "anon 0\ninactive_file 0\n",
    )
    .expect("stat");
    write_meminfo(&signals, 4096, 3000);
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("mkdir");
    let config = env.dir.path().join("config.yaml");
    fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionPressureTransitionPeriod: 3s\n",
    )
    .expect("config");
    let d = Daemon::start_with_env(
        &env,
        &manifests,
        &["--config", config.to_str().expect("utf8")],
        &[("PODVISOR_TEST_NODE_SIGNALS", &signals)],
    );
    let sleeper = "trap \"exit 0\" TERM; while true; do sleep 1; done";
    // The BestEffort pod holds 8 MiB in a memory-backed emptyDir (its working set): enough
    // to give back the 4 MiB the node will lack, so evicting it helps.
    fs::write(
        manifests.join("be.yaml"),
        pod(
            "be",
            "  volumes:\n  - name: mem\n    emptyDir: {medium: Memory}\n",
            "    volumeMounts:\n    - {name: mem, mountPath: /mem}\n",
            &format!("dd if=/dev/zero of=/mem/fill bs=1M count=8; {sleeper}"),
        ),
    )
    .expect("write");
    fs::write(
        manifests.join("g.yaml"),
        pod(
            "g",
            "",
            "    resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}\n",
            sleeper,
        ),
    )
    .expect("write");
    fs::write(
        manifests.join("crit.yaml"),
        pod(
            "crit",
            "  priorityClassName: system-node-critical\n",
            "",
            sleeper,
        ),
    )
    .expect("write");
    for p in ["be", "g", "crit"] {
        wait_until(&format!("{p} running"), T, || running(&d, p));
    }
    assert_eq!(
        condition(&d, &env, "MemoryPressure").as_deref(),
        Some("False")
    );

    // Close to the threshold (within twice it, the notifier watches closely: it notices
    // within its 10 s re-arm period), then below it.
    write_meminfo(&signals, 4096, 150);
    std::thread::sleep(Duration::from_secs(11));
    let crossed = Instant::now();
    write_meminfo(&signals, 4096, 96);
    wait_until("be evicted", T, || {
        d.pod("be")
            .is_some_and(|v| phase(&v) == ("Failed".into(), "Evicted".into()))
    });
    let reaction = crossed.elapsed();
    let be_uid = d.pod("be").and_then(|v| v.pod.metadata.uid).expect("uid");
    let be_cgroup = format!("{}/besteffort/pod{be_uid}", env.cgroup_parent);
    let be_cgroup_empty = || common::processes_in_cgroup(&be_cgroup).is_empty();
    wait_until("be's container gone", T, be_cgroup_empty);
    println!(
        "eviction reaction: memory.available crossed -> pod Evicted in {} ms, container gone in {} ms",
        reaction.as_millis(),
        crossed.elapsed().as_millis()
    );
    let v = d.pod("be").expect("be");
    let msg = v.pod.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        msg.starts_with(
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 96Mi. "
        ),
        "{msg}"
    );
    assert!(
        running(&d, "g"),
        "the Guaranteed pod under its request stays"
    );
    assert!(running(&d, "crit"), "the critical pod stays");
    assert_eq!(
        condition(&d, &env, "MemoryPressure").as_deref(),
        Some("True")
    );
    let events = d.events();
    assert!(events
        .iter()
        .any(|e| e.reason == "Evicted" && e.pod.ends_with("be-testnode")));
    assert!(events
        .iter()
        .any(|e| e.reason == "NodeHasInsufficientMemory"));
    // One pod per housekeeping interval, and only what is needed: still short, but the
    // Guaranteed and critical pods are never picked.
    std::thread::sleep(Duration::from_secs(12));
    assert!(running(&d, "g") && running(&d, "crit"));

    // Memory is back: the condition clears after the transition period, and the evicted pod
    // starts again.
    write_meminfo(&signals, 4096, 3000);
    wait_until("MemoryPressure False", T, || {
        condition(&d, &env, "MemoryPressure").as_deref() == Some("False")
    });
    wait_until("be running again", T, || running(&d, "be"));
    assert!(d.events().iter().any(|e| e.reason == "EvictionRecovered"));
    for f in ["be.yaml", "g.yaml", "crit.yaml"] {
        fs::remove_file(manifests.join(f)).expect("rm");
    }
    d.wait_all_gone(&env, T);
    d.stop();
}

#[test]
#[ignore = "needs root: mounts a tmpfs and runs the daemon with real containers (scripts/test runs it)"]
fn disk_pressure_reclaims_first_then_evicts_the_pod_filling_its_emptydir() {
    let mut env = TestEnv::new("evict-disk");
    let small = SmallFs::mount_sized(
        Kind::Tmpfs,
        64,
        &env.dir.path().join("small"),
        &env.cgroup_parent,
    );
    env.root = small.dir.join("root");
    env.logs = small.dir.join("logs");
    fs::create_dir_all(&env.root).expect("root");
    let _ = env.images();
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("mkdir");
    let config = env.dir.path().join("config.yaml");
    // Container GC only when reclaim asks for it (the periodic one hourly).
    fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nsyncFrequency: 1h\nevictionPressureTransitionPeriod: 3s\n",
    )
    .expect("config");
    let d = Daemon::start_with(
        &env,
        &manifests,
        &[
            "--config",
            config.to_str().expect("utf8"),
            "--eviction-hard=nodefs.available<25%,imagefs.available<25%",
        ],
    );
    let sleeper = "trap \"exit 0\" TERM; while true; do sleep 1; done";
    // A pod whose log takes 12 MiB, then goes away: its log directory is what reclaim frees.
    fs::write(
        manifests.join("gone.yaml"),
        pod(
            "gone",
            "  restartPolicy: Never\n",
            "",
            "head -c 12582912 /dev/zero | tr \"\\\\0\" x | fold -w 1000",
        ),
    )
    .expect("write");
    wait_until("gone completed", T, || {
        d.pod("gone").is_some_and(|v| phase(&v).0 == "Succeeded")
    });
    fs::remove_file(manifests.join("gone.yaml")).expect("rm");
    wait_until("gone removed", T, || d.pod("gone").is_none());
    let gone_logs = || {
        fs::read_dir(&env.logs)
            .map(|e| {
                e.flatten()
                    .any(|e| e.file_name().to_string_lossy().contains("_gone-"))
            })
            .unwrap_or(false)
    };
    assert!(gone_logs(), "the gone pod's logs wait for container GC");
    fs::write(
        manifests.join("steady.yaml"),
        pod("steady", "", "", sleeper),
    )
    .expect("write");
    wait_until("steady running", T, || running(&d, "steady"));

    // Fill to 8 MiB free (below 25% of 64 MiB): reclaiming the 12 MiB of logs is enough.
    let st = nix::sys::statvfs::statvfs(&small.dir).expect("statvfs");
    let avail = st.blocks_available() * st.fragment_size();
    let filler = small.dir.join("filler");
    let f = fs::File::create(&filler).expect("filler");
    drop(f);
    std::process::Command::new("fallocate")
        .args(["-l", &(avail - 8 * 1024 * 1024).to_string()])
        .arg(&filler)
        .status()
        .expect("fallocate");
    wait_until("the gone pod's logs reclaimed", T, || !gone_logs());
    // The manager logs its reclaim once container GC's report reaches it, after the removal.
    wait_until("node-level reclaim logged", T, || {
        d.log().contains("node-level reclaim")
    });
    assert!(running(&d, "steady"), "reclaim was enough: nobody evicted");
    // The threshold was met: DiskPressure (the transition period keeps it 3 s); new pods
    // wait for it to clear (admission refuses them under it).
    wait_until("DiskPressure True", T, || {
        condition(&d, &env, "DiskPressure").as_deref() == Some("True")
    });
    wait_until("DiskPressure False after reclaim", T, || {
        condition(&d, &env, "DiskPressure").as_deref() == Some("False")
    });

    // A pod filling its emptyDir: reclaim cannot help, it is evicted and its volume goes.
    fs::write(
        manifests.join("hog.yaml"),
        pod(
            "hog",
            "  volumes:\n  - name: data\n    emptyDir: {}\n",
            "    volumeMounts:\n    - {name: data, mountPath: /data}\n",
            "dd if=/dev/zero of=/data/big bs=1M count=6; trap \"exit 0\" TERM; while true; do sleep 1; done",
        ),
    )
    .expect("write");
    wait_until("hog evicted", T, || {
        d.pod("hog")
            .is_some_and(|v| phase(&v) == ("Failed".into(), "Evicted".into()))
    });
    let v = d.pod("hog").expect("hog");
    let msg = v.pod.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        msg.starts_with("The node was low on resource: ephemeral-storage. Threshold quantity: 16Mi, available: "),
        "{msg}"
    );
    assert!(msg.contains("Container main was using "), "{msg}");
    assert!(running(&d, "steady"), "the pod using less stays");
    assert!(d.events().iter().any(|e| e.reason == "NodeHasDiskPressure"));
    assert_eq!(condition(&d, &env, "DiskPressure").as_deref(), Some("True"));
    // Free the filler: pressure clears, the hog comes back (and is evicted again: its
    // emptyDir fills the disk again; the backoff keeps that slow).
    fs::remove_file(&filler).expect("rm filler");
    wait_until("DiskPressure False", T, || {
        condition(&d, &env, "DiskPressure").as_deref() == Some("False")
    });
    wait_until("hog started again", T, || {
        d.events().iter().any(|e| e.reason == "EvictionRecovered")
    });
    for f in ["steady.yaml", "hog.yaml"] {
        fs::remove_file(manifests.join(f)).expect("rm");
    }
    d.wait_all_gone(&env, T);
    d.stop();
}

#[test]
#[ignore = "needs root: mounts a tmpfs and runs the daemon with real containers (scripts/test runs it)"]
fn a_filler_outside_the_pods_evicts_nothing_and_says_why_tmpfs() {
    filler_outside_the_pods(Kind::Tmpfs, "evict-filler-tmpfs");
}

#[test]
#[ignore = "needs root: mounts a loop ext4 and runs the daemon with real containers (scripts/test runs it)"]
fn a_filler_outside_the_pods_evicts_nothing_and_says_why_ext4() {
    filler_outside_the_pods(Kind::LoopExt4, "evict-filler-ext4");
}

/// A file no pod wrote leaves 8 MiB free on a small filesystem (64 MiB tmpfs or 48 MiB
/// ext4) whose threshold is 25%.
fn filler_outside_the_pods(kind: Kind, name: &str) {
    let mut env = TestEnv::new(name);
    let small = SmallFs::mount_sized(kind, 64, &env.dir.path().join("small"), &env.cgroup_parent);
    env.root = small.dir.join("root");
    env.logs = small.dir.join("logs");
    fs::create_dir_all(&env.root).expect("root");
    let _ = env.images();
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("mkdir");
    let config = env.dir.path().join("config.yaml");
    fs::write(
        &config,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nevictionPressureTransitionPeriod: 3s\n",
    )
    .expect("config");
    let d = Daemon::start_with(
        &env,
        &manifests,
        &[
            "--config",
            config.to_str().expect("utf8"),
            "--eviction-hard=nodefs.available<25%,imagefs.available<25%",
        ],
    );
    let sleeper = "trap \"exit 0\" TERM; echo up; while true; do sleep 1; done";
    fs::write(manifests.join("a.yaml"), pod("a", "", "", sleeper)).expect("write");
    fs::write(manifests.join("b.yaml"), pod("b", "", "", sleeper)).expect("write");
    fs::write(
        manifests.join("crit.yaml"),
        pod(
            "crit",
            "  priorityClassName: system-node-critical\n",
            "",
            sleeper,
        ),
    )
    .expect("write");
    for p in ["a", "b", "crit"] {
        wait_until(&format!("{p} running"), T, || running(&d, p));
    }
    let eviction = node_json(&d, &env)["eviction"].clone();
    assert_eq!(eviction["policy"], "helpful", "{eviction}");
    assert!(eviction.get("notEvicting").is_none(), "{eviction}");
    assert_eq!(
        eviction["neverEvicted"],
        serde_json::json!(["default/crit-testnode (system-node-critical)"]),
        "{eviction}"
    );

    // A file no pod wrote leaves 8 MiB (the threshold is 16 MiB on the tmpfs, 12 on the
    // ext4): the pods use a few KiB each, evicting them would free nothing.
    let st = nix::sys::statvfs::statvfs(&small.dir).expect("statvfs");
    let avail = st.blocks_available() * st.fragment_size();
    let filler = small.dir.join("filler");
    fs::File::create(&filler).expect("filler");
    let ok = std::process::Command::new("fallocate")
        .args(["-l", &(avail - 8 * 1024 * 1024).to_string()])
        .arg(&filler)
        .status()
        .expect("fallocate");
    assert!(ok.success(), "fallocate");
    wait_until("DiskPressure True", T, || {
        condition(&d, &env, "DiskPressure").as_deref() == Some("True")
    });
    wait_until("the reason in podvisor node", T, || {
        node_json(&d, &env)["eviction"]["notEvicting"]
            .as_str()
            .is_some_and(|m| m.starts_with("not evicting for nodefs.available: "))
    });
    let reason = node_json(&d, &env)["eviction"]["notEvicting"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        reason.contains("evicting them all would not relieve it")
            || reason.contains("no pod that may be evicted uses any ephemeral-storage"),
        "{reason}"
    );
    println!("podvisor node: {reason}");
    // What uses the space is named: the filler, not podvisor's own dirs.
    let filler_path = fs::canonicalize(&filler).expect("filler path");
    let names = format!("; what uses it: {} (", filler_path.display());
    assert!(reason.contains(&names), "{reason}");
    assert!(
        !reason.contains("/root (") && !reason.contains("/logs ("),
        "{reason}"
    );
    let (ok, text, _) = d.cli(&env, &["node"]);
    assert!(ok && text.contains("  Not Evicting:\tnot evicting for nodefs.available: "));
    assert!(text.contains("  Never Evicted:\tdefault/crit-testnode (system-node-critical)"));
    wait_until("the EvictionSkipped event", T, || {
        d.events().iter().any(|e| e.reason == "EvictionSkipped")
    });
    // A new pod is refused under DiskPressure, as before.
    fs::write(manifests.join("late.yaml"), pod("late", "", "", sleeper)).expect("write");
    wait_until("late refused", T, || {
        d.pod("late")
            .is_some_and(|v| phase(&v) == ("Failed".into(), "Evicted".into()))
    });
    // Three more housekeeping passes (with reclaim at each): every pod keeps running, the
    // reason is said once (rate-limited), and the condition holds.
    std::thread::sleep(Duration::from_secs(31));
    for p in ["a", "b", "crit"] {
        assert!(running(&d, p), "{p} was evicted:\n{}", d.log());
    }
    let events = d.events();
    assert!(
        !events
            .iter()
            .any(|e| e.reason == "Evicted" && !e.pod.contains("late")),
        "{events:?}"
    );
    let skipped: Vec<_> = events
        .iter()
        .filter(|e| e.reason == "EvictionSkipped")
        .collect();
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert!(skipped[0].message.contains(&names), "{skipped:?}");
    assert_eq!(skipped[0].count, 1, "{skipped:?}");
    assert_eq!(condition(&d, &env, "DiskPressure").as_deref(), Some("True"));
    assert!(d.log().contains("node-level reclaim"), "reclaim still runs");

    // The filler goes: the condition clears, the reason with it, and a new pod is admitted.
    fs::remove_file(&filler).expect("rm filler");
    wait_until("DiskPressure False", T, || {
        condition(&d, &env, "DiskPressure").as_deref() == Some("False")
    });
    wait_until("the reason gone from podvisor node", T, || {
        node_json(&d, &env)["eviction"].get("notEvicting").is_none()
    });
    fs::write(manifests.join("after.yaml"), pod("after", "", "", sleeper)).expect("write");
    wait_until("after running", T, || running(&d, "after"));
    for f in ["a.yaml", "b.yaml", "crit.yaml", "late.yaml", "after.yaml"] {
        fs::remove_file(manifests.join(f)).expect("rm");
    }
    d.wait_all_gone(&env, T);
    d.stop();
    drop(small);
    env.assert_clean();
}
