//! The registered schedulers: one [`Scheduler`] per entry of [`SchedulerKind::ORDER`],
//! each a thin adapter over its analysis, heuristics and schedule (the tuned ones in the
//! private module `auto`, the default schedule in this module's parent).

use super::auto;
use super::contract::{Analysis, Refusal, Scheduler, SchedulerError, SchedulerKind};
use super::info::RuntimeInfo;
use super::params::HeuristicParams;
use super::unfit::Unfit;
use crate::ir::Fusion;
use crate::sched::ScheduledFusion;

fn fusion_refusal(reason: Unfit) -> Refusal {
    Refusal::Fusion { reason }
}

fn inputs_refusal(reason: Unfit) -> Refusal {
    Refusal::Inputs { reason }
}

/// The analysis of another scheduler, or params of another kind: a caller mixed them up.
fn mismatch(kind: SchedulerKind, what: &str) -> SchedulerError {
    SchedulerError::NotApplicable {
        kind,
        reason: format!("{what} of another scheduler"),
    }
}

/// Nothing to compute: every output is an input (or the registry found them all empty).
pub(crate) struct NoOp;

impl Scheduler for NoOp {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::NoOp
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        let live = fusion.live_exprs();
        if live.iter().any(|&l| l) {
            Err(Refusal::ComputesSomething)
        } else if fusion
            .outputs()
            .iter()
            .any(|o| !fusion.val(o.val).is_tensor())
        {
            Err(Refusal::ScalarOutput)
        } else {
            Ok(Analysis::new(()))
        }
    }

    fn heuristics(&self, _: &Analysis, _: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        Ok(HeuristicParams::NoOp)
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(params, HeuristicParams::NoOp)
    }

    fn schedule(
        &self,
        _: &Analysis,
        _: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        Err(SchedulerError::NotApplicable {
            kind: SchedulerKind::NoOp,
            reason: "a no-op runs no kernel, so there is nothing to schedule".into(),
        })
    }
}

/// The analysis of the reduction scheduler: inner or outer reductions.
enum ReductionPlan {
    Inner(auto::inner::InnerPlan),
    Outer(auto::outer::OuterPlan),
}

/// Reductions whose results are not broadcast back over the reduced data.
pub(crate) struct Reduction;

impl Scheduler for Reduction {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Reduction
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        match auto::inner::plan(fusion) {
            Ok(p) if !p.columns.is_empty() => Err(Refusal::Fusion {
                reason: Unfit::RowsAndColumns {
                    column: p.columns.outer[0],
                },
            }),
            Ok(p) if p.normalization => Err(Refusal::Normalization),
            Ok(p) => Ok(Analysis::new(ReductionPlan::Inner(p))),
            Err(inner) => match auto::outer::plan(fusion) {
                Ok(p) => Ok(Analysis::new(ReductionPlan::Outer(p))),
                Err(outer) => Err(Refusal::NoReductionShape {
                    inner: Box::new(inner),
                    outer: Box::new(outer),
                }),
            },
        }
    }

    fn heuristics(&self, a: &Analysis, info: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        match a.get::<ReductionPlan>() {
            Some(ReductionPlan::Inner(p)) => auto::inner::reduction_heuristics(p, info)
                .map(HeuristicParams::Reduction)
                .map_err(inputs_refusal),
            Some(ReductionPlan::Outer(p)) => auto::outer::heuristics(p, info)
                .map(HeuristicParams::OuterReduction)
                .map_err(inputs_refusal),
            None => Err(Refusal::WrongAnalysis),
        }
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(
            params,
            HeuristicParams::Reduction(_) | HeuristicParams::OuterReduction(_)
        )
    }

    fn schedule(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        match (a.get::<ReductionPlan>(), params) {
            (Some(ReductionPlan::Inner(p)), HeuristicParams::Reduction(rp)) => {
                Ok(auto::inner::schedule_reduction(p, rp)?)
            }
            (Some(ReductionPlan::Outer(p)), HeuristicParams::OuterReduction(op)) => {
                Ok(auto::outer::schedule(p, op)?)
            }
            (Some(ReductionPlan::Inner(_)), _) => Err(SchedulerError::NotApplicable {
                kind: self.kind(),
                reason: "outer reduction params for inner reductions".into(),
            }),
            (Some(ReductionPlan::Outer(_)), _) => Err(SchedulerError::NotApplicable {
                kind: self.kind(),
                reason: "inner reduction params for outer reductions".into(),
            }),
            (None, _) => Err(mismatch(self.kind(), "the analysis")),
        }
    }
}

/// A permutation of the innermost dim between inputs and outputs.
pub(crate) struct Transpose;

impl Scheduler for Transpose {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Transpose
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        auto::transpose::plan(fusion)
            .map(Analysis::new)
            .map_err(fusion_refusal)
    }

    fn heuristics(&self, a: &Analysis, info: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        let p = a.get().ok_or(Refusal::WrongAnalysis)?;
        auto::transpose::heuristics(p, info)
            .map(HeuristicParams::Transpose)
            .map_err(inputs_refusal)
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(params, HeuristicParams::Transpose(_))
    }

    fn schedule(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        match (a.get(), params) {
            (Some(p), HeuristicParams::Transpose(tp)) => Ok(auto::transpose::schedule(p, tp)?),
            _ => Err(mismatch(self.kind(), "the analysis or params")),
        }
    }
}

/// Scans of one axis with pointwise math around them.
pub(crate) struct Scan;

impl Scheduler for Scan {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Scan
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        auto::scan::plan(fusion)
            .map(Analysis::new)
            .map_err(fusion_refusal)
    }

    fn heuristics(&self, a: &Analysis, info: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        let p = a.get().ok_or(Refusal::WrongAnalysis)?;
        auto::scan::heuristics(p, info)
            .map(HeuristicParams::Scan)
            .map_err(inputs_refusal)
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(params, HeuristicParams::Scan(_))
    }

    fn schedule(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        match (a.get(), params) {
            (Some(p), HeuristicParams::Scan(sp)) => Ok(auto::scan::schedule(p, sp)?),
            _ => Err(mismatch(self.kind(), "the analysis or params")),
        }
    }
}

/// Elementwise work with broadcasts.
pub(crate) struct Pointwise;

impl Scheduler for Pointwise {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Pointwise
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        auto::pointwise::plan(fusion)
            .map(Analysis::new)
            .map_err(fusion_refusal)
    }

    fn heuristics(&self, a: &Analysis, info: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        let p = a.get().ok_or(Refusal::WrongAnalysis)?;
        auto::pointwise::heuristics(p, info)
            .map(HeuristicParams::Pointwise)
            .map_err(inputs_refusal)
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(params, HeuristicParams::Pointwise(_))
    }

    fn schedule(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        match (a.get(), params) {
            (Some(p), HeuristicParams::Pointwise(pp)) => Ok(auto::pointwise::schedule(p, pp)?),
            _ => Err(mismatch(self.kind(), "the analysis or params")),
        }
    }
}

/// Normalizations over the innermost dims: the row kept on chip, or streamed when it is
/// too long (then with reduction params).
pub(crate) struct InnerPersistent;

impl Scheduler for InnerPersistent {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::InnerPersistent
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        match auto::inner::plan(fusion) {
            Ok(p) if !p.normalization && p.columns.is_empty() => Err(Refusal::NotANormalization),
            Ok(p) => Ok(Analysis::new(p)),
            Err(reason) => Err(Refusal::Fusion { reason }),
        }
    }

    fn heuristics(&self, a: &Analysis, info: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        let p = a.get().ok_or(Refusal::WrongAnalysis)?;
        match auto::inner::persistent_heuristics(p, info) {
            Ok(params) => Ok(HeuristicParams::InnerPersistent(params)),
            // Column sums beside the rows need the rows on chip.
            Err(reason) if !p.columns.is_empty() => Err(inputs_refusal(reason)),
            // A row too long to keep on chip is streamed instead (read once per phase),
            // still as one kernel.
            Err(_) => auto::inner::reduction_heuristics(p, info)
                .map(HeuristicParams::Reduction)
                .map_err(inputs_refusal),
        }
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(
            params,
            HeuristicParams::InnerPersistent(_) | HeuristicParams::Reduction(_)
        )
    }

    /// A persistent kernel is compiled for one reduced extent.
    fn fits(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
        info: &RuntimeInfo,
    ) -> Result<(), SchedulerError> {
        let (Some(plan), HeuristicParams::InnerPersistent(pp)) =
            (a.get::<auto::inner::InnerPlan>(), params)
        else {
            return Ok(());
        };
        let mut h = 1i64;
        for e in &plan.reduced {
            h = h.saturating_mul(info.eval(&plan.fusion, e).unwrap_or(-1));
        }
        if h != pp.hidden {
            return Err(SchedulerError::Mismatch {
                kind: self.kind(),
                reason: format!(
                    "compiled for a reduced extent of {} but the inputs have {h}",
                    pp.hidden
                ),
            });
        }
        Ok(())
    }

    fn schedule(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        match (a.get(), params) {
            (Some(p), HeuristicParams::InnerPersistent(pp)) => {
                Ok(auto::inner::schedule_persistent(p, pp)?)
            }
            (Some(p), HeuristicParams::Reduction(rp)) => {
                Ok(auto::inner::schedule_reduction(p, rp)?)
            }
            _ => Err(mismatch(self.kind(), "the analysis or params")),
        }
    }
}

/// The default schedule: slow, general, last. Its analysis is the schedule itself (with
/// the kernel shape it chose).
pub(crate) struct Default;

impl Scheduler for Default {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Default
    }

    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal> {
        super::default_schedule_kind(fusion)
            .map(Analysis::new)
            .map_err(|e| Refusal::Default {
                reason: e.to_string(),
            })
    }

    fn heuristics(&self, _: &Analysis, _: &RuntimeInfo) -> Result<HeuristicParams, Refusal> {
        Ok(HeuristicParams::Default)
    }

    fn takes(&self, params: &HeuristicParams) -> bool {
        matches!(params, HeuristicParams::Default)
    }

    fn schedule(
        &self,
        a: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        match (a.get::<(ScheduledFusion, super::DefaultKind)>(), params) {
            (Some((sf, _)), HeuristicParams::Default) => Ok(sf.clone()),
            _ => Err(mismatch(self.kind(), "the analysis or params")),
        }
    }
}
