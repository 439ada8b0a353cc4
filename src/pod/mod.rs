//! pod: Pod manifests, from bytes to a validated, defaulted `v1 Pod`.
//!
//! Two phases: [`manifest`] turns YAML/JSON bytes into the raw k8s-openapi `Pod` (errors carry
//! file:line:column), then validation and the static-pod defaults the kubelet applies.
//! [`quantity`] parses resource quantities; [`qos`] computes QoS classes and OOM scores.

pub mod manifest;
pub mod qos;
pub mod quantity;
