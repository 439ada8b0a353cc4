//! The CNI runtime against fake plugins (shell scripts that log their environment and stdin
//! and answer as the spec says): the protocol, the verbs' order and arguments, errors,
//! timeouts, the default configuration, the records. The real plugins are exercised by the
//! root tests (tests/network.rs).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cni::conf;
use super::*;

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let f = Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        for d in ["bin", "conf", "root", "run"] {
            fs::create_dir_all(f.path(d)).expect("mkdir");
        }
        f
    }
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }
    fn log(&self) -> PathBuf {
        self.path("calls.log")
    }
    /// A plugin that logs `<type> <command> <CNI_* vars>` and its stdin (one line each),
    /// then runs `body` (which may print a result; default: echo prevResult or a fixed one).
    fn plugin(&self, name: &str, body: &str) {
        let script = format!(
            "#!/bin/sh\nin=$(cat)\necho \"{name} $CNI_COMMAND id=$CNI_CONTAINERID netns=$CNI_NETNS if=$CNI_IFNAME args=$CNI_ARGS path=$CNI_PATH\" >> {log}\nprintf '%s\\n' \"$in\" >> {log}\n{body}\n",
            log = self.log().display()
        );
        let p = self.path("bin").join(name);
        fs::write(&p, script).expect("write");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    fn ok_plugin(&self, name: &str, ip: &str) {
        self.plugin(
            name,
            &format!(
                r#"[ "$CNI_COMMAND" = ADD ] && echo '{{"cniVersion":"1.0.0","interfaces":[{{"name":"eth0","sandbox":"/x"}}],"ips":[{{"address":"{ip}/16","interface":0}}]}}'
exit 0"#
            ),
        );
    }
    fn conf(&self, name: &str, v: Value) {
        fs::write(self.path("conf").join(name), v.to_string()).expect("conf");
    }
    fn network(&self, timeout: Duration) -> PodNetwork {
        let mut cfg = NetworkConfig::new(&self.path("root"));
        cfg.conf_dir = self.path("conf");
        cfg.bin_dirs = vec![self.path("nope"), self.path("bin")];
        cfg.plugin_timeout = timeout;
        PodNetwork::new(cfg, &self.path("root"), &self.path("run"), "boot-1")
    }
    fn calls(&self) -> Vec<(String, Value)> {
        let text = fs::read_to_string(self.log()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines
            .chunks(2)
            .map(|c| {
                (
                    c[0].to_string(),
                    serde_json::from_str(c.get(1).copied().unwrap_or("null"))
                        .unwrap_or(Value::Null),
                )
            })
            .collect()
    }
}

fn pod() -> k8s_openapi::api::core::v1::Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web-node", "namespace": "default", "uid": "u-1",
            "annotations": {"kubernetes.io/ingress-bandwidth": "1M"}},
        "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}
    }))
    .expect("pod")
}

fn two_plugin_list(version: &str) -> Value {
    json!({"cniVersion": version, "name": "testnet", "plugins": [
        {"type": "main", "x": 1},
        {"type": "meta", "capabilities": {"portMappings": true, "nope": true}}
    ]})
}

#[test]
fn setup_runs_the_list_in_order_with_prev_results_and_capabilities_and_teardown_reverses_it() {
    let f = Fixture::new();
    f.ok_plugin("main", "10.9.0.7");
    // meta passes its prevResult on, as portmap does.
    f.plugin(
        "meta",
        r#"[ "$CNI_COMMAND" = ADD ] && printf '%s' "$in" | sed 's/.*"prevResult":\({.*}\),"runtimeConfig".*/\1/'
exit 0"#,
    );
    f.conf("10-test.conflist", two_plugin_list("1.0.0"));
    f.conf("20-later.conflist", json!({"name": "x"}));
    let net = f.network(Duration::from_secs(10));
    let result_path = f.path("run/result.json");
    let st = net
        .setup(&SetupRequest {
            pod: &pod(),
            netns: Path::new("/proc/self/ns/net"),
            result_path: &result_path,
            dns: DnsArgs::default(),
        })
        .expect("setup");
    assert_eq!(st.network, "testnet");
    assert_eq!(st.ips, ["10.9.0.7".parse::<IpAddr>().expect("ip")]);
    assert_eq!(st.id.len(), 64);
    let calls = f.calls();
    let adds: Vec<&(String, Value)> = calls.iter().filter(|(h, _)| h.contains(" ADD ")).collect();
    assert_eq!(adds.len(), 2, "{calls:?}");
    let (head, main) = adds[0];
    assert!(head.starts_with("main ADD"), "{head}");
    assert!(head.contains(&format!("id={}", st.id)), "{head}");
    assert!(head.contains("netns=/proc/self/ns/net if=eth0"), "{head}");
    assert!(head.contains(&format!(
        "args=IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-node;K8S_POD_INFRA_CONTAINER_ID={};K8S_POD_UID=u-1",
        st.id
    )));
    assert!(head.contains(&format!(
        "path={}:{}",
        f.path("nope").display(),
        f.path("bin").display()
    )));
    assert_eq!(main["name"], "testnet");
    assert_eq!(main["cniVersion"], "1.0.0");
    assert_eq!(main["x"], 1);
    assert!(
        main.get("prevResult").is_none(),
        "the first plugin has none"
    );
    assert!(
        main.get("runtimeConfig").is_none(),
        "main declares no capability"
    );
    let (_, meta) = adds[1];
    assert_eq!(meta["prevResult"]["ips"][0]["address"], "10.9.0.7/16");
    assert_eq!(
        meta["runtimeConfig"],
        json!({"portMappings": [{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}]}),
        "only the declared capability, and bandwidth is not declared"
    );
    // The record is there, durable; the result beside the sandbox.
    let recs = net.store().list().expect("list");
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].id, st.id);
    assert_eq!(recs[0].conf_file, f.path("conf/10-test.conflist"));
    assert!(attachments::load_result(&result_path).is_some_and(|r| r.complete));

    // CHECK in order with the result.
    fs::remove_file(f.log()).expect("rm");
    net.check(&st.id, &result_path).expect("check");
    let checks: Vec<String> = f.calls().into_iter().map(|(h, _)| h).collect();
    assert!(checks[0].starts_with("main CHECK") && checks[1].starts_with("meta CHECK"));

    // The configuration changes: the DEL still uses the one the ADD used.
    f.conf("10-test.conflist", json!({"broken": true}));
    fs::remove_file(f.log()).expect("rm");
    net.teardown_pod("u-1", &result_path).expect("teardown");
    let dels = f.calls();
    assert!(
        dels[0].0.starts_with("meta DEL") && dels[1].0.starts_with("main DEL"),
        "{dels:?}"
    );
    assert_eq!(dels[1].1["prevResult"]["ips"][0]["address"], "10.9.0.7/16");
    assert!(net.store().list().expect("list").is_empty());
    assert!(!result_path.exists());
}

#[test]
fn a_plugin_error_is_named_by_network_file_and_plugin_and_the_add_is_undone() {
    let f = Fixture::new();
    f.ok_plugin("main", "10.9.0.7");
    f.plugin(
        "meta",
        r#"[ "$CNI_COMMAND" = DEL ] && exit 0
echo '{"cniVersion":"1.0.0","code":11,"msg":"port 8080 is taken","details":"try later"}'; exit 1"#,
    );
    f.conf("10-test.conflist", two_plugin_list("1.0.0"));
    let net = f.network(Duration::from_secs(10));
    let rp = f.path("run/result.json");
    let e = net
        .setup(&SetupRequest {
            pod: &pod(),
            netns: Path::new("/proc/self/ns/net"),
            result_path: &rp,
            dns: DnsArgs::default(),
        })
        .expect_err("meta fails");
    assert_eq!(
        e.to_string(),
        format!(
            "network \"testnet\" ({}): plugin \"meta\" ADD: port 8080 is taken: try later (code 11)",
            f.path("conf/10-test.conflist").display()
        )
    );
    // Undone: DEL of the whole list (main's result as prevResult), record removed.
    let calls = f.calls();
    let heads: Vec<&str> = calls
        .iter()
        .map(|(h, _)| h.split(" id=").next().unwrap_or(""))
        .collect();
    assert_eq!(heads, ["main ADD", "meta ADD", "meta DEL", "main DEL"]);
    assert_eq!(calls[3].1["prevResult"]["ips"][0]["address"], "10.9.0.7/16");
    assert!(net.store().list().expect("list").is_empty());
}

#[test]
fn a_failed_undo_keeps_the_record_for_the_next_start_to_release() {
    let f = Fixture::new();
    f.plugin("main", "echo garbage; exit 3");
    f.conf(
        "10-test.conf",
        json!({"cniVersion": "0.4.0", "name": "one", "type": "main"}),
    );
    let net = f.network(Duration::from_secs(10));
    let rp = f.path("run/result.json");
    let e = net
        .setup(&SetupRequest {
            pod: &pod(),
            netns: Path::new("/proc/self/ns/net"),
            result_path: &rp,
            dns: DnsArgs::default(),
        })
        .expect_err("crash");
    let msg = e.to_string();
    assert!(
        msg.contains("plugin \"main\" ADD: exit status 3 (stdout: garbage)"),
        "{msg}"
    );
    assert!(msg.contains("undoing it failed too"), "{msg}");
    let recs = net.store().list().expect("list");
    assert_eq!(recs.len(), 1, "kept for a later DEL");
    // The plugin is fixed: the GC pass releases it (its sandbox is gone).
    f.ok_plugin("main", "10.9.0.8");
    assert_eq!(net.collect(|_| false, |_| rp.clone(), true), 1);
    assert!(net.store().list().expect("list").is_empty());
}

#[test]
fn a_hanging_plugin_is_killed_with_its_children_at_the_timeout() {
    let f = Fixture::new();
    let pidfile = f.path("child.pid");
    f.plugin(
        "main",
        &format!("sleep 300 & echo $! > {}\nwait", pidfile.display()),
    );
    f.conf(
        "10-test.conf",
        json!({"cniVersion": "1.0.0", "name": "one", "type": "main"}),
    );
    let net = f.network(Duration::from_millis(400));
    let t = Instant::now();
    let e = net
        .setup(&SetupRequest {
            pod: &pod(),
            netns: Path::new("/proc/self/ns/net"),
            result_path: &f.path("run/r.json"),
            dns: DnsArgs::default(),
        })
        .expect_err("hangs");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let msg = e.to_string();
    assert!(
        msg.contains("plugin \"main\" ADD: no answer within 400ms: killed"),
        "{msg}"
    );
    let child: i32 = fs::read_to_string(&pidfile)
        .expect("pid")
        .trim()
        .parse()
        .expect("pid");
    // The plugin's child died with its process group (a zombie until reaped counts).
    let alive = || {
        fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|s| {
            !s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(), "the plugin's child {child} survived");
}

#[test]
fn a_missing_plugin_or_a_broken_list_fails_before_anything_runs() {
    let f = Fixture::new();
    f.ok_plugin("main", "10.9.0.7");
    f.conf("10-test.conflist", two_plugin_list("1.0.0"));
    let net = f.network(Duration::from_secs(10));
    let req = |rp: &Path| {
        net.setup(&SetupRequest {
            pod: &pod(),
            netns: Path::new("/proc/self/ns/net"),
            result_path: rp,
            dns: DnsArgs::default(),
        })
    };
    let rp = f.path("run/r.json");
    let e = req(&rp).expect_err("meta missing");
    assert_eq!(
        e.to_string(),
        format!(
            "network \"testnet\" ({}): plugin \"meta\" ADD: plugin binary not found in {}, {}",
            f.path("conf/10-test.conflist").display(),
            f.path("nope").display(),
            f.path("bin").display()
        )
    );
    assert!(!f.log().exists(), "nothing ran");
    assert!(net.store().list().expect("list").is_empty());
    fs::write(
        f.path("conf/05-broken.conflist"),
        "{\"name\": \"x\",\n \"plugins\": [}",
    )
    .expect("w");
    let e = req(&rp).expect_err("broken");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "CNI configuration {}: line 2 column",
            f.path("conf/05-broken.conflist").display()
        )),
        "{msg}"
    );
    fs::write(
        f.path("conf/05-broken.conflist"),
        json!({"cniVersion": "9.9.9", "name": "x", "plugins": [{"type": "a"}]}).to_string(),
    )
    .expect("w");
    let msg = req(&rp).expect_err("version").to_string();
    assert!(
        msg.contains("cniVersion \"9.9.9\" is not supported"),
        "{msg}"
    );
}

#[test]
fn an_empty_directory_gets_the_default_network() {
    let f = Fixture::new();
    let net = f.network(Duration::from_secs(10));
    let l = net.load().expect("default");
    assert_eq!(l.name, "podvisor");
    assert_eq!(l.path, f.path("conf").join(default_conf::FILE_NAME));
    let written: Value =
        serde_json::from_str(&fs::read_to_string(&l.path).expect("read")).expect("json");
    assert_eq!(
        written["plugins"][0]["ipam"]["dataDir"],
        f.path("root/network/ipam").display().to_string()
    );
    // A configuration of the admin's sorted before it wins from now on.
    f.conf(
        "10-mine.conf",
        json!({"cniVersion": "1.0.0", "name": "mine", "type": "bridge"}),
    );
    assert_eq!(net.load().expect("mine").name, "mine");
}

#[test]
fn status_and_gc_run_for_1_1_lists_only() {
    let f = Fixture::new();
    f.ok_plugin("main", "10.9.0.7");
    f.plugin("meta", "[ \"$CNI_COMMAND\" = ADD ] && printf '%s' \"$in\" | sed 's/.*\"prevResult\":\\({.*}\\),\"runtimeConfig\".*/\\1/'\nexit 0");
    f.conf("10-test.conflist", two_plugin_list("1.1.0"));
    let net = f.network(Duration::from_secs(10));
    let rp = f.path("run/r.json");
    let st = net
        .setup(&SetupRequest {
            pod: &pod(),
            netns: Path::new("/proc/self/ns/net"),
            result_path: &rp,
            dns: DnsArgs::default(),
        })
        .expect("setup");
    let heads: Vec<String> = f
        .calls()
        .into_iter()
        .map(|(h, _)| h.split(" id=").next().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        heads,
        ["main STATUS", "meta STATUS", "main ADD", "meta ADD"]
    );
    fs::remove_file(f.log()).expect("rm");
    // Nothing to release; GC is told which attachment is valid.
    assert_eq!(net.collect(|r| r.id == st.id, |_| rp.clone(), true), 0);
    let calls = f.calls();
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert!(calls[0].0.starts_with("main GC"));
    assert_eq!(
        calls[0].1["cni.dev/valid-attachments"],
        json!([{"containerID": st.id, "ifname": "eth0"}])
    );
    // 1.0: neither.
    f.conf("10-test.conflist", two_plugin_list("1.0.0"));
    fs::remove_file(f.log()).expect("rm");
    net.collect(|_| true, |_| rp.clone(), true);
    assert!(!f.log().exists());
}

#[test]
fn an_attachment_of_an_earlier_boot_is_deleted_without_its_namespace() {
    let f = Fixture::new();
    f.ok_plugin("main", "10.9.0.7");
    f.conf(
        "10-test.conf",
        json!({"cniVersion": "1.0.0", "name": "one", "type": "main"}),
    );
    let rp = f.path("run/r.json");
    {
        let old = f.network(Duration::from_secs(10));
        old.setup(&SetupRequest {
            pod: &pod(),
            netns: Path::new("/proc/self/ns/net"),
            result_path: &rp,
            dns: DnsArgs::default(),
        })
        .expect("setup");
    }
    fs::remove_file(f.log()).expect("rm");
    let mut cfg = NetworkConfig::new(&f.path("root"));
    cfg.conf_dir = f.path("conf");
    cfg.bin_dirs = vec![f.path("bin")];
    let net = PodNetwork::new(cfg, &f.path("root"), &f.path("run"), "boot-2");
    assert_eq!(net.collect(|_| false, |_| rp.clone(), true), 1);
    let calls = f.calls();
    assert_eq!(calls.len(), 1);
    assert!(
        calls[0].0.contains("main DEL") && calls[0].0.contains("netns= "),
        "{}",
        calls[0].0
    );
    assert!(
        calls[0].1.get("prevResult").is_none(),
        "no result survives a boot"
    );
}

#[test]
fn conf_files_are_read_in_lexical_order_with_libcnis_extensions() {
    let f = Fixture::new();
    for n in ["b.conf", "a.json", "c.conflist", "0.txt", ".hidden.yaml"] {
        fs::write(f.path("conf").join(n), "{}").expect("w");
    }
    let files: Vec<String> = conf::conf_files(&f.path("conf"))
        .expect("files")
        .iter()
        .map(|p| {
            p.file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(files, ["a.json", "b.conf", "c.conflist"]);
    assert!(conf::conf_files(&f.path("missing"))
        .expect("none")
        .is_empty());
}
