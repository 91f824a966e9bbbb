//! The CPU reference evaluator, op by op: every expected value is computed by hand (or
//! with `std`) in the test, never with the evaluator's own helpers.

use half::{bf16, f16};
use nvfuser_core::builder::Slice;
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::ir::{BinaryOp, UnaryOp};
use nvfuser_core::prelude::*;
use nvfuser_core::Result;

// ----- helpers -----

fn fusion(build: impl FnOnce(&mut FusionDefinition) -> Result<Vec<ValId>>) -> Fusion {
    let mut fd = FusionDefinition::new();
    let outs = build(&mut fd).unwrap();
    for o in outs {
        fd.add_output(o).unwrap();
    }
    fd.finish().unwrap()
}

fn run(f: &Fusion, inputs: Vec<EvalInput>) -> Vec<HostTensor> {
    evaluate(f, &inputs).unwrap_or_else(|e| panic!("evaluate failed: {e}"))
}

fn err(f: &Fusion, inputs: Vec<EvalInput>) -> String {
    match evaluate(f, &inputs) {
        Ok(out) => panic!("expected an error, got {out:?}"),
        Err(e) => e.to_string(),
    }
}

fn t<T: nvfuser_core::eval::Element>(v: &[T], shape: &[usize]) -> EvalInput {
    HostTensor::from_slice(v, shape).unwrap().into()
}

fn f64s(t: &HostTensor) -> Vec<f64> {
    t.to_vec::<f64>().unwrap()
}

fn f32s(t: &HostTensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

fn i64s(t: &HostTensor) -> Vec<i64> {
    t.to_vec::<i64>().unwrap()
}

fn i32s(t: &HostTensor) -> Vec<i32> {
    t.to_vec::<i32>().unwrap()
}

fn bools(t: &HostTensor) -> Vec<bool> {
    t.to_vec::<bool>().unwrap()
}

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

// ----- broadcasting and layouts -----

#[test]
fn broadcasting_with_rank_extension_and_broadcast_dims() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let w = fd.define_tensor(DataType::F32, &[-1])?;
        let c = fd.define_tensor(DataType::F32, &[-1, 1])?;
        let y = fd.add(x, w)?;
        let z = fd.mul(y, c)?;
        let k = fd.constant(0.5);
        Ok(vec![y, fd.sub(z, k)?])
    });
    let out = run(
        &f,
        vec![
            t(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]),
            t(&[10.0f32, 20.0, 30.0], &[3]),
            t(&[2.0f32, -1.0], &[2, 1]),
        ],
    );
    assert_eq!(out[0].shape(), [2, 3]);
    assert_eq!(f32s(&out[0]), [11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
    assert_eq!(f32s(&out[1]), [21.5, 43.5, 65.5, -14.5, -25.5, -36.5]);
}

#[test]
fn broadcast_size_mismatch_is_an_error_naming_op_and_sizes() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let w = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![fd.add(x, w)?])
    });
    let msg = err(&f, vec![t(&[1.0f32; 6], &[2, 3]), t(&[1.0f32; 4], &[4])]);
    assert_eq!(
        msg,
        "argument 1 dim 0: size 4, but it must equal argument 0 dim 1 (size 3): the fusion adds them"
    );
    // A symbolic dim of runtime size 1 does not broadcast.
    let msg = err(
        &f,
        vec![t(&[1.0f32, 2.0, 3.0], &[3, 1]), t(&[1.0f32, 2.0], &[2])],
    );
    assert_eq!(
        msg,
        "argument 1 dim 0: size 2, but it must equal argument 0 dim 1 (size 1): the fusion adds them"
    );
}

#[test]
fn non_contiguous_permuted_and_expanded_inputs() {
    // A transposed view of row-major [[1, 2, 3], [4, 5, 6]].
    let data = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let xt = HostTensor::from_strided(&data, &[3, 2], &[1, 3], 0).unwrap();
    // Every other element of 0..12 starting at 1, rows 4 apart.
    let data12: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let xs = HostTensor::from_strided(&data12, &[3, 2], &[4, 2], 1).unwrap();
    assert_eq!(f32s(&xs), [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]);
    // An expanded (stride 0) [4, 3] tensor.
    let row = [1.5f32, -2.0, 4.0];
    let xe = HostTensor::from_strided(&row, &[4, 3], &[0, 1], 0).unwrap();

    let f = fusion(|fd| {
        let a = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let e = fd.define_tensor_from_strides(DataType::F32, &[4, 3], &[0, 1], false)?;
        Ok(vec![fd.sub(a, b)?, fd.sum(e, &[0], false)?, fd.mul(e, e)?])
    });
    let out = run(&f, vec![xt.into(), xs.into(), xe.into()]);
    // [[1, 4], [2, 5], [3, 6]] - [[1, 3], [5, 7], [9, 11]]
    assert_eq!(f32s(&out[0]), [0.0, 1.0, -3.0, -2.0, -6.0, -5.0]);
    assert_eq!(f32s(&out[1]), [6.0, -8.0, 16.0]);
    assert_eq!(out[2].shape(), [4, 3]);
    assert_eq!(f32s(&out[2])[9..], [2.25, 4.0, 16.0]);
}

#[test]
fn size_one_and_empty_inputs() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F64, &[-1])?;
        let y = fd.add(x, b)?;
        Ok(vec![
            y,
            fd.sum(x, &[0], false)?,
            fd.prod(x, &[0], false)?,
            fd.mean(x, &[0], false)?,
            fd.sum(x, &[1], false)?,
        ])
    });
    let out = run(&f, vec![t::<f64>(&[], &[0, 3]), t(&[1.5, -2.0, 3.0], &[3])]);
    assert_eq!(out[0].shape(), [0, 3]);
    assert_eq!(f64s(&out[1]), [0.0; 3]);
    assert_eq!(f64s(&out[2]), [1.0; 3]);
    assert!(f64s(&out[3]).iter().all(|v| v.is_nan()));
    assert_eq!(out[4].shape(), [0]);
    // Size-1 symbolic dims are ordinary dims.
    let out = run(
        &f,
        vec![t(&[2.5, -1.0, 4.0], &[1, 3]), t(&[1.5, -2.0, 3.0], &[3])],
    );
    assert_eq!(f64s(&out[0]), [4.0, -3.0, 7.0]);
    assert_eq!(f64s(&out[2]), [2.5, -1.0, 4.0]);
    assert_eq!(f64s(&out[4]), [5.5]);

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.max(x, &[0], false)?])
    });
    let msg = err(&f, vec![t::<f32>(&[], &[0, 3])]);
    assert_eq!(msg, "max: invalid argument: cannot reduce over an empty dimension: the max of zero elements is not defined (and an output with elements depends on it)");
}

/// Issue #12 case 10: a max over an empty dim is refused only when an output with
/// elements observes its (undefined) values. Softmax over an empty dim returns its
/// empty result, as PyTorch's; a max whose own output is empty returns it.
#[test]
fn empty_max_is_refused_only_when_observed() {
    let softmax = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let m = fd.max(x, &[1], true)?;
        let d = fd.sub(x, m)?;
        let e = fd.exp(d)?;
        let s = fd.sum(e, &[1], true)?;
        Ok(vec![fd.div(e, s)?])
    });
    let out = run(&softmax, vec![t::<f32>(&[], &[3, 0])]);
    assert_eq!(out[0].shape(), [3, 0]);
    // The same softmax on rows with elements is still right.
    let out = run(&softmax, vec![t(&[0.0f32, 0.0, 1.0, 1.0], &[2, 2])]);
    assert_eq!(f32s(&out[0]), [0.5, 0.5, 0.5, 0.5]);

    let max_of = |axis| {
        fusion(move |fd| {
            let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
            let m = fd.max(x, &[axis], false)?;
            Ok(vec![fd.neg(m)?])
        })
    };
    // [0, 0] over dim 1: the output has no elements, nothing is observed.
    assert_eq!(
        run(&max_of(1), vec![t::<f32>(&[], &[0, 0])])[0].shape(),
        [0]
    );
    // [3, 0] over dim 1: three undefined values would be returned.
    assert!(err(&max_of(1), vec![t::<f32>(&[], &[3, 0])])
        .starts_with("max: invalid argument: cannot reduce over an empty dimension"));
    // The softmax's max as a second output is observed.
    let both = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let m = fd.max(x, &[1], true)?;
        let d = fd.sub(x, m)?;
        Ok(vec![d, m])
    });
    assert!(err(&both, vec![t::<f32>(&[], &[3, 0])]).contains("the max of zero elements"));
    assert_eq!(run(&both, vec![t::<f32>(&[], &[0, 0])])[1].shape(), [0, 1]);
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

// ----- reductions -----

const X23: [f32; 6] = [1.0, -2.0, 3.5, 4.0, 0.5, -6.0];

#[test]
fn reductions_with_keepdim_and_negative_axes() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![
            fd.sum(x, &[-1], false)?,
            fd.sum(x, &[-1], true)?,
            fd.sum(x, &[0, 1], false)?,
            fd.prod(x, &[0], false)?,
            fd.max(x, &[1], false)?,
            fd.min(x, &[-2], true)?,
            fd.mean(x, &[0], false)?,
        ])
    });
    let out = run(&f, vec![t(&X23, &[2, 3])]);
    assert_eq!(out[0].shape(), [2]);
    assert_eq!(f32s(&out[0]), [2.5, -1.5]);
    assert_eq!(out[1].shape(), [2, 1]);
    assert_eq!(f32s(&out[1]), [2.5, -1.5]);
    assert_eq!(out[2].shape(), [] as [usize; 0]);
    assert_eq!(f32s(&out[2]), [1.0]);
    assert_eq!(f32s(&out[3]), [4.0, -1.0, -21.0]);
    assert_eq!(f32s(&out[4]), [3.5, 4.0]);
    assert_eq!(out[5].shape(), [1, 3]);
    assert_eq!(f32s(&out[5]), [1.0, -2.0, -6.0]);
    assert_eq!(f32s(&out[6]), [2.5, -0.75, -1.25]);

    // 3-D: x[a][b][c] = (12a + 4b + c) / 2 - 3; summing over c and a leaves 6 + 16b.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1, -1])?;
        Ok(vec![fd.sum(x, &[-1, 0], true)?])
    });
    let data: Vec<f64> = (0..24).map(|i| i as f64 * 0.5 - 3.0).collect();
    let out = run(&f, vec![t(&data, &[2, 3, 4])]);
    assert_eq!(out[0].shape(), [1, 3, 1]);
    assert_eq!(f64s(&out[0]), [6.0, 22.0, 38.0]);
}

#[test]
fn reduction_dtypes_and_nan() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.max(x, &[1], false)?, fd.min(x, &[0], false)?])
    });
    let out = run(&f, vec![t(&[1.0f32, f32::NAN, 2.0, 3.0], &[2, 2])]);
    let m = f32s(&out[0]);
    assert!(m[0].is_nan());
    assert_eq!(m[1], 3.0);
    let m = f32s(&out[1]);
    assert_eq!(m[0], 1.0);
    assert!(m[1].is_nan());

    // i32 sums accumulate (and return) i64; bool sums count.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::Bool, &[-1])?;
        Ok(vec![
            fd.sum(x, &[1], false)?,
            fd.max(x, &[1], false)?,
            fd.sum(b, &[0], false)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[i32::MAX, 1, -4, -9], &[2, 2]),
            t(&[true, false, true], &[3]),
        ],
    );
    assert_eq!(out[0].dtype(), DataType::I64);
    assert_eq!(i64s(&out[0]), [2_147_483_648, -13]);
    assert_eq!(i32s(&out[1]), [i32::MAX, -4]);
    assert_eq!(i64s(&out[2]), [2]);

    // bf16 sums run in f32: 1 + 2^-8 + 2^-8 = 1 + 2^-7 (bf16 steps would stick at 1).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::BF16, &[-1])?;
        Ok(vec![fd.sum(x, &[0], false)?])
    });
    let v = [
        bf16::from_f32(1.0),
        bf16::from_f32(0.00390625),
        bf16::from_f32(0.00390625),
    ];
    let out = run(&f, vec![t(&v, &[3])]);
    assert_eq!(out[0].dtype(), DataType::BF16);
    assert_eq!(
        out[0].to_vec::<bf16>().unwrap(),
        [bf16::from_f32(1.0078125)]
    );
}

#[test]
fn var_with_corrections_var_mean_and_welford() {
    let rows = [1.0, 2.0, 3.0, 4.0, 2.0, 4.0, 4.0, 6.0];
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        let v0 = fd.var(x, &[1], 0, false)?;
        let v1 = fd.var(x, &[-1], 1, true)?;
        let (v, m) = fd.var_mean(x, &[1], 1, false)?;
        let (wm, ws, wc) = fd.welford(x, &[1])?;
        Ok(vec![v0, v1, v, m, wm, ws, wc])
    });
    let out = run(&f, vec![t(&rows, &[2, 4])]);
    // Row 0: mean 2.5, M2 = 2.25 + 0.25 + 0.25 + 2.25 = 5; row 1: mean 4, M2 = 8.
    assert_eq!(f64s(&out[0]), [1.25, 2.0]);
    assert_eq!(out[1].shape(), [2, 1]);
    assert_eq!(f64s(&out[1]), [5.0 / 3.0, 8.0 / 3.0]);
    assert_eq!(f64s(&out[2]), [5.0 / 3.0, 8.0 / 3.0]);
    assert_eq!(f64s(&out[3]), [2.5, 4.0]);
    assert_eq!(f64s(&out[4]), [2.5, 4.0]);
    assert_eq!(f64s(&out[5]), [5.0, 8.0]);
    assert_eq!(out[6].dtype(), DataType::I64);
    assert_eq!(out[6].shape(), [2]);
    assert_eq!(i64s(&out[6]), [4, 4]);

    // n <= correction: M2 / 0 is inf, or NaN when M2 = 0 (as PyTorch).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.var(x, &[1], 2, false)?, fd.var(x, &[1], 5, false)?])
    });
    let out = run(&f, vec![t(&[3.0f32, 5.0], &[1, 2])]);
    assert_eq!(f32s(&out[0]), [f32::INFINITY]);
    assert_eq!(f32s(&out[1]), [f32::INFINITY]);
    let out = run(&f, vec![t(&[7.0f32], &[1, 1])]);
    assert!(f32s(&out[0])[0].is_nan());
}

// ----- shape ops -----

#[test]
fn broadcast_expand_and_broadcast_in_dim() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[1, -1])?;
        let n = fd.define_scalar(DataType::I64)?;
        let v = fd.define_tensor(DataType::I64, &[-1])?;
        Ok(vec![
            fd.expand(x, &[Size::Const(4), Size::Const(-1)])?,
            fd.expand(x, &[Size::Val(n), Size::Const(3)])?,
            fd.broadcast_in_dim(v, &[Size::Const(2), Size::Const(3)], &[1])?,
            fd.broadcast(v, &[true, false, true])?,
            fd.unsqueeze(v, -1)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[5i64, -6, 7], &[1, 3]),
            2i64.into(),
            t(&[8i64, 9, 10], &[3]),
        ],
    );
    assert_eq!(out[0].shape(), [4, 3]);
    assert_eq!(i64s(&out[0]), [5i64, -6, 7].repeat(4));
    assert_eq!(out[1].shape(), [2, 3]);
    assert_eq!(i64s(&out[2]), [8, 9, 10, 8, 9, 10]);
    assert_eq!(out[3].shape(), [1, 3, 1]);
    assert_eq!(out[4].shape(), [3, 1]);

    // Only broadcast dims expand.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.expand(x, &[Size::Const(5), Size::Const(-1)])?])
    });
    let msg = err(&f, vec![t(&[1.0f32; 6], &[2, 3])]);
    assert_eq!(
        msg,
        "argument 0 dim 0: size 2, but it must equal 5: expand only changes the size of broadcast dims (-1 keeps a dim)"
    );
}

#[test]
fn reshape_permute_squeeze() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let p = fd.permute(x, &[1, 0])?;
        Ok(vec![
            fd.reshape(x, &[Size::Const(3), Size::Const(-1)])?,
            fd.reshape(p, &[Size::Const(-1)])?,
        ])
    });
    let out = run(&f, vec![t(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])]);
    assert_eq!(out[0].shape(), [3, 2]);
    assert_eq!(f32s(&out[0]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        f32s(&out[1]),
        [1.0, 4.0, 2.0, 5.0, 3.0, 6.0],
        "reshape reads the permuted tensor row-major"
    );
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.reshape(x, &[Size::Const(4), Size::Const(-1)])?])
    });
    let msg = err(&f, vec![t(&[1.0f32; 6], &[2, 3])]);
    assert_eq!(msg, "reshape: shape mismatch: expected sizes with 6 elements (input shape [2, 3]), found [4, -1]");

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1, -1])?;
        Ok(vec![fd.permute(x, &[2, 0, 1])?])
    });
    let data: Vec<i32> = (0..24).map(|i| i * 3 - 7).collect();
    let out = run(&f, vec![t(&data, &[2, 3, 4])]);
    assert_eq!(out[0].shape(), [4, 2, 3]);
    // out[c][a][b] = x[a][b][c] = (12a + 4b + c) * 3 - 7
    for (c, a, b) in [(0, 0, 0), (3, 1, 2), (2, 0, 1), (1, 1, 0)] {
        assert_eq!(
            out[0].get_f64(&[c, a, b]).unwrap(),
            ((12 * a + 4 * b + c) * 3) as f64 - 7.0
        );
    }

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, 1, -1])?;
        Ok(vec![fd.squeeze(x, &[1])?])
    });
    let out = run(&f, vec![t(&[1.5f32, 2.5, 3.5, 4.5], &[2, 1, 2])]);
    assert_eq!(out[0].shape(), [2, 2]);
    assert_eq!(f32s(&out[0]), [1.5, 2.5, 3.5, 4.5]);
}

#[test]
fn slices_clamp_like_python() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I64, &[-1])?;
        Ok(vec![
            fd.slice(x, &[Slice::range(-3i64, i64::MAX)])?,
            fd.slice(x, &[Slice::step(1i64, 8i64, 3)])?,
            fd.slice(x, &[Slice::range(5i64, 100i64)])?,
            fd.slice(x, &[Slice::range(8i64, 2i64)])?,
            fd.slice(x, &[Slice::range(-100i64, 2i64)])?,
            fd.slice(x, &[Slice::step(0i64, -1i64, 4)])?,
        ])
    });
    let data: Vec<i64> = (0..10).map(|i| i * 10 + 1).collect();
    let out = run(&f, vec![t(&data, &[10])]);
    assert_eq!(i64s(&out[0]), [71, 81, 91]);
    assert_eq!(i64s(&out[1]), [11, 41, 71]);
    assert_eq!(i64s(&out[2]), [51, 61, 71, 81, 91]);
    assert_eq!(out[3].shape(), [0]);
    assert_eq!(i64s(&out[4]), [1, 11]);
    assert_eq!(i64s(&out[5]), [1, 41, 81]);

    // Scalar bounds must lie within 0..=size.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let a = fd.define_scalar(DataType::I64)?;
        let b = fd.define_scalar(DataType::I64)?;
        Ok(vec![fd.slice(x, &[Slice::all(), Slice::range(a, b)])?])
    });
    let x: Vec<f32> = (0..8).map(|i| i as f32 - 2.5).collect();
    let out = run(&f, vec![t(&x, &[2, 4]), 1i64.into(), 3i64.into()]);
    assert_eq!(f32s(&out[0]), [-1.5, -0.5, 2.5, 3.5]);
    let msg = err(&f, vec![t(&x, &[2, 4]), 1i64.into(), 5i64.into()]);
    assert_eq!(
        msg,
        "slice: invalid argument: stop 5 at dim 1 is out of range for a dim of size 4 (bounds given by scalars must be within 0..=4)"
    );
    let msg = err(&f, vec![t(&x, &[2, 4]), (-1i64).into(), 2i64.into()]);
    assert!(
        msg.starts_with("slice: invalid argument: start -1 at dim 1 is out of range"),
        "{msg}"
    );
}

#[test]
fn pad_and_cat() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1])?;
        let v = fd.constant(-9.7);
        Ok(vec![fd.pad(x, &[(1, 0), (0, 2)], v)?])
    });
    let out = run(&f, vec![t(&[1i32, 2, 3, 4], &[2, 2])]);
    assert_eq!(out[0].shape(), [3, 4]);
    assert_eq!(i32s(&out[0]), [-9, -9, -9, -9, 1, 2, -9, -9, 3, 4, -9, -9]);

    let f = fusion(|fd| {
        let a = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let c = fd.define_tensor(DataType::F32, &[1, -1])?;
        Ok(vec![
            fd.cat(&[a, b], 1)?,
            fd.cat(&[a, c], -1)?,
            fd.cat(&[b, b], 0)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[1.0f32, 2.0], &[2, 1]),
            t(&[3.0f32, 4.0, 5.0, 6.0], &[2, 2]),
            t(&[7.0f32, 8.0], &[1, 2]),
        ],
    );
    assert_eq!(out[0].shape(), [2, 3]);
    assert_eq!(f32s(&out[0]), [1.0, 3.0, 4.0, 2.0, 5.0, 6.0]);
    assert_eq!(
        f32s(&out[1]),
        [1.0, 7.0, 8.0, 2.0, 7.0, 8.0],
        "a declared broadcast dim broadcasts"
    );
    assert_eq!(out[2].shape(), [4, 2]);
    assert_eq!(f32s(&out[2]), [3.0, 4.0, 5.0, 6.0, 3.0, 4.0, 5.0, 6.0]);

    let f = fusion(|fd| {
        let a = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let b = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.cat(&[a, b], 1)?])
    });
    let msg = err(
        &f,
        vec![t(&[1.0f32, 2.0], &[2, 1]), t(&[0.5f32; 6], &[3, 2])],
    );
    assert_eq!(msg, "argument 1 dim 0: size 3, but it must equal argument 0 dim 0 (size 2): the fusion concatenates them along dim 1 (cat), so the other dims must match");
}

#[test]
fn full_iota_and_size() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let n = fd.size(x, -1)?;
        let v = fd.constant(2.5);
        let seven = fd.constant(7i64);
        let tenth = fd.constant(0.1);
        let start = fd.constant(3i64);
        let step = fd.constant(-2i64);
        let fstart = fd.constant(0.5);
        let fstep = fd.constant(0.25);
        let big = fd.constant(2_147_483_646i64);
        let one = fd.constant(1i64);
        Ok(vec![
            fd.full(&[Size::Const(2), Size::Val(n)], v, DataType::F16)?,
            fd.full(&[Size::Const(2)], seven, DataType::F32)?,
            fd.full(&[Size::Const(1)], tenth, DataType::BF16)?,
            fd.iota(Size::Const(5), start, step, DataType::I64)?,
            fd.iota(Size::Val(n), fstart, fstep, DataType::F32)?,
            fd.iota(Size::Const(3), big, one, DataType::I32)?,
            fd.add(x, n)?,
        ])
    });
    let out = run(
        &f,
        vec![t(&[0.5f32, 1.5, -2.5, 4.0, 1.0, 0.25, -1.0, 2.0], &[2, 4])],
    );
    assert_eq!(out[0].shape(), [2, 4]);
    assert_eq!(out[0].to_f64_vec(), [2.5; 8]);
    assert_eq!(f32s(&out[1]), [7.0, 7.0]);
    assert_eq!(out[2].to_f64_vec(), [0.10009765625]);
    assert_eq!(i64s(&out[3]), [3, 1, -1, -3, -5]);
    assert_eq!(f32s(&out[4]), [0.5, 0.75, 1.0, 1.25]);
    assert_eq!(
        i32s(&out[5]),
        [i32::MAX - 1, i32::MAX, i32::MIN],
        "i32 iota wraps"
    );
    assert_eq!(f32s(&out[6]), [4.5, 5.5, 1.5, 8.0, 5.0, 4.25, 3.0, 6.0]);
}

#[test]
fn scalar_only_arithmetic_feeds_tensors() {
    let f = fusion(|fd| {
        let s = fd.define_scalar(DataType::F64)?;
        let k = fd.define_scalar(DataType::I64)?;
        let two = fd.constant(2.0);
        let d = fd.mul(s, two)?;
        let three = fd.constant(3i64);
        let m = fd.remainder(k, three)?;
        Ok(vec![
            fd.full(&[Size::Const(2)], d, DataType::F64)?,
            fd.full(&[Size::Const(1)], m, DataType::I64)?,
        ])
    });
    let out = run(&f, vec![1.75f64.into(), (-7i64).into()]);
    assert_eq!(f64s(&out[0]), [3.5, 3.5]);
    assert_eq!(i64s(&out[1]), [2]);
}

// ----- indexing -----

#[test]
fn index_select_select_gather_take_along_axis() {
    let x32: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1])?;
        let j = fd.define_tensor(DataType::I64, &[-1])?;
        let k = fd.define_scalar(DataType::I64)?;
        Ok(vec![
            fd.index_select(x, 0, i)?,
            fd.index_select(x, -1, j)?,
            fd.select(x, 0, Size::Const(-1))?,
            fd.select(x, 1, Size::Val(k))?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&x32, &[3, 2]),
            t(&[2i64, 0, 2], &[3]),
            t(&[1i64], &[1]),
            0i64.into(),
        ],
    );
    assert_eq!(f32s(&out[0]), [5.0, 6.0, 1.0, 2.0, 5.0, 6.0]);
    assert_eq!(out[1].shape(), [3, 1]);
    assert_eq!(f32s(&out[1]), [2.0, 4.0, 6.0]);
    assert_eq!(f32s(&out[2]), [5.0, 6.0]);
    assert_eq!(f32s(&out[3]), [1.0, 3.0, 5.0]);
    let msg = err(
        &f,
        vec![
            t(&x32, &[3, 2]),
            t(&[2i64, 0, 2], &[3]),
            t(&[1i64], &[1]),
            2i64.into(),
        ],
    );
    assert_eq!(
        msg,
        "select: invalid argument: index 2 is out of range for dim 1 of size 2 (expected -2..2)"
    );
    let msg = err(
        &f,
        vec![
            t(&x32, &[3, 2]),
            t(&[2i64, 3, 0], &[3]),
            t(&[1i64], &[1]),
            0i64.into(),
        ],
    );
    assert_eq!(msg, "index_select: invalid argument: index 3 at position [1] is out of range for dim 0 of size 3 (expected 0..3)");

    let x9: Vec<i32> = (1..=9).collect();
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![fd.gather(x, 1, i)?, fd.gather(x, 0, i)?])
    });
    let out = run(&f, vec![t(&x9, &[3, 3]), t(&[0i64, 2, 1, 0], &[2, 2])]);
    // out[i][j] = x[i][idx[i][j]] and x[idx[i][j]][j]
    assert_eq!(i32s(&out[0]), [1, 3, 5, 4]);
    assert_eq!(i32s(&out[1]), [1, 8, 4, 2]);
    let msg = err(&f, vec![t(&x9, &[3, 3]), t(&[0i64, 2, 3, 0], &[2, 2])]);
    assert_eq!(msg, "gather: invalid argument: index 3 at position [1, 0] is out of range for dim 1 of size 3 (expected 0..3)");
    let msg = err(&f, vec![t(&x9, &[3, 3]), t(&[0i64, -1], &[1, 2])]);
    assert!(
        msg.contains("index -1 at position [0, 1] is out of range"),
        "{msg}"
    );
    let msg = err(&f, vec![t(&x9, &[3, 3]), t(&[0i64; 8], &[4, 2])]);
    assert_eq!(msg, "argument 1 dim 0: size 4, but it must be at most argument 0 dim 0 (size 3): gather reads the input at the index's positions outside dim 1");

    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[1, -1])?;
        let c = fd.define_tensor(DataType::F64, &[-1, 1])?;
        let j = fd.define_tensor(DataType::I64, &[-1, -1])?;
        Ok(vec![
            fd.take_along_axis(x, i, 1)?,
            fd.take_along_axis(c, j, 0)?,
        ])
    });
    let out = run(
        &f,
        vec![
            t(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0], &[2, 3]),
            t(&[2i64, 0], &[1, 2]),
            t(&[1.5, 2.5, 3.5], &[3, 1]),
            t(&[2i64, 0, 1, 1], &[2, 2]),
        ],
    );
    assert_eq!(out[0].shape(), [2, 2]);
    assert_eq!(f64s(&out[0]), [30.0, 10.0, 60.0, 40.0]);
    assert_eq!(out[1].shape(), [2, 2]);
    assert_eq!(f64s(&out[1]), [3.5, 1.5, 2.5, 2.5]);
}

// ----- random -----

#[test]
fn uniform_and_normal_follow_philox() {
    use nvfuser_core::philox;
    let f = fusion(|fd| {
        let seed = fd.define_scalar(DataType::I64)?;
        let offset = fd.define_scalar(DataType::I64)?;
        let lo = fd.constant(-1.5);
        let hi = fd.constant(2.5);
        let mean = fd.constant(0.5);
        let std = fd.constant(2.0);
        let s = [Size::Const(2), Size::Const(3)];
        Ok(vec![
            fd.uniform(&s, lo, hi, seed, offset, DataType::F32)?,
            fd.uniform(&s, lo, hi, seed, offset, DataType::F64)?,
            fd.uniform(&s, lo, hi, seed, offset, DataType::BF16)?,
            fd.uniform(&s, lo, hi, seed, offset, DataType::F16)?,
            fd.normal(&s, mean, std, seed, offset, DataType::F32)?,
            fd.normal(&s, mean, std, seed, offset, DataType::F64)?,
            fd.normal(&s, mean, std, seed, offset, DataType::F16)?,
        ])
    });
    for (seed, offset) in [(1234i64, 7i64), (-5, 0), (0, 1 << 40)] {
        let out = run(&f, vec![seed.into(), offset.into()]);
        let (s, o) = (seed as u64, offset as u64);
        let uf32: Vec<f32> = (0..6)
            .map(|i| philox::uniform_f32(s, o, i, -1.5, 2.5))
            .collect();
        assert_eq!(f32s(&out[0]), uf32);
        let uf64: Vec<f64> = (0..6)
            .map(|i| philox::uniform_f64(s, o, i, -1.5, 2.5))
            .collect();
        assert_eq!(f64s(&out[1]), uf64);
        let ubf: Vec<bf16> = uf32.iter().map(|&v| bf16::from_f32(v)).collect();
        assert_eq!(out[2].to_vec::<bf16>().unwrap(), ubf);
        let uh: Vec<f16> = uf32.iter().map(|&v| f16::from_f32(v)).collect();
        assert_eq!(out[3].to_vec::<f16>().unwrap(), uh);
        let nf32: Vec<f32> = (0..6)
            .map(|i| philox::normal_f32_as_f64(s, o, i, 0.5, 2.0) as f32)
            .collect();
        assert_eq!(f32s(&out[4]), nf32);
        let nf64: Vec<f64> = (0..6)
            .map(|i| philox::normal_f64(s, o, i, 0.5, 2.0))
            .collect();
        assert_eq!(f64s(&out[5]), nf64);
        let nh: Vec<f16> = (0..6)
            .map(|i| f16::from_f32(philox::normal_f32_as_f64(s, o, i, 0.5, 2.0) as f32))
            .collect();
        assert_eq!(out[6].to_vec::<f16>().unwrap(), nh);
        for v in f64s(&out[1]) {
            assert!((-1.5..2.5).contains(&v), "{v}");
        }
        let distinct: std::collections::HashSet<u64> = uf64.iter().map(|v| v.to_bits()).collect();
        assert_eq!(distinct.len(), 6);
    }

    // The documented known value: seed 0, offset 0, element 0 of uniform(0, 1) in f32.
    let f = fusion(|fd| {
        let zero = fd.constant(0i64);
        let lo = fd.constant(0.0);
        let hi = fd.constant(1.0);
        let n = fd.define_scalar(DataType::I64)?;
        Ok(vec![
            fd.uniform(&[Size::Val(n)], lo, hi, zero, zero, DataType::F32)?,
            fd.normal(&[Size::Val(n)], lo, hi, zero, zero, DataType::F32)?,
        ])
    });
    let out = run(&f, vec![10_000i64.into()]);
    // 0x6627e8 * 2^-24 = 0.399046421051025390625, f32 bits 0x3ecc4fd0.
    assert_eq!(
        out[0].get_f64(&[0]).unwrap(),
        0x6627e8 as f64 / 16_777_216.0
    );
    assert_eq!(
        (out[0].get_f64(&[0]).unwrap() as f32).to_bits(),
        0x3ecc_4fd0
    );
    let u = out[0].to_f64_vec();
    assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
    let mean = u.iter().sum::<f64>() / u.len() as f64;
    assert!((mean - 0.5).abs() < 0.02, "uniform mean {mean}");
    let n = out[1].to_f64_vec();
    let mean = n.iter().sum::<f64>() / n.len() as f64;
    let var = n.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n.len() as f64;
    assert!(
        mean.abs() < 0.05 && (var.sqrt() - 1.0).abs() < 0.05,
        "normal mean {mean}, std {}",
        var.sqrt()
    );
}

// ----- misc -----

#[test]
fn set_segment_set_and_aliased_outputs() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let s = fd.set(x).unwrap();
    let g = fd.segment_set(s).unwrap();
    let two = fd.constant(2.0);
    let y = fd.mul(g, two).unwrap();
    fd.add_output_alias(y, x).unwrap();
    fd.add_output(g).unwrap();
    fd.add_output(x).unwrap();
    let f = fd.finish().unwrap();
    let out = run(&f, vec![t(&[1.5f32, -4.0], &[2])]);
    assert_eq!(f32s(&out[0]), [3.0, -8.0]);
    assert_eq!(f32s(&out[1]), [1.5, -4.0]);
    assert_eq!(
        f32s(&out[2]),
        [1.5, -4.0],
        "the input itself is unchanged: in-place is a device concern"
    );
}

#[test]
fn scalar_inputs_convert_to_their_dtype() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F16, &[-1])?;
        let s = fd.define_scalar(DataType::F16)?;
        let k = fd.define_scalar(DataType::F32)?;
        let a = fd.add(x, s)?;
        Ok(vec![a, fd.mul(x, k)?])
    });
    let out = run(
        &f,
        vec![t(&[f16::from_f32(1.0)], &[1]), 0.1f64.into(), 3i64.into()],
    );
    // The f16 scalar input 0.1 is 0.0999755859375; 1 + that = 1.0999755859375 -> f16 1.099609375.
    assert_eq!(out[0].to_f64_vec(), [1.099609375]);
    assert_eq!(out[1].to_f64_vec(), [3.0]);
}

#[test]
fn large_inputs_evaluate_in_reasonable_time() {
    // A LayerNorm over 256 x 4096 (2^20 elements).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::BF16, &[-1, -1])?;
        let w = fd.define_tensor(DataType::BF16, &[-1])?;
        let xf = fd.cast(x, DataType::F32)?;
        let (var, mean) = fd.var_mean(xf, &[1], 0, true)?;
        let eps = fd.constant(1e-5);
        let xc = fd.sub(xf, mean)?;
        let r = fd.add(var, eps)?;
        let r = fd.rsqrt(r)?;
        let y = fd.mul(xc, r)?;
        let wf = fd.cast(w, DataType::F32)?;
        let y = fd.mul(y, wf)?;
        Ok(vec![fd.cast(y, DataType::BF16)?])
    });
    let x = HostTensor::random(DataType::BF16, &[256, 4096], 1);
    let w = HostTensor::full(DataType::BF16, &[4096], 2.0).unwrap();
    let start = std::time::Instant::now();
    let out = run(&f, vec![x.into(), w.into()]);
    let elapsed = start.elapsed();
    assert_eq!(out[0].shape(), [256, 4096]);
    let row0: Vec<f64> = out[0].to_f64_vec()[..4096].to_vec();
    let mean = row0.iter().sum::<f64>() / 4096.0;
    let var = row0.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / 4096.0;
    assert!(mean.abs() < 0.02, "{mean}");
    assert!((var - 4.0).abs() < 0.05, "{var}");
    assert!(elapsed.as_secs() < 60, "{elapsed:?}");
}

#[test]
fn broadcast_dims_meet_expanded_dims_in_cat_and_take_along_axis() {
    // x: [1, 3] with a broadcast dim 0; idx: an expanded [3, 2] (stride 0 in dim 0).
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[1, -1])?;
        let i = fd.define_tensor_from_strides(DataType::I64, &[3, 2], &[0, 1], false)?;
        let e = fd.define_tensor_from_strides(DataType::F32, &[3, 2], &[0, 1], false)?;
        let x2 = fd.slice(x, &[Slice::all(), Slice::range(0i64, 2i64)])?;
        Ok(vec![fd.take_along_axis(x, i, 1)?, fd.cat(&[x2, e], 1)?])
    });
    let idx = HostTensor::from_strided(&[2i64, 0], &[3, 2], &[0, 1], 0).unwrap();
    let ex = HostTensor::from_strided(&[5.5f32, -6.5], &[3, 2], &[0, 1], 0).unwrap();
    let out = run(
        &f,
        vec![t(&[10.0f32, 20.0, 30.0], &[1, 3]), idx.into(), ex.into()],
    );
    assert_eq!(out[0].shape(), [3, 2]);
    assert_eq!(f32s(&out[0]), [30.0, 10.0].repeat(3));
    assert_eq!(out[1].shape(), [3, 4]);
    assert_eq!(f32s(&out[1]), [10.0, 20.0, 5.5, -6.5].repeat(3));
}

/// `uniform` covers [low, high): a draw that rounds up to `high` in the output dtype
/// becomes `low` (PyTorch's rule), and every other draw is the philox value rounded.
#[test]
fn uniform_bf16_never_returns_high() {
    let n = 40_000usize;
    let f = fusion(|fd| {
        let lo = fd.constant(0.0);
        let hi = fd.constant(1.0);
        let seed = fd.constant(7i64);
        let off = fd.constant(0i64);
        Ok(vec![fd.uniform(
            &[Size::Const(n as i64)],
            lo,
            hi,
            seed,
            off,
            DataType::BF16,
        )?])
    });
    let out = run(&f, vec![])[0].to_f64_vec();
    let mut wrapped = 0;
    for (i, &v) in out.iter().enumerate() {
        let raw = nvfuser_core::philox::uniform_f32(7, 0, i as u64, 0.0, 1.0);
        let rounded = bf16::from_f32(raw).to_f64();
        let want = if rounded >= 1.0 { 0.0 } else { rounded };
        assert_eq!(v, want, "element {i}");
        assert!((0.0..1.0).contains(&v), "element {i} = {v}");
        wrapped += (rounded >= 1.0) as usize;
    }
    // About 1 in 512 draws rounds up to 1.0 in bf16; the rule must have been exercised.
    assert!(wrapped > 10, "only {wrapped} draws rounded to high");
}

/// Issue #12 case 10: every f32 op rounds to f32 (the value model), as a kernel and
/// PyTorch compute. Rows of f32::MAX: RMSNorm's `x * x` overflows, so the result is 0;
/// LayerNorm through var_mean keeps the finite mean, so the result is the bias; an f32
/// mean of them overflows like its f32 sum.
#[test]
fn f32_max_rows_round_like_f32_kernels() {
    use nvfuser_core::workloads;
    let (rows, hidden) = (2usize, 64usize);
    let big = || t(&vec![f32::MAX; rows * hidden], &[rows, hidden]);
    let w: Vec<f32> = (0..hidden).map(|i| i as f32 * 0.25 - 3.0).collect();
    let b: Vec<f32> = (0..hidden).map(|i| 1.0 - i as f32 * 0.125).collect();
    let eps = EvalInput::Scalar(ScalarValue::Float(1e-5));
    let rms = workloads::rms_norm(DataType::F32).unwrap();
    let out = run(&rms, vec![big(), t(&w, &[hidden]), eps.clone()]);
    assert!(f32s(&out[0]).iter().all(|&v| v == 0.0));
    let ln = workloads::layer_norm(DataType::F32).unwrap();
    let out = run(&ln, vec![big(), t(&w, &[hidden]), t(&b, &[hidden]), eps]);
    assert_eq!(&f32s(&out[0])[..hidden], &b[..]);
    let mean = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![fd.mean(x, &[1], false)?])
    });
    assert_eq!(f32s(&run(&mean, vec![big()])[0]), [f32::INFINITY; 2]);
    // In f64 the same values stay finite.
    let mean64 = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1])?;
        Ok(vec![fd.mean(x, &[1], false)?])
    });
    let x64 = t(&[f32::MAX as f64; 4], &[1, 4]);
    assert_eq!(f64s(&run(&mean64, vec![x64])[0]), [f32::MAX as f64]);
}
