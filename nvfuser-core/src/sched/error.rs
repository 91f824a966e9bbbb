//! Typed errors of scheduling, validation and lowering.
//!
//! Each variant names the tensor and loop axis involved and says what was expected and
//! what was found, so an invalid schedule can be fixed from the message alone.

use crate::ir::{Extent, ValId};

use super::ParallelType;

/// Everything that can go wrong while scheduling, validating or lowering a fusion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The fusion itself is invalid, or a fusion-level check failed.
    #[error(transparent)]
    Ir(#[from] crate::error::Error),
    /// A value that is not a tensor of the scheduled fusion.
    #[error("{op}: {tensor} is not a tensor of this scheduled fusion")]
    UnknownTensor {
        /// The primitive.
        op: &'static str,
        /// The id given.
        tensor: ValId,
    },
    /// A loop axis outside `-rank..rank`.
    #[error("{op}: axis {axis} is out of range for T{} with {rank} loop dims", tensor.id())]
    AxisOutOfRange {
        /// The primitive.
        op: &'static str,
        /// The tensor.
        tensor: ValId,
        /// The axis given.
        axis: i64,
        /// Number of loop dims.
        rank: usize,
    },
    /// Any other invalid argument of a primitive.
    #[error("{op} on T{}: {reason}", tensor.id())]
    InvalidArgument {
        /// The primitive.
        op: &'static str,
        /// The tensor.
        tensor: ValId,
        /// What is wrong, in words.
        reason: String,
    },
    /// A vectorized dim that is not the innermost loop dim, or that does not come from
    /// the innermost logical dim.
    #[error("vectorize on T{} axis {axis}: expected {expected}", tensor.id())]
    VectorizeNotInnermost {
        /// The tensor.
        tensor: ValId,
        /// The loop axis.
        axis: usize,
        /// What the rule requires.
        expected: &'static str,
    },
    /// Vectorized access to a global tensor whose innermost dim is not contiguous.
    #[error("vectorize on T{}: global tensor T{} must be contiguous with a stride-1 innermost dim", tensor.id(), global.id())]
    VectorizeNotContiguous {
        /// The vectorized tensor.
        tensor: ValId,
        /// The global tensor it reads or writes.
        global: ValId,
    },
    /// A vector that is not a power of two, wider than 16 bytes, or of symbolic width.
    #[error("vectorize on T{}: width {width} × {elem_bytes} bytes: expected a constant power of two of at most 16 bytes", tensor.id())]
    VectorizeWidth {
        /// The tensor.
        tensor: ValId,
        /// The width (0 when symbolic).
        width: i64,
        /// Bytes per element.
        elem_bytes: usize,
    },
    /// A vectorized expression that is not a plain copy from or to global memory.
    #[error("vectorize on T{}: only copies (set, cache_after/cache_before) can be vectorized, found {found}", tensor.id())]
    VectorizeNotCopy {
        /// The tensor.
        tensor: ValId,
        /// The op that defines it.
        found: String,
    },
    /// A static extent that the vector width does not divide.
    #[error("vectorize on T{}: extent {extent} is not divisible by the width {width}", tensor.id())]
    VectorizeNotDivisible {
        /// The tensor.
        tensor: ValId,
        /// The innermost logical extent.
        extent: Extent,
        /// The width.
        width: i64,
    },
    /// One parallel type bound to two different extents in one kernel.
    #[error("{ptype} is bound to {first_extent} by T{} and to {second_extent} by T{}: one kernel needs one extent per parallel type", first.id(), second.id())]
    ParallelTypeConflict {
        /// The parallel type.
        ptype: ParallelType,
        /// The first tensor binding it.
        first: ValId,
        /// Its extent there.
        first_extent: Extent,
        /// The second tensor.
        second: ValId,
        /// Its extent there.
        second_extent: Extent,
    },
    /// One parallel type used twice in one tensor's loop domain.
    #[error("T{}: {ptype} is bound to loop axes {first} and {second}; expected at most one", tensor.id())]
    DuplicateParallelType {
        /// The tensor.
        tensor: ValId,
        /// The parallel type.
        ptype: ParallelType,
        /// First axis.
        first: usize,
        /// Second axis.
        second: usize,
    },
    /// A reduction tensor computed inside its consumer's loop over one of its own
    /// reduction dims.
    #[error("T{} computed at position {pos}: loop axis {axis} is a reduction dim; a reduction cannot be inlined past its reduction dims (expected position <= {axis})", tensor.id())]
    InlinePastReduction {
        /// The reduction tensor.
        tensor: ValId,
        /// The compute-at position asked for.
        pos: usize,
        /// Its first reduction loop axis.
        axis: usize,
    },
    /// A producer's loop dim that does not match its consumer's where they share a loop.
    #[error("T{} computed at T{} position {pos}: loop axis {axis} differs: {reason}", producer.id(), consumer.id())]
    ComputeAtMismatch {
        /// The producer.
        producer: ValId,
        /// The consumer.
        consumer: ValId,
        /// The position.
        pos: usize,
        /// The first axis that does not match.
        axis: usize,
        /// How it differs.
        reason: String,
    },
    /// A reduction dim bound to a parallel type this code generator cannot reduce over,
    /// or an iteration dim and a reduction dim of one kernel in conflict.
    #[error("T{} axis {axis}: reduction dim bound to {ptype}: {reason}", tensor.id())]
    ReductionParallel {
        /// The tensor.
        tensor: ValId,
        /// The loop axis.
        axis: usize,
        /// The parallel type.
        ptype: ParallelType,
        /// Why it is rejected.
        reason: &'static str,
    },
    /// A register (local) producer split over threads whose consumer is not: its values
    /// would have to cross threads.
    #[error("T{} is in registers and bound to {ptype}, but its consumer T{} does not use {ptype}; place it in shared memory or parallelize the consumer alike", producer.id(), consumer.id())]
    ThreadMismatch {
        /// The producer.
        producer: ValId,
        /// The consumer.
        consumer: ValId,
        /// The thread type.
        ptype: ParallelType,
    },
    /// A block reduction over a thread dim whose extent is not a multiple of the warp.
    #[error("T{}: block reduction over threadIdx.x of extent {extent}: expected a multiple of 32", tensor.id())]
    BlockReduceWidth {
        /// The tensor.
        tensor: ValId,
        /// The extent.
        extent: i64,
    },
    /// A memory type that the tensor cannot have.
    #[error("T{}: memory type {found:?} is not allowed: {reason}", tensor.id())]
    MemoryType {
        /// The tensor.
        tensor: ValId,
        /// What was asked for.
        found: super::MemoryType,
        /// Why not.
        reason: &'static str,
    },
    /// A register or shared-memory buffer over a loop dim of symbolic extent.
    #[error("T{} in {memory:?} memory spans loop axis {axis} of symbolic extent {extent}: buffers need constant sizes; split that dim by a constant, bind it to a thread/block index or inline the tensor deeper", tensor.id())]
    SymbolicAllocation {
        /// The tensor.
        tensor: ValId,
        /// The loop axis.
        axis: usize,
        /// Its extent.
        extent: Extent,
        /// Where the tensor lives.
        memory: super::MemoryType,
    },
    /// The static shared memory of a kernel exceeds what one block can address.
    #[error(
        "kernel needs {bytes} bytes of static shared memory ({detail}); expected at most {limit}"
    )]
    SharedMemoryTooLarge {
        /// Bytes needed.
        bytes: i64,
        /// The limit (48 KiB of static shared memory per block).
        limit: i64,
        /// Which buffers, in words.
        detail: String,
    },
    /// A shared-memory producer split over a block index that its consumer does not use:
    /// its values would have to cross blocks.
    #[error("T{} is in shared memory and bound to {ptype}, but its consumer T{} does not use {ptype}; blocks cannot read each other's shared memory", producer.id(), consumer.id())]
    BlockMismatch {
        /// The producer.
        producer: ValId,
        /// The consumer.
        consumer: ValId,
        /// The block type.
        ptype: ParallelType,
    },
    /// Outputs of one multi-output expression scheduled differently.
    #[error("T{} and T{} are outputs of one {op} and must share a loop domain: loop axis {axis} differs ({reason})", first.id(), second.id())]
    SiblingMismatch {
        /// The op.
        op: &'static str,
        /// The first output.
        first: ValId,
        /// The other output.
        second: ValId,
        /// The first loop axis that differs.
        axis: usize,
        /// How it differs.
        reason: String,
    },
    /// A slice/pad/cat/reshape/gather-like op reading a register tensor: it reads its
    /// input at other positions than its own, which a thread's registers do not hold.
    #[error("T{} = {op}(T{}): a resize or indexing op reads its input at other positions than its own; the input must be a fusion input or in shared memory, found it in registers", consumer.id(), producer.id())]
    ResizeInputInRegisters {
        /// The op.
        op: &'static str,
        /// The input read.
        producer: ValId,
        /// The op's output.
        consumer: ValId,
    },
    /// A schedule this code generator does not lower (yet).
    #[error("unsupported schedule: {0}")]
    Unsupported(String),
}

/// Result alias for scheduling and code generation.
pub type SchedResult<T> = std::result::Result<T, ScheduleError>;
