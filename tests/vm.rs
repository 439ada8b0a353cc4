//! The cgroup v2 VM tests as part of `cargo test`: runs tests/vm/run.sh (qemu, Debian's
//! kernel, pure cgroup v2) against the podvisor binary cargo just built, and fails with the
//! script's report when any scenario fails, is missing, or the VM times out.

use std::process::Command;

#[test]
#[ignore = "needs root: builds a VM image with root-owned files, boots it (scripts/test runs it)"]
fn cgroup_v2_scenarios_in_a_vm() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vm/run.sh");
    let out = Command::new(script)
        .env("PODVISOR_BIN", env!("CARGO_BIN_EXE_podvisor"))
        .output()
        .expect("run tests/vm/run.sh");
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(out.status.success(), "VM tests failed:\n{report}");
    assert!(report.contains("PASS"), "no scenario reported:\n{report}");
}
