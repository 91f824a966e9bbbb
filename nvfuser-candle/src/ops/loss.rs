//! Cross-entropy of logits against integer labels, per row, forward and backward.
//!
//! Forward: `loss = logsumexp(x) - x[label]` per row, computed from `s = x - max(x)`
//! (`log(sum(exp(s))) - s[label]`, the label's logit read with `take_along_axis`), in
//! f32 (f64 for f64 logits) whatever the logits' dtype.
//! Backward: `dx = (softmax(x) - onehot(label)) * dloss`, the one-hot from an `iota`
//! over the classes compared with the label; the labels get no gradient.
//!
//! A label outside `0..V` is an error of the forward (the library checks the indices
//! it reads), never an out-of-bounds read. There is no ignore index or label smoothing.

use candle_core::{DType, Tensor};
use nvfuser::{DataType, Fusion, FusionDefinition, Size, ValId};

use super::{compute_type, float_dtype, reshape_back, rows_and_last};
use crate::error::{Error, Result};
use crate::op::{FusedOp, Operand};
use crate::registry::{self, Key};

/// Cross-entropy per row: for `logits [.., V]` (floating dtype) and integer `labels [..]`
/// (the same leading dims; u8, u32, i16, i32 or i64), `logsumexp(logits) -
/// logits[label]`, shape `[..]`, in f32 (f64 for f64 logits). Gradients flow to the
/// logits. For candle_nn's mean-reduced `cross_entropy`, see [`cross_entropy_mean`].
///
/// ```
/// use candle_core::{Device, Tensor};
/// let logits = Tensor::new(&[[0f32, 0.0], [0.0, 0.0]], &Device::Cpu)?;
/// let labels = Tensor::new(&[0u32, 1], &Device::Cpu)?;
/// let loss = nvfuser_candle::cross_entropy(&logits, &labels)?.to_vec1::<f32>()?;
/// assert!((loss[0] - 2f32.ln()).abs() < 1e-6 && (loss[1] - 2f32.ln()).abs() < 1e-6);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn cross_entropy(logits: &Tensor, labels: &Tensor) -> candle_core::Result<Tensor> {
    const OP: &str = "cross_entropy";
    let dtype = float_dtype(OP, "logits", logits)?;
    let (rows, v) = rows_and_last(OP, "logits", logits)?;
    let lead = &logits.dims()[..logits.rank() - 1];
    if !matches!(
        labels.dtype(),
        DType::U8 | DType::U32 | DType::I16 | DType::I32 | DType::I64
    ) {
        return Err(Error::Dtype {
            op: OP.into(),
            arg: "labels".into(),
            expected: "an integer type (u8, u32, i16, i32 or i64)".into(),
            found: labels.dtype(),
        }
        .into());
    }
    if labels.dims() != lead {
        return Err(Error::Shape {
            op: OP.into(),
            arg: "labels".into(),
            expected: format!(
                "shape {lead:?} (the leading dims of logits {:?})",
                logits.dims()
            ),
            found: labels.dims().to_vec(),
        }
        .into());
    }
    let logits2 = if logits.rank() == 2 {
        logits.clone()
    } else {
        logits.reshape((rows, v))?
    };
    let labels1 = if labels.rank() == 1 {
        labels.clone()
    } else {
        labels.reshape(rows)?
    };
    let loss = cross_entropy_op(dtype)?.apply(&[&logits2, &labels1])?;
    reshape_back(loss, lead)
}

/// The mean of [`cross_entropy`] over all rows: a scalar, as `candle_nn::loss::cross_entropy`
/// gives for `[N, V]` logits. Gradients flow to the logits.
pub fn cross_entropy_mean(logits: &Tensor, labels: &Tensor) -> candle_core::Result<Tensor> {
    cross_entropy(logits, labels)?.mean_all()
}

fn cross_entropy_op(dtype: DataType) -> Result<FusedOp> {
    let key = |name| Key {
        name,
        dtype,
        size: 0,
    };
    let fwd = registry::fusion(key("cross_entropy"), &["logits", "labels"], || {
        forward(dtype)
    })?;
    let bwd = registry::fusion(
        key("cross_entropy_bwd"),
        &["grad", "logits", "labels"],
        || backward(dtype),
    )?;
    use Operand::*;
    FusedOp::new("cross_entropy", fwd, vec![Input(0), Input(1)])?.with_backward(
        bwd,
        vec![GradOutput, Input(0), Input(1)],
        vec![Some(0), None],
    )
}

/// `x - max(x)` per row and `log(sum(exp(x - max(x))))` (`[N, 1]`).
fn shifted_lse(fd: &mut FusionDefinition, x: ValId) -> Result<(ValId, ValId), nvfuser::Error> {
    let m = fd.max(x, &[1], true)?;
    let s = fd.sub(x, m)?;
    let e = fd.exp(s)?;
    let z = fd.sum(e, &[1], true)?;
    Ok((s, fd.log(z)?))
}

/// `(logits [N, V], labels [N] i64) -> loss [N]`.
fn forward(dtype: DataType) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let labels = fd.define_tensor(DataType::I64, &[-1])?;
    let x = fd.cast(x, c)?;
    let (s, lse) = shifted_lse(&mut fd, x)?;
    let idx = fd.unsqueeze(labels, 1)?;
    let picked = fd.take_along_axis(s, idx, 1)?;
    let loss = fd.sub(lse, picked)?;
    let loss = fd.squeeze(loss, &[1])?;
    fd.add_output(loss)?;
    Ok(fd.finish()?)
}

/// `(dloss [N], logits [N, V], labels [N] i64) -> dlogits [N, V]`.
fn backward(dtype: DataType) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let dloss = fd.define_tensor(c, &[-1])?;
    let logits = fd.define_tensor(dtype, &[-1, -1])?;
    let labels = fd.define_tensor(DataType::I64, &[-1])?;
    let x = fd.cast(logits, c)?;
    let (s, lse) = shifted_lse(&mut fd, x)?;
    let ls = fd.sub(s, lse)?;
    let p = fd.exp(ls)?;
    let v = fd.size(logits, 1)?;
    let zero = fd.constant(0i64);
    let one = fd.constant(1i64);
    let classes = fd.iota(Size::Val(v), zero, one, DataType::I64)?;
    let idx = fd.unsqueeze(labels, 1)?;
    let hit = fd.eq(classes, idx)?;
    let one_c = fd.constant_of(1.0, c);
    let zero_c = fd.constant_of(0.0, c);
    let onehot = fd.where_(hit, one_c, zero_c)?;
    let d = fd.sub(p, onehot)?;
    let dl = fd.unsqueeze(dloss, 1)?;
    let dx = fd.mul(d, dl)?;
    let dx = fd.cast(dx, dtype)?;
    fd.add_output(dx)?;
    Ok(fd.finish()?)
}
