//! Why a tuned scheduler's analysis refuses a fusion, or its heuristics refuse a
//! call's sizes: [`Unfit`], a typed reason with the values involved, carried by
//! [`Refusal::Fusion`](super::Refusal::Fusion) and
//! [`Refusal::Inputs`](super::Refusal::Inputs). Its `Display` is what
//! `NVFUSER_DUMP=scheduler` prints; callers that decide match on the variant.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ir::{Extent, ValId};

/// Which side of a tensor a scheduler reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReducedSide {
    /// The innermost dims (rows): the inner reduction and persistent schedulers.
    Innermost,
    /// The outermost dims, not all of them (columns): the outer reduction scheduler.
    Outermost,
}

/// The ops a scheduler takes, named in a refusal of another op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Takes {
    /// Pointwise math, broadcasts, creation ops and reductions (inner reductions,
    /// normalizations).
    PointwiseAndReductions,
    /// Pointwise math, creation ops and plain sums/min/max (outer reductions).
    PointwiseAndPlainReductions,
    /// One 2-D permute of an input and pointwise math after it (transpose).
    PermuteThenPointwise,
    /// Scans of one axis with pointwise math and broadcasts of inputs (scan).
    PointwiseAndScans,
}

impl fmt::Display for Takes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Takes::PointwiseAndReductions => {
                "only pointwise ops, broadcasts, full/iota/uniform/normal and reductions"
            }
            Takes::PointwiseAndPlainReductions => {
                "only pointwise ops, full/iota/uniform/normal and reductions"
            }
            Takes::PermuteThenPointwise => "only a permute and pointwise math after it",
            Takes::PointwiseAndScans => {
                "only scans of one axis, pointwise math and broadcasts of inputs"
            }
        })
    }
}

/// The reason a tuned scheduler gives, with the values it is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum Unfit {
    /// The fusion has no outputs.
    #[error("a fusion without outputs")]
    NoOutputs,
    /// An output is a scalar (the host program computes those).
    #[error("the scalar output {value}")]
    ScalarOutput {
        /// The output.
        value: ValId,
    },
    /// An output is written in place into an input.
    #[error("the in-place output {value}")]
    InPlaceOutput {
        /// The output.
        value: ValId,
    },
    /// An output is a fusion input (forwarded, not computed).
    #[error("the output {value} is an input")]
    OutputIsInput {
        /// The output.
        value: ValId,
    },
    /// A live expression computes a scalar: only tensor math runs in kernels.
    #[error("the scalar expression {op} defining {value} (only tensor math runs in kernels)")]
    ScalarMath {
        /// The op.
        op: String,
        /// The scalar it defines.
        value: ValId,
    },
    /// A fusion has more than one output (transpose takes one).
    #[error("more than one output")]
    SeveralOutputs,
    /// An op the scheduler does not take.
    #[error("{op} ({takes})")]
    Op {
        /// The op.
        op: String,
        /// What the scheduler takes.
        takes: Takes,
    },
    /// An op the pointwise scheduler does not take.
    #[error("{op} is not pointwise (pointwise takes elementwise math, casts, broadcasts, expands, full/iota/uniform/normal, and resize/indexing ops)")]
    NotPointwise {
        /// The op.
        op: String,
    },
    /// A resize or indexing op reads a value that is neither a fusion input nor
    /// recomputable at the positions it reads (see `sched::recompute`).
    #[error("{op} reads {tensor}, which {why}")]
    ResizeOfComputed {
        /// The resize or indexing op.
        op: String,
        /// The value it reads.
        tensor: ValId,
        /// Why that value cannot be recomputed where it is read.
        why: String,
    },
    /// No reduction at all.
    #[error("no reduction")]
    NoReduction,
    /// No scan at all.
    #[error("no scan")]
    NoScan,
    /// Not one sort of a fusion input with its values and indices as the outputs (the
    /// sort scheduler's shape; the segmenter puts other math in other segments).
    #[error("the sort scheduler takes one sort, argsort or topk of a fusion input with its values and indices as the outputs: {why}")]
    NotASort {
        /// What differs.
        why: String,
    },
    /// A sorted row whose (key, index) pairs do not fit a block's shared memory.
    #[error("a sorted row of {elements} elements needs {bytes} bytes of shared memory per block, more than the device's {limit} (a sort in global memory is not implemented)")]
    SortRowTooLong {
        /// Elements per row.
        elements: i64,
        /// Bytes its block needs.
        bytes: i64,
        /// The device's shared memory per block (opt-in).
        limit: i64,
    },
    /// Scans of different axes or ranks in one fusion.
    #[error("{tensor} scans axis {axis} of rank {rank}, but the first scan scans axis {} of rank {}", first.1, first.0)]
    ScanAxes {
        /// The scan.
        tensor: ValId,
        /// Its axis.
        axis: usize,
        /// Its rank.
        rank: usize,
        /// The first scan's (rank, axis).
        first: (usize, usize),
    },
    /// No reduction over the outermost dims.
    #[error("no reduction over the outermost dims")]
    NoOuterReduction,
    /// A reduction over other axes than the scheduler's side.
    #[error("{op} over axes {axes:?} of a rank-{rank} tensor (not the {})", match side { ReducedSide::Innermost => "innermost dims", ReducedSide::Outermost => "outermost dims, or all of them" })]
    ReductionAxes {
        /// The reduction op.
        op: String,
        /// Its axes.
        axes: Vec<usize>,
        /// Its input's rank.
        rank: usize,
        /// Where the scheduler reduces.
        side: ReducedSide,
    },
    /// A full tensor reads the result of an outer reduction (statistics over the rows
    /// applied back to every row, as a batch norm does): one kernel would need every
    /// block's rows before any row is written, so the reduction runs as a segment of its
    /// own, split over blocks.
    #[error("{tensor} reads the column reduction {reduction} back over the rows (a normalization over the outer dims: the statistics run as their own kernel)")]
    OuterNormalization {
        /// The full tensor.
        tensor: ValId,
        /// The reduction result it reads.
        reduction: ValId,
    },
    /// Two reductions of different ranks or reduced-dim counts.
    #[error("reductions of different shapes (rank {} over {} dims, and rank {} over {})", first.0, first.1, second.0, second.1)]
    ReductionShapes {
        /// (rank, reduced dims) of the first.
        first: (usize, usize),
        /// (rank, reduced dims) of the other.
        second: (usize, usize),
    },
    /// A computed value broadcast back along dims other than the reduced ones.
    #[error(
        "{tensor} broadcasts the computed value {input} along dims other than the reduced ones"
    )]
    BroadcastAlongRows {
        /// The broadcast.
        tensor: ValId,
        /// The computed value.
        input: ValId,
    },
    /// A computed value broadcast along kept dims (outer reductions).
    #[error("{tensor} broadcasts a computed value along kept dims")]
    BroadcastAlongKept {
        /// The broadcast.
        tensor: ValId,
    },
    /// A tensor mixing broadcast and iteration dims among several kept dims (outer
    /// reductions merge the kept dims: a `[B, 1]` mask beside `[B, C]` columns would bind
    /// the column blocks to `B` and to `B * C`).
    #[error("{tensor} mixes broadcast and iteration dims among the merged kept dims")]
    MixedKeptBroadcast {
        /// The tensor.
        tensor: ValId,
    },
    /// A tensor of another rank than the full and the reduced rank.
    #[error("{tensor} has {rank} dims; expected {full} (full) or {reduced} (reduced)")]
    TensorRank {
        /// The tensor.
        tensor: ValId,
        /// Its rank.
        rank: usize,
        /// The reference's rank.
        full: usize,
        /// The rank after the reduction.
        reduced: usize,
    },
    /// Merged row dims of which some are broadcast and others are not.
    #[error("{tensor} is broadcast in some row dims but not others")]
    MixedRowBroadcast {
        /// The tensor.
        tensor: ValId,
    },
    /// The scheduler's reference tensor is missing (an internal inconsistency).
    #[error("the reference {value} is not a tensor")]
    NoReference {
        /// The value.
        value: ValId,
    },
    /// A dim that would be scheduled as a reference dim of another extent.
    #[error("{tensor} dim {dim} ({extent}) is not exactly mapped to the reference dim ({reference}) it would be scheduled as")]
    NotExactlyMapped {
        /// The tensor.
        tensor: ValId,
        /// Its dim.
        dim: usize,
        /// Its extent.
        extent: Extent,
        /// The reference dim's extent.
        reference: Extent,
    },
    /// The scheduling primitives refused the fusion before any schedule.
    #[error("{error}")]
    Unschedulable {
        /// The scheduling error's message.
        error: String,
    },
    /// An output of another rank than the reference output.
    #[error("{tensor} has {rank} dims but the output {reference} has {reference_rank} (outputs of different ranks)")]
    OutputRanks {
        /// The tensor.
        tensor: ValId,
        /// Its rank.
        rank: usize,
        /// The reference output.
        reference: ValId,
        /// Its rank.
        reference_rank: usize,
    },
    /// A dim broadcast in the reference output but not in another tensor.
    #[error(
        "outputs of different shapes: dim {dim} is broadcast in {reference} but not in {tensor}"
    )]
    OutputShapes {
        /// The dim.
        dim: usize,
        /// The reference output.
        reference: ValId,
        /// The other tensor.
        tensor: ValId,
    },
    /// The pointwise heuristics found no group of inner dims to split (an internal
    /// inconsistency).
    #[error("no inner group of dims")]
    NoInnerGroup,
    /// A rank-0 reference output.
    #[error("a rank-0 output")]
    RankZero,
    /// More than one permute (transpose).
    #[error("more than one permute")]
    SeveralPermutes,
    /// A permute of a computed value (transpose reads an input).
    #[error("a permute of a computed value (only of a fusion input)")]
    PermuteOfComputed,
    /// A permute other than a 2-D transpose.
    #[error("a permute {perm:?} of a rank-{rank} tensor (only 2-D transposes)")]
    PermuteShape {
        /// The permutation.
        perm: Vec<usize>,
        /// The input's rank.
        rank: usize,
    },
    /// A transpose of a broadcast dim.
    #[error("a transpose of a broadcast dim")]
    BroadcastTranspose,
    /// No permute.
    #[error("no permute")]
    NoPermute,
    /// Another tensor input beside the transposed one.
    #[error("the tensor input {input} besides the transposed one")]
    OtherInput {
        /// The input.
        input: ValId,
    },
    /// The reduced extent is not a product of input sizes (persistent kernels are
    /// compiled for it).
    #[error("the reduced extent {extent} is not a product of input sizes")]
    ReducedNotProduct {
        /// The extent.
        extent: Extent,
    },
    /// The reduced dims hold more than one symbolic size: a persistent kernel is
    /// compiled for one reduced extent, binding one input dim to it (several dims of
    /// one product cannot be told apart), so the row is streamed instead.
    #[error(
        "the reduced extent {extent} has {dims} symbolic dims (a persistent kernel binds one)"
    )]
    ReducedSymbolicDims {
        /// The reduced extent (the product of the reduced dims).
        extent: Extent,
        /// How many of its factors are input dims.
        dims: usize,
    },
    /// An extent the call's arguments do not determine.
    #[error("the extent {extent} cannot be evaluated")]
    Unevaluated {
        /// The extent.
        extent: Extent,
    },
    /// The transposed input is not among the call's arguments.
    #[error("the transposed input is not bound")]
    Unbound,
    /// The transposed input's innermost dim is strided.
    #[error("the input's innermost dim is not contiguous (a permuted input: pointwise reads it)")]
    StridedTransposeInput,
    /// A row too long to keep on chip (the persistent scheduler streams it instead).
    #[error("a row of {elements} elements needs {batch} chunks of {vector} per thread at {threads} threads: too long to keep in registers")]
    RowTooLong {
        /// Elements per row.
        elements: i64,
        /// Vector chunks per thread.
        batch: i64,
        /// Elements per vector.
        vector: i64,
        /// Threads per row.
        threads: i64,
    },
    /// Reductions over the rows beside reductions over the columns: not a reduction
    /// scheduler's shape (the inner persistent scheduler's inner-outer form takes them).
    #[error("{column} sums over the rows beside reductions over each row (inner-outer: the inner persistent scheduler takes it)")]
    RowsAndColumns {
        /// The first column sum.
        column: ValId,
    },
    /// Column sums beside row reductions in a segment: the inner-outer kernel is decided
    /// for a whole fusion with its sizes, so segments keep the two apart.
    #[error("{column} sums over the rows beside reductions over each row: one kernel takes both only for the whole fusion (inner-outer), segments keep them apart")]
    ColumnsInSegment {
        /// The first column sum.
        column: ValId,
    },
    /// Column sums beside rows that a broadcast splits over two block dims.
    #[error("{sum} sums over the rows, but a tensor broadcast along the leading row dims splits them over blockIdx.x and blockIdx.y: the inner-outer schedule needs the rows merged")]
    ColumnsWithSplitRows {
        /// The first column sum.
        sum: ValId,
    },
    /// An inner-outer kernel measured slower than the segmented plan for this shape.
    #[error("{sums} column sum(s) over {rows} rows on {blocks} resident blocks: the inner-outer kernel takes one column sum and at least {min_rows} rows per block (two kernels are faster otherwise)")]
    InnerOuterShape {
        /// Outer reductions.
        sums: usize,
        /// Rows.
        rows: i64,
        /// Blocks of the row grid.
        blocks: i64,
        /// Rows per block it needs.
        min_rows: i64,
    },
    /// More blocks along a grid dim than the device allows.
    #[error("{count} {what} exceed the grid's {axis} limit")]
    GridLimit {
        /// How many.
        count: i64,
        /// Of what, in words.
        what: String,
        /// The grid dim: `y` or `z`.
        axis: char,
    },
}

/// Why a call's sizes are refused before any planning
/// ([`RuntimeInfo::check_sizes`](super::RuntimeInfo::check_sizes)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[non_exhaustive]
pub enum SizeRefusal {
    /// A negative size of an input.
    #[error("input {input}: size {size}: expected >= 0")]
    Negative {
        /// The input's position.
        input: usize,
        /// The size.
        size: i64,
    },
    /// A size, stride or element count above the schedulers' limit.
    #[error(
        "{subject}: {quantity} of shape {}: expected at most {limit} (2^48)",
        shape_text(shape)
    )]
    TooLarge {
        /// The input or tensor.
        subject: SizeSubject,
        /// What is too large.
        quantity: SizeQuantity,
        /// Its sizes (`None`: not known for these arguments).
        shape: Vec<Option<i64>>,
        /// The limit.
        limit: i64,
    },
    /// An extent whose computation overflows `i64` for these inputs.
    #[error("{tensor}: extent {extent} overflows i64 (or divides by zero) for these inputs")]
    Overflow {
        /// The tensor.
        tensor: ValId,
        /// The extent.
        extent: Extent,
    },
}

/// Whose sizes a [`SizeRefusal`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SizeSubject {
    /// The input at this position.
    Input(usize),
    /// A tensor of the fusion.
    Tensor(ValId),
}

impl fmt::Display for SizeSubject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeSubject::Input(i) => write!(f, "input {i}"),
            SizeSubject::Tensor(v) => write!(f, "{v}"),
        }
    }
}

/// What a [`SizeRefusal::TooLarge`] found too large.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SizeQuantity {
    /// A size or a stride of an input (with the input's strides).
    SizeOrStride {
        /// The input's strides.
        strides: Vec<i64>,
    },
    /// One dim of a tensor.
    Dim,
    /// The element count.
    ElementCount,
}

impl fmt::Display for SizeQuantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeQuantity::SizeOrStride { strides } => {
                write!(f, "a size or stride (strides {strides:?})")
            }
            SizeQuantity::Dim => f.write_str("a dim"),
            SizeQuantity::ElementCount => f.write_str("the element count"),
        }
    }
}

/// `[2, 3]`, with `?` for unknown sizes.
fn shape_text(shape: &[Option<i64>]) -> String {
    let dims: Vec<String> = shape
        .iter()
        .map(|d| d.map_or_else(|| "?".to_string(), |n| n.to_string()))
        .collect();
    format!("[{}]", dims.join(", "))
}
