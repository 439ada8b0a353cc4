//! The VM tests as part of `cargo test`: tests/vm/run.sh (qemu, Debian's kernel, pure cgroup
//! v2) in an amd64 guest against the podvisor binary cargo just built, and in an arm64 guest
//! (qemu-system-aarch64 -M virt) against the aarch64 build of scripts/cross, which boots once
//! more with the armv7 build as the daemon under the arm64 kernel's AArch32 compat layer (the
//! armhf-* scenarios: limits, probes, a crash and restart, removal) and runs the reboot series
//! (3 power cuts). Each fails with the script's report when any scenario fails, is
//! missing, or the VM times out.

use std::process::Command;

fn run_script(script: &str, envs: &[(&str, &str)]) {
    let path = format!("{}/tests/vm/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(&path)
        .envs(envs.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("run {path}: {e}"));
    let report = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{report}");
    assert!(out.status.success(), "{script} failed:\n{report}");
    assert!(report.contains("PASS"), "no scenario reported:\n{report}");
}

#[test]
#[ignore = "needs root: builds a VM image with root-owned files, boots it (scripts/test runs it)"]
fn cgroup_v2_scenarios_in_a_vm() {
    run_script(
        "run.sh",
        &[("PODVISOR_BIN", env!("CARGO_BIN_EXE_podvisor"))],
    );
}

#[test]
#[ignore = "needs root: builds an arm64 VM image with root-owned files, boots it (scripts/test runs it)"]
fn cgroup_v2_scenarios_in_an_arm64_vm() {
    run_script("run.sh", &[("PODVISOR_VM_ARCH", "arm64")]);
}
