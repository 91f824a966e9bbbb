//! nvfuser-rs: a fusion code generator for NVIDIA GPUs.
//!
//! Write a chain of tensor math once, with the [`fusion!`] macro or at run time with
//! [`FusionDefinition`]; the library plans it into one or a few fused kernels, generates
//! CUDA C++, compiles it with NVRTC, caches it, and runs it on a [`Device`]: a GPU, or the
//! CPU reference evaluator that every GPU result is tested against.
//!
//! This crate is the facade: it re-exports the IR and builder of `nvfuser-core`, the macro
//! of `nvfuser-macros` and the runtime of `nvfuser-cuda`.
//!
//! # With the macro
//!
//! Ranks, dtypes and named dims are checked when the program compiles; the macro writes a
//! typed entry point (`layer_norm`) and the fusion's builder (`layer_norm_fusion`).
//!
#![cfg_attr(feature = "macros", doc = "```")]
#![cfg_attr(not(feature = "macros"), doc = "```ignore")]
//! use nvfuser::prelude::*;
//!
//! fusion! {
//!     /// LayerNorm over the last dim: bf16 in and out, f32 math.
//!     pub fn layer_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, eps: f32)
//!         -> Tensor<bf16, [N, H]>
//!     {
//!         let x = x as f32;
//!         let mean = x.mean([1]).unsqueeze(1);
//!         let xc = x - mean;
//!         let var = (xc * xc).mean([1]).unsqueeze(1);
//!         let y = xc * rsqrt(var + eps) * (w as f32) + (b as f32);
//!         y as bf16
//!     }
//! }
//!
//! // GPU 0 when there is one; else the CPU reference evaluator (with a one-line notice).
//! let dev = Device::best();
//! let row: Vec<bf16> = [1.0f32, 2.0, 3.0, 4.0].map(bf16::from_f32).to_vec();
//! let x = dev.tensor_from_slice(&[row.clone(), row].concat(), [2, 4])?;
//! let w = dev.tensor_from_slice(&[bf16::ONE; 4], [4])?;
//! let b = dev.tensor_from_slice(&[bf16::ZERO; 4], [4])?;
//! let y: Vec<bf16> = layer_norm(&dev, &x, &w, &b, 1e-5)?.to_vec()?;
//! // (x - 2.5) / sqrt(1.25 + 1e-5), in bf16
//! assert!((y[0].to_f32() + 1.3416).abs() < 1e-2 && (y[7].to_f32() - 1.3416).abs() < 1e-2);
//! # Ok::<(), nvfuser::Error>(())
//! ```
//!
//! # At run time, with the builder
//!
//! ```
//! use nvfuser::prelude::*;
//!
//! let mut fd = FusionDefinition::new();
//! let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
//! let b = fd.define_tensor(DataType::F32, &[-1])?;
//! let y = fd.add(x, b)?; // [N, H] + [H] broadcasts
//! let y = fd.relu(y)?;
//! fd.add_output(y)?;
//! let exec = FusionExecutorCache::new(fd.finish()?);
//!
//! let dev = Device::cpu();
//! let x = dev.tensor_from_slice(&[1.0f32, -2.0, 3.0, -4.0], [2, 2])?;
//! let b = dev.tensor_from_slice(&[0.5f32, 0.5], [2])?;
//! let y = exec.run(&dev, &[(&x).into(), (&b).into()])?;
//! assert_eq!(y[0].to_vec::<f32>()?, vec![1.5, 0.0, 3.5, 0.0]);
//! # Ok::<(), nvfuser::Error>(())
//! ```
//!
//! # Requirements
//!
//! - Building needs only Rust (1.95): no CUDA toolkit, nothing linked. `libcuda` and
//!   `libnvrtc` are opened at run time, and a missing one is a typed error
//!   ([`Device::best`] falls back to the CPU).
//! - Running on a GPU: an NVIDIA driver of CUDA 13.0 or newer (the default bindings are
//!   cudarc's `cuda-13000`), NVRTC 13.x (`libnvrtc.so.13`, from the CUDA toolkit or
//!   `pip install nvidia-cuda-nvrtc`; a folder holding it can be named with
//!   `NVFUSER_NVRTC_LIB_DIR`; NVRTC 12.x loads, but is not tested), and a GPU of compute
//!   capability 7.5 (Turing) or newer, the oldest CUDA 13 compiles for. Tested on H100 and
//!   H200 (sm_90).
//! - Planning, scheduling and CUDA generation need no GPU: `GpuModel` presets (H100, H200,
//!   A100, L40S, RTX 4090, B200) stand in for a device.
//!
//! # Cargo features
//!
//! | feature | default | what it adds |
//! |---|---|---|
//! | `cuda` | yes | the GPU runtime: NVRTC, devices, launches, CUDA graphs, through cudarc (loaded at run time, never linked) |
//! | `cuda-13000` | yes | the CUDA version of cudarc's bindings (turns `cuda` on) |
//! | `macros` | yes | the [`fusion!`](macro@fusion) macro |
//!
//! Without `cuda` (`default-features = false, features = ["macros"]`) neither cudarc nor
//! libloading is built. The IR, the builder, the macro and its typed entry points, the
//! CPU reference device ([`Device::cpu`]; [`Device::best`] returns it) with its tensors
//! and [`FusionExecutorCache::run`], and offline planning and CUDA generation
//! ([`FusionExecutorCache::plan_for`], `Kernel::cuda_source`) work as in a full build.
//! What needs CUDA returns [`Error::CudaDisabled`] ([`Device::cuda`], [`nvrtc::compile`])
//! or, where the signature names a cudarc type, does not exist (`cudarc`,
//! `Tensor::from_cuda_slice`, `Device::capture`, `launch::launch_raw`, ...; marked
//! "Available on crate feature `cuda` only" in these docs).
//!
//! The CUDA version features are `cuda-12000`, `cuda-12010`, `cuda-12020`, `cuda-12030`,
//! `cuda-12040`, `cuda-12050`, `cuda-12060`, `cuda-12080`, `cuda-12090`, `cuda-13000`,
//! `cuda-13010`, `cuda-13020`, `cuda-13030`, `cuda-13040` and
//! `cuda-version-from-build-system` (the toolkit's `nvcc --version`, or
//! `CUDARC_CUDA_VERSION=12080`), forwarded to cudarc. Its bindings compile with exactly
//! one of them, so another version than the default takes `default-features = false`:
//!
//! ```toml
//! nvfuser = { version = "0.1", default-features = false, features = ["macros", "cuda-12080"] }
//! ```
//!
//! The driver must support at least that CUDA version ([`Device::cuda`] checks it), and
//! NVRTC should be of its major version. In a build where another crate also uses cudarc
//! (candle), at most one version feature may be on in all: both name the same one, or one
//! side uses `cuda-version-from-build-system`, which gives way to a named version.
//! cudarc's `dynamic-linking`, turned on by such a crate, is compatible (this library asks
//! only for `fallback-dynamic-loading`).
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use nvfuser_macros::fusion;

// What `fusion!`'s expansion names. Compiled in every build (it needs neither the macro
// nor CUDA): a `cfg` here would also mark the items it re-exports as needing `macros` in
// the docs.
mod private;

#[doc(hidden)]
pub mod __private {
    pub use crate::private::*;
}

/// The benchmark's fusions and inputs (tests, the benchmark and tools; not the API).
#[doc(hidden)]
pub use nvfuser_core::workloads;
pub use nvfuser_core::{
    builder, codegen, dsl, dtype, eval, fp8, ir, philox, plan, print, sched, scheduler, segment,
};
pub use nvfuser_core::{f8e4m3, f8e5m2};
pub use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue, Size, ValId};
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use nvfuser_cuda::CudaGraphRun;
pub use nvfuser_cuda::{executor, generator, launch, nvrtc, segmented};
pub use nvfuser_cuda::{
    Arg, Device, DeviceProperties, Element, FusionCache, FusionExecutorCache, GpuArch,
    KernelProfile, RngState, SegmentedRuntime, Tensor,
};

/// The cudarc this library is built with (the same version and features), for device
/// buffers made outside it: a `cudarc::driver::CudaSlice` goes to [`Tensor::from_cuda_slice`].
#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub use nvfuser_cuda::cudarc;

/// The library's error: everything that runs returns it, and definition errors
/// (`nvfuser_core::Error`) convert into it with `?`. Match on its variants; its
/// `Display` says what was expected and what was found.
pub use nvfuser_cuda::Error;

/// The names most programs need.
pub mod prelude {
    pub use half::{bf16, f16};
    pub use nvfuser_core::builder::{Contiguity, Slice, TensorSpec};
    pub use nvfuser_core::fp8::{f8e4m3, f8e5m2};
    pub use nvfuser_core::scheduler::{HeuristicParams, SchedulerKind};
    pub use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue, Size, ValId};
    pub use nvfuser_cuda::{Arg, Device, FusionExecutorCache, Tensor};
    #[cfg(feature = "macros")]
    pub use nvfuser_macros::fusion;
}
