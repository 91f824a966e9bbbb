//! The default outer-reduction schedule: one column per thread.
//!
//! Accepted: every reduction (sum, max, min, mean, prod) reduces the outermost `k`
//! dims of a rank-`r` tensor, `0 < k < r` (the same `r` and `k` for all), and every
//! other computed tensor is either *full* (rank `r`, like the reduction inputs) or
//! *per-column* (rank `r - k`, like the reduction results). Broadcasts turn per-column
//! values into full ones along the reduced dims, or fusion inputs into full tensors.
//!
//! Schedule, as the corpus `outer_sum`, after recomputing pointwise intermediates per
//! use (see `recompute`): on full tensors the outer `k` (reduced) dims are merged into
//! one row dim and the inner `r - k` dims into one column dim; the column dim is split
//! by [`THREADS`] onto `blockIdx.x`/`threadIdx.x` and the row dim becomes a serial loop
//! innermost. Each thread reduces its own column serially, so there is no block
//! reduction, no synchronization and warps read rows coalesced. Per-column tensors
//! merge their dims and take the same split. Everything is inlined.

use super::analysis::{is_welford, logical_rank, reduction_axes};
use super::recompute::{push_broadcasts, recompute_per_use};
use super::{not_supported, DefaultScheduleError, THREADS};
use crate::ir::{Fusion, Op, ValId};
use crate::sched::{ParallelType, ScheduledFusion};

/// The `(rank, k)` of a fusion whose live reductions all reduce the same outermost
/// `k < rank` dims, or `None` when some reduction is not of that form.
pub(crate) fn outer_shape(fusion: &Fusion) -> Option<(usize, usize)> {
    let live = fusion.live_exprs();
    let mut shape = None;
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        if is_welford(&e.op) {
            return None;
        }
        let Some(axes) = reduction_axes(&e.op) else {
            continue;
        };
        let r = logical_rank(fusion, e.outputs[0]).unwrap_or(0);
        let k = axes.len();
        let outer = k > 0 && k < r && axes.iter().enumerate().all(|(i, &a)| a == i);
        if !outer {
            return None;
        }
        match shape {
            None => shape = Some((r, k)),
            Some(s) if s != (r, k) => return None,
            Some(_) => {}
        }
    }
    shape
}

/// Schedules a fusion of outer reductions and pointwise ops (see the module
/// documentation).
pub fn schedule(fusion: &Fusion) -> Result<ScheduledFusion, DefaultScheduleError> {
    let Some((rank, k)) = outer_shape(fusion) else {
        return not_supported("reductions that are not all over the same outermost dims");
    };
    let inner = rank - k;

    let rewritten = recompute_per_use(&push_broadcasts(fusion))?;
    let f = &rewritten;
    let live = f.live_exprs();

    let mut full: Vec<ValId> = Vec::new();
    let mut per_col: Vec<ValId> = Vec::new();
    let mut reductions: Vec<ValId> = Vec::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let out = e.outputs[0];
        let r = logical_rank(f, out).unwrap_or(0);
        if matches!(e.op, Op::Reduction { .. }) {
            reductions.push(out);
            continue;
        }
        if let Op::Broadcast { mask } = &e.op {
            let input = e.inputs[0];
            let leading = mask.len() == rank && mask.iter().enumerate().all(|(i, &m)| m == (i < k));
            if f.input_position(input).is_none() && !leading {
                return not_supported(format!(
                    "{out} broadcasts the computed value {input} along dims {:?}; only per-column values can be broadcast along the reduced dims (and fusion inputs in any way)",
                    mask.iter().enumerate().filter(|(_, &m)| m).map(|(i, _)| i).collect::<Vec<_>>()
                ));
            }
        }
        if r == rank {
            full.push(out);
        } else if r == inner {
            per_col.push(out);
        } else {
            return not_supported(format!(
                "{out} has {r} dims; expected {rank} (like the reduction inputs) or {inner} (per-column values)"
            ));
        }
    }

    let mut s = ScheduledFusion::new(rewritten.clone())?;
    // [R.., I..] -> [R, I] -> [R, Io, Ii] -> [Io, Ii, R].
    let schedule_full = |s: &mut ScheduledFusion, tv: ValId| -> Result<(), DefaultScheduleError> {
        for _ in 1..inner {
            s.merge(tv, k as i64)?;
        }
        for _ in 1..k {
            s.merge(tv, 0)?;
        }
        s.split(tv, 1, THREADS)?;
        s.reorder(tv, &[1, 2, 0])?;
        s.parallelize(tv, 0, ParallelType::BIDx)?;
        s.parallelize(tv, 1, ParallelType::TIDx)?;
        Ok(())
    };
    for &tv in reductions.iter().chain(&full) {
        schedule_full(&mut s, tv)?;
    }
    for &tv in &per_col {
        for _ in 1..inner {
            s.merge(tv, 0)?;
        }
        s.split(tv, 0, THREADS)?;
        s.parallelize(tv, 0, ParallelType::BIDx)?;
        s.parallelize(tv, 1, ParallelType::TIDx)?;
    }
    s.inline_most()?;
    Ok(s)
}
