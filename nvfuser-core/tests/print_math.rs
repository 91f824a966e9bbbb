//! Snapshot tests of the math printer (`Display for Fusion`) over the corpus.
//!
//! Snapshots are inline; `UPDATE_EXPECT=1 cargo test -p nvfuser-core --test print_math`
//! rewrites them. A refactor changes no snapshot.

mod print_corpus;

use expect_test::{expect, Expect};
use nvfuser_core::prelude::*;

fn check(fusion: Result<Fusion>, expect: Expect) {
    expect.assert_eq(&fusion.unwrap().to_string());
}

#[test]
fn layer_norm() {
    check(
        print_corpus::layer_norm(),
        expect![[r#"
        inputs:
          T0: bf16[T0.size(0), 4096] (contiguity [true, true], order [1, 0])
          T1: bf16[4096] (contiguity [true], order [0])
          T2: bf16[4096] (contiguity [true], order [0])
          S3: f32
        exprs:
          T4 = cast(T0) : f32[T0.size(0), 4096]
          T5 = mean(T4, axes=[1]) : f32[T0.size(0), r4096]
          T6 = broadcast(T5, mask=[false, true]) : f32[T0.size(0), b1]
          T7 = T4 - T6 : f32[T0.size(0), 4096]
          T8 = T7 * T7 : f32[T0.size(0), 4096]
          T9 = mean(T8, axes=[1]) : f32[T0.size(0), r4096]
          T10 = broadcast(T9, mask=[false, true]) : f32[T0.size(0), b1]
          T11 = T10 + S3 : f32[T0.size(0), b1]
          T12 = rsqrt(T11) : f32[T0.size(0), b1]
          T13 = T7 * T12 : f32[T0.size(0), 4096]
          T14 = cast(T1) : f32[4096]
          T15 = broadcast(T14, mask=[true, false]) : f32[b1, 4096]
          T16 = T13 * T15 : f32[T0.size(0), 4096]
          T17 = cast(T2) : f32[4096]
          T18 = broadcast(T17, mask=[true, false]) : f32[b1, 4096]
          T19 = T16 + T18 : f32[T0.size(0), 4096]
          T20 = cast(T19) : bf16[T0.size(0), 4096]
        outputs:
          T20
    "#]],
    );
}

#[test]
fn rms_norm() {
    check(
        print_corpus::rms_norm(),
        expect![[r#"
        inputs:
          T0: bf16[T0.size(0), 4096] (contiguity [true, true], order [1, 0])
          T1: f32[4096] (contiguity [true], order [0])
          S2: f32
        exprs:
          T3 = cast(T0) : f32[T0.size(0), 4096]
          T4 = T3 * T3 : f32[T0.size(0), 4096]
          T5 = mean(T4, axes=[1]) : f32[T0.size(0), r4096]
          T6 = broadcast(T5, mask=[false, true]) : f32[T0.size(0), b1]
          T7 = T6 + S2 : f32[T0.size(0), b1]
          T8 = rsqrt(T7) : f32[T0.size(0), b1]
          T9 = T3 * T8 : f32[T0.size(0), 4096]
          T10 = broadcast(T1, mask=[true, false]) : f32[b1, 4096]
          T11 = T9 * T10 : f32[T0.size(0), 4096]
          T12 = cast(T11) : bf16[T0.size(0), 4096]
        outputs:
          T12
    "#]],
    );
}

#[test]
fn softmax() {
    check(
        print_corpus::softmax(),
        expect![[r#"
        inputs:
          T0: f16[T0.size(0), T0.size(1)] (contiguity [true, true], order [1, 0])
        exprs:
          T1 = cast(T0) : f32[T0.size(0), T0.size(1)]
          T2 = max(T1, axes=[1]) : f32[T0.size(0), rT0.size(1)]
          T3 = broadcast(T2, mask=[false, true]) : f32[T0.size(0), b1]
          T4 = T1 - T3 : f32[T0.size(0), T0.size(1)]
          T5 = exp(T4) : f32[T0.size(0), T0.size(1)]
          T6 = sum(T5, axes=[1]) : f32[T0.size(0), rT0.size(1)]
          T7 = broadcast(T6, mask=[false, true]) : f32[T0.size(0), b1]
          T8 = T5 / T7 : f32[T0.size(0), T0.size(1)]
          T9 = cast(T8) : f16[T0.size(0), T0.size(1)]
        outputs:
          T9
    "#]],
    );
}

#[test]
fn gelu_tanh() {
    check(
        print_corpus::gelu_tanh(),
        expect![[r#"
        inputs:
          T0: f16[T0.size(0), T0.size(1)] (contiguity [true, true], order [1, 0])
        exprs:
          T1 = cast(T0) : f32[T0.size(0), T0.size(1)]
          T6 = T1 * T1 : f32[T0.size(0), T0.size(1)]
          T7 = T6 * T1 : f32[T0.size(0), T0.size(1)]
          T8 = T7 * 0.044715 : f32[T0.size(0), T0.size(1)]
          T9 = T1 + T8 : f32[T0.size(0), T0.size(1)]
          T10 = T9 * 0.7978846f32 : f32[T0.size(0), T0.size(1)]
          T11 = tanh(T10) : f32[T0.size(0), T0.size(1)]
          T12 = T11 + 1.0 : f32[T0.size(0), T0.size(1)]
          T13 = T1 * 0.5 : f32[T0.size(0), T0.size(1)]
          T14 = T13 * T12 : f32[T0.size(0), T0.size(1)]
          T15 = cast(T14) : f16[T0.size(0), T0.size(1)]
        outputs:
          T15
    "#]],
    );
}

#[test]
fn silu_mul() {
    check(
        print_corpus::silu_mul(),
        expect![[r#"
        inputs:
          T0: bf16[T0.size(0), T0.size(1)] (contiguity [true, true], order [1, 0])
          T1: bf16[T1.size(0), T1.size(1)] (contiguity [true, true], order [1, 0])
        exprs:
          T2 = cast(T0) : f32[T0.size(0), T0.size(1)]
          T3 = cast(T1) : f32[T1.size(0), T1.size(1)]
          T4 = silu(T2) : f32[T0.size(0), T0.size(1)]
          T5 = T4 * T3 : f32[T0.size(0), T0.size(1)]
          T6 = cast(T5) : bf16[T0.size(0), T0.size(1)]
        outputs:
          T6
    "#]],
    );
}

#[test]
fn reductions() {
    check(
        print_corpus::reductions(),
        expect![[r#"
        inputs:
          T0: bf16[T0.size(0), T0.size(1), T0.size(2)] (contiguity [true, true, true], order [2, 1, 0])
          T1: i32[T1.size(0), 8] (contiguity [true, true], order [1, 0])
        exprs:
          T2 = cast(T0) : f32[T0.size(0), T0.size(1), T0.size(2)]
          T3 = sum(T2, axes=[0, 2]) : f32[rT0.size(0), T0.size(1), rT0.size(2)]
          T4 = cast(T3) : bf16[T0.size(1)]
          T5 = broadcast(T4, mask=[true, false, true]) : bf16[b1, T0.size(1), b1]
          T6 = cast(T0) : f32[T0.size(0), T0.size(1), T0.size(2)]
          T7 = mean(T6, axes=[2]) : f32[T0.size(0), T0.size(1), rT0.size(2)]
          T8 = cast(T7) : bf16[T0.size(0), T0.size(1)]
          T9 = cast(T1) : i64[T1.size(0), 8]
          T10 = sum(T9, axes=[1]) : i64[T1.size(0), r8]
          T11 = cast(T0) : f32[T0.size(0), T0.size(1), T0.size(2)]
          (T12, T13) = var_mean(T11, axes=[2], correction=0) : f32[T0.size(0), T0.size(1), rT0.size(2)], f32[T0.size(0), T0.size(1), rT0.size(2)]
          T14 = broadcast(T12, mask=[false, false, true]) : f32[T0.size(0), T0.size(1), b1]
          T15 = broadcast(T13, mask=[false, false, true]) : f32[T0.size(0), T0.size(1), b1]
          (T16, T17, T18) = welford(T11, axes=[1]) : f32[T0.size(0), rT0.size(1), T0.size(2)], f32[T0.size(0), rT0.size(1), T0.size(2)], i64[T0.size(0), rT0.size(1), T0.size(2)]
          T19 = prod(T11, axes=[0]) : f32[rT0.size(0), T0.size(1), T0.size(2)]
          T20 = min(T0, axes=[1]) : bf16[T0.size(0), rT0.size(1), T0.size(2)]
          T21 = cast(T0) : f32[T0.size(0), T0.size(1), T0.size(2)]
          T22 = var(T21, axes=[1], correction=1) : f32[T0.size(0), rT0.size(1), T0.size(2)]
          T23 = cast(T22) : bf16[T0.size(0), T0.size(2)]
        outputs:
          T5
          T8
          T10
          T14
          T15
          T16
          T17
          T18
          T19
          T20
          T23
    "#]],
    );
}

#[test]
fn broadcasts() {
    check(
        print_corpus::broadcasts(),
        expect![[r#"
        inputs:
          T0: f32[T0.size(0), b1, 64] (contiguity [true, _, true], order [2, 1, 0])
          T1: f32[64] (contiguity [true], order [0])
          T2: f32[T2.size(0)] (contiguity [true], order [0])
        exprs:
          T3 = broadcast(T1, mask=[true, true, false]) : f32[b1, b1, 64]
          T4 = T0 + T3 : f32[T0.size(0), b1, 64]
          S5 = size(T0, axis=0) : i64
          T6 = broadcast(T2, mask=[false, true, true]) : f32[T2.size(0), b1, b1]
          T7 = expand(T6, sizes=[S5, 8, 64]) : f32[T2.size(0), x8, x64]
          T8 = squeeze(T0, axes=[1]) : f32[T0.size(0), 64]
          T9 = broadcast(T8, mask=[false, false, true]) : f32[T0.size(0), 64, b1]
          T10 = expand(T9, sizes=[-1, -1, 3]) : f32[T0.size(0), 64, x3]
          T11 = T4 * T7 : f32[T0.size(0), x8, 64]
        outputs:
          T11
          T10
    "#]],
    );
}

#[test]
fn casts() {
    check(
        print_corpus::casts(),
        expect![[r#"
        inputs:
          T0: i32[T0.size(0)] (contiguity [true], order [0])
          S1: f64
        exprs:
          T2 = cast(T0) : f16[T0.size(0)]
          T3 = cast(T2) : bf16[T0.size(0)]
          T4 = cast(T3) : f64[T0.size(0)]
          S5 = cast(S1) : f32
          T6 = T4 * S5 : f64[T0.size(0)]
          T7 = cast(T6) : bool[T0.size(0)]
          T8 = cast(T7) : i64[T0.size(0)]
        outputs:
          T7
          T8
    "#]],
    );
}

#[test]
fn slice_pad_cat() {
    check(
        print_corpus::slice_pad_cat(),
        expect![[r#"
            inputs:
              T0: f32[T0.size(0), 16] (contiguity [true, true], order [1, 0])
              S1: i64
            exprs:
              T2 = slice(T0, ranges=[0:end, 0:8]) : f32[max(T0.size(0), 0), 8]
              T3 = slice(T0, ranges=[0:end, 8:end]) : f32[max(T0.size(0), 0), 8]
              T5 = pad(T2, 0.0, widths=[(0, 0), (1, 2)]) : f32[max(T0.size(0), 0), 11]
              T6 = pad(T3, 0.0, widths=[(0, 0), (2, 1)]) : f32[max(T0.size(0), 0), 11]
              T7 = cat(T5, T6, axis=1) : f32[max(T0.size(0), 0), 22]
              T8 = slice(T7, ranges=[S1:-1:2, 0:end:3]) : f32[ceildiv(max((max((max(T0.size(0), 0) + -1), 0) - min(S1, max(T0.size(0), 0))), 0), 2), 8]
            outputs:
              T7
              T8
        "#]],
    );
}

#[test]
fn gather() {
    check(
        print_corpus::gather(),
        expect![[r#"
        inputs:
          T0: f32[T0.size(0), 8] (contiguity [true, true], order [1, 0])
          T1: i64[T1.size(0), 4] (contiguity [true, true], order [1, 0])
          T2: i32[T2.size(0)] (contiguity [true], order [0])
        exprs:
          T3 = gather(T0, T1, axis=1) : f32[T1.size(0), 4]
          T4 = take_along_axis(T0, T1, axis=1) : f32[T0.size(0), 4]
          T5 = index_select(T0, T2, axis=0) : f32[T2.size(0), 8]
          T6 = select(T5, axis=1, index=-1) : f32[T2.size(0)]
          T7 = T3 + T4 : f32[T1.size(0), 4]
        outputs:
          T7
          T6
    "#]],
    );
}

#[test]
fn dropout() {
    check(
        print_corpus::dropout(),
        expect![[r#"
            inputs:
              T0: f32[T0.size(0), T0.size(1)] (contiguity [true, true], order [1, 0])
              S1: f32
              S2: i64
              S3: i64
            exprs:
              S4 = size(T0, axis=0) : i64
              S5 = size(T0, axis=1) : i64
              T8 = rand(0.0, 1.0, S2, S3, dist=uniform, sizes=[S4, S5]) : f32[T0.size(0), T0.size(1)]
              T9 = T8 >= S1 : bool[T0.size(0), T0.size(1)]
              S11 = 1.0 - S1 : f64
              S12 = reciprocal(S11) : f64
              T13 = T0 * S12 : f32[T0.size(0), T0.size(1)]
              T15 = where_(T9, T13, 0.0) : f32[T0.size(0), T0.size(1)]
            outputs:
              T15
              T9
        "#]],
    );
}

#[test]
fn layouts_and_inplace() {
    check(
        print_corpus::layouts_and_inplace(),
        expect![[r#"
            inputs:
              T0: f32[T0.size(0), T0.size(1)] (contiguity [false, true], order [0, 1])
              T1: f32[xT1.size(0), T1.size(1)] (contiguity [_, true], order [1, 0])
              T2: f32[6, 1] (contiguity [true, true], order [1, 0])
              T3: f32[T3.size(0), T3.size(1)] (contiguity [true, true], order [1, 0])
              S4: i64
            exprs:
              T5 = T0 + T3 : f32[T0.size(0), T0.size(1)]
              T6 = permute(T0, perm=[1, 0]) : f32[T0.size(1), T0.size(0)]
              T7 = squeeze(T2, axes=[1]) : f32[6]
              T8 = broadcast(T7, mask=[true, false]) : f32[b1, 6]
              T9 = T1 + T8 : f32[xT1.size(0), 6]
              T10 = reshape(T9, sizes=[-1]) : f32[(T1.size(0) * 6)]
              T12 = full(7, sizes=[S4, 4]) : i32[S4, 4]
              T15 = iota(0, 2, length=S4) : i64[S4]
              T16 = segment_set(T10) : f32[(T1.size(0) * 6)]
              T17 = set(T16) : f32[(T1.size(0) * 6)]
            outputs:
              T5 (in place of T3)
              T6
              T9
              T12
              T15
              T17
        "#]],
    );
}

#[test]
fn scalars_and_operators() {
    check(
        print_corpus::scalars_and_operators(),
        expect![[r#"
        inputs:
          T0: i64[T0.size(0)] (contiguity [true], order [0])
          S1: i64
          T2: f32[T2.size(0)] (contiguity [true], order [0])
        exprs:
          S4 = S1 * 2 : i64
          S5 = S4 + 2 : i64
          T6 = T0 + S5 : i64[T0.size(0)]
          T7 = T6 << 2 : i64[T0.size(0)]
          T8 = T7 >> S1 : i64[T0.size(0)]
          T9 = T8 ^ T0 : i64[T0.size(0)]
          T10 = T9 & T0 : i64[T0.size(0)]
          T11 = T10 | T0 : i64[T0.size(0)]
          T12 = fmod(T11, T0) : i64[T0.size(0)]
          T13 = remainder(T12, T0) : i64[T0.size(0)]
          T14 = bitwise_not(T13) : i64[T0.size(0)]
          T15 = T14 < T0 : bool[T0.size(0)]
          T16 = T13 != T0 : bool[T0.size(0)]
          T17 = T15 && T16 : bool[T0.size(0)]
          T18 = logical_not(T17) : bool[T0.size(0)]
          T20 = T0 <= -3i32 : bool[T0.size(0)]
          T21 = T18 || T20 : bool[T0.size(0)]
          T23 = T2 * 0.1f32 : f32[T2.size(0)]
          T24 = neg(T23) : f32[T2.size(0)]
          T26 = maximum(T24, f64::NAN) : f32[T2.size(0)]
          T27 = pow(T26, 0.1f32) : f32[T2.size(0)]
          T29 = lerp(T27, T2, 0.25bf16) : f32[T2.size(0)]
          T32 = clamp(T29, -1.5, f64::INFINITY) : f32[T2.size(0)]
          T34 = T21 && true : bool[T0.size(0)]
          T35 = where_(T34, T32, T2) : f32[T0.size(0)]
          S36 = neg(2) : i64
          T37 = T35 + S36 : f32[T0.size(0)]
        outputs:
          T37
    "#]],
    );
}

#[test]
fn malformed_fusions_print_without_panicking() {
    let fusion = print_corpus::softmax().unwrap();
    let mut json = serde_json::to_value(&fusion).unwrap();
    json["exprs"][3]["inputs"][1] = serde_json::json!(999);
    json["outputs"][0]["val"] = serde_json::json!(1000);
    let bad: Fusion = serde_json::from_value(json).unwrap();
    let text = bad.to_string();
    assert!(text.contains("T4 = T1 - <unknown v999>"), "{text}");
    assert!(text.contains("outputs:\n  <unknown v1000>"), "{text}");
    expect![[r#"
        // no reproducer: the fusion is not well formed (invalid IR: expression 3 (sub) reads unknown value v999)
    "#]].assert_eq(&bad.to_reproducer("bad"));
}

#[test]
fn options_hide_types_and_layouts() {
    use nvfuser_core::print::MathOptions;
    let f = print_corpus::silu_mul().unwrap();
    let text = f
        .math(MathOptions {
            types: false,
            layouts: false,
        })
        .to_string();
    expect![[r#"
        inputs:
          T0: bf16[T0.size(0), T0.size(1)]
          T1: bf16[T1.size(0), T1.size(1)]
        exprs:
          T2 = cast(T0)
          T3 = cast(T1)
          T4 = silu(T2)
          T5 = T4 * T3
          T6 = cast(T5)
        outputs:
          T6
    "#]]
    .assert_eq(&text);
}

#[test]
fn scans() {
    check(
        print_corpus::scans(),
        expect![[r#"
            inputs:
              T0: f16[T0.size(0), 8] (contiguity [true, true], order [1, 0])
              T1: bool[T1.size(0)] (contiguity [true], order [0])
              S2: i64
            exprs:
              T3 = cast(T0) : f32[T0.size(0), 8]
              T4 = cumsum(T3, axis=1) : f32[T0.size(0), 8]
              T5 = cast(T4) : f16[T0.size(0), 8]
              T6 = cast(T1) : i64[T1.size(0)]
              T7 = cumprod(T6, axis=0) : i64[T1.size(0)]
              T8 = min(T0, axes=[1]) : f16[T0.size(0), r8]
              T9 = cummax(T8, axis=0) : f16[T0.size(0)]
              T10 = broadcast(T5, mask=[true, false, false]) : f16[b1, T0.size(0), 8]
              T11 = expand(T10, sizes=[S2, -1, -1]) : f16[xS2, T0.size(0), 8]
              T12 = cummin(T11, axis=0) : f16[S2, T0.size(0), 8]
            outputs:
              T5
              T7
              T9
              T12
        "#]],
    );
}
