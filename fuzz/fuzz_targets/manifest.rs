//! The manifest path: bytes from a manifest file or URL -> YAML/JSON documents -> validated
//! static Pods (as the URL source's PodList/multi-document form allows). Every accepted pod
//! must also be one the runtime can size, since validation accepts a manifest if and only if
//! the runtime runs it: its QoS class, its pod cgroup values and every container's
//! oom_score_adj are computable, the latter within the kubelet's range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podvisor::cgroups::resources::PodCgroupConfig;
use podvisor::pod::qos::{oom_score_adj, qos_class};
use podvisor::staticpod::{load_manifest, SourceKind};

fuzz_target!(|data: &[u8]| {
    let Ok(pods) = load_manifest(
        data,
        "http://fuzz/pods",
        SourceKind::Http,
        "node",
        "2025-01-01T00:00:00Z",
    ) else {
        return;
    };
    for p in &pods {
        let name = &p.full_name;
        if let Err(e) = qos_class(&p.pod) {
            panic!("validated pod {name} has no QoS class: {e}");
        }
        if let Err(e) = PodCgroupConfig::for_pod(&p.pod, Some(1024)) {
            panic!("validated pod {name} has no pod cgroup values: {e}");
        }
        let spec = p.pod.spec.as_ref().expect("a validated pod has a spec");
        for c in spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers)
        {
            match oom_score_adj(&p.pod, c, 8 << 30, false) {
                Ok(adj) => assert!((-997..=1000).contains(&adj), "{name}/{}: {adj}", c.name),
                Err(e) => panic!(
                    "validated pod {name}, container {}: no oom_score_adj: {e}",
                    c.name
                ),
            }
        }
    }
});
