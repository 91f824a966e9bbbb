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

use crate::ir::Fusion;

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
    match kind {
        SchedulerKind::Default => super::default_schedule(fusion)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        other => Err(format!("the {other} scheduler is not implemented yet")),
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
