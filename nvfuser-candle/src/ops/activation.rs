//! Activations: SiLU-mul (SwiGLU's elementwise half) and GELU, forward and backward.
//!
//! - `silu_mul(a, b) = silu(a) * b`, `silu(a) = a * sigmoid(a)`; with `s = sigmoid(a)`:
//!   `da = dy * b * s * (1 + a * (1 - s))`, `db = dy * silu(a)`. The packed form takes
//!   one `[.., 2H]` tensor and multiplies `silu` of its first half by its second half;
//!   its gradient is the two halves' gradients side by side.
//! - `gelu` is the tanh approximation (candle's `Tensor::gelu`, PyTorch's
//!   `approximate="tanh"`): `y = x/2 * (1 + t)`, `t = tanh(k * (x + 0.044715 x^3))`,
//!   `k = sqrt(2/pi)`; `dy/dx = (1 + t)/2 + x/2 * (1 - t^2) * k * (1 + 3 * 0.044715 x^2)`.
//! - `gelu_erf` is the exact form (candle's `Tensor::gelu_erf`, PyTorch's default):
//!   `y = x * Phi(x)`; `dy/dx = Phi(x) + x * exp(-x^2/2) / sqrt(2 pi)`.

use candle_core::Tensor;
use nvfuser::builder::Slice;
use nvfuser::{DataType, Fusion, FusionDefinition, ValId};

use super::{
    as_rows, compute_type, constant, expect_shape, float_dtype, reshape_back, rows_and_last,
    same_dtype,
};
use crate::error::{Error, Result};
use crate::op::{FusedOp, Operand};
use crate::registry::{self, Key};

/// `silu(a) * b` elementwise, for `a` and `b` of one shape (any rank >= 1) and one
/// floating dtype. Gradients flow to both.
///
/// ```
/// use candle_core::{Device, Tensor};
/// let a = Tensor::new(&[[0f32, 1.0]], &Device::Cpu)?;
/// let b = Tensor::new(&[[5f32, 2.0]], &Device::Cpu)?;
/// let y = nvfuser_candle::silu_mul(&a, &b)?.to_vec2::<f32>()?;
/// assert_eq!(y[0][0], 0.0);
/// assert!((y[0][1] - 2.0 / (1.0 + (-1f32).exp())).abs() < 1e-6);
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn silu_mul(a: &Tensor, b: &Tensor) -> candle_core::Result<Tensor> {
    const OP: &str = "silu_mul";
    let dtype = float_dtype(OP, "a", a)?;
    let (rows, h) = rows_and_last(OP, "a", a)?;
    same_dtype(OP, "b", b, a, "a")?;
    expect_shape(OP, "b", b, a.dims(), "the shape of a")?;
    let fwd = registry::fusion(key("silu_mul", dtype, 0), &["a", "b"], || {
        silu_mul_fwd(dtype)
    })?;
    let bwd = registry::fusion(key("silu_mul_bwd", dtype, 0), &["grad", "a", "b"], || {
        silu_mul_bwd(dtype)
    })?;
    use Operand::*;
    let op = FusedOp::new(OP, fwd, vec![Input(0), Input(1)])?.with_backward(
        bwd,
        vec![GradOutput, Input(0), Input(1)],
        vec![Some(0), Some(1)],
    )?;
    let y = op.apply(&[&as_rows(a, rows, h)?, &as_rows(b, rows, h)?])?;
    reshape_back(y, a.dims())
}

/// `silu(x[.., :H]) * x[.., H:]` for `x [.., 2H]` (any rank >= 1, floating dtype): the
/// gate and up projections in one tensor, as a fused gate-up matmul gives them. The
/// result is `[.., H]`. Gradients flow to `x`.
pub fn silu_mul_packed(x: &Tensor) -> candle_core::Result<Tensor> {
    const OP: &str = "silu_mul_packed";
    let dtype = float_dtype(OP, "x", x)?;
    let (rows, h2) = rows_and_last(OP, "x", x)?;
    if !h2.is_multiple_of(2) || h2 == 0 {
        return Err(Error::Shape {
            op: OP.into(),
            arg: "x".into(),
            expected: "a last dim 2H with H >= 1 (the gate and up halves)".into(),
            found: x.dims().to_vec(),
        }
        .into());
    }
    let h = h2 / 2;
    let fwd = registry::fusion(key("silu_mul_packed", dtype, h), &["x"], || {
        packed_fwd(dtype, h)
    })?;
    let bwd = registry::fusion(key("silu_mul_packed_bwd", dtype, h), &["grad", "x"], || {
        packed_bwd(dtype, h)
    })?;
    use Operand::*;
    let op = FusedOp::new(OP, fwd, vec![Input(0)])?.with_backward(
        bwd,
        vec![GradOutput, Input(0)],
        vec![Some(0)],
    )?;
    let y = op.apply(&[&as_rows(x, rows, h2)?])?;
    let mut dims = x.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        *last = h;
    }
    reshape_back(y, &dims)
}

/// GELU, tanh approximation (as candle's `Tensor::gelu`), elementwise on `x` of any
/// shape and floating dtype. Gradients flow to `x`.
pub fn gelu(x: &Tensor) -> candle_core::Result<Tensor> {
    elementwise("gelu", x, false)
}

/// GELU, exact (erf) form (as candle's `Tensor::gelu_erf`), elementwise on `x` of any
/// shape and floating dtype. Gradients flow to `x`.
pub fn gelu_erf(x: &Tensor) -> candle_core::Result<Tensor> {
    elementwise("gelu_erf", x, true)
}

fn key(name: &'static str, dtype: DataType, size: usize) -> Key {
    Key { name, dtype, size }
}

fn elementwise(op: &'static str, x: &Tensor, erf: bool) -> candle_core::Result<Tensor> {
    let dtype = float_dtype(op, "x", x)?;
    let (rows, h) = if x.rank() == 0 {
        (1, 1)
    } else {
        rows_and_last(op, "x", x)?
    };
    let (f, b) = if erf {
        ("gelu_erf", "gelu_erf_bwd")
    } else {
        ("gelu", "gelu_bwd")
    };
    let fwd = registry::fusion(key(f, dtype, 0), &["x"], || gelu_fwd(dtype, erf))?;
    let bwd = registry::fusion(key(b, dtype, 0), &["grad", "x"], || gelu_bwd(dtype, erf))?;
    use Operand::*;
    let fused = FusedOp::new(op, fwd, vec![Input(0)])?.with_backward(
        bwd,
        vec![GradOutput, Input(0)],
        vec![Some(0)],
    )?;
    let y = fused.apply(&[&as_rows(x, rows, h)?])?;
    reshape_back(y, x.dims())
}

/// `(silu(a) * b, da, db)` pieces: returns `(s = sigmoid(a), silu(a))`.
fn sigmoid_silu(fd: &mut FusionDefinition, a: ValId) -> Result<(ValId, ValId), nvfuser::Error> {
    let s = fd.sigmoid(a)?;
    let silu = fd.mul(a, s)?;
    Ok((s, silu))
}

/// `dsilu(a)/da = s * (1 + a * (1 - s))`.
fn silu_grad(
    fd: &mut FusionDefinition,
    a: ValId,
    s: ValId,
    c: DataType,
) -> Result<ValId, nvfuser::Error> {
    let one = constant(fd, 1.0, c);
    let t = fd.sub(one, s)?;
    let t = fd.mul(a, t)?;
    let t = fd.add(t, one)?;
    Ok(fd.mul(s, t)?)
}

fn silu_mul_fwd(dtype: DataType) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(dtype, &[-1, -1])?;
    let b = fd.define_tensor(dtype, &[-1, -1])?;
    let a = fd.cast(a, c)?;
    let b = fd.cast(b, c)?;
    let s = fd.silu(a)?;
    let y = fd.mul(s, b)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

/// `(da, db)` of `silu(a) * b` for the output gradient `dy`, in the compute type.
fn silu_mul_grads(
    fd: &mut FusionDefinition,
    dy: ValId,
    a: ValId,
    b: ValId,
    c: DataType,
) -> Result<(ValId, ValId), nvfuser::Error> {
    let (s, silu) = sigmoid_silu(fd, a)?;
    let g = silu_grad(fd, a, s, c)?;
    let da = fd.mul(dy, b)?;
    let da = fd.mul(da, g)?;
    let db = fd.mul(dy, silu)?;
    Ok((da, db))
}

fn silu_mul_bwd(dtype: DataType) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(dtype, &[-1, -1])?;
    let a = fd.define_tensor(dtype, &[-1, -1])?;
    let b = fd.define_tensor(dtype, &[-1, -1])?;
    let dy = fd.cast(dy, c)?;
    let a = fd.cast(a, c)?;
    let b = fd.cast(b, c)?;
    let (da, db) = silu_mul_grads(&mut fd, dy, a, b, c)?;
    let da = fd.cast(da, dtype)?;
    let db = fd.cast(db, dtype)?;
    fd.add_output(da)?;
    fd.add_output(db)?;
    Ok(fd.finish()?)
}

/// The gate and up halves of a `[N, 2H]` input, in the compute type.
fn packed_halves(
    fd: &mut FusionDefinition,
    x: ValId,
    h: i64,
    c: DataType,
) -> Result<(ValId, ValId), nvfuser::Error> {
    let gate = fd.slice(x, &[Slice::all(), Slice::range(0, h)])?;
    let up = fd.slice(x, &[Slice::all(), Slice::range(h, 2 * h)])?;
    Ok((fd.cast(gate, c)?, fd.cast(up, c)?))
}

fn packed_fwd(dtype: DataType, h: usize) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let h = h as i64;
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, 2 * h])?;
    let (gate, up) = packed_halves(&mut fd, x, h, c)?;
    let s = fd.silu(gate)?;
    let y = fd.mul(s, up)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

fn packed_bwd(dtype: DataType, h: usize) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let h = h as i64;
    let mut fd = FusionDefinition::new();
    // `[N, H]`, declared symbolic: a static 1 would declare a broadcast dim.
    let dy = fd.define_tensor(dtype, &[-1, -1])?;
    let x = fd.define_tensor(dtype, &[-1, 2 * h])?;
    let dy = fd.cast(dy, c)?;
    let (gate, up) = packed_halves(&mut fd, x, h, c)?;
    let (dgate, dup) = silu_mul_grads(&mut fd, dy, gate, up, c)?;
    let dx = fd.cat(&[dgate, dup], 1)?;
    let dx = fd.cast(dx, dtype)?;
    fd.add_output(dx)?;
    Ok(fd.finish()?)
}

fn gelu_fwd(dtype: DataType, erf: bool) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let x = fd.cast(x, c)?;
    let y = if erf { fd.gelu(x)? } else { fd.gelu_tanh(x)? };
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

/// `sqrt(2 / pi)`.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// `1 / sqrt(2 pi)`.
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

fn gelu_bwd(dtype: DataType, erf: bool) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(dtype, &[-1, -1])?;
    let x = fd.define_tensor(dtype, &[-1, -1])?;
    let dy = fd.cast(dy, c)?;
    let x = fd.cast(x, c)?;
    let half = constant(&mut fd, 0.5, c);
    let one = constant(&mut fd, 1.0, c);
    let x2 = fd.mul(x, x)?;
    let d = if erf {
        // Phi(x) + x * exp(-x^2 / 2) / sqrt(2 pi)
        let r = constant(&mut fd, std::f64::consts::FRAC_1_SQRT_2, c);
        let xr = fd.mul(x, r)?;
        let e = fd.erf(xr)?;
        let cdf = fd.add(e, one)?;
        let cdf = fd.mul(cdf, half)?;
        let m = constant(&mut fd, -0.5, c);
        let q = fd.mul(x2, m)?;
        let pdf = fd.exp(q)?;
        let k = constant(&mut fd, INV_SQRT_2PI, c);
        let pdf = fd.mul(pdf, k)?;
        let xp = fd.mul(x, pdf)?;
        fd.add(cdf, xp)?
    } else {
        // (1 + t)/2 + x/2 * (1 - t^2) * k * (1 + 3 a x^2), t = tanh(k (x + a x^3))
        let a = constant(&mut fd, 0.044715, c);
        let k = constant(&mut fd, SQRT_2_OVER_PI, c);
        let three_a = constant(&mut fd, 3.0 * 0.044715, c);
        let x3 = fd.mul(x2, x)?;
        let ax3 = fd.mul(x3, a)?;
        let inner = fd.add(x, ax3)?;
        let inner = fd.mul(inner, k)?;
        let t = fd.tanh(inner)?;
        let left = fd.add(t, one)?;
        let left = fd.mul(left, half)?;
        let t2 = fd.mul(t, t)?;
        let sech2 = fd.sub(one, t2)?;
        let poly = fd.mul(x2, three_a)?;
        let poly = fd.add(poly, one)?;
        let right = fd.mul(x, half)?;
        let right = fd.mul(right, sech2)?;
        let right = fd.mul(right, k)?;
        let right = fd.mul(right, poly)?;
        fd.add(left, right)?
    };
    let dx = fd.mul(dy, d)?;
    let dx = fd.cast(dx, dtype)?;
    fd.add_output(dx)?;
    Ok(fd.finish()?)
}
