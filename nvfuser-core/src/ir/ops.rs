//! The operations an expression can perform, as plain data.
//!
//! Attributes never hold value ids: anything that is a value (a pad fill, a symbolic
//! size, a seed) is an input of the expression, and [`SizeArg::Input`] points at that
//! input by position. So renumbering a fusion only touches expression inputs/outputs.

use serde::{Deserialize, Serialize};

macro_rules! op_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* $variant),*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The op's name as written in `fusion!` source and printed IR.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text),*
                }
            }

            /// Looks an op up by its name.
            pub fn from_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|op| op.name() == name)
            }
        }
    };
}

op_enum! {
    /// Elementwise functions of one operand.
    UnaryOp {
        /// |x|.
        Abs => "abs",
        /// -x.
        Neg => "neg",
        /// e^x.
        Exp => "exp",
        /// 2^x.
        Exp2 => "exp2",
        /// e^x - 1.
        Expm1 => "expm1",
        /// Natural log.
        Log => "log",
        /// Base-2 log.
        Log2 => "log2",
        /// Base-10 log.
        Log10 => "log10",
        /// ln(1 + x).
        Log1p => "log1p",
        /// Square root.
        Sqrt => "sqrt",
        /// 1 / sqrt(x).
        Rsqrt => "rsqrt",
        /// 1 / x.
        Reciprocal => "reciprocal",
        /// Sine.
        Sin => "sin",
        /// Cosine.
        Cos => "cos",
        /// Tangent.
        Tan => "tan",
        /// Arc sine.
        Asin => "asin",
        /// Arc cosine.
        Acos => "acos",
        /// Arc tangent.
        Atan => "atan",
        /// Hyperbolic sine.
        Sinh => "sinh",
        /// Hyperbolic cosine.
        Cosh => "cosh",
        /// Hyperbolic tangent.
        Tanh => "tanh",
        /// Inverse hyperbolic sine.
        Asinh => "asinh",
        /// Inverse hyperbolic cosine.
        Acosh => "acosh",
        /// Inverse hyperbolic tangent.
        Atanh => "atanh",
        /// 1 / (1 + e^-x).
        Sigmoid => "sigmoid",
        /// max(x, 0).
        Relu => "relu",
        /// x * sigmoid(x).
        Silu => "silu",
        /// GELU, exact form: x/2 * (1 + erf(x/sqrt 2)).
        Gelu => "gelu",
        /// GELU, tanh approximation.
        GeluTanh => "gelu_tanh",
        /// Error function.
        Erf => "erf",
        /// 1 - erf(x).
        Erfc => "erfc",
        /// Inverse error function.
        Erfinv => "erfinv",
        /// ln |Γ(x)|.
        Lgamma => "lgamma",
        /// Round toward -inf.
        Floor => "floor",
        /// Round toward +inf.
        Ceil => "ceil",
        /// Round half to even.
        Round => "round",
        /// Round toward zero.
        Trunc => "trunc",
        /// x - trunc(x).
        Frac => "frac",
        /// -1, 0 or 1 (NaN stays NaN).
        Sign => "sign",
        /// Not inf and not NaN.
        IsFinite => "isfinite",
        /// ±inf.
        IsInf => "isinf",
        /// NaN.
        IsNan => "isnan",
        /// x == 0.
        LogicalNot => "logical_not",
        /// Bitwise complement (integers and bool).
        BitwiseNot => "bitwise_not",
    }
}

op_enum! {
    /// Elementwise functions of two operands (with broadcasting).
    BinaryOp {
        /// a + b.
        Add => "add",
        /// a - b.
        Sub => "sub",
        /// a * b.
        Mul => "mul",
        /// a / b; integers truncate toward zero.
        Div => "div",
        /// a / b in floating point, whatever the input types.
        TrueDiv => "truediv",
        /// C `fmod`: the result has the sign of a.
        Fmod => "fmod",
        /// Python `%`: the result has the sign of b.
        Remainder => "remainder",
        /// a^b.
        Pow => "pow",
        /// atan2(a, b).
        Atan2 => "atan2",
        /// Minimum, NaN-propagating.
        Minimum => "minimum",
        /// Maximum, NaN-propagating.
        Maximum => "maximum",
        /// a == b.
        Eq => "eq",
        /// a != b.
        Ne => "ne",
        /// a < b.
        Lt => "lt",
        /// a <= b.
        Le => "le",
        /// a > b.
        Gt => "gt",
        /// a >= b.
        Ge => "ge",
        /// Both nonzero.
        LogicalAnd => "logical_and",
        /// Either nonzero.
        LogicalOr => "logical_or",
        /// Bitwise and.
        BitwiseAnd => "bitwise_and",
        /// Bitwise or.
        BitwiseOr => "bitwise_or",
        /// Bitwise xor.
        BitwiseXor => "bitwise_xor",
        /// a << b.
        ShiftLeft => "shift_left",
        /// Arithmetic a >> b (sign-extending).
        ShiftRight => "shift_right",
        /// Logical a >> b (zero-filling, as if unsigned).
        LogicalShiftRight => "logical_shift_right",
    }
}

op_enum! {
    /// Elementwise functions of three or four operands.
    TernaryOp {
        /// where(cond, a, b).
        Where => "where_",
        /// lerp(start, end, weight) = start + weight * (end - start).
        Lerp => "lerp",
        /// clamp(x, min, max).
        Clamp => "clamp",
        /// threshold(x, threshold, value): x if x > threshold else value.
        Threshold => "threshold",
        /// addcmul(x, t1, t2, value) = x + value * t1 * t2.
        Addcmul => "addcmul",
    }
}

op_enum! {
    /// Reductions with one output.
    ReductionOp {
        /// Sum.
        Sum => "sum",
        /// Product.
        Prod => "prod",
        /// Maximum (NaN-propagating).
        Max => "max",
        /// Minimum (NaN-propagating).
        Min => "min",
        /// Arithmetic mean.
        Mean => "mean",
    }
}

op_enum! {
    /// Inclusive scans (cumulative reductions) along one axis.
    ScanOp {
        /// Running sum (`torch.cumsum`).
        Sum => "cumsum",
        /// Running product (`torch.cumprod`).
        Prod => "cumprod",
        /// Running maximum, NaN-propagating (the values of `torch.cummax`).
        Max => "cummax",
        /// Running minimum, NaN-propagating (the values of `torch.cummin`).
        Min => "cummin",
    }
}

impl ScanOp {
    /// The reduction whose value every prefix holds.
    pub fn reduction(self) -> ReductionOp {
        match self {
            ScanOp::Sum => ReductionOp::Sum,
            ScanOp::Prod => ReductionOp::Prod,
            ScanOp::Max => ReductionOp::Max,
            ScanOp::Min => ReductionOp::Min,
        }
    }
}

op_enum! {
    /// Random distributions.
    Distribution {
        /// Uniform on [low, high).
        Uniform => "uniform",
        /// Normal with mean and standard deviation.
        Normal => "normal",
    }
}

impl UnaryOp {
    /// The dtype rule this op follows.
    pub fn rule(self) -> UnaryRule {
        use UnaryOp::*;
        match self {
            Abs | Neg | Relu | Sign | Floor | Ceil | Round | Trunc => UnaryRule::Preserve,
            Frac => UnaryRule::FloatOnly,
            IsFinite | IsInf | IsNan | LogicalNot => UnaryRule::ToBool,
            BitwiseNot => UnaryRule::IntegerOrBool,
            _ => UnaryRule::FloatMath,
        }
    }
}

/// How a unary op's output dtype follows from its input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryRule {
    /// Same type as the input.
    Preserve,
    /// Floating math: integer and bool inputs compute in (and return) f32.
    FloatMath,
    /// Only defined for floating inputs.
    FloatOnly,
    /// Returns bool.
    ToBool,
    /// Only defined for integers and bool; same type.
    IntegerOrBool,
}

impl BinaryOp {
    /// The dtype rule this op follows.
    pub fn rule(self) -> BinaryRule {
        use BinaryOp::*;
        match self {
            Add | Mul | Minimum | Maximum => BinaryRule::Arithmetic { bool_ok: true },
            Sub | Div | Fmod | Remainder | Pow => BinaryRule::Arithmetic { bool_ok: false },
            TrueDiv | Atan2 => BinaryRule::FloatMath,
            Eq | Ne | Lt | Le | Gt | Ge => BinaryRule::Comparison,
            LogicalAnd | LogicalOr => BinaryRule::Logical,
            BitwiseAnd | BitwiseOr | BitwiseXor => BinaryRule::Bitwise { bool_ok: true },
            ShiftLeft | ShiftRight | LogicalShiftRight => BinaryRule::Bitwise { bool_ok: false },
        }
    }
}

/// How a binary op's output dtype follows from its inputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryRule {
    /// The promoted type; `bool_ok` says whether bool operands are allowed.
    Arithmetic {
        /// Whether two bools are a valid input.
        bool_ok: bool,
    },
    /// The promoted type, lifted to f32 when it is not floating.
    FloatMath,
    /// Compares in the promoted type, returns bool.
    Comparison,
    /// Returns bool.
    Logical,
    /// Integers (and bool when `bool_ok`) only; the promoted type.
    Bitwise {
        /// Whether bool operands are allowed.
        bool_ok: bool,
    },
}

impl TernaryOp {
    /// How many inputs the op takes.
    pub fn arity(self) -> usize {
        match self {
            TernaryOp::Addcmul => 4,
            _ => 3,
        }
    }
}

/// A size-like attribute: a constant, or the expression input at this position (an
/// integer scalar).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SizeArg {
    /// A constant.
    Const(i64),
    /// The value of the expression's input at this position.
    Input(u32),
}

/// One dim of a slice: start (inclusive), stop (exclusive), positive step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SliceRange {
    /// First index. Negative constants count from the end.
    pub start: SizeArg,
    /// One past the last index. Negative constants count from the end; `i64::MAX` means
    /// "to the end".
    pub stop: SizeArg,
    /// Step, at least 1.
    pub step: i64,
}

/// What an expression computes. See each builder method for the exact semantics.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Elementwise unary function. Inputs: `[x]`.
    Unary(UnaryOp),
    /// Elementwise binary function. Inputs: `[a, b]`.
    Binary(BinaryOp),
    /// Elementwise ternary function. Inputs: 3 (4 for addcmul).
    Ternary(TernaryOp),
    /// Type conversion to the output's dtype. Inputs: `[x]`.
    Cast,
    /// A copy (no-op on values). Inputs: `[x]`.
    Set,
    /// A copy that forces a segment boundary. Inputs: `[x]`.
    SegmentSet,
    /// Reduction over `axes` (sorted, of the input's logical dims); the output keeps the
    /// reduced dims as reduction domains.
    Reduction {
        /// Which reduction.
        op: ReductionOp,
        /// Reduced axes, sorted and distinct.
        axes: Vec<usize>,
    },
    /// Variance with a correction (Bessel's is 1). Outputs: `[var]`.
    Var {
        /// Reduced axes.
        axes: Vec<usize>,
        /// Subtracted from the element count in the denominator.
        correction: i64,
    },
    /// Variance and mean in one pass. Outputs: `[var, mean]`.
    VarMean {
        /// Reduced axes.
        axes: Vec<usize>,
        /// Subtracted from the element count in the denominator.
        correction: i64,
    },
    /// Welford's algorithm. Outputs: `[mean, var_sum, count]` (count is i64).
    Welford {
        /// Reduced axes.
        axes: Vec<usize>,
    },
    /// Inclusive scan along `axis`: output element `i` along the axis combines input
    /// elements `0..=i`. The output has the input's shape. Inputs: `[x]`.
    Scan {
        /// Which scan.
        op: ScanOp,
        /// The scanned axis (a logical dim of the input).
        axis: usize,
    },
    /// Stable sort along `axis` (the order of `eval`'s "Sorting" section: ties by the
    /// lower index first, NaN above +inf, -0 equal to +0). Outputs `[values, indices]`,
    /// indices i64 positions along `axis`. With `k`, only the first `k` elements of the
    /// sorted order (`topk`; the output's dim `axis` has extent `k`). Inputs: `[x]`.
    Sort {
        /// The sorted axis (a logical dim of the input).
        axis: usize,
        /// Largest first (`topk`'s `largest`).
        descending: bool,
        /// Keep the first `k` of the order (`topk`); `None` keeps all (`sort`).
        k: Option<i64>,
    },
    /// Inserts broadcast dims where `mask` is true. Output rank is `mask.len()`.
    Broadcast {
        /// One entry per output dim; true marks a new size-1 dim.
        mask: Vec<bool>,
    },
    /// Expands broadcast dims to the given sizes (`-1` keeps a dim).
    Expand {
        /// One per dim.
        sizes: Vec<SizeArg>,
    },
    /// Row-major reshape to `sizes` (at most one `-1`, inferred).
    Reshape {
        /// Target sizes.
        sizes: Vec<SizeArg>,
    },
    /// Reorders dims: output dim `i` is input dim `perm[i]`.
    Permute {
        /// A permutation of `0..rank`.
        perm: Vec<usize>,
    },
    /// Removes size-1 (broadcast) dims.
    Squeeze {
        /// Sorted distinct axes to remove.
        axes: Vec<usize>,
    },
    /// Strided slice, one range per dim.
    Slice {
        /// One per dim.
        ranges: Vec<SliceRange>,
    },
    /// Constant padding; inputs `[x, value, width scalars...]`.
    Pad {
        /// (before, after) per dim, non-negative: constants, or integer scalar inputs
        /// of the expression (checked non-negative at run time).
        widths: Vec<(SizeArg, SizeArg)>,
    },
    /// Concatenation along `axis`; inputs are the tensors.
    Cat {
        /// The axis.
        axis: usize,
    },
    /// A tensor filled with input 0 (a scalar).
    Full {
        /// Output sizes.
        sizes: Vec<SizeArg>,
    },
    /// `start + i * step` for `i in 0..length`; inputs `[start, step, ...]`.
    Iota {
        /// Number of elements.
        length: SizeArg,
    },
    /// Random numbers; inputs `[a, b, seed, offset, ...]` where (a, b) is (low, high) or
    /// (mean, std). The stream is specified in [`crate::philox`].
    Rand {
        /// Which distribution.
        dist: Distribution,
        /// Output sizes.
        sizes: Vec<SizeArg>,
    },
    /// Picks entries of input 0 along `axis` by the 1-D integer tensor input 1.
    IndexSelect {
        /// The axis.
        axis: usize,
    },
    /// Picks one index along `axis`, removing the dim.
    Select {
        /// The axis.
        axis: usize,
        /// The index (negative counts from the end).
        index: SizeArg,
    },
    /// `torch.gather`: out[..i..] = x[..index[..i..]..] along `axis`; the index may be
    /// smaller than x in the other dims.
    Gather {
        /// The axis.
        axis: usize,
    },
    /// `numpy.take_along_axis`: like gather, with the index broadcast against x in the
    /// other dims.
    TakeAlongAxis {
        /// The axis.
        axis: usize,
    },
    /// `torch.scatter` / `torch.scatter_add`: the output is input 0 (`self`) with, for
    /// every element `j` of the index (input 1), the element at `j` with `j[axis]`
    /// replaced by `index[j]` set to (or, with `add`, increased by) `src[j]` (input 2, a
    /// tensor of self's dtype, or a scalar for the value form of `scatter`). Duplicate
    /// targets: the last index element in row-major order wins; adds are made in
    /// row-major order. See the evaluator's "# Indexing".
    Scatter {
        /// The axis.
        axis: usize,
        /// Add instead of replacing (`scatter_add`, `scatter_reduce(reduce="sum")`).
        add: bool,
    },
    /// The size of input 0 along `axis`, as an i64 scalar.
    Size {
        /// The axis.
        axis: usize,
    },
}

impl Op {
    /// The op's name in printed IR and `fusion!` source.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Unary(u) => u.name(),
            Op::Binary(b) => b.name(),
            Op::Ternary(t) => t.name(),
            Op::Cast => "cast",
            Op::Set => "set",
            Op::SegmentSet => "segment_set",
            Op::Reduction { op, .. } => op.name(),
            Op::Var { .. } => "var",
            Op::VarMean { .. } => "var_mean",
            Op::Welford { .. } => "welford",
            Op::Scan { op, .. } => op.name(),
            Op::Sort { k: None, .. } => "sort",
            Op::Sort { k: Some(_), .. } => "topk",
            Op::Broadcast { .. } => "broadcast",
            Op::Expand { .. } => "expand",
            Op::Reshape { .. } => "reshape",
            Op::Permute { .. } => "permute",
            Op::Squeeze { .. } => "squeeze",
            Op::Slice { .. } => "slice",
            Op::Pad { .. } => "pad",
            Op::Cat { .. } => "cat",
            Op::Full { .. } => "full",
            Op::Iota { .. } => "iota",
            Op::Rand { dist, .. } => dist.name(),
            Op::IndexSelect { .. } => "index_select",
            Op::Select { .. } => "select",
            Op::Gather { .. } => "gather",
            Op::TakeAlongAxis { .. } => "take_along_axis",
            Op::Scatter { add: false, .. } => "scatter",
            Op::Scatter { add: true, .. } => "scatter_add",
            Op::Size { .. } => "size",
        }
    }

    /// True for the creation ops (`full`, `iota`, `uniform`/`normal`): tensors made from
    /// scalars, each element a function of its logical position.
    pub fn is_creation(&self) -> bool {
        matches!(self, Op::Full { .. } | Op::Iota { .. } | Op::Rand { .. })
    }

    /// The reduced axes, for the reduction family.
    pub fn reduction_axes(&self) -> Option<&[usize]> {
        match self {
            Op::Reduction { axes, .. }
            | Op::Var { axes, .. }
            | Op::VarMean { axes, .. }
            | Op::Welford { axes } => Some(axes),
            _ => None,
        }
    }
}
