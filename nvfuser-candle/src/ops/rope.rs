//! Rotary position embedding, rotate-half form, forward and backward.
//!
//! For `x [.., T, D]` and tables `cos`, `sin` of shape `[T, D]` (the layout of Hugging
//! Face's Llama: the `D/2` frequencies repeated over both halves):
//! `y = x * cos + rotate_half(x) * sin`, `rotate_half(x) = cat(-x[.., D/2:], x[.., :D/2])`.
//!
//! `rotate_half` is linear with transpose `R^T(g) = cat(g[.., D/2:], -g[.., :D/2])`, so
//! `dx = dy * cos + R^T(dy * sin)`; the tables' gradients (when they track one) are
//! `dcos = sum(dy * x)` and `dsin = sum(dy * R(x))` over the leading dims.
//!
//! The slices need `D/2` as a constant, so the fusions are cached per `D`.

use candle_core::Tensor;
use nvfuser::builder::Slice;
use nvfuser::{DataType, Fusion, FusionDefinition, ValId};

use super::{compute_type, expect_shape, float_dtype, reshape_back, same_dtype};
use crate::error::{Error, Result};
use crate::op::{FusedOp, Operand};
use crate::registry::{self, Key};

/// Rotary embedding (rotate-half) of `x [.., T, D]` (rank >= 2, `D` even) with `cos` and
/// `sin` of shape `[T, D]`, all of one floating dtype. Unlike
/// `candle_nn::rotary_emb::rope`, whose tables are `[T, D/2]`, the tables here hold both
/// halves. Gradients flow to `x`, and to `cos` and `sin` when they track one.
///
/// ```
/// use candle_core::{Device, Tensor};
/// let x = Tensor::new(&[[[1f32, 2.0, 3.0, 4.0]]], &Device::Cpu)?; // [1, T = 1, D = 4]
/// let cos = Tensor::new(&[[0f32, 0.0, 0.0, 0.0]], &Device::Cpu)?;
/// let sin = Tensor::new(&[[1f32, 1.0, 1.0, 1.0]], &Device::Cpu)?;
/// let y = nvfuser_candle::rope(&x, &cos, &sin)?;
/// assert_eq!(y.to_vec3::<f32>()?, [[[-3.0, -4.0, 1.0, 2.0]]]); // rotate_half(x)
/// # Ok::<(), candle_core::Error>(())
/// ```
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> candle_core::Result<Tensor> {
    const OP: &str = "rope";
    let dtype = float_dtype(OP, "x", x)?;
    let dims = x.dims();
    let last = dims.last().copied().unwrap_or(0);
    if dims.len() < 2 || !last.is_multiple_of(2) || last == 0 {
        return Err(Error::Shape {
            op: OP.into(),
            arg: "x".into(),
            expected: "rank 2 or more, [.., T, D] with an even D >= 2".into(),
            found: dims.to_vec(),
        }
        .into());
    }
    let (t, d) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    let b: usize = dims[..dims.len() - 2].iter().product();
    for (name, table) in [("cos", cos), ("sin", sin)] {
        same_dtype(OP, name, table, x, "x")?;
        expect_shape(OP, name, table, &[t, d], "[T, D] of x's last two dims")?;
    }
    let x3 = if x.rank() == 3 {
        x.clone()
    } else {
        x.reshape((b, t, d))?
    };
    let y = rope_op(dtype, d)?.apply(&[&x3, cos, sin])?;
    reshape_back(y, dims)
}

fn rope_op(dtype: DataType, d: usize) -> Result<FusedOp> {
    use Operand::*;
    let key = |name| Key {
        name,
        dtype,
        size: d,
    };
    let fwd = registry::fusion(key("rope"), &["x", "cos", "sin"], || forward(dtype, d))?;
    let dx = registry::fusion(key("rope_bwd_dx"), &["grad", "cos", "sin"], || {
        backward_dx(dtype, d)
    })?;
    let all = registry::fusion(key("rope_bwd"), &["grad", "x", "cos", "sin"], || {
        backward_all(dtype, d)
    })?;
    FusedOp::new("rope", fwd, vec![Input(0), Input(1), Input(2)])?
        .with_backward(
            dx,
            vec![GradOutput, Input(1), Input(2)],
            vec![Some(0), None, None],
        )?
        .with_backward(
            all,
            vec![GradOutput, Input(0), Input(1), Input(2)],
            vec![Some(0), Some(1), Some(2)],
        )
}

/// The two halves of the last dim of a rank-3 `v`.
fn halves(fd: &mut FusionDefinition, v: ValId, d: i64) -> Result<(ValId, ValId), nvfuser::Error> {
    let h = d / 2;
    let lo = fd.slice(v, &[Slice::all(), Slice::all(), Slice::range(0, h)])?;
    let hi = fd.slice(v, &[Slice::all(), Slice::all(), Slice::range(h, d)])?;
    Ok((lo, hi))
}

/// `R(v) = cat(-hi, lo)`.
fn rotate_half(fd: &mut FusionDefinition, v: ValId, d: i64) -> Result<ValId, nvfuser::Error> {
    let (lo, hi) = halves(fd, v, d)?;
    let nhi = fd.neg(hi)?;
    Ok(fd.cat(&[nhi, lo], 2)?)
}

/// `R^T(g) = cat(hi, -lo)`.
fn rotate_half_t(fd: &mut FusionDefinition, g: ValId, d: i64) -> Result<ValId, nvfuser::Error> {
    let (lo, hi) = halves(fd, g, d)?;
    let nlo = fd.neg(lo)?;
    Ok(fd.cat(&[hi, nlo], 2)?)
}

/// `(x [B, T, D], cos [T, D], sin [T, D]) -> y [B, T, D]`.
fn forward(dtype: DataType, d: usize) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let d = d as i64;
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1, -1, d])?;
    let cos = fd.define_tensor(dtype, &[-1, d])?;
    let sin = fd.define_tensor(dtype, &[-1, d])?;
    let x = fd.cast(x, c)?;
    let cos = fd.cast(cos, c)?;
    let sin = fd.cast(sin, c)?;
    let r = rotate_half(&mut fd, x, d)?;
    let a = fd.mul(x, cos)?;
    let b = fd.mul(r, sin)?;
    let y = fd.add(a, b)?;
    let y = fd.cast(y, dtype)?;
    fd.add_output(y)?;
    Ok(fd.finish()?)
}

/// `dx = dy * cos + R^T(dy * sin)`, all in the compute type.
fn dx_of(
    fd: &mut FusionDefinition,
    dy: ValId,
    cos: ValId,
    sin: ValId,
    d: i64,
) -> Result<ValId, nvfuser::Error> {
    let a = fd.mul(dy, cos)?;
    let g = fd.mul(dy, sin)?;
    let b = rotate_half_t(fd, g, d)?;
    Ok(fd.add(a, b)?)
}

/// `(dy, cos, sin) -> dx`.
fn backward_dx(dtype: DataType, d: usize) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let d = d as i64;
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(dtype, &[-1, -1, d])?;
    let cos = fd.define_tensor(dtype, &[-1, d])?;
    let sin = fd.define_tensor(dtype, &[-1, d])?;
    let dy = fd.cast(dy, c)?;
    let cos = fd.cast(cos, c)?;
    let sin = fd.cast(sin, c)?;
    let dx = dx_of(&mut fd, dy, cos, sin, d)?;
    let dx = fd.cast(dx, dtype)?;
    fd.add_output(dx)?;
    Ok(fd.finish()?)
}

/// `(dy, x, cos, sin) -> (dx, dcos, dsin)`.
fn backward_all(dtype: DataType, d: usize) -> Result<Fusion, nvfuser::Error> {
    let c = compute_type(dtype);
    let d = d as i64;
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(dtype, &[-1, -1, d])?;
    let x = fd.define_tensor(dtype, &[-1, -1, d])?;
    let cos = fd.define_tensor(dtype, &[-1, d])?;
    let sin = fd.define_tensor(dtype, &[-1, d])?;
    let dy = fd.cast(dy, c)?;
    let x = fd.cast(x, c)?;
    let cos = fd.cast(cos, c)?;
    let sin = fd.cast(sin, c)?;
    let dx = dx_of(&mut fd, dy, cos, sin, d)?;
    let dx = fd.cast(dx, dtype)?;
    let p = fd.mul(dy, x)?;
    let dcos = fd.sum(p, &[0], false)?;
    let dcos = fd.cast(dcos, dtype)?;
    let r = rotate_half(&mut fd, x, d)?;
    let q = fd.mul(dy, r)?;
    let dsin = fd.sum(q, &[0], false)?;
    let dsin = fd.cast(dsin, dtype)?;
    fd.add_output(dx)?;
    fd.add_output(dcos)?;
    fd.add_output(dsin)?;
    Ok(fd.finish()?)
}
