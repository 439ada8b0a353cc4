//! pod: Pod manifests, from bytes to validated, defaulted static pods.
//!
//! Two phases: [`manifest`] turns YAML/JSON bytes into located raw trees and k8s-openapi
//! `Pod`s (errors carry file:line:column), [`validation`] checks a Pod the way the API server
//! and kubelet do for static pods; [`crate::staticpod`] ties them together with the kubelet's
//! static-pod defaults, content hashes and the runtime's own refusals. [`quantity`] parses
//! resource quantities, [`resources`] sums a pod's requests and limits; [`qos`] computes QoS
//! classes and OOM scores; [`priority`] says how important a pod is to the eviction manager.

pub mod manifest;
pub mod netargs;
pub mod priority;
pub mod qos;
pub mod quantity;
pub mod resources;
pub mod validation;
