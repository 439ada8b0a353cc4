//! The KubeletConfiguration file parser (`podvisor run --config`): YAML or JSON bytes ->
//! validated configuration, or an error naming the field.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = podvisor::config::parse_kubelet_config(data, "fuzz.yaml");
});
