//! runtime
pub mod user;
