//! Snapshot tests of the Rust reproducer over the corpus (the round trip of each is in
//! `print_roundtrip.rs`).
//!
//! Snapshots are inline; `UPDATE_EXPECT=1 cargo test -p nvfuser-core --test
//! print_reproducer` rewrites them.

mod print_corpus;

use expect_test::{expect, Expect};
use nvfuser_core::prelude::*;

fn check(name: &str, fusion: Result<Fusion>, expect: Expect) {
    expect.assert_eq(&fusion.unwrap().to_reproducer(name));
}

#[test]
fn layer_norm() {
    check(
        "layer_norm",
        print_corpus::layer_norm(),
        expect![[r#"
        fn layer_norm(
            t0: Tensor<bf16, [_, 4096]>,
            t1: Tensor<bf16, [4096]>,
            t2: Tensor<bf16, [4096]>,
            s3: f32,
        ) -> Tensor<bf16, [_, 4096]> {
            let t4 = t0 as f32;
            let t5 = t4.mean([1]);
            let t6 = t5.broadcast([false, true]);
            let t7 = t4 - t6;
            let t8 = t7 * t7;
            let t9 = t8.mean([1]);
            let t10 = t9.broadcast([false, true]);
            let t11 = t10 + s3;
            let t12 = t11.rsqrt();
            let t13 = t7 * t12;
            let t14 = t1 as f32;
            let t15 = t14.broadcast([true, false]);
            let t16 = t13 * t15;
            let t17 = t2 as f32;
            let t18 = t17.broadcast([true, false]);
            let t19 = t16 + t18;
            let t20 = t19 as bf16;
            t20
        }
    "#]],
    );
}

#[test]
fn rms_norm() {
    check(
        "rms_norm",
        print_corpus::rms_norm(),
        expect![[r#"
        fn rms_norm(
            t0: Tensor<bf16, [_, 4096]>,
            t1: Tensor<f32, [4096]>,
            s2: f32,
        ) -> Tensor<bf16, [_, 4096]> {
            let t3 = t0 as f32;
            let t4 = t3 * t3;
            let t5 = t4.mean([1]);
            let t6 = t5.broadcast([false, true]);
            let t7 = t6 + s2;
            let t8 = t7.rsqrt();
            let t9 = t3 * t8;
            let t10 = t1.broadcast([true, false]);
            let t11 = t9 * t10;
            let t12 = t11 as bf16;
            t12
        }
    "#]],
    );
}

#[test]
fn softmax() {
    check(
        "softmax",
        print_corpus::softmax(),
        expect![[r#"
        fn softmax(t0: Tensor<f16, [_, _]>) -> Tensor<f16, [_, _]> {
            let t1 = t0 as f32;
            let t2 = t1.max([1]);
            let t3 = t2.broadcast([false, true]);
            let t4 = t1 - t3;
            let t5 = t4.exp();
            let t6 = t5.sum([1]);
            let t7 = t6.broadcast([false, true]);
            let t8 = t5 / t7;
            let t9 = t8 as f16;
            t9
        }
    "#]],
    );
}

#[test]
fn gelu_tanh() {
    check(
        "gelu_tanh",
        print_corpus::gelu_tanh(),
        expect![[r#"
        fn gelu_tanh(t0: Tensor<f16, [_, _]>) -> Tensor<f16, [_, _]> {
            let t1 = t0 as f32;
            let t6 = t1 * t1;
            let t7 = t6 * t1;
            let t8 = t7 * 0.044715;
            let t9 = t1 + t8;
            let t10 = t9 * 0.7978846f32;
            let t11 = t10.tanh();
            let t12 = t11 + 1.0;
            let t13 = t1 * 0.5;
            let t14 = t13 * t12;
            let t15 = t14 as f16;
            t15
        }
    "#]],
    );
}

#[test]
fn silu_mul() {
    check(
        "silu_mul",
        print_corpus::silu_mul(),
        expect![[r#"
        fn silu_mul(t0: Tensor<bf16, [_, _]>, t1: Tensor<bf16, [_, _]>) -> Tensor<bf16, [_, _]> {
            let t2 = t0 as f32;
            let t3 = t1 as f32;
            let t4 = t2.silu();
            let t5 = t4 * t3;
            let t6 = t5 as bf16;
            t6
        }
    "#]],
    );
}

#[test]
fn reductions() {
    check(
        "reductions",
        print_corpus::reductions(),
        expect![[r#"
        fn reductions(
            t0: Tensor<bf16, [_, _, _]>,
            t1: Tensor<i32, [_, 8]>,
        ) -> (
            Tensor<bf16, [1, _, 1]>,
            Tensor<bf16, [_, _]>,
            Tensor<i64, [_]>,
            Tensor<f32, [_, _, 1]>,
            Tensor<f32, [_, _, 1]>,
            Tensor<f32, [_, _]>,
            Tensor<f32, [_, _]>,
            Tensor<i64, [_, _]>,
            Tensor<f32, [_, _]>,
            Tensor<bf16, [_, _]>,
            Tensor<bf16, [_, _]>,
        ) {
            let t2 = t0 as f32;
            let t3 = t2.sum([0, 2]);
            let t4 = t3 as bf16;
            let t5 = t4.broadcast([true, false, true]);
            let t6 = t0 as f32;
            let t7 = t6.mean([2]);
            let t8 = t7 as bf16;
            let t9 = t1 as i64;
            let t10 = t9.sum([1]);
            let t11 = t0 as f32;
            let (t12, t13) = t11.var_mean([2], 0);
            let t14 = t12.broadcast([false, false, true]);
            let t15 = t13.broadcast([false, false, true]);
            let (t16, t17, t18) = t11.welford([1]);
            let t19 = t11.prod([0]);
            let t20 = t0.min([1]);
            let t21 = t0 as f32;
            let t22 = t21.var([1], 1);
            let t23 = t22 as bf16;
            (t5, t8, t10, t14, t15, t16, t17, t18, t19, t20, t23)
        }
    "#]],
    );
}

#[test]
fn broadcasts() {
    check(
        "broadcasts",
        print_corpus::broadcasts(),
        expect![[r#"
        fn broadcasts(
            t0: Tensor<f32, [_, 1, 64]>,
            t1: Tensor<f32, [64]>,
            t2: Tensor<f32, [_]>,
        ) -> (Tensor<f32, [_, 8, 64]>, Tensor<f32, [_, 64, 3]>) {
            let t3 = t1.broadcast([true, true, false]);
            let t4 = t0 + t3;
            let s5 = t0.size(0);
            let t6 = t2.broadcast([false, true, true]);
            let t7 = t6.expand([s5, 8, 64]);
            let t8 = t0.squeeze([1]);
            let t9 = t8.broadcast([false, false, true]);
            let t10 = t9.expand([-1, -1, 3]);
            let t11 = t4 * t7;
            (t11, t10)
        }
    "#]],
    );
}

#[test]
fn casts() {
    check(
        "casts",
        print_corpus::casts(),
        expect![[r#"
        fn casts(t0: Tensor<i32, [_]>, s1: f64) -> (Tensor<bool, [_]>, Tensor<i64, [_]>) {
            let t2 = t0 as f16;
            let t3 = t2 as bf16;
            let t4 = t3 as f64;
            let s5 = s1 as f32;
            let t6 = t4 * s5;
            let t7 = t6 as bool;
            let t8 = t7 as i64;
            (t7, t8)
        }
    "#]],
    );
}

#[test]
fn slice_pad_cat() {
    check(
        "slice_pad_cat",
        print_corpus::slice_pad_cat(),
        expect![[r#"
        fn slice_pad_cat(t0: Tensor<f32, [_, 16]>, s1: i64) -> (Tensor<f32, [_, 22]>, Tensor<f32, [_, 8]>) {
            let t2 = t0.slice([.., 0..8]);
            let t3 = t0.slice([.., 8..]);
            let s4 = 0.0;
            let t5 = t2.pad([(0, 0), (1, 2)], s4);
            let t6 = t3.pad([(0, 0), (2, 1)], s4);
            let t7 = cat([t5, t6], 1);
            let t8 = t7.slice([(s1, -1, 2), (0, i64::MAX, 3)]);
            (t7, t8)
        }
    "#]],
    );
}

#[test]
fn gather() {
    check(
        "gather",
        print_corpus::gather(),
        expect![[r#"
        fn gather(
            t0: Tensor<f32, [_, 8]>,
            t1: Tensor<i64, [_, 4]>,
            t2: Tensor<i32, [_]>,
        ) -> (Tensor<f32, [_, 4]>, Tensor<f32, [_]>) {
            let t3 = t0.gather(1, t1);
            let t4 = t0.take_along_axis(t1, 1);
            let t5 = t0.index_select(0, t2);
            let t6 = t5.select(1, -1);
            let t7 = t3 + t4;
            (t7, t6)
        }
    "#]],
    );
}

#[test]
fn dropout() {
    check(
        "dropout",
        print_corpus::dropout(),
        expect![[r#"
        fn dropout(
            t0: Tensor<f32, [_, _]>,
            s1: f32,
            s2: i64,
            s3: i64,
        ) -> (Tensor<f32, [_, _]>, Tensor<bool, [_, _]>) {
            let s4 = t0.size(0);
            let s5 = t0.size(1);
            let t8 = uniform([s4, s5], 0.0, 1.0, s2, s3, f32);
            let t9 = t8 >= s1;
            let s11 = 1.0 - s1;
            let s12 = s11.reciprocal();
            let t13 = t0 * s12;
            let t15 = where_(t9, t13, 0.0);
            (t15, t9)
        }
    "#]],
    );
}

#[test]
fn layouts_and_inplace() {
    check(
        "layouts_and_inplace",
        print_corpus::layouts_and_inplace(),
        expect![[r#"
            fn layouts_and_inplace(
                #[layout(contiguity = [false, true], stride_order = [0, 1])] t0: Tensor<f32, [_, _]>,
                #[layout(expanded = [0])] t1: Tensor<f32, [_, _]>,
                #[layout(static_sizes = true)] t2: Tensor<f32, [6, 1]>,
                t3: Tensor<f32, [_, _]>,
                s4: i64,
            ) -> (
                Tensor<f32, [_, _]>,
                Tensor<f32, [_, _]>,
                Tensor<f32, [_, 6]>,
                Tensor<i32, [_, 4]>,
                Tensor<i64, [_]>,
                Tensor<f32, [_]>,
            ) {
                let t5 = t0 + t3;
                let t6 = t0.permute([1, 0]);
                let t7 = t2.squeeze([1]);
                let t8 = t7.broadcast([true, false]);
                let t9 = t1 + t8;
                let t10 = t9.reshape([-1]);
                let t12 = full([s4, 4], 7, i32);
                let t15 = iota(s4, 0, 2, i64);
                let t16 = t10.segment_set();
                let t17 = t16.set();
                (inplace(t5, t3), t6, t9, t12, t15, t17)
            }
        "#]],
    );
}

#[test]
fn scalars_and_operators() {
    check(
        "scalars_and_operators",
        print_corpus::scalars_and_operators(),
        expect![[r#"
        fn scalars_and_operators(t0: Tensor<i64, [_]>, s1: i64, t2: Tensor<f32, [_]>) -> Tensor<f32, [_]> {
            let s3 = 2;
            let s4 = s1 * s3;
            let s5 = s4 + s3;
            let t6 = t0 + s5;
            let t7 = t6 << s3;
            let t8 = t7 >> s1;
            let t9 = t8 ^ t0;
            let t10 = t9 & t0;
            let t11 = t10 | t0;
            let t12 = t11.fmod(t0);
            let t13 = t12.remainder(t0);
            let t14 = !t13;
            let t15 = t14 < t0;
            let t16 = t13 != t0;
            let t17 = t15 && t16;
            let t18 = !t17;
            let t20 = t0 <= -3i32;
            let t21 = t18 || t20;
            let s22 = 0.1f32;
            let t23 = t2 * s22;
            let t24 = -t23;
            let t26 = t24.maximum(f64::NAN);
            let t27 = t26.pow(s22);
            let t29 = lerp(t27, t2, 0.25bf16);
            let t32 = clamp(t29, -1.5, f64::INFINITY);
            let t34 = t21 && true;
            let t35 = where_(t34, t32, t2);
            let s36 = -s3;
            let t37 = t35 + s36;
            t37
        }
    "#]],
    );
}

#[test]
fn scans() {
    check(
        "scans",
        print_corpus::scans(),
        expect![[r#"
            fn scans(
                t0: Tensor<f16, [_, 8]>,
                t1: Tensor<bool, [_]>,
                s2: i64,
            ) -> (Tensor<f16, [_, 8]>, Tensor<i64, [_]>, Tensor<f16, [_]>, Tensor<f16, [_, _, 8]>) {
                let t3 = t0 as f32;
                let t4 = t3.cumsum(1);
                let t5 = t4 as f16;
                let t6 = t1 as i64;
                let t7 = t6.cumprod(0);
                let t8 = t0.min([1]);
                let t9 = t8.cummax(0);
                let t10 = t5.broadcast([true, false, false]);
                let t11 = t10.expand([s2, -1, -1]);
                let t12 = t11.cummin(0);
                (t5, t7, t9, t12)
            }
        "#]],
    );
}
