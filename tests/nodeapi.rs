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
