//! Root integration tests of image import with archives made by real tools (umoci, skopeo,
//! as a user would build them offline) and of the `podvisor image` CLI.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{log_lines, pod, wait_exit, TestEnv};
use podvisor::images::{ImageStore, ImportOptions};
use podvisor::runtime::{ContainerKind, ContainerRequest, Runtime};

fn build_with_umoci(out: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/images/build-busybox.sh");
    let st = Command::new("sh")
        .arg(&script)
        .arg(out)
        .output()
        .expect("run build-busybox.sh");
    assert!(
        st.status.success(),
        "build-busybox.sh failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
}

fn cli(env: &TestEnv, args: &[&str]) -> std::process::Output {
    Command::new(common::podvisor_bin())
        .arg("--root-dir")
        .arg(&env.root)
        .args(args)
        .output()
        .expect("podvisor")
}

fn run_echo(env: &TestEnv, image: &str) {
    let (rt, rx) = env.runtime();
    let p = pod(&format!(
        "metadata: {{name: echo}}\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: {image}\n    command: [echo, works]\n"
    ));
    rt.run_pod_sandbox(&p).expect("sandbox");
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let info = rt
        .start_container(&ContainerRequest {
            pod: &p,
            container: c,
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .expect("start");
    let e = wait_exit(&rx, &info.meta.id, Duration::from_secs(30));
    assert_eq!(e.exit_code, 0);
    assert_eq!(log_lines(&info.meta.log_path), vec!["works"]);
    rt.remove_container(&info.meta.id).expect("remove");
    rt.remove_pod_sandbox(p.metadata.uid.as_deref().expect("uid"))
        .expect("sandbox");
}

#[test]
#[ignore = "needs root: unpacks images with their owners, runs containers (scripts/test runs it)"]
fn umoci_oci_archive_and_skopeo_docker_archive_import_and_run() {
    let env = TestEnv::new("tools");
    let oci = env.dir.path().join("busybox-oci.tar");
    build_with_umoci(&oci);
    // umoci names the image only by its tag: the CLI asks for a reference.
    let out = cli(&env, &["image", "import", oci.to_str().expect("utf8")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("reference"), "{err}");
    let out = cli(
        &env,
        &[
            "image",
            "import",
            oci.to_str().expect("utf8"),
            "--ref",
            "registry.local/tools/busybox",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docker = env.dir.path().join("busybox-docker.tar");
    let st = Command::new("skopeo")
        .arg("copy")
        .arg(format!("oci-archive:{}:latest", oci.display()))
        .arg(format!("docker-archive:{}:busybox:v1", docker.display()))
        .output()
        .expect("skopeo");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let out = cli(&env, &["image", "import", docker.to_str().expect("utf8")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ls = cli(&env, &["image", "ls"]);
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(
        text.contains("registry.local/tools/busybox:latest"),
        "{text}"
    );
    assert!(text.contains("docker.io/library/busybox:v1"), "{text}");
    run_echo(&env, "registry.local/tools/busybox");
    run_echo(&env, "busybox:v1");
    env.assert_clean();
}

#[test]
#[ignore = "needs root: unpacks images with their owners, runs containers (scripts/test runs it)"]
fn truncated_archive_via_cli_is_refused_and_store_stays_consistent() {
    let env = TestEnv::new("trunc");
    let full = fs::read(common::busybox_archive()).expect("archive");
    let cut = env.dir.path().join("cut.tar");
    fs::write(&cut, &full[..full.len() * 2 / 3]).expect("write");
    let out = cli(&env, &["image", "import", cut.to_str().expect("utf8")]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cut.tar"), "{err}");
    let ls = cli(&env, &["image", "ls"]);
    assert_eq!(
        String::from_utf8_lossy(&ls.stdout).lines().count(),
        1,
        "only the header"
    );
    let store = ImageStore::open(&env.root.join("images")).expect("open");
    assert!(store.list().expect("list").is_empty());
    // The full archive still imports afterwards.
    store
        .import_archive(common::busybox_archive(), &ImportOptions::default())
        .expect("import");
    run_echo(&env, "busybox:1.35");
    env.assert_clean();
}

#[test]
#[ignore = "needs root: unpacks images with their owners, runs containers (scripts/test runs it)"]
fn image_in_use_cannot_be_removed_until_its_container_is_gone() {
    let env = TestEnv::new("inuse");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: inuse}\nspec:\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sleep, '1000']\n",
    );
    rt.run_pod_sandbox(&p).expect("sandbox");
    let c = &p.spec.as_ref().expect("spec").containers[0];
    let info = rt
        .start_container(&ContainerRequest {
            pod: &p,
            container: c,
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .expect("start");
    let out = cli(&env, &["image", "rm", "busybox:1.35"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("busybox"), "{err}");
    rt.signal_container(&info.meta.id, libc::SIGKILL)
        .expect("kill");
    wait_exit(&rx, &info.meta.id, Duration::from_secs(30));
    rt.remove_container(&info.meta.id).expect("remove");
    rt.remove_pod_sandbox(p.metadata.uid.as_deref().expect("uid"))
        .expect("sandbox");
    let out = cli(&env, &["image", "rm", "busybox:1.35"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Only the shared mount-targets layer stays: three empty files, never collected.
    let layers: Vec<String> = fs::read_dir(env.root.join("images/layers"))
        .expect("layers")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(layers, ["mount-targets"], "layers garbage-collected");
    env.assert_clean();
}

/// Runs `podvisor check` (with `args`): (success, stdout).
fn check(env: &TestEnv, args: &[&str]) -> (bool, String) {
    let mut all = vec!["check"];
    all.extend_from_slice(args);
    let out = cli(env, &all);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
#[ignore = "needs root: unpacks images with their owners, runs containers (scripts/test runs it)"]
fn check_verifies_the_store_and_repairs_what_it_can() {
    let env = TestEnv::new("check");
    let store = env.images();
    let rec = store
        .resolve("busybox:1.35")
        .expect("resolve")
        .expect("imported");
    store
        .import_archive(
            common::busybox_archive(),
            &ImportOptions {
                reference: Some("example.com/second:1".into()),
                pinned: false,
            },
        )
        .expect("second name");
    drop(store);
    let images = env.root.join("images");
    let (ok, out) = check(&env, &[]);
    assert!(
        ok && out.contains("; consistent") && !out.contains("INCONSISTENT"),
        "{out}"
    );

    // What interruptions and damage leave: a layer directory gone, a torn record, temporary
    // files of interrupted writes.
    let diff_id = rec.layers[0]
        .diff_id
        .strip_prefix("sha256:")
        .expect("hex")
        .to_string();
    fs::remove_dir_all(images.join("layers").join(&diff_id)).expect("rm layer");
    let second = fs::read_dir(images.join("refs"))
        .expect("refs")
        .flatten()
        .map(|e| e.path())
        .find(|p| fs::read_to_string(p).is_ok_and(|t| t.contains("example.com/second")))
        .expect("second record");
    fs::write(&second, b"").expect("tear the record");
    fs::create_dir_all(images.join("tmp/import-1-2-3")).expect("leftover");
    fs::write(images.join("refs/.x.tmp-9"), b"{").expect("temp file");
    let (ok, out) = check(&env, &["--dry-run"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("is not unpacked") && out.contains("is torn"),
        "{out}"
    );
    assert!(
        out.contains("interrupted: ") && out.contains("not repaired (dry run)"),
        "{out}"
    );
    assert!(out.contains(".x.tmp-9"), "{out}");
    assert!(
        second.exists() && images.join("refs/.x.tmp-9").exists(),
        "a dry run changes nothing"
    );

    let (ok, out) = check(&env, &[]);
    assert!(ok && out.contains("unpacked again from its blob"), "{out}");
    assert!(images.join("layers").join(&diff_id).is_dir());
    assert!(!second.exists() && !images.join("tmp/import-1-2-3").exists());
    let (ok, out) = check(&env, &[]);
    assert!(
        ok && !out.contains("INCONSISTENT") && !out.contains("interrupted"),
        "{out}"
    );
    run_echo(&env, "busybox:1.35");

    // A blob whose content changed cannot be trusted: removed; the image it belonged to is
    // reported until it is imported again.
    let config = images
        .join("blobs/sha256")
        .join(rec.config_digest.strip_prefix("sha256:").expect("hex"));
    fs::write(&config, b"{}").expect("damage the config");
    let (ok, out) = check(&env, &[]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("does not match its digest") && out.contains("import or pull"),
        "{out}"
    );
    let out = cli(
        &env,
        &[
            "image",
            "import",
            common::busybox_archive().to_str().expect("utf8"),
            "--ref",
            "busybox:1.35",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ok, out) = check(&env, &[]);
    assert!(ok && out.contains("; consistent"), "{out}");
    env.assert_clean();
}
