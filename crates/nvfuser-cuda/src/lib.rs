//! CUDA runtime for nvfuser-rs: device discovery, NVRTC, caches, launch.
#![deny(missing_docs)]
