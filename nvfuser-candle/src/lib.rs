//! nvfuser-candle: run nvfuser-rs fusions as [candle](https://docs.rs/candle-core) ops,
//! with forward and backward.
//!
//! Two layers:
//! - The generic adapter. [`CandleFusion`] runs any [`nvfuser::Fusion`] (N tensor and
//!   scalar inputs, M outputs) on candle tensors, checking each argument's kind, dtype
//!   and rank first. [`FusedOp`] makes a fusion a candle custom op (`CustomOp1/2/3`)
//!   whose `bwd` runs backward fusions, so gradients flow through
//!   `Tensor::backward()`; which tensors feed which fusion input is data ([`Operand`]).
//! - Fused ops built on it, each with a fused backward, usable from candle_nn-style code:
//!   [`rms_norm`] / [`RmsNorm`], [`layer_norm`] / [`LayerNorm`], [`softmax_last_dim`],
//!   [`log_softmax_last_dim`], [`rope`] (rotate-half), [`silu_mul`],
//!   [`silu_mul_packed`], [`gelu`] (tanh approximation), [`gelu_erf`],
//!   [`cross_entropy`] (per row) and [`cross_entropy_mean`]. Math runs in f32 for f16
//!   and bf16 inputs; outputs come back in the input dtype (the loss in f32).
//!
//! ```
//! use candle_core::{DType, Device, Tensor, Var};
//!
//! let dev = Device::Cpu;
//! let x = Var::from_tensor(&Tensor::arange(0f32, 24.0, &dev)?.reshape((2, 3, 4))?)?;
//! let w = Var::from_tensor(&Tensor::ones(4, DType::F32, &dev)?)?;
//! let norm = nvfuser_candle::RmsNorm::new(w.as_tensor().clone(), 1e-5);
//! let y = norm.forward(x.as_tensor())?;                   // [2, 3, 4], one fusion
//! let h = nvfuser_candle::gelu(&y)?;                      // another
//! let grads = h.sum_all()?.backward()?;                   // their backward fusions
//! assert_eq!(grads.get(&x).unwrap().dims(), &[2, 3, 4]);
//! assert_eq!(grads.get(&w).unwrap().dims(), &[4]);
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! What runs where, today: candle **CPU** storage only. Inputs are copied (gathered from
//! any strided, offset or broadcast layout into row-major order) into the library's CPU
//! device, where the CPU reference evaluator runs the fusion, and the outputs are copied
//! into new candle CPU storage. That is the library's numerical oracle: exact to its
//! documented semantics and portable, not fast. Candle's CUDA storage is not handled by
//! this build (it would need candle's `cuda` feature, which needs `nvcc` when candle is
//! built); see the crate README for what the zero-copy CUDA path needs.
//!
//! Errors: every function returns `candle_core::Result`; the error inside is this
//! crate's typed [`Error`], whose message names the op, the argument, what was expected
//! and what was found. Nothing panics on bad input.
#![deny(missing_docs)]

mod convert;
mod error;
mod fusion;
mod op;
mod ops;
mod registry;

pub use convert::{candle_dtype, fusion_dtype};
pub use error::{Error, Result};
pub use fusion::{CandleFusion, FusionArg};
pub use op::{FusedOp, Operand};
pub use ops::{
    cross_entropy, cross_entropy_mean, gelu, gelu_erf, layer_norm, log_softmax_last_dim, rms_norm,
    rope, silu_mul, silu_mul_packed, softmax_last_dim, LayerNorm, RmsNorm,
};
pub use registry::cached_fusions;

/// Where this build runs fusions for candle tensors, in words (examples print it).
pub fn execution_device() -> String {
    format!(
        "{} (candle CPU storage; fusions run by nvfuser's CPU reference evaluator)",
        nvfuser::Device::cpu()
    )
}
