//! play
