//! Softmax and log-softmax over the last dim, forward and backward.
//!
//! Forward, with `m = max(x)` per row for stability: softmax `y = exp(x - m) /
//! sum(exp(x - m))`; log-softmax `y = x - m - log(sum(exp(x - m)))`.
//! Backward from the forward's result `y` (candle hands it to `bwd`) and `dy`:
//! softmax `dx = (dy - sum(dy * y)) * y`; log-softmax `dx = dy - exp(y) * sum(dy)`.

use candle_core::Tensor;
use nvfuser::{DataType, Fusion, FusionDefinition, ValId};

use super::{as_rows, compute_type, float_dtype, reshape_back, rows_and_last};
use crate::error::Result;
use crate::op::{FusedOp, Operand};
use crate::registry::{self, Key};

/// Softmax over the last dim of `x` (any rank >= 1, floating dtype), like
/// `candle_nn::ops::softmax_last_dim`. Gradients flow to `x`.
///
/// ```
/// use candle_core::{Device, Tensor};
/// let x = Tensor::new(&[[0f32, 0.0], [0.0, f32::ln(3.0)]], &Device::Cpu)?;
/// let y = nvfuser_candle::softmax_last_dim(&x)?.to_vec2::<f32>()?;
/// assert!((y[0][0] - 0.5).abs() < 1e-6 && (y[1][1] - 0.75).abs() < 1e-6);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn softmax_last_dim(x: &Tensor) -> candle_core::Result<Tensor> {
    apply("softmax_last_dim", x, false)
}

/// Log-softmax over the last dim of `x` (any rank >= 1, floating dtype), like
/// `candle_nn::ops::log_softmax(x, D::Minus1)`. Gradients flow to `x`.
pub fn log_softmax_last_dim(x: &Tensor) -> candle_core::Result<Tensor> {
    apply("log_softmax_last_dim", x, true)
}

fn apply(op: &'static str, x: &Tensor, log: bool) -> candle_core::Result<Tensor> {
    let dtype = float_dtype(op, "x", x)?;
    let (rows, h) = rows_and_last(op, "x", x)?;
    let y = softmax_op(op, dtype, log)?.apply(&[&as_rows(x, rows, h)?])?;
    reshape_back(y, x.dims())
}

fn softmax_op(name: &'static str, dtype: DataType, log: bool) -> Result<FusedOp> {
    let key = |name| Key {
        name,
        dtype,
        size: 0,
    };
    let (fwd_name, bwd_name) = if log {
        ("log_softmax", "log_softmax_bwd")
    } else {
        ("softmax", "softmax_bwd")
    };
    let fwd = registry::fusion(key(fwd_name), &["x"], || forward(dtype, log))?;
    let bwd = registry::fusion(key(bwd_name), &["grad", "y"], || backward(dtype, log))?;
    FusedOp::new(name, fwd, vec![Operand::Input(0)])?.with_backward(
        bwd,
        vec![Operand::GradOutput, Operand::Output],
        vec![Some(0)],
    )
}

/// `x - max(x)` per row, in the compute type.
fn shifted(fd: &mut FusionDefinition, x: ValId) -> Result<ValId, nvfuser::Error> {
    let m = fd.max(x, &[1], true)?;
    Ok(fd.sub(x, m)?)
}

fn forward(dtype: DataType, log: bool) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let x = fd.cast(x, c)?;
    let s = shifted(&mut fd, x)?;
    let e = fd.exp(s)?;
    let z = fd.sum(e, &[1], true)?;
    let y = if log {
        let lz = fd.log(z)?;
        fd.sub(s, lz)?
    } else {
        fd.div(e, z)?
    };
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn backward(dtype: DataType, log: bool) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(dtype, &[-1, -1])?;
    let y = fd.define_tensor(dtype, &[-1, -1])?;
    let dy = fd.cast(dy, c)?;
    let y = fd.cast(y, c)?;
    let dx = if log {
        let s = fd.sum(dy, &[1], true)?;
        let p = fd.exp(y)?;
        let t = fd.mul(p, s)?;
        fd.sub(dy, t)?
    } else {
        let p = fd.mul(dy, y)?;
        let s = fd.sum(p, &[1], true)?;
        let t = fd.sub(dy, s)?;
        fd.mul(t, y)?
    };
    let dx = fd.cast(dx, dtype)?;
    fd.add_output(dx)?;
    Ok(fd.finish()?)
}
