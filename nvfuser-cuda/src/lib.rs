//! CUDA runtime for nvfuser-rs: device discovery, NVRTC, caches, launch.
//!
//! Everything CUDA is reached through [cudarc], which opens `libnvrtc` and `libcuda` at run
//! time (never at link time). cudarc panics when such a library is missing, so this crate
//! probes for each library first and turns a missing one into a typed [`Error`]:
//!
//! - [`nvrtc::probe`] finds `libnvrtc` (also in `NVFUSER_NVRTC_LIB_DIR`), and
//!   [`nvrtc::compile`] turns CUDA C++ into a CUBIN for one real GPU architecture. This part
//!   needs no GPU and no CUDA toolkit, only the NVRTC library (`scripts/nvrtc-env.sh`
//!   installs it from PyPI).
//! - [`driver::probe`] finds `libcuda` and a GPU, or says why there is none.
//! - [`Device`] is a GPU opened through cudarc (after the probe) with its
//!   [`DeviceProperties`] read from the driver, or the CPU reference device;
//!   [`Device::best`] falls back to the CPU with a notice.
//! - [`Tensor`] is a strided view over a shared host or device buffer: upload, download,
//!   copy-free views, and [`Tensor::from_cuda_slice`] for buffers other crates own.
//! - [`KernelCache`] keeps compiled CUBINs in memory and on disk (verified entries,
//!   atomic writes) and compiles batches in parallel.
//! - [`testing`] holds the skip-or-require helpers that every NVRTC or GPU test uses.
//!
//! ```
//! use nvfuser_cuda::{nvrtc, GpuArch};
//!
//! let source = r#"extern "C" __global__ void scale(float* x, float a, int n) {
//!     int i = blockIdx.x * blockDim.x + threadIdx.x;
//!     if (i < n) x[i] *= a;
//! }"#;
//! match nvrtc::compile(source, "scale", GpuArch::SM90) {
//!     Ok(kernel) => assert!(!kernel.cubin.is_empty()),
//!     // No libnvrtc on this machine: a typed error, not a panic.
//!     Err(err) => eprintln!("{err}"),
//! }
//! ```
#![deny(missing_docs)]

mod dylib;
mod error;

pub mod args;
pub mod cache;
pub mod device;
pub mod driver;
pub mod dump;
pub mod executor;
pub mod fusion_cache;
pub mod generator;
pub mod launch;
pub mod nvrtc;
pub mod profile;
pub mod runtime;
pub mod segmented;
pub mod tensor;
#[doc(hidden)]
pub mod testing;

pub use args::{check_args, Arg};
pub use cache::{CacheKey, CacheOrigin, CacheStats, CachedKernel, KernelCache, KernelRequest};
pub use device::{CudaGraphRun, Device, DeviceProperties, DEFAULT_CACHED_BYTES};
pub use driver::{DriverInfo, DriverVersion};
pub use dump::{Dump, DumpFlags};
pub use error::{CompileFailure, Error};
pub use executor::{ExecutorStats, FusionExecutorCache, InputSignature, DEFAULT_RUNTIME_CAPACITY};
pub use fusion_cache::{FusionCache, FusionCacheStats};
pub use generator::RngState;
pub use nvrtc::{
    compile, compile_with_options, nvrtc_version, CompiledKernel, GpuArch, NvrtcOptions,
    NvrtcVersion,
};
pub use profile::KernelProfile;
pub use segmented::{SegmentedRuntime, SegmentedStats};
pub use tensor::{contiguous_strides, Element, Tensor};

/// The CUDA version of cudarc's bindings, `(major, minor)`: cudarc's own
/// `CUDA_VERSION` (13000 for `cuda-13000`), so it always names the version cudarc was
/// built for. The driver must be at least this new ([`driver::probe`] checks it), because
/// the bindings may resolve symbols that an older driver lacks.
pub const CUDA_BINDINGS_VERSION: (u32, u32) = (
    cudarc::driver::sys::CUDA_VERSION / 1000,
    cudarc::driver::sys::CUDA_VERSION % 1000 / 10,
);

/// The cudarc this crate is built with, so that applications name the same version and
/// features (its `CudaSlice`s go to [`Tensor::from_cuda_slice`]).
pub use cudarc;
