//! The manifest path: bytes from a manifest file or URL -> YAML/JSON documents -> validated
//! static Pods (as the URL source's PodList/multi-document form allows). Every accepted pod
//! must also be one the runtime can size: its QoS class is computable (validation accepts a
//! manifest if and only if the runtime runs it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use podvisor::pod::qos::qos_class;
use podvisor::pod::static_pod::{load_manifest, SourceKind};

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
        if let Err(e) = qos_class(&p.pod) {
            panic!("validated pod {} has no QoS class: {e}", p.full_name);
        }
    }
});
