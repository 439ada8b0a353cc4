//! The local API's request reader: raw bytes from a client of the unix socket -> the request
//! head (16 KiB at most) -> the request line -> a route ([`podvisor::api::ApiRequest`]) ->
//! the handler's reply on an empty snapshot.
#![no_main]

use libfuzzer_sys::fuzz_target;
use podvisor::api::handlers::handle;
use podvisor::api::parse_request;
use podvisor::api::server::read_request_head;
use podvisor::status::Snapshot;

fuzz_target!(|data: &[u8]| {
    let mut stream = data;
    let Ok(Some(line)) = read_request_head(&mut stream) else {
        return;
    };
    let Ok(request) = parse_request(&line.method, &line.target) else {
        return;
    };
    let _ = handle(&request, &Snapshot::default());
});
