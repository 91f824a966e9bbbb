//! The contract between the registry and the schedulers: the [`Scheduler`] trait, what
//! it returns ([`Analysis`], [`Refusal`], [`SchedulerError`]) and the scheduler kinds.
//!
//! Both sides import this file and nothing of each other's: the registry
//! ([`super::registry`]) lists the schedulers and decides; each scheduler
//! (`schedulers.rs`, over the tuned `auto::*` and the default schedule) implements the
//! trait. So adding a scheduler never ties it back to the registry.

use std::any::Any;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::info::RuntimeInfo;
pub use super::kind::SchedulerKind;
use super::params::{HeuristicParams, InvalidParams};
use super::unfit::{SizeRefusal, Unfit};
use crate::ir::Fusion;
use crate::sched::{ScheduleError, ScheduledFusion};

/// Why one scheduler does not take a fusion (or these inputs). Printed by
/// `NVFUSER_DUMP=scheduler`; callers decide on the variant, never on the text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The no-op scheduler: some expression computes something.
    #[error("the fusion computes something")]
    ComputesSomething,
    /// The no-op scheduler: a scalar output needs a kernel or the host.
    #[error("a scalar output")]
    ScalarOutput,
    /// The reduction scheduler: a reduction result is read back over its row.
    #[error("a reduction result is broadcast back over its row (a normalization: the inner persistent scheduler takes it)")]
    Normalization,
    /// The inner persistent scheduler: nothing is normalized.
    #[error("no reduction result is broadcast back over its row")]
    NotANormalization,
    /// The reduction scheduler: neither the inner nor the outer reduction analysis
    /// takes the fusion.
    #[error("inner: {inner}; outer: {outer}")]
    NoReductionShape {
        /// Why the inner reduction analysis refused.
        inner: Box<Unfit>,
        /// Why the outer reduction analysis refused.
        outer: Box<Unfit>,
    },
    /// The scheduler's analysis of the fusion refused it (the compile-time check).
    #[error("{reason}")]
    Fusion {
        /// What it found.
        reason: Unfit,
    },
    /// The call's sizes are out of range ([`RuntimeInfo::check_sizes`]).
    #[error("{reason}")]
    Sizes {
        /// Which size.
        reason: SizeRefusal,
    },
    /// The heuristics refused these inputs (the run-time check).
    #[error("{reason}")]
    Inputs {
        /// What about the inputs.
        reason: Unfit,
    },
    /// The default schedule does not handle the fusion.
    #[error("{reason}")]
    Default {
        /// The message of its scheduling error (printed, never decided on).
        reason: String,
    },
    /// A scheduler was given another scheduler's analysis (a caller's mistake).
    #[error("the analysis of another scheduler")]
    WrongAnalysis,
    /// A scheduler defined outside this crate (a test's, a user's) refuses in its own
    /// words; printed, never decided on.
    #[error("{reason}")]
    Other {
        /// Its reason.
        reason: String,
    },
    /// No scheduler of that kind is registered.
    #[error("no scheduler of this kind is registered")]
    NotRegistered,
}

/// Why one scheduler refused a fusion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejection {
    /// The scheduler that refused.
    pub kind: SchedulerKind,
    /// Why.
    pub reason: Refusal,
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

impl std::error::Error for Rejections {}

/// What one scheduler's analysis of a fusion found, kept so that its heuristics and
/// its schedule do not analyze the fusion again. Each scheduler reads back its own type.
pub struct Analysis(Box<dyn Any + Send + Sync>);

impl Analysis {
    /// Wraps a scheduler's analysis.
    pub fn new<T: Any + Send + Sync>(analysis: T) -> Self {
        Analysis(Box::new(analysis))
    }

    /// The analysis, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl fmt::Debug for Analysis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Analysis(..)")
    }
}

/// One scheduler: analyze the fusion once (or refuse it), then heuristics for a call's
/// inputs (or refuse them), then the schedule for params. See ARCHITECTURE.md, "Add a
/// scheduler".
pub trait Scheduler: Send + Sync {
    /// Which scheduler this is; its params' [`HeuristicParams::kind`].
    fn kind(&self) -> SchedulerKind;
    /// The compile-time check: looks only at the definition.
    fn analyze(&self, fusion: &Fusion) -> Result<Analysis, Refusal>;
    /// The run-time check and the params for these inputs.
    fn heuristics(
        &self,
        analysis: &Analysis,
        info: &RuntimeInfo,
    ) -> Result<HeuristicParams, Refusal>;
    /// True for the params this scheduler's heuristics produce.
    fn takes(&self, params: &HeuristicParams) -> bool;
    /// Whether `params` (from an earlier call) fit these inputs beyond what the kernel
    /// checks at launch; most kernels fit any sizes.
    fn fits(
        &self,
        _analysis: &Analysis,
        _params: &HeuristicParams,
        _info: &RuntimeInfo,
    ) -> Result<(), SchedulerError> {
        Ok(())
    }
    /// The schedule for `params` (checked by the caller).
    fn schedule(
        &self,
        analysis: &Analysis,
        params: &HeuristicParams,
    ) -> Result<ScheduledFusion, SchedulerError>;
}

/// Why [`super::schedule_with`] could not apply params.
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
