//! Removing an exited container ([`crate::runtime::Runtime::remove_container`]): wait for a
//! monitor still taking it apart, finish the job of a monitor that died (`shim cleanup`), drop
//! its image lease and both of its directories.

use std::time::Duration;

use super::list::remove_container_dirs;
use super::LinuxRuntime;
use crate::runtime::container;
use crate::runtime::RuntimeError;

/// How long removing an exited container waits for its monitor to finish taking it apart.
const MONITOR_FINISH_WAIT: Duration = Duration::from_secs(30);

impl LinuxRuntime {
    /// [`crate::runtime::Runtime::remove_container`].
    pub(super) fn remove(&self, id: &str) -> Result<(), RuntimeError> {
        let paths = self.container_paths(id)?;
        // Another thread is removing it (a pod's removal and container GC): that one
        // finishes it.
        let Some(_busy) = self.busy_containers.try_enter(id) else {
            return Ok(());
        };
        if !paths.record.exists() && !paths.dir.exists() {
            return Ok(());
        }
        // A monitor that recorded the exit is still taking the container apart: wait for it.
        let finishing = paths.exit().exists();
        if container::monitor_alive(&paths)
            && !(finishing && self.wait_monitor_done(&paths, MONITOR_FINISH_WAIT))
        {
            return Err(RuntimeError::Start {
                id: id.to_string(),
                message: if finishing {
                    format!(
                        "exited, but its monitor is still removing it after {}s",
                        MONITOR_FINISH_WAIT.as_secs()
                    )
                } else {
                    "still running; stop it before removing it".into()
                },
            });
        }
        if !paths.cleaned().exists() && paths.shim_config().exists() {
            self.run_cleanup(&paths)?;
        }
        self.watcher.forget(id);
        self.images
            .remove_lease(id)
            .map_err(|source| RuntimeError::Image {
                pod: String::new(),
                source: Box::new(source),
            })?;
        remove_container_dirs(&paths).map_err(|source| RuntimeError::Io {
            what: "remove",
            path: paths.record.clone(),
            source,
        })
    }
}
