//! Inner reductions and inner persistent normalizations.
//!
//! Both take fusions whose reductions all reduce the same innermost `k` dims of rank-`r`
//! tensors, with every computed tensor either *full* (rank `r`) or *per-row* (rank
//! `r - k`). The rows (outer dims, merged) go to `blockIdx.x`, `rows_per_block` of them
//! per block on `threadIdx.y` (when a tensor is broadcast in the leading row dims but
//! not the last, as a `[S, T]` mask of `[B, S, T]` scores, the last row dim goes to
//! `blockIdx.x` and the others to `blockIdx.y`); the reduced dims (merged, extent `H`) are split into
//! `[grid_split, serial, unroll, threads_x, vectorize]`; each reduction accumulates its
//! serial, unrolled and vector parts per thread and then combines across `threadIdx.x`
//! (and across blocks on `blockIdx.y` when `grid_split > 1`). Full-rank inputs are read
//! with vector loads into registers, full-rank outputs written with vector stores.
//!
//! *Reduction* (no per-row value is broadcast back over the row, or a row too long to
//! keep): pointwise intermediates are recomputed per use, so a row is streamed, any `H`
//! works and nothing is kept across the serial loop.
//!
//! *Persistent* (a normalization: softmax, LayerNorm, RMSNorm): the kernel is compiled
//! for one `H` (`PersistentParams::hidden`), so the serial part has a constant extent
//! (`batch`), and the row is read once into registers (`batch × vectorize` elements per
//! thread per kept tensor) and reused by every later phase (reduction, epilogue).
//!
//! Creation ops (`full`, `iota`, `uniform`, `normal`) of the rows' shape are taken like
//! pointwise math: they read no memory, and the random streams are keyed on the
//! element's linear index, so each value is computed where it is used (dropout's mask
//! beside a LayerNorm). A rank-1 `iota` broadcast along the rows is a broadcast of a
//! computed value, which these schedules refuse; the registry folds such broadcasts of
//! `iota`/`full` into the creation op first (`scheduler::fold_creation_broadcasts`), and
//! so does the plan after pushing broadcasts above math.

mod heuristics;

use crate::scheduler::unfit::{ReducedSide, Takes, Unfit};
pub(crate) use heuristics::{persistent_heuristics, reduction_heuristics};
use std::collections::BTreeSet;

use super::inner_outer::{self, Columns};
use super::{
    const_factor, logical_kinds, mark_vector_dims, product_dims, specialize, vector_readable, Plan,
};
use crate::ir::{Extent, Fusion, IterKind, Op, ValId};
use crate::sched::{ParallelType, ScheduleError, ScheduledFusion};
use crate::scheduler::analysis::{
    check_exactly_mapped_except, is_creation, is_input_squeeze, is_pointwise, reduction_axes,
};
use crate::scheduler::params::{PersistentParams, ReductionParams};
use crate::scheduler::recompute::{project_to_inputs, push_broadcasts, recompute_per_use};

pub(crate) use super::rewrites::{divide_by_reciprocal, two_pass_moments};

/// The fusion-level analysis.
pub(crate) struct InnerPlan {
    /// Broadcasts pushed to the inputs (same inputs and outputs as the fusion).
    pub fusion: Fusion,
    pub rank: usize,
    /// Number of reduced innermost dims.
    pub k: usize,
    /// True when a per-row value is broadcast back over the row (a normalization).
    pub normalization: bool,
    /// True when every reduction is a plain reduction whose result is only a fusion
    /// output (a grid reduction is possible).
    pub grid_ok: bool,
    /// The reduced dims' extents (of the reference).
    pub reduced: Vec<Extent>,
    /// The row dims' extents.
    pub rows: Vec<Extent>,
    /// The last row dim goes to `blockIdx.x` alone and the others (merged) to
    /// `blockIdx.y`: some tensor is broadcast in the leading row dims but not in the
    /// last one (an attention mask `[S, T]` added to scores `[B, S, T]`), so the row
    /// dims cannot be merged into one index.
    pub split_rows: bool,
    /// Outer reductions beside the inner ones and the math on their results (an
    /// inner-outer normalization: see `inner_outer`); empty otherwise.
    pub columns: Columns,
}

/// Whether `tv` mixes broadcast and iteration dims among the `outer` row dims, which
/// are merged into one index. Mixed only in the last one, the leading dims are merged
/// apart from it (`split_rows`: true); mixed in the leading ones, refused. Per-row
/// tensors too (every dim a row dim: `iota(X)` broadcast to `[1, X]` beside `[4, X]`
/// rows bound `blockIdx.x` to `X` and to `4 * X`, GPU fuzz seed 10603824).
fn mixes_row_broadcast(s: &ScheduledFusion, tv: ValId, outer: usize) -> Plan<bool> {
    let kinds = logical_kinds(s, tv);
    let broadcast = |ks: &[IterKind]| ks.iter().filter(|&&x| x == IterKind::Broadcast).count();
    let b = broadcast(&kinds[..outer]);
    if b == 0 || b == outer {
        return Ok(false);
    }
    let lead = broadcast(&kinds[..outer - 1]);
    if lead != 0 && lead != outer - 1 {
        return Err(Unfit::MixedRowBroadcast { tensor: tv });
    }
    Ok(true)
}

pub(crate) fn plan(fusion: &Fusion) -> Plan<InnerPlan> {
    super::check_fusion(fusion)?;
    let live = fusion.live_exprs();
    let mut shape: Option<(usize, usize)> = None;
    let mut reference = None;
    let mut grid_ok = true;
    let outputs: BTreeSet<ValId> = fusion.outputs().iter().map(|o| o.val).collect();
    let uses = fusion.uses();
    let cols = inner_outer::find_columns(fusion);
    for (id, e) in fusion.exprs() {
        if !live[id.index()] || cols.contains(e.outputs[0]) {
            continue;
        }
        let Some(axes) = reduction_axes(&e.op) else {
            if !is_pointwise(&e.op) && !is_creation(&e.op) && !is_input_squeeze(fusion, e) {
                return Err(Unfit::Op {
                    op: e.op.name().into(),
                    takes: Takes::PointwiseAndReductions,
                });
            }
            continue;
        };
        let r = fusion
            .tensor_type(e.outputs[0])
            .map_or(0, |t| t.domain.len());
        let k = axes.len();
        if k == 0 || !axes.iter().enumerate().all(|(i, &a)| a == r - k + i) {
            return Err(Unfit::ReductionAxes {
                op: e.op.name().into(),
                axes: axes.to_vec(),
                rank: r,
                side: ReducedSide::Innermost,
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
        let plain = matches!(e.op, Op::Reduction { .. });
        let only_output = e
            .outputs
            .iter()
            .all(|o| outputs.contains(o) && uses[o.index()].iter().all(|u| !live[u.index()]));
        grid_ok &= plain && only_output;
    }
    let (Some((rank, k)), Some(reference)) = (shape, reference) else {
        return Err(Unfit::NoReduction);
    };
    let outer = rank - k;
    // Broadcasts pushed above math may reach creation ops (a causal mask's `col <=
    // row` of two iotas broadcast over the batch): folded into them, they are computed
    // in the rows' loops like any creation op.
    let pushed = push_broadcasts(fusion);
    let pushed = super::super::fold_creation_broadcasts(&pushed).unwrap_or(pushed);
    let cols = if cols.is_empty() {
        cols
    } else {
        inner_outer::find_columns(&pushed)
    };
    let s = ScheduledFusion::new(pushed.clone()).map_err(super::unschedulable)?;
    let live = pushed.live_exprs();
    let mut normalization = false;
    let mut split_rows = false;
    for (id, e) in pushed.exprs() {
        if !live[id.index()] || cols.contains(e.outputs[0]) {
            continue;
        }
        let out = e.outputs[0];
        let r = pushed.tensor_type(out).map_or(0, |t| t.domain.len());
        if let Op::Broadcast { mask } = &e.op {
            let input = e.inputs[0];
            if pushed.input_position(input).is_none() {
                let trailing =
                    mask.len() == rank && mask.iter().enumerate().all(|(i, &m)| m == (i >= outer));
                if !trailing {
                    return Err(Unfit::BroadcastAlongRows { tensor: out, input });
                }
                normalization = true;
            }
        }
        if r != rank && r != outer {
            return Err(Unfit::TensorRank {
                tensor: out,
                rank: r,
                full: rank,
                reduced: outer,
            });
        }
        if (r == rank || r == outer) && outer > 1 && reduction_axes(&e.op).is_none() {
            split_rows |= mixes_row_broadcast(&s, out, outer)?;
        }
    }
    // Inputs too: a per-row `[A, 1]` input added to `[A, B]` row results (GPU fuzz
    // seed 11337506: `blockIdx.x` bound to `A * B / 4` and to `A / 4`).
    for &i in pushed.inputs() {
        let r = pushed.tensor_type(i).map_or(0, |t| t.domain.len());
        if (r == rank || r == outer) && outer > 1 && s.schedule().tensors.contains_key(&i) {
            split_rows |= mixes_row_broadcast(&s, i, outer)?;
        }
    }
    let t = pushed
        .tensor_type(reference)
        .ok_or(Unfit::NoReference { value: reference })?;
    // Every tensor takes the reference's loop structure (and a persistent kernel its
    // compiled hidden size): a row of another extent is not this schedule's row.
    let all: Vec<Extent> = t.domain.iter().map(|d| d.extent.clone()).collect();
    check_exactly_mapped_except(&pushed, &all, &all[..outer], &cols.derived)?;
    inner_outer::check(&cols, split_rows)?;
    if !cols.is_empty() {
        // Column tensors against the reduced dims.
        let derived: Vec<ValId> = live_outputs(&pushed)
            .into_iter()
            .filter(|v| !cols.derived.contains(v))
            .collect();
        check_exactly_mapped_except(&pushed, &all[outer..], &all[outer..], &derived)?;
    }
    let reduced = t.domain[outer..].iter().map(|d| d.extent.clone()).collect();
    let rows = t.domain[..outer].iter().map(|d| d.extent.clone()).collect();
    Ok(InnerPlan {
        fusion: pushed,
        rank,
        k,
        normalization,
        // A grid reduction splits rows over `blockIdx.y`, which split rows take.
        grid_ok: grid_ok && !split_rows && cols.is_empty(),
        reduced,
        rows,
        split_rows,
        columns: cols,
    })
}

/// Every tensor a live expression of `f` computes.
fn live_outputs(f: &Fusion) -> Vec<ValId> {
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, _)| live[id.index()])
        .flat_map(|(_, e)| e.outputs.iter().copied())
        .collect()
}

/// The shape of the split of the reduced dims.
struct Split {
    v: i64,
    tx: i64,
    y: i64,
    unroll: i64,
    grid: i64,
    persistent: bool,
    /// Inner-outer: rows in a serial loop over this many blocks (0: one row per block).
    row_blocks: i64,
}

pub(crate) fn schedule_reduction(
    p: &InnerPlan,
    params: &ReductionParams,
) -> Result<ScheduledFusion, ScheduleError> {
    let f = recompute_per_use(&p.fusion).map_err(|e| ScheduleError::Unsupported(e.to_string()))?;
    schedule(
        p,
        f,
        &Split {
            v: params.vectorize,
            tx: params.threads_x,
            y: params.rows_per_block,
            unroll: params.unroll,
            grid: params.grid_split,
            persistent: false,
            row_blocks: 0,
        },
    )
}

pub(crate) fn schedule_persistent(
    p: &InnerPlan,
    params: &PersistentParams,
) -> Result<ScheduledFusion, ScheduleError> {
    let mut dims = Vec::new();
    let mut factor = 1i64;
    for e in &p.reduced {
        product_dims(e, &mut dims);
        factor = factor.saturating_mul(const_factor(e));
    }
    // The reduced extent is compiled in: with one reduced input dim it takes `hidden`
    // divided by the constant factors beside it (a full reduction of `[T0.size(0), 256]`
    // binds `T0.size(0)` to `hidden / 256`, not to `hidden`: every other tensor with
    // that dim, an output included, has its real size); with several, each must
    // already be known (the product is checked).
    let fixed: Vec<(ValId, u32, i64)> =
        if dims.len() == 1 && factor > 0 && params.hidden % factor == 0 {
            vec![(dims[0].0, dims[0].1, params.hidden / factor)]
        } else {
            Vec::new()
        };
    let mut f = specialize(&divide_by_reciprocal(&two_pass_moments(&p.fusion)), &fixed);
    if params.project_to_inputs {
        f = project_to_inputs(&f).map_err(|e| ScheduleError::Unsupported(e.to_string()))?;
    }
    schedule(
        p,
        f,
        &Split {
            v: params.vectorize,
            tx: params.threads_x,
            y: params.rows_per_block,
            unroll: 1,
            grid: 1,
            persistent: true,
            row_blocks: params.row_blocks,
        },
    )
}

fn schedule(p: &InnerPlan, f: Fusion, sp: &Split) -> Result<ScheduledFusion, ScheduleError> {
    let rank = p.rank;
    let outer = rank - p.k;
    let mut s = ScheduledFusion::new(f.clone())?;
    // Inner-outer: the column tensors of this fusion (the rewrites keep their ids), the
    // outer reductions in registers (an output gets a copy that stores it).
    let cols = if sp.row_blocks > 0 {
        inner_outer::find_columns(&f)
    } else {
        Columns::default()
    };
    if sp.row_blocks > 0 && cols.is_empty() {
        return Err(ScheduleError::Unsupported(
            "inner-outer params for a fusion without outer reductions".into(),
        ));
    }
    let (outer_reds, column_tensors) = inner_outer::cache_outputs(&f, &mut s, &cols)?;
    let Roles {
        loads,
        reductions,
        per_row,
        full,
        stores,
    } = roles(&f, &mut s, rank, sp, &cols)?;
    let reference = reductions[0];
    let names = split_reference(&mut s, p, sp, reference)?;
    let targets: Vec<ValId> = reductions[1..]
        .iter()
        .chain(&outer_reds)
        .chain(&full)
        .chain(&loads)
        .chain(&stores)
        .copied()
        .filter(|&t| t != reference)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !targets.is_empty() {
        s.transform_like(reference, &targets)?;
    }
    let all_full: Vec<ValId> = std::iter::once(reference)
        .chain(targets.iter().copied())
        .collect();
    for &tv in &all_full {
        for (i, name) in names.iter().enumerate() {
            let pt = match *name {
                "row" => ParallelType::BIDx,
                "lead" => ParallelType::BIDy,
                "y" => ParallelType::TIDy,
                "grid" => ParallelType::BIDy,
                "tx" => ParallelType::TIDx,
                "unroll" => ParallelType::Unroll,
                "serial" if sp.persistent => ParallelType::Unroll,
                _ => continue,
            };
            s.parallelize(tv, i as i64, pt)?;
        }
    }
    let mut vectorized: Vec<ValId> = loads.iter().chain(&stores).copied().collect();
    if sp.persistent {
        vectorized.extend(broadcast_vector_inputs(&f).into_iter().map(|(b, _)| b));
    }
    let unrolled: Vec<ValId> = all_full
        .iter()
        .copied()
        .filter(|t| !vectorized.contains(t))
        .collect();
    mark_vector_dims(&mut s, sp.v, &vectorized, &unrolled)?;
    // Per-row tensors: the rows as the reference has them (`[row, y?]`, or
    // `[lead, row, y?]` with split rows).
    let lead = usize::from(p.split_rows);
    for &tv in &per_row {
        if !s.schedule().tensors.contains_key(&tv) {
            continue;
        }
        for _ in 1 + lead..outer {
            s.merge(tv, 0)?;
        }
        if outer > 0 && sp.row_blocks > 0 {
            s.split(tv, 0, sp.row_blocks)?;
            s.parallelize(tv, 1, ParallelType::BIDx)?;
        } else if outer > 0 {
            let row = lead as i64;
            if sp.y > 1 {
                s.split(tv, row, sp.y)?;
                s.parallelize(tv, row + 1, ParallelType::TIDy)?;
            }
            s.parallelize(tv, row, ParallelType::BIDx)?;
            if lead == 1 {
                s.parallelize(tv, 0, ParallelType::BIDy)?;
            }
        }
    }
    if sp.row_blocks > 0 {
        inner_outer::schedule_columns(&mut s, &column_tensors, p.k, sp.v, sp.tx)?;
        // The column sums accumulate in the row loop: `[rows, row]` shared.
        for &r in &outer_reds {
            s.compute_with(r, reference, 2)?;
        }
    }
    s.inline_most()?;
    Ok(s)
}

/// The tensors [`schedule`] treats alike, with the caches it adds for them.
struct Roles {
    /// Vector loads of full-rank inputs.
    loads: Vec<ValId>,
    /// Reduction results (Welford siblings follow the first output).
    reductions: Vec<ValId>,
    /// Tensors with one value per row (and forked reduction outputs).
    per_row: Vec<ValId>,
    /// Full-rank tensors.
    full: Vec<ValId>,
    /// Vector stores of full-rank outputs.
    stores: Vec<ValId>,
}

/// Sorts the live tensors of `f` into their [`Roles`], adding the load, fork and store
/// caches to `s`.
fn roles(
    f: &Fusion,
    s: &mut ScheduledFusion,
    rank: usize,
    sp: &Split,
    cols: &Columns,
) -> Result<Roles, ScheduleError> {
    let live = f.live_exprs();
    let live: Vec<bool> = f
        .exprs()
        .map(|(id, e)| live[id.index()] && !cols.contains(e.outputs[0]))
        .collect();
    let is_output = |v: ValId| f.outputs().iter().any(|o| o.val == v);
    let is_read = |v: ValId| {
        f.exprs()
            .any(|(id, e)| live[id.index()] && e.inputs.contains(&v))
    };
    // Vector loads: persistent kernels cache each full-rank input once; streaming
    // kernels already read each input through a per-use `set` (recompute_per_use).
    let mut loads: Vec<ValId> = Vec::new();
    let full_rank_input = |v: ValId| {
        f.tensor_type(v).is_some_and(|t| {
            t.rank() == rank && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
        })
    };
    if sp.persistent {
        for &inp in f.inputs() {
            if full_rank_input(inp) && is_read(inp) {
                loads.push(s.cache_after(inp)?);
            }
        }
    } else {
        for (id, e) in f.exprs() {
            if live[id.index()]
                && matches!(e.op, Op::Set)
                && f.input_position(e.inputs[0]).is_some()
                && full_rank_input(e.inputs[0])
            {
                loads.push(e.outputs[0]);
            }
        }
    }
    // Reductions (with their Welford siblings following the first output).
    let mut reductions: Vec<ValId> = Vec::new();
    let mut per_row: Vec<ValId> = Vec::new();
    let mut full: Vec<ValId> = Vec::new();
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
            per_row.push(out);
        }
    }
    // Outputs also read in the kernel: the readers get a register copy and the output
    // only stores it. A reduction result, or a keepdim per-row value (`mean` of a
    // LayerNorm written with sums: broadcast in the reduced dims, so the dims mapped to
    // `threadIdx.x` make it one thread's store), is written by one thread; reading it
    // back from global memory races with that store.
    let mut forked: Vec<ValId> = Vec::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let reduction = reduction_axes(&e.op).is_some();
        for &o in &e.outputs {
            if !is_output(o) || !is_read(o) {
                continue;
            }
            let c = s.cache_fork(o)?;
            if reduction {
                for r in reductions.iter_mut().filter(|r| **r == o) {
                    *r = c;
                }
                per_row.push(o);
            } else if full.contains(&o) {
                full.push(c);
                forked.push(o);
            } else {
                per_row.push(c);
            }
        }
    }
    // Vector stores of full-rank outputs.
    let mut stores: Vec<ValId> = Vec::new();
    let inner_is_broadcast = |v: ValId| {
        f.tensor_type(v)
            .and_then(|t| t.shape().last().map(|d| d.is_broadcast_like()))
            .unwrap_or(true)
    };
    for o in super::distinct_outputs(f) {
        if full.contains(&o) && sp.v > 1 && !inner_is_broadcast(o) {
            // A forked output already is a copy of its register tensor.
            if !forked.contains(&o) {
                let c = s.cache_before(o)?;
                full.push(c);
            }
            stores.push(o);
        }
    }
    Ok(Roles {
        loads,
        reductions,
        per_row,
        full,
        stores,
    })
}

/// Splits the reference's dims into `[lead?, row, y?, grid?, serial, unroll?, tx, v]`
/// and returns the name of each loop dim.
fn split_reference(
    s: &mut ScheduledFusion,
    p: &InnerPlan,
    sp: &Split,
    reference: ValId,
) -> Result<Vec<&'static str>, ScheduleError> {
    let rank = p.rank;
    let outer = rank - p.k;
    // Reduced dims: merge, then [grid?, serial, unroll?, tx, v].
    // The vector is an inner split of the innermost dim, taken before the merges.
    let o = outer as i64;
    s.split(reference, rank as i64 - 1, sp.v)?;
    for _ in 1..p.k {
        s.merge(reference, o)?;
    }
    s.split(reference, o, sp.tx)?;
    let mut axes_after_rows = vec!["serial", "tx", "v"];
    if sp.unroll > 1 {
        s.split(reference, o, sp.unroll)?;
        axes_after_rows = vec!["serial", "unroll", "tx", "v"];
    }
    if sp.grid > 1 {
        s.split_outer(reference, o, sp.grid)?;
        axes_after_rows.insert(0, "grid");
    }
    // Row dims: merged into one, or with split rows the leading ones merged apart
    // from the last.
    let lead = usize::from(p.split_rows);
    for _ in 1 + lead..outer {
        s.merge(reference, 0)?;
    }
    let mut names: Vec<&'static str> = Vec::new();
    if outer > 0 && sp.row_blocks > 0 {
        // Inner-outer: `[rows (serial), row (blockIdx.x)]`.
        s.split(reference, 0, sp.row_blocks)?;
        names.extend(["rows", "row"]);
    } else if outer > 0 {
        if lead == 1 {
            names.push("lead");
        }
        names.push("row");
        if sp.y > 1 {
            s.split(reference, lead as i64, sp.y)?;
            names.push("y");
        }
    }
    names.extend(axes_after_rows);
    Ok(names)
}

/// Broadcasts of fusion inputs that keep the input's innermost dim as the output's
/// innermost (a `[H]` weight read as `[1, H]`), with a contiguous innermost dim: their
/// reads can be vector copies. As `(broadcast output, input)`.
pub(crate) fn broadcast_vector_inputs(f: &Fusion) -> Vec<(ValId, ValId)> {
    let live = f.live_exprs();
    f.exprs()
        .filter(|(id, e)| {
            live[id.index()]
                && matches!(&e.op, Op::Broadcast { mask } if mask.last() == Some(&false))
                && f.input_position(e.inputs[0]).is_some()
                && f.tensor_type(e.inputs[0]).is_some_and(|t| {
                    vector_readable(t) && t.shape().last().is_some_and(|d| !d.is_broadcast_like())
                })
        })
        .map(|(_, e)| (e.outputs[0], e.inputs[0]))
        .collect()
}
