//! Root integration tests of `podvisor run` with real containers: manifests written, edited,
//! broken and deleted; the daemon killed and restarted (also during churn); the local API and
//! CLI; nothing left behind.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::daemon::{Daemon, KeepLogOnPanic};
use common::TestEnv;
use common::{init_pid, wait_until};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(30);

/// (containerID, running) of the first container of a pod view.
fn container(v: &PodView, name: &str) -> Option<(String, bool)> {
    let st = v.pod.status.as_ref()?;
    let cs = st
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)?;
    Some((
        cs.container_id.clone().unwrap_or_default(),
        cs.state.as_ref().is_some_and(|s| s.running.is_some()),
    ))
}

fn running_id(d: &Daemon, pod: &str) -> Option<String> {
    let v = d.pod(pod)?;
    match container(&v, "main")? {
        (id, true) if !id.is_empty() => Some(id),
        _ => None,
    }
}

fn manifest(name: &str, msg: &str, extra_label: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  labels:\n    app: {name}\n{extra_label}spec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; echo {msg}; while true; do sleep 0.2; done']\n"
    )
}

fn cli(env: &TestEnv, d: &Daemon, args: &[&str]) -> (bool, String, String) {
    d.cli(env, args)
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn manifest_written_edited_broken_and_deleted() {
    let env = TestEnv::new("lifecycle");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start(&env, &dir);
    let file = dir.join("web.yaml");

    fs::write(&file, manifest("web", "v1", "")).expect("write");
    wait_until("web running", T, || running_id(&d, "web").is_some());
    let first = running_id(&d, "web").expect("id");
    let (ok, out, _) = cli(&env, &d, &["pods"]);
    assert!(
        ok && out.contains("web-testnode") && out.contains("Running"),
        "{out}"
    );

    // Label-only edit: nothing restarts, the label shows up.
    fs::write(&file, manifest("web", "v1", "    tier: front\n")).expect("write");
    wait_until("label applied", T, || {
        d.pod("web")
            .and_then(|v| v.pod.metadata.labels)
            .is_some_and(|l| l.get("tier").is_some_and(|t| t == "front"))
    });
    assert_eq!(running_id(&d, "web"), Some(first.clone()));

    // Spec edit: replaced by a new container (new uid), the old one is gone.
    fs::write(&file, manifest("web", "v2", "    tier: front\n")).expect("write");
    wait_until("replacement running", T, || {
        running_id(&d, "web").is_some_and(|id| id != first)
    });
    let second = running_id(&d, "web").expect("id");
    wait_until("old container removed", T, || {
        !env.root
            .join("containers")
            .join(first.trim_start_matches("podvisor://"))
            .exists()
    });

    // Broken manifest: still running, error visible through the API and the CLI.
    fs::write(
        &file,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers: [\n",
    )
    .expect("write");
    wait_until("source error shown", T, || {
        d.pod("web").is_some_and(|v| v.source_error.is_some())
    });
    assert_eq!(running_id(&d, "web"), Some(second.clone()));
    let (_, out, err) = cli(&env, &d, &["pods"]);
    assert!(format!("{out}{err}").contains("web.yaml"), "{out}{err}");
    let (ok, out, _) = cli(&env, &d, &["describe", "web"]);
    assert!(ok && out.contains("SourceError"), "{out}");

    // Fixed again, then deleted: stopped and cleaned.
    fs::write(&file, manifest("web", "v2", "    tier: front\n")).expect("write");
    wait_until("error cleared", T, || {
        d.pod("web").is_some_and(|v| v.source_error.is_none())
    });
    assert_eq!(running_id(&d, "web"), Some(second));
    let (ok, out, _) = cli(&env, &d, &["logs", "web"]);
    assert!(ok && out.contains("v2"), "{out}");
    fs::remove_file(&file).expect("rm");
    wait_until("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    wait_until("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn daemon_sigkill_and_restart_readopts_running_containers() {
    let env = TestEnv::new("readopt-daemon");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("a.yaml"), manifest("a", "hi", "")).expect("write");
    let d = Daemon::start(&env, &dir);
    wait_until("a running", T, || running_id(&d, "a").is_some());
    let id = running_id(&d, "a").expect("id");
    let pid = init_pid(&env, &id);
    d.kill9();
    // While the daemon is down, the manifest of b appears.
    fs::write(dir.join("b.yaml"), manifest("b", "hi", "")).expect("write");
    let d = Daemon::start(&env, &dir);
    wait_until("b running", T, || running_id(&d, "b").is_some());
    assert_eq!(running_id(&d, "a"), Some(id.clone()), "same container");
    assert_eq!(init_pid(&env, &id), pid, "same process");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    for f in ["a.yaml", "b.yaml"] {
        fs::remove_file(dir.join(f)).expect("rm");
    }
    wait_until("all gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    wait_until("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn sigkill_daemon_ten_times_during_churn_loses_and_duplicates_nothing() {
    let env = TestEnv::new("churn");
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let names = ["p0", "p1", "p2", "p3"];
    let mut d = Daemon::start(&env, &dir);
    for round in 0..10u32 {
        // Churn: add, edit, remove manifests, then kill the daemon mid-flight.
        let add = names[(round as usize) % names.len()];
        let edit = names[(round as usize + 1) % names.len()];
        let del = names[(round as usize + 2) % names.len()];
        fs::write(dir.join(format!("{add}.yaml")), manifest(add, "a", "")).expect("write");
        if dir.join(format!("{edit}.yaml")).exists() {
            fs::write(
                dir.join(format!("{edit}.yaml")),
                manifest(edit, &format!("r{round}"), ""),
            )
            .expect("write");
        }
        if round % 3 == 2 {
            let _ = fs::remove_file(dir.join(format!("{del}.yaml")));
        }
        std::thread::sleep(Duration::from_millis(60 + 45 * u64::from(round % 5)));
        d.kill9();
        d = Daemon::start(&env, &dir);
    }
    // Settle: every manifest present runs exactly one container; nothing else runs.
    let present: Vec<String> = names
        .iter()
        .filter(|n| dir.join(format!("{n}.yaml")).exists())
        .map(|n| n.to_string())
        .collect();
    assert!(!present.is_empty());
    wait_until("present pods running", Duration::from_secs(60), || {
        present.iter().all(|n| running_id(&d, n).is_some())
            && d.pods().is_some_and(|p| p.len() == present.len())
    });
    let live_dirs = || -> Vec<(PathBuf, Vec<String>)> {
        fs::read_dir(env.root.join("containers"))
            .expect("dir")
            .flatten()
            .map(|e| e.path())
            .filter(|p| !p.join("cleaned").exists())
            .map(|p| {
                let files = fs::read_dir(&p)
                    .map(|r| {
                        r.flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                (p, files)
            })
            .collect()
    };
    common::wait_until_else(
        "one live monitor per pod",
        Duration::from_secs(60),
        || live_dirs().len() == present.len(),
        || {
            format!(
                "present {present:?}, live {:?}, pods {:?}",
                live_dirs(),
                d.pods().map(|p| p
                    .into_iter()
                    .map(|v| v.pod.metadata.name)
                    .collect::<Vec<_>>())
            )
        },
    );
    let procs = common::processes_in_cgroup(&env.cgroup_parent);
    let sleepers = procs.iter().filter(|(_, c)| c.starts_with("sh -c")).count();
    assert_eq!(sleepers, present.len(), "{procs:?}");
    for n in &present {
        fs::remove_file(dir.join(format!("{n}.yaml"))).expect("rm");
    }
    wait_until("all gone", Duration::from_secs(60), || {
        d.pods().is_some_and(|p| p.is_empty())
            && fs::read_dir(env.root.join("containers"))
                .map(|e| e.count() == 0)
                .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn validate_reports_file_line_and_field() {
    let env = TestEnv::new("validate");
    let good = env.dir.path().join("good.yaml");
    let bad = env.dir.path().join("bad.yaml");
    fs::write(&good, manifest("good", "x", "")).expect("write");
    fs::write(
        &bad,
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers:\n  - name: main\n    image: busybox:1.35\n    ports:\n    - containerPort: 70000\n",
    )
    .expect("write");
    let out = Command::new(common::podvisor_bin())
        .args(["validate"])
        .arg(&good)
        .arg(&bad)
        .output()
        .expect("validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{text}");
    assert!(text.contains(&format!("{}:10:", bad.display())), "{text}");
    assert!(text.contains("containerPort"), "{text}");
    assert!(text.contains("good"), "{text}");
}

/// A manifest URL served from 127.0.0.1 whose answer the test controls.
struct UrlServer {
    url: String,
    body: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    server: std::sync::Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UrlServer {
    fn start() -> UrlServer {
        let server = std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("bind"));
        let port = server.server_addr().to_ip().expect("ip").port();
        let body: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
        let (srv, b) = (server.clone(), body.clone());
        let thread = std::thread::spawn(move || {
            for req in srv.incoming_requests() {
                let current = b.lock().expect("lock").clone();
                let resp = match current {
                    Some(text) => tiny_http::Response::from_string(text).boxed(),
                    None => tiny_http::Response::from_string("down")
                        .with_status_code(500)
                        .boxed(),
                };
                let _ = req.respond(resp);
            }
        });
        UrlServer {
            url: format!("http://127.0.0.1:{port}/pods"),
            body,
            server,
            thread: Some(thread),
        }
    }

    fn set(&self, body: Option<String>) {
        *self.body.lock().expect("lock") = body;
    }
}

impl Drop for UrlServer {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn url_source_runs_a_pod_list_and_keeps_it_through_url_errors() {
    let env = TestEnv::new("url");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let srv = UrlServer::start();
    let list = format!(
        "apiVersion: v1\nkind: PodList\nitems:\n{}{}",
        indent_item(&manifest("u1", "one", "")),
        indent_item(&manifest("u2", "two", ""))
    );
    srv.set(Some(list));
    // A KubeletConfiguration that polls the URL every second.
    let cfg = env.dir.path().join("kubelet.yaml");
    fs::write(
        &cfg,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodURL: {}\nhttpCheckFrequency: 1s\n",
            srv.url
        ),
    )
    .expect("config");
    let cfg_arg = cfg.to_string_lossy().to_string();
    let d = Daemon::start_with(&env, &dir, &["--config", &cfg_arg]);
    wait_until("both URL pods running", T, || {
        running_id(&d, "u1").is_some() && running_id(&d, "u2").is_some()
    });
    let (id1, id2) = (running_id(&d, "u1"), running_id(&d, "u2"));
    assert_eq!(
        d.pod("u1")
            .and_then(|v| v.pod.metadata.annotations)
            .and_then(|a| a.get("kubernetes.io/config.source").cloned())
            .as_deref(),
        Some("http")
    );
    // The URL fails: the pods keep running and the error is shown.
    srv.set(None);
    wait_until("URL error shown", T, || {
        d.pod("u1").is_some_and(|v| v.source_error.is_some())
    });
    assert_eq!(
        (running_id(&d, "u1"), running_id(&d, "u2")),
        (id1, id2.clone())
    );
    // The body drops u1: only u1 is stopped.
    srv.set(Some(manifest("u2", "two", "")));
    wait_until("u1 gone", T, || d.pod("u1").is_none());
    assert_eq!(running_id(&d, "u2"), id2);
    srv.set(Some(String::new()));
    wait_until("all gone", T, || {
        d.pods().is_some_and(|p| p.is_empty())
            && fs::read_dir(env.root.join("containers"))
                .map(|e| e.count() == 0)
                .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

/// A Pod manifest as an item of a YAML list.
fn indent_item(manifest: &str) -> String {
    let mut out = String::new();
    for (i, line) in manifest.lines().enumerate() {
        out.push_str(if i == 0 { "- " } else { "  " });
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The reason a container of a pod view waits for, if it waits.
fn waiting_reason(v: &PodView, name: &str) -> Option<String> {
    v.pod
        .status
        .as_ref()?
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == name)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn unreachable_registry_backs_off_and_an_imported_image_starts_the_pod() {
    let env = TestEnv::new("airgap");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start(&env, &dir);
    // Port 9 on loopback: nothing listens, so every pull is refused at once.
    let image = "127.0.0.1:9/airgap/app:1";
    let yaml =
        manifest("air", "landed", "").replace("image: busybox:1.35", &format!("image: {image}"));
    fs::write(dir.join("air.yaml"), yaml).expect("write");
    wait_until("ErrImagePull", T, || {
        d.pod("air")
            .and_then(|v| waiting_reason(&v, "main"))
            .is_some_and(|r| r == "ErrImagePull")
    });
    wait_until("ImagePullBackOff", T, || {
        d.pod("air")
            .and_then(|v| waiting_reason(&v, "main"))
            .is_some_and(|r| r == "ImagePullBackOff")
    });
    let (ok, out, _) = cli(&env, &d, &["describe", "air"]);
    assert!(ok, "{out}");
    assert!(out.contains("Pulling") && out.contains(image), "{out}");
    assert!(out.contains("Error: ErrImagePull"), "{out}");

    // The image arrives by hand (air-gapped node): the next attempt finds it and starts.
    let (ok, out, err) = cli_offline(
        &env,
        &[
            "image",
            "import",
            &common::busybox_archive().display().to_string(),
            "--ref",
            image,
        ],
    );
    assert!(ok, "{out}{err}");
    wait_until("air running", Duration::from_secs(40), || {
        running_id(&d, "air").is_some()
    });
    let v = d.pod("air").expect("pod");
    let cs = &v
        .pod
        .status
        .as_ref()
        .expect("status")
        .container_statuses
        .as_ref()
        .expect("cs")[0];
    assert_eq!(cs.restart_count, 0, "failed pulls are not restarts");
    let (ok, out, _) = cli(&env, &d, &["describe", "air"]);
    assert!(ok && out.contains("already present on machine"), "{out}");

    // Pinned by the manifest: prune keeps it while the pod exists, even when stopped.
    let (ok, out, _) = cli_offline(&env, &["image", "ls"]);
    assert!(
        ok && out
            .lines()
            .any(|l| l.contains("airgap/app") && l.contains("manifest")),
        "{out}"
    );
    let (ok, out, _) = cli_offline(&env, &["image", "prune"]);
    // busybox:1.35 is the same image (same digest) under another name: kept with it.
    assert!(ok && out.contains("removed 0 image(s)"), "{out}");

    fs::remove_file(dir.join("air.yaml")).expect("rm");
    wait_until("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    wait_until("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    let (ok, out, _) = cli_offline(&env, &["image", "prune"]);
    assert!(
        ok && out.contains("airgap/app") && out.contains("busybox:1.35"),
        "{out}"
    );
    env.assert_clean();
}

fn cli_offline(env: &TestEnv, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(common::podvisor_bin())
        .arg("--root-dir")
        .arg(&env.root)
        .args(args)
        .output()
        .expect("cli");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn daemon_pulls_a_missing_image_from_a_registry_mirror() {
    let env = TestEnv::new("pullpod");
    let reg = common::registry::Registry::start(false);
    let out = Command::new("skopeo")
        .args(["copy", "--quiet", "--dest-tls-verify=false"])
        .arg(format!(
            "oci-archive:{}",
            common::busybox_archive().display()
        ))
        .arg(format!("docker://{}/edge/busybox:1", reg.addr))
        .output()
        .expect("skopeo");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The manifest names a registry that only exists as a mirror entry.
    let yaml = common::registry::registries_yaml(env.dir.path(), "registry.test", &reg.addr, false);
    let creds = env.dir.path().join("config.json");
    fs::write(&creds, "{}").expect("docker config");
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start_with(
        &env,
        &dir,
        &[
            "--registry-config",
            &yaml.display().to_string(),
            "--docker-config",
            &creds.display().to_string(),
        ],
    );
    let m = manifest("pulled", "from-registry", "")
        .replace("image: busybox:1.35", "image: registry.test/edge/busybox:1");
    fs::write(dir.join("pulled.yaml"), m).expect("write");
    wait_until("pulled running", T, || running_id(&d, "pulled").is_some());
    let (ok, out, _) = cli(&env, &d, &["describe", "pulled"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Pulling") && out.contains("Successfully pulled image"),
        "{out}"
    );
    let (ok, out, _) = cli(&env, &d, &["logs", "pulled"]);
    assert!(ok && out.contains("from-registry"), "{out}");
    fs::remove_file(dir.join("pulled.yaml")).expect("rm");
    wait_until("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    d.stop();
    env.assert_clean();
}

/// Safe updates: a Ready pod edited to a crash-looping command is rolled back to its Ready
/// generation (a RolledBack event, "rolled back: <why>" in `pods` and `describe`), the bad
/// spec is not retried, and a restarted daemon keeps the rolled-back generation.
#[test]
#[ignore = "needs root: runs the daemon with real containers (scripts/test runs it)"]
fn a_crash_looping_edit_rolls_back_to_the_last_ready_generation() {
    let env = TestEnv::new("rollback");
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("web.yaml"), manifest("web", "v1", "")).expect("write");
    let d = Daemon::start(&env, &dir);
    wait_until("web running", T, || running_id(&d, "web").is_some());
    let uid = |d: &Daemon| d.pod("web").and_then(|v| v.pod.metadata.uid);
    let good = uid(&d).expect("uid");
    let good_id = running_id(&d, "web").expect("id");
    // The edit: a command that exits at once, with a short rollback deadline.
    let bad = manifest(
        "web",
        "v2",
        "  annotations:\n    podvisor.io/rollback-after: 4s\n",
    )
    .replace(
        "'trap \"exit 0\" TERM; echo v2; while true; do sleep 0.2; done'",
        "'echo v2; exit 3'",
    );
    assert!(bad.contains("exit 3"), "{bad}");
    fs::write(dir.join("web.yaml"), &bad).expect("write");
    wait_until("the edit tried", T, || uid(&d).is_some_and(|u| u != good));
    wait_until("rolled back", Duration::from_secs(120), || {
        d.pod("web")
            .is_some_and(|v| v.rolled_back.is_some() && v.pod.metadata.uid.as_ref() == Some(&good))
            && running_id(&d, "web").is_some()
    });
    let why = d.pod("web").and_then(|v| v.rolled_back).expect("why");
    assert!(
        why.contains("crash-looping (last exit code 3)") || why.starts_with("not Ready within 4s"),
        "{why}"
    );
    assert_ne!(running_id(&d, "web"), Some(good_id), "a new instance of v1");
    let events = d.events();
    let rb: Vec<_> = events.iter().filter(|e| e.reason == "RolledBack").collect();
    assert_eq!(rb.len(), 1, "{events:?}");
    assert_eq!(rb[0].type_, podvisor::status::EventType::Warning);
    assert!(rb[0].message.contains(&good), "{}", rb[0].message);
    let (ok, out, err) = cli(&env, &d, &["pods"]);
    assert!(ok, "{err}");
    assert!(out.contains("web-testnode"), "{out}");
    assert!(
        err.contains(&format!("pod web-testnode: rolled back: {why}")),
        "{err}"
    );
    let (ok, out, err) = cli(&env, &d, &["describe", "web-testnode"]);
    assert!(ok, "{err}");
    assert!(out.contains(&format!("rolled back: {why}")), "{out}");
    assert!(out.contains("RolledBack"), "{out}");
    let id = running_id(&d, "web").expect("id");

    // A restarted daemon runs the rolled-back generation and does not retry the bad spec.
    // The rollback is durable once its record is written (on the daemon's writer thread).
    let record = env.root.join("pod-generations/default_web-testnode.json");
    wait_until("the rollback recorded", T, || {
        fs::read_to_string(&record).is_ok_and(|t| t.contains("\"rolledBack\":{"))
    });
    d.kill9();
    let d = Daemon::start(&env, &dir);
    wait_until("web re-adopted", T, || running_id(&d, "web").is_some());
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(uid(&d), Some(good.clone()));
    assert_eq!(running_id(&d, "web"), Some(id), "the same container");
    assert_eq!(
        d.pod("web").and_then(|v| v.rolled_back),
        Some(why),
        "still rolled back"
    );
    assert!(
        !d.events().iter().any(|e| e.reason == "Replaced"),
        "{:?}",
        d.events()
    );
    fs::remove_file(dir.join("web.yaml")).expect("rm");
    d.wait_all_gone(&env, T);
    // The record is removed on the daemon's writer thread, which a stop drains.
    d.stop();
    assert!(
        !env.root
            .join("pod-generations/default_web-testnode.json")
            .exists(),
        "the generation record goes with the pod"
    );
    env.assert_clean();
}
