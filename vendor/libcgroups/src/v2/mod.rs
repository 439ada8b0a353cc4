mod controller;
pub mod controller_type;
mod cpu;
mod cpuset;
#[cfg(feature = "cgroupsv2_devices")]
pub mod devices;
mod freezer;
mod hugetlb;
mod io;
pub mod manager;
mod memory;
mod pids;
mod unified;
pub mod util;
