//! Root integration tests of exec with real containers: `Runtime::exec_sync` (output, exit
//! codes, signals, environment, user, namespaces, cgroup, seccomp, output cap, timeout, errors,
//! no leftovers) and `podvisor exec` end to end through a daemon (exit code pass-through,
//! stdin, a pseudo-terminal with window size and SIGWINCH).

mod common;

use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::daemon::{wait_for, Daemon};
use common::{pod, wait_exit, TestEnv};
use podvisor::runtime::{
    ContainerKind, ContainerRequest, ContainerState, ExecOutput, Runtime, RuntimeError,
};
use podvisor::status::PodView;

const T: Duration = Duration::from_secs(30);

fn sv(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Entries of the container's libcontainer state directory.
fn state_entries(env: &TestEnv, id: &str) -> Vec<String> {
    let dir = env.run.join("containers").join(id).join("youki").join(id);
    let mut v: Vec<String> = fs::read_dir(&dir)
        .expect("state dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn exec_sync_runs_in_the_container_with_its_identity() {
    let env = TestEnv::new("exec-sync");
    let (rt, rx) = env.runtime();
    let p = pod(
        "metadata: {name: execpod}\nspec:\n  securityContext: {seccompProfile: {type: RuntimeDefault}}\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sleep, '1000']\n    workingDir: /tmp\n    env: [{name: GREETING, value: hello-exec}]\n    securityContext: {runAsUser: 1234, runAsGroup: 2345, allowPrivilegeEscalation: false}\n  - name: root\n    image: busybox:1.35\n    command: [sleep, '1000']\n    securityContext: {capabilities: {add: [SYS_ADMIN]}}\n",
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
    let id = info.meta.id.clone();
    let ContainerState::Running { pid: init, .. } = info.state else {
        panic!("not running: {:?}", info.state);
    };
    let before = state_entries(&env, &id);
    let run = |args: &[&str]| -> ExecOutput {
        rt.exec_sync(&id, &sv(args), T)
            .unwrap_or_else(|e| panic!("exec {args:?}: {e}"))
    };

    let o = run(&["sh", "-c", "echo out; echo err >&2; exit 3"]);
    assert_eq!(
        (o.exit_code, text(&o.stdout), text(&o.stderr), o.timed_out),
        (3, "out\n".into(), "err\n".into(), false)
    );
    assert_eq!(run(&["true"]).exit_code, 0);
    assert_eq!(run(&["sh", "-c", "kill -9 $$"]).exit_code, 137);
    assert_eq!(run(&["sh", "-c", "kill -TERM $$"]).exit_code, 143);
    // The container's environment, working directory and user.
    let o = run(&["sh", "-c", "echo $GREETING; pwd; id -u; id -g"]);
    assert_eq!(text(&o.stdout), "hello-exec\n/tmp\n1234\n2345\n");
    // Its pid and mount namespaces: PID 1 is the container's command; the pod's hostname.
    assert_eq!(
        text(&run(&["cat", "/proc/1/cmdline"]).stdout),
        "sleep\u{0}1000\u{0}"
    );
    assert_eq!(
        text(&run(&["cat", "/etc/hostname"]).stdout).trim(),
        "execpod"
    );
    assert_eq!(text(&run(&["hostname"]).stdout).trim(), "execpod");
    // Same namespaces as the init, seen from the host.
    let o = run(&[
        "sh",
        "-c",
        "for n in net ipc uts pid mnt; do readlink /proc/self/ns/$n; done",
    ]);
    let mine: Vec<String> = text(&o.stdout).lines().map(str::to_string).collect();
    let theirs: Vec<String> = ["net", "ipc", "uts", "pid", "mnt"]
        .iter()
        .map(|ns| {
            fs::read_link(format!("/proc/{init}/ns/{ns}"))
                .expect("ns")
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(mine, theirs);
    // Its cgroup.
    let o = run(&[
        "sh",
        "-c",
        "cat /proc/self/cgroup; echo ---; cat /proc/1/cgroup",
    ]);
    let out = text(&o.stdout);
    let (mine, theirs) = out.split_once("---\n").expect("separator");
    assert_eq!(mine, theirs);
    // Seen from the host (the container has its own cgroup namespace): in the container's
    // cgroup, not in a sub-cgroup.
    let init_cgroup = fs::read_to_string(format!("/proc/{init}/cgroup")).expect("cgroup");
    assert!(init_cgroup.contains(&id), "{init_cgroup}");
    std::thread::scope(|s| {
        let exec = s.spawn(|| run(&["sleep", "2"]));
        let mut found = None;
        wait_for("the exec'd sleep", T, || {
            found = common::processes_in_cgroup(&env.cgroup_parent)
                .into_iter()
                .find(|(_, cmd)| cmd.trim() == "sleep 2");
            found.is_some()
        });
        let (pid, _) = found.expect("found");
        let cg = fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup");
        assert_eq!(cg, init_cgroup);
        assert_eq!(exec.join().expect("join").exit_code, 0);
    });
    // Its seccomp filter and capabilities (the tenant builder alone would drop the filter).
    let o = run(&["sh", "-c", "grep -E '^(Seccomp|CapBnd):' /proc/self/status; echo ---; grep -E '^(Seccomp|CapBnd):' /proc/1/status"]);
    let out = text(&o.stdout);
    let (mine, theirs) = out.split_once("---\n").expect("separator");
    assert_eq!(mine, theirs);
    assert!(mine.contains("Seccomp:\t2"), "{mine}");
    // A container without no_new_privileges (root with CAP_SYS_ADMIN, the filter installed
    // without no_new_privs): the exec gets the same filter and no_new_privs stays off.
    // (Without CAP_SYS_ADMIN such a container does not start today: libcontainer 0.7 treats
    // `noNewPrivileges: false` like true and loads the filter after dropping capabilities.)
    let root = rt
        .start_container(&ContainerRequest {
            pod: &p,
            container: &p.spec.as_ref().expect("spec").containers[1],
            kind: ContainerKind::App,
            restart_count: 0,
        })
        .expect("start root container");
    let o = rt
        .exec_sync(
            &root.meta.id,
            &sv(&["sh", "-c", "id -u; grep -E '^(Seccomp|NoNewPrivs|CapBnd):' /proc/self/status; echo ---; grep -E '^(Seccomp|NoNewPrivs|CapBnd):' /proc/1/status"]),
            T,
        )
        .expect("exec in root container");
    let out = text(&o.stdout);
    let (mine, theirs) = out.split_once("---\n").expect("separator");
    let field = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .map(str::to_string)
            .unwrap_or_default()
    };
    assert!(mine.starts_with("0\n"), "{out}");
    assert_eq!(field(mine, "Seccomp:"), "Seccomp:\t2", "{out}");
    assert_eq!(field(theirs, "Seccomp:"), "Seccomp:\t2", "{out}");
    assert_eq!(field(mine, "CapBnd:"), field(theirs, "CapBnd:"), "{out}");
    assert_eq!(field(mine, "NoNewPrivs:"), "NoNewPrivs:\t0", "{out}");
    assert_eq!(field(theirs, "NoNewPrivs:"), "NoNewPrivs:\t0", "{out}");
    rt.signal_container(&root.meta.id, libc::SIGKILL)
        .expect("kill root container");
    wait_exit(&rx, &root.meta.id, T);
    rt.remove_container(&root.meta.id)
        .expect("remove root container");

    // Output beyond 16 KiB is dropped, the command still completes.
    let o = run(&["sh", "-c", "head -c 100000 /dev/zero; echo done >&2"]);
    assert_eq!(
        (o.exit_code, o.stdout.len(), text(&o.stderr)),
        (0, 16 * 1024, "done\n".into())
    );
    // An empty or missing command is an error, not an exit code.
    let e = rt.exec_sync(&id, &[], T).expect_err("empty command");
    assert!(e.to_string().ends_with("no command given"), "{e}");
    let e = rt
        .exec_sync(&id, &sv(&["no-such-command"]), T)
        .expect_err("missing command");
    assert!(e.to_string().contains("no-such-command"), "{e}");
    // Concurrent execs (as concurrent probes would run them) each get their own output.
    let t0 = Instant::now();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|i| {
                let run = &run;
                s.spawn(move || (i, run(&["sh", "-c", &format!("echo {i}; exit {i}")])))
            })
            .collect();
        for h in handles {
            let (i, o) = h.join().expect("join");
            assert_eq!((o.exit_code, text(&o.stdout)), (i, format!("{i}\n")));
        }
    });
    eprintln!("6 concurrent execs took {:?}", t0.elapsed());
    // Nothing of the execs is left in libcontainer's state directory.
    assert_eq!(state_entries(&env, &id), before);

    // Timeout: the command and its children are killed, nothing is left in the container.
    let t0 = Instant::now();
    let o = rt
        .exec_sync(
            &id,
            &sv(&["sh", "-c", "sleep 100 & sleep 100; echo never"]),
            Duration::from_millis(500),
        )
        .expect("exec with timeout");
    assert!(o.timed_out, "{o:?}");
    assert_eq!(o.exit_code, 137);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    wait_for("only the init left", Duration::from_secs(5), || {
        common::processes_in_cgroup(&env.cgroup_parent)
            .iter()
            .all(|(_, cmd)| cmd.trim() != "sleep 100")
    });
    let procs = common::processes_in_cgroup(&env.cgroup_parent);
    assert_eq!(procs.len(), 1, "{procs:?}");
    assert_eq!(state_entries(&env, &id), before);

    // Unknown and exited containers are clear errors.
    match rt.exec_sync("nope-0", &sv(&["true"]), T) {
        Err(RuntimeError::NotFound { id }) => assert_eq!(id, "nope-0"),
        other => panic!("{other:?}"),
    }
    rt.signal_container(&id, libc::SIGKILL).expect("kill");
    wait_exit(&rx, &id, T);
    let e = rt
        .exec_sync(&id, &sv(&["true"]), T)
        .expect_err("exited container");
    assert!(e.to_string().contains("is not running"), "{e}");

    let uid = p.metadata.uid.clone().expect("uid");
    rt.remove_container(&id).expect("remove");
    rt.remove_pod_sandbox(&uid).expect("remove sandbox");
    env.assert_clean();
}

fn exec_cmd(env: &TestEnv, d: &Daemon, args: &[&str]) -> Command {
    let mut c = Command::new(common::podvisor_bin());
    c.arg("--root-dir")
        .arg(&env.root)
        .arg("--runtime-dir")
        .arg(&env.run)
        .arg("exec")
        .arg("--api-socket")
        .arg(&d.socket)
        .args(args);
    c
}

/// Reads from a pty master until `want` appears or the deadline passes.
fn read_until(master: &mut fs::File, seen: &mut String, want: &str, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    while !seen.contains(want) {
        assert!(
            Instant::now() < deadline,
            "no {want:?} on the terminal; got {seen:?}"
        );
        let mut fds = [nix::poll::PollFd::new(
            std::os::fd::AsFd::as_fd(&*master),
            nix::poll::PollFlags::POLLIN,
        )];
        let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u8));
        match master.read(&mut buf) {
            Ok(0) | Err(_) => continue,
            Ok(n) => seen.push_str(&String::from_utf8_lossy(&buf[..n])),
        }
    }
}

fn set_winsize(fd: &OwnedFd, rows: u16, cols: u16) {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads a winsize we own from a valid pty fd.
    assert_eq!(
        unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) },
        0
    );
}

#[test]
fn podvisor_exec_passes_exit_codes_stdin_and_a_terminal() {
    let env = TestEnv::new("exec-cli");
    drop(env.images());
    let manifests = env.dir.path().join("manifests");
    fs::create_dir_all(&manifests).expect("manifests");
    fs::write(
        manifests.join("web.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox:1.35\n    command: [sleep, '1000']\n  - name: side\n    image: busybox:1.35\n    command: [sleep, '1000']\n    env: [{name: WHO, value: side}]\n",
    )
    .expect("manifest");
    let d = Daemon::start(&env, &manifests);
    wait_for("a running container", T, || d.any_running());
    wait_for("both containers running", T, || {
        podvisor::api::client::get_json::<PodView>(&d.socket, "/pods/web")
            .ok()
            .and_then(|v| v.pod.status.and_then(|s| s.container_statuses))
            .is_some_and(|cs| {
                cs.len() == 2
                    && cs
                        .iter()
                        .all(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()))
            })
    });

    // Exit code pass-through and the default container.
    let out = exec_cmd(&env, &d, &["web", "--", "sh", "-c", "echo $WHO; exit 7"])
        .output()
        .expect("exec");
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(text(&out.stdout), "\n");
    let out = exec_cmd(
        &env,
        &d,
        &["web", "-c", "side", "--", "sh", "-c", "echo $WHO"],
    )
    .output()
    .expect("exec");
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "side\n".into())
    );
    // Unknown container and pod: clear errors naming them.
    let out = exec_cmd(&env, &d, &["web", "-c", "nope", "--", "true"])
        .output()
        .expect("exec");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("has no container nope (containers: main, side)"),
        "{err}"
    );
    let out = exec_cmd(&env, &d, &["nosuchpod", "--", "true"])
        .output()
        .expect("exec");
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("nosuchpod"), "{out:?}");
    // stdin with -i; without it the command reads nothing.
    let mut child = exec_cmd(&env, &d, &["-i", "web", "--", "sh", "-c", "cat; exit 5"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("exec -i");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"piped input\n")
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(5), "piped input\n".into())
    );
    let out = exec_cmd(&env, &d, &["web", "--", "cat"])
        .stdin(Stdio::piped())
        .output()
        .expect("exec");
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), String::new())
    );

    // -it on a terminal: a pty inside the container, its size, SIGWINCH, exit code.
    let pty = nix::pty::openpty(None, None).expect("openpty");
    set_winsize(&pty.master, 33, 101);
    let cooked = nix::sys::termios::tcgetattr(&pty.master).expect("termios");
    let slave = pty.slave;
    let mut child = {
        let mut c = exec_cmd(
            &env,
            &d,
            &[
                "-i",
                "-t",
                "web",
                "--",
                "sh",
                "-c",
                "tty; stty size; while read x; do stty size; done; exit 4",
            ],
        );
        c.stdin(Stdio::from(slave.try_clone().expect("dup")))
            .stdout(Stdio::from(slave.try_clone().expect("dup")))
            .stderr(Stdio::from(slave));
        // SAFETY: setsid and TIOCSCTTY between fork and exec: the pty becomes the CLI's
        // controlling terminal, so size changes send it SIGWINCH as a real terminal would.
        unsafe {
            c.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        c.spawn().expect("exec -it")
    };
    let mut master = fs::File::from(pty.master.try_clone().expect("dup"));
    nix::fcntl::fcntl(
        master.as_raw_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
    )
    .expect("nonblocking");
    let mut seen = String::new();
    read_until(&mut master, &mut seen, "33 101", T);
    assert!(seen.contains("/dev/pts/"), "{seen:?}");
    let during = nix::sys::termios::tcgetattr(&pty.master).expect("termios");
    assert!(
        !during.local_flags.intersects(
            nix::sys::termios::LocalFlags::ECHO | nix::sys::termios::LocalFlags::ICANON
        ),
        "local terminal in raw mode"
    );
    // The new size reaches the command through the CLI's SIGWINCH; ask until it shows.
    set_winsize(&pty.master, 40, 120);
    let deadline = Instant::now() + T;
    while !seen.contains("40 120") {
        assert!(Instant::now() < deadline, "no resize seen: {seen:?}");
        master.write_all(b"x\r").expect("write");
        let mut buf = [0u8; 4096];
        std::thread::sleep(Duration::from_millis(100));
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    }
    // End of input (^D at the start of a line) ends the loop.
    master.write_all(b"\x04").expect("write");
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(t0.elapsed() < T, "podvisor exec -t did not end: {seen:?}");
        let mut buf = [0u8; 1024];
        let _ = nix::unistd::read(master.as_raw_fd(), &mut buf);
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(4), "{seen:?}");
    // The terminal went raw for the session and is restored afterwards.
    let after = nix::sys::termios::tcgetattr(&pty.master).expect("termios");
    assert_eq!(after.local_flags, cooked.local_flags);
    assert_eq!(after.input_flags, cooked.input_flags);

    fs::remove_file(manifests.join("web.yaml")).expect("rm");
    wait_for("containers removed", T, || {
        fs::read_dir(env.root.join("containers"))
            .map(|e| e.count() == 0)
            .unwrap_or(false)
    });
    d.stop();
    env.assert_clean();
}
