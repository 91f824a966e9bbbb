//! RMSNorm and LayerNorm over the last dim, forward and backward.
//!
//! Forward (rows of `x`, hidden size `H`, math in the compute type):
//! - RMSNorm: `y = x * rsqrt(mean(x^2) + eps) * w`;
//! - LayerNorm: `y = (x - mean) * rsqrt(var + eps) * w + b`, the biased variance (as
//!   PyTorch and candle_nn), mean and variance from one `var_mean`.
//!
//! Backward, from `dy`, `x`, `w` and eps, the row statistics recomputed (`rstd`, and
//! `xhat = (x - mean) * rstd` for LayerNorm, `xhat = x * rstd` for RMSNorm), `g = dy * w`:
//! - RMSNorm: `dx = (g - xhat * mean(g * xhat)) * rstd`, `dw = sum_rows(dy * xhat)`;
//! - LayerNorm: `dx = (g - mean(g) - xhat * mean(g * xhat)) * rstd`,
//!   `dw = sum_rows(dy * xhat)`, `db = sum_rows(dy)`.
//!
//! Each has a `dx`-only backward variant, used when the weight tracks no gradient.

use candle_core::{Module, Tensor};
use nvfuser::{DataType, Fusion, FusionDefinition, ValId};

use super::{
    as_rows, compute_type, expect_shape, float_dtype, reshape_back, rows_and_last, same_dtype,
};
use crate::error::Result;
use crate::op::{FusedOp, Operand};
use crate::registry::{self, Key};

/// RMSNorm over the last dim: `x * rsqrt(mean(x^2, -1) + eps) * weight`, for `x` of any
/// rank >= 1 and `weight` of shape `[H]` (`H` = the last dim of `x`), both of one
/// floating dtype. Gradients flow to `x` and `weight`.
///
/// ```
/// use candle_core::{Device, Tensor};
/// let x = Tensor::new(&[[1f32, 2.0, 3.0], [-1.0, 0.0, 1.0]], &Device::Cpu)?;
/// let w = Tensor::new(&[1f32, 1.0, 2.0], &Device::Cpu)?;
/// let y = nvfuser_candle::rms_norm(&x, &w, 1e-6)?;
/// assert_eq!(y.dims(), &[2, 3]);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f64) -> candle_core::Result<Tensor> {
    const OP: &str = "rms_norm";
    let dtype = float_dtype(OP, "x", x)?;
    let (rows, h) = rows_and_last(OP, "x", x)?;
    same_dtype(OP, "weight", weight, x, "x")?;
    expect_shape(OP, "weight", weight, &[h], "the last dim of x")?;
    let op = rms_norm_op(dtype, eps)?;
    let y = op.apply(&[&as_rows(x, rows, h)?, weight])?;
    reshape_back(y, x.dims())
}

/// LayerNorm over the last dim: `(x - mean) * rsqrt(var + eps) * weight + bias` with the
/// biased variance, for `x` of any rank >= 1, `weight` and `bias` (optional) of shape
/// `[H]`, one floating dtype. Gradients flow to `x`, `weight` and `bias`.
pub fn layer_norm(
    x: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
    eps: f64,
) -> candle_core::Result<Tensor> {
    const OP: &str = "layer_norm";
    let dtype = float_dtype(OP, "x", x)?;
    let (rows, h) = rows_and_last(OP, "x", x)?;
    same_dtype(OP, "weight", weight, x, "x")?;
    expect_shape(OP, "weight", weight, &[h], "the last dim of x")?;
    let x2 = as_rows(x, rows, h)?;
    let y = match bias {
        Some(b) => {
            same_dtype(OP, "bias", b, x, "x")?;
            expect_shape(OP, "bias", b, &[h], "the last dim of x")?;
            layer_norm_op(dtype, eps, true)?.apply(&[&x2, weight, b])?
        }
        None => layer_norm_op(dtype, eps, false)?.apply(&[&x2, weight])?,
    };
    reshape_back(y, x.dims())
}

/// RMSNorm as a module, like `candle_nn::RmsNorm`: a weight of shape `[H]` and eps.
#[derive(Clone, Debug)]
pub struct RmsNorm {
    weight: Tensor,
    eps: f64,
}

impl RmsNorm {
    /// A norm with this weight (`[H]`) and eps.
    pub fn new(weight: Tensor, eps: f64) -> RmsNorm {
        RmsNorm { weight, eps }
    }

    /// The weight.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The eps added to the mean square.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// [`rms_norm`] of `x` with this weight and eps.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        rms_norm(x, &self.weight, self.eps)
    }
}

impl Module for RmsNorm {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        RmsNorm::forward(self, xs)
    }
}

/// LayerNorm as a module, like `candle_nn::LayerNorm`: weight, optional bias (both
/// `[H]`) and eps.
#[derive(Clone, Debug)]
pub struct LayerNorm {
    weight: Tensor,
    bias: Option<Tensor>,
    eps: f64,
}

impl LayerNorm {
    /// A norm with weight and bias.
    pub fn new(weight: Tensor, bias: Tensor, eps: f64) -> LayerNorm {
        LayerNorm {
            weight,
            bias: Some(bias),
            eps,
        }
    }

    /// A norm with a weight and no bias.
    pub fn new_no_bias(weight: Tensor, eps: f64) -> LayerNorm {
        LayerNorm {
            weight,
            bias: None,
            eps,
        }
    }

    /// The weight.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// The bias, if any.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// The eps added to the variance.
    pub fn eps(&self) -> f64 {
        self.eps
    }

    /// [`layer_norm`] of `x` with these parameters.
    pub fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        layer_norm(x, &self.weight, self.bias.as_ref(), self.eps)
    }
}

impl Module for LayerNorm {
    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        LayerNorm::forward(self, xs)
    }
}

fn key(name: &'static str, dtype: DataType) -> Key {
    Key {
        name,
        dtype,
        size: 0,
    }
}

/// The RMSNorm op for `dtype` and `eps`.
fn rms_norm_op(dtype: DataType, eps: f64) -> Result<FusedOp> {
    use Operand::*;
    let fwd = registry::fusion(key("rms_norm", dtype), &["x", "weight", "eps"], || {
        rms_norm_fwd(dtype)
    })?;
    let names = ["grad", "x", "weight", "eps"];
    let dx = registry::fusion(key("rms_norm_bwd_dx", dtype), &names, || {
        rms_norm_bwd(dtype, false)
    })?;
    let all = registry::fusion(key("rms_norm_bwd", dtype), &names, || {
        rms_norm_bwd(dtype, true)
    })?;
    let eps = Scalar(eps.into());
    let bwd = vec![GradOutput, Input(0), Input(1), eps.clone()];
    FusedOp::new("rms_norm", fwd, vec![Input(0), Input(1), eps])?
        .with_backward(dx, bwd.clone(), vec![Some(0), None])?
        .with_backward(all, bwd, vec![Some(0), Some(1)])
}

/// The LayerNorm op for `dtype`, `eps`, with or without bias.
fn layer_norm_op(dtype: DataType, eps: f64, bias: bool) -> Result<FusedOp> {
    use Operand::*;
    let eps = Scalar(eps.into());
    let names = ["grad", "x", "weight", "eps"];
    let dx = registry::fusion(key("layer_norm_bwd_dx", dtype), &names, || {
        layer_norm_bwd(dtype, false)
    })?;
    let all = registry::fusion(key("layer_norm_bwd", dtype), &names, || {
        layer_norm_bwd(dtype, true)
    })?;
    let bwd = vec![GradOutput, Input(0), Input(1), eps.clone()];
    if bias {
        let fwd = registry::fusion(
            key("layer_norm", dtype),
            &["x", "weight", "bias", "eps"],
            || layer_norm_fwd(dtype, true),
        )?;
        FusedOp::new("layer_norm", fwd, vec![Input(0), Input(1), Input(2), eps])?
            .with_backward(dx, bwd.clone(), vec![Some(0), None, None])?
            .with_backward(all, bwd, vec![Some(0), Some(1), Some(2)])
    } else {
        let fwd = registry::fusion(
            key("layer_norm_no_bias", dtype),
            &["x", "weight", "eps"],
            || layer_norm_fwd(dtype, false),
        )?;
        FusedOp::new("layer_norm", fwd, vec![Input(0), Input(1), eps])?
            .with_backward(dx, bwd.clone(), vec![Some(0), None])?
            .with_backward(all, bwd, vec![Some(0), Some(1)])
    }
}

/// `rsqrt(mean(x^2) + eps)` per row, kept as `[rows, 1]`.
fn rms_rstd(fd: &mut FusionDefinition, x: ValId, eps: ValId) -> Result<ValId, nvfuser::Error> {
    let sq = fd.mul(x, x)?;
    let ms = fd.mean(sq, &[1], true)?;
    let v = fd.add(ms, eps)?;
    Ok(fd.rsqrt(v)?)
}

/// `(x - mean, rsqrt(var + eps))` per row (biased variance), both `[rows, 1]`-broadcast.
fn centered_rstd(
    fd: &mut FusionDefinition,
    x: ValId,
    eps: ValId,
) -> Result<(ValId, ValId), nvfuser::Error> {
    let (var, mean) = fd.var_mean(x, &[1], 0, true)?;
    let xc = fd.sub(x, mean)?;
    let v = fd.add(var, eps)?;
    Ok((xc, fd.rsqrt(v)?))
}

/// RMSNorm forward: `(x [N, H], w [H], eps) -> y [N, H]`.
fn rms_norm_fwd(dtype: DataType) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let w = fd.define_tensor(dtype, &[-1])?;
    let eps = fd.define_scalar(DataType::F64)?;
    let x = fd.cast(x, c)?;
    let w = fd.cast(w, c)?;
    let rstd = rms_rstd(&mut fd, x, eps)?;
    let y = fd.mul(x, rstd)?;
    let y = fd.mul(y, w)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

/// RMSNorm backward: `(dy, x, w, eps) -> dx` or `-> (dx, dw)`.
fn rms_norm_bwd(dtype: DataType, weight_grad: bool) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(dtype, &[-1, -1])?;
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let w = fd.define_tensor(dtype, &[-1])?;
    let eps = fd.define_scalar(DataType::F64)?;
    let dy = fd.cast(dy, c)?;
    let x = fd.cast(x, c)?;
    let w = fd.cast(w, c)?;
    let rstd = rms_rstd(&mut fd, x, eps)?;
    let xhat = fd.mul(x, rstd)?;
    let g = fd.mul(dy, w)?;
    let gx = fd.mul(g, xhat)?;
    let m = fd.mean(gx, &[1], true)?;
    let t = fd.mul(xhat, m)?;
    let t = fd.sub(g, t)?;
    let dx = fd.mul(t, rstd)?;
    let dx = fd.cast(dx, dtype)?;
    fd.add_output(dx)?;
    if weight_grad {
        let p = fd.mul(dy, xhat)?;
        let dw = fd.sum(p, &[0], false)?;
        let dw = fd.cast(dw, dtype)?;
        fd.add_output(dw)?;
    }
    Ok(fd.finish()?)
}

/// LayerNorm forward: `(x [N, H], w [H], b [H]?, eps) -> y [N, H]`.
fn layer_norm_fwd(dtype: DataType, bias: bool) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let w = fd.define_tensor(dtype, &[-1])?;
    let b = if bias {
        Some(fd.define_tensor(dtype, &[-1])?)
    } else {
        None
    };
    let eps = fd.define_scalar(DataType::F64)?;
    let x = fd.cast(x, c)?;
    let w = fd.cast(w, c)?;
    let (xc, rstd) = centered_rstd(&mut fd, x, eps)?;
    let y = fd.mul(xc, rstd)?;
    let mut y = fd.mul(y, w)?;
    if let Some(b) = b {
        let b = fd.cast(b, c)?;
        y = fd.add(y, b)?;
    }
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

/// LayerNorm backward: `(dy, x, w, eps) -> dx` or `-> (dx, dw, db)`.
fn layer_norm_bwd(dtype: DataType, param_grads: bool) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(dtype, &[-1, -1])?;
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let w = fd.define_tensor(dtype, &[-1])?;
    let eps = fd.define_scalar(DataType::F64)?;
    let dy = fd.cast(dy, c)?;
    let x = fd.cast(x, c)?;
    let w = fd.cast(w, c)?;
    let (xc, rstd) = centered_rstd(&mut fd, x, eps)?;
    let xhat = fd.mul(xc, rstd)?;
    let g = fd.mul(dy, w)?;
    let a = fd.mean(g, &[1], true)?;
    let gx = fd.mul(g, xhat)?;
    let b = fd.mean(gx, &[1], true)?;
    let t = fd.sub(g, a)?;
    let xb = fd.mul(xhat, b)?;
    let t = fd.sub(t, xb)?;
    let dx = fd.mul(t, rstd)?;
    let dx = fd.cast(dx, dtype)?;
    fd.add_output(dx)?;
    if param_grads {
        let p = fd.mul(dy, xhat)?;
        let dw = fd.sum(p, &[0], false)?;
        let dw = fd.cast(dw, dtype)?;
        let db = fd.sum(dy, &[0], false)?;
        let db = fd.cast(db, dtype)?;
        fd.add_output(dw)?;
        fd.add_output(db)?;
    }
    Ok(fd.finish()?)
}
