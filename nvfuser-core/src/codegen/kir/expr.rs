//! Value expressions of the kernel IR: what a statement reads, computes and stores.
//!
//! Lowering builds these trees; the printer (`cuda::expr`) alone spells them in C++
//! (literal spelling, operator precedence, helper names). Identifiers (registers, loop
//! variables, kernel parameters, thread builtins) stay strings; everything built from
//! them is a node here.

use crate::codegen::index::Idx;
use crate::dtype::{DataType, ScalarValue};
use crate::ir::{BinaryOp, ReductionOp, UnaryOp};

/// A C++ value expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// A named value: a register, an accumulator, a kernel parameter (`s3`, `nvf_err`),
    /// a loop variable or a thread builtin (`threadIdx.x`).
    Var(String),
    /// A literal of a value type; the printer decides its spelling (`1.0f`, `2LL`,
    /// `(nvf_half)(1.0f)`, the bit pattern of an infinity or a NaN).
    Lit(ScalarValue, DataType),
    /// An error code of a device-side check site, an `unsigned long long` literal.
    Code(u64),
    /// An index expression used as a value.
    Idx(Idx),
    /// An element of an array: `name[idx]`.
    Elem(String, Idx),
    /// A conversion `(T)(e)`.
    Cast(CType, Box<Expr>),
    /// A binary operator.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// A call of a runtime helper or math function.
    Call(Func, Vec<Expr>),
    /// `cond ? then : otherwise`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// The address of an lvalue: `&e`.
    AddrOf(Box<Expr>),
    /// A null pointer to elements of the type: `(T*)nullptr`.
    NullPtr(DataType),
    /// The runtime functor of a reduction, passed to the block and grid reduce helpers.
    Functor(ReductionOp),
    /// Parentheses the precedence rules do not need, kept where the generated code has
    /// always written them.
    Paren(Box<Expr>),
}

/// A C++ type an expression is converted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CType {
    /// The C++ type of a value type (`float`, `long long`, `nvf_half`, ...).
    Data(DataType),
    /// `nvfuser_index_t`, the kernel's index type.
    Index,
    /// `unsigned long long` (the random number helpers' seed, offset and counter).
    U64,
}

impl From<DataType> for CType {
    fn from(d: DataType) -> CType {
        CType::Data(d)
    }
}

/// A binary C++ operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `&&`.
    And,
    /// `||`.
    Or,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
    /// `<<`.
    Shl,
    /// `>>`.
    Shr,
}

impl BinOp {
    /// The operator that computes a fusion's binary op directly, if C++ has one (the
    /// others are runtime helpers, [`Func::Binary`]).
    pub fn of(b: BinaryOp) -> Option<BinOp> {
        use BinaryOp::*;
        Some(match b {
            Add => BinOp::Add,
            Sub => BinOp::Sub,
            Mul => BinOp::Mul,
            Div | TrueDiv => BinOp::Div,
            Eq => BinOp::Eq,
            Ne => BinOp::Ne,
            Lt => BinOp::Lt,
            Le => BinOp::Le,
            Gt => BinOp::Gt,
            Ge => BinOp::Ge,
            LogicalAnd => BinOp::And,
            LogicalOr => BinOp::Or,
            BitwiseAnd => BinOp::BitAnd,
            BitwiseOr => BinOp::BitOr,
            BitwiseXor => BinOp::BitXor,
            ShiftLeft => BinOp::Shl,
            ShiftRight => BinOp::Shr,
            _ => return None,
        })
    }
}

/// A function the kernel calls: the preamble's math functions and runtime helpers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// The math function of a unary op (`nvf_exp`).
    Unary(UnaryOp),
    /// The math function of a binary op with no C++ operator (`nvf_pow`).
    Binary(BinaryOp),
    /// Float (`f32`) to `i32` with the reference's rule for NaN and out-of-range values.
    F2I32F32,
    /// Float (`f64`) to `i32`, as [`Func::F2I32F32`].
    F2I32F64,
    /// Float to `i64`, as [`Func::F2I32F32`].
    F2I64,
    /// Integer `div` that reports a zero divisor: `(err, code, a, b)`.
    DivChecked,
    /// Integer `fmod` that reports a zero divisor: `(err, code, a, b)`.
    FmodChecked,
    /// Integer `remainder` that reports a zero divisor: `(err, code, a, b)`.
    RemainderChecked,
    /// `clamp(x, lo, hi)`.
    Clamp,
    /// Uniform random numbers in a type computed in `f32` (`nvf_uniform<T>`).
    Uniform(DataType),
    /// Uniform random `f64` numbers.
    UniformF64,
    /// Normal random numbers, as `f32`.
    NormalF32,
    /// Normal random numbers, as `f64`.
    NormalF64,
    /// A scalar index wrapped into `0..size`: `(index, size)`.
    WrapIndex,
    /// A data-dependent index checked against its bound, reporting a failure:
    /// `(err, code, index, size)`.
    CheckIndex,
    /// `0 <= index < size`, unchecked: `(index, size)`.
    InRange,
    /// A volatile load: `(pointer)`.
    LoadVolatile,
    /// The `max` reduction's combine (NaN-propagating).
    Maximum,
    /// The `min` reduction's combine (NaN-propagating).
    Minimum,
    /// One step of a Welford accumulation: `(avg, m2, n, x)`.
    WelfordUpdate,
    /// The Welford all-reduce over `threadIdx.x`: `(avg, m2, n, smem_avg, smem_m2, smem_n)`.
    BlockWelfordX,
    /// The grid reduction: `(acc, functor, init, work, sem, segment, blocks, rank, slot,
    /// slots, block-reduced, smem)`; true in the block that holds the final value.
    GridReduce,
}

impl Expr {
    /// A named value.
    pub fn var(name: impl Into<String>) -> Expr {
        Expr::Var(name.into())
    }

    /// A plain integer (an index constant).
    pub fn int(c: i64) -> Expr {
        Expr::Idx(Idx::Const(c))
    }

    /// `name[idx]`.
    pub fn elem(name: impl Into<String>, idx: Idx) -> Expr {
        Expr::Elem(name.into(), idx)
    }

    /// `(to)(self)`.
    pub fn cast(self, to: impl Into<CType>) -> Expr {
        Expr::Cast(to.into(), Box::new(self))
    }

    /// `self op o`.
    pub fn bin(self, op: BinOp, o: Expr) -> Expr {
        Expr::Bin(op, Box::new(self), Box::new(o))
    }

    /// `f(args)`.
    pub fn call(f: Func, args: Vec<Expr>) -> Expr {
        Expr::Call(f, args)
    }

    /// `self ? a : b`.
    pub fn select(self, a: Expr, b: Expr) -> Expr {
        Expr::Select(Box::new(self), Box::new(a), Box::new(b))
    }

    /// `&self`.
    pub fn addr_of(self) -> Expr {
        Expr::AddrOf(Box::new(self))
    }

    /// `(self)`.
    pub fn paren(self) -> Expr {
        Expr::Paren(Box::new(self))
    }

    /// The conjunction of `conds` (left to right); `None` when there are none.
    pub fn all(conds: Vec<Expr>) -> Option<Expr> {
        conds.into_iter().reduce(|a, b| a.bin(BinOp::And, b))
    }
}

impl From<Idx> for Expr {
    fn from(i: Idx) -> Expr {
        Expr::Idx(i)
    }
}
