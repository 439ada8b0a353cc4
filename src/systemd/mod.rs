//! systemd: podvisor as a `Type=notify` service — the sd_notify protocol ([`notify`]) and
//! what the daemon reports at each turnover of its sync loop: readiness, a status line and
//! watchdog pings ([`service`]).

pub mod notify;
pub mod service;

pub use notify::{Notify, NotifySocket};
pub use service::{status_line, ServiceReporter};
