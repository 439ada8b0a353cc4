pub mod apparmor;
pub mod capabilities;
pub mod channel;
pub mod config;
pub mod container;
pub mod error;
pub mod hooks;
pub mod namespaces;
pub mod network;
pub mod notify_socket;
pub mod process;
pub mod rootfs;
#[cfg(feature = "libseccomp")]
pub mod seccomp;
pub mod signal;
pub mod syscall;
pub mod test_utils;
pub mod tty;
pub mod user_ns;
pub mod utils;
pub mod validator;
pub mod workload;

// Because the `libcontainer` api uses the oci_spec who resides in a different
// crate, we re-export the version of oci_spec this crate uses.
// Ref: https://github.com/youki-dev/youki/issues/2066
// Ref: https://github.com/rust-lang/api-guidelines/discussions/176
pub use oci_spec;
