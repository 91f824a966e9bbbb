//! Checks shared by both default schedules: which ops, outputs and values they accept.

use super::{not_supported, DefaultScheduleError};
use crate::ir::{Fusion, Op, ReductionOp, ValKind};

/// True for the ops the pointwise schedule handles (one output element per thread,
/// positional dims).
pub(crate) fn is_pointwise(op: &Op) -> bool {
    matches!(
        op,
        Op::Unary(_)
            | Op::Binary(_)
            | Op::Ternary(_)
            | Op::Cast
            | Op::Set
            | Op::SegmentSet
            | Op::Broadcast { .. }
            | Op::Expand { .. }
    )
}

/// True for the creation ops (full, iota, uniform/normal): tensors made from scalars,
/// computed per output element like pointwise math (the random streams are indexed by
/// the logical position, so any schedule gives the same values).
pub(crate) fn is_creation(op: &Op) -> bool {
    matches!(op, Op::Full { .. } | Op::Iota { .. } | Op::Rand { .. })
}

/// True for the data-movement ops the pointwise schedule takes when they read fusion
/// inputs (global memory), as the corpus resize entries do: permute, pad, cat. Slice is
/// left out: with 32-bit indexing its open-ended bound (`i64::MAX`) is truncated in the
/// generated extent, so the kernel writes nothing (a codegen issue, seen on an H100).
pub(crate) fn is_movement(op: &Op) -> bool {
    matches!(op, Op::Permute { .. } | Op::Pad { .. } | Op::Cat { .. })
}

/// The reduced axes of a reduction-like op: a sum/max/min/mean/prod reduction, or a
/// Welford-style one (var, var_mean, welford).
pub(crate) fn reduction_axes(op: &Op) -> Option<&[usize]> {
    match op {
        Op::Reduction { axes, .. }
        | Op::Var { axes, .. }
        | Op::VarMean { axes, .. }
        | Op::Welford { axes } => Some(axes),
        _ => None,
    }
}

/// True for the Welford-style reductions (var, var_mean, welford): reduced serially and
/// across the block in one step, never rfactored.
pub(crate) fn is_welford(op: &Op) -> bool {
    matches!(op, Op::Var { .. } | Op::VarMean { .. } | Op::Welford { .. })
}

/// Fusion-level conditions of every default schedule.
pub(crate) fn check_common(fusion: &Fusion) -> Result<(), DefaultScheduleError> {
    if fusion.outputs().is_empty() {
        return not_supported("a fusion without outputs");
    }
    for o in fusion.outputs() {
        let val = fusion.val(o.val);
        if !val.is_tensor() {
            return not_supported(format!("the scalar output {}", o.val));
        }
        if o.alias_of.is_some() {
            return not_supported(format!(
                "the in-place output {} (it aliases an input)",
                o.val
            ));
        }
        if fusion.input_position(o.val).is_some() {
            return not_supported(format!(
                "the output {} is an input (nothing to compute)",
                o.val
            ));
        }
    }
    let live = fusion.live_exprs();
    let moves = fusion
        .exprs()
        .any(|(id, e)| live[id.index()] && is_movement(&e.op));
    if moves && fusion.outputs().len() > 1 {
        return not_supported(
            "permute, pad or cat in a fusion with more than one output (outputs may differ in shape)",
        );
    }
    for (id, e) in fusion.exprs() {
        if !live[id.index()] {
            continue;
        }
        if let Some(&s) = e.outputs.iter().find(|&&o| !fusion.val(o).is_tensor()) {
            return not_supported(format!(
                "the scalar expression {} defining {s} (only tensor math runs in kernels)",
                e.op.name()
            ));
        }
        match &e.op {
            op if is_pointwise(op) => {}
            Op::Reduction { op, .. } => match op {
                ReductionOp::Sum
                | ReductionOp::Max
                | ReductionOp::Min
                | ReductionOp::Mean
                | ReductionOp::Prod => {}
            },
            op if is_welford(op) => {}
            op if is_creation(op) => {}
            op if is_movement(op) => {
                if let Some(&t) = e
                    .inputs
                    .iter()
                    .find(|&&i| fusion.val(i).is_tensor() && fusion.input_position(i).is_none())
                {
                    return not_supported(format!(
                        "{} of the computed value {t} (permute, pad and cat must read fusion inputs)",
                        e.op.name()
                    ));
                }
            }
            other => {
                return not_supported(format!(
                    "the op {} (the default schedule handles pointwise ops, broadcasts, expands, full/iota/uniform/normal, sum/max/min/mean/prod reductions and var/var_mean/welford over the innermost dims)",
                    other.name()
                ))
            }
        }
    }
    Ok(())
}

/// Number of logical dims of a tensor (reduction dims included), or `None` for a
/// scalar.
pub(crate) fn logical_rank(fusion: &Fusion, v: crate::ir::ValId) -> Option<usize> {
    match &fusion.val(v).kind {
        ValKind::Tensor(t) => Some(t.domain.len()),
        ValKind::Scalar(_) => None,
    }
}
