//! Process attributes through `prctl(2)`: the thread name shown by ps and top, and
//! no_new_privs (the kernel's condition for installing a seccomp filter without
//! CAP_SYS_ADMIN).

use std::ffi::CStr;
use std::io;

/// Names the calling thread (`PR_SET_NAME`; the kernel keeps 15 bytes).
pub fn set_name(name: &CStr) -> io::Result<()> {
    rustix::thread::set_name(name).map_err(io::Error::from)
}

/// Whether no_new_privs is set for the calling thread (`PR_GET_NO_NEW_PRIVS`).
pub fn no_new_privs() -> io::Result<bool> {
    rustix::thread::no_new_privs().map_err(io::Error::from)
}

/// Sets no_new_privs for the calling thread (`PR_SET_NO_NEW_PRIVS`); it cannot be unset.
pub fn set_no_new_privs() -> io::Result<()> {
    rustix::thread::set_no_new_privs(true).map_err(io::Error::from)
}
