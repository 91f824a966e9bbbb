//! `sort`, `argsort` and `topk` on the CPU reference evaluator, through the builder and
//! the `fusion!` language: ties by the lower index first (ascending and descending),
//! NaN above +inf, -0 equal to +0, `k = 0`, `k = size`, empty dims, integers, bools
//! and bf16; errors for a `k` above the size (at build time and at run time); and the
//! printers' round trip. Every expected value is written out by hand.

mod common;

use common::{bools, err, f32s, fusion, i64s, run, t};
use half::bf16;
use nvfuser_core::dsl;
use nvfuser_core::eval::{evaluate, EvalInput};
use nvfuser_core::ir::Op;
use nvfuser_core::prelude::*;

fn dsl_fusion(src: &str) -> Fusion {
    match dsl::build_str(src) {
        Ok(mut v) => v.remove(0).0,
        Err(errs) => panic!("{}", errs.iter().map(|e| e.render(src)).collect::<String>()),
    }
}

/// Bit patterns, so that -0 and +0 (and NaN) are told apart.
fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn sort_is_stable_both_ways_by_builder_and_by_dsl() {
    let built = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let (a, ai) = fd.sort(x, -1, false, false)?;
        let (d, di) = fd.sort(x, 1, true, true)?;
        let g = fd.argsort(x, 0, false)?;
        Ok(vec![a, ai, d, di, g])
    });
    let parsed = dsl_fusion(
        "fn f(x: Tensor<f32, [_, _]>) -> (Tensor<f32, [_, _]>, Tensor<i64, [_, _]>,
            Tensor<f32, [_, _]>, Tensor<i64, [_, _]>, Tensor<i64, [_, _]>) {
            let (a, ai) = x.sort();
            let (d, di) = sort(x, axis = 1, descending = true, stable = true);
            (a, ai, d, di, x.argsort(0))
        }",
    );
    assert!(parsed == built, "{parsed}\n{built}");
    // Row 0 has ties: 2 at 0, 3; 1 at 1, 4.
    let x = [2.0f32, 1.0, 3.0, 2.0, 1.0, 5.0, 4.0, 5.0, 4.0, 0.0];
    for f in [&built, &parsed] {
        let out = run(f, vec![t(&x, &[2, 5])]);
        assert_eq!(
            f32s(&out[0]),
            [1.0, 1.0, 2.0, 2.0, 3.0, 0.0, 4.0, 4.0, 5.0, 5.0]
        );
        assert_eq!(i64s(&out[1]), [1, 4, 0, 3, 2, 4, 1, 3, 0, 2]);
        // Descending: larger first, equal keys still lower index first.
        assert_eq!(
            f32s(&out[2]),
            [3.0, 2.0, 2.0, 1.0, 1.0, 5.0, 5.0, 4.0, 4.0, 0.0]
        );
        assert_eq!(i64s(&out[3]), [2, 0, 3, 1, 4, 0, 2, 1, 3, 4]);
        // Down the columns: (2, 5), (1, 4), (3, 5), (2, 4), (1, 0).
        assert_eq!(i64s(&out[4]), [0, 0, 0, 0, 1, 1, 1, 1, 1, 0]);
    }
}

#[test]
fn nan_sorts_above_infinity_and_zeros_are_equal() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let (a, ai) = fd.sort(x, 0, false, false)?;
        let (d, di) = fd.sort(x, 0, true, false)?;
        let (tv, ti) = fd.topk(x, 2, 0, true, true)?;
        let (sv, si) = fd.topk(x, 3, 0, false, true)?;
        Ok(vec![a, ai, d, di, tv, ti, sv, si])
    });
    let nan = f32::NAN;
    let x = [0.0f32, nan, f32::INFINITY, -0.0, -1.0, nan, 0.0];
    let out = run(&f, vec![t(&x, &[7])]);
    // Ascending: -1, then the zeros in index order (+0, -0, +0), inf, the NaNs.
    let a = f32s(&out[0]);
    assert_eq!(bits(&a[..5]), bits(&[-1.0, 0.0, -0.0, 0.0, f32::INFINITY]));
    assert!(a[5].is_nan() && a[6].is_nan());
    assert_eq!(i64s(&out[1]), [4, 0, 3, 6, 2, 1, 5]);
    // Descending: the NaNs first (index order), inf, the zeros in index order, -1.
    let d = f32s(&out[2]);
    assert!(d[0].is_nan() && d[1].is_nan());
    assert_eq!(bits(&d[2..]), bits(&[f32::INFINITY, 0.0, -0.0, 0.0, -1.0]));
    assert_eq!(i64s(&out[3]), [1, 5, 2, 0, 3, 6, 4]);
    // topk largest 2: both NaNs.
    assert!(f32s(&out[4]).iter().all(|v| v.is_nan()));
    assert_eq!(i64s(&out[5]), [1, 5]);
    // topk smallest 3: -1, +0 (index 0), -0 (index 3).
    assert_eq!(bits(&f32s(&out[6])), bits(&[-1.0, 0.0, -0.0]));
    assert_eq!(i64s(&out[7]), [4, 0, 3]);
}

#[test]
fn topk_k_zero_k_size_and_empty_dims() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let (z, zi) = fd.topk(x, 0, 1, true, true)?;
        let (a, ai) = fd.topk(x, 3, 1, true, true)?;
        let (s, si) = fd.sort(x, 1, false, false)?;
        Ok(vec![z, zi, a, ai, s, si])
    });
    let out = run(&f, vec![t(&[3.0f32, 1.0, 2.0, 6.0, 6.0, 5.0], &[2, 3])]);
    assert_eq!(out[0].shape(), [2, 0]);
    assert_eq!(out[1].shape(), [2, 0]);
    assert_eq!(f32s(&out[2]), [3.0, 2.0, 1.0, 6.0, 6.0, 5.0]);
    assert_eq!(i64s(&out[3]), [0, 2, 1, 0, 1, 2]);
    // Zero rows: every output is empty.
    let out = run(&f, vec![t(&[] as &[f32], &[0, 3])]);
    assert!(out.iter().all(|o| o.shape()[0] == 0));
    // An empty sorted dim with k = 0 is fine; k = 3 of it is refused by the size check.
    let g = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let (s, si) = fd.sort(x, 1, false, false)?;
        let (z, zi) = fd.topk(x, 0, 1, true, true)?;
        Ok(vec![s, si, z, zi])
    });
    let out = run(&g, vec![t(&[] as &[f32], &[4, 0])]);
    assert!(out.iter().all(|o| o.shape() == [4, 0]));
    let e = err(&f, vec![t(&[] as &[f32], &[4, 0])]);
    assert!(e.contains("be at least 3") && e.contains("topk"), "{e}");
}

#[test]
fn k_above_the_size_is_a_typed_error_at_build_and_at_run_time() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, 4]).unwrap();
    let e = fd.topk(x, 5, 1, true, true).unwrap_err().to_string();
    assert!(
        e.contains("k at most the size of dim 1 (4)") && e.contains("k = 5"),
        "{e}"
    );
    let e = fd.topk(x, -1, 1, true, true).unwrap_err().to_string();
    assert!(e.contains("k must be >= 0"), "{e}");
    let e = fd.sort(x, 2, false, false).unwrap_err().to_string();
    assert!(e.contains("out of range"), "{e}");
    // A symbolic dim: checked against each call's arguments.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let (v, i) = fd.topk(x, 3, 1, true, true)?;
        Ok(vec![v, i])
    });
    let e = err(&f, vec![t(&[1.0f32, 2.0], &[1, 2])]);
    assert!(
        e.contains("argument 0 dim 1: size 2") && e.contains("be at least 3"),
        "{e}"
    );
    // The language reports k at its argument.
    let src =
        "fn f(x: Tensor<f32, [_, 4]>) -> (Tensor<f32, [_, _]>, Tensor<i64, [_, _]>) { x.topk(7) }";
    let errs = dsl::build_str(src).unwrap_err();
    let msg: String = errs.iter().map(|e| e.render(src)).collect();
    assert!(msg.contains("k = 7"), "{msg}");
}

#[test]
fn integers_bools_and_bf16() {
    let f = fusion(|fd| {
        let i = fd.define_tensor(DataType::I32, &[-1])?;
        let b = fd.define_tensor(DataType::Bool, &[-1])?;
        let h = fd.define_tensor(DataType::BF16, &[-1])?;
        let (iv, ii) = fd.topk(i, 3, 0, true, true)?;
        let (bv, bi) = fd.sort(b, 0, true, false)?;
        let (hv, hi) = fd.sort(h, 0, false, false)?;
        Ok(vec![iv, ii, bv, bi, hv, hi])
    });
    let i = [3i32, -7, 3, i32::MAX, 0];
    let b = [false, true, false, true];
    let h: Vec<bf16> = [1.5f32, -2.0, 1.5, 0.25]
        .iter()
        .map(|&v| bf16::from_f32(v))
        .collect();
    let out = run(&f, vec![t(&i, &[5]), t(&b, &[4]), t(&h, &[4])]);
    assert_eq!(out[0].dtype(), DataType::I32);
    assert_eq!(out[0].to_vec::<i32>().unwrap(), [i32::MAX, 3, 3]);
    assert_eq!(i64s(&out[1]), [3, 0, 2]);
    assert_eq!(bools(&out[2]), [true, true, false, false]);
    assert_eq!(i64s(&out[3]), [1, 3, 0, 2]);
    assert_eq!(out[4].dtype(), DataType::BF16);
    let hv: Vec<f32> = out[4]
        .to_vec::<bf16>()
        .unwrap()
        .iter()
        .map(|v| v.to_f32())
        .collect();
    assert_eq!(hv, [-2.0, 0.25, 1.5, 1.5]);
    assert_eq!(i64s(&out[5]), [1, 3, 0, 2]);
}

#[test]
fn fp8_and_0d_are_refused() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F8E4M3, &[-1]).unwrap();
    assert!(fd.sort(x, 0, false, false).is_err());
    let s = fd.define_tensor(DataType::F32, &[]).unwrap();
    let e = fd.topk(s, 1, 0, true, true).unwrap_err().to_string();
    assert!(e.contains("0-d"), "{e}");
}

#[test]
fn printers_show_sorts_and_the_reproducer_round_trips() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, 8])?;
        let y = fd.neg(x)?;
        let (v, i) = fd.topk(y, 3, 1, false, true)?;
        let g = fd.argsort(x, 0, true)?;
        Ok(vec![v, i, g])
    });
    let math = f.to_string();
    for line in [
        "topk(T1, k=3, axis=1, largest=false)",
        "sort(T0, axis=0, descending=true)",
    ] {
        assert!(math.contains(line), "{line} missing from\n{math}");
    }
    let src = f.to_reproducer("sorts");
    assert!(src.contains(".topk(3, 1, false)"), "{src}");
    assert!(src.contains(".sort(0, true)"), "{src}");
    let rebuilt = dsl_fusion(&src);
    assert!(rebuilt == f, "{rebuilt}\n{f}");
    let x: Vec<f32> = (0..24).map(|k| ((k * 7) % 5) as f32).collect();
    let inputs: Vec<EvalInput> = vec![t(&x, &[3, 8])];
    assert_eq!(
        evaluate(&f, &inputs).unwrap(),
        evaluate(&rebuilt, &inputs).unwrap()
    );
    let n = f
        .exprs()
        .filter(|(_, e)| matches!(e.op, Op::Sort { .. }))
        .count();
    assert_eq!(n, 2);
}

#[test]
fn a_k_that_is_not_a_literal_is_a_typed_error_that_explains() {
    let src = "fn f(x: Tensor<f32, [_, _]>, n: i64) -> (Tensor<f32, [_, _]>, Tensor<i64, [_, _]>) { x.topk(n) }";
    let errs = dsl::build_str(src).unwrap_err();
    let msg: String = errs.iter().map(|e| e.render(src)).collect();
    assert!(
        msg.contains("argument `k` of `topk` must be an integer literal")
            && msg.contains("k is a constant"),
        "{msg}"
    );
}
