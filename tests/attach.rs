//! Root integration tests of `tty`, `stdin` and `stdinOnce` in pod containers and of
//! `podvisor attach` end to end through a daemon: a tty container's output in the CRI log, input
//! sent with `attach -i` echoed back through the pty, a line read by a non-tty container, stdinOnce
//! closing stdin after the first session, output-only attach, and the refusals.

mod common;

use std::fs;
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::{log_lines, wait_until, TestEnv};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(30);

fn attach_cmd(env: &TestEnv, d: &Daemon, args: &[&str]) -> Command {
    let mut c = Command::new(common::podvisor_bin());
    c.arg("--root-dir")
        .arg(&env.root)
        .arg("--runtime-dir")
        .arg(&env.run)
        .arg("attach")
        .arg("--api-socket")
        .arg(&d.socket)
        .args(args);
    c
}

/// A running `podvisor attach` with its output collected on a thread.
struct Session {
    child: Child,
    out: mpsc::Receiver<String>,
    seen: String,
}

impl Session {
    fn start(env: &TestEnv, d: &Daemon, args: &[&str]) -> Session {
        let mut child = attach_cmd(env, d, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("attach");
        let mut stdout = child.stdout.take().expect("stdout");
        let (tx, out) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0
                    || tx
                        .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                        .is_err()
                {
                    break;
                }
            }
        });
        Session {
            child,
            out,
            seen: String::new(),
        }
    }
    fn send(&mut self, text: &str) {
        let stdin = self.child.stdin.as_mut().expect("stdin");
        stdin.write_all(text.as_bytes()).expect("write");
        stdin.flush().expect("flush");
    }
    fn wait_for(&mut self, want: &str) {
        let deadline = Instant::now() + T;
        while !self.seen.contains(want) {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {want:?} from attach; got {:?}",
                self.seen
            );
            if let Ok(s) = self.out.recv_timeout(left.min(Duration::from_millis(200))) {
                self.seen.push_str(&s);
            }
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn container_log(env: &TestEnv, container: &str) -> std::path::PathBuf {
    let dirs = fs::read_dir(&env.logs).expect("log dir");
    for d in dirs.flatten() {
        let p = d.path().join(container).join("0.log");
        if p.exists() {
            return p;
        }
    }
    panic!("no log of {container} under {}", env.logs.display())
}

#[test]
#[ignore = "needs root: runs real containers (scripts/test runs it)"]
fn tty_and_stdin_containers_log_their_output_and_take_input_from_attach() {
    let env = TestEnv::new("attach");
    drop(env.images());
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("manifests");
    fs::write(
        manifests.join("att.yaml"),
        r#"apiVersion: v1
kind: Pod
metadata:
  name: att
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: term
    image: busybox:1.35
    tty: true
    stdin: true
    command: [sh, -c, 'tty; echo term-ready; while read l; do echo "got-$l"; done; sleep 1000']
  - name: plain
    image: busybox:1.35
    stdin: true
    stdinOnce: true
    command: [sh, -c, 'echo plain-ready; read l; echo "line:$l"; cat; echo "stdin-closed"; sleep 1000']
  - name: out
    image: busybox:1.35
    command: [sh, -c, 'while true; do echo tick; sleep 1; done']
"#,
    )
    .expect("manifest");
    let (ok, out, err) = {
        let o = Command::new(common::podvisor_bin())
            .arg("validate")
            .arg(manifests.join("att.yaml"))
            .output()
            .expect("validate");
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    assert!(ok, "validate accepts tty/stdin: {out}{err}");
    let d = Daemon::start(&env, &manifests);
    wait_until("three running containers", T, || {
        podvisor::api::client::get_json::<PodView>(&d.socket, "/pods/att")
            .ok()
            .and_then(|v| v.pod.status.and_then(|s| s.container_statuses))
            .is_some_and(|cs| {
                cs.len() == 3
                    && cs
                        .iter()
                        .all(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
            })
    });

    // The tty container's output reaches the CRI log as stdout, through the pty.
    let term_log = container_log(&env, "term");
    wait_until("the tty container's first lines", T, || {
        log_lines(&term_log)
            .iter()
            .any(|l| l.contains("term-ready"))
    });
    let raw = fs::read_to_string(&term_log).expect("log");
    assert!(raw.contains(" stdout F /dev/pts/0"), "{raw}");
    assert!(!raw.contains(" stderr "), "a tty has one stream: {raw}");

    // attach -i -t: input goes through the pty (the line discipline echoes it), the shell
    // answers.
    {
        let mut s = Session::start(&env, &d, &["-i", "-t", "att", "-c", "term"]);
        s.send("abc\n");
        s.wait_for("got-abc");
    }
    wait_until("the answer in the log", T, || {
        log_lines(&term_log).iter().any(|l| l.contains("got-abc"))
    });
    // A second session works too (no stdinOnce).
    {
        let mut s = Session::start(&env, &d, &["-i", "att", "-c", "term"]);
        s.send("def\n");
        s.wait_for("got-def");
    }

    // A non-tty stdin container reads a line from attach; stdinOnce closes its stdin when the
    // session's input ends.
    {
        let mut s = Session::start(&env, &d, &["-i", "att", "-c", "plain"]);
        s.send("hello\n");
        s.wait_for("line:hello");
        s.send("more\n");
        s.wait_for("more");
        drop(s.child.stdin.take());
        s.wait_for("stdin-closed");
    }
    let out = attach_cmd(&env, &d, &["-i", "att", "-c", "plain"])
        .stdin(Stdio::null())
        .output()
        .expect("attach");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("stdin is not open"), "{err}");

    // Output only: attach without -i to a container without stdin; -i is refused there.
    {
        let mut s = Session::start(&env, &d, &["att", "-c", "out"]);
        s.wait_for("tick");
    }
    let out = attach_cmd(&env, &d, &["-i", "att", "-c", "out"])
        .stdin(Stdio::null())
        .output()
        .expect("attach");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("container out of pod default/att-") && err.contains("stdin is not open"),
        "{err}"
    );

    fs::remove_file(manifests.join("att.yaml")).expect("rm");
    d.wait_all_gone(&env, T);
    d.stop();
    env.assert_clean();
}
