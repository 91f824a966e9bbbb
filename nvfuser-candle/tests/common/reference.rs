//! The unfused references, written with candle-core ops only: the same math as the fused
//! ops, in f32 for f16/bf16 inputs (f64 for f64), the result cast back to the input
//! dtype. Candle's autograd gives their gradients.

use candle_core::{DType, Result, Tensor, D};

/// The type the references compute in for `dtype`.
fn compute(dtype: DType) -> DType {
    if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

fn up(t: &Tensor) -> Result<Tensor> {
    t.to_dtype(compute(t.dtype()))
}

pub fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Result<Tensor> {
    let xf = up(x)?;
    let ms = xf.sqr()?.mean_keepdim(D::Minus1)?;
    let y = xf.broadcast_div(&(ms + eps)?.sqrt()?)?;
    y.broadcast_mul(&up(w)?)?.to_dtype(x.dtype())
}

pub fn layer_norm(x: &Tensor, w: &Tensor, b: Option<&Tensor>, eps: f64) -> Result<Tensor> {
    let xf = up(x)?;
    let mean = xf.mean_keepdim(D::Minus1)?;
    let xc = xf.broadcast_sub(&mean)?;
    let var = xc.sqr()?.mean_keepdim(D::Minus1)?;
    let mut y = xc
        .broadcast_div(&(var + eps)?.sqrt()?)?
        .broadcast_mul(&up(w)?)?;
    if let Some(b) = b {
        y = y.broadcast_add(&up(b)?)?;
    }
    y.to_dtype(x.dtype())
}

/// `x - max(x)` over the last dim; the max is a constant for the gradient (it cancels).
fn shifted(xf: &Tensor) -> Result<Tensor> {
    let m = xf.max_keepdim(D::Minus1)?.detach();
    xf.broadcast_sub(&m)
}

pub fn softmax(x: &Tensor) -> Result<Tensor> {
    let e = shifted(&up(x)?)?.exp()?;
    e.broadcast_div(&e.sum_keepdim(D::Minus1)?)?
        .to_dtype(x.dtype())
}

pub fn log_softmax(x: &Tensor) -> Result<Tensor> {
    let s = shifted(&up(x)?)?;
    let lse = s.exp()?.sum_keepdim(D::Minus1)?.log()?;
    s.broadcast_sub(&lse)?.to_dtype(x.dtype())
}

pub fn rotate_half(x: &Tensor) -> Result<Tensor> {
    let d = x.dim(D::Minus1)?;
    let lo = x.narrow(D::Minus1, 0, d / 2)?;
    let hi = x.narrow(D::Minus1, d / 2, d / 2)?;
    Tensor::cat(&[&hi.neg()?, &lo], D::Minus1)
}

pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let xf = up(x)?;
    let a = xf.broadcast_mul(&up(cos)?)?;
    let b = rotate_half(&xf)?.broadcast_mul(&up(sin)?)?;
    (a + b)?.to_dtype(x.dtype())
}

pub fn silu_mul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    (up(a)?.silu()? * up(b)?)?.to_dtype(a.dtype())
}

pub fn silu_mul_packed(x: &Tensor) -> Result<Tensor> {
    let h = x.dim(D::Minus1)? / 2;
    let xf = up(x)?;
    let gate = xf.narrow(D::Minus1, 0, h)?;
    let upp = xf.narrow(D::Minus1, h, h)?;
    (gate.silu()? * upp)?.to_dtype(x.dtype())
}

/// GELU, tanh approximation, from elementary ops: `x/2 * (1 + tanh(k (x + 0.044715 x^3)))`.
/// (Candle's own `Tensor::gelu` has the same forward, but its backward uses constants
/// rounded to six digits, about 1e-6 relative: `gelu_builtin` below.)
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    let xf = up(x)?;
    let k = (2.0 / std::f64::consts::PI).sqrt();
    let inner = ((xf.powf(3.0)? * 0.044715)? + &xf)?;
    let t = (inner * k)?.tanh()?;
    ((xf * 0.5)? * (t + 1.0)?)?.to_dtype(x.dtype())
}

/// GELU, exact, from elementary ops: `x/2 * (1 + erf(x / sqrt 2))`.
pub fn gelu_erf(x: &Tensor) -> Result<Tensor> {
    let xf = up(x)?;
    let e = (&xf * std::f64::consts::FRAC_1_SQRT_2)?.erf()?;
    ((xf * 0.5)? * (e + 1.0)?)?.to_dtype(x.dtype())
}

/// Candle's own `Tensor::gelu` / `Tensor::gelu_erf`.
pub fn gelu_builtin(x: &Tensor, erf: bool) -> Result<Tensor> {
    let xf = up(x)?;
    let y = if erf { xf.gelu_erf()? } else { xf.gelu()? };
    y.to_dtype(x.dtype())
}

/// Per-row cross-entropy of `[.., V]` logits and `[..]` labels, in f32 (f64 for f64).
pub fn cross_entropy(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    let v = logits.dim(D::Minus1)?;
    let lead = logits.dims()[..logits.rank() - 1].to_vec();
    let xf = up(&logits.reshape(((), v))?)?;
    let s = shifted(&xf)?;
    let lse = s.exp()?.sum_keepdim(D::Minus1)?.log()?;
    let idx = labels.flatten_all()?.to_dtype(DType::U32)?.unsqueeze(1)?;
    let picked = s.gather(&idx, 1)?;
    (lse - picked)?.squeeze(1)?.reshape(lead)
}
