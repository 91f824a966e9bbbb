//! The AST of the `fusion!` language. Every node keeps its source span.
//!
//! The AST is deliberately small: only what the language accepts. Rust constructs the
//! language rejects (loops, `if`, closures, ...) are reported while lowering syn's tree
//! into this one and become [`ExprKind::Invalid`], so that checking can go on and report
//! every error of a source at once.

use proc_macro2::TokenStream;

use super::error::SpanRange;
use crate::dtype::DataType;
use crate::ir::BinaryOp;

/// One `fn` item of a `fusion!` block.
#[derive(Clone, Debug)]
pub struct FusionFn {
    /// The `///` doc comments, one entry per line, without the leading `///`.
    pub docs: Vec<String>,
    /// The visibility tokens (`pub`, `pub(crate)`, or nothing), to re-emit as written.
    pub vis: TokenStream,
    /// The function's name.
    pub name: Name,
    /// Parameters, in order; each becomes one fusion input.
    pub params: Vec<Param>,
    /// The declared return type.
    pub ret: ReturnType,
    /// The statements of the body (without the tail expression).
    pub body: Vec<Stmt>,
    /// The tail expression: the returned value or tuple.
    pub tail: Option<Expr>,
    /// The whole item.
    pub span: SpanRange,
    /// The body's closing brace (where a missing tail is reported).
    pub body_end: SpanRange,
}

/// An identifier with its span.
#[derive(Clone, Debug)]
pub struct Name {
    /// The text.
    pub text: String,
    /// Where it is.
    pub span: SpanRange,
}

/// A parameter: `x: Tensor<bf16, [N, H]>` or `eps: f32`.
#[derive(Clone, Debug)]
pub struct Param {
    /// Its name.
    pub name: Name,
    /// Its type.
    pub ty: ParamType,
    /// The whole parameter, attributes included.
    pub span: SpanRange,
}

/// The type of a parameter.
#[derive(Clone, Debug)]
pub enum ParamType {
    /// A tensor.
    Tensor(TensorType),
    /// A scalar of a dtype.
    Scalar {
        /// Its dtype.
        dtype: DataType,
        /// Where the type is.
        span: SpanRange,
    },
    /// A type that was reported as an error while parsing (the parameter is poisoned).
    Invalid(SpanRange),
}

/// `Tensor<dtype, [dims]>`, with an optional layout (parameters only).
#[derive(Clone, Debug)]
pub struct TensorType {
    /// Element type.
    pub dtype: DataType,
    /// Where the dtype is.
    pub dtype_span: SpanRange,
    /// One entry per dim.
    pub dims: Vec<Dim>,
    /// `#[layout(...)]` of the parameter, if any.
    pub layout: Option<Layout>,
    /// The whole type.
    pub span: SpanRange,
    /// False when the type had an error (already reported, e.g. an unknown dtype): it is
    /// not checked against, so one typo gives one error.
    pub valid: bool,
}

/// One dim of a tensor type.
#[derive(Clone, Debug)]
pub struct Dim {
    /// What it is.
    pub kind: DimKind,
    /// Where it is.
    pub span: SpanRange,
}

/// A dim of a tensor type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DimKind {
    /// `_`: a symbolic size nothing else is said about.
    Any,
    /// `N`: a symbolic size with a name; equal names are the same size.
    Named(String),
    /// An integer: `1` is a broadcast dim (a static size-1 dim under
    /// `#[layout(static_sizes = true)]`), any other value a static size.
    Size(i64),
    /// A dim that was reported as an error while parsing.
    Invalid,
}

/// `#[layout(contiguity = [..], stride_order = [..], expanded = [..], static_sizes = true)]`.
#[derive(Clone, Debug, Default)]
pub struct Layout {
    /// Contiguity, if given.
    pub contiguity: Option<ContiguitySpec>,
    /// Stride order (0 innermost), if given.
    pub stride_order: Option<Vec<usize>>,
    /// Dims that are expanded (stride 0 with a real size).
    pub expanded: Vec<usize>,
    /// Size-1 dims are static size-1 dims, not broadcast dims.
    pub static_sizes: bool,
    /// The attribute.
    pub span: Option<SpanRange>,
}

/// The `contiguity = ...` entry of a layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContiguitySpec {
    /// `contiguity = false`: the same for every non-broadcast dim.
    All(bool),
    /// `contiguity = [true, _, false]`: per dim, `_` for broadcast and expanded dims.
    PerDim(Vec<Option<bool>>),
}

/// The declared return type: one tensor type or a tuple of them.
#[derive(Clone, Debug)]
pub struct ReturnType {
    /// The tensor types, in order.
    pub types: Vec<TensorType>,
    /// Whether it was written as a tuple.
    pub tuple: bool,
    /// The whole return type.
    pub span: SpanRange,
    /// False when a part of it was reported as an error (then it is not checked against).
    pub valid: bool,
}

/// A statement of the body.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `let pat = init;`
    Let {
        /// The pattern.
        pat: Pat,
        /// The value.
        init: Expr,
        /// The whole statement.
        span: SpanRange,
    },
    /// `expr;` (evaluated, its value dropped).
    Expr(Expr),
}

/// A `let` pattern.
#[derive(Clone, Debug)]
pub enum Pat {
    /// A name.
    Name(Name),
    /// `_`.
    Wild(SpanRange),
    /// `(a, b, ...)`, to destructure ops that return several values.
    Tuple(Vec<Pat>, SpanRange),
}

/// An expression.
#[derive(Clone, Debug)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: SpanRange,
}

/// The kinds of expressions.
#[derive(Clone, Debug)]
pub enum ExprKind {
    /// A variable.
    Var(String),
    /// A literal (becomes a constant where a value is needed).
    Lit(Lit),
    /// A dtype name, as an argument (`full([4], 0.0, f32)`).
    DType(DataType),
    /// `-x` or `!x`.
    Unary {
        /// Which.
        op: UnOp,
        /// The operand.
        expr: Box<Expr>,
    },
    /// `a op b`.
    Binary {
        /// Which.
        op: BinOp,
        /// The operator token.
        op_span: SpanRange,
        /// Left operand.
        lhs: Box<Expr>,
        /// Right operand.
        rhs: Box<Expr>,
    },
    /// `x as dtype`.
    Cast {
        /// The operand.
        expr: Box<Expr>,
        /// The target type.
        dtype: DataType,
        /// Where the target type is.
        dtype_span: SpanRange,
    },
    /// `op(args)` or `receiver.op(args)`.
    Call {
        /// The op's name.
        func: Name,
        /// The receiver of a method call (the op's first argument).
        receiver: Option<Box<Expr>>,
        /// The other arguments.
        args: Vec<Arg>,
    },
    /// `[a, b, ...]`: axes, sizes, masks, tensor lists, ranges, widths.
    Array(Vec<Expr>),
    /// `(a, b, ...)`: several outputs, pad widths, strided slice ranges.
    Tuple(Vec<Expr>),
    /// `a..b`, `a..`, `..b`, `..`.
    Range {
        /// Start, if given.
        start: Option<Box<Expr>>,
        /// End (exclusive), if given.
        end: Option<Box<Expr>>,
    },
    /// `tuple.0`.
    Field {
        /// The tuple.
        expr: Box<Expr>,
        /// The index.
        index: usize,
    },
    /// A construct that was already reported as an error.
    Invalid,
}

/// A call argument: positional, or `name = value`.
#[derive(Clone, Debug)]
pub struct Arg {
    /// The keyword, for `name = value`.
    pub name: Option<Name>,
    /// The value.
    pub value: Expr,
}

/// A literal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lit {
    /// An integer; `dtype` from a suffix (`3i32`).
    Int {
        /// The value (wide enough to hold `-i64::MIN` before negation folds in).
        value: i128,
        /// The suffix's type, if any.
        dtype: Option<DataType>,
    },
    /// A float; `dtype` from a suffix (`0.5f32`, `1.0bf16`, `2f32`).
    Float {
        /// The value.
        value: f64,
        /// The suffix's type, if any.
        dtype: Option<DataType>,
    },
    /// `true` or `false`.
    Bool(bool),
}

/// Prefix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnOp {
    /// `-x`: `neg` (folded into negative literals).
    Neg,
    /// `!x`: `logical_not` for bool, `bitwise_not` for integers.
    Not,
}

/// Infix operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`
    Div,
    /// `%` (C `fmod`: the sign of the dividend, as Rust's `%`)
    Rem,
    /// `&`
    BitAnd,
    /// `|`
    BitOr,
    /// `^`
    BitXor,
    /// `<<`
    Shl,
    /// `>>` (arithmetic)
    Shr,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&`
    And,
    /// `||`
    Or,
}

impl BinOp {
    /// The builder op the operator stands for.
    pub fn builder_op(self) -> BinaryOp {
        match self {
            BinOp::Add => BinaryOp::Add,
            BinOp::Sub => BinaryOp::Sub,
            BinOp::Mul => BinaryOp::Mul,
            BinOp::Div => BinaryOp::Div,
            BinOp::Rem => BinaryOp::Fmod,
            BinOp::BitAnd => BinaryOp::BitwiseAnd,
            BinOp::BitOr => BinaryOp::BitwiseOr,
            BinOp::BitXor => BinaryOp::BitwiseXor,
            BinOp::Shl => BinaryOp::ShiftLeft,
            BinOp::Shr => BinaryOp::ShiftRight,
            BinOp::Eq => BinaryOp::Eq,
            BinOp::Ne => BinaryOp::Ne,
            BinOp::Lt => BinaryOp::Lt,
            BinOp::Le => BinaryOp::Le,
            BinOp::Gt => BinaryOp::Gt,
            BinOp::Ge => BinaryOp::Ge,
            BinOp::And => BinaryOp::LogicalAnd,
            BinOp::Or => BinaryOp::LogicalOr,
        }
    }
}
