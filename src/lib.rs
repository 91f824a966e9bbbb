//! nvfuser-rs: a fusion code generator for NVIDIA GPUs.
//!
//! Define tensor math once, with the [`fusion!`] macro or at run time with
//! [`FusionDefinition`]; run it on a [`Device`] (a GPU, or the CPU reference evaluator).
//! This crate is the facade: it re-exports the IR and builder of `nvfuser-core` and the
//! runtime of `nvfuser-cuda`.
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
#![deny(missing_docs)]

pub use nvfuser_macros::fusion;

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
pub use nvfuser_cuda::{executor, launch, nvrtc, segmented};
pub use nvfuser_cuda::{
    Arg, CudaGraphRun, Device, DeviceProperties, Element, FusionCache, FusionExecutorCache,
    GpuArch, KernelProfile, SegmentedRuntime, Tensor,
};

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
    pub use nvfuser_macros::fusion;
}
