//! pod
