//! pod
pub mod qos;
pub mod quantity;
