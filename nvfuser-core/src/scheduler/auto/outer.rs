//! Outer reductions: sums (and max, min, mean, prod) over the outermost dims.
//!
//! Accepted: every reduction (sums, max, min, mean, prod, and the Welford family:
//! var, var_mean, welford) reduces the same outermost `k < r` dims of rank-`r` tensors,
//! every computed tensor is *full* (rank `r`) or *per-column* (rank `r - k`), and no
//! full tensor is computed from a reduction result (a normalization over the outer
//! dims: the statistics are a segment of their own, with a grid reduction).
//! Pointwise intermediates are computed once per loop nest (`recompute_per_nest`):
//! the first reduction and every full output share one nest, so a value both stored
//! and summed (GELU backward's `dx` beside its bias gradient) is computed once per
//! element; every other reduction and per-column output recomputes what it reads in
//! its own nest (as in the streaming inner reduction), so per-column values may be
//! broadcast back. Creation ops are taken as pointwise math, as in the inner schedules
//! (dropout's mask in a bias gradient).
//!
//! Schedule: the innermost kept dim is split by `vectorize` (a thread's vector of
//! adjacent columns), the kept dims are merged and split into `[blocks, threads_x]` on
//! `blockIdx.x`/`threadIdx.x`; the reduced (outer) dims are merged and split into
//! `[grid_split, serial, unroll]`, reordered inside the column dims and outside the
//! vector: each thread accumulates its columns over its rows (a warp reads `32 ×
//! vectorize` adjacent elements of a row: coalesced, 16-byte loads), `unroll` rows in
//! flight at a time. With too few column blocks to fill the GPU, the rows are also split
//! over `grid_split` blocks on `blockIdx.y` (a grid reduction); then the rows are also
//! split over `threads_y` threads (`threadIdx.y`, a block reduction), which divides the
//! partials by `threads_y` and lets the last block combine them with all its rows of
//! threads. Each load of an input gets its own unrolled loop over the `unroll` rows
//! (and the vector), ahead of the math of its loop nest, so the loads of those rows are
//! issued together.
//!
//! With `vectorize > 1` each reduction keeps one accumulator per column of its vector:
//! the vector dim is an iteration loop inside the serial reduction loops, which makes
//! the reduction *grouped* (`sched::is_grouped`): the block and grid reductions combine
//! the whole register array (`nvf_grid_reduce_group`). A reduction that is a fusion
//! output is computed in registers and stored per column; full outputs (GELU backward's
//! `dx`) are stored with vectors from a register copy. Welford statistics keep one
//! column per thread (their accumulators stay scalar).
//!
//! Full outputs run in the first reduction's loops (`compute_with` at every loop, or
//! every loop but a vector store's own dim), so what they share with it is computed
//! in the same row and vector loops: `dx[8]` per unrolled row, converted and stored
//! with one 16-byte store, and accumulated from the same registers.

use crate::scheduler::unfit::{ReducedSide, Takes, Unfit};

use super::pointwise::index_type;
use super::{
    ceil_div, pow2_dividing, round_up, tensor_inputs, vector_limit, vector_readable, Plan,
};
use crate::ir::{Expr, ExprId, Extent, Fusion, Op, ValId};
use crate::sched::{ParallelType, ScheduleError, ScheduledFusion};
use crate::scheduler::analysis::{
    check_exactly_mapped, is_creation, is_input_squeeze, is_pointwise, reduction_axes,
};
use crate::scheduler::info::RuntimeInfo;
use crate::scheduler::params::{CompileParams, LaunchParams, OuterReductionParams};
use crate::scheduler::recompute::{push_broadcasts, recompute_per_nest};

pub(crate) struct OuterPlan {
    pub fusion: Fusion,
    pub rank: usize,
    pub k: usize,
    pub reduced: Vec<Extent>,
    pub kept: Vec<Extent>,
}

pub(crate) fn plan(fusion: &Fusion) -> Plan<OuterPlan> {
    super::check_fusion(fusion)?;
    let live = fusion.live_exprs();
    let mut shape = None;
    let mut reference = None;
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        let Some(axes) = reduction_axes(&e.op) else {
            if !is_pointwise(&e.op) && !is_creation(&e.op) && !is_input_squeeze(fusion, e) {
                return Err(Unfit::Op {
                    op: e.op.name().into(),
                    takes: Takes::PointwiseAndPlainReductions,
                });
            }
            continue;
        };
        let r = fusion
            .tensor_type(e.outputs[0])
            .map_or(0, |t| t.domain.len());
        let k = axes.len();
        if !(k > 0 && k < r && axes.iter().enumerate().all(|(i, &a)| a == i)) {
            return Err(Unfit::ReductionAxes {
                op: e.op.name().into(),
                axes: axes.to_vec(),
                rank: r,
                side: ReducedSide::Outermost,
            });
        }
        match shape {
            None => shape = Some((r, k)),
            Some(s) if s != (r, k) => {
                return Err(Unfit::ReductionShapes {
                    first: s,
                    second: (r, k),
                })
            }
            Some(_) => {}
        }
        reference.get_or_insert(e.outputs[0]);
    }
    let (Some((rank, k)), Some(reference)) = (shape, reference) else {
        return Err(Unfit::NoOuterReduction);
    };
    let pushed = push_broadcasts(fusion);
    let live = pushed.live_exprs();
    for (id, e) in pushed.exprs() {
        if !live[id.index()] {
            continue;
        }
        let out = e.outputs[0];
        let r = pushed.tensor_type(out).map_or(0, |t| t.domain.len());
        if let Op::Broadcast { mask } = &e.op {
            let leading = mask.len() == rank && mask.iter().enumerate().all(|(i, &m)| m == (i < k));
            if pushed.input_position(e.inputs[0]).is_none() && !leading {
                return Err(Unfit::BroadcastAlongKept { tensor: out });
            }
        }
        // Kept dims merge into one: a per-column tensor must not mix broadcast and
        // iteration dims (GPU fuzz seed 10604126: an `iota` mask `[B, 1]` beside the
        // `[B, C]` result of a Welford over dim 0); the segmenter keeps it apart.
        if r == rank - k && r > 1 && reduction_axes(&e.op).is_none() {
            let dims = pushed
                .tensor_type(out)
                .map(|t| t.domain.clone())
                .unwrap_or_default();
            let b = dims
                .iter()
                .filter(|d| d.kind == crate::ir::IterKind::Broadcast)
                .count();
            if b != 0 && b != dims.len() {
                return Err(Unfit::MixedKeptBroadcast { tensor: out });
            }
        }
        if r != rank && r != rank - k {
            return Err(Unfit::TensorRank {
                tensor: out,
                rank: r,
                full: rank,
                reduced: rank - k,
            });
        }
    }
    // A full tensor computed from a reduction result needs the result of every row
    // block first: the reduction is a kernel of its own (grid-split), its readers
    // another.
    let mut after: Vec<Option<ValId>> = vec![None; pushed.num_vals()];
    for (id, e) in pushed.exprs() {
        if !live[id.index()] {
            continue;
        }
        let from = if reduction_axes(&e.op).is_some() {
            Some(e.outputs[0])
        } else {
            e.inputs.iter().find_map(|i| after[i.index()])
        };
        for &o in &e.outputs {
            after[o.index()] = from;
            // Full: it has elements along the reduced dims (a keepdim broadcast does
            // not; an expand of one does, and every row block would store its rows).
            let full = has_reduced_elements(&pushed, o, rank, k);
            if let (Some(reduction), true, None) = (from, full, reduction_axes(&e.op)) {
                return Err(Unfit::OuterNormalization {
                    tensor: o,
                    reduction,
                });
            }
        }
    }
    let t = pushed
        .tensor_type(reference)
        .ok_or(Unfit::NoReference { value: reference })?;
    // Every full tensor takes the reference's transforms: a column of another height
    // (or a row of another width) is not this schedule's.
    let all: Vec<Extent> = t.domain.iter().map(|d| d.extent.clone()).collect();
    check_exactly_mapped(&pushed, &all, &all[k..])?;
    Ok(OuterPlan {
        reduced: t.domain[..k].iter().map(|d| d.extent.clone()).collect(),
        kept: t.domain[k..].iter().map(|d| d.extent.clone()).collect(),
        fusion: pushed,
        rank,
        k,
    })
}

pub(crate) fn heuristics(p: &OuterPlan, info: &RuntimeInfo) -> Plan<OuterReductionParams> {
    let eval = |es: &[Extent]| -> Plan<i64> {
        let mut n = 1i64;
        for e in es {
            n = n.saturating_mul(
                info.eval(&p.fusion, e)
                    .ok_or_else(|| Unfit::Unevaluated { extent: e.clone() })?,
            );
        }
        Ok(n)
    };
    let cols = eval(&p.kept)?;
    let rows = eval(&p.reduced)?;
    let sm = info.device.sm_count as i64;
    let vectorize = vector_width(p, info, eval(&p.kept[p.kept.len() - 1..])?);
    // Threads over the columns count vectors of columns.
    let chunks = ceil_div(cols, vectorize);
    let mut threads_x = round_up(chunks, 32).clamp(32, 128);
    let mut blocks = ceil_div(chunks, threads_x);
    let mut grid_split = 1;
    let mut threads_y = 1;
    if vectorize > 1 && blocks < 2 * sm && rows >= 256 {
        (threads_x, threads_y, blocks, grid_split) = vector_split(p, chunks, rows, sm);
    } else if blocks < 2 * sm && rows >= 256 {
        // Too few columns to fill the GPU: split the rows over threads (threadIdx.y, a
        // block reduction) and blocks (blockIdx.y, a grid reduction) too. About
        // 80 × threads_x threads per SM in total: each thread streams its column with
        // few loads in flight, so many are needed to cover memory latency (an H200
        // sweep of [8192, 32768] f32: 1636 GB/s at 5 blocks of 128 per column, 2159 at
        // 21, 2447 at 42 with unroll 8); at least 64 rows per thread. Past 64 blocks
        // per column, a block of 64 columns and 8 rows on threadIdx.y (a block
        // reduction, then a grid reduction of 8 times fewer partials, combined by the
        // last block's rows of threads) is faster. H100 sweeps (param_sweep, var_mean
        // or sum over the rows): [100352, 256] bf16 Welford 336 us at 1568 blocks of
        // 128 per column, 124.7 at 392 blocks of 128 x 4, 111.2 at 196 blocks of 64 x 8;
        // [65536, 1024] f32 Welford 279 us at 128 x 4, 261 at 64 x 8; [65536, 512] bf16
        // sum 71.7 us at 128 x 4, 67.8 at 64 x 8; [8192, 64] bf16 Welford 42 us at 128
        // blocks of 64, 26.5 at 16 blocks of 64 x 8. With fewer blocks per column one
        // row of threads stays ([8192, 32768] f32 sum: 482 us at 42 blocks of 128,
        // 489 to 514 with rows on threadIdx.y). These sweeps predate the batched loads
        // of `load_unrolled_rows_first`; with them the choices are within 1.5% of the
        // best variant: 55.8 us against 55.0 for the first shape, 359.7 against 354.9
        // for the last.
        let split = |blocks: i64, ty: i64| {
            ceil_div(80 * sm, blocks * ty)
                .min(rows / (64 * ty))
                .clamp(1, 65535)
        };
        grid_split = split(blocks, 1);
        if grid_split > 64 {
            threads_x = threads_x.min(64);
            blocks = ceil_div(chunks, threads_x);
            let most_y = (512 / threads_x).min(rows / 64).max(1);
            threads_y = 1i64 << (63 - most_y.leading_zeros());
            grid_split = split(blocks, threads_y);
        }
    }
    let per_block = ceil_div(rows, grid_split * threads_y);
    let mut unroll = if per_block >= 32 {
        8
    } else if per_block >= 16 {
        4
    } else {
        1
    };
    // Each thread loads its unrolled rows of every input read along the reduced dims
    // up front (`load_unrolled_rows_first`, `hoist_in_nest`); with several such inputs
    // 4 rows, not 8, keep the loads in registers. H100 sweeps (`param_sweep`), 64 x 8
    // threads at unroll 4, 8 and 16: LayerNorm backward's dw and db (`column_dw_db`:
    // dy, x, mean, rstd; two sums fused into one loop by `kir::fuse`) [65536, 4096] bf16
    // 524, 928 and 1660 us (best variant 494), [8192, 4096] 82, 126 and 238 (best 79);
    // GELU backward with its bias gradient (dy, x) [8192, 16384] 403, 442 and 1101
    // (best 398), [65536, 4096] 824, 893 and 2187 (best 776). One input keeps 8: Welford
    // statistics with few rows per thread need it (`column_var_mean` [100352, 256] bf16
    // 55.2 us at 8, 63.2 at 4), though a bf16 column sum would gain 8% at 4
    // ([65536, 4096]: 222 against 241 us). The GELU backward figures are of the
    // kernel that computed `dx` once per loop nest, one column per thread; with the
    // shared form and vectors (`recompute_per_nest`) unroll 4 is kept unmeasured
    // (`param_sweep gelu_bwd_bias bf16 8192 16384` tries 4 and 16 beside it).
    if row_inputs(p) > 1 || vectorize > 1 {
        unroll = unroll.min(4);
    }
    Ok(OuterReductionParams {
        threads_x,
        threads_y,
        unroll,
        grid_split,
        vectorize,
        launch: LaunchParams {
            grid: [blocks.max(1), grid_split, 1],
            block: [threads_x, threads_y, 1],
        },
        compile: CompileParams {
            index_type: index_type(&p.fusion, info),
            min_blocks_per_sm: None,
        },
    })
}

/// The split of a vectorized outer reduction with too few column blocks to fill the
/// GPU: `(threads_x, threads_y, blocks, grid_split)`. One warp per row of the block (32
/// vectors of columns: 512 bytes of a bf16 row), 16 rows of threads (8 with several
/// inputs read along the rows, whose loads take more registers), and about 80 × 32
/// threads per SM in total (half that with several inputs), at least 64 rows per
/// thread. H200 sweeps (`param_sweep`, 4 rows unrolled, the best variant of ~100):
/// `column_sum` bf16 [65536, 4096] 140.3 us at 32 x 16 threads and 42 blocks per column
/// (3827 GB/s; 180.4 at the split for one column per thread, 64 x 8 and 128 blocks);
/// `column_dw_db` [65536, 4096] 285.9 us at 32 x 8 and 41 (3758 GB/s; 441.2 at 64 x 8
/// and 128), [8192, 4096] 53.4 us at 32 x 8 and 16 (64.7 at 64 x 8).
fn vector_split(p: &OuterPlan, chunks: i64, rows: i64, sm: i64) -> (i64, i64, i64, i64) {
    let threads_x = 32;
    let blocks = ceil_div(chunks, threads_x);
    let many = row_inputs(p) > 1;
    // Full outputs beside the sums (GELU backward's `dx`) take 4 rows of threads and
    // twice the blocks: H200 `param_sweep gelu_bwd_bias bf16 8192 16384`, 300.4 us at
    // 32 x 4 and 32 blocks per column against 337.0 at 32 x 8 and 11.
    let full = full_outputs(p);
    let most_y = (if full {
        4
    } else if many {
        8
    } else {
        16
    })
    .min(rows / 64)
    .max(1);
    let threads_y = 1i64 << (63 - most_y.leading_zeros());
    let per_sm = if many && !full { 40 } else { 80 };
    let grid_split = ceil_div(per_sm * sm, blocks * threads_y)
        .min(rows / (64 * threads_y))
        .clamp(1, 65535);
    (threads_x, threads_y, blocks, grid_split)
}

/// Whether full outputs beside the column sums are stored with vectors of columns
/// (else one column per thread). H200 `param_sweep gelu_bwd_bias bf16 8192 16384`
/// with the shared form (dx computed once): 300.4 us at best with vectors of 8, 363.7
/// with one column per thread.
const VECTORIZE_FULL_OUTPUTS: bool = true;

/// Columns per thread: the widest vector (at most 16 bytes of the widest input read
/// with vectors) that divides the innermost kept extent `inner` and that every such
/// input's layout allows (`vector_limit`). Inputs read with vectors: full rows whose
/// innermost dim is a column dim ([`column_input`]); per-row statistics (`[N, 1]`) are
/// read one value per row. 1 with a Welford reduction (its accumulators stay scalar)
/// or with an input whose declared layout is not innermost-contiguous.
fn vector_width(p: &OuterPlan, info: &RuntimeInfo, inner: i64) -> i64 {
    let f = &p.fusion;
    let welford = f.exprs().any(|(_, e)| {
        matches!(
            e.op,
            Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. }
        )
    });
    // Full outputs beside the column sums (GELU backward's `dx` with its bias
    // gradient) are vectorized too: they are computed in the sum's loops and share
    // its values (`recompute_per_nest`, `compute_with`). The measurement that kept
    // them at one column per thread (H200 `gelu_bwd_bias` [8192, 16384]: 394 us at
    // 256 x 2 threads, 473 at best with vectors of 8) was of kernels that computed
    // `dx` twice, once per loop nest; the shared form is not measured yet (see
    // `VECTORIZE_FULL_OUTPUTS`).
    let full_outputs = f
        .outputs()
        .iter()
        .any(|o| has_reduced_elements(f, o.val, p.rank, p.k));
    if welford || (full_outputs && !VECTORIZE_FULL_OUTPUTS) || inner <= 1 {
        return 1;
    }
    // Several kept dims merged around a broadcast one (a `[2, 1]` operand of `[2, N]`
    // rows): the vector split of a broadcast innermost dim would index the merged loop
    // differently from the rows it meets. Such fusions keep one column per thread.
    let kept = p.rank - p.k;
    let broadcast_kept = f.vals.iter().any(|v| {
        v.tensor().is_some_and(|t| {
            t.domain.len() == p.rank && t.domain[p.k..].iter().any(|d| d.is_broadcast_like())
        })
    });
    if kept > 1 && broadcast_kept {
        return 1;
    }
    let read: Vec<(ValId, &crate::scheduler::info::TensorInfo)> = tensor_inputs(f, info)
        .filter(|&(v, _)| column_input(p, v))
        .collect();
    let widest = read
        .iter()
        .map(|(_, t)| t.dtype.size_bytes() as i64)
        .max()
        .unwrap_or(4);
    let max_v = (16 / widest.max(1)).max(1);
    let mut v = pow2_dividing(inner, max_v);
    for (input, t) in read {
        let last = *t.sizes.last().unwrap_or(&1);
        if last > 1 {
            v = v.min(vector_limit(t, last, max_v));
        }
        if !f.tensor_type(input).is_some_and(vector_readable) {
            v = 1;
        }
    }
    v
}

/// Whether input `v` is read with vectors: read in the fusion, of full rank, its
/// innermost dim a column dim (not a broadcast). Per-column inputs (a `[H]` weight) are
/// read element by element: little traffic, and no layout to check.
fn column_input(p: &OuterPlan, v: ValId) -> bool {
    let f = &p.fusion;
    let read = f.exprs().any(|(_, e)| e.inputs.contains(&v));
    read && f.tensor_type(v).is_some_and(|t| {
        t.rank() == p.rank && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
    })
}

/// Whether `v` is a full tensor of rank `rank` with elements along its `k` reduced
/// dims: not a reduction's result (keepdim or not: those dims are reductions or
/// broadcasts), not a keepdim broadcast; an expand of one is.
fn has_reduced_elements(f: &Fusion, v: ValId, rank: usize, k: usize) -> bool {
    f.tensor_type(v).is_some_and(|t| {
        t.domain.len() == rank
            && t.domain[..k]
                .iter()
                .any(|d| d.kind != crate::ir::IterKind::Broadcast && !d.is_reduction())
    })
}

/// True when some output has elements along the reduced dims (a full output beside the
/// column sums).
fn full_outputs(p: &OuterPlan) -> bool {
    let f = &p.fusion;
    f.outputs()
        .iter()
        .any(|o| has_reduced_elements(f, o.val, p.rank, p.k))
}

/// The fusion inputs read along the reduced dims (full tensors and per-row statistics
/// such as `[N, 1]`; not a `[H]` weight, read once per column).
fn row_inputs(p: &OuterPlan) -> usize {
    let f = &p.fusion;
    f.inputs()
        .iter()
        .filter(|&&v| has_reduced_elements(f, v, p.rank, p.k))
        .count()
}

pub(crate) fn schedule(
    p: &OuterPlan,
    params: &OuterReductionParams,
) -> Result<ScheduledFusion, ScheduleError> {
    let rank = p.rank;
    let k = p.k;
    let first = first_reduction(&p.fusion);
    let f = recompute_per_nest(&p.fusion, &|id, e| nest_of(p, first, id, e))
        .map_err(|e| ScheduleError::Unsupported(e.to_string()))?;
    let kept = rank - k;
    let live = f.live_exprs();
    let mut s = ScheduledFusion::new(f.clone())?;
    let mut reductions = Vec::new();
    let mut full = Vec::new();
    let mut per_col = Vec::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let out = e.outputs[0];
        if reduction_axes(&e.op).is_some() {
            reductions.push(out);
            continue;
        }
        let r = f.tensor_type(out).map_or(0, |t| t.domain.len());
        if r == rank {
            full.push(out);
        } else {
            per_col.push(out);
        }
    }
    // Outputs other tensors read: the readers take a register copy, scheduled as the
    // output was (a reduction's copy is the reduction; the output a per-column store).
    // Every output is only stored (no kernel reads an output back from global memory).
    for (o, c) in s.fork_read_outputs(|_| true)? {
        let reduced = f.exprs().any(|(id, e)| {
            live[id.index()] && reduction_axes(&e.op).is_some() && e.outputs.contains(&o)
        });
        if reduced {
            // The copy takes the reduction's place (a Welford sibling's copy follows
            // its first output); the output is stored per column.
            for r in reductions.iter_mut().filter(|r| **r == o) {
                *r = c;
            }
            per_col.push(o);
        } else if full.contains(&o) {
            full.push(c);
        } else {
            per_col.push(c);
        }
    }
    let (u, g, tx, ty, v) = (
        params.unroll,
        params.grid_split,
        params.threads_x,
        params.threads_y,
        params.vectorize,
    );
    // With vectors of columns, every reduction is kept in registers (one accumulator
    // per column of the vector, `sched::is_grouped`), its output stored per column.
    if v > 1 {
        for r in reductions.iter_mut() {
            if f.outputs().iter().any(|o| o.val == *r) {
                let c = s.cache_before(*r)?;
                per_col.push(*r);
                *r = c;
            }
        }
    }
    // Full outputs stored with vectors from a register copy (when a vector of the
    // output's dtype fits in 16 bytes; other outputs store element by element).
    let mut stores = Vec::new();
    if v > 1 {
        for o in super::distinct_outputs(&f) {
            let fits = f.val(o).dtype.size_bytes() as i64 * v <= 16;
            let innermost = f
                .tensor_type(o)
                .is_some_and(|t| t.shape().last().is_some_and(|d| !d.is_broadcast_like()));
            let unread = s.schedule().uses(o).is_empty();
            if full.contains(&o) && fits && innermost && unread {
                let c = s.cache_before(o)?;
                full.push(c);
                stores.push((c, o));
            }
        }
    }
    // [R.., I..] -> [R, I] -> [R, I/tx, tx] (-> [R, I/tx/v, tx, v]) -> rows split ->
    // reorder (the vector dim stays innermost).
    // The vector is an inner split of the innermost dim, taken before the kept dims
    // merge (a vector access must stay within the innermost logical dim).
    let schedule_full = |s: &mut ScheduledFusion, tv: ValId| -> Result<(), ScheduleError> {
        let vec = usize::from(v > 1);
        if v > 1 {
            s.split(tv, rank as i64 - 1, v)?;
        }
        for _ in 1..kept {
            s.merge(tv, k as i64)?;
        }
        for _ in 1..k {
            s.merge(tv, 0)?;
        }
        s.split(tv, 1, tx)?;
        // [R, Io, tx, (v)]
        s.split(tv, 0, u)?;
        // [R/u, u, Io, tx, (v)]
        if ty > 1 {
            s.split(tv, 0, ty)?;
            // [R/u/ty, ty, u, Io, tx, (v)]
            s.split_outer(tv, 0, g)?;
            // [g, R/u/ty/g, ty, u, Io, tx, (v)] -> [Io, g, ty, tx, R/u/ty/g, u, (v)]: a
            // block reads ty × u consecutive rows per serial step.
            let order: [i64; 7] = [4, 0, 2, 5, 1, 3, 6];
            s.reorder(tv, &order[..6 + vec])?;
            s.parallelize(tv, 2, ParallelType::TIDy)?;
            s.parallelize(tv, 3, ParallelType::TIDx)?;
        } else {
            s.split_outer(tv, 0, g)?;
            // [g, R/u/g, u, Io, tx, (v)] -> [Io, g, tx, R/u/g, u, (v)]
            let order: [i64; 6] = [3, 0, 4, 1, 2, 5];
            s.reorder(tv, &order[..5 + vec])?;
            s.parallelize(tv, 2, ParallelType::TIDx)?;
        }
        if v > 1 {
            s.parallelize(tv, -1, ParallelType::Unroll)?;
        }
        s.parallelize(tv, 0, ParallelType::BIDx)?;
        if g > 1 {
            s.parallelize(tv, 1, ParallelType::BIDy)?;
        }
        // The rows' unroll dim (also of one row with vectors: the loads' own loops
        // start there, `load_unrolled_rows_first`).
        if u > 1 || v > 1 {
            s.parallelize(tv, if ty > 1 { 5 } else { 4 }, ParallelType::Unroll)?;
        }
        Ok(())
    };
    // The first reduction is the reference; every other full tensor takes its
    // transforms (and extents: inputs may spell equal sizes differently).
    let reference = reductions[0];
    schedule_full(&mut s, reference)?;
    let others: Vec<ValId> = reductions[1..].iter().chain(&full).copied().collect();
    if !others.is_empty() {
        s.transform_like(reference, &others)?;
        s.parallelize_like(reference, &others)?;
    }
    for &tv in &per_col {
        if v > 1 {
            s.split(tv, kept as i64 - 1, v)?;
            s.parallelize(tv, -1, ParallelType::Unroll)?;
        }
        for _ in 1..kept {
            s.merge(tv, 0)?;
        }
        s.split(tv, 0, tx)?;
        s.parallelize(tv, 0, ParallelType::BIDx)?;
        s.parallelize(tv, 1, ParallelType::TIDx)?;
    }
    for &(_, o) in &stores {
        s.parallelize(o, -1, ParallelType::Vectorize)?;
    }
    let unroll_axis = if ty > 1 { 5 } else { 4 };
    // Full outputs run in the reference's loops, row and vector loops included
    // (`compute_with`; a vector store's own dim excepted): what they share with the
    // reference (GELU backward's `dx`, one copy in the main nest of
    // `recompute_per_nest`) is computed once per element, stored and accumulated from
    // the same registers.
    let nest_loops = s.schedule().tensors[&reference].domain.loop_dims.len();
    let leaves: Vec<ValId> = super::distinct_outputs(&f)
        .into_iter()
        .filter(|&o| {
            // Not a keepdim broadcast of a sum (computed from the reference).
            has_reduced_elements(&f, o, rank, k)
                && full.contains(&o)
                && o != reference
                && s.schedule().uses(o).is_empty()
        })
        .collect();
    for o in leaves {
        let stored = stores.iter().any(|&(_, so)| so == o);
        s.compute_with(o, reference, nest_loops - usize::from(stored))?;
    }
    s.inline_most()?;
    for &(c, o) in &stores {
        s.compute_at(c, o, unroll_axis + 1)?;
    }
    if u > 1 || v > 1 {
        load_unrolled_rows_first(&mut s, unroll_axis, usize::from(v > 1))?;
    }
    if v > 1 {
        vectorize_row_loads(&mut s, p)?;
    }
    Ok(s)
}

/// The loop nest of an anchor of [`recompute_per_nest`]: the first reduction and every
/// full tensor (stored inside the reduction's loops, `compute_with`) share nest 0; every
/// other anchor (another reduction, per-column math) is a nest of its own.
fn nest_of(p: &OuterPlan, first: Option<ExprId>, id: ExprId, e: &Expr) -> usize {
    let full = reduction_axes(&e.op).is_none()
        && e.outputs
            .iter()
            .all(|&o| has_reduced_elements(&p.fusion, o, p.rank, p.k));
    if full || first == Some(id) {
        0
    } else {
        1 + id.index()
    }
}

/// The first live reduction of `f` (the schedule's reference).
fn first_reduction(f: &Fusion) -> Option<ExprId> {
    let live = f.live_exprs();
    f.exprs()
        .find(|(i, x)| live[i.index()] && reduction_axes(&x.op).is_some())
        .map(|(i, _)| i)
}

/// Marks the vector dim of every load of a full-row input ([`column_input`]) as a vector
/// access (the loads are computed at their reader's unroll dim, their own loops the
/// unrolled rows and the vector).
fn vectorize_row_loads(s: &mut ScheduledFusion, p: &OuterPlan) -> Result<(), ScheduleError> {
    let sched = s.schedule();
    let mut loads = Vec::new();
    for e in input_loads(sched) {
        if !column_input(p, e.inputs[0]) {
            continue;
        }
        let Some(t) = sched.tensors.get(&e.output) else {
            continue;
        };
        let last = t.domain.loop_dom(t.domain.loop_dims.len() - 1);
        if last.parallel == ParallelType::Unroll && last.kind == crate::ir::IterKind::Iteration {
            loads.push(e.output);
        }
    }
    for tv in loads {
        s.parallelize(tv, -1, ParallelType::Vectorize)?;
    }
    Ok(())
}

/// The copies of fusion tensor inputs into registers (loads) among the schedule's
/// expressions.
fn input_loads(sched: &crate::sched::Schedule) -> impl Iterator<Item = &crate::sched::SExpr> {
    sched.exprs.iter().filter(|e| {
        matches!(e.op, Op::Set)
            && e.inputs.len() == 1
            && sched.is_input(e.inputs[0])
            && sched.tensors.contains_key(&e.inputs[0])
    })
}

/// Gives each copy of a fusion input (a load) its own unrolled loop over the `unroll`
/// rows, ahead of the math: computed at its consumer's loop `unroll_axis` (the unroll
/// dim) rather than inside it. Inlined, each row's load sat behind the previous row's
/// accumulation in its own branch, one load in flight per thread (the SASS of a
/// column sum showed load, add, load, add); in their own loop the `unroll` loads are
/// issued together.
fn load_unrolled_rows_first(
    s: &mut ScheduledFusion,
    unroll_axis: usize,
    vec: usize,
) -> Result<(), ScheduleError> {
    let sched = s.schedule();
    let mut loads = Vec::new();
    for e in input_loads(sched) {
        let Some(&u) = sched.uses(e.output).first() else {
            continue;
        };
        let consumer = sched.exprs[u].output;
        let unrolled = |tv: ValId| {
            sched.tensors.get(&tv).is_some_and(|t| {
                t.domain.loop_dims.len() == unroll_axis + 1 + vec
                    && t.domain.loop_dom(unroll_axis).parallel == ParallelType::Unroll
            })
        };
        let one_use = sched.uses(e.output).len() == 1;
        if unrolled(e.output) && unrolled(consumer) && one_use {
            loads.push((e.output, consumer));
        }
    }
    // Ahead of the math too: a load's loop opened between two statements of the math
    // would split the math's unrolled loop in two. With one loop nest (one root tensor,
    // not computed at or with another: GELU backward's `dx` store runs in its bias
    // gradient's loops) the loads go to the kernel's start (`hoist`); with several
    // (two reductions, as LayerNorm backward's dw and db), each to the start of its
    // own nest (`hoist_in_nest`): hoisted all first, one nest's loads would reopen its
    // loop after another's had closed it.
    let mut roots: Vec<ValId> = loads.iter().map(|&(_, c)| sched.nest_root(c)).collect();
    roots.sort();
    roots.dedup();
    let one_nest = roots.len() == 1;
    for (load, consumer) in loads {
        s.compute_at(load, consumer, unroll_axis)?;
        if one_nest {
            s.hoist(load)?;
        } else {
            s.hoist_in_nest(load)?;
        }
    }
    Ok(())
}
