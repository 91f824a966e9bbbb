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
//! # Cargo features
//!
//! - `cuda` (default): cudarc and libloading, hence NVRTC, GPUs, launches and CUDA
//!   graphs. Without it no CUDA crate is built or linked, and the crate behaves as on a
//!   machine without CUDA libraries: the CPU reference device, tensors, the executor,
//!   offline planning and CUDA generation work; [`Device::cuda`], the probes
//!   ([`nvrtc::probe`], [`driver::probe`]) and [`nvrtc::compile`] return
//!   [`Error::CudaDisabled`]; [`Device::best`] is the CPU device. The items whose
//!   signatures name cudarc types ([`cudarc`], [`Tensor::from_cuda_slice`],
//!   [`Device::capture`], ...) exist only with `cuda`.
//! - `cuda-12000` ... `cuda-12090`, `cuda-13000` ... `cuda-13040`,
//!   `cuda-version-from-build-system`: the CUDA version of cudarc's bindings, forwarded to
//!   cudarc (each turns `cuda` on); `cuda-13000` is in the default set. cudarc's bindings
//!   compile with exactly one of them, so choosing another takes
//!   `default-features = false`.
//! - `nvrtc-tests`, `gpu-tests`: test-only (see [`testing`]).
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
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "cuda")]
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
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use device::CudaGraphRun;
pub use device::{Device, DeviceProperties, DEFAULT_CACHED_BYTES};
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
/// `CUDA_VERSION` (13000 for `cuda-13000`, 12080 for `cuda-12080`, the detected one for
/// `cuda-version-from-build-system`), so it always names the version cudarc was built
/// for. The driver must be at least this new ([`driver::probe`] checks it), because the
/// bindings may resolve symbols that an older driver lacks.
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub const CUDA_BINDINGS_VERSION: (u32, u32) = (
    cudarc::driver::sys::CUDA_VERSION / 1000,
    cudarc::driver::sys::CUDA_VERSION % 1000 / 10,
);

/// The cudarc this crate is built with, so that applications name the same version and
/// features (its `CudaSlice`s go to [`Tensor::from_cuda_slice`]).
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use cudarc;

#[cfg(all(test, feature = "cuda"))]
mod tests {
    /// [`super::CUDA_BINDINGS_VERSION`] is the version feature that is on (with
    /// `cuda-version-from-build-system` alone, cudarc finds the version itself).
    #[test]
    fn the_bindings_version_is_the_version_feature() {
        let on: Vec<(u32, u32)> = [
            (cfg!(feature = "cuda-12000"), (12, 0)),
            (cfg!(feature = "cuda-12010"), (12, 1)),
            (cfg!(feature = "cuda-12020"), (12, 2)),
            (cfg!(feature = "cuda-12030"), (12, 3)),
            (cfg!(feature = "cuda-12040"), (12, 4)),
            (cfg!(feature = "cuda-12050"), (12, 5)),
            (cfg!(feature = "cuda-12060"), (12, 6)),
            (cfg!(feature = "cuda-12080"), (12, 8)),
            (cfg!(feature = "cuda-12090"), (12, 9)),
            (cfg!(feature = "cuda-13000"), (13, 0)),
            (cfg!(feature = "cuda-13010"), (13, 1)),
            (cfg!(feature = "cuda-13020"), (13, 2)),
            (cfg!(feature = "cuda-13030"), (13, 3)),
            (cfg!(feature = "cuda-13040"), (13, 4)),
        ]
        .into_iter()
        .filter_map(|(on, version)| on.then_some(version))
        .collect();
        match on.as_slice() {
            [one] => assert_eq!(super::CUDA_BINDINGS_VERSION, *one),
            [] if cfg!(feature = "cuda-version-from-build-system") => {}
            // None: cudarc's build script refuses; two: its bindings do not compile.
            other => panic!("version features {other:?}"),
        }
    }
}
