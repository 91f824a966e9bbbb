//! The scheduler registry: which scheduler takes a fusion, and why the others did not.
//!
//! Schedulers are tried in the fixed order of [`SchedulerKind::ORDER`]. Each answers two
//! questions: can it schedule this *fusion* at all (a compile-time check that looks only
//! at the definition), and can it schedule it for these *inputs* (a run-time check that
//! also sees sizes, strides, alignment and the device). The first that says yes to both
//! computes its heuristic parameters. Every refusal carries a reason in plain words;
//! `NVFUSER_DUMP=scheduler` prints them.

use std::borrow::Cow;
use std::fmt;

use super::auto;
pub use super::contract::{
    Analysis, Refusal, Rejection, Rejections, Scheduler, SchedulerError, SchedulerKind,
};
use super::info::RuntimeInfo;
use super::params::HeuristicParams;
use super::schedulers;
use crate::codegen::{self, IndexType, Kernel, KernelOptions};
use crate::ir::Fusion;
use crate::sched::ScheduledFusion;

/// The schedulers, in the order they are tried: [`Registry::standard`], or another list
/// (a test's own scheduler added with [`Registry::with_first`]).
#[derive(Clone)]
pub struct Registry {
    schedulers: Vec<&'static dyn Scheduler>,
}

/// The standard list, in [`SchedulerKind::ORDER`]. A new scheduler is one line here.
static STANDARD: [&dyn Scheduler; 8] = [
    &schedulers::NoOp,
    &schedulers::Reduction,
    &schedulers::Transpose,
    &schedulers::Pointwise,
    &schedulers::InnerPersistent,
    &schedulers::Scan,
    &super::sort::Sort,
    &schedulers::Default,
];

/// The registry's choice for one call: the scheduler, its analysis and its params.
pub struct Decision {
    scheduler: &'static dyn Scheduler,
    analysis: Analysis,
    params: HeuristicParams,
    refused: Rejections,
}

impl Decision {
    /// The chosen params.
    pub fn params(&self) -> &HeuristicParams {
        &self.params
    }

    /// The scheduler that took the call.
    pub fn kind(&self) -> SchedulerKind {
        self.scheduler.kind()
    }

    /// Why the schedulers tried before it refused, in order.
    pub fn refused(&self) -> &Rejections {
        &self.refused
    }

    /// The kernel of this decision, scheduled with the kept analysis and lowered once
    /// with the index type of the params (64-bit when `wide`); `None` for a no-op. The
    /// registry's checks are optimistic: when a tuned schedule fails to schedule or
    /// lower, the default schedule is tried, and the plan says why
    /// ([`KernelPlan::fallback`]).
    pub fn lower(&self, fusion: &Fusion, wide: bool) -> Result<Option<KernelPlan>, PlanError> {
        if matches!(self.params, HeuristicParams::NoOp) {
            return Ok(None);
        }
        let lowered = self
            .scheduler
            .schedule(&self.analysis, &self.params)
            .and_then(|sf| lower_scheduled(sf, &self.params, wide));
        let default_kind = self
            .analysis
            .get::<(ScheduledFusion, super::DefaultKind)>()
            .map(|a| a.1);
        match lowered {
            Ok((scheduled, kernel)) => Ok(Some(KernelPlan {
                scheduler: scheduler_name(&self.params, default_kind),
                params: self.params.clone(),
                scheduled,
                kernel,
                fallback: None,
            })),
            Err(e) if !matches!(self.params, HeuristicParams::Default) => {
                let tuned = format!("{}: {e}", self.kind());
                // The same scheduler's simplest params before the default schedule.
                if let Some(simple) = self.params.simplest() {
                    let retried = self
                        .scheduler
                        .schedule(&self.analysis, &simple)
                        .and_then(|sf| lower_scheduled(sf, &simple, wide));
                    if let Ok((scheduled, kernel)) = retried {
                        return Ok(Some(KernelPlan {
                            scheduler: scheduler_name(&simple, default_kind),
                            params: simple,
                            scheduled,
                            kernel,
                            fallback: Some(format!("{tuned}; ran with its simplest params")),
                        }));
                    }
                }
                lower_default(fusion, wide, tuned).map(Some)
            }
            Err(e) => Err(PlanError::Unschedulable {
                tuned: None,
                default: e.to_string(),
            }),
        }
    }

    /// Schedules with the kept analysis (no second analysis) and lowers the result once
    /// to check it generates.
    pub fn schedule(&self) -> Result<ScheduledFusion, SchedulerError> {
        finish(
            self.scheduler.schedule(&self.analysis, &self.params)?,
            &self.params,
        )
    }
}

impl fmt::Debug for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decision")
            .field("kind", &self.kind())
            .field("params", &self.params)
            .finish()
    }
}

/// `fusion` with broadcasts of creation ops folded into them
/// ([`super::fold_creation_broadcasts`]), and squeezes and permutes moved to the values
/// they read ([`super::push_squeezes`], [`super::push_permutes`]).
fn prepared(fusion: &Fusion) -> Cow<'_, Fusion> {
    let folded = match super::fold_creation_broadcasts(fusion) {
        Some(f) => Cow::Owned(f),
        None => Cow::Borrowed(fusion),
    };
    let squeezed = match super::push_squeezes(&folded) {
        Some(f) => Cow::Owned(f),
        None => folded,
    };
    match super::push_permutes(&squeezed) {
        Some(f) => Cow::Owned(f),
        None => squeezed,
    }
}

/// The forms of `fusion` the schedulers are offered, in order: with reductions over
/// size-1 dims only computed as the pointwise math they are
/// ([`super::pointwise_unit_reductions`]), when there are any; each form with
/// reductions beside size-1 dims reduced without them (`squeeze_reduction_broadcasts`)
/// first; last the fusion as it is (squeezes moved, [`prepared`]). The tuned
/// schedulers try the forms in order; the default schedule only sees the last, so a
/// rewrite no tuned scheduler takes changes nothing (CPU fuzz seeds 11401038 and
/// 11401392: the rewritten form alone was refused by every scheduler; a `keepdim`
/// mean over a size-1 dim made pointwise is a computed value broadcast to a higher
/// rank, which the pointwise scheduler refuses and the reduction scheduler takes).
fn forms(fusion: &Fusion) -> Vec<Cow<'_, Fusion>> {
    fn with_squeezed(f: &Fusion, out: &mut Vec<Cow<'_, Fusion>>) {
        if let Some(r) = super::squeeze_reduction_broadcasts(f) {
            let r = super::push_squeezes(&r).unwrap_or(r);
            out.push(Cow::Owned(r));
        }
    }
    let mut out = Vec::new();
    if let Some(u) = super::pointwise_unit_reductions(fusion) {
        with_squeezed(&u, &mut out);
        out.push(Cow::Owned(prepared(&u).into_owned()));
    }
    with_squeezed(fusion, &mut out);
    out.push(prepared(fusion));
    out
}

/// The schedulers offered form `k` of `n` ([`forms`]): all of them for the last form,
/// the tuned ones for the others.
fn offered(s: &&'static dyn Scheduler, k: usize, n: usize) -> bool {
    k + 1 == n || s.kind() != SchedulerKind::Default
}

/// True when every output of `fusion` is empty for these inputs (nothing to launch).
fn all_outputs_empty(fusion: &Fusion, info: &RuntimeInfo) -> bool {
    !fusion.outputs().is_empty()
        && fusion.outputs().iter().all(|o| {
            fusion
                .tensor_type(o.val)
                .is_some_and(|t| t.shape().any(|d| info.eval(fusion, &d.extent) == Some(0)))
        })
}

impl Registry {
    /// The standard schedulers.
    pub fn standard() -> Self {
        Registry {
            schedulers: STANDARD.to_vec(),
        }
    }

    /// This list with `scheduler` tried first.
    pub fn with_first(mut self, scheduler: &'static dyn Scheduler) -> Self {
        self.schedulers.insert(0, scheduler);
        self
    }

    /// This list without the schedulers of `kind`.
    pub fn without(mut self, kind: SchedulerKind) -> Self {
        self.schedulers.retain(|s| s.kind() != kind);
        self
    }

    /// The schedulers, in order.
    pub fn schedulers(&self) -> impl Iterator<Item = &'static dyn Scheduler> + '_ {
        self.schedulers.iter().copied()
    }

    fn first_of(&self, kind: SchedulerKind) -> Option<&'static dyn Scheduler> {
        self.schedulers().find(|s| s.kind() == kind)
    }

    /// The first scheduler whose compile-time check accepts `fusion`, or every refusal.
    pub fn can_schedule(&self, fusion: &Fusion) -> Result<SchedulerKind, Rejections> {
        let forms = forms(fusion);
        let n = forms.len();
        let mut rejections = Vec::new();
        for (k, fusion) in forms.iter().enumerate() {
            rejections.clear();
            for s in self.schedulers().filter(|s| offered(s, k, n)) {
                match s.analyze(fusion) {
                    Ok(_) => return Ok(s.kind()),
                    Err(reason) => rejections.push(Rejection {
                        kind: s.kind(),
                        reason,
                    }),
                }
            }
        }
        Err(Rejections(rejections))
    }

    /// The first scheduler that takes `fusion` with these inputs, with its analysis and
    /// params; or every refusal. A fusion whose outputs are all empty is a no-op.
    pub fn decide(&self, fusion: &Fusion, info: &RuntimeInfo) -> Result<Decision, Rejections> {
        let forms = forms(fusion);
        let n = forms.len();
        let mut rejections = Vec::new();
        for (k, fusion) in forms.iter().enumerate() {
            rejections.clear();
            if all_outputs_empty(fusion, info) {
                return Ok(Decision {
                    scheduler: &schedulers::NoOp,
                    analysis: Analysis::new(()),
                    params: HeuristicParams::NoOp,
                    refused: Rejections::default(),
                });
            }
            let sizes = info
                .check_sizes(fusion)
                .map_err(|reason| Refusal::Sizes { reason });
            for s in self.schedulers().filter(|s| offered(s, k, n)) {
                let decided = s.analyze(fusion).and_then(|analysis| {
                    sizes.clone()?;
                    let params = s.heuristics(&analysis, info)?;
                    Ok((analysis, params))
                });
                match decided {
                    Ok((analysis, params)) => {
                        return Ok(Decision {
                            scheduler: s,
                            analysis,
                            params,
                            refused: Rejections(rejections),
                        })
                    }
                    Err(reason) => rejections.push(Rejection {
                        kind: s.kind(),
                        reason,
                    }),
                }
            }
        }
        Err(Rejections(rejections))
    }

    /// Schedules `fusion` with `params` (from a decision, edited or loaded from JSON):
    /// the first scheduler that takes such params and accepts the fusion.
    pub fn schedule_with(
        &self,
        fusion: &Fusion,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError> {
        params.validate()?;
        let (s, a) = self.taker(fusion, params)?;
        finish(s.schedule(&a, params)?, params)
    }

    /// The first scheduler that takes `params` and accepts a form of `fusion` ([`forms`],
    /// in order), with its analysis; otherwise why not, as an error of the params'
    /// scheduler.
    fn taker(
        &self,
        fusion: &Fusion,
        params: &HeuristicParams,
    ) -> Result<(&'static dyn Scheduler, Analysis), SchedulerError> {
        let mut refusal = None;
        let forms = forms(fusion);
        let n = forms.len();
        for (k, fusion) in forms.iter().enumerate() {
            for s in self
                .schedulers()
                .filter(|s| s.takes(params) && offered(s, k, n))
            {
                match s.analyze(fusion) {
                    Ok(a) => return Ok((s, a)),
                    Err(r) => refusal = refusal.or(Some(r)),
                }
            }
        }
        Err(SchedulerError::NotApplicable {
            kind: params.kind(),
            reason: refusal.map_or_else(
                || "no registered scheduler takes these params".into(),
                |r| r.to_string(),
            ),
        })
    }
}

/// One kernel, planned: the params it was planned with, the scheduler's name (with the
/// default schedule's kernel shape), the scheduled fusion and the lowered kernel.
#[derive(Clone, Debug)]
pub struct KernelPlan {
    /// The params the kernel was scheduled with ([`HeuristicParams::Default`] after a
    /// fallback).
    pub params: HeuristicParams,
    /// `pointwise`, `outer reduction`, `default inner reduction`, ...
    pub scheduler: &'static str,
    /// The schedule.
    pub scheduled: ScheduledFusion,
    /// The kernel, lowered once.
    pub kernel: Kernel,
    /// Why the tuned schedule the registry chose was replaced: by the same scheduler's
    /// simplest params ([`HeuristicParams::simplest`]) or by the default schedule.
    pub fallback: Option<String>,
}

/// Why no kernel was planned.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// Every scheduler refused the fusion or these inputs.
    #[error("no scheduler takes this fusion: {0}")]
    NoScheduler(Rejections),
    /// Given params cannot schedule the fusion (out of range, another scheduler's, or
    /// failing to schedule).
    #[error("{0}")]
    Params(SchedulerError),
    /// Params given by the caller are out of range or do not fit the call (another
    /// scheduler's, or compiled for other sizes).
    #[error("{0}")]
    InvalidParams(SchedulerError),
    /// The host scalar program failed on these inputs.
    #[error("{0}")]
    Inputs(crate::Error),
    /// No single kernel takes the fusion, and segmenting it failed.
    #[error("{0}")]
    Segmentation(String),
    /// A broken invariant of the planner (a bug, not a property of the fusion).
    #[error("internal: {0}")]
    Internal(String),
    /// A segment's input sizes cannot be computed from the call's inputs.
    #[error("segment {segment}: its sizes cannot be computed from the inputs")]
    SegmentSizes {
        /// The segment's index.
        segment: usize,
    },
    /// A segment could not be planned.
    #[error("segment {segment}: {error}")]
    Segment {
        /// The segment's index.
        segment: usize,
        /// Why.
        error: Box<PlanError>,
    },
    /// The chosen schedule failed, and so did the default schedule.
    #[error("{}{default}", tuned.as_ref().map(|t| format!("{t}; ")).unwrap_or_default())]
    Unschedulable {
        /// The tuned scheduler's failure, if one was tried first.
        tuned: Option<String>,
        /// The default schedule's failure.
        default: String,
    },
}

/// The kernel for `params` given by a caller (edited or loaded params): scheduled by the
/// first scheduler that takes them, lowered once, no fallback. `None` for a no-op.
pub fn lower_with(
    fusion: &Fusion,
    params: &HeuristicParams,
    wide: bool,
) -> Result<Option<KernelPlan>, PlanError> {
    if matches!(params, HeuristicParams::NoOp) {
        return Ok(None);
    }
    if matches!(params, HeuristicParams::Default) {
        return lower_default(fusion, wide, String::new()).map(|p| {
            Some(KernelPlan {
                fallback: None,
                ..p
            })
        });
    }
    params.validate().map_err(|e| PlanError::Params(e.into()))?;
    let (s, a) = Registry::standard()
        .taker(fusion, params)
        .map_err(PlanError::Params)?;
    let (scheduled, kernel) = s
        .schedule(&a, params)
        .and_then(|sf| lower_scheduled(sf, params, wide))
        .map_err(PlanError::Params)?;
    Ok(Some(KernelPlan {
        params: params.clone(),
        scheduler: scheduler_name(params, None),
        scheduled,
        kernel,
        fallback: None,
    }))
}

/// The default schedule's kernel, after `tuned` failed.
fn lower_default(fusion: &Fusion, wide: bool, tuned: String) -> Result<KernelPlan, PlanError> {
    let unschedulable = |default: String| PlanError::Unschedulable {
        tuned: (!tuned.is_empty()).then(|| tuned.clone()),
        default,
    };
    let (sf, kind) =
        super::default_schedule_kind(fusion).map_err(|e| unschedulable(e.to_string()))?;
    let params = HeuristicParams::Default;
    let (scheduled, kernel) = lower_scheduled(sf, &params, wide)
        .map_err(|e| unschedulable(format!("the default schedule failed: {e}")))?;
    Ok(KernelPlan {
        scheduler: scheduler_name(&params, Some(kind)),
        params,
        scheduled,
        kernel,
        fallback: Some(tuned),
    })
}

/// Lowers `sf` with the params' index type, or 64-bit when `wide`.
fn lower_scheduled(
    sf: ScheduledFusion,
    params: &HeuristicParams,
    wide: bool,
) -> Result<(ScheduledFusion, Kernel), SchedulerError> {
    let index_type = match params.compile().map(|c| c.index_type) {
        Some(IndexType::I64) => IndexType::I64,
        _ if wide => IndexType::I64,
        _ => IndexType::I32,
    };
    let options = KernelOptions {
        index_type,
        min_blocks_per_sm: params.compile().and_then(|c| c.min_blocks_per_sm),
        ..KernelOptions::default()
    };
    let kernel = codegen::generate(&sf, &options)?;
    Ok((sf, kernel))
}

/// The name a plan reports for its scheduler.
fn scheduler_name(params: &HeuristicParams, default: Option<super::DefaultKind>) -> &'static str {
    match (params, default) {
        (HeuristicParams::OuterReduction(_), _) => "outer reduction",
        (HeuristicParams::InnerPersistent(p), _) if p.row_blocks > 0 => "inner-outer persistent",
        (HeuristicParams::Default, Some(super::DefaultKind::InnerReduction)) => {
            "default inner reduction"
        }
        (HeuristicParams::Default, Some(super::DefaultKind::OuterReduction)) => {
            "default outer reduction"
        }
        (HeuristicParams::Default, _) => "default pointwise",
        (p, _) => p.kind().name(),
    }
}

/// Lowers `sf` once (an accepted schedule must generate) and returns it.
fn finish(
    sf: ScheduledFusion,
    params: &HeuristicParams,
) -> Result<ScheduledFusion, SchedulerError> {
    let options = KernelOptions {
        index_type: params
            .compile()
            .map_or(crate::codegen::IndexType::I32, |c| c.index_type),
        min_blocks_per_sm: params.compile().and_then(|c| c.min_blocks_per_sm),
        ..KernelOptions::default()
    };
    codegen::generate(&sf, &options)?;
    Ok(sf)
}

/// The compile-time check of one scheduler: `Ok` when it can schedule `fusion` for
/// some inputs, otherwise why it cannot.
pub fn can_schedule_kind(kind: SchedulerKind, fusion: &Fusion) -> Result<(), Refusal> {
    let s = Registry::standard()
        .first_of(kind)
        .ok_or(Refusal::NotRegistered)?;
    let forms = forms(fusion);
    let mut result = Ok(());
    for f in &forms {
        result = s.analyze(f).map(|_| ());
        if result.is_ok() {
            break;
        }
    }
    result
}

/// The first scheduler (in [`SchedulerKind::ORDER`]) whose compile-time check accepts
/// `fusion`, or every refusal.
pub fn can_schedule(fusion: &Fusion) -> Result<SchedulerKind, Rejections> {
    Registry::standard().can_schedule(fusion)
}

/// What the segmenter asks of each candidate group: the first tuned scheduler that
/// accepts it; the default schedule only for a group of one tensor expression that no
/// tuned scheduler takes (so no merge ever pulls tuned work into a default kernel).
///
/// A group with column sums beside row reductions is refused: the inner-outer kernel
/// is chosen, or not, for the whole fusion with the call's sizes (its heuristics refuse
/// many shapes), so a segment never depends on it.
pub fn can_schedule_segment(fusion: &Fusion) -> Result<SchedulerKind, Rejections> {
    let cols = super::auto::inner_outer::find_columns(fusion);
    if let Some(&column) = cols.outer.first() {
        return Err(Rejections(vec![super::Rejection {
            kind: SchedulerKind::InnerPersistent,
            reason: Refusal::Fusion {
                reason: super::Unfit::ColumnsInSegment { column },
            },
        }]));
    }
    match Registry::standard()
        .without(SchedulerKind::Default)
        .can_schedule(fusion)
    {
        Ok(kind) => Ok(kind),
        Err(tuned) => {
            let live = fusion.live_exprs();
            let tensor_exprs = fusion
                .exprs()
                .filter(|(id, e)| {
                    live[id.index()] && e.outputs.iter().any(|&o| fusion.val(o).is_tensor())
                })
                .count();
            if tensor_exprs > 1 {
                return Err(tuned);
            }
            can_schedule(fusion)
        }
    }
}

/// The params of one scheduler for `fusion` and these inputs (its compile-time and
/// run-time checks, then its heuristics), or why it cannot take them.
pub fn compute_heuristics_for(
    kind: SchedulerKind,
    fusion: &Fusion,
    info: &RuntimeInfo,
) -> Result<HeuristicParams, Refusal> {
    let s = Registry::standard()
        .first_of(kind)
        .ok_or(Refusal::NotRegistered)?;
    let mut result = Err(Refusal::NotRegistered);
    for fusion in forms(fusion) {
        result = s.analyze(&fusion).and_then(|analysis| {
            info.check_sizes(&fusion)
                .map_err(|reason| Refusal::Sizes { reason })?;
            s.heuristics(&analysis, info)
        });
        if result.is_ok() {
            break;
        }
    }
    result
}

/// The first scheduler in [`SchedulerKind::ORDER`] that accepts `fusion` with these
/// inputs, and its params; or every refusal. A fusion whose outputs are all empty is a
/// no-op. [`Registry::decide`] also keeps the analysis for scheduling.
pub fn compute_heuristics(
    fusion: &Fusion,
    info: &RuntimeInfo,
) -> Result<HeuristicParams, Rejections> {
    Registry::standard().decide(fusion, info).map(|d| d.params)
}

/// Schedules `fusion` with `params` (from [`compute_heuristics`], edited or loaded from
/// JSON). The result is lowered once, so accepted params are known to generate.
pub fn schedule_with(
    fusion: &Fusion,
    params: &HeuristicParams,
) -> Result<ScheduledFusion, SchedulerError> {
    Registry::standard().schedule_with(fusion, params)
}

/// Checks that `params` fit these inputs beyond what the kernel checks at launch
/// (divisibility and alignment of vector accesses are launch-time requirements): the
/// sizes are in range, and the scheduler that takes the params says they fit
/// ([`Scheduler::fits`]: a persistent kernel is compiled for one reduced extent).
pub fn check_fits(
    fusion: &Fusion,
    params: &HeuristicParams,
    info: &RuntimeInfo,
) -> Result<(), SchedulerError> {
    info.check_sizes(fusion)
        .map_err(|reason| SchedulerError::Mismatch {
            kind: params.kind(),
            reason: reason.to_string(),
        })?;
    if matches!(params, HeuristicParams::Default) {
        // Compiled for any sizes; its analysis would be the whole default schedule.
        return Ok(());
    }
    // NoOp params are checked too: the no-op scheduler refuses a fusion that computes.
    let (s, a) = Registry::standard().taker(fusion, params)?;
    s.fits(&a, params, info)
}

/// The index type a call needs: 64-bit when some input or output has 2^31 elements or
/// more (or an output size cannot be evaluated).
pub fn index_type_for(fusion: &Fusion, info: &RuntimeInfo) -> crate::codegen::IndexType {
    auto::pointwise::index_type(fusion, info)
}
