//! Root integration tests of the node API's TCP ports with `podvisor run` and real clients:
//! the healthz port answering as the kubelet's, and failing once the sync loop is wedged (the
//! test hook the systemd watchdog test uses); the secure port's authentication and
//! authorization on every route (curl with client certificates and tokens, openssl s_client
//! for the TLS versions); Debian's Prometheus scraping the four metrics endpoints over TLS
//! with a bearer token (tests/prometheus/podvisor.yml) and promtool checking each; the
//! Summary API, container logs (followed too) and /logs; a pod pushed with `podvisor apply`
//! surviving a daemon restart and removed by `podvisor delete`.

mod common;

use std::fs;
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use common::daemon::{Daemon, KeepLogOnPanic};
use common::{wait_until, wait_until_else, TestEnv};

/// A port free on 127.0.0.1 right now (bound and released).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// `curl URL` with `args`: (HTTP status, body).
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
#[ignore = "needs root: runs podvisor run"]
fn healthz_port_answers_and_fails_when_the_sync_loop_wedges() {
    let env = TestEnv::new("nodeapi-healthz");
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("manifests");
    let port = free_port();
    let config = env.dir.path().join("kubelet.yaml");
    fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
             syncFrequency: 1s\nhealthzPort: {port}\nhealthzBindAddress: 127.0.0.1\n"
        ),
    )
    .expect("config");
    let wedge = env.dir.path().join("wedge");
    let d = Daemon::start_with_env(
        &env,
        &manifests,
        &["--config", config.to_str().expect("utf8")],
        &[("PODVISOR_TEST_WEDGE_FILE", wedge.as_path())],
    );
    let _keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
    let url = format!("http://127.0.0.1:{port}/healthz");
    wait_until("healthz ok", Duration::from_secs(30), || {
        curl(&url, &[]) == (200, "ok".to_string())
    });
    let (code, body) = curl(&format!("{url}?verbose"), &[]);
    assert_eq!(
        (code, body.as_str()),
        (200, "[+]ping ok\n[+]syncloop ok\nhealthz check passed\n")
    );
    assert_eq!(curl(&format!("{url}/syncloop"), &[]).0, 200);
    assert_eq!(curl(&format!("http://127.0.0.1:{port}/pods"), &[]).0, 404);

    fs::write(&wedge, b"").expect("wedge");
    // The deadline is max(2 x syncFrequency, 10 s): the check fails within it, a few
    // seconds of slack for a loaded machine.
    wait_until("healthz failing", Duration::from_secs(60), || {
        curl(&url, &[]).0 == 500
    });
    let (code, body) = curl(&url, &[]);
    assert_eq!(code, 500);
    assert_eq!(
        body,
        "[+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n"
    );
    // The unix-socket API still answers: only the loop is stuck.
    assert!(d.pods().is_some());
    assert!(
        d.log().contains("healthz check syncloop failed"),
        "{}",
        d.log()
    );
}

/// `openssl` with `args` in `dir`; panics with its output when it fails.
fn openssl(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA (`{name}-ca.crt`) and a client certificate it signed for CN `cn`, O `org`
/// (`{name}.crt`, `{name}.key`).
fn client_cert(dir: &std::path::Path, name: &str, cn: &str, org: &str) {
    let ca = format!("{name}-ca");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut args = vec!["req", "-x509"];
    args.extend(ec);
    let (ca_key, ca_crt) = (format!("{ca}.key"), format!("{ca}.crt"));
    args.extend(["-keyout", &ca_key, "-out", &ca_crt, "-days", "2", "-subj"]);
    let ca_subj = format!("/CN={ca}");
    args.push(&ca_subj);
    openssl(dir, &args);
    let (key, csr, crt) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
    );
    let subj = format!("/O={org}/CN={cn}");
    let mut args = vec!["req"];
    args.extend(ec);
    args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
    openssl(dir, &args);
    fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").expect("ext");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            &ca_crt,
            "-CAkey",
            &ca_key,
            "-CAcreateserial",
            "-out",
            &crt,
            "-days",
            "2",
            "-extfile",
            "client.ext",
        ],
    );
}

/// Whether `openssl s_client` completes a handshake with `version` (`-tls1_2`, ...).
fn tls_handshake(port: u16, version: &str) -> bool {
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &format!("127.0.0.1:{port}"),
            version,
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    out.status.success() && text.contains("Cipher is") && !text.contains("Cipher is (NONE)")
}

#[test]
#[ignore = "needs root: runs podvisor run"]
fn secure_port_authenticates_authorizes_and_refuses_every_route_without_credentials() {
    let env = TestEnv::new("nodeapi-secure");
    let dir = env.dir.path();
    let manifests = dir.join("manifests");
    fs::create_dir_all(&manifests).expect("manifests");
    client_cert(dir, "alice", "alice", "ops");
    client_cert(dir, "mallory", "alice", "ops");
    fs::write(
        dir.join("tokens.csv"),
        "# token,user,uid,groups\nprom-secret,prometheus,1,\"monitoring\"\n",
    )
    .expect("tokens");
    fs::write(
        dir.join("rules.yaml"),
        "rules:\n- groups: [ops]\n  verbs: ['*']\n  subresources: ['*']\n\
         - users: [prometheus]\n  verbs: [get]\n  subresources: [metrics, stats]\n",
    )
    .expect("rules");
    let (port, healthz) = (free_port(), free_port());
    let config = dir.join("kubelet.yaml");
    fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
             address: 127.0.0.1\nport: {port}\nhealthzPort: {healthz}\nreadOnlyPort: 0\n\
             tlsMinVersion: VersionTLS12\n\
             authentication:\n  anonymous:\n    enabled: false\n  x509:\n    clientCAFile: {}\n\
             authorization:\n  mode: Webhook\n",
            dir.join("alice-ca.crt").display()
        ),
    )
    .expect("config");
    let s = |p: &std::path::Path| p.to_str().expect("utf8").to_string();
    let (cfg, tokens, rules) = (
        s(&config),
        s(&dir.join("tokens.csv")),
        s(&dir.join("rules.yaml")),
    );
    let d = Daemon::start_with(
        &env,
        &manifests,
        &[
            "--config",
            &cfg,
            "--token-auth-file",
            &tokens,
            "--authorization-rules-file",
            &rules,
        ],
    );
    let _keep = KeepLogOnPanic(dir.join("daemon.log"));
    let ca = s(&env.root.join("pki/kubelet.crt"));
    let base = format!("https://127.0.0.1:{port}");
    let alice = [
        "--cacert",
        &ca,
        "--cert",
        &s(&dir.join("alice.crt")),
        "--key",
        &s(&dir.join("alice.key")),
    ]
    .map(String::from);
    let alice: Vec<&str> = alice.iter().map(String::as_str).collect();
    wait_until("secure port up", Duration::from_secs(30), || {
        curl(&format!("{base}/healthz"), &alice).0 == 200
    });

    // A client certificate from the clientCAFile: user alice in group ops, allowed all.
    let (code, body) = curl(&format!("{base}/pods"), &alice);
    assert_eq!(code, 200, "{body}");
    let list: serde_json::Value = serde_json::from_str(&body).expect("PodList");
    assert_eq!(list["kind"], "PodList");
    // A token: prometheus may read metrics and stats only (the kubelet's 403 otherwise).
    let prom = ["--cacert", &ca, "-H", "Authorization: Bearer prom-secret"];
    assert_eq!(
        curl(&format!("{base}/pods"), &prom),
        (
            403,
            "Forbidden (user=prometheus, verb=get, resource=nodes, subresource=proxy)\n".into()
        )
    );

    let (code, body) = curl(&format!("{base}/metrics"), &prom);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\nkubelet_running_pods 0\n"), "{body}");
    // The classic text format for curl (no OpenMetrics in its Accept), as the kubelet's.
    assert!(
        body.contains("# TYPE kubelet_started_pods_total counter\n"),
        "{body}"
    );
    assert!(!body.contains("# EOF"), "{body}");

    // Every route refuses requests without valid credentials: none, a wrong token, a
    // certificate from another CA with the same subject.
    let mallory = [
        "--cacert",
        &ca,
        "--cert",
        &s(&dir.join("mallory.crt")),
        "--key",
        &s(&dir.join("mallory.key")),
    ]
    .map(String::from);
    let mallory: Vec<&str> = mallory.iter().map(String::as_str).collect();
    for route in podvisor::nodeapi::routes::ROUTES {
        let url = format!("{base}{}", route.example);
        let what = route.pattern;
        for method in route.methods.iter().chain(["POST"].iter()) {
            let m = ["-X", method, "--cacert", &ca];
            assert_eq!(curl(&url, &m).0, 401, "{method} {what} anonymous");
            let wrong = [
                "-X",
                method,
                "--cacert",
                &ca,
                "-H",
                "Authorization: Bearer nope",
            ];
            assert_eq!(curl(&url, &wrong).0, 401, "{method} {what} wrong token");
            // rustls refuses the handshake: curl gets no HTTP status at all.
            let mut foreign = vec!["-X", method];
            foreign.extend(mallory.iter().copied());
            let (code, _) = curl(&url, &foreign);
            assert!(
                code == 0 || code == 401,
                "{method} {what} foreign certificate: {code}"
            );
            // The right client certificate gets past authentication and authorization.
            let mut right = vec!["-X", method];
            right.extend(alice.iter().copied());
            let (code, body) = curl(&url, &right);
            assert!(
                code != 401 && code != 403 && code != 0,
                "{method} {what} alice: {code} {body}"
            );
        }
        let (code, body) = curl(&url, &["--cacert", &ca]);
        assert_eq!((code, body.as_str()), (401, "Unauthorized\n"), "{what}");
    }
    assert_eq!(curl(&format!("{base}/nope"), &["--cacert", &ca]).0, 401);
    assert_eq!(curl(&format!("{base}/nope"), &alice).0, 404);

    // TLS versions, as openssl negotiates them.
    assert!(tls_handshake(port, "-tls1_3"));
    assert!(tls_handshake(port, "-tls1_2"));
    assert!(!tls_handshake(port, "-tls1_1"));
    // The certificate kept in the root dir is reused by the next daemon.
    let first = fs::read(env.root.join("pki/kubelet.crt")).expect("cert");
    d.stop();
    let _d = Daemon::start_with(
        &env,
        &manifests,
        &["--config", &cfg, "--token-auth-file", &tokens],
    );
    assert_eq!(
        fs::read(env.root.join("pki/kubelet.crt")).expect("cert"),
        first
    );
}

/// A child process killed and reaped on drop (Prometheus).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `promtool check metrics` on `text`; panics with its output when it fails.
fn promtool(what: &str, text: &str) {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("promtool");
    assert!(
        out.status.success(),
        "promtool on {what}: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A Prometheus instant query: the `result` array.
fn prom_query(port: u16, q: &str) -> Vec<serde_json::Value> {
    let (code, body) = curl(
        &format!("http://127.0.0.1:{port}/api/v1/query"),
        &["-G", "--data-urlencode", &format!("query={q}")],
    );
    if code != 200 {
        return Vec::new();
    }
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

const WEB: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    imagePullPolicy: Never\n    command: [sh, -c, 'trap \"exit 0\" TERM; i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done']\n    readinessProbe:\n      exec: {command: [\"true\"]}\n      periodSeconds: 1\n";

const PUSHED: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: pushed\n  labels: {app: pushed}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    imagePullPolicy: Never\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.2; done']\n";

/// The running container id of pod `name` (`namespace/name`), if any.
fn running(d: &Daemon, full: &str) -> Option<String> {
    let v = d
        .pods()?
        .into_iter()
        .find(|v| podvisor::status::full_name(&v.pod) == full)?;
    let cs = v.pod.status?.container_statuses?.into_iter().next()?;
    cs.state?.running?;
    cs.container_id
}

#[test]
#[ignore = "needs root: runs podvisor run with containers, Prometheus and curl against it"]
fn prometheus_scrapes_the_node_and_pushed_pods_survive_a_restart() {
    let env = TestEnv::new("nodeapi-e2e");
    env.images();
    let dir = env.dir.path();
    let manifests = dir.join("manifests");
    fs::create_dir_all(&manifests).expect("manifests");
    fs::write(manifests.join("web.yaml"), WEB).expect("web");
    client_cert(dir, "ops", "fleet-admin", "ops");
    fs::write(
        dir.join("tokens.csv"),
        "prom-secret,prometheus,1,\"monitoring\"\n",
    )
    .expect("tokens");
    fs::write(dir.join("prom.token"), "prom-secret\n").expect("token");
    fs::write(
        dir.join("rules.yaml"),
        "rules:\n- groups: [ops]\n  verbs: ['*']\n  subresources: ['*']\n\
         - users: [prometheus]\n  verbs: [get]\n  subresources: [metrics, stats]\n",
    )
    .expect("rules");
    let port = free_port();
    let config = dir.join("kubelet.yaml");
    fs::write(
        &config,
        format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
             address: 127.0.0.1\nport: {port}\nhealthzPort: 0\nsyncFrequency: 5s\n\
             authentication:\n  x509:\n    clientCAFile: {}\n\
             authorization:\n  mode: Webhook\n",
            dir.join("ops-ca.crt").display()
        ),
    )
    .expect("config");
    let s = |p: &std::path::Path| p.to_str().expect("utf8").to_string();
    let flags = [
        "--config".to_string(),
        s(&config),
        "--token-auth-file".to_string(),
        s(&dir.join("tokens.csv")),
        "--authorization-rules-file".to_string(),
        s(&dir.join("rules.yaml")),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let d = Daemon::start_with(&env, &manifests, &flags);
    let _keep = KeepLogOnPanic(dir.join("daemon.log"));
    let ca = s(&env.root.join("pki/kubelet.crt"));
    let base = format!("https://127.0.0.1:{port}");
    let ops_args = [
        "--cacert".to_string(),
        ca.clone(),
        "--cert".to_string(),
        s(&dir.join("ops.crt")),
        "--key".to_string(),
        s(&dir.join("ops.key")),
    ];
    let ops: Vec<&str> = ops_args.iter().map(String::as_str).collect();
    let prom = [
        "--cacert",
        ca.as_str(),
        "-H",
        "Authorization: Bearer prom-secret",
    ];
    wait_until("web running and ready", Duration::from_secs(60), || {
        d.pods().into_iter().flatten().any(|v| {
            v.pod.metadata.name.as_deref() == Some("web-testnode")
                && v.pod
                    .status
                    .as_ref()
                    .and_then(|s| s.container_statuses.as_ref())
                    .is_some_and(|cs| cs.iter().all(|c| c.ready))
        })
    });

    // Every metrics endpoint passes promtool, with the kubelet's and cadvisor's names.
    wait_until("probe results counted", Duration::from_secs(30), || {
        curl(&format!("{base}/metrics/probes"), &prom)
            .1
            .contains("prober_probe_total{")
    });
    for (path, want) in [
        ("/metrics", "kubelet_pod_start_duration_seconds_count 1"),
        ("/metrics", "kubelet_running_pods 1"),
        ("/metrics", "kubelet_started_containers_total{container_type=\"container\"} 1"),
        ("/metrics/cadvisor", "container_cpu_usage_seconds_total{container=\"main\""),
        ("/metrics/cadvisor", "container_memory_working_set_bytes{container=\"main\""),
        ("/metrics/cadvisor", "image=\"busybox:1.35\""),
        ("/metrics/probes", "prober_probe_total{probe_type=\"Readiness\",result=\"successful\",container=\"main\",pod=\"web-testnode\",namespace=\"default\""),
        ("/metrics/resource", "container_memory_working_set_bytes{container=\"main\",pod=\"web-testnode\",namespace=\"default\"}"),
    ] {
        let (code, body) = curl(&format!("{base}{path}"), &prom);
        assert_eq!(code, 200, "{path}: {body}");
        assert!(body.contains(want), "{path}: {want} not in\n{body}");
        promtool(path, &body);
    }

    // Debian's Prometheus scrapes all four over TLS with the token file.
    let prom_port = free_port();
    let prom_dir = dir.join("prometheus");
    fs::create_dir_all(&prom_dir).expect("prometheus dir");
    let scrape = fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/prometheus/podvisor.yml"
    ))
    .expect("scrape config")
    .replace("@PORT@", &port.to_string())
    .replace("@TOKEN_FILE@", &s(&dir.join("prom.token")))
    .replace("@CA_FILE@", &ca);
    fs::write(prom_dir.join("prometheus.yml"), scrape).expect("write config");
    let prom_log = fs::File::create(prom_dir.join("prometheus.log")).expect("log");
    let _prometheus = Reaped(
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                prom_dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                prom_dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(prom_log.try_clone().expect("log"))
            .stderr(prom_log)
            .spawn()
            .expect("prometheus"),
    );
    wait_until_else(
        "Prometheus: up == 1 for the four jobs",
        Duration::from_secs(90),
        || {
            let up = prom_query(prom_port, "up == 1");
            up.len() == 4
        },
        || {
            format!(
                "up: {:?}\ntargets: {}\nlog: {}",
                prom_query(prom_port, "up"),
                curl(&format!("http://127.0.0.1:{prom_port}/api/v1/targets"), &[]).1,
                fs::read_to_string(prom_dir.join("prometheus.log")).unwrap_or_default()
            )
        },
    );
    for q in [
        "kubelet_running_pods",
        "container_cpu_usage_seconds_total{pod=\"web-testnode\",container=\"main\"}",
        "prober_probe_total{pod=\"web-testnode\",probe_type=\"Readiness\"}",
        "pod_memory_working_set_bytes{pod=\"web-testnode\"}",
    ] {
        wait_until(
            &format!("Prometheus has {q}"),
            Duration::from_secs(30),
            || !prom_query(prom_port, q).is_empty(),
        );
    }

    // The Summary API, with the kubelet's field names.
    let (code, body) = curl(&format!("{base}/stats/summary"), &ops);
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("summary");
    assert_eq!(v["node"]["nodeName"], "testnode");
    assert!(v["node"]["fs"]["capacityBytes"].as_u64().is_some(), "{v}");
    let web = v["pods"]
        .as_array()
        .expect("pods")
        .iter()
        .find(|p| p["podRef"]["name"] == "web-testnode")
        .unwrap_or_else(|| panic!("{v}"));
    let main = &web["containers"][0];
    assert_eq!(main["name"], "main");
    assert!(
        main["cpu"]["usageCoreNanoSeconds"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{web}"
    );
    assert!(
        main["memory"]["workingSetBytes"]
            .as_u64()
            .is_some_and(|n| n > 0),
        "{web}"
    );
    assert!(
        web["process_stats"]["process_count"]
            .as_u64()
            .is_some_and(|n| n >= 1),
        "{web}"
    );
    // Prometheus' token may read stats, not logs (the rule file).
    assert_eq!(curl(&format!("{base}/stats/summary"), &prom).0, 200);
    assert_eq!(
        curl(
            &format!("{base}/containerLogs/default/web-testnode/main"),
            &prom
        )
        .0,
        403
    );

    // Container logs: tail, timestamps, follow.
    let (code, body) = curl(
        &format!("{base}/containerLogs/default/web-testnode/main?tailLines=2&timestamps=true"),
        &ops,
    );
    assert_eq!(code, 200, "{body}");
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), 2, "{body}");
    assert!(lines[1].contains("Z line "), "{body}");
    let mut follow = ops.clone();
    follow.extend(["--max-time", "3"]);
    let out = Command::new("curl")
        .args(["-sS", "-N"])
        .args(&follow)
        .arg(format!(
            "{base}/containerLogs/default/web-testnode/main?follow=true&tailLines=0"
        ))
        .output()
        .expect("curl follow");
    let streamed = String::from_utf8_lossy(&out.stdout);
    assert!(
        streamed.lines().filter(|l| l.starts_with("line ")).count() >= 5,
        "{streamed}"
    );

    // /logs: the listing of /var/log.
    let (code, body) = curl(&format!("{base}/logs/"), &ops);
    assert_eq!(code, 200, "{body}");
    assert!(body.starts_with("<pre>\n"), "{body}");

    // A malformed request head over TLS is answered 400 and closed.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "printf 'GARBAGE\\r\\n\\r\\n' | timeout 20 openssl s_client -quiet -connect 127.0.0.1:{port} 2>/dev/null"
        ))
        .output()
        .expect("openssl");
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("HTTP/1.1 400 "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // podvisor apply: created, unchanged, refused with the file's line:column.
    let pushed = dir.join("pushed.yaml");
    fs::write(&pushed, PUSHED).expect("pushed");
    let apply = |file: &std::path::Path, extra: &[&str]| {
        let out = Command::new(common::podvisor_bin())
            .arg("apply")
            .arg("-f")
            .arg(file)
            .arg("--server")
            .arg(&base)
            .arg("--certificate-authority")
            .arg(&ca)
            .arg("--client-certificate")
            .arg(dir.join("ops.crt"))
            .arg("--client-key")
            .arg(dir.join("ops.key"))
            .args(extra)
            .output()
            .expect("apply");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (ok, out, err) = apply(&pushed, &[]);
    assert!(ok, "{out}{err}");
    assert_eq!(out, "pod/pushed created\n");
    wait_until("pushed pod running", Duration::from_secs(60), || {
        running(&d, "default/pushed").is_some()
    });
    let first = running(&d, "default/pushed").expect("running");
    let (ok, out, _) = apply(&pushed, &[]);
    assert!(ok && out == "pod/pushed unchanged\n", "{out}");
    let bad = dir.join("bad.yaml");
    fs::write(&bad, PUSHED.replace("    image: busybox:1.35\n", "")).expect("bad");
    let (ok, _, err) = apply(&bad, &[]);
    assert!(!ok);
    assert!(
        err.contains(&format!("{}:9:5: spec.containers[0].image", bad.display())),
        "{err}"
    );
    // A token Prometheus holds may not push (the rule file gives it metrics and stats only).
    let (ok, _, err) = Command::new(common::podvisor_bin())
        .args(["apply", "-f"])
        .arg(&pushed)
        .args([
            "--server",
            &base,
            "--certificate-authority",
            &ca,
            "--token",
            "prom-secret",
        ])
        .output()
        .map(|o| {
            (
                o.status.success(),
                (),
                String::from_utf8_lossy(&o.stderr).into_owned(),
            )
        })
        .expect("apply");
    assert!(!ok && err.contains("403"), "{err}");
    let v = d
        .pods()
        .into_iter()
        .flatten()
        .find(|v| v.pod.metadata.name.as_deref() == Some("pushed"))
        .expect("pushed view");
    assert_eq!(v.source, "api:default/pushed");
    assert_eq!(
        v.pod.metadata.annotations.as_ref().expect("annotations")["kubernetes.io/config.source"],
        "api"
    );

    // It survives a daemon restart, its container re-adopted (not restarted).
    d.stop();
    let d = Daemon::start_with(&env, &manifests, &flags);
    wait_until("pushed pod back", Duration::from_secs(30), || {
        running(&d, "default/pushed").as_deref() == Some(first.as_str())
    });

    // podvisor delete removes it and its stored manifest.
    let out = Command::new(common::podvisor_bin())
        .args([
            "delete",
            "pod",
            "pushed",
            "--server",
            &base,
            "--certificate-authority",
            &ca,
        ])
        .arg("--client-certificate")
        .arg(dir.join("ops.crt"))
        .arg("--client-key")
        .arg(dir.join("ops.key"))
        .output()
        .expect("delete");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "pod \"pushed\" deleted\n"
    );
    wait_until("pushed pod gone", Duration::from_secs(30), || {
        d.pods().is_some_and(|p| {
            !p.iter()
                .any(|v| v.pod.metadata.name.as_deref() == Some("pushed"))
        })
    });
    assert!(!env.root.join("api-pods/default_pushed.yaml").exists());
    let out = Command::new(common::podvisor_bin())
        .args([
            "delete",
            "pod",
            "pushed",
            "--server",
            &base,
            "--certificate-authority",
            &ca,
        ])
        .arg("--client-certificate")
        .arg(dir.join("ops.crt"))
        .arg("--client-key")
        .arg(dir.join("ops.key"))
        .output()
        .expect("delete");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("NotFound"));
    fs::remove_file(manifests.join("web.yaml")).expect("rm web");
    d.wait_all_gone(&env, Duration::from_secs(60));
}
