//! runtime
pub mod spec;
pub mod user;
