use super::*;
use crate::eval::{evaluate, EvalInput, HostTensor};

fn build(src: &str) -> Fusion {
    crate::dsl::build_str(src).unwrap().remove(0).0
}

/// A float input of `shape` holding random values and, first, the special ones the
/// one-element reductions treat apart (`-0`, infinities, NaN).
fn special_input(dtype: DataType, shape: &[usize], seed: u64) -> HostTensor {
    let mut v = HostTensor::random(dtype, shape, seed).to_f64_vec();
    for (x, s) in v
        .iter_mut()
        .zip([-0.0, 0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.5])
    {
        *x = s;
    }
    let t = HostTensor::from_vec(v, shape).unwrap();
    t.cast(dtype)
}

/// `g` verifies, has no reduction left, and computes what `f` computes bit for bit
/// (NaNs equal, zeros by sign) on `inputs`.
fn assert_same(src: &str, f: &Fusion, g: &Fusion, inputs: &[EvalInput]) {
    crate::ir::verify(g).unwrap();
    assert!(
        !g.exprs().any(|(_, e)| e.op.reduction_axes().is_some()),
        "{src}: a reduction is left:\n{g}"
    );
    let want = evaluate(f, inputs).unwrap();
    let got = evaluate(g, inputs).unwrap();
    assert_eq!(got.len(), want.len(), "{src}");
    for (a, b) in got.iter().zip(&want) {
        assert_eq!(a.shape(), b.shape(), "{src}");
        assert_eq!(a.dtype(), b.dtype(), "{src}");
        for (x, y) in a.to_f64_vec().iter().zip(&b.to_f64_vec()) {
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{src}: {x} vs {y}"
            );
        }
    }
}

/// Every reduction family over size-1 dims only, rewritten, gives the reference's
/// values: `-0`, infinities and NaN among the inputs, every correction of `var`
/// (including those at and above the count, NaN), half-precision inputs, integer sums.
#[test]
fn reductions_over_size_one_dims_become_pointwise() {
    let float_cases: &[(&str, &[usize])] = &[
        // CPU fuzz seed 12124262's shape.
        ("fn k(x: Tensor<f32, [1, _, _]>) -> Tensor<f32, [_, _]> { x.var([0], 0) }", &[1, 3, 4]),
        ("fn k(x: Tensor<f32, [1, _, _]>) -> Tensor<f32, [_, _]> { x.var([0], 1) }", &[1, 3, 4]),
        ("fn k(x: Tensor<f32, [1, _, _]>) -> Tensor<f32, [_, _]> { x.var([0], 2) }", &[1, 3, 4]),
        ("fn k(x: Tensor<f32, [1, _, _]>) -> Tensor<f32, [_, _]> { x.var([0], 3) }", &[1, 3, 4]),
        ("fn k(x: Tensor<f16, [_, 1]>) -> Tensor<f16, [_]> { x.var([1], 0) }", &[7, 1]),
        (
            "fn k(x: Tensor<f32, [_, 1, _]>) -> (Tensor<f32, [_, _]>, Tensor<f32, [_, _]>) { x.var_mean([1], 0) }",
            &[2, 1, 5],
        ),
        (
            "fn k(x: Tensor<bf16, [_, 1, _]>) -> (Tensor<bf16, [_, _]>, Tensor<bf16, [_, _]>) { x.var_mean([1], 1) }",
            &[2, 1, 5],
        ),
        (
            "fn k(x: Tensor<f32, [1, _, 1]>) -> (Tensor<f32, [_]>, Tensor<f32, [_]>, Tensor<i64, [_]>) { x.welford([0, 2]) }",
            &[1, 9, 1],
        ),
        ("fn k(x: Tensor<f32, [1, _, 1]>) -> Tensor<f32, [_]> { x.sum([0, 2]) }", &[1, 9, 1]),
        ("fn k(x: Tensor<f16, [_, 1]>) -> Tensor<f16, [_]> { x.sum([1]) * 2.0 }", &[8, 1]),
        ("fn k(x: Tensor<f32, [_, 1]>) -> Tensor<f32, [_]> { x.mean([1]) }", &[8, 1]),
        ("fn k(x: Tensor<bf16, [1, _]>) -> Tensor<bf16, [_]> { x.mean([0]) }", &[1, 8]),
        ("fn k(x: Tensor<f32, [1, _]>) -> Tensor<f32, [_]> { x.prod([0]) }", &[1, 8]),
        ("fn k(x: Tensor<f32, [1, _]>) -> Tensor<f32, [_]> { x.max([0]) }", &[1, 8]),
        ("fn k(x: Tensor<f8e4m3, [1, _]>) -> Tensor<f8e4m3, [_]> { x.min([0]) }", &[1, 8]),
        // A keepdim result: the size-1 dim comes back as a broadcast.
        (
            "fn k(x: Tensor<f32, [_, 1]>) -> Tensor<f32, [_, 1]> { x - x.sum([1], keepdim = true) }",
            &[6, 1],
        ),
    ];
    for (k, &(src, shape)) in float_cases.iter().enumerate() {
        let f = build(src);
        let dtype = f.val(f.inputs()[0]).dtype;
        let g = pointwise_unit_reductions(&f).unwrap_or_else(|| panic!("{src}: not rewritten"));
        let x = special_input(dtype, shape, 3 + k as u64);
        assert_same(src, &f, &g, &[EvalInput::Tensor(x)]);
    }
    let int_cases: &[(&str, DataType, &[usize])] = &[
        (
            "fn k(x: Tensor<i32, [_, 1]>) -> Tensor<i64, [_]> { x.sum([1]) }",
            DataType::I32,
            &[5, 1],
        ),
        (
            "fn k(x: Tensor<i64, [1, _]>) -> Tensor<i64, [_]> { x.prod([0]) }",
            DataType::I64,
            &[1, 5],
        ),
        (
            "fn k(x: Tensor<i32, [1, _]>) -> Tensor<i32, [_]> { x.max([0]) }",
            DataType::I32,
            &[1, 5],
        ),
        (
            "fn k(x: Tensor<bool, [1, _]>) -> Tensor<bool, [_]> { x.min([0]) }",
            DataType::Bool,
            &[1, 5],
        ),
    ];
    for (k, &(src, dtype, shape)) in int_cases.iter().enumerate() {
        let f = build(src);
        let g = pointwise_unit_reductions(&f).unwrap_or_else(|| panic!("{src}: not rewritten"));
        let x = HostTensor::random(dtype, shape, 40 + k as u64);
        assert_same(src, &f, &g, &[EvalInput::Tensor(x)]);
    }
}

/// Reductions over a dim of another size, expanded dims among them, are left.
#[test]
fn reductions_over_other_dims_are_left() {
    for src in [
        "fn k(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_]> { x.sum([1]) }",
        "fn k(x: Tensor<f32, [1, _]>) -> Tensor<f32, [1]> { x.var([1], 1) }",
        "fn k(x: Tensor<f32, [1, _, _]>) -> Tensor<f32, [_]> { x.sum([0, 1]) }",
        "fn k(x: Tensor<f32, [_, 1]>, n: i64) -> Tensor<f32, [_]> { x.expand([-1, n]).sum([1]) }",
    ] {
        assert!(pointwise_unit_reductions(&build(src)).is_none(), "{src}");
    }
}
