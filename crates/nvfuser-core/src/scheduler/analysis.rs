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

/// True for the data-movement and indexing ops the pointwise schedule takes when they
/// read fusion inputs (global memory), as the corpus resize and indexing entries do:
/// permute, pad, cat, slice, reshape, select, index_select, gather and
/// take_along_axis. Lowering computes the input's indices from the output's (resize
/// and reshape arithmetic, or the index tensor's values), so each output element reads
/// its own source element: the input must be in global memory (a fusion input), never
/// a register value computed by another thread's loop iteration. A to-the-end slice's
/// extent is the input's size (the builder never puts `i64::MAX` in an extent), so
/// 32-bit index math holds it. The runtime values that decide where these kernels read
/// (select indices, slice bounds from scalars, reshape sizes, index tensor sizes) are
/// checked by the launcher before every launch (`nvfuser_cuda::launch`), with the CPU
/// reference's rules; index values out of range read zero in the kernel.
pub(crate) fn is_movement(op: &Op) -> bool {
    matches!(
        op,
        Op::Permute { .. }
            | Op::Pad { .. }
            | Op::Cat { .. }
            | Op::Slice { .. }
            | Op::Reshape { .. }
            | Op::Select { .. }
            | Op::IndexSelect { .. }
            | Op::Gather { .. }
            | Op::TakeAlongAxis { .. }
    )
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
            "data-movement or indexing ops in a fusion with more than one output (outputs may differ in shape)",
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
                        "{} of the computed value {t} (data-movement and indexing ops must read fusion inputs)",
                        e.op.name()
                    ));
                }
            }
            other => {
                return not_supported(format!(
                    "the op {} (the default schedule handles pointwise ops, broadcasts, expands, full/iota/uniform/normal, permute/pad/cat/slice/reshape/select/index_select/gather/take_along_axis of fusion inputs, sum/max/min/mean/prod reductions and var/var_mean/welford over the innermost dims)",
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
