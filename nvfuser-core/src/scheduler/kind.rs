//! The kinds of scheduler, in the order the registry tries them. Params, the contract
//! between the registry and the schedulers, and the segmenter all name them, so they
//! stand on their own.

use std::fmt;

use serde::{Deserialize, Serialize};

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
    /// Scans of one axis with pointwise math around them.
    Scan,
    /// One sort (`sort`, `argsort`, `topk`) of a fusion input.
    Sort,
    /// The simple default schedule (slow but general); last resort.
    Default,
}

impl SchedulerKind {
    /// The order in which the registry tries the schedulers.
    pub const ORDER: [SchedulerKind; 8] = [
        SchedulerKind::NoOp,
        SchedulerKind::Reduction,
        SchedulerKind::Transpose,
        SchedulerKind::Pointwise,
        SchedulerKind::InnerPersistent,
        SchedulerKind::Scan,
        SchedulerKind::Sort,
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
            SchedulerKind::Scan => "scan",
            SchedulerKind::Sort => "sort",
            SchedulerKind::Default => "default",
        }
    }
}

impl fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
