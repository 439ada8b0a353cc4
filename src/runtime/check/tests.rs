use super::*;

#[test]
fn the_stand_in_image_sets_an_entrypoint_and_a_non_root_user() {
    let image = stand_in_image();
    let config = image.config().as_ref().expect("config");
    assert_eq!(
        config.entrypoint().as_deref(),
        Some(&["/podvisor-check-entrypoint".to_string()][..])
    );
    assert_eq!(config.user().as_deref(), Some("65534"));
}

// The property: a pod the static-pod loader accepts is one the start path builds and
// libcontainer's checks accept; a pod the start path refuses for a reason of its own (not
// the host's or the image's) is one the loader refuses. Pods are generated from a table of
// fragments, the options of the fields the runtime reads, valid and not.

use std::path::Path;

use serde_json::{json, Value};

use crate::runtime::spec::{ContainerSpec, SubPaths};
use crate::staticpod::{load_manifest, SourceKind};

/// xorshift64*: a fixed seed, the same pods in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Container fragments: merged into the container (keys replace).
fn container_fragments() -> Vec<Value> {
    let vm = |extra: Value| {
        let mut m = json!({"name": "data", "mountPath": "/d"});
        if let (Some(b), Value::Object(e)) = (m.as_object_mut(), extra) {
            b.extend(e);
        }
        json!({"volumeMounts": [m]})
    };
    let env = |from: Value| json!({"env": [{"name": "X", "valueFrom": from}]});
    vec![
        json!({}),
        json!({"command": ["/bin/sh"], "args": ["-c", "sleep 1"]}),
        json!({"command": []}),
        json!({"workingDir": "relative"}),
        json!({"workingDir": "/srv"}),
        vm(json!({"mountPropagation": "HostToContainer"})),
        vm(json!({"mountPropagation": "Bidirectional"})),
        vm(json!({"mountPropagation": "None"})),
        vm(json!({"mountPropagation": "Sideways"})),
        vm(json!({"readOnly": true, "recursiveReadOnly": "Enabled"})),
        vm(json!({"readOnly": true, "recursiveReadOnly": "IfPossible"})),
        vm(json!({"recursiveReadOnly": "Enabled"})),
        vm(json!({"subPath": "a/b"})),
        vm(json!({"subPath": "/etc"})),
        vm(json!({"subPath": "../x"})),
        vm(json!({"subPathExpr": "$(X)"})),
        vm(json!({"subPathExpr": "$(X)", "subPath": "a"})),
        vm(json!({"name": "nope"})),
        vm(json!({"mountPath": "rel"})),
        vm(json!({"mountPath": "/etc/hosts"})),
        json!({"volumeDevices": [{"name": "data", "devicePath": "/dev/x"}]}),
        json!({"securityContext": {"privileged": true}}),
        json!({"securityContext": {"privileged": true, "allowPrivilegeEscalation": false}}),
        json!({"securityContext": {"readOnlyRootFilesystem": true}}),
        json!({"securityContext": {"runAsUser": 0, "runAsNonRoot": true}}),
        json!({"securityContext": {"runAsUser": 1000, "runAsNonRoot": true}}),
        json!({"securityContext": {"runAsNonRoot": true}}),
        json!({"securityContext": {"runAsGroup": 5}}),
        json!({"securityContext": {"procMount": "Unmasked"}}),
        json!({"securityContext": {"procMount": "Masked"}}),
        json!({"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}}),
        json!({"securityContext": {"capabilities": {"add": ["CAP_SYS_TIME"]}}}),
        json!({"securityContext": {"capabilities": {"add": ["NOT_A_CAP"]}}}),
        json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
        json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
        json!({"securityContext": {"seccompProfile": {"type": "Localhost"}}}),
        json!({"securityContext": {"allowPrivilegeEscalation": false}}),
        json!({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}),
        json!({"stdin": true, "tty": true}),
        json!({"resources": {"limits": {"cpu": "500m", "memory": "64Mi"}}}),
        json!({"resources": {"limits": {"cpu": "lots"}}}),
        json!({"resources": {"limits": {"memory": "1Ki"}, "requests": {"memory": "2Ki"}}}),
        json!({"resources": {"limits": {"hugepages-2Mi": "2Mi", "memory": "8Mi"}}}),
        json!({"lifecycle": {"stopSignal": "SIGUSR1"}}),
        json!({"lifecycle": {"stopSignal": "SIGNOPE"}}),
        json!({"envFrom": [{"configMapRef": {"name": "x"}}]}),
        env(json!({"fieldRef": {"fieldPath": "metadata.name"}})),
        env(json!({"fieldRef": {"fieldPath": "metadata.labels"}})),
        env(json!({"fieldRef": {"fieldPath": "status.podIP"}})),
        env(json!({"fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v2"}})),
        env(json!({"secretKeyRef": {"name": "s", "key": "k"}})),
        env(json!({"fileKeyRef": {"path": "p", "key": "k", "volumeName": "data"}})),
        env(json!({"resourceFieldRef": {"resource": "limits.cpu"}})),
        env(json!({"resourceFieldRef": {"resource": "limits.ephemeral-storage"}})),
        env(json!({"resourceFieldRef": {"resource": "limits.cpu", "containerName": "nope"}})),
        env(json!({"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}})),
        json!({"ports": [{"containerPort": 8080, "hostPort": 8080}]}),
    ]
}

/// Pod spec fragments: merged into the pod spec (keys replace).
fn pod_fragments(scratch: &Path) -> Vec<Value> {
    let host = |p: &str, t: &str| {
        json!({"volumes": [
            {"name": "data", "hostPath": {"path": scratch.join(p), "type": t}},
            {"name": "logs", "emptyDir": {}}
        ]})
    };
    vec![
        json!({}),
        json!({"hostNetwork": true}),
        json!({"hostPID": true}),
        json!({"hostIPC": true}),
        json!({"hostUsers": false}),
        json!({"hostUsers": false, "hostNetwork": true}),
        json!({"shareProcessNamespace": true}),
        json!({"shareProcessNamespace": true, "hostPID": true}),
        json!({"hostname": "web", "subdomain": "svc"}),
        json!({"hostname": "Not_A_Name"}),
        json!({"securityContext": {"sysctls": [{"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"}]}}),
        json!({"securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}}),
        json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
        json!({"securityContext": {"sysctls": [{"name": "vm.swappiness", "value": "1"}]}}),
        json!({"securityContext": {"fsGroup": 2000, "supplementalGroups": [3000]}}),
        json!({"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
        json!({"securityContext": {"runAsNonRoot": true}}),
        json!({"terminationGracePeriodSeconds": 1}),
        json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["192.0.2.1"]}}),
        json!({"hostAliases": [{"ip": "192.0.2.2", "hostnames": ["a"]}]}),
        json!({"priorityClassName": "system-node-critical"}),
        json!({"volumes": [{"name": "data", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}]}),
        json!({"volumes": [{"name": "data", "emptyDir": {"medium": "Disk"}}]}),
        json!({"volumes": [{"name": "data", "emptyDir": {"medium": "Memory", "sizeLimit": "lots"}}]}),
        json!({"volumes": [{"name": "data", "secret": {"secretName": "s"}}]}),
        json!({"volumes": [{"name": "data", "configMap": {"name": "c"}}]}),
        json!({"volumes": [{"name": "data", "nfs": {"server": "s", "path": "/x"}}]}),
        json!({"volumes": [{"name": "data", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}),
        json!({"volumes": [{"name": "data", "downwardAPI": {"items": [{"path": "../n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}),
        json!({"volumes": [{"name": "data", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "spec.nodeName"}}]}}]}),
        json!({"volumes": [{"name": "data", "downwardAPI": {"defaultMode": 4095, "items": []}}]}),
        json!({"volumes": [{"name": "data", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}]}),
        json!({"volumes": [{"name": "data", "projected": {"sources": [{"downwardAPI": {"items": [{"path": "x", "mode": 1000, "fieldRef": {"fieldPath": "metadata.uid"}}]}}]}}]}),
        host("hp", "DirectoryOrCreate"),
        host("untyped", ""),
        host("pipe", "Pipe"),
        json!({"volumes": [{"name": "data", "hostPath": {"path": "relative/x"}}]}),
    ]
}

/// A generated pod: a base with two volumes, then up to three fragments of each kind.
fn generate(rng: &mut Rng, scratch: &Path) -> Value {
    let cf = container_fragments();
    let pf = pod_fragments(scratch);
    let mut container = json!({"name": "c", "image": "img", "command": ["/app"]});
    for _ in 0..rng.below(4) {
        merge(&mut container, cf[rng.below(cf.len())].clone());
    }
    let mut spec = json!({
        "containers": [container],
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "logs", "emptyDir": {}}]
    });
    for _ in 0..rng.below(4) {
        merge(&mut spec, pf[rng.below(pf.len())].clone());
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gen"}, "spec": spec})
}

fn merge(base: &mut Value, extra: Value) {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        b.extend(e);
    }
}

/// What the start path does with `pod`: every volume planned (its host effects are
/// [`volumes::prepare`] after the same plan), every volume a real directory, each container's
/// spec built as a start builds it (subPaths resolved below the real volume) and checked by
/// libcontainer as its `build()` does. `Err(None)`: refused for a reason of the host or the
/// image; `Err(Some(why))`: refused for a reason of the pod.
fn start_path(pod: &Pod, scratch: &Path) -> Result<(), Option<String>> {
    let spec = pod.spec.as_ref().expect("spec");
    let node = planned_node("node1");
    let mut volumes_on_disk = BTreeMap::new();
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        volumes::plan(pod, &node, v, i).map_err(|e| Some(e.to_string()))?;
        let dir = scratch.join("volumes").join(&v.name);
        std::fs::create_dir_all(&dir).expect("volume dir");
        volumes_on_disk.insert(v.name.clone(), dir);
    }
    // The sandbox's namespace files: regular files here, none of them the host's.
    let ns = |n: &str| {
        let p = scratch.join("ns").join(n);
        std::fs::create_dir_all(scratch.join("ns")).expect("ns dir");
        std::fs::write(&p, b"").expect("ns file");
        p
    };
    let host_network = spec.host_network.unwrap_or(false);
    let sandbox = SandboxMounts {
        network_ns: (!host_network).then(|| ns("net")),
        ipc_ns: ns("ipc"),
        uts_ns: (!host_network).then(|| ns("uts")),
        pid_ns: spec
            .share_process_namespace
            .unwrap_or(false)
            .then(|| ns("pid")),
        user_ns: (spec.host_users == Some(false)).then(|| (ns("user"), 65536)),
        hosts: scratch.join("hosts"),
        hostname: scratch.join("hostname"),
        resolv_conf: scratch.join("resolv.conf"),
        shm: scratch.join("shm"),
        volumes: volumes_on_disk,
        pod_ips: vec!["10.0.0.2".into()],
    };
    let security = NodeSecurity::default();
    let image = stand_in_image();
    for c in spec.containers.iter() {
        let built: ContainerSpec = match build_spec(&SpecRequest {
            pod,
            container: c,
            image: &image,
            rootfs: &scratch.join("rootfs"),
            sandbox: &sandbox,
            cgroups_path: "/kubepods/gen",
            node: &node,
            critical: false,
            security: &security,
            host_devices: &[],
            sub_paths: SubPaths::Open,
        }) {
            Ok(b) => b,
            Err(e) if depends_on_host_or_image(&e) => return Err(None),
            Err(e) => return Err(Some(e.to_string())),
        };
        libcontainer::container::preflight::check_spec(&built.spec)
            .map_err(|e| Some(format!("libcontainer: {e}")))?;
    }
    Ok(())
}

#[test]
fn validation_accepts_a_pod_if_and_only_if_the_start_path_runs_it() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut accepted, mut refused) = (0, 0);
    for i in 0..1500 {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = generate(&mut rng, dir.path());
        let bytes = serde_json::to_vec(&manifest).expect("json");
        let loaded = load_manifest(&bytes, "gen.json", SourceKind::File, "node1", "now");
        match &loaded {
            Ok(pods) => {
                accepted += 1;
                let pod = &pods[0].pod;
                if let Err(Some(why)) = start_path(pod, dir.path()) {
                    panic!(
                        "pod {i} passes validation but the start refuses it: {why}\n{manifest:#}"
                    );
                }
            }
            Err(_) => refused += 1,
        }
    }
    // The table reaches both sides, often.
    assert!(
        accepted > 200 && refused > 200,
        "accepted {accepted}, refused {refused}"
    );
}

#[test]
fn a_start_refusal_of_the_pod_is_a_validation_error() {
    // The other direction: every pod the start path refuses for a reason of its own is one
    // the loader refuses.
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut seen = 0;
    for i in 0..1500 {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = generate(&mut rng, dir.path());
        let mut pod: Pod = serde_json::from_value(manifest.clone()).expect("pod");
        // What the loader sets before anything else reads the pod.
        pod.metadata.name = Some("gen-node1".into());
        pod.metadata.namespace = Some("default".into());
        pod.metadata.uid = Some("u-gen".into());
        if let Err(Some(why)) = start_path(&pod, dir.path()) {
            seen += 1;
            let bytes = serde_json::to_vec(&manifest).expect("json");
            assert!(
                load_manifest(&bytes, "gen.json", SourceKind::File, "node1", "now").is_err(),
                "pod {i}: the start refuses it ({why}) but validation accepts it\n{manifest:#}"
            );
        }
    }
    assert!(seen > 200, "only {seen} pods refused by the start path");
}

#[test]
fn a_libcontainer_refusal_names_the_field_behind_it() {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "namespace": "default", "uid": "u"},
        "spec": {
            "hostIPC": true,
            "securityContext": {"sysctls": [
                {"name": "net.ipv4.ip_unprivileged_port_start", "value": "0"},
                {"name": "kernel.shm_rmid_forced", "value": "1"}
            ]},
            "containers": [{"name": "c", "image": "i", "command": ["/x"]}]
        }
    }))
    .expect("pod");
    let refusals = check_pod(&pod, &NodeSecurity::default());
    assert_eq!(refusals.len(), 1, "{refusals:#?}");
    assert_eq!(refusals[0].field, "spec.securityContext.sysctls[1].name");
    assert_eq!(
        refusals[0].message,
        "the container runtime refuses its OCI spec: sysctl kernel.shm_rmid_forced is not allowed in the hosts ipc namespace"
    );
}

#[test]
fn host_to_container_propagation_is_accepted_and_unknown_values_are_named() {
    let pod = |propagation: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "default", "uid": "u"},
            "spec": {
                "containers": [{"name": "c", "image": "i", "command": ["/x"],
                    "volumeMounts": [{"name": "h", "mountPath": "/h", "mountPropagation": propagation}]}],
                "volumes": [{"name": "h", "hostPath": {"path": "/var/lib/h"}}]
            }
        }))
        .expect("pod")
    };
    assert_eq!(
        check_pod(&pod("HostToContainer"), &NodeSecurity::default()),
        vec![]
    );
    let refused = check_pod(&pod("Sideways"), &NodeSecurity::default());
    assert_eq!(
        refused.iter().map(|r| r.field.as_str()).collect::<Vec<_>>(),
        ["spec.containers[0].volumeMounts[0].mountPropagation"]
    );
}
