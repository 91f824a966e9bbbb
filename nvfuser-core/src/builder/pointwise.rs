//! Elementwise ops: unary, binary, ternary and casts, with broadcasting and promotion.
//!
//! Operands are converted to the op's computation type before the op is applied; the
//! IR keeps that conversion implicit (the dtype rules below fix it), so a comparison of
//! an `i32` tensor with an `f32` tensor compares in `f32`.

use super::{describe_shape, FusionDefinition};
use crate::dtype::{promote_checked, DataType, Operand};
use crate::error::{Error, Result};
use crate::ir::{
    BinaryOp, BinaryRule, IterDomain, IterKind, Op, TernaryOp, UnaryOp, UnaryRule, ValId,
};

impl FusionDefinition {
    /// Applies a unary op elementwise (scalars give scalars).
    pub fn unary(&mut self, op: UnaryOp, x: ValId) -> Result<ValId> {
        let name = op.name();
        let d = self.dtype(name, x)?;
        let out = match op.rule() {
            UnaryRule::Preserve if op == UnaryOp::Neg && d == DataType::Bool => {
                return Err(Error::dtype(
                    name,
                    "a number (neg of bool is not defined; use logical_not)",
                    d,
                ))
            }
            UnaryRule::Preserve => d,
            UnaryRule::FloatMath => {
                if d.is_float() {
                    d
                } else {
                    DataType::F32
                }
            }
            UnaryRule::FloatOnly if d.is_float() => d,
            UnaryRule::FloatOnly => return Err(Error::dtype(name, "a floating point type", d)),
            UnaryRule::ToBool => DataType::Bool,
            UnaryRule::IntegerOrBool if !d.is_float() => d,
            UnaryRule::IntegerOrBool => {
                return Err(Error::dtype(name, "an integer or bool type", d))
            }
        };
        self.pointwise(Op::Unary(op), &[x], out)
    }

    /// Applies a binary op elementwise, broadcasting and promoting its operands.
    pub fn binary(&mut self, op: BinaryOp, a: ValId, b: ValId) -> Result<ValId> {
        let name = op.name();
        let promoted = self.promoted(name, &[a, b])?;
        let out = match op.rule() {
            BinaryRule::Arithmetic { bool_ok } => {
                if promoted == DataType::Bool && !bool_ok {
                    return Err(Error::dtype(
                        name,
                        "numbers (this op is not defined for two bools; cast first)",
                        "bool and bool",
                    ));
                }
                promoted
            }
            BinaryRule::FloatMath => {
                if promoted.is_float() {
                    promoted
                } else {
                    DataType::F32
                }
            }
            BinaryRule::Comparison | BinaryRule::Logical => DataType::Bool,
            BinaryRule::Bitwise { bool_ok } => {
                let (da, db) = (self.dtype(name, a)?, self.dtype(name, b)?);
                if da.is_float() || db.is_float() {
                    return Err(Error::dtype(
                        name,
                        "integer or bool operands",
                        format!("{da} and {db}"),
                    ));
                }
                if promoted == DataType::Bool && !bool_ok {
                    return Err(Error::dtype(name, "integer operands", "bool and bool"));
                }
                promoted
            }
        };
        self.pointwise(Op::Binary(op), &[a, b], out)
    }

    /// Applies a ternary op (`addcmul` takes four operands).
    pub fn ternary(&mut self, op: TernaryOp, args: &[ValId]) -> Result<ValId> {
        let name = op.name();
        if args.len() != op.arity() {
            return Err(Error::arity(name, "operands", op.arity(), args.len()));
        }
        let out = match op {
            TernaryOp::Where => {
                let c = self.dtype(name, args[0])?;
                if c != DataType::Bool {
                    return Err(Error::dtype(name, "a bool condition", c));
                }
                self.promoted(name, &args[1..])?
            }
            TernaryOp::Lerp => {
                let d = self.promoted(name, args)?;
                if !d.is_float() {
                    return Err(Error::dtype(name, "floating point operands", d));
                }
                d
            }
            TernaryOp::Clamp | TernaryOp::Threshold | TernaryOp::Addcmul => {
                self.promoted(name, args)?
            }
        };
        self.pointwise(Op::Ternary(op), args, out)
    }

    /// Converts `x` to `dtype`. Casting to the type it already has returns `x` itself.
    pub fn cast(&mut self, x: ValId, dtype: DataType) -> Result<ValId> {
        if self.dtype("cast", x)? == dtype {
            return Ok(x);
        }
        self.pointwise(Op::Cast, &[x], dtype)
    }

    /// A copy of `x` (a new value with the same contents).
    pub fn set(&mut self, x: ValId) -> Result<ValId> {
        let d = self.dtype("set", x)?;
        self.pointwise(Op::Set, &[x], d)
    }

    /// A copy of tensor `x` that forces a segment boundary between its producer and
    /// its consumers.
    pub fn segment_set(&mut self, x: ValId) -> Result<ValId> {
        self.tensor_type("segment_set", x)?;
        let dt = self.dtype("segment_set", x)?;
        self.pointwise(Op::SegmentSet, &[x], dt)
    }

    /// The promoted type of some operands.
    fn promoted(&self, op: &str, args: &[ValId]) -> Result<DataType> {
        let mut ops = Vec::with_capacity(args.len());
        for &a in args {
            let v = self.val(op, a)?;
            ops.push(Operand {
                dtype: v.dtype,
                is_scalar: !v.is_tensor(),
            });
        }
        match promote_checked(&ops) {
            Ok(Some(d)) => Ok(d),
            Ok(None) => Err(Error::arity(op, "operands (at least)", 1, 0)),
            Err((a, b)) => Err(Error::dtype(
                op,
                "operands that promote (fp8 promotes with no other type, as in PyTorch: \
                 cast explicitly, e.g. `x as f32`)",
                format!("{a} and {b}"),
            )),
        }
    }

    /// Emits an elementwise expression: broadcasts tensor operands to a common shape
    /// (inserting explicit broadcasts for lower ranks) and creates the output.
    fn pointwise(&mut self, op: Op, args: &[ValId], dtype: DataType) -> Result<ValId> {
        let name = op.name();
        let (args, shape) = self.broadcast_operands(name, args)?;
        let out = match shape {
            Some(domain) => self.new_tensor(name, dtype, domain)?,
            None => self.new_scalar(dtype, None),
        };
        self.emit(op, &args, &[out]);
        Ok(out)
    }

    /// Aligns tensor operands on the right, broadcasting lower ranks explicitly, and
    /// returns the operands to use and the common shape (`None` when all are scalars).
    pub(crate) fn broadcast_operands(
        &mut self,
        op: &str,
        args: &[ValId],
    ) -> Result<(Vec<ValId>, Option<Vec<IterDomain>>)> {
        let mut max_rank = None;
        for &a in args {
            if self.val(op, a)?.is_tensor() {
                let r = self.tensor_type(op, a)?.rank();
                max_rank = Some(max_rank.map_or(r, |m: usize| m.max(r)));
            }
        }
        let Some(rank) = max_rank else {
            return Ok((args.to_vec(), None));
        };
        let mut out_args = Vec::with_capacity(args.len());
        let mut shape: Option<Vec<IterDomain>> = None;
        for &a in args {
            if !self.fusion.val(a).is_tensor() {
                out_args.push(a);
                continue;
            }
            let r = self.tensor_type(op, a)?.rank();
            let a = if r < rank {
                let mask: Vec<bool> = (0..rank).map(|i| i < rank - r).collect();
                self.broadcast(a, &mask)?
            } else {
                a
            };
            let dims = self.shape(op, a)?;
            shape = Some(match shape {
                None => dims,
                Some(prev) => {
                    let mut merged = Vec::with_capacity(rank);
                    for (i, (p, d)) in prev.iter().zip(&dims).enumerate() {
                        merged.push(combine(op, i, p, d).map_err(|_| {
                            Error::shape(
                                op,
                                format!("shapes that broadcast, e.g. {}", describe_shape(&prev)),
                                format!("{} (dim {i} differs)", describe_shape(&dims)),
                            )
                        })?);
                    }
                    merged
                }
            });
            out_args.push(a);
        }
        Ok((out_args, shape))
    }
}

/// Combines one dim of two operands under broadcasting.
fn combine(op: &str, axis: usize, a: &IterDomain, b: &IterDomain) -> Result<IterDomain> {
    use IterKind::*;
    let pick_const = |a: &IterDomain, b: &IterDomain| -> Result<IterDomain> {
        match (a.extent.as_const(), b.extent.as_const()) {
            (Some(x), Some(y)) if x != y => Err(Error::shape(
                op,
                format!("size {x} at dim {axis}"),
                format!("size {y}"),
            )),
            (None, Some(_)) => Ok(b.clone()),
            _ => Ok(a.clone()),
        }
    };
    match (a.kind, b.kind) {
        (Iteration, Iteration) | (Expanded, Expanded) => pick_const(a, b),
        (Iteration, Expanded) => pick_const(a, b).map(|_| a.clone()),
        (Expanded, Iteration) => pick_const(a, b).map(|_| b.clone()),
        (Iteration | Expanded, Broadcast) => Ok(a.clone()),
        (Broadcast, Iteration | Expanded) => Ok(b.clone()),
        (Broadcast, Broadcast) => Ok(a.clone()),
        (Reduction, _) | (_, Reduction) => {
            Err(Error::invalid(op, "reduction dims cannot broadcast"))
        }
    }
}

macro_rules! unary_methods {
    ($($method:ident => $op:ident),* $(,)?) => {
        impl FusionDefinition {
            $(
                #[doc = concat!("Elementwise `", stringify!($method), "` (see [`UnaryOp::", stringify!($op), "`]).")]
                pub fn $method(&mut self, x: ValId) -> Result<ValId> {
                    self.unary(UnaryOp::$op, x)
                }
            )*
        }
    };
}

macro_rules! binary_methods {
    ($($method:ident => $op:ident),* $(,)?) => {
        impl FusionDefinition {
            $(
                #[doc = concat!("Elementwise `", stringify!($method), "` (see [`BinaryOp::", stringify!($op), "`]).")]
                pub fn $method(&mut self, a: ValId, b: ValId) -> Result<ValId> {
                    self.binary(BinaryOp::$op, a, b)
                }
            )*
        }
    };
}

unary_methods! {
    abs => Abs, neg => Neg, exp => Exp, exp2 => Exp2, expm1 => Expm1, log => Log,
    log2 => Log2, log10 => Log10, log1p => Log1p, sqrt => Sqrt, rsqrt => Rsqrt,
    reciprocal => Reciprocal, sin => Sin, cos => Cos, tan => Tan, asin => Asin,
    acos => Acos, atan => Atan, sinh => Sinh, cosh => Cosh, tanh => Tanh, asinh => Asinh,
    acosh => Acosh, atanh => Atanh, sigmoid => Sigmoid, relu => Relu, silu => Silu,
    gelu => Gelu, gelu_tanh => GeluTanh, erf => Erf, erfc => Erfc, erfinv => Erfinv,
    lgamma => Lgamma, floor => Floor, ceil => Ceil, round => Round, trunc => Trunc,
    frac => Frac, sign => Sign, isfinite => IsFinite, isinf => IsInf, isnan => IsNan,
    logical_not => LogicalNot, bitwise_not => BitwiseNot,
}

binary_methods! {
    add => Add, sub => Sub, mul => Mul, div => Div, truediv => TrueDiv, fmod => Fmod,
    remainder => Remainder, pow => Pow, atan2 => Atan2, minimum => Minimum,
    maximum => Maximum, eq => Eq, ne => Ne, lt => Lt, le => Le, gt => Gt, ge => Ge,
    logical_and => LogicalAnd, logical_or => LogicalOr, bitwise_and => BitwiseAnd,
    bitwise_or => BitwiseOr, bitwise_xor => BitwiseXor, shift_left => ShiftLeft,
    shift_right => ShiftRight, logical_shift_right => LogicalShiftRight,
}

impl FusionDefinition {
    /// `cond ? a : b` elementwise.
    pub fn where_(&mut self, cond: ValId, a: ValId, b: ValId) -> Result<ValId> {
        self.ternary(TernaryOp::Where, &[cond, a, b])
    }

    /// `start + weight * (end - start)`.
    pub fn lerp(&mut self, start: ValId, end: ValId, weight: ValId) -> Result<ValId> {
        self.ternary(TernaryOp::Lerp, &[start, end, weight])
    }

    /// `min(max(x, lo), hi)`.
    pub fn clamp(&mut self, x: ValId, lo: ValId, hi: ValId) -> Result<ValId> {
        self.ternary(TernaryOp::Clamp, &[x, lo, hi])
    }

    /// `x > threshold ? x : value`.
    pub fn threshold(&mut self, x: ValId, threshold: ValId, value: ValId) -> Result<ValId> {
        self.ternary(TernaryOp::Threshold, &[x, threshold, value])
    }

    /// `x + value * t1 * t2`.
    pub fn addcmul(&mut self, x: ValId, t1: ValId, t2: ValId, value: ValId) -> Result<ValId> {
        self.ternary(TernaryOp::Addcmul, &[x, t1, t2, value])
    }
}
