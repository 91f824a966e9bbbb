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
            other => {
                return not_supported(format!(
                    "the op {} (the default schedule handles pointwise ops, broadcasts, expands and sum/max/min/mean/prod reductions)",
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
