//! Elementwise ops: unary, binary, ternary and cast over broadcast operands.
//!
//! Each op converts its operands to the computation type (see the module docs of
//! [`super`]) and runs one monomorphized closure over an `ndarray::Zip` of the broadcast
//! operands: no per-element allocation or dynamic dispatch.

use ndarray::{ArrayD, CowArray, IxDyn, Zip};

use super::convert::{
    cast_data, operand_bool, operand_f64, operand_i64, operand_truth, wrap_array,
};
use super::math::*;
use super::tensor::{HostData, HostTensor};
use crate::dtype::{promote, Category, DataType, Operand};
use crate::error::{Error, Result};
use crate::ir::{BinaryOp, BinaryRule, TernaryOp, UnaryOp, UnaryRule};

/// An operand: its value and whether the IR calls it a scalar.
#[derive(Clone, Copy)]
pub(super) struct Arg<'a> {
    pub t: &'a HostTensor,
    pub scalar: bool,
}

fn internal(op: &str) -> Error {
    Error::InvalidIr(format!(
        "{op}: operands do not broadcast to the output shape"
    ))
}

fn view<'a, T>(
    a: &'a CowArray<'_, T, IxDyn>,
    shape: &[usize],
    op: &str,
) -> Result<ndarray::ArrayViewD<'a, T>> {
    a.broadcast(IxDyn(shape)).ok_or_else(|| internal(op))
}

fn zip1<A: Copy, O>(a: &CowArray<'_, A, IxDyn>, f: impl Fn(A) -> O) -> ArrayD<O> {
    a.mapv(f)
}

fn zip2<A: Copy, B: Copy, O>(
    op: &str,
    shape: &[usize],
    a: &CowArray<'_, A, IxDyn>,
    b: &CowArray<'_, B, IxDyn>,
    f: impl Fn(A, B) -> O,
) -> Result<ArrayD<O>> {
    Ok(Zip::from(view(a, shape, op)?)
        .and(view(b, shape, op)?)
        .map_collect(|&x, &y| f(x, y)))
}

fn zip3<A: Copy, B: Copy, C: Copy, O>(
    op: &str,
    shape: &[usize],
    a: &CowArray<'_, A, IxDyn>,
    b: &CowArray<'_, B, IxDyn>,
    c: &CowArray<'_, C, IxDyn>,
    f: impl Fn(A, B, C) -> O,
) -> Result<ArrayD<O>> {
    Ok(Zip::from(view(a, shape, op)?)
        .and(view(b, shape, op)?)
        .and(view(c, shape, op)?)
        .map_collect(|&x, &y, &z| f(x, y, z)))
}

fn zip4<T: Copy, O>(
    op: &str,
    shape: &[usize],
    v: [&CowArray<'_, T, IxDyn>; 4],
    f: impl Fn(T, T, T, T) -> O,
) -> Result<ArrayD<O>> {
    Ok(Zip::from(view(v[0], shape, op)?)
        .and(view(v[1], shape, op)?)
        .and(view(v[2], shape, op)?)
        .and(view(v[3], shape, op)?)
        .map_collect(|&a, &b, &c, &d| f(a, b, c, d)))
}

/// Casts a result computed in `natural` to the IR's output type when they differ (only
/// for hand-built IR; the builder makes them agree), wrapping i32 results.
fn finish(mut data: HostData, natural: DataType, out: DataType) -> HostData {
    if let HostData::Int(a) = &mut data {
        wrap_array(a, natural);
    }
    if natural == out {
        data
    } else {
        cast_data(&data, natural, out)
    }
}

fn f_operand<'a>(x: Arg<'a>, c: DataType) -> CowArray<'a, f64, IxDyn> {
    operand_f64(x.t, c, x.scalar)
}

fn i_operand<'a>(op: &str, x: Arg<'a>, c: DataType) -> Result<CowArray<'a, i64, IxDyn>> {
    operand_i64(x.t, c)
        .ok_or_else(|| Error::dtype(op, format!("an operand convertible to {c}"), x.t.dtype()))
}

fn b_operand<'a>(op: &str, x: Arg<'a>) -> Result<CowArray<'a, bool, IxDyn>> {
    operand_bool(x.t).ok_or_else(|| Error::dtype(op, "bool operands", x.t.dtype()))
}

/// `out = op(x)`.
pub(super) fn unary(op: UnaryOp, x: Arg<'_>, out: DataType) -> Result<HostData> {
    use UnaryOp::*;
    let name = op.name();
    let rule = op.rule();
    // The computation type: floating math runs in the output type; everything else in
    // the input's own type.
    let c = if rule == UnaryRule::FloatMath {
        out
    } else {
        x.t.dtype()
    };
    let (data, natural) = match (c.category(), rule) {
        (Category::Floating, _) => {
            let a = f_operand(x, c);
            let r = match op {
                Abs => zip1(&a, f64::abs),
                Neg => zip1(&a, |v: f64| -v),
                Exp => zip1(&a, f64::exp),
                Exp2 => zip1(&a, f64::exp2),
                Expm1 => zip1(&a, f64::exp_m1),
                Log => zip1(&a, f64::ln),
                Log2 => zip1(&a, f64::log2),
                Log10 => zip1(&a, f64::log10),
                Log1p => zip1(&a, f64::ln_1p),
                Sqrt => zip1(&a, f64::sqrt),
                Rsqrt => zip1(&a, |v: f64| 1.0 / v.sqrt()),
                Reciprocal => zip1(&a, |v: f64| 1.0 / v),
                Sin => zip1(&a, f64::sin),
                Cos => zip1(&a, f64::cos),
                Tan => zip1(&a, f64::tan),
                Asin => zip1(&a, f64::asin),
                Acos => zip1(&a, f64::acos),
                Atan => zip1(&a, f64::atan),
                Sinh => zip1(&a, f64::sinh),
                Cosh => zip1(&a, f64::cosh),
                Tanh => zip1(&a, f64::tanh),
                Asinh => zip1(&a, f64::asinh),
                Acosh => zip1(&a, f64::acosh),
                Atanh => zip1(&a, f64::atanh),
                Sigmoid => zip1(&a, |v: f64| 1.0 / (1.0 + (-v).exp())),
                Relu => zip1(&a, relu_f),
                Silu => zip1(&a, |v: f64| v / (1.0 + (-v).exp())),
                Gelu => zip1(&a, gelu),
                GeluTanh => zip1(&a, gelu_tanh),
                Erf => zip1(&a, libm::erf),
                Erfc => zip1(&a, libm::erfc),
                Erfinv => zip1(&a, erfinv),
                Lgamma => zip1(&a, libm::lgamma),
                Floor => zip1(&a, f64::floor),
                Ceil => zip1(&a, f64::ceil),
                Round => zip1(&a, f64::round_ties_even),
                Trunc => zip1(&a, f64::trunc),
                Frac => zip1(&a, |v: f64| v - v.trunc()),
                Sign => zip1(&a, sign_f),
                IsFinite => {
                    return Ok(finish(
                        HostData::Bool(zip1(&a, f64::is_finite)),
                        DataType::Bool,
                        out,
                    ))
                }
                IsInf => {
                    return Ok(finish(
                        HostData::Bool(zip1(&a, f64::is_infinite)),
                        DataType::Bool,
                        out,
                    ))
                }
                IsNan => {
                    return Ok(finish(
                        HostData::Bool(zip1(&a, f64::is_nan)),
                        DataType::Bool,
                        out,
                    ))
                }
                LogicalNot => {
                    return Ok(finish(
                        HostData::Bool(zip1(&a, |v: f64| v == 0.0)),
                        DataType::Bool,
                        out,
                    ))
                }
                BitwiseNot => {
                    return Err(Error::dtype(name, "an integer or bool type", x.t.dtype()))
                }
            };
            (HostData::Float(r), c)
        }
        (_, UnaryRule::FloatMath) | (_, UnaryRule::FloatOnly) => {
            return Err(Error::dtype(name, "a floating point computation type", c))
        }
        (Category::Integer, _) => {
            let a = i_operand(name, x, c)?;
            match op {
                Abs => (HostData::Int(zip1(&a, i64::wrapping_abs)), c),
                Neg => (HostData::Int(zip1(&a, i64::wrapping_neg)), c),
                Relu => (HostData::Int(zip1(&a, |v: i64| v.max(0))), c),
                Sign => (HostData::Int(zip1(&a, i64::signum)), c),
                Floor | Ceil | Round | Trunc => (HostData::Int(a.into_owned()), c),
                IsFinite => (HostData::Bool(zip1(&a, |_| true)), DataType::Bool),
                IsInf | IsNan => (HostData::Bool(zip1(&a, |_| false)), DataType::Bool),
                LogicalNot => (HostData::Bool(zip1(&a, |v: i64| v == 0)), DataType::Bool),
                BitwiseNot => (HostData::Int(zip1(&a, |v: i64| !v)), c),
                _ => return Err(Error::dtype(name, "a floating point type", c)),
            }
        }
        (Category::Bool, _) => {
            let a = b_operand(name, x)?;
            match op {
                Abs | Relu | Sign | Floor | Ceil | Round | Trunc => {
                    (HostData::Bool(a.into_owned()), c)
                }
                IsFinite => (HostData::Bool(zip1(&a, |_| true)), DataType::Bool),
                IsInf | IsNan => (HostData::Bool(zip1(&a, |_| false)), DataType::Bool),
                LogicalNot | BitwiseNot => (HostData::Bool(zip1(&a, |v: bool| !v)), DataType::Bool),
                _ => {
                    return Err(Error::dtype(
                        name,
                        "a number (this op is not defined for bool)",
                        c,
                    ))
                }
            }
        }
    };
    Ok(finish(data, natural, out))
}

/// Integer division, modulo and power need their divisors/exponents checked.
fn check_divisor(op: BinaryOp, b: &CowArray<'_, i64, IxDyn>, shape: &[usize]) -> Result<()> {
    if shape.contains(&0) {
        return Ok(());
    }
    match op {
        BinaryOp::Div | BinaryOp::Fmod | BinaryOp::Remainder if b.iter().any(|&v| v == 0) => Err(Error::invalid(
            op.name(),
            "integer division by zero (a divisor element is 0; cast to a float type for IEEE results)",
        )),
        BinaryOp::Pow => match b.iter().find(|&&v| v < 0) {
            Some(v) => Err(Error::invalid(
                op.name(),
                format!("integers to negative integer powers are not allowed (found exponent {v})"),
            )),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// `out = op(a, b)` with `a` and `b` broadcast to `shape`.
pub(super) fn binary(
    op: BinaryOp,
    a: Arg<'_>,
    b: Arg<'_>,
    out: DataType,
    shape: &[usize],
) -> Result<HostData> {
    use BinaryOp::*;
    let name = op.name();
    let rule = op.rule();
    if rule == BinaryRule::Logical {
        let (x, y) = (operand_truth(a.t), operand_truth(b.t));
        let r = match op {
            LogicalAnd => zip2(name, shape, &x, &y, |p, q| p && q)?,
            _ => zip2(name, shape, &x, &y, |p, q| p || q)?,
        };
        return Ok(finish(HostData::Bool(r), DataType::Bool, out));
    }
    let c = if rule == BinaryRule::Comparison {
        let operand = |x: Arg<'_>| Operand {
            dtype: x.t.dtype(),
            is_scalar: x.scalar,
        };
        promote(&[operand(a), operand(b)]).unwrap_or(out)
    } else {
        out
    };
    macro_rules! cmp {
        ($x:expr, $y:expr) => {{
            let r = match op {
                Eq => zip2(name, shape, &$x, &$y, |p, q| p == q)?,
                Ne => zip2(name, shape, &$x, &$y, |p, q| p != q)?,
                Lt => zip2(name, shape, &$x, &$y, |p, q| p < q)?,
                Le => zip2(name, shape, &$x, &$y, |p, q| p <= q)?,
                Gt => zip2(name, shape, &$x, &$y, |p, q| p > q)?,
                _ => zip2(name, shape, &$x, &$y, |p, q| p >= q)?,
            };
            return Ok(finish(HostData::Bool(r), DataType::Bool, out));
        }};
    }
    let not_for = |what: &str| {
        Error::dtype(
            name,
            format!("operands this op accepts (it is not defined for {what})"),
            c,
        )
    };
    let (data, natural) = match c.category() {
        Category::Floating => {
            let (x, y) = (f_operand(a, c), f_operand(b, c));
            if rule == BinaryRule::Comparison {
                cmp!(x, y);
            }
            let r = match op {
                Add => zip2(name, shape, &x, &y, |p, q| p + q)?,
                Sub => zip2(name, shape, &x, &y, |p, q| p - q)?,
                Mul => zip2(name, shape, &x, &y, |p, q| p * q)?,
                Div | TrueDiv => zip2(name, shape, &x, &y, |p, q| p / q)?,
                Fmod => zip2(name, shape, &x, &y, |p, q| p % q)?,
                Remainder => zip2(name, shape, &x, &y, remainder_f)?,
                Pow => zip2(name, shape, &x, &y, f64::powf)?,
                Atan2 => zip2(name, shape, &x, &y, f64::atan2)?,
                Minimum => zip2(name, shape, &x, &y, minimum)?,
                Maximum => zip2(name, shape, &x, &y, maximum)?,
                _ => return Err(not_for("floating point types")),
            };
            (HostData::Float(r), c)
        }
        Category::Integer => {
            let (x, y) = (i_operand(name, a, c)?, i_operand(name, b, c)?);
            if rule == BinaryRule::Comparison {
                cmp!(x, y);
            }
            check_divisor(op, &y, shape)?;
            let w = if c == DataType::I32 { 32 } else { 64 };
            let r = match op {
                Add => zip2(name, shape, &x, &y, i64::wrapping_add)?,
                Sub => zip2(name, shape, &x, &y, i64::wrapping_sub)?,
                Mul => zip2(name, shape, &x, &y, i64::wrapping_mul)?,
                Div => zip2(name, shape, &x, &y, i64::wrapping_div)?,
                Fmod => zip2(name, shape, &x, &y, i64::wrapping_rem)?,
                Remainder => zip2(name, shape, &x, &y, remainder_i)?,
                Pow => zip2(name, shape, &x, &y, pow_i)?,
                Minimum => zip2(name, shape, &x, &y, i64::min)?,
                Maximum => zip2(name, shape, &x, &y, i64::max)?,
                BitwiseAnd => zip2(name, shape, &x, &y, |p, q| p & q)?,
                BitwiseOr => zip2(name, shape, &x, &y, |p, q| p | q)?,
                BitwiseXor => zip2(name, shape, &x, &y, |p, q| p ^ q)?,
                ShiftLeft => zip2(name, shape, &x, &y, |p, q| shl(p, q, w))?,
                ShiftRight => zip2(name, shape, &x, &y, |p, q| shr(p, q, w))?,
                LogicalShiftRight => zip2(name, shape, &x, &y, |p, q| lshr(p, q, w))?,
                _ => {
                    return Err(not_for(
                        "integer types (TrueDiv and Atan2 compute in a float type)",
                    ))
                }
            };
            (HostData::Int(r), c)
        }
        Category::Bool => {
            let (x, y) = (b_operand(name, a)?, b_operand(name, b)?);
            if rule == BinaryRule::Comparison {
                cmp!(x, y);
            }
            let r = match op {
                Add | Maximum | BitwiseOr => zip2(name, shape, &x, &y, |p, q| p | q)?,
                Mul | Minimum | BitwiseAnd => zip2(name, shape, &x, &y, |p, q| p & q)?,
                BitwiseXor => zip2(name, shape, &x, &y, |p, q| p ^ q)?,
                _ => return Err(not_for("two bools; cast first")),
            };
            (HostData::Bool(r), c)
        }
    };
    Ok(finish(data, natural, out))
}

/// `out = op(args...)` with the operands broadcast to `shape`.
pub(super) fn ternary(
    op: TernaryOp,
    args: &[Arg<'_>],
    out: DataType,
    shape: &[usize],
) -> Result<HostData> {
    use TernaryOp::*;
    let name = op.name();
    if args.len() != op.arity() {
        return Err(Error::arity(name, "operands", op.arity(), args.len()));
    }
    // Every op here computes in its output type (the promoted type of its value operands).
    let c = out;
    if op == Where {
        let cond = operand_truth(args[0].t);
        let data = match c.category() {
            Category::Floating => HostData::Float(zip3(
                name,
                shape,
                &cond,
                &f_operand(args[1], c),
                &f_operand(args[2], c),
                |k, p, q| if k { p } else { q },
            )?),
            Category::Integer => HostData::Int(zip3(
                name,
                shape,
                &cond,
                &i_operand(name, args[1], c)?,
                &i_operand(name, args[2], c)?,
                |k, p, q| if k { p } else { q },
            )?),
            Category::Bool => HostData::Bool(zip3(
                name,
                shape,
                &cond,
                &b_operand(name, args[1])?,
                &b_operand(name, args[2])?,
                |k, p, q| if k { p } else { q },
            )?),
        };
        return Ok(finish(data, c, out));
    }
    let data = match c.category() {
        Category::Floating => {
            let v: Vec<_> = args.iter().map(|&a| f_operand(a, c)).collect();
            HostData::Float(match op {
                Lerp => zip3(name, shape, &v[0], &v[1], &v[2], lerp)?,
                Clamp => zip3(name, shape, &v[0], &v[1], &v[2], |x, lo, hi| {
                    minimum(maximum(x, lo), hi)
                })?,
                Threshold => zip3(name, shape, &v[0], &v[1], &v[2], |x, t, val| {
                    if x <= t {
                        val
                    } else {
                        x
                    }
                })?,
                _ => zip4(
                    name,
                    shape,
                    [&v[0], &v[1], &v[2], &v[3]],
                    |x, t1, t2, val| x + val * t1 * t2,
                )?,
            })
        }
        Category::Integer => {
            let v = args
                .iter()
                .map(|&a| i_operand(name, a, c))
                .collect::<Result<Vec<_>>>()?;
            HostData::Int(match op {
                Clamp => zip3(name, shape, &v[0], &v[1], &v[2], |x, lo, hi| {
                    x.max(lo).min(hi)
                })?,
                Threshold => zip3(name, shape, &v[0], &v[1], &v[2], |x, t, val| {
                    if x <= t {
                        val
                    } else {
                        x
                    }
                })?,
                Addcmul => zip4(
                    name,
                    shape,
                    [&v[0], &v[1], &v[2], &v[3]],
                    |x, t1, t2, val| x.wrapping_add(val.wrapping_mul(t1).wrapping_mul(t2)),
                )?,
                _ => return Err(Error::dtype(name, "floating point operands", c)),
            })
        }
        Category::Bool => {
            let v = args
                .iter()
                .map(|&a| b_operand(name, a))
                .collect::<Result<Vec<_>>>()?;
            HostData::Bool(match op {
                Clamp => zip3(name, shape, &v[0], &v[1], &v[2], |x, lo, hi| (x | lo) & hi)?,
                Threshold => zip3(name, shape, &v[0], &v[1], &v[2], |x, t, val| {
                    if x <= t {
                        val
                    } else {
                        x
                    }
                })?,
                Addcmul => zip4(
                    name,
                    shape,
                    [&v[0], &v[1], &v[2], &v[3]],
                    |x, t1, t2, val| x | (val & t1 & t2),
                )?,
                _ => return Err(Error::dtype(name, "floating point operands", c)),
            })
        }
    };
    Ok(finish(data, c, out))
}

/// A copy (`set`): the value unchanged, converted only if the IR changes its type.
pub(super) fn copy(x: &HostTensor, out: DataType) -> HostData {
    if x.dtype() == out {
        x.data().clone()
    } else {
        cast_data(x.data(), x.dtype(), out)
    }
}
