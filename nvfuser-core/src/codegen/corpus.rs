//! The manual-schedule corpus: small fusions scheduled by hand, the way users learn
//! the scheduling primitives. Snapshot tests print their scheduled IR and CUDA, and
//! `nvfuser-cuda` compiles every one of them with NVRTC.

use crate::builder::{FusionDefinition, Size, Slice};
use crate::dtype::DataType;
use crate::error::Error;
use crate::ir::ValId;
use crate::sched::{MemoryType, ParallelType::*, SchedResult, ScheduledFusion};

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
        ("softmax_row_in_shared", softmax_row_shared()?),
        ("layer_norm_bf16", layer_norm_bf16()?),
        ("rms_norm_bf16", rms_norm_bf16()?),
        ("welford_three_outputs", welford_three_outputs()?),
        ("inner_sum_grid", inner_sum_grid()?),
        ("inner_sum_2d_block", inner_sum_2d_block()?),
        ("resize_slice_pad_cat", resize_slice_pad_cat()?),
        ("reshape_view", reshape_view()?),
        ("gather_select", gather_select()?),
        ("int_div_mod", int_div_mod()?),
    ])
}

/// The tensors of the kernel graph (not fusion inputs, not `except`) whose logical
/// domain has `rank` dims (reduction dims included): those `transform_like` can map
/// onto a reference of that rank.
fn of_rank(s: &ScheduledFusion, rank: usize, except: &[ValId]) -> Vec<ValId> {
    let sch = s.schedule();
    sch.tensors
        .iter()
        .filter(|(v, t)| {
            !sch.is_input(**v) && !except.contains(v) && t.domain.logical.len() == rank
        })
        .map(|(v, _)| *v)
        .collect()
}

/// Softmax over the last dim of `[N, 4096]` f32 with the row kept in *shared memory*
/// (the inner-persistent schedule for rows too large for registers): 256 threads per
/// row, the cached input and the exponentials in shared memory (2 × 16 KiB), so global
/// memory is read once. `__syncthreads()` separates the writes of a shared tensor from
/// reads by other threads.
pub fn softmax_row_shared() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 4096])?;
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
    s.split(y, 1, 256)?;
    s.parallelize(y, 0, BIDx)?;
    s.parallelize(y, 2, TIDx)?;
    let others = [xc, m, mb, d, e, sm, sb];
    s.transform_like(y, &others)?;
    s.parallelize_like(y, &others)?;
    s.set_memory_type(xc, MemoryType::Shared)?;
    s.set_memory_type(e, MemoryType::Shared)?;
    s.inline_most()?;
    Ok(s)
}

/// LayerNorm forward over the last dim of `[N, 1024]`: bf16 in and out, f32 math,
/// mean and variance in one Welford pass (`var_mean`), a block Welford combine, and
/// three outputs: `y` (bf16), `mean` and `rstd` (f32, as PyTorch saves for backward).
/// One row per block of 128 threads; each thread keeps its 8 elements in registers.
/// `mean` and `rstd` are also read by the normalization, so `cache_fork` keeps a
/// register copy that the kernel reads while the output is only stored.
pub fn layer_norm_bf16() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, 1024])?;
    let w = fd.define_tensor(DataType::BF16, &[1024])?;
    let b = fd.define_tensor(DataType::BF16, &[1024])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let xf = fd.cast(x, DataType::F32)?;
    let (var, mean) = fd.var_mean(xf, &[1], 0, false)?;
    let mb = fd.broadcast(mean, &[false, true])?;
    let xc = fd.sub(xf, mb)?;
    let ve = fd.add(var, eps)?;
    let rstd = fd.rsqrt(ve)?;
    let rb = fd.broadcast(rstd, &[false, true])?;
    let xn = fd.mul(xc, rb)?;
    let wb = fd.broadcast(w, &[true, false])?;
    let wf = fd.cast(wb, DataType::F32)?;
    let bb = fd.broadcast(b, &[true, false])?;
    let bf = fd.cast(bb, DataType::F32)?;
    let yw = fd.mul(xn, wf)?;
    let y = fd.add(yw, bf)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    fd.add_output(mean)?;
    fd.add_output(rstd)?;
    let (mut s, y) = out1(fd)?;
    let xcache = s.cache_after(x)?;
    let mean_c = s.cache_fork(mean)?;
    let rstd_c = s.cache_fork(rstd)?;
    s.split(y, 1, 128)?;
    s.parallelize(y, 0, BIDx)?;
    s.parallelize(y, 2, TIDx)?;
    let others = of_rank(&s, 2, &[y]);
    s.transform_like(y, &others)?;
    s.parallelize_like(y, &others)?;
    for tv in of_rank(&s, 1, &[]) {
        s.parallelize(tv, 0, BIDx)?;
    }
    let _ = (xcache, mean_c, rstd_c);
    s.inline_most()?;
    Ok(s)
}

/// RMSNorm forward over the last dim of `[N, 1024]`: bf16 in and out, f32 math,
/// `y = x * rsqrt(mean(x²) + eps) * w`; one row per block of 128 threads, the row in
/// registers.
pub fn rms_norm_bf16() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, 1024])?;
    let w = fd.define_tensor(DataType::BF16, &[1024])?;
    let eps = fd.define_scalar(DataType::F32)?;
    let xf = fd.cast(x, DataType::F32)?;
    let sq = fd.mul(xf, xf)?;
    let ms = fd.mean(sq, &[1], false)?;
    let ve = fd.add(ms, eps)?;
    let r = fd.rsqrt(ve)?;
    let rb = fd.broadcast(r, &[false, true])?;
    let xn = fd.mul(xf, rb)?;
    let wb = fd.broadcast(w, &[true, false])?;
    let wf = fd.cast(wb, DataType::F32)?;
    let y = fd.mul(xn, wf)?;
    let y = fd.cast(y, DataType::BF16)?;
    fd.add_output(y)?;
    let (mut s, y) = out1(fd)?;
    s.cache_after(x)?;
    s.split(y, 1, 128)?;
    s.parallelize(y, 0, BIDx)?;
    s.parallelize(y, 2, TIDx)?;
    let others = of_rank(&s, 2, &[y]);
    s.transform_like(y, &others)?;
    s.parallelize_like(y, &others)?;
    for tv in of_rank(&s, 1, &[]) {
        s.parallelize(tv, 0, BIDx)?;
    }
    s.inline_most()?;
    Ok(s)
}

/// `welford(x, [1])` over `[N, K]` f32: one multi-output expression whose three
/// outputs (mean, sum of squared deviations, i64 count) are all fusion outputs. Serial
/// Welford updates over K split by 128, then a block Welford combine.
pub fn welford_three_outputs() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let (avg, m2, n) = fd.welford(x, &[1])?;
    fd.add_output(avg)?;
    fd.add_output(m2)?;
    fd.add_output(n)?;
    let (mut s, avg) = out1(fd)?;
    // Siblings follow: these apply to all three outputs.
    s.split(avg, 1, 128)?;
    s.parallelize(avg, 0, BIDx)?;
    s.parallelize(avg, 2, TIDx)?;
    Ok(s)
}

/// `sum(x, [1])` over `[N, K]` f32 with each long row split across 8 blocks: rows on
/// blockIdx.y, the reduction over blockIdx.x (8 blocks) × a serial loop × threadIdx.x
/// (128). Each block reduces its part (serial, then a block reduction); a grid
/// reduction combines the 8 partials through a global work buffer and a semaphore.
pub fn inner_sum_grid() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.sum(x, &[1], false)?;
    fd.add_output(r)?;
    let (mut s, r) = out1(fd)?;
    s.split(r, 1, 128)?;
    s.split_outer(r, 1, 8)?;
    s.parallelize(r, 0, BIDy)?;
    s.parallelize(r, 1, BIDx)?;
    s.parallelize(r, 3, TIDx)?;
    Ok(s)
}

/// `sum(x, [1])` over `[N, K]` f32 with 4 rows per block: rows split by 4 onto
/// threadIdx.y, the reduction over a serial loop and threadIdx.x (32, one warp per
/// row); each row of threads does its own block reduction.
pub fn inner_sum_2d_block() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let r = fd.sum(x, &[1], false)?;
    fd.add_output(r)?;
    let (mut s, r) = out1(fd)?;
    s.split(r, 0, 4)?;
    s.split(r, 2, 32)?;
    s.parallelize(r, 0, BIDx)?;
    s.parallelize(r, 1, TIDy)?;
    s.parallelize(r, 3, TIDx)?;
    Ok(s)
}

/// Three resize ops of `[N, H]` inputs in one kernel with three outputs:
/// `x[:, 1:-1]`, `pad(x, last dim by (2, 3) with 0)` and `cat([x, y], 1)`; rows on
/// blocks, columns split by 128 onto threadIdx.x. Pad and cat pick their source
/// (or the pad value) by bounds conditions on the output index.
pub fn resize_slice_pad_cat() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let y = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let sl = fd.slice(x, &[Slice::all(), Slice::range(1, -1)])?;
    let zero = fd.constant(0.0);
    let pd = fd.pad(x, &[(0, 0), (2, 3)], zero)?;
    let ct = fd.cat(&[x, y], 1)?;
    for t in [sl, pd, ct] {
        fd.add_output(t)?;
    }
    let f = fd.finish()?;
    let mut s = ScheduledFusion::new(f)?;
    // The slice's row extent is an expression of its own (`x[:, ...]` clamps its
    // bounds), so its rows go on blockIdx.y; one parallel type has one extent.
    for (t, rows) in [(sl, BIDy), (pd, BIDx), (ct, BIDx)] {
        s.split(t, 1, 128)?;
        s.parallelize(t, 0, rows)?;
        s.parallelize(t, 2, TIDx)?;
    }
    Ok(s)
}

/// `reshape(x, [-1, 48]) * 2` for `x: [N, 6, 8]`: the reshape is the row-major view
/// (linearize the output index, split it over the input dims), inlined into the
/// multiplication; flattened and split by 128 onto blocks and threads.
pub fn reshape_view() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 6, 8])?;
    let r = fd.reshape(x, &[Size::Const(-1), Size::Const(48)])?;
    let two = fd.constant(2.0);
    let z = fd.mul(r, two)?;
    fd.add_output(z)?;
    let (mut s, z) = out1(fd)?;
    s.merge(z, 0)?;
    s.split(z, 0, 128)?;
    s.parallelize(z, 0, BIDx)?;
    s.parallelize(z, 1, TIDx)?;
    s.transform_like(z, &[r])?;
    s.parallelize_like(z, &[r])?;
    s.inline_most()?;
    Ok(s)
}

/// Indexing ops with bounds predicates, three outputs: `take_along_axis(x, idx, 1)`
/// (rows on blockIdx.x), `index_select(x, 0, rows)` (rows on blockIdx.y) and
/// `select(x, 0, 1)`; columns split by 128 onto threadIdx.x. An index outside the
/// input reads nothing.
pub fn gather_select() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
    let idx = fd.define_tensor(DataType::I64, &[-1, -1])?;
    let rows = fd.define_tensor(DataType::I64, &[-1])?;
    let g = fd.take_along_axis(x, idx, 1)?;
    let isel = fd.index_select(x, 0, rows)?;
    let sel = fd.select(x, 0, Size::Const(1))?;
    for t in [g, isel, sel] {
        fd.add_output(t)?;
    }
    let f = fd.finish()?;
    let mut s = ScheduledFusion::new(f)?;
    s.split(g, 1, 128)?;
    s.parallelize(g, 0, BIDx)?;
    s.parallelize(g, 2, TIDx)?;
    s.split(isel, 1, 128)?;
    s.parallelize(isel, 0, BIDy)?;
    s.parallelize(isel, 2, TIDx)?;
    s.split(sel, 0, 128)?;
    s.parallelize(sel, 1, TIDx)?;
    Ok(s)
}

/// Integer `div`, `fmod` and `remainder` of two `[N]` i32 tensors (three outputs, each
/// split by 128 onto blockIdx.x/threadIdx.x): each divisor is checked on the device,
/// so the kernel takes the error buffer.
pub fn int_div_mod() -> SchedResult<ScheduledFusion> {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::I32, &[-1])?;
    let y = fd.define_tensor(DataType::I32, &[-1])?;
    let q = fd.div(x, y)?;
    let m = fd.fmod(x, y)?;
    let r = fd.remainder(x, y)?;
    for t in [q, m, r] {
        fd.add_output(t)?;
    }
    let f = fd.finish()?;
    let mut s = ScheduledFusion::new(f)?;
    for t in [q, m, r] {
        s.split(t, 0, 128)?;
        s.parallelize(t, 0, BIDx)?;
        s.parallelize(t, 1, TIDx)?;
    }
    Ok(s)
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
