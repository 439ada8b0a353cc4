//! A registry's `WWW-Authenticate` challenge (the value of a 401's header).
#![no_main]

use libfuzzer_sys::fuzz_target;
use podvisor::images::{parse_challenge, Challenge};

fuzz_target!(|data: &[u8]| {
    // ureq hands the client header values that are valid UTF-8 only.
    let Ok(header) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(Challenge::Bearer { realm, .. }) = parse_challenge(header) {
        assert!(
            header.contains(realm.as_str()),
            "realm not taken from the header"
        );
    }
});
