//! Root integration test of the real-world corpus (tests/real-manifests/, sources in its
//! SOURCES file): every manifest, adapted to this test node by [`adapt_for_test_node`], runs
//! through `podvisor run` and must reach phase Running with every container running, as it
//! does under a kubelet with containerd.

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::TestEnv;
use serde_json::{json, Value};

/// How long one batch of pods may take to reach Running.
const BATCH_TIMEOUT: Duration = Duration::from_secs(90);
/// What a batch may request at most, so that admission (2-core CI machines) never refuses a
/// pod for want of room: the corpus requests ~3.2 cpus in all.
const BATCH_CPU_MILLIS: u64 = 1200;
const BATCH_MEMORY_MI: u64 = 1024;

/// The test image, imported by the common test environment.
const TEST_IMAGE: &str = "busybox:1.35";

/// The command every app container runs instead of its own: a long sleep that stops at once
/// on SIGTERM (busybox's `sleep` as PID 1 would ignore it until the grace period ends).
fn long_sleep() -> Value {
    json!([
        "sh",
        "-c",
        "trap 'exit 0' TERM; while true; do sleep 1; done"
    ])
}

/// Adapts a corpus manifest to the test node, changing only what the test image and a
/// scratch node cannot provide, and returns what it changed (for the report):
///
/// - every image (app and init containers) becomes the offline test image, pulled never;
/// - app containers run [`long_sleep`] instead of their command and args (the real binaries
///   are not in the image); init containers run `true` (they must finish for the pod to
///   start, and the real ones render configuration or copy binaries the image lacks);
/// - probes (`livenessProbe`, `readinessProbe`, `startupProbe`) are dropped: every probe of
///   the corpus calls a server (httpGet, tcpSocket) or a binary (etcdctl, pgrep, bash) that
///   the sleeping test image does not have;
/// - lifecycle hooks (`postStart`, `preStop`) are dropped for the same reason (nginx, a
///   /usr/share the image lacks);
/// - every `hostPath.path` is moved below `scratch` (a fresh node made by [`fresh_node`]),
///   so nothing on the host is touched or needed.
///
/// Everything else (volumes and their types, mounts, security contexts, host namespaces,
/// resources, DNS settings, host aliases, unknown or misspelled keys) is kept as written.
fn adapt_for_test_node(pod: &mut Value, scratch: &Path) -> Vec<String> {
    let mut changed = Vec::new();
    let spec = pod
        .get_mut("spec")
        .and_then(Value::as_object_mut)
        .expect("manifest has a spec");
    for (list, init) in [("initContainers", true), ("containers", false)] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            let c = c.as_object_mut().expect("container is an object");
            let name = c["name"].as_str().unwrap_or("?").to_string();
            c.insert("image".into(), json!(TEST_IMAGE));
            c.insert("imagePullPolicy".into(), json!("Never"));
            c.remove("args");
            let command = if init { json!(["true"]) } else { long_sleep() };
            c.insert("command".into(), command);
            for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
                if c.remove(probe).is_some() {
                    changed.push(format!("{name}: {probe} dropped"));
                }
            }
            if c.remove("lifecycle").is_some() {
                changed.push(format!("{name}: lifecycle hooks dropped"));
            }
        }
    }
    for v in spec
        .get_mut("volumes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(hp) = v.get_mut("hostPath").and_then(Value::as_object_mut) {
            let path = hp["path"].as_str().expect("hostPath.path").to_string();
            let moved = scratch.join(path.trim_start_matches('/'));
            hp.insert("path".into(), json!(moved.display().to_string()));
        }
    }
    changed
}

/// Makes `scratch` look like the part of a freshly installed Debian node (with the kubelet
/// package) that static pods mount: what `debootstrap` and the kubelet's package create, and
/// nothing a control-plane installer (kubeadm, kubespray, kops) would write.
fn fresh_node(scratch: &Path) {
    for d in [
        "etc/kubernetes/manifests",
        "etc/ssl/certs",
        "etc/ca-certificates",
        "usr/share/ca-certificates",
        "usr/local/share/ca-certificates",
        "lib/modules",
        "var/lib",
        "var/log",
        "run",
        "proc",
        "sys",
        "tmp",
    ] {
        fs::create_dir_all(scratch.join(d)).expect("fresh node dir");
    }
    fs::write(scratch.join("etc/localtime"), b"TZif2\n").expect("localtime");
    std::os::unix::fs::symlink("../run", scratch.join("var/run")).expect("var/run");
}

/// Files a manifest's own installation instructions create before the manifest is placed,
/// and that a kubelet needs too: `FileOrCreate` never creates a missing parent directory
/// (the kubelet opens the file with `O_CREAT` only), so on a fresh node these pods fail to
/// start under a kubelet exactly as under podvisor, naming the path
/// ([`fresh_node_without_prerequisites_fails_naming_the_path`] checks that).
const INSTALLER_FILES: &[(&str, &str)] = &[
    // cluster/gce/gci/configure-helper.sh writes the kubeconfig before the manifest.
    ("gce-kube-proxy.yaml", "var/lib/kube-proxy/kubeconfig"),
    // kubeadm's ha-considerations.md: write /etc/haproxy/haproxy.cfg, then the manifest.
    ("kubeadm-ha-haproxy.yaml", "etc/haproxy/haproxy.cfg"),
];

fn install_prerequisites(file: &str, scratch: &Path) {
    for (f, path) in INSTALLER_FILES {
        if *f == file {
            let p = scratch.join(path);
            fs::create_dir_all(p.parent().expect("parent")).expect("installer dir");
            fs::write(&p, b"# written by the installer\n").expect("installer file");
        }
    }
}

/// One corpus manifest.
struct Case {
    file: String,
    namespace: String,
    name: String,
    cpu_millis: u64,
    memory_mi: u64,
    pod: Value,
    changed: Vec<String>,
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/real-manifests")
}

fn load_corpus(scratch_root: &Path, prerequisites: bool) -> Vec<Case> {
    let mut files: Vec<PathBuf> = fs::read_dir(corpus_dir())
        .expect("corpus dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("yaml" | "yml" | "json")
            )
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let file = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let text = fs::read_to_string(&path).expect("read manifest");
            let mut pod: Value = if file.ends_with(".json") {
                serde_json::from_str(&text).expect("json manifest")
            } else {
                serde_saphyr::from_str(&text).expect("yaml manifest")
            };
            let scratch = scratch_root.join(file.replace('.', "-"));
            fresh_node(&scratch);
            if prerequisites {
                install_prerequisites(&file, &scratch);
            }
            let changed = adapt_for_test_node(&mut pod, &scratch);
            let meta = &pod["metadata"];
            let name = meta["name"].as_str().expect("metadata.name").to_string();
            let namespace = meta["namespace"].as_str().unwrap_or("default").to_string();
            let (cpu_millis, memory_mi) = requests(&pod);
            Case {
                file,
                namespace,
                name,
                cpu_millis,
                memory_mi,
                pod,
                changed,
            }
        })
        .collect()
}

/// The pod's summed container requests (cpu in millicores, memory in MiB, rounded up).
fn requests(pod: &Value) -> (u64, u64) {
    let mut cpu = 0;
    let mut mem = 0;
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let r = &c["resources"]["requests"];
        let quantity = |v: &Value| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        };
        if let Some(q) = quantity(&r["cpu"]) {
            cpu += match q.strip_suffix('m') {
                Some(m) => m.parse::<u64>().expect("cpu millis"),
                None => (q.parse::<f64>().expect("cpu") * 1000.0) as u64,
            };
        }
        if let Some(q) = r["memory"].as_str() {
            let (num, unit) = q.split_at(q.find(|ch: char| ch.is_alphabetic()).unwrap_or(q.len()));
            let n: u64 = num.parse().expect("memory");
            mem += match unit {
                "Mi" => n,
                "Gi" => n * 1024,
                "M" => n * 1_000_000 / (1 << 20) + 1,
                "G" => n * 1_000_000_000 / (1 << 20) + 1,
                "" => n / (1 << 20) + 1,
                other => panic!("unit {other}"),
            };
        }
    }
    (cpu, mem)
}

/// Batches whose requests fit the test machine, without two pods of the same name.
fn batches(cases: &[Case]) -> Vec<Vec<usize>> {
    let mut out: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let (mut cpu, mut mem) = (0, 0);
    let mut names = BTreeSet::new();
    for (i, c) in cases.iter().enumerate() {
        let key = (c.namespace.clone(), c.name.clone());
        if !current.is_empty()
            && (cpu + c.cpu_millis > BATCH_CPU_MILLIS
                || mem + c.memory_mi > BATCH_MEMORY_MI
                || names.contains(&key))
        {
            out.push(std::mem::take(&mut current));
            (cpu, mem) = (0, 0);
            names.clear();
        }
        cpu += c.cpu_millis;
        mem += c.memory_mi;
        names.insert(key);
        current.push(i);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `None` when the pod runs with every container running (and every init container done),
/// else what it shows instead.
fn not_running(d: &Daemon, c: &Case) -> Option<String> {
    let Some(v) = d.pods().unwrap_or_default().into_iter().find(|v| {
        v.pod.metadata.name.as_deref() == Some(&format!("{}-testnode", c.name))
            && v.pod.metadata.namespace.as_deref() == Some(&c.namespace)
    }) else {
        return Some("not listed by the daemon".into());
    };
    let st = v.pod.status.clone().unwrap_or_default();
    let want = c.pod["spec"]["containers"].as_array().map_or(0, Vec::len);
    let statuses = st.container_statuses.clone().unwrap_or_default();
    let running = statuses
        .iter()
        .filter(|s| s.state.as_ref().is_some_and(|s| s.running.is_some()))
        .count();
    if st.phase.as_deref() == Some("Running") && running == want {
        return None;
    }
    let mut why = format!(
        "phase {:?}, {running}/{want} containers running",
        st.phase.as_deref().unwrap_or("")
    );
    for s in statuses
        .iter()
        .chain(st.init_container_statuses.iter().flatten())
    {
        if let Some(w) = s.state.as_ref().and_then(|s| s.waiting.as_ref()) {
            why.push_str(&format!(
                "; {}: {} {}",
                s.name,
                w.reason.as_deref().unwrap_or(""),
                w.message.as_deref().unwrap_or("")
            ));
        }
    }
    if let Some(e) = &v.source_error {
        why.push_str(&format!("; source error: {}", e.message));
    }
    Some(why)
}

#[test]
#[ignore = "needs root: runs the corpus through the daemon with real containers (scripts/test runs it)"]
fn every_real_manifest_reaches_running() {
    let env = TestEnv::new("realmanifests");
    let _ = env.images();
    let scratch_root = env.dir.path().join("node");
    let cases = load_corpus(&scratch_root, true);
    assert!(cases.len() >= 30, "corpus has {} manifests", cases.len());
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("manifest dir");
    let d = Daemon::start(&env, &dir);

    let mut failures: Vec<(String, String)> = Vec::new();
    for batch in batches(&cases) {
        for &i in &batch {
            let c = &cases[i];
            let out = dir.join(format!("{}.json", c.file.replace('.', "-")));
            fs::write(&out, serde_json::to_vec_pretty(&c.pod).expect("json")).expect("write");
        }
        let start = Instant::now();
        let mut pending: Vec<usize> = batch.clone();
        while !pending.is_empty() && start.elapsed() < BATCH_TIMEOUT {
            pending.retain(|&i| not_running(&d, &cases[i]).is_some());
            std::thread::sleep(Duration::from_millis(250));
        }
        for &i in &pending {
            let c = &cases[i];
            let why = not_running(&d, c).unwrap_or_else(|| "reached Running late".into());
            let validate = env
                .podvisor()
                .arg("validate")
                .arg(dir.join(format!("{}.json", c.file.replace('.', "-"))))
                .output()
                .expect("validate");
            failures.push((
                c.file.clone(),
                format!(
                    "{why}\n    validate: {}{}",
                    String::from_utf8_lossy(&validate.stdout).trim(),
                    String::from_utf8_lossy(&validate.stderr).trim()
                ),
            ));
        }
        for &i in &batch {
            let c = &cases[i];
            let _ = fs::remove_file(dir.join(format!("{}.json", c.file.replace('.', "-"))));
        }
        d.wait_all_gone(&env, Duration::from_secs(120));
    }
    let ok = cases.len() - failures.len();
    eprintln!("real manifests: {ok}/{} reach Running", cases.len());
    for c in &cases {
        if !c.changed.is_empty() {
            eprintln!("  {}: {}", c.file, c.changed.join(", "));
        }
    }
    d.stop();
    env.assert_clean();
    if !failures.is_empty() {
        let report: Vec<String> = failures
            .iter()
            .map(|(f, why)| format!("  {f}: {why}"))
            .collect();
        panic!(
            "{} of {} manifests did not reach Running:\n{}",
            failures.len(),
            cases.len(),
            report.join("\n"),
        );
    }
}

#[test]
#[ignore = "needs root: runs corpus manifests through the daemon with real containers (scripts/test runs it)"]
fn fresh_node_without_prerequisites_fails_naming_the_path() {
    let env = TestEnv::new("realmanifests-prereq");
    let _ = env.images();
    let scratch_root = env.dir.path().join("node");
    let cases: Vec<Case> = load_corpus(&scratch_root, false)
        .into_iter()
        .filter(|c| INSTALLER_FILES.iter().any(|(f, _)| *f == c.file))
        .collect();
    assert_eq!(cases.len(), INSTALLER_FILES.len());
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("manifest dir");
    let d = Daemon::start(&env, &dir);
    for c in &cases {
        let out = dir.join(format!("{}.json", c.file.replace('.', "-")));
        fs::write(&out, serde_json::to_vec_pretty(&c.pod).expect("json")).expect("write");
        let (_, rel) = INSTALLER_FILES
            .iter()
            .find(|(f, _)| *f == c.file)
            .expect("prerequisite");
        let path = scratch_root.join(c.file.replace('.', "-")).join(rel);
        let want = format!("create file {}", path.display());
        common::wait_until_else(
            "a sandbox error naming the missing file",
            Duration::from_secs(60),
            || d.events().iter().any(|e| e.message.contains(&want)),
            || format!("events: {:?}", d.events()),
        );
        assert!(
            !path.parent().expect("parent").exists(),
            "no parent created"
        );
        fs::remove_file(&out).expect("remove");
    }
    d.wait_all_gone(&env, Duration::from_secs(120));
    d.stop();
    env.assert_clean();
}
