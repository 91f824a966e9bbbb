//! The default inner-reduction schedule: one row per block.
//!
//! Accepted: every reduction (sum, max, min, mean, prod) reduces the innermost `k` dims
//! of a rank-`r` tensor (the same `r` and `k` for all), and every other computed tensor
//! is either *full* (rank `r`, like the reduction inputs) or *per-row* (rank `r - k`,
//! like the reduction results). Broadcasts turn per-row values into full ones along the
//! reduced dims, or fusion inputs (a weight `[H]`) into full tensors.
//!
//! Schedule, after recomputing pointwise intermediates per use (see `recompute`): on
//! full tensors the outer `r - k` dims are merged into one row dim bound to
//! `blockIdx.x`, the inner `k` dims are merged and split by [`THREADS`] into a serial
//! loop and `threadIdx.x` (the last chunk predicated, so any row length works);
//! sum/max/min/prod reductions are rfactored over the serial loop (per-thread partial
//! results, then a block reduction), a mean reduces serially and across the block
//! directly, and so do var, var_mean and welford (a serial Welford update, then a block
//! Welford combine; their sibling outputs follow the first). Per-row tensors merge their dims onto `blockIdx.x`. Everything is inlined.

use super::analysis::{is_welford, logical_rank, reduction_axes};
use super::recompute::{push_broadcasts, recompute_per_use};
use super::{not_supported, DefaultScheduleError, THREADS};
use crate::ir::{Fusion, Op, ReductionOp, ValId};
use crate::sched::{ParallelType, ScheduledFusion};

/// Schedules a fusion of inner reductions and pointwise ops (see the module
/// documentation).
pub fn schedule(fusion: &Fusion) -> Result<ScheduledFusion, DefaultScheduleError> {
    let (rank, k) = reduced_shape(fusion)?;
    let outer = rank - k;

    let rewritten = recompute_per_use(&push_broadcasts(fusion))?;
    let f = &rewritten;
    super::analysis::check_mapped_to_reduction(f, &(outer..rank).collect::<Vec<_>>())
        .map_err(|u| u.to_string())
        .or_else(not_supported)?;
    let live = f.live_exprs();

    let Classes {
        mut full,
        mut per_row,
        mut reductions,
    } = classify(f, &live, rank, outer)?;

    let mut s = ScheduledFusion::new(rewritten.clone())?;
    // An output that other tensors also read gets a register copy (`cache_fork`, as the
    // corpus `layer_norm_bf16`), scheduled as the output was, and the output itself is
    // only stored: a reduction result (or a sibling of a Welford) by thread 0 of the
    // block, per row.
    let reduced_by = |v: ValId| {
        f.exprs().any(|(id, e)| {
            live[id.index()] && reduction_axes(&e.op).is_some() && e.outputs.contains(&v)
        })
    };
    // Every output is only stored (no kernel reads an output back from global memory).
    for (o, c) in s.fork_read_outputs(|_| true)? {
        if reduced_by(o) {
            for r in reductions.iter_mut().filter(|r| r.0 == o) {
                r.0 = c;
            }
            per_row.push(o);
        } else if full.contains(&o) {
            full.push(c);
        } else {
            per_row.push(c);
        }
    }
    // Row dim (when there is one) at 0, the row's elements from `ax`.
    let ax: i64 = if outer > 0 { 1 } else { 0 };
    let bind_full = |s: &mut ScheduledFusion, tv: ValId| -> Result<(), DefaultScheduleError> {
        if outer > 0 {
            s.parallelize(tv, 0, ParallelType::BIDx)?;
        }
        s.parallelize(tv, ax + 1, ParallelType::TIDx)?;
        Ok(())
    };
    let merge_rows = |s: &mut ScheduledFusion, tv: ValId| -> Result<(), DefaultScheduleError> {
        for _ in 1..outer {
            s.merge(tv, 0)?;
        }
        Ok(())
    };
    // Reductions first: rfactor needs untransformed iteration dims.
    let mut reference = None;
    for &(tv, op) in &reductions {
        for _ in 1..k {
            s.merge(tv, outer as i64)?;
        }
        s.split(tv, outer as i64, THREADS)?;
        if op == ReductionOp::Mean {
            merge_rows(&mut s, tv)?;
            bind_full(&mut s, tv)?;
            reference.get_or_insert(tv);
        } else {
            let rf = s.rfactor(tv, &[outer as i64])?;
            merge_rows(&mut s, rf)?;
            merge_rows(&mut s, tv)?;
            bind_full(&mut s, rf)?;
            if outer > 0 {
                s.parallelize(tv, 0, ParallelType::BIDx)?;
            }
            s.parallelize(tv, ax, ParallelType::TIDx)?;
            reference.get_or_insert(rf);
        }
    }
    let Some(reference) = reference else {
        return not_supported("no reduction (use the pointwise schedule)");
    };
    if !full.is_empty() {
        s.transform_like(reference, &full)?;
    }
    for &tv in &full {
        bind_full(&mut s, tv)?;
    }
    for &tv in &per_row {
        merge_rows(&mut s, tv)?;
        if outer > 0 {
            s.parallelize(tv, 0, ParallelType::BIDx)?;
        }
    }
    s.inline_most()?;
    Ok(s)
}

/// The common rank and number of reduced innermost dims of the fusion's reductions.
fn reduced_shape(fusion: &Fusion) -> Result<(usize, usize), DefaultScheduleError> {
    let live = fusion.live_exprs();
    let mut shape: Option<(usize, usize)> = None;
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        let Some(axes) = reduction_axes(&e.op) else {
            continue;
        };
        let r = logical_rank(fusion, e.outputs[0]).unwrap_or(0);
        let k = axes.len();
        let inner = axes.iter().enumerate().all(|(i, &a)| a == r - k + i);
        if !inner {
            return not_supported(format!(
                "{} over axes {axes:?} of a rank-{r} tensor (only the innermost dims can be reduced)",
                e.op.name()
            ));
        }
        match shape {
            None => shape = Some((r, k)),
            Some(s) if s != (r, k) => {
                return not_supported(format!(
                    "reductions of different shapes (rank {} over {} inner dims, and rank {r} over {k})",
                    s.0, s.1
                ))
            }
            Some(_) => {}
        }
    }
    let Some((rank, k)) = shape else {
        return not_supported("no reduction (use the pointwise schedule)");
    };
    Ok((rank, k))
}

/// The live computed tensors of a reduction fusion, by how the schedule treats them.
struct Classes {
    /// Full tensors (rank `r`, like the reduction inputs).
    full: Vec<ValId>,
    /// Per-row tensors (rank `r - k`, like the reduction results).
    per_row: Vec<ValId>,
    /// Reduction results with their op; Welford-style reductions (var, var_mean,
    /// welford) count as a mean: no rfactor.
    reductions: Vec<(ValId, ReductionOp)>,
}

/// Classifies the computed tensors of `f` and checks its broadcasts.
fn classify(
    f: &Fusion,
    live: &[bool],
    rank: usize,
    outer: usize,
) -> Result<Classes, DefaultScheduleError> {
    let mut full: Vec<ValId> = Vec::new();
    let mut per_row: Vec<ValId> = Vec::new();
    // Welford-style reductions (var, var_mean, welford) count as a mean: no rfactor.
    let mut reductions: Vec<(ValId, ReductionOp)> = Vec::new();
    for (id, e) in f.exprs() {
        if !live[id.index()] {
            continue;
        }
        let out = e.outputs[0];
        let r = logical_rank(f, out).unwrap_or(0);
        if let Op::Reduction { op, .. } = &e.op {
            reductions.push((out, *op));
            continue;
        }
        if is_welford(&e.op) {
            // Siblings follow the first output's transforms.
            reductions.push((out, ReductionOp::Mean));
            continue;
        }
        if let Op::Broadcast { mask } = &e.op {
            let input = e.inputs[0];
            let trailing =
                mask.len() == rank && mask.iter().enumerate().all(|(i, &m)| m == (i >= outer));
            if f.input_position(input).is_none() && !trailing {
                return not_supported(format!(
                    "{out} broadcasts the computed value {input} along dims {:?}; only per-row values can be broadcast along the reduced dims (and fusion inputs in any way)",
                    mask.iter().enumerate().filter(|(_, &m)| m).map(|(i, _)| i).collect::<Vec<_>>()
                ));
            }
        }
        if r == rank {
            full.push(out);
        } else if r == outer {
            per_row.push(out);
        } else {
            return not_supported(format!(
                "{out} has {r} dims; expected {rank} (like the reduction inputs) or {outer} (per-row values)"
            ));
        }
    }
    Ok(Classes {
        full,
        per_row,
        reductions,
    })
}
