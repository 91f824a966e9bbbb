//! The scheduler registry: which scheduler takes a fusion, and why the others did not.
//!
//! Schedulers are tried in the fixed order of [`SchedulerKind::ORDER`]. Each answers two
//! questions: can it schedule this *fusion* at all (a compile-time check that looks only
//! at the definition), and can it schedule it for these *inputs* (a run-time check that
//! also sees sizes, strides, alignment and the device). The first that says yes to both
//! computes its heuristic parameters. Every refusal carries a reason in plain words;
//! `NVFUSER_DUMP=scheduler` prints them.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::auto;
use super::info::RuntimeInfo;
use super::params::{HeuristicParams, InvalidParams};
use crate::codegen::{self, KernelOptions};
use crate::ir::Fusion;
use crate::sched::{ScheduleError, ScheduledFusion};

/// The schedulers, in the order they are tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum SchedulerKind {
    /// Nothing to compute: every output is an input, or a tensor is empty.
    NoOp,
    /// A reduction whose results are not broadcast back over the reduced data.
    Reduction,
    /// A permutation of the innermost dim between inputs and outputs.
    Transpose,
    /// Elementwise work (with broadcasts).
    Pointwise,
    /// A normalization over the innermost dims: rows kept on chip, read once.
    InnerPersistent,
    /// The simple default schedule (slow but general); last resort.
    Default,
}

impl SchedulerKind {
    /// The order in which the registry tries the schedulers.
    pub const ORDER: [SchedulerKind; 6] = [
        SchedulerKind::NoOp,
        SchedulerKind::Reduction,
        SchedulerKind::Transpose,
        SchedulerKind::Pointwise,
        SchedulerKind::InnerPersistent,
        SchedulerKind::Default,
    ];

    /// A short name (`pointwise`, `inner persistent`).
    pub fn name(self) -> &'static str {
        match self {
            SchedulerKind::NoOp => "no-op",
            SchedulerKind::Reduction => "reduction",
            SchedulerKind::Transpose => "transpose",
            SchedulerKind::Pointwise => "pointwise",
            SchedulerKind::InnerPersistent => "inner persistent",
            SchedulerKind::Default => "default",
        }
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why one scheduler refused a fusion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// The scheduler that refused.
    pub kind: SchedulerKind,
    /// Why, in plain words.
    pub reason: String,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.reason)
    }
}

/// Every refusal, in registry order (what `NVFUSER_DUMP=scheduler` prints).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejections(pub Vec<Rejection>);

impl fmt::Display for Rejections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// The compile-time check of one scheduler: `Ok` when it can schedule `fusion` for
/// some inputs, otherwise the reason it cannot.
pub fn can_schedule_kind(kind: SchedulerKind, fusion: &Fusion) -> Result<(), String> {
    let pushed = super::push_squeezes(fusion);
    let fusion = pushed.as_ref().unwrap_or(fusion);
    let live = fusion.live_exprs();
    let any_expr = live.iter().any(|&l| l);
    match kind {
        SchedulerKind::NoOp => {
            if any_expr {
                Err("the fusion computes something".into())
            } else if fusion.outputs().iter().any(|o| !fusion.val(o.val).is_tensor()) {
                Err("a scalar output".into())
            } else {
                Ok(())
            }
        }
        SchedulerKind::Reduction => match auto::inner::plan(fusion) {
            Ok(p) if p.normalization => Err(
                "a reduction result is broadcast back over its row (a normalization: the inner persistent scheduler takes it)".into(),
            ),
            Ok(_) => Ok(()),
            Err(inner) => auto::outer::plan(fusion)
                .map(|_| ())
                .map_err(|outer| format!("inner: {inner}; outer: {outer}")),
        },
        SchedulerKind::Transpose => auto::transpose::plan(fusion).map(|_| ()),
        SchedulerKind::Pointwise => auto::pointwise::plan(fusion).map(|_| ()),
        SchedulerKind::InnerPersistent => match auto::inner::plan(fusion) {
            Ok(p) if !p.normalization => {
                Err("no reduction result is broadcast back over its row".into())
            }
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        },
        SchedulerKind::Default => super::default_schedule(fusion)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    }
}

/// The first scheduler (in [`SchedulerKind::ORDER`]) whose compile-time check accepts
/// `fusion`, or every refusal. The segmenter asks this of each candidate group.
pub fn can_schedule(fusion: &Fusion) -> Result<SchedulerKind, Rejections> {
    let mut rejections = Vec::new();
    for kind in SchedulerKind::ORDER {
        match can_schedule_kind(kind, fusion) {
            Ok(()) => return Ok(kind),
            Err(reason) => rejections.push(Rejection { kind, reason }),
        }
    }
    Err(Rejections(rejections))
}

/// The params of one scheduler for `fusion` and these inputs (its compile-time and
/// run-time checks, then its heuristics), or why it cannot take them.
pub fn compute_heuristics_for(
    kind: SchedulerKind,
    fusion: &Fusion,
    info: &RuntimeInfo,
) -> Result<HeuristicParams, String> {
    can_schedule_kind(kind, fusion)?;
    let pushed = super::push_squeezes(fusion);
    let fusion = pushed.as_ref().unwrap_or(fusion);
    info.check_sizes(fusion)?;
    match kind {
        SchedulerKind::NoOp => Ok(HeuristicParams::NoOp),
        SchedulerKind::Reduction => match auto::inner::plan(fusion) {
            Ok(p) => auto::inner::reduction_heuristics(&p, info).map(HeuristicParams::Reduction),
            Err(_) => {
                let p = auto::outer::plan(fusion)?;
                auto::outer::heuristics(&p, info).map(HeuristicParams::OuterReduction)
            }
        },
        SchedulerKind::Transpose => {
            let p = auto::transpose::plan(fusion)?;
            auto::transpose::heuristics(&p, info).map(HeuristicParams::Transpose)
        }
        SchedulerKind::Pointwise => {
            let p = auto::pointwise::plan(fusion)?;
            auto::pointwise::heuristics(&p, info).map(HeuristicParams::Pointwise)
        }
        SchedulerKind::InnerPersistent => {
            let p = auto::inner::plan(fusion)?;
            match auto::inner::persistent_heuristics(&p, info) {
                Ok(params) => Ok(HeuristicParams::InnerPersistent(params)),
                // A row too long to keep on chip is streamed instead (read once per
                // phase), still as one kernel.
                Err(_) => {
                    auto::inner::reduction_heuristics(&p, info).map(HeuristicParams::Reduction)
                }
            }
        }
        SchedulerKind::Default => Ok(HeuristicParams::Default),
    }
}

/// The first scheduler in [`SchedulerKind::ORDER`] that accepts `fusion` with these
/// inputs, and its params; or every refusal. A fusion whose outputs are all empty is a
/// no-op.
pub fn compute_heuristics(
    fusion: &Fusion,
    info: &RuntimeInfo,
) -> Result<HeuristicParams, Rejections> {
    let mut rejections = Vec::new();
    let all_empty = !fusion.outputs().is_empty()
        && fusion.outputs().iter().all(|o| {
            fusion
                .tensor_type(o.val)
                .is_some_and(|t| t.shape().any(|d| info.eval(fusion, &d.extent) == Some(0)))
        });
    if all_empty {
        return Ok(HeuristicParams::NoOp);
    }
    for kind in SchedulerKind::ORDER {
        match compute_heuristics_for(kind, fusion, info) {
            Ok(p) => return Ok(p),
            Err(reason) => rejections.push(Rejection { kind, reason }),
        }
    }
    Err(Rejections(rejections))
}

/// Why [`schedule_with`] could not apply params.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchedulerError {
    /// A field is out of range.
    #[error(transparent)]
    InvalidParams(#[from] InvalidParams),
    /// The params belong to a scheduler that cannot take this fusion.
    #[error("the {kind} scheduler cannot schedule this fusion: {reason}")]
    NotApplicable {
        /// The params' scheduler.
        kind: SchedulerKind,
        /// Why.
        reason: String,
    },
    /// The params do not fit these inputs.
    #[error("the {kind} params do not fit the inputs: {reason}")]
    Mismatch {
        /// The params' scheduler.
        kind: SchedulerKind,
        /// What differs.
        reason: String,
    },
    /// A scheduling primitive or the lowering check failed.
    #[error("scheduling failed: {0}")]
    Schedule(#[from] ScheduleError),
}

/// Schedules `fusion` with `params` (from [`compute_heuristics`], edited or loaded from
/// JSON). The result is lowered once, so accepted params are known to generate.
pub fn schedule_with(
    fusion: &Fusion,
    params: &HeuristicParams,
) -> Result<ScheduledFusion, SchedulerError> {
    params.validate()?;
    let pushed = super::push_squeezes(fusion);
    let fusion = pushed.as_ref().unwrap_or(fusion);
    let kind = params.kind();
    let na = |reason: String| SchedulerError::NotApplicable { kind, reason };
    let sf = match params {
        HeuristicParams::NoOp => {
            return Err(na(
                "a no-op runs no kernel, so there is nothing to schedule".into(),
            ))
        }
        HeuristicParams::Pointwise(pp) => {
            let plan = auto::pointwise::plan(fusion).map_err(na)?;
            auto::pointwise::schedule(&plan, pp)?
        }
        HeuristicParams::Reduction(rp) => {
            let plan = auto::inner::plan(fusion).map_err(na)?;
            auto::inner::schedule_reduction(&plan, rp)?
        }
        HeuristicParams::OuterReduction(op) => {
            let plan = auto::outer::plan(fusion).map_err(na)?;
            auto::outer::schedule(&plan, op)?
        }
        HeuristicParams::InnerPersistent(pp) => {
            let plan = auto::inner::plan(fusion).map_err(na)?;
            if !plan.normalization {
                return Err(na(
                    "no reduction result is broadcast back over its row".into()
                ));
            }
            auto::inner::schedule_persistent(&plan, pp)?
        }
        HeuristicParams::Transpose(tp) => {
            let plan = auto::transpose::plan(fusion).map_err(na)?;
            auto::transpose::schedule(&plan, tp)?
        }
        HeuristicParams::Default => super::default_schedule(fusion).map_err(|e| match e {
            super::DefaultScheduleError::Schedule(s) => SchedulerError::Schedule(s),
            other => na(other.to_string()),
        })?,
    };
    let options = KernelOptions {
        index_type: params
            .compile()
            .map_or(crate::codegen::IndexType::I32, |c| c.index_type),
        ..KernelOptions::default()
    };
    codegen::generate(&sf, &options)?;
    Ok(sf)
}

/// Checks that `params` fit these inputs beyond what the kernel checks at launch
/// (divisibility and alignment of vector accesses are launch-time requirements): a
/// persistent kernel is compiled for one reduced extent.
pub fn check_fits(
    fusion: &Fusion,
    params: &HeuristicParams,
    info: &RuntimeInfo,
) -> Result<(), SchedulerError> {
    info.check_sizes(fusion)
        .map_err(|reason| SchedulerError::Mismatch {
            kind: params.kind(),
            reason,
        })?;
    if let HeuristicParams::InnerPersistent(pp) = params {
        let pushed = super::push_squeezes(fusion);
        let fusion = pushed.as_ref().unwrap_or(fusion);
        let kind = params.kind();
        let plan = auto::inner::plan(fusion)
            .map_err(|reason| SchedulerError::NotApplicable { kind, reason })?;
        let mut h = 1i64;
        for e in &plan.reduced {
            h = h.saturating_mul(info.eval(&plan.fusion, e).unwrap_or(-1));
        }
        if h != pp.hidden {
            return Err(SchedulerError::Mismatch {
                kind,
                reason: format!(
                    "compiled for a reduced extent of {} but the inputs have {h}",
                    pp.hidden
                ),
            });
        }
    }
    Ok(())
}

/// The index type a call needs: 64-bit when some input or output has 2^31 elements or
/// more (or an output size cannot be evaluated).
pub fn index_type_for(fusion: &Fusion, info: &RuntimeInfo) -> crate::codegen::IndexType {
    auto::pointwise::index_type(fusion, info)
}
