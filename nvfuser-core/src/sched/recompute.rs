//! `recompute_at_use`: a tensor that only resize, indexing and squeeze ops read is
//! computed inside each of them, at the index that op reads, instead of being stored.
//!
//! A resize op (slice, pad, cat, reshape, select, the indexing ops) reads its input at
//! other positions than its own output's, so a register tensor computed in the
//! consumer's loop nest is not where the consumer needs it. Instead of a round trip
//! through memory, the producer's expression (elementwise math, casts, broadcasts,
//! creation ops, or another resize op) is evaluated at the position the consumer reads,
//! down to values in global or shared memory (fusion inputs) and scalars: rope's
//! `cat([-x[.., h..], x[.., ..h]])` reads `x` twice and negates one read, in the loop of
//! the `cat`. The recomputed expression moves from [`Schedule::exprs`] to
//! [`Schedule::recomputed`] and its output leaves [`Schedule::tensors`]; validation
//! checks that only resize, indexing and squeeze ops (or other recomputed expressions)
//! read it and that it reads only global or shared tensors, scalars and other
//! recomputed tensors.

use super::{Primitive, SchedResult, Schedule, ScheduleError, ScheduledFusion};
use crate::ir::{Op, ValId};

/// True for ops that read their input at other positions than their own output's.
pub(crate) fn is_resize(op: &Op) -> bool {
    matches!(
        op,
        Op::Slice { .. }
            | Op::Pad { .. }
            | Op::Cat { .. }
            | Op::Reshape { .. }
            | Op::Select { .. }
            | Op::IndexSelect { .. }
            | Op::Gather { .. }
            | Op::TakeAlongAxis { .. }
            | Op::Scatter { .. }
    )
}

/// True for the ops that read their input elsewhere than at their own output's position:
/// the resize and indexing ops, and squeezes (which read a tensor of another rank). A
/// tensor only these read is recomputed inside them rather than given loops of its own.
pub(crate) fn reads_elsewhere(op: &Op) -> bool {
    is_resize(op) || matches!(op, Op::Squeeze { .. } | Op::Permute { .. })
}

/// True for the ops whose value at any position can be computed from their inputs at
/// positions derived from it (no reduction: one output element reads a bounded set of
/// input elements).
pub(crate) fn is_recomputable(op: &Op) -> bool {
    // A scatter searches the index along its axis in a loop of statements: it has no
    // value expression to compute at another tensor's position.
    (is_resize(op) && !matches!(op, Op::Scatter { .. }))
        || matches!(
            op,
            Op::Unary(_)
                | Op::Binary(_)
                | Op::Ternary(_)
                | Op::Cast
                | Op::Set
                | Op::Broadcast { .. }
                | Op::Expand { .. }
                | Op::Squeeze { .. }
                | Op::Permute { .. }
                | Op::Full { .. }
                | Op::Iota { .. }
                | Op::Rand { .. }
        )
}

impl ScheduledFusion {
    /// Computes `tv` inside every resize op that reads it, at the positions that op
    /// reads, instead of storing it (see the module documentation). `tv` must be an
    /// intermediate defined by a single-output recomputable op, and every expression of
    /// the kernel graph that reads it a resize, indexing or squeeze op. Applied to a
    /// chain, consumers go first: `neg(slice(x))` read by a `cat` recomputes the `neg`,
    /// then the `slice`.
    pub fn recompute_at_use(&mut self, tv: ValId) -> SchedResult<()> {
        let invalid = |reason: String| ScheduleError::InvalidArgument {
            op: "recompute_at_use",
            tensor: tv,
            reason,
        };
        let s = &self.schedule;
        s.tensor("recompute_at_use", tv)?;
        if s.is_input(tv) || s.is_output(tv) {
            return Err(invalid(
                "fusion inputs and outputs live in global memory".into(),
            ));
        }
        let def = s
            .definition(tv)
            .ok_or_else(|| invalid("the tensor has no definition".into()))?;
        let e = &s.exprs[def];
        if !e.siblings.is_empty() || !is_recomputable(&e.op) {
            return Err(invalid(format!(
                "{} is not recomputable (elementwise math, casts, broadcasts, creation and resize ops are)",
                e.op.name()
            )));
        }
        if let Some(u) = s
            .uses(tv)
            .into_iter()
            .find(|&u| !reads_elsewhere(&s.exprs[u].op))
        {
            return Err(invalid(format!(
                "{} (T{}) reads it at its own position; only resize, indexing and squeeze ops read recomputed values",
                s.exprs[u].op.name(),
                s.exprs[u].output.id()
            )));
        }
        let e = self.schedule.exprs.remove(def);
        // Consumers are recomputed first, so this expression precedes every recomputed
        // one already there that reads it; earlier producers stay before it.
        let at = self
            .schedule
            .recomputed
            .iter()
            .position(|r| r.inputs.contains(&tv))
            .unwrap_or(self.schedule.recomputed.len());
        self.schedule.recomputed.insert(at, e);
        self.schedule.tensors.remove(&tv);
        for t in self.schedule.tensors.values_mut() {
            if t.compute_at.is_some_and(|ca| ca.consumer == tv) {
                t.compute_at = None;
            }
        }
        self.schedule
            .history
            .push(Primitive::RecomputeAtUse { tensor: tv });
        Ok(())
    }
}

/// Checks the recomputed expressions of `s`: each reads global or shared tensors,
/// scalars and other recomputed tensors, and every scheduled expression that reads a
/// recomputed tensor is a resize, indexing or squeeze op.
pub(crate) fn check_recomputed(s: &Schedule) -> SchedResult<()> {
    for r in &s.recomputed {
        for &p in &r.inputs {
            let Some(t) = s.tensors.get(&p) else {
                continue; // a scalar, or another recomputed tensor
            };
            if t.memory == super::MemoryType::Local {
                return Err(ScheduleError::ResizeInputInRegisters {
                    op: r.op.name(),
                    producer: p,
                    consumer: r.output,
                });
            }
            // A global tensor this kernel writes is complete only at the end of the
            // kernel: other threads' elements cannot be read back.
            if t.memory == super::MemoryType::Global && s.definition(p).is_some() {
                return Err(ScheduleError::InvalidArgument {
                    op: "validate",
                    tensor: p,
                    reason: format!(
                        "the recomputed T{} reads an output of this kernel at other positions than its own",
                        r.output.id()
                    ),
                });
            }
        }
    }
    for e in &s.exprs {
        if reads_elsewhere(&e.op) {
            continue;
        }
        if let Some(&p) = e.inputs.iter().find(|&&p| s.recomputed(p).is_some()) {
            return Err(ScheduleError::InvalidArgument {
                op: "validate",
                tensor: p,
                reason: format!(
                    "{} (T{}) reads the recomputed tensor at its own position; only resize, indexing and squeeze ops read recomputed values",
                    e.op.name(),
                    e.output.id()
                ),
            });
        }
    }
    Ok(())
}
