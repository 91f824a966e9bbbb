//! The kernel IR: loops, predicates, allocations and statements, ready to print.
//!
//! Lowering (`lower`) has already resolved every index into an [`Idx`] and
//! every value into a typed C++ expression, so the printer (`cuda`) only
//! formats. Snapshot tests read the printed CUDA; tests of lowering decisions can
//! inspect this tree directly.

use serde::{Deserialize, Serialize};

use super::index::Idx;
use crate::dtype::DataType;
use crate::ir::ReductionOp;

/// One statement of a kernel body.
#[derive(Clone, Debug, PartialEq)]
pub enum Stmt {
    /// A comment line.
    Comment(String),
    /// A register array.
    Alloc {
        /// Its name.
        name: String,
        /// Element type.
        dtype: DataType,
        /// Number of elements.
        size: i64,
    },
    /// A loop `for (var = 0; var < extent; ++var)`.
    For {
        /// Loop variable.
        var: String,
        /// Trip count.
        extent: Idx,
        /// Fully unrolled (`#pragma unroll`).
        unroll: bool,
        /// Body.
        body: Vec<Stmt>,
    },
    /// A predicated block; the conditions are and-ed.
    If {
        /// C++ conditions.
        cond: Vec<String>,
        /// Body.
        body: Vec<Stmt>,
    },
    /// `lhs = rhs;`
    Assign {
        /// An lvalue.
        lhs: String,
        /// A C++ expression of the lvalue's type.
        rhs: String,
    },
    /// A vectorized copy of `width` elements.
    VecCopy {
        /// Element type.
        dtype: DataType,
        /// Elements per access.
        width: i64,
        /// Destination address expression.
        dst: String,
        /// Source address expression.
        src: String,
    },
    /// `__syncthreads();` with the reason as a trailing comment.
    Sync(String),
    /// A call of a runtime helper for its effect: `f(args);`.
    Call(String),
    /// All-reduce `acc` over `threadIdx.x` through shared memory buffer `smem`.
    BlockReduce {
        /// The accumulator lvalue.
        acc: String,
        /// Its type.
        dtype: DataType,
        /// The reduction.
        op: ReductionOp,
        /// The identity, as a C++ expression of `dtype`.
        init: String,
        /// The shared buffer (32 elements).
        smem: String,
    },
}

/// A condition the launcher must check before launching (it is not checked in the kernel).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Requirement {
    /// `extent % by == 0`.
    Divisible {
        /// The extent.
        extent: crate::ir::Extent,
        /// The divisor.
        by: i64,
        /// Why, in words.
        why: String,
    },
    /// The data pointer of `tensor` is aligned to `bytes`.
    Aligned {
        /// The fusion tensor.
        tensor: crate::ir::ValId,
        /// Alignment in bytes.
        bytes: usize,
    },
}
