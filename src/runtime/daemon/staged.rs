//! staged: a pod's first container prepared while its sandbox is made
//! ([`Runtime::run_pod_sandbox_and_start`]).
//!
//! Nothing of a container's rootfs depends on the sandbox, so the worker resolves the image,
//! makes the container's directories, takes the image lease and has the spawner fork the
//! monitor while a short-lived `pod-sandbox` thread makes the sandbox; the monitor mounts the
//! overlay rootfs meanwhile and waits. Once the sandbox exists the worker writes the spec (its
//! namespaces, volumes, /etc files and IPs are the sandbox's) and the rest of the container's
//! files, and sends the go on the monitor's fd 3, a socket here instead of the pipe of
//! [`LinuxRuntime::spawn_monitor`]; the monitor reads its `shim.json` again and goes on as any
//! monitor does, reporting its start on the same socket. When the sandbox fails, the worker closes its end instead: the monitor
//! unmounts the rootfs and exits without a report, and the worker removes the directories and
//! the lease, as for a failed start. A daemon that dies in between closes its end the same way;
//! the directories it leaves have no `meta.json`, an interrupted creation, which the next
//! listing removes.
//!
//! Staged starts are not used for `hostUsers: false` pods, whose rootfs is idmapped through
//! the user namespace the sandbox makes: they are started after their sandbox.

use super::super::Runtime;
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;

use nix::sys::socket::{send, MsgFlags};

use super::super::container;
use super::super::container::ContainerPaths;
use super::super::procfs;
use super::super::protocol;
use super::super::protocol::StartReport;
use super::super::sandbox;
use super::super::spec;
use super::super::ContainerInfo;
use super::super::ContainerRequest;
use super::super::RuntimeError;
use super::super::SandboxInfo;
use super::launch::{read_report, Monitor};
use super::list::remove_container_dirs;
use super::start::new_container_id;
use super::start::ResolvedImage;
use super::LinuxRuntime;
use crate::fsutil;
use k8s_openapi::api::core::v1::Pod;
use nix::poll::poll;
use nix::poll::PollFd;
use nix::poll::PollFlags;
use nix::poll::PollTimeout;
use std::os::fd::OwnedFd;
use std::thread;
use std::time::Duration;

/// How long a called-off monitor may take to take its rootfs apart before the worker removes
/// the directories anyway.
const CALL_OFF_WAIT: Duration = Duration::from_secs(10);

/// A monitor forked for a container whose sandbox is being made, its rootfs being mounted.
pub(super) struct StagedMonitor {
    image: ResolvedImage,
    monitor: Monitor,
    /// Ours of the monitor's fd 3: the go goes out on it and the start report comes back.
    ready: UnixStream,
}

impl LinuxRuntime {
    /// Whether a pod's first container can be staged: its rootfs must not need the sandbox
    /// (no user namespace to idmap it through).
    pub(super) fn can_stage(req: &ContainerRequest<'_>) -> bool {
        req.pod.spec.as_ref().and_then(|s| s.host_users) != Some(false)
    }

    /// [`Runtime::run_pod_sandbox_and_start`]: the container staged, the sandbox made, then the
    /// container started (or its monitor called off).
    pub(super) fn sandbox_and_first_start(
        &self,
        pod: &Pod,
        req: &ContainerRequest<'_>,
        sandbox_done: &mut dyn FnMut(&Result<SandboxInfo, RuntimeError>),
    ) -> Option<Result<ContainerInfo, RuntimeError>> {
        let uid = req.pod.metadata.uid.clone().unwrap_or_default();
        let target = if Self::can_stage(req) && sandbox::validate_uid(&uid).is_ok() {
            let id = new_container_id(&uid, &req.container.name, req.restart_count);
            self.container_paths(&id).ok().map(|paths| (id, paths))
        } else {
            None
        };
        let Some((id, paths)) = target else {
            return crate::runtime::sandbox_then_start(self, pod, req, sandbox_done);
        };
        // Until its start is reported the container is incomplete: listings leave it alone.
        let _busy = self.busy_containers.enter(&id);
        let (staged, sandbox) = self.stage_beside_sandbox(pod, req, &id, &paths);
        sandbox_done(&sandbox);
        match (sandbox, staged) {
            (Ok(_), Ok(staged)) => Some(self.start_staged(req, &id, &paths, staged)),
            (Ok(_), Err(e)) => Some(Err(e)),
            (Err(_), Ok(staged)) => {
                self.call_off(&id, &paths, staged);
                None
            }
            (Err(_), Err(_)) => None,
        }
    }

    /// Stages the container on this thread while a `pod-sandbox` thread makes the sandbox:
    /// neither needs the other, and the monitor's fork and rootfs mount then overlap the pod
    /// cgroup and namespaces instead of preceding them. Without a thread (the system refuses
    /// one) the sandbox is made after the staging, on this thread.
    fn stage_beside_sandbox(
        &self,
        pod: &Pod,
        req: &ContainerRequest<'_>,
        id: &str,
        paths: &ContainerPaths,
    ) -> (
        Result<StagedMonitor, RuntimeError>,
        Result<SandboxInfo, RuntimeError>,
    ) {
        thread::scope(|s| {
            let sandbox = thread::Builder::new()
                .name("pod-sandbox".into())
                .spawn_scoped(s, || self.run_pod_sandbox(pod));
            let staged = self.stage(req, id, paths);
            let sandbox = match sandbox {
                // A panic on the thread is this job's, as it would have been here.
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                Err(_) => self.run_pod_sandbox(pod),
            };
            (staged, sandbox)
        })
    }

    /// Everything of the start that needs no sandbox: directories, image, a `shim.json` without
    /// the user (the spec says it), the exit record's reserve, the lease, the monitor forked.
    /// Nothing is left when it fails.
    fn stage(
        &self,
        req: &ContainerRequest<'_>,
        id: &str,
        paths: &ContainerPaths,
    ) -> Result<StagedMonitor, RuntimeError> {
        // No cgroup warm-up here: the sandbox's starts once the pod's cgroup is made.
        self.make_container_dirs(req, paths)?;
        let staged = (|| {
            let image = self.resolve_image(req)?;
            let cfg =
                self.shim_config(req, id, paths, &image, spec::UserRequest::default(), true)?;
            fsutil::write_json_atomic_volatile(&paths.shim_config(), &cfg).map_err(|source| {
                RuntimeError::Io {
                    what: "write",
                    path: paths.shim_config(),
                    source,
                }
            })?;
            // A container starts only if its exit can be recorded on a full disk.
            container::reserve_exit_record(paths).map_err(|source| RuntimeError::Io {
                what: "write",
                path: paths.exit_reserve(),
                source,
            })?;
            self.add_lease(id, &image)?;
            let (ours, theirs) = UnixStream::pair().map_err(|source| RuntimeError::Io {
                what: "create socket pair for",
                path: paths.dir.clone(),
                source,
            })?;
            let monitor = self.launch_monitor(id, paths, theirs.into())?;
            crate::tp!("st.staged");
            Ok(StagedMonitor {
                image,
                monitor,
                ready: ours,
            })
        })();
        if staged.is_err() {
            let _ = self.images.remove_lease(id);
            let _ = remove_container_dirs(paths);
        }
        staged
    }

    /// The sandbox is there: the spec and the rest of the container's files, then the go.
    fn start_staged(
        &self,
        req: &ContainerRequest<'_>,
        id: &str,
        paths: &ContainerPaths,
        staged: StagedMonitor,
    ) -> Result<ContainerInfo, RuntimeError> {
        let meta = match self.prepare(req, id, paths, &staged.image, true) {
            Ok((meta, _)) => meta,
            Err(e) => {
                // A monitor that failed on its own (the rootfs mount) has said why, which is
                // the cause of whatever the files then lacked.
                return Err(match self.call_off(id, paths, staged) {
                    Some(message) => RuntimeError::Start {
                        id: id.to_string(),
                        message,
                    },
                    None => e,
                });
            }
        };
        // A monitor already gone has reported why on the socket (or nothing): the report says.
        crate::tp!("st.go");
        let _ = send(
            staged.ready.as_raw_fd(),
            &[protocol::GO],
            MsgFlags::MSG_NOSIGNAL,
        );
        let ready = OwnedFd::from(staged.ready);
        self.await_report(&meta, paths, staged.monitor, &ready)
    }

    /// Calls a staged monitor off: our end of its socket closes, it takes its rootfs apart and
    /// exits; then the directories and the lease go. Returns the failure the monitor reported
    /// if it had failed on its own before.
    fn call_off(&self, id: &str, paths: &ContainerPaths, staged: StagedMonitor) -> Option<String> {
        let _ = staged.ready.shutdown(Shutdown::Write);
        let ready = OwnedFd::from(staged.ready);
        // EOF once the monitor exited (or a report, then EOF).
        let failed = match read_report(&ready, CALL_OFF_WAIT) {
            Ok(StartReport::Failed { message }) => Some(message),
            _ => None,
        };
        if let Some(pidfd) = &staged.monitor.pidfd {
            let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
            let _ = poll(&mut fds, PollTimeout::from(10_000u16));
            procfs::reap_pidfd(pidfd);
        }
        self.discard_failed(id, paths);
        failed
    }
}
