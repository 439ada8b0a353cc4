//! The grpc prober's HTTP/2 side: what a server sends back (frames, HPACK header blocks with
//! Huffman strings and the dynamic table, the gRPC message) judged as a live probe would judge
//! it. Inputs starting with 0xff are instead three raw HPACK blocks for one decoder (table
//! state carries over), split at the first two 0xfe bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podvisor::prober::grpc::probe_reply;
use podvisor::prober::hpack::{Decoder, MAX_HEADER_LIST};

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((0xff, blocks)) => {
            let mut decoder = Decoder::default();
            for block in blocks.splitn(3, |&b| b == 0xfe) {
                if let Ok(fields) = decoder.decode(block) {
                    let size: usize = fields.iter().map(|(n, v)| 32 + n.len() + v.len()).sum();
                    assert!(size <= MAX_HEADER_LIST, "decoded {size} bytes of headers");
                }
            }
        }
        _ => {
            let _ = probe_reply(data);
        }
    }
});
