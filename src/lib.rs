//! nvfuser-rs: a fusion code generator for NVIDIA GPUs.
#![deny(missing_docs)]
pub use nvfuser_core as core;
