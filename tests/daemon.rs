//! Root integration tests of `podvisor run` with real containers: manifests written, edited,
//! broken and deleted; the daemon killed and restarted (also during churn); the local API and
//! CLI; nothing left behind.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::daemon::{wait_for, Daemon, KeepLogOnPanic};
use common::TestEnv;
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

/// Init pid of a container from its monitor's state file.
fn init_pid(env: &TestEnv, container_id: &str) -> i32 {
    let id = container_id.trim_start_matches("podvisor://");
    let state: serde_json::Value = serde_json::from_slice(
        &fs::read(env.run.join("containers").join(id).join("state.json")).expect("state"),
    )
    .expect("json");
    state["init"]["pid"].as_i64().expect("pid") as i32
}

fn cli(env: &TestEnv, d: &Daemon, args: &[&str]) -> (bool, String, String) {
    d.cli(env, args)
}

#[test]
fn manifest_written_edited_broken_and_deleted() {
    let env = TestEnv::new("lifecycle");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    let d = Daemon::start(&env, &dir);
    let file = dir.join("web.yaml");

    fs::write(&file, manifest("web", "v1", "")).expect("write");
    wait_for("web running", T, || running_id(&d, "web").is_some());
    let first = running_id(&d, "web").expect("id");
    let (ok, out, _) = cli(&env, &d, &["pods"]);
    assert!(
        ok && out.contains("web-testnode") && out.contains("Running"),
        "{out}"
    );

    // Label-only edit: nothing restarts, the label shows up.
    fs::write(&file, manifest("web", "v1", "    tier: front\n")).expect("write");
    wait_for("label applied", T, || {
        d.pod("web")
            .and_then(|v| v.pod.metadata.labels)
            .is_some_and(|l| l.get("tier").is_some_and(|t| t == "front"))
    });
    assert_eq!(running_id(&d, "web"), Some(first.clone()));

    // Spec edit: replaced by a new container (new uid), the old one is gone.
    fs::write(&file, manifest("web", "v2", "    tier: front\n")).expect("write");
    wait_for("replacement running", T, || {
        running_id(&d, "web").is_some_and(|id| id != first)
    });
    let second = running_id(&d, "web").expect("id");
    wait_for("old container removed", T, || {
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
    wait_for("source error shown", T, || {
        d.pod("web").is_some_and(|v| v.source_error.is_some())
    });
    assert_eq!(running_id(&d, "web"), Some(second.clone()));
    let (_, out, err) = cli(&env, &d, &["pods"]);
    assert!(format!("{out}{err}").contains("web.yaml"), "{out}{err}");
    let (ok, out, _) = cli(&env, &d, &["describe", "web"]);
    assert!(ok && out.contains("SourceError"), "{out}");

    // Fixed again, then deleted: stopped and cleaned.
    fs::write(&file, manifest("web", "v2", "    tier: front\n")).expect("write");
    wait_for("error cleared", T, || {
        d.pod("web").is_some_and(|v| v.source_error.is_none())
    });
    assert_eq!(running_id(&d, "web"), Some(second));
    let (ok, out, _) = cli(&env, &d, &["logs", "web"]);
    assert!(ok && out.contains("v2"), "{out}");
    fs::remove_file(&file).expect("rm");
    wait_for("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    wait_for("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

#[test]
fn daemon_sigkill_and_restart_readopts_running_containers() {
    let env = TestEnv::new("readopt-daemon");
    let _ = env.images();
    let dir = env.dir.path().join("manifests");
    fs::create_dir_all(&dir).expect("mkdir");
    fs::write(dir.join("a.yaml"), manifest("a", "hi", "")).expect("write");
    let d = Daemon::start(&env, &dir);
    wait_for("a running", T, || running_id(&d, "a").is_some());
    let id = running_id(&d, "a").expect("id");
    let pid = init_pid(&env, &id);
    d.kill9();
    // While the daemon is down, the manifest of b appears.
    fs::write(dir.join("b.yaml"), manifest("b", "hi", "")).expect("write");
    let d = Daemon::start(&env, &dir);
    wait_for("b running", T, || running_id(&d, "b").is_some());
    assert_eq!(running_id(&d, "a"), Some(id.clone()), "same container");
    assert_eq!(init_pid(&env, &id), pid, "same process");
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    for f in ["a.yaml", "b.yaml"] {
        fs::remove_file(dir.join(f)).expect("rm");
    }
    wait_for("all gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    wait_for("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

#[test]
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
    wait_for("present pods running", Duration::from_secs(60), || {
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
    let deadline = Instant::now() + Duration::from_secs(60);
    while live_dirs().len() != present.len() {
        assert!(
            Instant::now() < deadline,
            "one live monitor per pod: present {present:?}, live {:?}, pods {:?}",
            live_dirs(),
            d.pods().map(|p| p
                .into_iter()
                .map(|v| v.pod.metadata.name)
                .collect::<Vec<_>>())
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let procs = common::processes_in_cgroup(&env.cgroup_parent);
    let sleepers = procs.iter().filter(|(_, c)| c.starts_with("sh -c")).count();
    assert_eq!(sleepers, present.len(), "{procs:?}");
    for n in &present {
        fs::remove_file(dir.join(format!("{n}.yaml"))).expect("rm");
    }
    wait_for("all gone", Duration::from_secs(60), || {
        d.pods().is_some_and(|p| p.is_empty())
            && fs::read_dir(env.root.join("containers"))
                .map(|e| e.count() == 0)
                .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}

#[test]
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
    wait_for("both URL pods running", T, || {
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
    wait_for("URL error shown", T, || {
        d.pod("u1").is_some_and(|v| v.source_error.is_some())
    });
    assert_eq!(
        (running_id(&d, "u1"), running_id(&d, "u2")),
        (id1, id2.clone())
    );
    // The body drops u1: only u1 is stopped.
    srv.set(Some(manifest("u2", "two", "")));
    wait_for("u1 gone", T, || d.pod("u1").is_none());
    assert_eq!(running_id(&d, "u2"), id2);
    srv.set(Some(String::new()));
    wait_for("all gone", T, || {
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
    wait_for("ErrImagePull", T, || {
        d.pod("air")
            .and_then(|v| waiting_reason(&v, "main"))
            .is_some_and(|r| r == "ErrImagePull")
    });
    wait_for("ImagePullBackOff", T, || {
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
    wait_for("air running", Duration::from_secs(40), || {
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
    wait_for("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    wait_for("containers removed", T, || {
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
    wait_for("pulled running", T, || running_id(&d, "pulled").is_some());
    let (ok, out, _) = cli(&env, &d, &["describe", "pulled"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("Pulling") && out.contains("Successfully pulled image"),
        "{out}"
    );
    let (ok, out, _) = cli(&env, &d, &["logs", "pulled"]);
    assert!(ok && out.contains("from-registry"), "{out}");
    fs::remove_file(dir.join("pulled.yaml")).expect("rm");
    wait_for("pod gone", T, || d.pods().is_some_and(|p| p.is_empty()));
    d.stop();
    env.assert_clean();
}
