//! Printers: readable math and the Rust reproducer.
//!
//! Two views of one [`Fusion`]:
//!
//! - [`math`]: `Display for Fusion`, one line per expression (`T3 = sum(T2, axes=[1]) :
//!   f32[T0.size(0), r4096]`), for humans reading IR dumps and snapshot diffs.
//! - [`mod@reproducer`]: [`Fusion::to_reproducer`], the fusion as `fusion!` source that
//!   [`crate::dsl::parse_str`] + [`crate::dsl::build`] turn back into a structurally equal
//!   fusion. This is what an execution error carries so that a bug report is a paste.
//!
//! Both name values the same way, by arena index: tensors `T<n>` (`t<n>` in reproducers),
//! scalars `S<n>` (`s<n>`); constants are printed inline as literals (`2.0` is an `f64`
//! constant, `0.5f32` an `f32` one, `3` an `i64`). The literal syntax is the DSL's, so
//! what one printer shows the other can parse.

pub mod math;
pub mod reproducer;

pub use math::{Math, MathOptions};
pub use reproducer::{reproducer, ReproducerOptions};

use crate::dtype::{round_to, DataType, ScalarValue};
use crate::ir::{Extent, ExtentOp, Fusion, IterDomain, IterKind, ValId, ValKind};

/// The printed name of a value: `T<n>`/`S<n>` when `upper`, else `t<n>`/`s<n>`.
pub(crate) fn val_name(fusion: &Fusion, v: ValId, upper: bool) -> String {
    let Some(val) = fusion.get_val(v) else {
        return format!("<unknown {v}>");
    };
    let tensor = val.is_tensor();
    let prefix = match (tensor, upper) {
        (true, true) => "T",
        (true, false) => "t",
        (false, true) => "S",
        (false, false) => "s",
    };
    format!("{prefix}{}", v.id())
}

/// A constant as a DSL literal of its type: `true`, `3` (i64), `3i32`, `2.0` (f64),
/// `0.5f32`, `1.5bf16`, `f32::NAN`, `-f64::INFINITY`.
pub(crate) fn literal(value: ScalarValue, dtype: DataType) -> String {
    match value {
        ScalarValue::Bool(b) => b.to_string(),
        ScalarValue::Int(i) if dtype == DataType::I64 || !dtype.is_int() => i.to_string(),
        ScalarValue::Int(i) => format!("{i}{dtype}"),
        ScalarValue::Float(x) => float_literal(x, dtype),
    }
}

fn float_literal(x: f64, dtype: DataType) -> String {
    let dtype = if dtype.is_float() {
        dtype
    } else {
        DataType::F64
    };
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x.is_nan() {
        return format!("{sign}{dtype}::NAN");
    }
    if x.is_infinite() {
        return format!("{sign}{dtype}::INFINITY");
    }
    let suffix = if dtype == DataType::F64 {
        ""
    } else {
        dtype.name()
    };
    // fp8 values have at most four significant bits: their exact decimal reads best
    // (`448.0f8e4m3`, not `450.0f8e4m3`, which rounds to the same byte).
    if dtype != DataType::F64 && !dtype.is_fp8() {
        // The fewest significant digits that round back to the same value in `dtype`
        // read best ("0.1f32", not "0.10000000149011612f32") and are still exact.
        for digits in 0..17 {
            let short: f64 = format!("{x:.digits$e}").parse().unwrap_or(f64::NAN);
            if round_to(short, dtype).to_bits() == x.to_bits() {
                return format!("{short:?}{suffix}");
            }
        }
    }
    format!("{x:?}{suffix}")
}

/// An extent with values named as the printers name them (`T0.size(1)`, `S3`).
pub(crate) fn extent(fusion: &Fusion, e: &Extent, upper: bool) -> String {
    match e {
        Extent::Const(c) => c.to_string(),
        Extent::Dim { tensor, axis } => {
            format!("{}.size({axis})", val_name(fusion, *tensor, upper))
        }
        Extent::Scalar(v) => match fusion.get_val(*v).and_then(|val| val.constant()) {
            Some(c) => literal(c, fusion.val(*v).dtype),
            None if fusion.get_val(*v).is_none() => format!("<unknown {v}>"),
            None => val_name(fusion, *v, upper),
        },
        Extent::Op(op, a, b) => {
            let (a, b) = (extent(fusion, a, upper), extent(fusion, b, upper));
            match op {
                ExtentOp::Add => format!("({a} + {b})"),
                ExtentOp::Sub => format!("({a} - {b})"),
                ExtentOp::Mul => format!("({a} * {b})"),
                ExtentOp::Div => format!("({a} / {b})"),
                ExtentOp::CeilDiv => format!("ceildiv({a}, {b})"),
                ExtentOp::Max => format!("max({a}, {b})"),
                ExtentOp::Min => format!("min({a}, {b})"),
            }
        }
    }
}

/// One dim of a domain: its extent, prefixed `b` (broadcast), `x` (expanded) or `r`
/// (reduction).
pub(crate) fn dim(fusion: &Fusion, d: &IterDomain, upper: bool) -> String {
    let e = extent(fusion, &d.extent, upper);
    match d.kind {
        IterKind::Iteration => e,
        IterKind::Broadcast => format!("b{e}"),
        IterKind::Expanded => format!("x{e}"),
        IterKind::Reduction => format!("r{e}"),
    }
}

/// The type of a value: `f32[T0.size(0), r4096]` for tensors, `f32` for scalars.
pub(crate) fn val_type(fusion: &Fusion, v: ValId, upper: bool) -> String {
    let Some(val) = fusion.get_val(v) else {
        return "<unknown>".into();
    };
    match &val.kind {
        ValKind::Tensor(t) => {
            let dims: Vec<String> = t.domain.iter().map(|d| dim(fusion, d, upper)).collect();
            format!("{}[{}]", val.dtype, dims.join(", "))
        }
        ValKind::Scalar(_) => val.dtype.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_typed_and_exact() {
        use DataType::*;
        let cases = [
            (ScalarValue::Float(2.0), F64, "2.0"),
            (ScalarValue::Float(1e-5), F64, "1e-5"),
            (ScalarValue::Float(-0.0), F64, "-0.0"),
            (ScalarValue::Float(0.1).cast(F32), F32, "0.1f32"),
            (ScalarValue::Float(0.1).cast(BF16), BF16, "0.1bf16"),
            (ScalarValue::Float(448.0), F8E4M3, "448.0f8e4m3"),
            (
                ScalarValue::Float(0.1).cast(F8E4M3),
                F8E4M3,
                "0.1015625f8e4m3",
            ),
            (
                ScalarValue::Float(2f64.powi(-16)),
                F8E5M2,
                "1.52587890625e-5f8e5m2",
            ),
            (ScalarValue::Float(f64::NAN), F8E4M3, "f8e4m3::NAN"),
            (ScalarValue::Float(f64::NAN), F64, "f64::NAN"),
            (ScalarValue::Float(f64::NEG_INFINITY), F32, "-f32::INFINITY"),
            (ScalarValue::Int(-3), I32, "-3i32"),
            (ScalarValue::Int(7), I64, "7"),
            (ScalarValue::Bool(true), Bool, "true"),
        ];
        for (v, d, want) in cases {
            assert_eq!(literal(v, d), want);
        }
    }
}
