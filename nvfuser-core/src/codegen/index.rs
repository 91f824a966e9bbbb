//! Index expressions of the kernel IR, folded as they are built so that the generated
//! code reads like hand-written code (`i1 * 128 + threadIdx.x`, not `(i1 * 128) + (0 * 1)`).

use std::fmt;

use super::kir::Expr;
use crate::ir::{Extent, ExtentOp};

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
