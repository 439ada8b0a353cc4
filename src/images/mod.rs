//! images
