//! The corpus of fusions shared by the printer and DSL tests, built with the run-time
//! builder (so they contain what the builder inserts: half-precision casts around
//! reductions, keepdim broadcasts, rank-extension broadcasts).
#![allow(dead_code)]

use nvfuser_core::builder::{Contiguity, Slice, TensorSpec};
use nvfuser_core::prelude::*;

/// LayerNorm over the last dim, bf16 in and out, f32 math (as in DESIGN.md).
pub fn layer_norm() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, 4096])?;
    let w = fd.define_tensor(DataType::BF16, &[4096])?;
    let b = fd.define_tensor(DataType::BF16, &[4096])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let x = fd.cast(x, DataType::F32)?;
    let mean = fd.mean(x, &[1], true)?;
    let xc = fd.sub(x, mean)?;
    let sq = fd.mul(xc, xc)?;
    let var = fd.mean(sq, &[1], true)?;
    let ve = fd.add(var, eps)?;
    let r = fd.rsqrt(ve)?;
    let y = fd.mul(xc, r)?;
    let w = fd.cast(w, DataType::F32)?;
    let y = fd.mul(y, w)?;
    let b = fd.cast(b, DataType::F32)?;
    let y = fd.add(y, b)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    fd.finish()
}

/// RMSNorm, bf16 in and out, with the f32 weight applied after the norm.
pub fn rms_norm() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, 4096])?;
    let w = fd.define_tensor(DataType::F32, &[4096])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let xf = fd.cast(x, DataType::F32)?;
    let sq = fd.mul(xf, xf)?;
    let ms = fd.mean(sq, &[-1], true)?;
    let ms = fd.add(ms, eps)?;
    let r = fd.rsqrt(ms)?;
    let y = fd.mul(xf, r)?;
    let y = fd.mul(y, w)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    fd.finish()
}

/// Numerically stable softmax over the last dim of an f16 tensor.
pub fn softmax() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F16, &[-1, -1])?;
    let x = fd.cast(x, DataType::F32)?;
    let m = fd.max(x, &[-1], true)?;
    let z = fd.sub(x, m)?;
    let e = fd.exp(z)?;
    let s = fd.sum(e, &[-1], true)?;
    let y = fd.div(e, s)?;
    let y = fd.cast(y, DataType::F16)?;
    fd.add_output(y)?;
    fd.finish()
}

/// GELU, tanh approximation, written out with constants.
pub fn gelu_tanh() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F16, &[-1, -1])?;
    let x = fd.cast(x, DataType::F32)?;
    let half = fd.constant(0.5);
    let one = fd.constant(1.0);
    let k = fd.constant_of(0.7978845608028654, DataType::F32);
    let c = fd.constant(0.044715);
    let x3 = fd.mul(x, x)?;
    let x3 = fd.mul(x3, x)?;
    let inner = fd.mul(x3, c)?;
    let inner = fd.add(x, inner)?;
    let inner = fd.mul(inner, k)?;
    let t = fd.tanh(inner)?;
    let t = fd.add(t, one)?;
    let y = fd.mul(x, half)?;
    let y = fd.mul(y, t)?;
    let y = fd.cast(y, DataType::F16)?;
    fd.add_output(y)?;
    fd.finish()
}

/// SiLU(a) * b, the gated MLP activation, bf16.
pub fn silu_mul() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let b = fd.define_tensor(DataType::BF16, &[-1, -1])?;
    let a = fd.cast(a, DataType::F32)?;
    let b = fd.cast(b, DataType::F32)?;
    let s = fd.silu(a)?;
    let y = fd.mul(s, b)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    fd.finish()
}

/// Sum and mean reductions with and without keepdim, an integer sum, var_mean and
/// welford: several outputs.
pub fn reductions() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1, -1])?;
    let i = fd.define_tensor(DataType::I32, &[-1, 8])?;
    let s = fd.sum(x, &[0, 2], true)?;
    let m = fd.mean(x, &[-1], false)?;
    let is = fd.sum(i, &[1], false)?;
    let xf = fd.cast(x, DataType::F32)?;
    let (var, mean) = fd.var_mean(xf, &[2], 0, true)?;
    let (wm, wv, wn) = fd.welford(xf, &[1])?;
    let p = fd.prod(xf, &[0], false)?;
    let mx = fd.min(x, &[1], false)?;
    let v = fd.var(x, &[1], 1, false)?;
    for o in [s, m, is, var, mean, wm, wv, wn, p, mx, v] {
        fd.add_output(o)?;
    }
    fd.finish()
}

/// Broadcast flavours: rank extension, explicit masks, broadcast_in_dim, expand to a
/// size taken from another tensor, squeeze, static sizes.
pub fn broadcasts() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 1, 64])?;
    let v = fd.define_tensor(DataType::F32, &[64])?;
    let c = fd.define_tensor(DataType::F32, &[-1])?;
    let y = fd.add(x, v)?;
    let n = fd.size(x, 0)?;
    let cb = fd.broadcast_in_dim(c, &[Size::Val(n), Size::Const(8), Size::Const(64)], &[0])?;
    let xs = fd.squeeze(x, &[1])?;
    let xs = fd.unsqueeze(xs, -1)?;
    let e = fd.expand(xs, &[Size::Const(-1), Size::Const(-1), Size::Const(3)])?;
    let y2 = fd.mul(y, cb)?;
    fd.add_output(y2)?;
    fd.add_output(e)?;
    fd.finish()
}

/// Casts between every kind of type, on tensors and scalars.
pub fn casts() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::I32, &[-1])?;
    let s = fd.define_scalar(DataType::F64)?;
    let h = fd.cast(x, DataType::F16)?;
    let b = fd.cast(h, DataType::BF16)?;
    let d = fd.cast(b, DataType::F64)?;
    let s32 = fd.cast(s, DataType::F32)?;
    let y = fd.mul(d, s32)?;
    let z = fd.cast(y, DataType::Bool)?;
    let l = fd.cast(z, DataType::I64)?;
    fd.add_output(z)?;
    fd.add_output(l)?;
    fd.finish()
}

/// Slice, pad and cat (the resize family), with scalar and negative bounds and steps.
pub fn slice_pad_cat() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 16])?;
    let k = fd.define_scalar(DataType::I64)?;
    let a = fd.slice(x, &[Slice::all(), Slice::range(0, 8)])?;
    let b = fd.slice(x, &[Slice::all(), Slice::range(8, i64::MAX)])?;
    let zero = fd.constant(0.0);
    let a = fd.pad(a, &[(0, 0), (1, 2)], zero)?;
    let b = fd.pad(b, &[(0, 0), (2, 1)], zero)?;
    let c = fd.cat(&[a, b], 1)?;
    let d = fd.slice(
        c,
        &[
            Slice::step(Size::Val(k), -1, 2),
            Slice::step(0, i64::MAX, 3),
        ],
    )?;
    fd.add_output(c)?;
    fd.add_output(d)?;
    fd.finish()
}

/// Indexing: gather, take_along_axis, index_select and select.
pub fn gather() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 8])?;
    let idx = fd.define_tensor(DataType::I64, &[-1, 4])?;
    let rows = fd.define_tensor(DataType::I32, &[-1])?;
    let g = fd.gather(x, 1, idx)?;
    let t = fd.take_along_axis(x, idx, 1)?;
    let r = fd.index_select(x, 0, rows)?;
    let s = fd.select(r, 1, Size::Const(-1))?;
    let y = fd.add(g, t)?;
    fd.add_output(y)?;
    fd.add_output(s)?;
    fd.finish()
}

/// Dropout with a uniform random mask.
pub fn dropout() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let p = fd.define_scalar(DataType::F32)?;
    let seed = fd.define_scalar(DataType::I64)?;
    let offset = fd.define_scalar(DataType::I64)?;
    let n0 = fd.size(x, 0)?;
    let n1 = fd.size(x, 1)?;
    let lo = fd.constant(0.0);
    let hi = fd.constant(1.0);
    let u = fd.uniform(
        &[Size::Val(n0), Size::Val(n1)],
        lo,
        hi,
        seed,
        offset,
        DataType::F32,
    )?;
    let keep = fd.ge(u, p)?;
    let one = fd.constant(1.0);
    let q = fd.sub(one, p)?;
    let scale = fd.reciprocal(q)?;
    let y = fd.mul(x, scale)?;
    let zero = fd.constant(0.0);
    let y = fd.where_(keep, y, zero)?;
    fd.add_output(y)?;
    fd.add_output(keep)?;
    fd.finish()
}

/// Non-default input layouts, an in-place output, and creation ops.
pub fn layouts_and_inplace() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    // A transposed view: [N, H] stored column-major, not contiguous in its outer dim.
    let t = fd.define_tensor_spec(
        TensorSpec::new(DataType::F32, &[-1, -1])
            .contiguity(Contiguity::PerDim(vec![Some(false), Some(true)]))
            .stride_order(&[0, 1]),
    )?;
    // An expanded dim (stride 0, size 8), derived from strides.
    let e = fd.define_tensor_from_strides(DataType::F32, &[8, 6], &[0, 1], false)?;
    // Static sizes, size-1 dims included.
    let s = fd.define_tensor_from_strides(DataType::F32, &[6, 1], &[1, 1], true)?;
    let acc = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let n = fd.define_scalar(DataType::I64)?;
    let y = fd.add(t, acc)?;
    fd.add_output_alias(y, acc)?;
    let p = fd.permute(t, &[1, 0])?;
    fd.add_output(p)?;
    let es = fd.squeeze(s, &[1])?;
    let z = fd.add(e, es)?;
    fd.add_output(z)?;
    let r = fd.reshape(z, &[Size::Const(-1)])?;
    let seven = fd.constant(7i64);
    let f = fd.full(&[Size::Val(n), Size::Const(4)], seven, DataType::I32)?;
    fd.add_output(f)?;
    let start = fd.constant(0i64);
    let step = fd.constant(2i64);
    let io = fd.iota(Size::Val(n), start, step, DataType::I64)?;
    fd.add_output(io)?;
    let r = fd.segment_set(r)?;
    let r = fd.set(r)?;
    fd.add_output(r)?;
    fd.finish()
}

/// Scalar arithmetic, shared constants, typed constants and every operator.
pub fn scalars_and_operators() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::I64, &[-1])?;
    let a = fd.define_scalar(DataType::I64)?;
    let f = fd.define_tensor(DataType::F32, &[-1])?;
    let two = fd.constant(2i64);
    let s = fd.mul(a, two)?;
    let s = fd.add(s, two)?;
    let y = fd.add(x, s)?;
    let y = fd.shift_left(y, two)?;
    let y = fd.shift_right(y, a)?;
    let y = fd.bitwise_xor(y, x)?;
    let y = fd.bitwise_and(y, x)?;
    let y = fd.bitwise_or(y, x)?;
    let y = fd.fmod(y, x)?;
    let y = fd.remainder(y, x)?;
    let nb = fd.bitwise_not(y)?;
    let c = fd.lt(nb, x)?;
    let d = fd.ne(y, x)?;
    let c = fd.logical_and(c, d)?;
    let c = fd.logical_not(c)?;
    let m3 = fd.constant_of(-3, DataType::I32);
    let q = fd.le(x, m3)?;
    let c = fd.logical_or(c, q)?;
    let h = fd.constant_of(0.1, DataType::F32);
    let g = fd.mul(f, h)?;
    let g = fd.neg(g)?;
    let nan = fd.constant(f64::NAN);
    let g = fd.maximum(g, nan)?;
    let g = fd.pow(g, h)?;
    let lerp_w = fd.constant_of(0.25, DataType::BF16);
    let g = fd.lerp(g, f, lerp_w)?;
    let lo = fd.constant(-1.5);
    let hi = fd.constant(f64::INFINITY);
    let g = fd.clamp(g, lo, hi)?;
    let t = fd.constant(true);
    let c = fd.logical_and(c, t)?;
    let g = fd.where_(c, g, f)?;
    let ng = fd.neg(two)?;
    let g = fd.add(g, ng)?;
    fd.add_output(g)?;
    fd.finish()
}

/// The scans: a half cumsum (through f32), a bool cumprod (in i64), a cummax of a
/// reduction's output, and a cummin along an expanded dim.
pub fn scans() -> Result<Fusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F16, &[-1, 8])?;
    let b = fd.define_tensor(DataType::Bool, &[-1])?;
    let n = fd.define_scalar(DataType::I64)?;
    let s = fd.cumsum(x, -1)?;
    let p = fd.cumprod(b, 0)?;
    let m = fd.min(x, &[1], false)?;
    let cm = fd.cummax(m, 0)?;
    let e = fd.broadcast(s, &[true, false, false])?;
    let e = fd.expand(e, &[Size::Val(n), Size::Const(-1), Size::Const(-1)])?;
    let cn = fd.cummin(e, -3)?;
    for o in [s, p, cm, cn] {
        fd.add_output(o)?;
    }
    fd.finish()
}

/// A corpus entry: its name and how to build it.
type Entry = (&'static str, fn() -> Result<Fusion>);

/// Every corpus entry by name.
pub fn corpus() -> Vec<(&'static str, Fusion)> {
    let entries: [Entry; 14] = [
        ("layer_norm", layer_norm),
        ("rms_norm", rms_norm),
        ("softmax", softmax),
        ("gelu_tanh", gelu_tanh),
        ("silu_mul", silu_mul),
        ("reductions", reductions),
        ("broadcasts", broadcasts),
        ("casts", casts),
        ("slice_pad_cat", slice_pad_cat),
        ("gather", gather),
        ("dropout", dropout),
        ("layouts_and_inplace", layouts_and_inplace),
        ("scalars_and_operators", scalars_and_operators),
        ("scans", scans),
    ];
    entries
        .into_iter()
        .map(|(name, build)| {
            (
                name,
                build().unwrap_or_else(|e| panic!("corpus entry {name}: {e}")),
            )
        })
        .collect()
}
