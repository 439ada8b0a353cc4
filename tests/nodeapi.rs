//! Root integration tests of the node API's TCP ports with `podvisor run` and real clients
//! (curl): the healthz port answering as the kubelet's, and failing once the sync loop is
//! wedged (the test hook the systemd watchdog test uses).

mod common;

use std::fs;
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use common::daemon::{Daemon, KeepLogOnPanic};
use common::{wait_until, TestEnv};

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
    assert!(body.ends_with("# EOF\n"), "{body}");

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
