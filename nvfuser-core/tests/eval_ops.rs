//! The CPU reference evaluator, op by op: elementwise ops (unary, binary, dtype
//! promotion, ternary ops and casts). Every expected value is computed by hand (or with
//! `std`) in the test, never with the evaluator's own helpers. Broadcasting, layouts,
//! shape ops and indexing are tested in `eval_ops_shapes`; reductions, random ops and
//! the rest in `eval_ops_reductions`.

mod common;

use common::{bools, f32s, f64s, fusion, i32s, i64s, run, t};
use half::{bf16, f16};
use nvfuser_core::eval::{EvalInput, HostTensor};
use nvfuser_core::ir::{BinaryOp, UnaryOp};
use nvfuser_core::prelude::*;

// ----- helpers -----

/// Equal within `rel` relative (and `rel` absolute near 0); NaN matches NaN; infinities
/// and signs of infinities must match.
#[track_caller]
fn assert_close(actual: &[f64], expected: &[f64], rel: f64) {
    assert_eq!(
        actual.len(),
        expected.len(),
        "lengths: {actual:?} vs {expected:?}"
    );
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        let ok = (a.is_nan() && e.is_nan())
            || a == e
            || (a - e).abs() <= rel * e.abs().max(1e-300) + rel * 1e-3;
        assert!(
            ok,
            "element {i}: actual {a:?}, expected {e:?} (all: {actual:?} vs {expected:?})"
        );
    }
}

#[track_caller]
fn assert_bits(actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len());
    for (i, (&a, &e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a.is_nan() && e.is_nan()) || a.to_bits() == e.to_bits(),
            "element {i}: actual {a:?}, expected {e:?}"
        );
    }
}

fn unary_f64(op: UnaryOp, xs: &[f64]) -> Vec<f64> {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1])?;
        Ok(vec![fd.unary(op, x)?])
    });
    f64s(&run(&f, vec![t(xs, &[xs.len()])])[0])
}

fn binary_on(
    op: BinaryOp,
    a: EvalInput,
    da: DataType,
    b: EvalInput,
    db: DataType,
    rank: usize,
) -> HostTensor {
    let f = fusion(|fd| {
        let x = fd.define_tensor(da, &vec![-1; rank])?;
        let y = fd.define_tensor(db, &vec![-1; rank])?;
        Ok(vec![fd.binary(op, x, y)?])
    });
    run(&f, vec![a, b]).remove(0)
}

const XS: [f64; 4] = [-1.5, -0.25, 0.5, 2.0];

// ----- unary -----

#[test]
fn unary_float_math_matches_std() {
    let sigmoid = |x: f64| 1.0 / (1.0 + (-x).exp());
    type Reference = fn(f64) -> f64;
    let table: Vec<(UnaryOp, Reference)> = vec![
        (UnaryOp::Abs, f64::abs),
        (UnaryOp::Neg, |x| -x),
        (UnaryOp::Exp, f64::exp),
        (UnaryOp::Exp2, f64::exp2),
        (UnaryOp::Expm1, f64::exp_m1),
        (UnaryOp::Log, f64::ln),
        (UnaryOp::Log2, f64::log2),
        (UnaryOp::Log10, f64::log10),
        (UnaryOp::Log1p, f64::ln_1p),
        (UnaryOp::Sqrt, f64::sqrt),
        (UnaryOp::Rsqrt, |x| 1.0 / x.sqrt()),
        (UnaryOp::Reciprocal, |x| 1.0 / x),
        (UnaryOp::Sin, f64::sin),
        (UnaryOp::Cos, f64::cos),
        (UnaryOp::Tan, f64::tan),
        (UnaryOp::Asin, f64::asin),
        (UnaryOp::Acos, f64::acos),
        (UnaryOp::Atan, f64::atan),
        (UnaryOp::Sinh, f64::sinh),
        (UnaryOp::Cosh, f64::cosh),
        (UnaryOp::Tanh, f64::tanh),
        (UnaryOp::Asinh, f64::asinh),
        (UnaryOp::Acosh, f64::acosh),
        (UnaryOp::Atanh, f64::atanh),
        (UnaryOp::Relu, |x| x.max(0.0)),
        (UnaryOp::Floor, f64::floor),
        (UnaryOp::Ceil, f64::ceil),
        (UnaryOp::Trunc, f64::trunc),
        (UnaryOp::Frac, |x| x - x.trunc()),
        (UnaryOp::GeluTanh, |x| {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
        }),
    ];
    for (op, f) in table {
        let want: Vec<f64> = XS.iter().map(|&x| f(x)).collect();
        assert_close(&unary_f64(op, &XS), &want, 1e-15);
    }
    let want: Vec<f64> = XS.iter().map(|&x| sigmoid(x)).collect();
    assert_close(&unary_f64(UnaryOp::Sigmoid, &XS), &want, 1e-15);
    let want: Vec<f64> = XS.iter().map(|&x| x * sigmoid(x)).collect();
    assert_close(&unary_f64(UnaryOp::Silu, &XS), &want, 1e-15);
    // A few values by hand.
    assert_eq!(unary_f64(UnaryOp::Reciprocal, &XS)[1], -4.0);
    assert_eq!(unary_f64(UnaryOp::Sqrt, &[2.25, 6.25]), vec![1.5, 2.5]);
    assert_eq!(unary_f64(UnaryOp::Rsqrt, &[0.25, 16.0]), vec![2.0, 0.25]);
    assert_eq!(unary_f64(UnaryOp::Frac, &[-2.75, 3.5]), vec![-0.75, 0.5]);
    assert!(unary_f64(UnaryOp::Log, &XS)[0].is_nan());
}

#[test]
fn special_functions_known_values() {
    // Reference values from Python's math.erf/erfc/lgamma and statistics.NormalDist.
    assert_close(
        &unary_f64(UnaryOp::Erf, &XS),
        &[
            -0.9661051464753108,
            -0.2763263901682369,
            0.5204998778130465,
            0.9953222650189527,
        ],
        5e-16,
    );
    assert_close(
        &unary_f64(UnaryOp::Erfc, &XS),
        &[
            1.9661051464753108,
            1.276326390168237,
            0.4795001221869535,
            0.004677734981047265,
        ],
        1e-15,
    );
    assert_close(
        &unary_f64(UnaryOp::Gelu, &XS),
        &[
            -0.10021080190328713,
            -0.10032341857926907,
            0.34573123063700656,
            1.9544997361036416,
        ],
        1e-15,
    );
    assert_close(
        &unary_f64(UnaryOp::Lgamma, &XS),
        &[
            0.8600470153764812,
            1.5895753125511862,
            0.5723649429247001,
            0.0,
        ],
        1e-14,
    );
    assert_close(
        &unary_f64(UnaryOp::Erfinv, &[-0.9, -0.25, 0.5, 0.999]),
        &[
            -1.163087153676674,
            -0.22531205501217808,
            0.4769362762044698,
            2.3267537655135464,
        ],
        1e-13,
    );
    let edge = unary_f64(UnaryOp::Erfinv, &[1.0, -1.0, 1.5, 0.0]);
    assert_eq!(edge[0], f64::INFINITY);
    assert_eq!(edge[1], f64::NEG_INFINITY);
    assert!(edge[2].is_nan());
    assert_eq!(edge[3], 0.0);
    // lgamma at poles is +inf.
    assert_eq!(
        unary_f64(UnaryOp::Lgamma, &[0.0, -2.0]),
        vec![f64::INFINITY, f64::INFINITY]
    );
}

#[test]
fn rounding_sign_and_classification() {
    let xs = [0.5, 1.5, 2.5, -0.5, -2.5, 2.6, -3.2];
    assert_bits(
        &unary_f64(UnaryOp::Round, &xs),
        &[0.0, 2.0, 2.0, -0.0, -2.0, 3.0, -3.0],
    );
    assert_eq!(
        unary_f64(UnaryOp::Floor, &xs),
        vec![0.0, 1.0, 2.0, -1.0, -3.0, 2.0, -4.0]
    );
    assert_eq!(
        unary_f64(UnaryOp::Ceil, &xs),
        vec![1.0, 2.0, 3.0, -0.0, -2.0, 3.0, -3.0]
    );
    let s = unary_f64(
        UnaryOp::Sign,
        &[-3.5, 0.0, -0.0, 7.0, f64::NAN, f64::NEG_INFINITY],
    );
    assert_bits(&s, &[-1.0, 0.0, 0.0, 1.0, f64::NAN, -1.0]);
    let r = unary_f64(UnaryOp::Relu, &[-2.0, f64::NAN, 3.0]);
    assert_bits(&r, &[0.0, f64::NAN, 3.0]);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![
            fd.isnan(x)?,
            fd.isinf(x)?,
            fd.isfinite(x)?,
            fd.logical_not(x)?,
        ])
    });
    let out = run(
        &f,
        vec![t(
            &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1.5, 0.0],
            &[5],
        )],
    );
    assert_eq!(bools(&out[0]), [true, false, false, false, false]);
    assert_eq!(bools(&out[1]), [false, true, true, false, false]);
    assert_eq!(bools(&out[2]), [false, false, false, true, true]);
    assert_eq!(bools(&out[3]), [false, false, false, false, true]);
}

#[test]
fn unary_on_integers_and_bools() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1])?;
        Ok(vec![
            fd.abs(x)?,
            fd.neg(x)?,
            fd.sign(x)?,
            fd.relu(x)?,
            fd.bitwise_not(x)?,
            fd.logical_not(x)?,
            fd.floor(x)?,
            fd.exp(x)?,
            fd.isfinite(x)?,
        ])
    });
    let out = run(&f, vec![t(&[-7i32, 0, 12, i32::MIN], &[4])]);
    assert_eq!(i32s(&out[0]), [7, 0, 12, i32::MIN], "abs wraps at MIN");
    assert_eq!(i32s(&out[1]), [7, 0, -12, i32::MIN], "neg wraps at MIN");
    assert_eq!(i32s(&out[2]), [-1, 0, 1, -1]);
    assert_eq!(i32s(&out[3]), [0, 0, 12, 0]);
    assert_eq!(i32s(&out[4]), [6, -1, -13, i32::MAX]);
    assert_eq!(bools(&out[5]), [false, true, false, false]);
    assert_eq!(i32s(&out[6]), [-7, 0, 12, i32::MIN]);
    // exp of an integer computes in f32 (the int converts to f32 first).
    assert_eq!(out[7].dtype(), DataType::F32);
    let want: Vec<f32> = [-7.0f64, 0.0, 12.0, -2147483648.0]
        .iter()
        .map(|&v| v.exp() as f32)
        .collect();
    assert_eq!(f32s(&out[7]), want);
    assert_eq!(bools(&out[8]), [true; 4]);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::Bool, &[-1])?;
        Ok(vec![
            fd.bitwise_not(x)?,
            fd.logical_not(x)?,
            fd.abs(x)?,
            fd.isnan(x)?,
        ])
    });
    let out = run(&f, vec![t(&[true, false, true], &[3])]);
    assert_eq!(bools(&out[0]), [false, true, false]);
    assert_eq!(bools(&out[1]), [false, true, false]);
    assert_eq!(bools(&out[2]), [true, false, true]);
    assert_eq!(bools(&out[3]), [false; 3]);
}

// ----- binary -----

#[test]
fn binary_float_ops() {
    let a = [-7.5, 7.5, 3.0, f64::NAN, 0.0];
    let b = [2.0, -2.0, 0.0, 1.0, -0.0];
    let go = |op| {
        f64s(&binary_on(
            op,
            t(&a, &[5]),
            DataType::F64,
            t(&b, &[5]),
            DataType::F64,
            1,
        ))
    };
    let nan = f64::NAN;
    assert_bits(&go(BinaryOp::Add), &[-5.5, 5.5, 3.0, nan, 0.0]);
    assert_bits(&go(BinaryOp::Sub), &[-9.5, 9.5, 3.0, nan, 0.0]);
    assert_bits(&go(BinaryOp::Mul), &[-15.0, -15.0, 0.0, nan, -0.0]);
    assert_bits(&go(BinaryOp::Div), &[-3.75, -3.75, f64::INFINITY, nan, nan]);
    assert_bits(
        &go(BinaryOp::TrueDiv),
        &[-3.75, -3.75, f64::INFINITY, nan, nan],
    );
    assert_bits(&go(BinaryOp::Fmod), &[-1.5, 1.5, nan, nan, nan]);
    assert_bits(&go(BinaryOp::Remainder), &[0.5, -0.5, nan, nan, nan]);
    assert_bits(&go(BinaryOp::Pow), &[56.25, 1.0 / 56.25, 1.0, nan, 1.0]);
    let want: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x.atan2(*y)).collect();
    assert_bits(&go(BinaryOp::Atan2), &want);
    assert_bits(&go(BinaryOp::Minimum), &[-7.5, -2.0, 0.0, nan, -0.0]);
    assert_bits(&go(BinaryOp::Maximum), &[2.0, 7.5, 3.0, nan, 0.0]);

    let go = |op| {
        bools(&binary_on(
            op,
            t(&a, &[5]),
            DataType::F64,
            t(&b, &[5]),
            DataType::F64,
            1,
        ))
    };
    assert_eq!(go(BinaryOp::Lt), [true, false, false, false, false]);
    assert_eq!(go(BinaryOp::Le), [true, false, false, false, true]);
    assert_eq!(go(BinaryOp::Gt), [false, true, true, false, false]);
    assert_eq!(go(BinaryOp::Ge), [false, true, true, false, true]);
    assert_eq!(go(BinaryOp::Eq), [false, false, false, false, true]);
    assert_eq!(go(BinaryOp::Ne), [true, true, true, true, false]);
}

#[test]
fn binary_integer_ops_wrap_and_truncate() {
    let a = [-7i32, 7, i32::MAX, i32::MIN, 9];
    let b = [2i32, -2, 1, -1, 3];
    let go = |op| {
        i32s(&binary_on(
            op,
            t(&a, &[5]),
            DataType::I32,
            t(&b, &[5]),
            DataType::I32,
            1,
        ))
    };
    assert_eq!(go(BinaryOp::Add), [-5, 5, i32::MIN, i32::MAX, 12]);
    assert_eq!(go(BinaryOp::Sub), [-9, 9, i32::MAX - 1, i32::MIN + 1, 6]);
    assert_eq!(go(BinaryOp::Mul), [-14, -14, i32::MAX, i32::MIN, 27]);
    assert_eq!(go(BinaryOp::Div), [-3, -3, i32::MAX, i32::MIN, 3]);
    assert_eq!(go(BinaryOp::Fmod), [-1, 1, 0, 0, 0]);
    assert_eq!(go(BinaryOp::Remainder), [1, -1, 0, 0, 0]);
    assert_eq!(go(BinaryOp::Minimum), [-7, -2, 1, i32::MIN, 3]);
    assert_eq!(go(BinaryOp::Maximum), [2, 7, i32::MAX, -1, 9]);

    let p = binary_on(
        BinaryOp::Pow,
        t(&[3i64, -2, 0, 2, 7], &[5]),
        DataType::I64,
        t(&[4i64, 3, 0, 63, 1], &[5]),
        DataType::I64,
        1,
    );
    assert_eq!(i64s(&p), [81, -8, 1, i64::MIN, 7]);
    let p = binary_on(
        BinaryOp::Pow,
        t(&[2i32, -3], &[2]),
        DataType::I32,
        t(&[31i32, 3], &[2]),
        DataType::I32,
        1,
    );
    assert_eq!(i32s(&p), [i32::MIN, -27], "i32 pow wraps");
}

#[test]
fn shifts_and_bitwise() {
    let a = [1i32, 1, -8, -8, -8, 5];
    let b = [31i32, 32, 1, 40, -1, 0];
    let go = |op| {
        i32s(&binary_on(
            op,
            t(&a, &[6]),
            DataType::I32,
            t(&b, &[6]),
            DataType::I32,
            1,
        ))
    };
    assert_eq!(go(BinaryOp::ShiftLeft), [i32::MIN, 0, -16, 0, 0, 5]);
    assert_eq!(go(BinaryOp::ShiftRight), [0, 0, -4, -1, -1, 5]);
    assert_eq!(
        go(BinaryOp::LogicalShiftRight),
        [0, 0, 0x7fff_fffc, 0, 0, 5]
    );

    let a = [-8i64, 1, -8];
    let b = [1i64, 63, 64];
    let go = |op| {
        i64s(&binary_on(
            op,
            t(&a, &[3]),
            DataType::I64,
            t(&b, &[3]),
            DataType::I64,
            1,
        ))
    };
    assert_eq!(go(BinaryOp::ShiftLeft), [-16, i64::MIN, 0]);
    assert_eq!(go(BinaryOp::ShiftRight), [-4, 0, -1]);
    assert_eq!(
        go(BinaryOp::LogicalShiftRight),
        [0x7fff_ffff_ffff_fffc, 0, 0]
    );

    let a = [12i64, -1, 5];
    let b = [10i64, 7, -6];
    let go = |op| {
        i64s(&binary_on(
            op,
            t(&a, &[3]),
            DataType::I64,
            t(&b, &[3]),
            DataType::I64,
            1,
        ))
    };
    assert_eq!(go(BinaryOp::BitwiseAnd), [8, 7, 0]);
    assert_eq!(go(BinaryOp::BitwiseOr), [14, -1, -1]);
    assert_eq!(go(BinaryOp::BitwiseXor), [6, -8, -1]);

    let a = [true, true, false, false];
    let b = [true, false, true, false];
    let go = |op| {
        bools(&binary_on(
            op,
            t(&a, &[4]),
            DataType::Bool,
            t(&b, &[4]),
            DataType::Bool,
            1,
        ))
    };
    assert_eq!(go(BinaryOp::BitwiseAnd), [true, false, false, false]);
    assert_eq!(go(BinaryOp::BitwiseOr), [true, true, true, false]);
    assert_eq!(go(BinaryOp::BitwiseXor), [false, true, true, false]);
    assert_eq!(
        go(BinaryOp::Add),
        [true, true, true, false],
        "bool + bool is or"
    );
    assert_eq!(
        go(BinaryOp::Mul),
        [true, false, false, false],
        "bool * bool is and"
    );
    assert_eq!(go(BinaryOp::Gt), [false, true, false, false]);
}

#[test]
fn comparisons_and_logical_ops_promote() {
    // i64 vs f32 compares in f32: 16777217 becomes 16777216.
    let out = binary_on(
        BinaryOp::Eq,
        t(&[16_777_217i64, 3], &[2]),
        DataType::I64,
        t(&[16_777_216f32, 3.5], &[2]),
        DataType::F32,
        1,
    );
    assert_eq!(out.dtype(), DataType::Bool);
    assert_eq!(bools(&out), [true, false]);
    let out = binary_on(
        BinaryOp::Lt,
        t(&[16_777_217i64, 3], &[2]),
        DataType::I64,
        t(&[16_777_216f32, 3.5], &[2]),
        DataType::F32,
        1,
    );
    assert_eq!(bools(&out), [false, true]);

    let a = t(&[0.0f32, 2.0, f32::NAN, -0.0], &[4]);
    let b = t(&[1i32, 0, 3, 0], &[4]);
    let and = binary_on(
        BinaryOp::LogicalAnd,
        a.clone(),
        DataType::F32,
        b.clone(),
        DataType::I32,
        1,
    );
    let or = binary_on(BinaryOp::LogicalOr, a, DataType::F32, b, DataType::I32, 1);
    assert_eq!(bools(&and), [false, false, true, false]);
    assert_eq!(bools(&or), [true, true, true, false]);
}

// ----- promotion -----

#[test]
fn dtype_promotion_outputs() {
    use DataType::*;
    let f = fusion(|fd| {
        let h = fd.define_tensor(F16, &[-1])?;
        let b = fd.define_tensor(BF16, &[-1])?;
        let i = fd.define_tensor(I32, &[-1])?;
        let l = fd.define_tensor(I64, &[-1])?;
        let k = fd.define_tensor(Bool, &[-1])?;
        let c = fd.constant(2.5);
        let tenth = fd.constant(0.1);
        Ok(vec![
            fd.add(h, b)?,     // f32
            fd.mul(i, c)?,     // f32
            fd.add(i, l)?,     // i64
            fd.add(k, i)?,     // i32
            fd.mul(h, tenth)?, // f16, the scalar in f32
            fd.add(l, h)?,     // f16: the i64 converts to f16 first
            fd.truediv(i, l)?, // f32
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[f16::from_f32(1.5), f16::from_f32(3.0)], &[2]),
            t(&[bf16::from_f32(0.25), bf16::from_f32(-8.0)], &[2]),
            t(&[7i32, -3], &[2]),
            t(&[2049i64, 2], &[2]),
            t(&[true, false], &[2]),
        ],
    );
    let dtypes: Vec<DataType> = out.iter().map(|o| o.dtype()).collect();
    assert_eq!(dtypes, [F32, F32, I64, I32, F16, F16, F32]);
    assert_eq!(f32s(&out[0]), [1.75, -5.0]);
    assert_eq!(f32s(&out[1]), [17.5, -7.5]);
    assert_eq!(i64s(&out[2]), [2056, -1]);
    assert_eq!(i32s(&out[3]), [8, -3]);
    // 3 * 0.1f32 = 0.30000000447..., rounded once to f16.
    let want = [
        f16::from_f64(1.5 * (0.1f32 as f64)),
        f16::from_f64(3.0 * (0.1f32 as f64)),
    ];
    assert_eq!(out[4].to_vec::<f16>().unwrap(), want);
    assert_eq!(want[1].to_f64(), 0.300048828125);
    // 2049 -> f16 2048 (ties to even); 2048 + 1.5 = 2049.5 -> f16 2050 (spacing 2).
    assert_eq!(
        out[5].to_vec::<f16>().unwrap(),
        [f16::from_f32(2050.0), f16::from_f32(5.0)]
    );
    assert_eq!(f32s(&out[6]), [7.0 / 2049.0f32, -1.5]);
}

#[test]
fn half_values_are_rounded_after_every_expression() {
    // The rule of the generated kernels (half intermediates live in half registers) and
    // of PyTorch eager: every f16/bf16 value is rounded to its dtype where it is made.
    let f = fusion(|fd| {
        let a = fd.define_tensor(DataType::F16, &[-1])?;
        let b = fd.define_tensor(DataType::F16, &[-1])?;
        let s = fd.add(a, b)?; // 2049 rounds to 2048 (nearest even)
        let d = fd.sub(s, a)?;
        let wide = fd.cast(s, DataType::F32)?;
        let copied = fd.set(s)?;
        let d3 = fd.sub(copied, a)?;
        // f32 intermediates stay unrounded: 2048 + 1 is exact in f32 anyway, but
        // 1/3 is not rounded to f16 on its way to the f32 output.
        let x = fd.cast(b, DataType::F32)?;
        let three = fd.constant(3.0);
        let third = fd.div(x, three)?;
        Ok(vec![d, wide, s, d3, third])
    });
    let out = run(
        &f,
        vec![
            t(&[f16::from_f32(2048.0)], &[1]),
            t(&[f16::from_f32(1.0)], &[1]),
        ],
    );
    assert_eq!(
        out[0].to_vec::<f16>().unwrap(),
        [f16::from_f32(0.0)],
        "a + b rounds to 2048 before the sub"
    );
    assert_eq!(f32s(&out[1]), [2048.0]);
    assert_eq!(out[2].to_vec::<f16>().unwrap(), [f16::from_f32(2048.0)]);
    assert_eq!(
        out[3].to_vec::<f16>().unwrap(),
        [f16::from_f32(0.0)],
        "set copies the rounded value"
    );
    assert_eq!(f32s(&out[4]), [1.0f32 / 3.0]);
}

// ----- ternary and casts -----

#[test]
fn ternary_ops() {
    let f = fusion(|fd| {
        let c = fd.define_tensor(DataType::Bool, &[-1])?;
        let a = fd.define_tensor(DataType::F32, &[-1])?;
        let seven = fd.constant(7i64);
        Ok(vec![fd.where_(c, a, seven)?])
    });
    let out = run(
        &f,
        vec![t(&[true, false, true], &[3]), t(&[1.5f32, 2.5, 3.5], &[3])],
    );
    assert_eq!(out[0].dtype(), DataType::F32);
    assert_eq!(f32s(&out[0]), [1.5, 7.0, 3.5]);

    let f = fusion(|fd| {
        let s = fd.define_tensor(DataType::F64, &[-1])?;
        let e = fd.define_tensor(DataType::F64, &[-1])?;
        let w = fd.define_tensor(DataType::F64, &[-1])?;
        Ok(vec![fd.lerp(s, e, w)?])
    });
    let out = run(
        &f,
        vec![
            t(&[1.0, 2.0, 3.0, 10.0], &[4]),
            t(&[5.0, -2.0, 3.0, 20.0], &[4]),
            t(&[0.25, 0.5, 0.75, 1.0], &[4]),
        ],
    );
    assert_eq!(f64s(&out[0]), [2.0, 0.0, 3.0, 20.0]);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let lo = fd.constant(-1.0);
        let hi = fd.constant(2.0);
        let five = fd.constant(5.0);
        let thr = fd.constant(2.0);
        let val = fd.constant(-9.0);
        Ok(vec![
            fd.clamp(x, lo, hi)?,
            fd.clamp(x, five, hi)?,
            fd.threshold(x, thr, val)?,
        ])
    });
    let out = run(&f, vec![t(&[-3.0f32, 0.5, 7.0, f32::NAN, 2.0], &[5])]);
    let v = f32s(&out[0]);
    assert_eq!(v[..3], [-1.0, 0.5, 2.0]);
    assert!(v[3].is_nan());
    assert_eq!(f32s(&out[1])[..3], [2.0, 2.0, 2.0], "hi wins when lo > hi");
    let v = f32s(&out[2]);
    assert_eq!(v[..3], [-9.0, -9.0, 7.0]);
    assert!(v[3].is_nan(), "threshold keeps NaN (NaN <= t is false)");
    assert_eq!(v[4], -9.0);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let a = fd.define_tensor(DataType::F32, &[-1])?;
        let b = fd.define_tensor(DataType::F32, &[-1])?;
        let v = fd.constant(0.5);
        let i = fd.define_tensor(DataType::I64, &[-1])?;
        let two = fd.constant(2i64);
        let lo = fd.constant(0i64);
        let hi = fd.constant(4i64);
        Ok(vec![
            fd.addcmul(x, a, b, v)?,
            fd.addcmul(i, i, i, two)?,
            fd.clamp(i, lo, hi)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[1.0f32, 2.0], &[2]),
            t(&[3.0f32, 4.0], &[2]),
            t(&[5.0f32, 6.0], &[2]),
            t(&[3i64, -5], &[2]),
        ],
    );
    assert_eq!(f32s(&out[0]), [8.5, 14.0]);
    assert_eq!(i64s(&out[1]), [3 + 2 * 9, -5 + 2 * 25]);
    assert_eq!(i64s(&out[2]), [3, 0]);
}

#[test]
fn cast_semantics() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![
            fd.cast(x, DataType::I32)?,
            fd.cast(x, DataType::I64)?,
            fd.cast(x, DataType::Bool)?,
        ])
    });
    let out = run(
        &f,
        vec![t(
            &[2.7f32, -2.7, f32::NAN, 3e9, -3e9, f32::INFINITY, -0.0],
            &[7],
        )],
    );
    assert_eq!(i32s(&out[0]), [2, -2, 0, i32::MAX, i32::MIN, i32::MAX, 0]);
    assert_eq!(
        i64s(&out[1]),
        // NaN to i64 is i64::MIN, as PyTorch's CUDA cast (scripts/semantics/torch_casts.py).
        [2, -2, i64::MIN, 3_000_000_000, -3_000_000_000, i64::MAX, 0]
    );
    assert_eq!(bools(&out[2]), [true, true, true, true, true, true, false]);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[-1])?;
        Ok(vec![
            fd.cast(x, DataType::I32)?,
            fd.cast(x, DataType::Bool)?,
            fd.cast(x, DataType::F32)?,
            fd.cast(x, DataType::BF16)?,
        ])
    });
    let big = (1i64 << 62) + (1 << 54) + 1; // just above a bf16 tie
    let out = run(
        &f,
        vec![t(
            &[4_294_967_297i64, -1, 2_147_483_648, 0, 16_777_217, big],
            &[6],
        )],
    );
    assert_eq!(i32s(&out[0]), [1, -1, i32::MIN, 0, 16_777_217, 1]);
    assert_eq!(bools(&out[1]), [true, true, true, false, true, true]);
    assert_eq!(f32s(&out[2])[4], 16_777_216.0);
    assert_eq!(out[3].get_f64(&[5]).unwrap(), 2f64.powi(62) + 2f64.powi(55));

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1])?;
        Ok(vec![
            fd.cast(x, DataType::BF16)?,
            fd.cast(x, DataType::F16)?,
        ])
    });
    let tie = 1.0 + 2f64.powi(-8);
    let out = run(
        &f,
        vec![t(&[tie, tie + 2f64.powi(-40), 65519.0, 65520.0, 0.1], &[5])],
    );
    let b: Vec<f64> = out[0].to_f64_vec();
    assert_eq!(
        b[..2],
        [1.0, 1.0078125],
        "ties to even; just above a tie rounds up"
    );
    assert_eq!(b[4], 0.10009765625);
    let h: Vec<f64> = out[1].to_f64_vec();
    assert_eq!(h[2..], [65504.0, f64::INFINITY, 0.0999755859375]);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::Bool, &[-1])?;
        Ok(vec![fd.cast(x, DataType::F32)?, fd.cast(x, DataType::I32)?])
    });
    let out = run(&f, vec![t(&[true, false], &[2])]);
    assert_eq!(f32s(&out[0]), [1.0, 0.0]);
    assert_eq!(i32s(&out[1]), [1, 0]);
}
