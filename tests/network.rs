//! Pod networking through CNI with Debian's containernetworking-plugins (issue 16), as root.
//! Every test runs its daemon in a network namespace of its own (tests/common/netns.rs) with
//! its own CNI configuration directory, bridge name, subnet and host-local data directory, so
//! tests running in parallel (and other runs on the same machine) never share a bridge, a rule
//! or an allocation, and the host's network is never touched. "The host" below is that
//! namespace: where the daemon, its prober and the test's curl run.
//!
//! Checked: a pod's IP in status, describe, the downward API and /etc/hosts; curl of the pod
//! IP and of its hostPort (also through 127.0.0.1 and the bridge address: portmap's hairpin);
//! pod to pod; pod to host; readiness probes on the pod IP; the NodePorts refusal; a daemon
//! SIGKILL and restart keeping the IP; the default network (dual-stack); 200 pod
//! create/delete cycles and SIGKILLs during churn leaving no veth, IP allocation, attachment
//! record or rule (iptables-nft and a native nftables table); faults: a missing plugin, a
//! plugin that hangs, one that crashes, a broken conflist; a reboot releasing the IPs of the
//! earlier boot.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::daemon::{Daemon, KeepLogOnPanic};
use common::netns::TestNetns;
use common::{wait_until, wait_until_else, TestEnv};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(60);

/// A test's network: namespace, configuration directory, subnet, bridge, IPAM directory.
struct Net {
    env: TestEnv,
    ns: TestNetns,
    conf: PathBuf,
    ipam: PathBuf,
    manifests: PathBuf,
    /// The first three octets of the test's /24 (`10.2xx.<n>`).
    prefix: String,
    bridge: String,
    _keep: KeepLogOnPanic,
}

impl Net {
    /// `n` makes the subnet and bridge of this test differ from every other test's.
    fn new(tag: &str, n: u8) -> Net {
        let env = TestEnv::new(tag);
        let _ = env.images();
        let ns = TestNetns::new(tag);
        let conf = env.dir.path().join("cni");
        let ipam = env.dir.path().join("ipam");
        let manifests = env.dir.path().join("manifests");
        for d in [&conf, &manifests] {
            fs::create_dir_all(d).expect("mkdir");
        }
        let prefix = format!("10.{}.{}", 200 + (std::process::id() % 50), n);
        let bridge = format!("pvb{n}-{}", std::process::id() % 100_000);
        let keep = KeepLogOnPanic(env.dir.path().join("daemon.log"));
        let net = Net {
            env,
            ns,
            conf,
            ipam,
            manifests,
            prefix,
            bridge,
            _keep: keep,
        };
        net.write_conflist("10-test.conflist", &[]);
        net
    }

    /// The test's network: bridge with host-local IPAM, portmap, firewall, bandwidth, and
    /// `extra` plugins chained after them.
    fn write_conflist(&self, file: &str, extra: &[serde_json::Value]) {
        let mut plugins = vec![
            serde_json::json!({
                "type": "bridge", "bridge": self.bridge, "isGateway": true, "ipMasq": true,
                "hairpinMode": true,
                "ipam": {"type": "host-local", "dataDir": self.ipam,
                    "ranges": [[{"subnet": format!("{}.0/24", self.prefix)}]],
                    "routes": [{"dst": "0.0.0.0/0"}]}
            }),
            serde_json::json!({"type": "portmap", "capabilities": {"portMappings": true}}),
            serde_json::json!({"type": "firewall"}),
            serde_json::json!({"type": "bandwidth", "capabilities": {"bandwidth": true}}),
        ];
        plugins.extend(extra.iter().cloned());
        let list = serde_json::json!({"cniVersion": "1.0.0", "name": "pvtest", "plugins": plugins});
        fs::write(self.conf.join(file), list.to_string()).expect("conflist");
    }

    fn start(&self, extra: &[&str]) -> Daemon {
        let conf = format!("--cni-conf-dir={}", self.conf.display());
        let mut args = vec![conf.as_str()];
        args.extend_from_slice(extra);
        Daemon::start_in(&self.env, &self.manifests, &args, &self.ns)
    }

    fn manifest(&self, name: &str, body: &str) {
        fs::write(self.manifests.join(format!("{name}.yaml")), body).expect("manifest");
    }

    fn remove(&self, name: &str) {
        let _ = fs::remove_file(self.manifests.join(format!("{name}.yaml")));
    }

    fn gateway(&self) -> String {
        format!("{}.1", self.prefix)
    }

    /// host-local's allocations (one file per IP) in the test's data directory.
    fn allocations(&self) -> Vec<String> {
        allocations(&self.ipam.join("pvtest"))
    }

    fn attachment_records(&self) -> usize {
        fs::read_dir(self.env.root.join("network/attachments"))
            .map(|e| e.count())
            .unwrap_or(0)
    }

    /// Nothing of any pod is left: veths, allocations, records, per-pod rules.
    fn assert_no_leftovers(&self, ips: &[String]) {
        wait_until_else(
            "no veth, allocation, attachment record or per-pod rule left",
            T,
            || {
                self.ns.veths().is_empty()
                    && self.allocations().is_empty()
                    && self.attachment_records() == 0
                    && self.ns.per_pod_rules(ips).is_empty()
            },
            || {
                format!(
                    "veths {:?}, allocations {:?}, records {}, rules {:#?}",
                    self.ns.veths(),
                    self.allocations(),
                    self.attachment_records(),
                    self.ns.per_pod_rules(ips)
                )
            },
        );
    }
}

fn allocations(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .map(|r| {
            r.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "lock" && !n.starts_with("last_reserved_ip"))
                .collect()
        })
        .unwrap_or_default()
}

fn web(host_port: u16) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: web}}\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: web\n    image: busybox:1.35\n    command: [sh, -c, 'mkdir -p /www && echo \"web $POD_IP $POD_IPS\" > /www/index.html && exec httpd -f -p 8080 -h /www']\n    env:\n    - {{name: POD_IP, valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}}}\n    - {{name: POD_IPS, valueFrom: {{fieldRef: {{fieldPath: status.podIPs}}}}}}\n    ports: [{{containerPort: 8080, hostPort: {host_port}}}]\n    readinessProbe: {{httpGet: {{path: /, port: 8080}}, periodSeconds: 1}}\n"
    )
}

fn sleeper(name: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n{extra_spec}  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sh, -c, 'trap \"exit 0\" TERM; while true; do sleep 0.2; done']\n"
    )
}

fn pod_ips(v: &PodView) -> Vec<String> {
    v.pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ips.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.ip)
        .collect()
}

fn running(v: &PodView) -> bool {
    v.pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| {
            !cs.is_empty()
                && cs
                    .iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
        })
}

fn ready(v: &PodView) -> bool {
    v.pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|cs| !cs.is_empty() && cs.iter().all(|c| c.ready))
}

/// Waits until pod `name` runs with an IP; returns its IPs.
fn wait_ip(d: &Daemon, name: &str) -> Vec<String> {
    let mut ips = Vec::new();
    wait_until_else(
        &format!("{name} running with a pod IP"),
        T,
        || {
            d.pod(name).is_some_and(|v| {
                ips = pod_ips(&v);
                running(&v) && !ips.is_empty() && !ips[0].starts_with("127.")
            })
        },
        || format!("{:?}\n{}", d.pod(name).map(|v| v.pod.status), d.log()),
    );
    ips
}

/// `podvisor exec POD -- CMD` (the socket before `--`: what follows is the command).
fn exec(net: &Net, d: &Daemon, pod: &str, cmd: &[&str]) -> (bool, String) {
    let out = net
        .env
        .podvisor()
        .arg("exec")
        .arg("--api-socket")
        .arg(&d.socket)
        .arg(pod)
        .arg("--")
        .args(cmd)
        .output()
        .expect("exec");
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// `busybox httpd` in the test's namespace on `addr`, serving `body`: "the host" for pods.
fn host_server(net: &Net, addr: &str, body: &str) -> Child {
    let www = net.env.dir.path().join("host-www");
    fs::create_dir_all(&www).expect("www");
    fs::write(www.join("index.html"), body).expect("index");
    net.ns
        .cmd("busybox")
        .args(["httpd", "-f", "-p", addr, "-h"])
        .arg(&www)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("host httpd")
}

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn pod_ip_host_port_pod_to_pod_pod_to_host_and_a_restart_keeping_the_ip() {
    let net = Net::new("cni-e2e", 1);
    net.manifest("web", &web(18080));
    net.manifest("client", &sleeper("client", ""));
    let d = net.start(&[]);
    let web_ips = wait_ip(&d, "web");
    let ip = web_ips[0].clone();
    assert!(ip.starts_with(&format!("{}.", net.prefix)), "{ip}");
    assert_eq!(web_ips.len(), 1);
    // The readiness probe reaches the pod IP (its default host) from the daemon.
    wait_until("web ready", T, || d.pod("web").is_some_and(|v| ready(&v)));
    // From the host: the pod IP, and the hostPort on localhost and on the bridge address.
    let want = format!("web {ip} {ip}\n");
    assert_eq!(
        net.ns.curl(&format!("http://{ip}:8080/")).as_deref(),
        Some(want.as_str())
    );
    for host in ["127.0.0.1", &net.gateway()] {
        assert_eq!(
            net.ns.curl(&format!("http://{host}:18080/")).as_deref(),
            Some(want.as_str()),
            "hostPort via {host}"
        );
    }
    // describe, -o json, /etc/hosts.
    let (ok, describe, _) = d.cli(&net.env, &["describe", "web"]);
    assert!(ok);
    assert!(
        describe.contains(&format!("IP:           {ip}")),
        "{describe}"
    );
    let (ok, hosts) = exec(&net, &d, "web", &["cat", "/etc/hosts"]);
    assert!(
        ok && hosts.contains(&format!("{ip}\tweb-testnode\n")),
        "{hosts}"
    );
    // Pod to pod, pod to host.
    let client_ip = wait_ip(&d, "client")[0].clone();
    assert_ne!(client_ip, ip);
    let (ok, out) = exec(
        &net,
        &d,
        "client",
        &["wget", "-qO-", &format!("http://{ip}:8080/")],
    );
    assert!(ok && out == want, "pod to pod: {out}");
    let mut server = host_server(&net, &format!("{}:19090", net.gateway()), "from the host\n");
    let got = std::cell::RefCell::new(String::new());
    wait_until_else(
        "pod to host",
        Duration::from_secs(20),
        || {
            let (ok, out) = exec(
                &net,
                &d,
                "client",
                &["wget", "-qO-", &format!("http://{}:19090/", net.gateway())],
            );
            *got.borrow_mut() = out;
            ok && *got.borrow() == "from the host\n"
        },
        || got.borrow().clone(),
    );
    let _ = server.kill();
    let _ = server.wait();
    // A second pod wanting the same hostPort is refused at admission, naming the first.
    net.manifest("web2", &web(18080).replace("name: web}", "name: web2}"));
    wait_until_else(
        "web2 refused",
        T,
        || {
            d.pod("web2").is_some_and(|v| {
                let st = v.pod.status.unwrap_or_default();
                st.reason.as_deref() == Some("NodePorts")
                    && st.message.as_deref().is_some_and(|m| {
                        m.contains("hostPort 18080/TCP is used by pod default/web-testnode")
                    })
            })
        },
        || format!("{:?}", d.pod("web2").map(|v| v.pod.status)),
    );
    net.remove("web2");
    // hostIP is honoured: a hostPort on 127.0.0.1 answers there and not on the bridge address.
    net.manifest(
        "local",
        &web(18090)
            .replace("name: web}", "name: local}")
            .replace("hostPort: 18090", "hostPort: 18090, hostIP: 127.0.0.1"),
    );
    let local_ip = wait_ip(&d, "local")[0].clone();
    let want_local = format!("web {local_ip} {local_ip}\n");
    let got = std::cell::RefCell::new(None);
    wait_until_else(
        "the hostIP-bound hostPort answers on 127.0.0.1",
        Duration::from_secs(20),
        || {
            *got.borrow_mut() = net.ns.curl("http://127.0.0.1:18090/");
            got.borrow().as_deref() == Some(want_local.as_str())
        },
        || format!("{:?}", got.borrow()),
    );
    assert_eq!(
        net.ns.curl(&format!("http://{}:18090/", net.gateway())),
        None,
        "not on the bridge address"
    );
    net.remove("local");
    // SIGKILL and restart: the same container, the same IP, still reachable; CHECK ran.
    let web_pid = common::init_pid(&net.env, &running_id(&d, "web"));
    d.kill9();
    let d = net.start(&[]);
    wait_until("web re-adopted", T, || {
        d.pod("web")
            .is_some_and(|v| running(&v) && pod_ips(&v) == web_ips)
    });
    assert_eq!(common::init_pid(&net.env, &running_id(&d, "web")), web_pid);
    assert_eq!(
        net.ns.curl("http://127.0.0.1:18080/").as_deref(),
        Some(want.as_str())
    );
    assert!(
        !d.log().contains("CHECK failed, the sandbox is made again"),
        "{}",
        d.log()
    );
    // Everything removed: nothing left of either pod.
    net.remove("web");
    net.remove("client");
    d.wait_all_gone(&net.env, T);
    net.assert_no_leftovers(&[ip, client_ip, local_ip]);
    d.stop();
    net.env.assert_clean();
}

fn running_id(d: &Daemon, pod: &str) -> String {
    d.pod(pod)
        .and_then(|v| v.pod.status)
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().next())
        .and_then(|c| c.container_id)
        .expect("container id")
}

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn the_default_network_is_written_and_dual_stack_works() {
    let net = Net::new("cni-default", 2);
    // No configuration at all: podvisor writes its default network (podvisor0 in this
    // test's namespace), with the test's ranges.
    fs::remove_file(net.conf.join("10-test.conflist")).expect("rm");
    let v4 = format!("{}.0/24", net.prefix);
    let v6 = format!(
        "fd86:{:x}::/64",
        0x100 + u32::from(2u8) + std::process::id() % 0xe00
    );
    net.manifest("web", &web(18081));
    let cidr = format!("--pod-cidr={v4},{v6}");
    let d = net.start(&[&cidr]);
    let written = net.conf.join("87-podvisor-bridge.conflist");
    assert!(written.exists(), "{}", d.log());
    let text = fs::read_to_string(&written).expect("read");
    assert!(text.contains("\"bridge\": \"podvisor0\""), "{text}");
    assert!(text.contains(&v6), "{text}");
    let ips = wait_ip(&d, "web");
    assert_eq!(ips.len(), 2, "{ips:?}");
    assert!(
        ips[0].starts_with(&net.prefix) && ips[1].contains(':'),
        "{ips:?}"
    );
    let want = format!("web {} {},{}\n", ips[0], ips[0], ips[1]);
    assert_eq!(
        net.ns.curl(&format!("http://{}:8080/", ips[0])).as_deref(),
        Some(want.as_str())
    );
    let got = std::cell::RefCell::new(None);
    wait_until_else(
        "the pod's IPv6 address answers",
        Duration::from_secs(20),
        || {
            *got.borrow_mut() = net.ns.curl(&format!("http://[{}]:8080/", ips[1]));
            got.borrow().as_deref() == Some(want.as_str())
        },
        || format!("{:?}", got.borrow()),
    );
    assert_eq!(
        net.ns.curl("http://127.0.0.1:18081/").as_deref(),
        Some(want.as_str())
    );
    let ipam = net.env.root.join("network/ipam/podvisor");
    assert_eq!(allocations(&ipam).len(), 2, "{:?}", allocations(&ipam));
    net.remove("web");
    d.wait_all_gone(&net.env, T);
    wait_until("default network allocations released", T, || {
        allocations(&ipam).is_empty()
    });
    assert!(net.ns.veths().is_empty());
    assert!(
        net.ns.per_pod_rules(&ips).is_empty(),
        "{:?}",
        net.ns.per_pod_rules(&ips)
    );
    d.stop();
    net.env.assert_clean();
}

/// An admin's nftables table, as Debian's /etc/nftables.conf has it.
const NFT_ADMIN: &str = "table inet admin_filter {\n  chain input { type filter hook input priority 0; policy accept; }\n  chain forward { type filter hook forward priority 0; policy accept; }\n  chain output { type filter hook output priority 0; policy accept; }\n}\n";

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn two_hundred_pod_cycles_leave_no_veth_allocation_or_rule_with_nftables_beside() {
    let net = Net::new("cni-churn", 3);
    // A host that also runs nftables rules of its own (iptables-nft's tables live beside).
    let nft_file = net.env.dir.path().join("admin.nft");
    fs::write(&nft_file, NFT_ADMIN).expect("nft");
    net.ns
        .run("nft", &["-f", nft_file.to_str().expect("utf-8")]);
    let d = net.start(&[]);
    let mut seen = Vec::new();
    for round in 0..10 {
        for i in 0..20 {
            let name = format!("c{i}");
            net.manifest(&name, &sleeper(&name, ""));
        }
        wait_until_else(
            &format!("round {round}: 20 pods running with IPs"),
            T,
            || {
                d.pods().is_some_and(|ps| {
                    ps.len() == 20 && ps.iter().all(|v| running(v) && !pod_ips(v).is_empty())
                })
            },
            || d.log(),
        );
        assert_eq!(net.ns.veths().len(), 20);
        assert_eq!(net.allocations().len(), 20);
        for v in d.pods().unwrap_or_default() {
            seen.extend(pod_ips(&v));
        }
        for i in 0..20 {
            net.remove(&format!("c{i}"));
        }
        d.wait_all_gone(&net.env, T);
    }
    seen.sort();
    seen.dedup();
    net.assert_no_leftovers(&seen);
    let ruleset = net
        .ns
        .run("nft", &["list", "table", "inet", "admin_filter"]);
    assert!(
        ruleset.contains("chain forward"),
        "the admin's table is intact: {ruleset}"
    );
    d.stop();
    net.env.assert_clean();
}

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn sigkill_during_network_churn_leaks_no_veth_allocation_or_rule() {
    let net = Net::new("cni-kill9", 4);
    let names = ["p0", "p1", "p2", "p3"];
    let mut d = net.start(&[]);
    let mut seen: Vec<String> = Vec::new();
    for round in 0..10u32 {
        let add = names[(round as usize) % names.len()];
        let edit = names[(round as usize + 1) % names.len()];
        let del = names[(round as usize + 2) % names.len()];
        net.manifest(add, &sleeper(add, ""));
        if net.manifests.join(format!("{edit}.yaml")).exists() {
            // An edit replaces the pod: a new sandbox, a new attachment.
            net.manifest(edit, &sleeper(edit, &format!("  hostname: r{round}\n")));
        }
        if round % 3 == 2 {
            net.remove(del);
        }
        // SIGKILL at a moment that moves through sandbox creation and removal.
        std::thread::sleep(Duration::from_millis(40 + 37 * u64::from(round % 6)));
        for v in d.pods().unwrap_or_default() {
            seen.extend(pod_ips(&v));
        }
        d.kill9();
        d = net.start(&[]);
    }
    let present: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| net.manifests.join(format!("{n}.yaml")).exists())
        .collect();
    wait_until_else(
        "the present pods running with IPs, one attachment each",
        T,
        || {
            d.pods().is_some_and(|ps| {
                ps.len() == present.len() && ps.iter().all(|v| running(v) && !pod_ips(v).is_empty())
            }) && net.allocations().len() == present.len()
                && net.attachment_records() == present.len()
                && net.ns.veths().len() == present.len()
        },
        || {
            format!(
                "pods {:?}, allocations {:?}, records {}, veths {:?}",
                d.pods().map(|ps| ps
                    .iter()
                    .map(|v| (v.pod.metadata.name.clone(), pod_ips(v)))
                    .collect::<Vec<_>>()),
                net.allocations(),
                net.attachment_records(),
                net.ns.veths()
            )
        },
    );
    for v in d.pods().unwrap_or_default() {
        seen.extend(pod_ips(&v));
    }
    for n in &present {
        net.remove(n);
    }
    d.wait_all_gone(&net.env, T);
    seen.sort();
    seen.dedup();
    net.assert_no_leftovers(&seen);
    d.stop();
    net.env.assert_clean();
}

/// The FailedCreatePodSandBox events of pod `name`.
fn sandbox_failures(d: &Daemon, name: &str) -> Vec<String> {
    d.events()
        .into_iter()
        .filter(|e| {
            e.reason == "FailedCreatePodSandBox" && e.pod.starts_with(&format!("default/{name}-"))
        })
        .map(|e| e.message)
        .collect()
}

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn a_missing_plugin_fails_the_sandbox_naming_it_others_run_and_a_fix_is_picked_up() {
    let net = Net::new("cni-missing", 5);
    net.write_conflist(
        "10-test.conflist",
        &[serde_json::json!({"type": "pv-no-such-plugin"})],
    );
    net.manifest("a", &sleeper("a", ""));
    net.manifest("h", &sleeper("h", "  hostNetwork: true\n"));
    let d = net.start(&[]);
    wait_until_else(
        "FailedCreatePodSandBox naming the plugin and file",
        T,
        || {
            sandbox_failures(&d, "a").iter().any(|m| {
                m.contains("plugin \"pv-no-such-plugin\" ADD: plugin binary not found in /usr/lib/cni, /opt/cni/bin")
                    && m.contains("10-test.conflist")
            })
        },
        || format!("{:?}\n{}", d.events(), d.log()),
    );
    let st = d.pod("a").and_then(|v| v.pod.status).expect("status");
    assert_eq!(st.reason.as_deref(), Some("FailedCreatePodSandBox"));
    assert!(st.pod_ip.is_none(), "no IP without a network: {st:?}");
    // Nothing was done (the plugin list is checked first), and other pods are unaffected.
    assert!(net.ns.veths().is_empty() && net.allocations().is_empty());
    wait_until("the hostNetwork pod runs", T, || {
        d.pod("h").is_some_and(|v| running(&v))
    });
    // Fixed: the retry (10 s backoff) picks the new configuration up.
    net.write_conflist("10-test.conflist", &[]);
    wait_ip(&d, "a");
    for n in ["a", "h"] {
        net.remove(n);
    }
    d.wait_all_gone(&net.env, T);
    net.assert_no_leftovers(&[]);
    d.stop();
    net.env.assert_clean();
}

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn a_hanging_or_crashing_plugin_and_a_broken_conflist_are_named_and_undone() {
    let net = Net::new("cni-faults", 6);
    // Plugins of the test's own: one that hangs on ADD (its child too), one that crashes.
    let bin = net.env.dir.path().join("cni-bin");
    fs::create_dir_all(&bin).expect("bin");
    let script = |name: &str, body: &str| {
        use std::os::unix::fs::PermissionsExt;
        let p = bin.join(name);
        fs::write(&p, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).expect("plugin");
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).expect("chmod");
    };
    script(
        "pv-hang",
        "[ \"$CNI_COMMAND\" = ADD ] || exit 0\nsleep 600 & wait",
    );
    script(
        "pv-crash",
        "[ \"$CNI_COMMAND\" = ADD ] || exit 0\necho 'pv-crash: cannot frobnicate eth0' >&2\nexit 2",
    );
    net.write_conflist(
        "10-test.conflist",
        &[serde_json::json!({"type": "pv-hang"})],
    );
    let bins = format!("--cni-bin-dir={},/usr/lib/cni", bin.display());
    let d = net.start(&[&bins, "--cni-plugin-timeout=2s"]);
    let phase = |name: &str, want: &[&str]| {
        net.manifest(name, &sleeper(name, ""));
        wait_until_else(
            &format!("{name}: FailedCreatePodSandBox with {want:?}"),
            T,
            || {
                sandbox_failures(&d, name)
                    .iter()
                    .any(|m| want.iter().all(|w| m.contains(w)))
            },
            || format!("{:?}", sandbox_failures(&d, name)),
        );
        // The bridge's work was undone (DEL of the whole list): no veth, no IP.
        wait_until_else(
            &format!("{name}: the failed ADD undone"),
            T,
            || {
                net.ns.veths().is_empty()
                    && net.allocations().is_empty()
                    && net.attachment_records() == 0
            },
            || format!("{:?} {:?}", net.ns.veths(), net.allocations()),
        );
        net.remove(name);
    };
    phase(
        "hang",
        &["plugin \"pv-hang\" ADD: no answer within 2s: killed"],
    );
    net.write_conflist(
        "10-test.conflist",
        &[serde_json::json!({"type": "pv-crash"})],
    );
    phase(
        "crash",
        &[
            "plugin \"pv-crash\" ADD: exit status 2",
            "pv-crash: cannot frobnicate eth0",
        ],
    );
    fs::write(
        net.conf.join("05-broken.conflist"),
        "{\"cniVersion\": \"1.0.0\",\n  \"name\": ",
    )
    .expect("broken");
    phase(
        "broken",
        &["CNI configuration", "05-broken.conflist: line 2 column"],
    );
    // No process of a killed plugin is left.
    let procs = common::processes_under(&bin);
    assert!(procs.is_empty(), "{procs:?}");
    d.wait_all_gone(&net.env, T);
    net.assert_no_leftovers(&[]);
    d.stop();
    net.env.assert_clean();
}

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn a_reboot_releases_the_ips_of_the_earlier_boot() {
    let mut net = Net::new("cni-reboot", 7);
    net.manifest("a", &sleeper("a", ""));
    let d = net.start(&[]);
    let before = wait_ip(&d, "a");
    assert_eq!(net.allocations(), before);
    d.stop();
    // The node goes down: processes, mounts and namespaces gone, and a new boot's network
    // (a fresh namespace: no interface or rule of the earlier boot). host-local's files
    // are on disk and survive, as under /var/lib/cni/networks.
    net.env.simulate_reboot(1, true);
    net.ns = TestNetns::new("cni-reboot2");
    let d = net.start(&[]);
    let after = wait_ip(&d, "a");
    wait_until_else(
        "only the new boot's allocation left",
        T,
        || net.allocations() == after && net.attachment_records() == 1,
        || format!("{:?} {}", net.allocations(), d.log()),
    );
    assert!(
        d.log().contains("(it belongs to an earlier boot)"),
        "{}",
        d.log()
    );
    net.remove("a");
    d.wait_all_gone(&net.env, T);
    net.assert_no_leftovers(&after);
    d.stop();
    net.env.assert_clean();
}

#[test]
#[ignore = "needs root: network namespaces, Debian's CNI plugins, real containers (scripts/test runs it)"]
fn pods_attached_before_networking_was_turned_off_are_still_detached() {
    let net = Net::new("cni-off", 8);
    net.manifest("a", &sleeper("a", ""));
    let d = net.start(&[]);
    let ips = wait_ip(&d, "a");
    d.stop();
    // Restarted with pod networking off: the running pod keeps its sandbox and IP; when it
    // goes, its attachment is DELed all the same.
    let d = Daemon::start_in(&net.env, &net.manifests, &["--cni-conf-dir="], &net.ns);
    wait_until("a re-adopted", T, || {
        d.pod("a")
            .is_some_and(|v| running(&v) && pod_ips(&v) == ips)
    });
    net.remove("a");
    d.wait_all_gone(&net.env, T);
    net.assert_no_leftovers(&ips);
    assert!(
        !net.conf.join("87-podvisor-bridge.conflist").exists(),
        "nothing written with networking off"
    );
    d.stop();
    net.env.assert_clean();
}
