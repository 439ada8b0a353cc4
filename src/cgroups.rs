//! cgroups
