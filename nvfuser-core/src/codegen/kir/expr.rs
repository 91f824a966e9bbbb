//! Value expressions of the kernel IR: what a statement reads, computes and stores, and
//! the integer index expressions ([`Idx`]) they embed (and that embed them: one file,
//! since the two types hold each other). Index expressions are folded as they are built
//! so that the generated code reads like hand-written code (`i1 * 128 + threadIdx.x`,
//! not `(i1 * 128) + (0 * 1)`).
//!
//! Lowering builds these trees; the printer (`cuda::expr`) alone spells them in C++
//! (literal spelling, operator precedence, helper names). Identifiers (registers, loop
//! variables, kernel parameters, thread builtins) stay strings; everything built from
//! them is a node here.

use std::fmt;

use crate::dtype::{DataType, ScalarValue};
use crate::ir::{BinaryOp, Extent, ExtentOp, ReductionOp, UnaryOp};

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
    /// The Welford all-reduce over `threadIdx.y`: `(avg, m2, n, smem_avg, smem_m2,
    /// smem_n)`, one shared slot per thread of the block.
    BlockWelfordY,
    /// The scan over `threadIdx.x`: `(value, functor, init, smem, total)`; the
    /// combination of the values of the threads before this one in its row (`init` for
    /// the first), and the row's combination written to `total`.
    BlockScanX,
    /// The grid reduction: `(acc, functor, init, work, sem, segment, blocks, rank, slot,
    /// slots, reduced thread dim (0 none, 1 x, 2 y), smem)`; true in the block that holds
    /// the final value.
    GridReduce,
    /// The grid Welford: `(avg, m2, n, work_avg, work_m2, work_n, sem, segment, blocks,
    /// rank, slot, slots, reduced thread dim, smem_avg, smem_m2, smem_n)`; true in the block
    /// that holds the final triple.
    GridWelford,
    /// The grid all-reduce of a register array: `(array, count, functor, init, work,
    /// sem, segment, blocks, rank, slot, slots, reduced thread dim)`; every block gets
    /// the results; true in the block of rank 0. Synchronizes the grid.
    GridAllreduceGroup,
    /// The grid reduction of a register array: `(array, count, functor, init, work, sem,
    /// segment, blocks, rank, slot, slots, reduced thread dim, smem)`; true in the block
    /// that holds the final values (the last to arrive). No grid barrier.
    GridReduceGroup,
    /// The block sort of a sort kernel: `(in, in_shape, values, values_shape, indices,
    /// indices_shape, axis, pad, rows_per_block, descending)` (see
    /// [`crate::codegen::sort_support`]); a null output is not written.
    SortRows,
    /// The radix-select topk of a sort kernel: `(in, in_shape, values, values_shape,
    /// indices, indices_shape, axis, kpad, descending)`.
    TopkRows,
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

impl Expr {
    /// Calls `f` on each direct sub-expression (operands, arguments, the operand of a
    /// cast, an address-of or parentheses); indices ([`Idx`]) are not expressions here.
    pub fn for_each_child(&self, mut f: impl FnMut(&Expr)) {
        match self {
            Expr::Cast(_, a) | Expr::AddrOf(a) | Expr::Paren(a) => f(a),
            Expr::Bin(_, a, b) => {
                f(a);
                f(b);
            }
            Expr::Call(_, args) => args.iter().for_each(f),
            Expr::Select(c, a, b) => {
                f(c);
                f(a);
                f(b);
            }
            Expr::Var(_)
            | Expr::Lit(..)
            | Expr::Code(_)
            | Expr::Idx(_)
            | Expr::Elem(..)
            | Expr::NullPtr(_)
            | Expr::Functor(_) => {}
        }
    }

    /// [`Expr::for_each_child`], mutably.
    pub fn for_each_child_mut(&mut self, mut f: impl FnMut(&mut Expr)) {
        match self {
            Expr::Cast(_, a) | Expr::AddrOf(a) | Expr::Paren(a) => f(a),
            Expr::Bin(_, a, b) => {
                f(a);
                f(b);
            }
            Expr::Call(_, args) => args.iter_mut().for_each(f),
            Expr::Select(c, a, b) => {
                f(c);
                f(a);
                f(b);
            }
            Expr::Var(_)
            | Expr::Lit(..)
            | Expr::Code(_)
            | Expr::Idx(_)
            | Expr::Elem(..)
            | Expr::NullPtr(_)
            | Expr::Functor(_) => {}
        }
    }

    /// The index this expression holds directly (`Expr::Idx`, an array element's index).
    pub fn own_idx(&self) -> Option<&Idx> {
        match self {
            Expr::Idx(i) | Expr::Elem(_, i) => Some(i),
            _ => None,
        }
    }

    /// [`Expr::own_idx`], mutably.
    pub fn own_idx_mut(&mut self) -> Option<&mut Idx> {
        match self {
            Expr::Idx(i) | Expr::Elem(_, i) => Some(i),
            _ => None,
        }
    }
}

impl From<Idx> for Expr {
    fn from(i: Idx) -> Expr {
        Expr::Idx(i)
    }
}

/// An integer index expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Idx {
    /// A constant.
    Const(i64),
    /// A loop variable, a thread builtin or a scalar kernel parameter.
    Var(String),
    /// A field of a tensor's shape parameter: `param.size[axis]`, `param.stride[axis]`.
    Shape {
        /// The parameter's name.
        param: String,
        /// Which array.
        field: ShapeField,
        /// The dim.
        axis: usize,
    },
    /// `a + b`.
    Add(Box<Idx>, Box<Idx>),
    /// `a * b`.
    Mul(Box<Idx>, Box<Idx>),
    /// `a / b` (non-negative operands).
    Div(Box<Idx>, Box<Idx>),
    /// `a % b` (non-negative operands).
    Mod(Box<Idx>, Box<Idx>),
    /// `ceil(a / b)`.
    CeilDiv(Box<Idx>, Box<Idx>),
    /// `a - b`.
    Sub(Box<Idx>, Box<Idx>),
    /// `max(a, b)`.
    Max(Box<Idx>, Box<Idx>),
    /// `min(a, b)`.
    Min(Box<Idx>, Box<Idx>),
    /// A kernel value used as an index (a data-dependent index, a wrapped scalar).
    Value(Box<Expr>),
}

/// An array of a tensor's shape parameter (`nvf_shape<N>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ShapeField {
    /// `size`: the extent of each dim.
    Size,
    /// `stride`: the stride of each dim, in elements.
    Stride,
}

impl Idx {
    /// The two operands of a binary node (`+`, `*`, `/`, `%`, ceil-div, `-`, max, min).
    pub fn operands(&self) -> Option<(&Idx, &Idx)> {
        match self {
            Idx::Add(a, b)
            | Idx::Mul(a, b)
            | Idx::Div(a, b)
            | Idx::Mod(a, b)
            | Idx::CeilDiv(a, b)
            | Idx::Sub(a, b)
            | Idx::Max(a, b)
            | Idx::Min(a, b) => Some((a, b)),
            Idx::Const(_) | Idx::Var(_) | Idx::Shape { .. } | Idx::Value(_) => None,
        }
    }

    /// [`Idx::operands`], mutably.
    pub fn operands_mut(&mut self) -> Option<(&mut Idx, &mut Idx)> {
        match self {
            Idx::Add(a, b)
            | Idx::Mul(a, b)
            | Idx::Div(a, b)
            | Idx::Mod(a, b)
            | Idx::CeilDiv(a, b)
            | Idx::Sub(a, b)
            | Idx::Max(a, b)
            | Idx::Min(a, b) => Some((a, b)),
            Idx::Const(_) | Idx::Var(_) | Idx::Shape { .. } | Idx::Value(_) => None,
        }
    }

    /// A variable.
    pub fn var(s: impl Into<String>) -> Idx {
        Idx::Var(s.into())
    }

    // Constants fold only where the result fits `i64` (an overflowing pair stays an
    // expression; the builder's and the heuristics' size limits keep real kernels far
    // from it).
    fn add_folded(self, o: Idx) -> Idx {
        match (self, o) {
            (Idx::Const(a), Idx::Const(b)) if a.checked_add(b).is_some() => Idx::Const(a + b),
            (Idx::Const(0), x) | (x, Idx::Const(0)) => x,
            (a, b) => Idx::Add(Box::new(a), Box::new(b)),
        }
    }

    fn mul_folded(self, o: Idx) -> Idx {
        match (self, o) {
            (Idx::Const(a), Idx::Const(b)) if a.checked_mul(b).is_some() => Idx::Const(a * b),
            (Idx::Const(0), _) | (_, Idx::Const(0)) => Idx::Const(0),
            (Idx::Const(1), x) | (x, Idx::Const(1)) => x,
            (a, b) => Idx::Mul(Box::new(a), Box::new(b)),
        }
    }

    fn div_folded(self, o: Idx) -> Idx {
        match (self, o) {
            (Idx::Const(a), Idx::Const(b)) if a.checked_div(b).is_some() => Idx::Const(a / b),
            (Idx::Const(0), _) => Idx::Const(0),
            (x, Idx::Const(1)) => x,
            (a, b) => Idx::Div(Box::new(a), Box::new(b)),
        }
    }

    fn rem_folded(self, o: Idx) -> Idx {
        match (self, o) {
            (Idx::Const(a), Idx::Const(b)) if a.checked_rem(b).is_some() => Idx::Const(a % b),
            (Idx::Const(0), _) | (_, Idx::Const(1)) => Idx::Const(0),
            (a, b) => Idx::Mod(Box::new(a), Box::new(b)),
        }
    }

    /// The constant, if known.
    pub fn as_const(&self) -> Option<i64> {
        match self {
            Idx::Const(c) => Some(*c),
            _ => None,
        }
    }

    /// An extent as an index expression; `dim` gives the runtime size of an input dim,
    /// `scalar` a scalar input.
    pub fn from_extent(
        e: &Extent,
        dim: &dyn Fn(u32, u32) -> Idx,
        scalar: &dyn Fn(u32) -> Idx,
    ) -> Idx {
        match e {
            Extent::Const(c) => Idx::Const(*c),
            Extent::Dim { tensor, axis } => dim(tensor.id(), *axis),
            Extent::Scalar(v) => scalar(v.id()),
            Extent::Op(op, a, b) => {
                let (a, b) = (
                    Idx::from_extent(a, dim, scalar),
                    Idx::from_extent(b, dim, scalar),
                );
                match op {
                    ExtentOp::Add => a + b,
                    ExtentOp::Mul => a * b,
                    ExtentOp::Div => a / b,
                    ExtentOp::Sub => Idx::Sub(Box::new(a), Box::new(b)),
                    ExtentOp::CeilDiv => Idx::CeilDiv(Box::new(a), Box::new(b)),
                    ExtentOp::Max => Idx::Max(Box::new(a), Box::new(b)),
                    ExtentOp::Min => Idx::Min(Box::new(a), Box::new(b)),
                }
            }
        }
    }

    fn prec(&self) -> u8 {
        match self {
            Idx::Add(..) | Idx::Sub(..) => 1,
            Idx::Mul(..) | Idx::Div(..) | Idx::Mod(..) => 2,
            // A call or a cast binds tighter than `*`; anything looser is parenthesized.
            Idx::Value(e) if !e.is_unary_or_tighter() => 0,
            _ => 3,
        }
    }
}

macro_rules! folded_op {
    ($($trait:ident $method:ident $folded:ident),*) => {$(
        /// Builds the operation, folding constants and identities.
        impl std::ops::$trait for Idx {
            type Output = Idx;
            fn $method(self, o: Idx) -> Idx {
                self.$folded(o)
            }
        }
    )*};
}

folded_op!(Add add add_folded, Mul mul mul_folded, Div div div_folded, Rem rem rem_folded);

impl fmt::Display for Idx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let paren = |f: &mut fmt::Formatter<'_>, x: &Idx, min: u8| -> fmt::Result {
            if x.prec() < min {
                write!(f, "({x})")
            } else {
                write!(f, "{x}")
            }
        };
        let bin = |f: &mut fmt::Formatter<'_>, a: &Idx, op: &str, b: &Idx, p: u8| -> fmt::Result {
            paren(f, a, p)?;
            write!(f, " {op} ")?;
            paren(f, b, p + 1)
        };
        match self {
            Idx::Const(c) => write!(f, "{c}"),
            Idx::Var(v) => f.write_str(v),
            Idx::Shape { param, field, axis } => {
                let field = match field {
                    ShapeField::Size => "size",
                    ShapeField::Stride => "stride",
                };
                write!(f, "{param}.{field}[{axis}]")
            }
            Idx::Add(a, b) => bin(f, a, "+", b, 1),
            Idx::Sub(a, b) => bin(f, a, "-", b, 1),
            Idx::Mul(a, b) => bin(f, a, "*", b, 2),
            Idx::Div(a, b) => bin(f, a, "/", b, 2),
            Idx::Mod(a, b) => bin(f, a, "%", b, 2),
            Idx::CeilDiv(a, b) => write!(f, "nvf_ceil_div({a}, {b})"),
            Idx::Max(a, b) => write!(f, "nvf_max_idx({a}, {b})"),
            Idx::Min(a, b) => write!(f, "nvf_min_idx({a}, {b})"),
            Idx::Value(e) => write!(f, "{e}"),
        }
    }
}
