//! Signalling a container ([`crate::runtime::Runtime::signal_container`], the stop's SIGTERM
//! and SIGKILL): through a pidfd of its init, opened after the init's identity (pid and start
//! time, in the monitor's `state.json`) was checked, so a recycled pid is never signalled.

use super::LinuxRuntime;
use crate::runtime::container;
use crate::runtime::protocol::ShimState;
use crate::runtime::RuntimeError;

impl LinuxRuntime {
    /// [`crate::runtime::Runtime::signal_container`]: a no-op once the init is gone.
    pub(super) fn signal(&self, id: &str, signal: i32) -> Result<(), RuntimeError> {
        let paths = self.container_paths(id)?;
        if !paths.meta().exists() {
            return Err(RuntimeError::NotFound { id: id.to_string() });
        }
        let state: ShimState = container::read_json_opt(&paths.state())
            .map_err(|source| RuntimeError::Shim {
                id: id.to_string(),
                source: Box::new(source),
            })?
            .unwrap_or_default();
        if let Some(init) = state.init {
            init.signal(signal).map_err(|source| RuntimeError::Signal {
                id: id.to_string(),
                source,
            })?;
        }
        Ok(())
    }
}
