//! Deciding how a fusion runs: the scheduler registry ([`registry`]: which scheduler
//! takes a fusion and why the others refuse), what the heuristics see ([`info`]), their
//! parameters ([`params`]) and the tuned schedulers (pointwise, inner and outer
//! reduction, inner persistent normalization, transpose; private module `auto`), applied
//! with [`schedule_with`].
//!
//! ```
//! use nvfuser_core::prelude::*;
//! use nvfuser_core::scheduler::{compute_heuristics, schedule_with, DeviceInfo, RuntimeInfo};
//!
//! let fusion = nvfuser_core::workloads::gelu_tanh(DataType::BF16)?;
//! let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &[(DataType::BF16, &[4096, 4096])]);
//! let params = compute_heuristics(&fusion, &info).expect("pointwise takes it");
//! assert_eq!(params.kind().name(), "pointwise");
//! let scheduled = schedule_with(&fusion, &params).expect("it schedules");
//! assert!(scheduled.scheduled_ir().contains("BIDx"));
//! # Ok::<(), nvfuser_core::Error>(())
//! ```
//!
//! The rest of this module is the *default schedule*: a simple, correct schedule, last in
//! the registry, for what the tuned schedulers do not take (data-movement ops, indexing,
//! reductions over middle dims).
//!
//! [`default_schedule`] picks one of two shapes of kernel, or says in plain words why it
//! cannot:
//!
//! - **Pointwise** (unary, binary, ternary, cast, set, broadcast and expand
//!   expressions, the creation ops full, iota, uniform and normal, which need no
//!   tensor input, and permute, pad and cat of fusion inputs, read from global memory
//!   as in the corpus resize entries, in fusions of one output; any number of inputs, outputs and scalars; rank 0 to N): the dims of
//!   the reference output are merged (adjacent dims only where every tensor agrees on
//!   which of them are broadcast), the innermost group is split by 128 and bound to
//!   `blockIdx.x`/`threadIdx.x`, outer groups stay serial loops; every other tensor
//!   takes the same transforms (`transform_like`/`parallelize_like`) and everything is
//!   inlined (`inline_most`). See [`pointwise`].
//! - **Inner reduction** (sum, max, min, mean, prod over the innermost dims of one
//!   rank, plus pointwise math and broadcasts of per-row values: softmax, RMSNorm-style
//!   norms): one row per block of 128 threads, a serial loop over the row and a block
//!   reduction. Values needed by more than one phase of the row (before and after a
//!   reduction) are recomputed per use rather than kept, so any row length works. See
//!   [`reduction`]. Var, var_mean and welford over the innermost dims take the same
//!   shape with a block Welford combine (as the corpus `welford_three_outputs` and
//!   `layer_norm_bf16`).
//!
//! - **Outer reduction** (sum, max, min, mean, prod over the outermost dims, as the
//!   corpus `outer_sum`): columns split by 128 onto blocks and threads, each thread
//!   reducing its column in a serial loop over the rows (no block reduction). Reported
//!   as [`DefaultKind::Pointwise`]: one thread per output element. See [`outer`].
//!
//! Anything else is a [`DefaultScheduleError::NotSupported`] naming what is missing.
//! The result is checked by lowering it once, so an accepted fusion is known to
//! generate.

mod analysis;
pub(crate) mod auto;
pub mod cat;
mod contract;
pub mod creation_fold;
pub mod host_scalars;
pub mod info;
mod kind;
pub mod outer;
pub mod params;
pub mod permute;
pub mod pointwise;
mod presets;
mod recompute;
mod reduce_squeeze;
pub mod reduction;
pub mod registry;
pub(crate) mod resize;
mod schedulers;
mod sort;
pub mod squeeze;
mod unfit;
mod unit_reduce;

pub use cat::split_inner_cats;
pub use creation_fold::fold_creation_broadcasts;
pub use host_scalars::{split_host_scalars, HostScalarProgram, HostScalarSplit};
pub use info::{
    vector_access_ok, vector_alignment, DeviceInfo, InputInfo, RuntimeInfo, TensorInfo,
};
pub use params::{
    CompileParams, HeuristicParams, InvalidParams, LaunchParams, OuterReductionParams,
    PersistentParams, PointwiseParams, ReductionParams, ScanParams, SortParams, TransposeParams,
};
pub use permute::push_permutes;
pub use presets::{GpuModel, GpuSpec, UnknownGpu};
pub use reduce_squeeze::squeeze_reduction_broadcasts;
pub use registry::{
    can_schedule, can_schedule_kind, can_schedule_segment, check_fits, compute_heuristics,
    compute_heuristics_for, index_type_for, lower_with, schedule_with, Analysis, Decision,
    KernelPlan, PlanError, Refusal, Registry, Rejection, Rejections, Scheduler, SchedulerError,
    SchedulerKind,
};
pub use resize::isolate_resize_reads;
pub use squeeze::push_squeezes;
pub use unfit::{ReducedSide, SizeQuantity, SizeRefusal, SizeSubject, Takes, Unfit};
pub use unit_reduce::pointwise_unit_reductions;

use crate::codegen::{self, KernelOptions};
use crate::ir::Fusion;
use crate::sched::{ScheduleError, ScheduledFusion};

/// Threads per block of the default schedule.
pub const THREADS: i64 = 128;

/// Why the default schedule did not schedule a fusion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DefaultScheduleError {
    /// The fusion has something the default schedule does not handle.
    #[error("not supported by the default schedule: {reason}")]
    NotSupported {
        /// What is not supported, in plain words.
        reason: String,
    },
    /// A scheduling primitive or lowering failed on an accepted fusion.
    #[error("the default schedule failed: {0}")]
    Schedule(#[from] ScheduleError),
}

pub(crate) fn not_supported<T>(reason: impl Into<String>) -> Result<T, DefaultScheduleError> {
    Err(DefaultScheduleError::NotSupported {
        reason: reason.into(),
    })
}

/// Which kernel shape the default schedule chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultKind {
    /// Elementwise work, one thread per output element.
    Pointwise,
    /// One row per block with a block reduction.
    InnerReduction,
    /// One thread per output column, a serial loop over the reduced rows.
    OuterReduction,
}

/// Schedules `fusion` with the default schedule (see the module documentation).
///
/// ```
/// use nvfuser_core::prelude::*;
/// use nvfuser_core::scheduler::default_schedule;
///
/// let mut fd = FusionDefinition::new();
/// let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
/// let y = fd.relu(x)?;
/// fd.add_output(y)?;
/// let sf = default_schedule(&fd.finish()?).unwrap();
/// assert!(sf.scheduled_ir().contains("blockIdx.x") || !sf.scheduled_ir().is_empty());
/// # Ok::<(), nvfuser_core::Error>(())
/// ```
pub fn default_schedule(fusion: &Fusion) -> Result<ScheduledFusion, DefaultScheduleError> {
    default_schedule_kind(fusion).map(|(sf, _)| sf)
}

/// [`default_schedule`], also saying which kernel shape it chose.
pub fn default_schedule_kind(
    fusion: &Fusion,
) -> Result<(ScheduledFusion, DefaultKind), DefaultScheduleError> {
    let pushed = squeeze::push_squeezes(fusion);
    let fusion = pushed.as_ref().unwrap_or(fusion);
    analysis::check_common(fusion)?;
    let live = fusion.live_exprs();
    let has_reduction = fusion
        .exprs()
        .any(|(id, e)| live[id.index()] && analysis::reduction_axes(&e.op).is_some());
    if has_reduction
        && fusion
            .exprs()
            .any(|(id, e)| live[id.index()] && analysis::is_creation(&e.op))
    {
        return not_supported(
            "creation ops (full, iota, uniform, normal) in a fusion with reductions (only pointwise fusions)",
        );
    }
    let (sf, kind) = if has_reduction && outer::outer_shape(fusion).is_some() {
        (outer::schedule(fusion)?, DefaultKind::OuterReduction)
    } else if has_reduction {
        (reduction::schedule(fusion)?, DefaultKind::InnerReduction)
    } else {
        (pointwise::schedule(fusion)?, DefaultKind::Pointwise)
    };
    // Lower once: an accepted fusion must generate.
    codegen::generate(&sf, &KernelOptions::default())?;
    Ok((sf, kind))
}

#[cfg(test)]
mod tests;

/// Test support for the fusion rewrites: `g` verifies and computes what `f` computes,
/// bit for bit (NaNs equal), on random inputs of `shapes`.
#[cfg(test)]
pub(crate) fn assert_same_values(f: &Fusion, g: &Fusion, shapes: &[(crate::DataType, &[usize])]) {
    use crate::eval::{evaluate, EvalInput, HostTensor};
    crate::ir::verify(g).unwrap();
    let inputs: Vec<EvalInput> = shapes
        .iter()
        .enumerate()
        .map(|(k, (d, s))| EvalInput::Tensor(HostTensor::random(*d, s, 11 + k as u64)))
        .collect();
    let want = evaluate(f, &inputs).unwrap();
    let got = evaluate(g, &inputs).unwrap();
    assert_eq!(got.len(), want.len());
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.shape(), b.shape());
        for (x, y) in a.to_f64_vec().iter().zip(&b.to_f64_vec()) {
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{x} vs {y}"
            );
        }
    }
}
