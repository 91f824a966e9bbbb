//! The kernel IR: loops, predicates, allocations and statements, ready to print.
//!
//! Lowering (`lower`) has already resolved every index into an [`Idx`] and every
//! value into a typed [`Expr`] tree (operators, casts, literals typed by their
//! [`DataType`], helper calls); neither holds C++ text. Only the printers spell
//! them: `cuda` the statements and expressions (literals and parentheses included),
//! [`Idx`]'s `Display` the index math. Snapshot tests read the printed CUDA; tests of
//! lowering decisions can inspect this tree directly.

pub(crate) mod bind;
mod expr;
pub(crate) mod fuse;

use serde::{Deserialize, Serialize};

pub use expr::{BinOp, CType, Expr, Func, Idx, ShapeField};

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
        /// Conditions.
        cond: Vec<Expr>,
        /// Body.
        body: Vec<Stmt>,
    },
    /// A declaration of a scalar with its initial value: `[const] ty name = init;`.
    Decl {
        /// Declared `const`.
        konst: bool,
        /// Its type.
        ty: CType,
        /// Its name.
        name: String,
        /// The initial value.
        init: Expr,
    },
    /// `lhs = rhs;`
    Assign {
        /// An lvalue.
        lhs: Expr,
        /// A value of the lvalue's type.
        rhs: Expr,
    },
    /// A vectorized copy of `width` elements.
    VecCopy {
        /// Element type.
        dtype: DataType,
        /// Elements per access.
        width: i64,
        /// Destination address.
        dst: Expr,
        /// Source address.
        src: Expr,
    },
    /// `__syncthreads();` with the reason as a trailing comment.
    Sync(String),
    /// A call of a runtime helper for its effect: `f(args);`.
    Call {
        /// The helper.
        func: Func,
        /// Its arguments.
        args: Vec<Expr>,
    },
    /// All-reduce `acc` over `threadIdx.x` (or `threadIdx.y` when `over_y`) through
    /// shared memory buffer `smem`.
    BlockReduce {
        /// The accumulator lvalue.
        acc: Expr,
        /// Its type.
        dtype: DataType,
        /// The reduction.
        op: ReductionOp,
        /// The identity, a value of `dtype`.
        init: Expr,
        /// The shared buffer (32 elements over x; one per thread of the block over y).
        smem: String,
        /// Over `threadIdx.y` (a power of two) rather than `threadIdx.x`.
        over_y: bool,
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
