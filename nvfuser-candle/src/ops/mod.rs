//! The fused ops: each a [`FusedOp`](crate::FusedOp) whose forward and backward are
//! fusions defined here with the run-time builder, one per input dtype (f32, f16, bf16,
//! f64), cached process-wide ([`crate::registry`]).
//!
//! Conventions shared by every op:
//! - Math runs in f32 inside the fusions for f16 and bf16 inputs (f64 for f64), and each
//!   output is rounded once to the input dtype; the cross-entropy loss is always f32.
//! - "Over the last dim": any leading dims are accepted. The op reshapes its input to
//!   `[rows, hidden]` on the candle side (a tracked reshape, so gradients flow) when its
//!   rank is not already 2, and the result back to the input's shape.
//! - Arguments are checked before anything runs (dtype, rank, the shapes that must
//!   agree), with errors that name the op, the argument, what was expected and what was
//!   found.
//! - Backward: the gradient of every floating input, in that input's dtype, computed by
//!   a backward fusion that recomputes the forward's statistics (norms) or reads its
//!   result (softmax), never a saved intermediate. Inputs that track no gradient (a
//!   frozen weight, the rotary tables) are skipped: those ops have a cheaper `dx`-only
//!   backward variant.

mod activation;
mod loss;
mod norm;
mod rope;
mod softmax;

pub use activation::{gelu, gelu_erf, silu_mul, silu_mul_packed};
pub use loss::{cross_entropy, cross_entropy_mean};
pub use norm::{layer_norm, rms_norm, LayerNorm, RmsNorm};
pub use rope::rope;
pub use softmax::{log_softmax_last_dim, softmax_last_dim};

use candle_core::{DType, Tensor};
use nvfuser::{DataType, FusionDefinition, ValId};

use crate::error::{Error, Result};

/// The fusion dtype of a floating input, or a dtype error naming the accepted ones.
pub(crate) fn float_dtype(op: &str, arg: &str, t: &Tensor) -> Result<DataType> {
    Ok(match t.dtype() {
        DType::F32 => DataType::F32,
        DType::F16 => DataType::F16,
        DType::BF16 => DataType::BF16,
        DType::F64 => DataType::F64,
        found => {
            return Err(Error::Dtype {
                op: op.into(),
                arg: arg.into(),
                expected: "f32, f16, bf16 or f64".into(),
                found,
            })
        }
    })
}

/// The type the fusions compute in for inputs of `dtype`.
pub(crate) fn compute_type(dtype: DataType) -> DataType {
    if dtype == DataType::F64 {
        DataType::F64
    } else {
        DataType::F32
    }
}

/// Checks that `t` has the dtype of the op's main input.
pub(crate) fn same_dtype(
    op: &str,
    arg: &str,
    t: &Tensor,
    like: &Tensor,
    like_name: &str,
) -> Result<()> {
    if t.dtype() == like.dtype() {
        return Ok(());
    }
    Err(Error::Dtype {
        op: op.into(),
        arg: arg.into(),
        expected: format!("{} (the dtype of {like_name})", like.dtype().as_str()),
        found: t.dtype(),
    })
}

/// Checks that `t` has exactly the shape `dims` (`why` says where it comes from).
pub(crate) fn expect_shape(
    op: &str,
    arg: &str,
    t: &Tensor,
    dims: &[usize],
    why: &str,
) -> Result<()> {
    if t.dims() == dims {
        return Ok(());
    }
    Err(Error::Shape {
        op: op.into(),
        arg: arg.into(),
        expected: format!("shape {dims:?} ({why})"),
        found: t.dims().to_vec(),
    })
}

/// The last dim of `t`, and the product of the others; `t` must have rank >= 1.
pub(crate) fn rows_and_last(op: &str, arg: &str, t: &Tensor) -> Result<(usize, usize)> {
    match t.dims().split_last() {
        Some((&last, lead)) => Ok((lead.iter().product(), last)),
        None => Err(Error::Shape {
            op: op.into(),
            arg: arg.into(),
            expected: "rank 1 or more (the op works over the last dim)".into(),
            found: Vec::new(),
        }),
    }
}

/// `t` as `[rows, last]`: itself when it already has rank 2, else a (tracked) reshape.
pub(crate) fn as_rows(t: &Tensor, rows: usize, last: usize) -> candle_core::Result<Tensor> {
    if t.rank() == 2 {
        Ok(t.clone())
    } else {
        t.reshape((rows, last))
    }
}

/// `y` back in the shape `dims` (a no-op when it already has it).
pub(crate) fn reshape_back(y: Tensor, dims: &[usize]) -> candle_core::Result<Tensor> {
    if y.dims() == dims {
        Ok(y)
    } else {
        y.reshape(dims)
    }
}

/// A floating constant of the compute type.
pub(crate) fn constant(fd: &mut FusionDefinition, value: f64, dtype: DataType) -> ValId {
    fd.constant_of(value, dtype)
}
