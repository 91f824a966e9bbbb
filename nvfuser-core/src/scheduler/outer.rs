//! The default schedule for reductions that are not over the innermost dims: one
//! output element per thread.
//!
//! Accepted: every reduction (sum, max, min, mean, prod, and the Welford-style var,
//! var_mean and welford) reduces the same set of dims `axes` of a rank-`r` tensor, where `axes` is not the innermost suffix of the dims (that
//! is the inner-reduction schedule's) and keeps at least one dim: the outermost `k`
//! dims (`[R.., I..]`, as the corpus `outer_sum`), dims in the middle (`sum(x, [1])` of
//! `[A, B, C]`), or any mix (`[0, 2]` of rank 3). Every other computed tensor is either
//! *full* (rank `r`, like the reduction inputs) or *per-output* (rank `r - k`, like the
//! reduction results). Broadcasts turn per-output values into full ones along the
//! reduced dims, or fusion inputs into full tensors.
//!
//! Schedule, after recomputing pointwise intermediates per use (see `recompute`): on
//! full tensors the loop dims are reordered so that the kept dims come first (in their
//! order) and the reduced ones last, without a permute of the data: `[I0, R, I1]`
//! becomes `[I0, I1, R]`. The kept dims are merged into one dim, split by [`THREADS`]
//! onto `blockIdx.x`/`threadIdx.x`, and the reduced dims are merged into one serial loop
//! innermost. Each thread reduces its own output element serially (a Welford update per
//! element for var/var_mean/welford, whose sibling outputs follow the first), so there
//! is no block reduction and no synchronization; when the innermost dim is kept (outer and middle
//! reductions), consecutive threads read consecutive elements. Per-output tensors merge
//! their dims and take the same split. Everything is inlined.

use super::analysis::{is_welford, logical_rank, reduction_axes};
use super::recompute::{push_broadcasts, recompute_per_use};
use super::{not_supported, DefaultScheduleError, THREADS};
use crate::ir::{Fusion, Op, ValId};
use crate::sched::{ParallelType, ScheduledFusion};

/// The `(rank, reduced axes)` of a fusion whose live reductions (Welford-style ones
/// included) all reduce the same axes, not the innermost suffix of the dims and not all
/// of them; `None` when some reduction is not of that form.
pub(crate) fn outer_axes(fusion: &Fusion) -> Option<(usize, Vec<usize>)> {
    let live = fusion.live_exprs();
    let mut shape: Option<(usize, Vec<usize>)> = None;
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        let Some(axes) = reduction_axes(&e.op) else {
            continue;
        };
        let r = logical_rank(fusion, e.outputs[0]).unwrap_or(0);
        let k = axes.len();
        let mut sorted = axes.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let inner = sorted.iter().enumerate().all(|(i, &a)| a == r - k + i);
        if k == 0 || k >= r || sorted.len() != k || inner {
            return None;
        }
        match &shape {
            None => shape = Some((r, sorted)),
            Some(s) if *s != (r, sorted) => return None,
            Some(_) => {}
        }
    }
    shape
}

/// The `(rank, k)` of a fusion whose live reductions all reduce the same `k < rank`
/// dims other than the innermost ones (see [`outer_axes`]), or `None`.
pub(crate) fn outer_shape(fusion: &Fusion) -> Option<(usize, usize)> {
    outer_axes(fusion).map(|(r, axes)| (r, axes.len()))
}

/// Schedules a fusion of reductions that are not over the innermost dims, and pointwise
/// ops (see the module documentation).
pub fn schedule(fusion: &Fusion) -> Result<ScheduledFusion, DefaultScheduleError> {
    let Some((rank, axes)) = outer_axes(fusion) else {
        return not_supported(
            "reductions that are not all over the same dims (other than the innermost ones)",
        );
    };
    let k = axes.len();
    let kept = rank - k;
    let reduced = |i: usize| axes.contains(&i);

    let rewritten = recompute_per_use(&push_broadcasts(fusion))?;
    let f = &rewritten;
    super::analysis::check_mapped_to_reduction(f, &axes)
        .map_err(|u| u.to_string())
        .or_else(not_supported)?;
    let live = f.live_exprs();
    let mut full: Vec<ValId> = Vec::new();
    let mut per_out: Vec<ValId> = Vec::new();
    let mut reductions: Vec<ValId> = Vec::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let out = e.outputs[0];
        let r = logical_rank(f, out).unwrap_or(0);
        if matches!(e.op, Op::Reduction { .. }) || is_welford(&e.op) {
            // Welford siblings (var_mean's mean, welford's m2 and count) follow the
            // first output's transforms.
            reductions.push(out);
            continue;
        }
        if let Op::Broadcast { mask } = &e.op {
            let input = e.inputs[0];
            let along_reduced =
                mask.len() == rank && mask.iter().enumerate().all(|(i, &m)| m == reduced(i));
            if f.input_position(input).is_none() && !along_reduced {
                return not_supported(format!(
                    "{out} broadcasts the computed value {input} along dims {:?}; only per-output values can be broadcast along the reduced dims {axes:?} (and fusion inputs in any way)",
                    mask.iter().enumerate().filter(|(_, &m)| m).map(|(i, _)| i).collect::<Vec<_>>()
                ));
            }
        }
        if r == rank {
            full.push(out);
        } else if r == kept {
            per_out.push(out);
        } else {
            return not_supported(format!(
                "{out} has {r} dims; expected {rank} (like the reduction inputs) or {kept} (per-output values)"
            ));
        }
    }

    let mut s = ScheduledFusion::new(rewritten.clone())?;
    // Outputs other tensors read: the readers take a register copy, scheduled as the
    // output was (a reduction's copy is the reduction; the output a per-output store).
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
            per_out.push(o);
        } else if full.contains(&o) {
            full.push(c);
        } else {
            per_out.push(c);
        }
    }
    // Kept dims first, reduced dims last: new loop dim `i` is old dim `order[i]`.
    let order: Vec<i64> = (0..rank)
        .filter(|&i| !reduced(i))
        .chain(axes.iter().copied())
        .map(|i| i as i64)
        .collect();
    let identity = order.iter().enumerate().all(|(i, &o)| o == i as i64);
    // [I0, R, I1] -> [I0, I1, R] -> [I, R] -> [Io, Ii, R].
    let schedule_full = |s: &mut ScheduledFusion, tv: ValId| -> Result<(), DefaultScheduleError> {
        if !identity {
            s.reorder(tv, &order)?;
        }
        for _ in 1..k {
            s.merge(tv, kept as i64)?;
        }
        for _ in 1..kept {
            s.merge(tv, 0)?;
        }
        s.split(tv, 0, THREADS)?;
        s.parallelize(tv, 0, ParallelType::BIDx)?;
        s.parallelize(tv, 1, ParallelType::TIDx)?;
        Ok(())
    };
    // The first reduction is the reference; every other full tensor replays its
    // transforms, so a dim a tensor broadcasts takes the extent the reference gives it
    // and a merged loop splits back into the right indices (see `transform_like`).
    let Some(&reference) = reductions.first() else {
        return not_supported("no live reduction");
    };
    schedule_full(&mut s, reference)?;
    let others: Vec<ValId> = reductions[1..].iter().chain(&full).copied().collect();
    if !others.is_empty() {
        s.transform_like(reference, &others)?;
        s.parallelize_like(reference, &others)?;
    }
    for &tv in &per_out {
        for _ in 1..kept {
            s.merge(tv, 0)?;
        }
        s.split(tv, 0, THREADS)?;
        s.parallelize(tv, 0, ParallelType::BIDx)?;
        s.parallelize(tv, 1, ParallelType::TIDx)?;
    }
    s.inline_most()?;
    Ok(s)
}
