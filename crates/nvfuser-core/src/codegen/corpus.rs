//! The manual-schedule corpus: small fusions scheduled by hand, the way users learn
//! the scheduling primitives. Snapshot tests print their scheduled IR and CUDA, and
//! `nvfuser-cuda` compiles every one of them with NVRTC.

use crate::builder::FusionDefinition;
use crate::dtype::DataType;
use crate::error::Error;
use crate::ir::ValId;
use crate::sched::{ParallelType::*, SchedResult, ScheduledFusion};

/// Every corpus entry: `(name, scheduled fusion)`.
pub fn all() -> SchedResult<Vec<(&'static str, ScheduledFusion)>> {
    Ok(vec![
        ("pointwise_split128", pointwise_split128()?),
        (
            "pointwise_vectorize4_f32",
            pointwise_vectorized(DataType::F32, 4)?,
        ),
        (
            "pointwise_vectorize8_bf16",
            pointwise_vectorized(DataType::BF16, 8)?,
        ),
        ("inner_sum_rfactor", inner_sum_rfactor()?),
        ("softmax_row_in_registers", softmax_row()?),
        ("nondivisible_split", nondivisible_split()?),
        ("broadcast_add", broadcast_add()?),
        ("outer_sum", outer_sum()?),
    ])
}

fn out1(fd: FusionDefinition) -> SchedResult<(ScheduledFusion, ValId)> {
    let f = fd.finish()?;
    let out = f.outputs()[0].val;
    Ok((ScheduledFusion::new(f)?, out))
}

/// `z = x + y` over `[N, H]` f32: merged, split by 128, bound to blockIdx.x/threadIdx.x.
pub fn pointwise_split128() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let z = fd.add(x, y)?;
    fd.add_output(z)?;
    let (mut s, z) = out1(fd)?;
    s.merge(z, 0)?;
    s.split(z, 0, 128)?;
    s.parallelize(z, 0, BIDx)?;
    s.parallelize(z, 1, TIDx)?;
    Ok(s)
}

/// `z = x + y` over `[N]`: inputs cached in registers with vector loads, the output
/// written with vector stores, `width` elements per thread.
pub fn pointwise_vectorized(dtype: DataType, width: i64) -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1])?;
    let y = fd.define_tensor(dtype, &[-1])?;
    let z = fd.add(x, y)?;
    fd.add_output(z)?;
    let (mut s, z) = out1(fd)?;
    let xc = s.cache_after(x)?;
    let yc = s.cache_after(y)?;
    let zc = s.cache_before(z)?;
    s.split(z, 0, width)?;
    s.split(z, 0, 128)?;
    s.parallelize(z, 0, BIDx)?;
    s.parallelize(z, 1, TIDx)?;
    s.transform_like(z, &[xc, yc, zc])?;
    s.parallelize_like(z, &[xc, yc, zc])?;
    for tv in [xc, yc, z] {
        s.parallelize(tv, -1, Vectorize)?;
    }
    s.parallelize(zc, -1, Unroll)?;
    s.inline_most()?;
    Ok(s)
}

/// `sum(x, [1])` over `[N, K]` f32: split K by 128, rfactor the serial part, then a
/// block reduction over threadIdx.x; one row per block.
pub fn inner_sum_rfactor() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.sum(x, &[1], false)?;
    fd.add_output(r)?;
    let (mut s, r) = out1(fd)?;
    let xc = s.cache_after(x)?;
    s.split(r, 1, 128)?;
    let rf = s.rfactor(r, &[1])?;
    s.parallelize(rf, 0, BIDx)?;
    s.parallelize(rf, 2, TIDx)?;
    s.parallelize(r, 0, BIDx)?;
    s.parallelize(r, 1, TIDx)?;
    s.transform_like(rf, &[xc])?;
    s.parallelize_like(rf, &[xc])?;
    s.inline_most()?;
    Ok(s)
}

/// Softmax over the last dim of `[N, 1024]` f32, one row per block of 128 threads,
/// each thread keeping its 8 elements of the row in registers between the max, the
/// exponentials and the sum.
pub fn softmax_row() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 1024])?;
    let m = fd.max(x, &[1], false)?;
    let mb = fd.broadcast(m, &[false, true])?;
    let d = fd.sub(x, mb)?;
    let e = fd.exp(d)?;
    let sm = fd.sum(e, &[1], false)?;
    let sb = fd.broadcast(sm, &[false, true])?;
    let y = fd.div(e, sb)?;
    fd.add_output(y)?;
    let (mut s, y) = out1(fd)?;
    let xc = s.cache_after(x)?;
    s.split(y, 1, 128)?;
    s.parallelize(y, 0, BIDx)?;
    s.parallelize(y, 2, TIDx)?;
    let others = [xc, m, mb, d, e, sm, sb];
    s.transform_like(y, &others)?;
    s.parallelize_like(y, &others)?;
    s.inline_most()?;
    Ok(s)
}

/// `relu(x * 2)` over a static `[1000]`: split by 128, so the last block is predicated.
pub fn nondivisible_split() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[1000])?;
    let two = fd.constant(2.0);
    let y = fd.mul(x, two)?;
    let y = fd.relu(y)?;
    fd.add_output(y)?;
    let (mut s, y) = out1(fd)?;
    let fusion = s.fusion().clone();
    s.split(y, 0, 128)?;
    s.parallelize(y, 0, BIDx)?;
    s.parallelize(y, 1, TIDx)?;
    let mid = fusion
        .exprs()
        .map(|(_, e)| e.outputs[0])
        .find(|&v| v != y && fusion.val(v).is_tensor())
        .ok_or_else(|| Error::InvalidIr("expected an intermediate".into()))?;
    s.transform_like(y, &[mid])?;
    s.parallelize_like(y, &[mid])?;
    s.inline_most()?;
    Ok(s)
}

/// `x + b` with `x: [N, H]` and `b: [H]` broadcast along rows; rows on blockIdx.x,
/// columns split by 128 onto threadIdx.x.
pub fn broadcast_add() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let y = fd.add(x, b)?;
    fd.add_output(y)?;
    let (mut s, y) = out1(fd)?;
    let fusion = s.fusion().clone();
    let bb = fusion
        .exprs()
        .map(|(_, e)| e.outputs[0])
        .find(|&v| v != y)
        .ok_or_else(|| Error::InvalidIr("expected the broadcast of b".into()))?;
    s.split(y, 1, 128)?;
    s.parallelize(y, 0, BIDx)?;
    s.parallelize(y, 2, TIDx)?;
    s.transform_like(y, &[bb])?;
    s.parallelize_like(y, &[bb])?;
    s.inline_most()?;
    Ok(s)
}

/// `sum(x, [0])` over `[N, H]` f32: columns split by 128 onto blocks and threads, each
/// thread reducing its column serially (coalesced across the warp).
pub fn outer_sum() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.sum(x, &[0], false)?;
    fd.add_output(r)?;
    let (mut s, r) = out1(fd)?;
    s.split(r, 1, 128)?;
    s.reorder(r, &[1, 2, 0])?;
    s.parallelize(r, 0, BIDx)?;
    s.parallelize(r, 1, TIDx)?;
    Ok(s)
}
