//! `scatter` and `scatter_add` on the CPU reference: hand-checked values (dim 0 and the
//! last dim, ranks 1 to 3, duplicate indices, the scalar form, integer and float adds in
//! row-major order), the typed errors (bad index values, sizes, ranks, dtypes), and the
//! language, printers and reproducer.

mod common;

use common::{bools, err, f32s, f64s, fusion, i32s, run, t};
use nvfuser_core::prelude::*;

fn scatter_2d(add: bool) -> Fusion {
    fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1])?;
        let s = fd.define_tensor(DataType::F32, &[-1, -1])?;
        Ok(vec![if add {
            fd.scatter_add(x, 0, i, s)?
        } else {
            fd.scatter(x, 0, i, s)?
        }])
    })
}

fn inputs_2d(index: &[i64]) -> Vec<nvfuser_core::eval::EvalInput> {
    let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    vec![
        t(&x, &[3, 4]),
        t(index, &[2, 3]),
        t(
            &[10.0f32, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0],
            &[2, 4],
        ),
    ]
}

#[test]
fn scatter_dim0_rank2_last_duplicate_wins() {
    // index [[2, 0, 1], [0, 0, 2]] along dim 0, src rows [10, 20, 30, 40] and
    // [50, 60, 70, 80]: out[2][0] = 10, out[0][1] = 20 then 60 (the later index element
    // wins), out[1][2] = 30, out[0][0] = 50, out[2][2] = 70; the rest is x.
    let out = run(&scatter_2d(false), inputs_2d(&[2, 0, 1, 0, 0, 2]));
    assert_eq!(out[0].shape(), [3, 4]);
    assert_eq!(
        f32s(&out[0]),
        [50.0, 60.0, 3.0, 4.0, 5.0, 6.0, 30.0, 8.0, 10.0, 10.0, 70.0, 12.0]
    );
}

#[test]
fn scatter_add_dim0_rank2_adds_every_duplicate() {
    // The same targets: x[0][1] = 2 gets 20 and 60, x[2][0] = 9 gets 10, ...
    let out = run(&scatter_2d(true), inputs_2d(&[2, 0, 1, 0, 0, 2]));
    assert_eq!(
        f32s(&out[0]),
        [51.0, 82.0, 3.0, 4.0, 5.0, 6.0, 37.0, 8.0, 19.0, 10.0, 81.0, 12.0]
    );
}

#[test]
fn scatter_and_scatter_add_rank1_i32() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1])?;
        let i = fd.define_tensor(DataType::I64, &[-1])?;
        let s = fd.define_tensor(DataType::I32, &[-1])?;
        Ok(vec![fd.scatter(x, -1, i, s)?, fd.scatter_add(x, 0, i, s)?])
    });
    let out = run(
        &f,
        vec![
            t(&[0i32, 0, 0, 0, 100], &[5]),
            t(&[1i64, 3, 1, 4, 1], &[5]),
            t(&[1i32, 2, 3, 4, 5], &[5]),
        ],
    );
    assert_eq!(i32s(&out[0]), [0, 5, 0, 2, 4]);
    assert_eq!(i32s(&out[1]), [0, 9, 0, 2, 104]);
}

#[test]
fn integer_adds_wrap_in_the_dtype() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::I32, &[-1])?;
        let i = fd.define_tensor(DataType::I32, &[-1])?;
        let s = fd.define_tensor(DataType::I32, &[-1])?;
        Ok(vec![fd.scatter_add(x, 0, i, s)?])
    });
    let out = run(
        &f,
        vec![
            t(&[i32::MAX], &[1]),
            t(&[0i32, 0], &[2]),
            t(&[1i32, 1], &[2]),
        ],
    );
    assert_eq!(i32s(&out[0]), [i32::MIN + 1]);
}

#[test]
fn scatter_rank3_last_dim_with_an_index_smaller_than_the_input() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F64, &[-1, -1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1, -1])?;
        let s = fd.define_tensor(DataType::F64, &[-1, -1, -1])?;
        Ok(vec![fd.scatter(x, 2, i, s)?, fd.scatter_add(x, -1, i, s)?])
    });
    // index [2, 1, 2] = [[[2, 2]], [[0, 1]]]: (0,0,0) and (0,0,1) both target (0,0,2).
    let out = run(
        &f,
        vec![
            t(&[0.0f64; 12], &[2, 2, 3]),
            t(&[2i64, 2, 0, 1], &[2, 1, 2]),
            t(&[1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], &[2, 2, 2]),
        ],
    );
    assert_eq!(
        f64s(&out[0]),
        [0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0]
    );
    assert_eq!(
        f64s(&out[1]),
        [0.0, 0.0, 3.0, 0.0, 0.0, 0.0, 5.0, 6.0, 0.0, 0.0, 0.0, 0.0]
    );
}

#[test]
fn scatter_of_a_scalar_value_casts_it_to_the_dtype() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let i = fd.define_tensor(DataType::I64, &[-1, -1])?;
        let v = fd.constant(7.5);
        Ok(vec![fd.scatter(x, 1, i, v)?])
    });
    let out = run(&f, vec![t(&[1.0f32; 6], &[2, 3]), t(&[0i64, 2], &[2, 1])]);
    assert_eq!(f32s(&out[0]), [7.5, 1.0, 1.0, 1.0, 1.0, 7.5]);
}

#[test]
fn scatter_of_bools() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::Bool, &[-1])?;
        let i = fd.define_tensor(DataType::I64, &[-1])?;
        let s = fd.define_tensor(DataType::Bool, &[-1])?;
        Ok(vec![fd.scatter(x, 0, i, s)?])
    });
    let out = run(
        &f,
        vec![
            t(&[false, true, false], &[3]),
            t(&[2i64, 1, 2], &[3]),
            t(&[true, false, false], &[3]),
        ],
    );
    assert_eq!(bools(&out[0]), [false, false, false]);
}

#[test]
fn float_adds_are_made_in_row_major_order_of_the_index() {
    // 0 + 1e8 = 1e8; + 1 rounds back to 1e8 in f32; - 1e8 = 0. Any other order of the
    // three adds gives 1.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let i = fd.define_tensor(DataType::I64, &[-1])?;
        let s = fd.define_tensor(DataType::F32, &[-1])?;
        Ok(vec![fd.scatter_add(x, 0, i, s)?])
    });
    let out = run(
        &f,
        vec![
            t(&[0.0f32], &[1]),
            t(&[0i64, 0, 0], &[3]),
            t(&[1e8f32, 1.0, -1e8], &[3]),
        ],
    );
    assert_eq!(f32s(&out[0]), [0.0]);
}

#[test]
fn bad_index_values_are_typed_errors() {
    for bad in [3i64, -1] {
        let msg = err(&scatter_2d(false), inputs_2d(&[2, 0, 1, 0, bad, 2]));
        assert!(
            msg.contains("scatter")
                && msg.contains(&format!("index {bad} at position [1, 1]"))
                && msg.contains("size 3"),
            "{msg}"
        );
        let msg = err(&scatter_2d(true), inputs_2d(&[bad, 0, 1, 0, 0, 2]));
        assert!(
            msg.contains("scatter_add") && msg.contains("[0, 0]"),
            "{msg}"
        );
    }
}

#[test]
fn index_larger_than_the_source_or_the_input_is_a_typed_error() {
    // Index [2, 3] against a source of [2, 2].
    let x: Vec<f32> = (1..=12).map(|v| v as f32).collect();
    let msg = err(
        &scatter_2d(false),
        vec![
            t(&x, &[3, 4]),
            t(&[0i64; 6], &[2, 3]),
            t(&[0.0f32; 4], &[2, 2]),
        ],
    );
    assert!(
        msg.contains("scatter") && msg.contains('2') && msg.contains('3'),
        "{msg}"
    );
    // Index [2, 5] against an input of [3, 4] outside dim 0.
    let msg = err(
        &scatter_2d(false),
        vec![
            t(&x, &[3, 4]),
            t(&[0i64; 10], &[2, 5]),
            t(&[0.0f32; 10], &[2, 5]),
        ],
    );
    assert!(
        msg.contains("scatter") && msg.contains('4') && msg.contains('5'),
        "{msg}"
    );
}

#[test]
fn builder_refuses_wrong_ranks_dtypes_and_sizes() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[3, 4]).unwrap();
    let i1 = fd.define_tensor(DataType::I64, &[3]).unwrap();
    let i2 = fd.define_tensor(DataType::I64, &[2, 5]).unwrap();
    let i3 = fd.define_tensor(DataType::I64, &[2, 2]).unwrap();
    let fi = fd.define_tensor(DataType::F32, &[2, 2]).unwrap();
    let s = fd.define_tensor(DataType::F32, &[2, 4]).unwrap();
    let s16 = fd.define_tensor(DataType::F16, &[2, 4]).unwrap();
    let small = fd.define_tensor(DataType::F32, &[1, 4]).unwrap();
    let b = fd.define_tensor(DataType::Bool, &[3, 4]).unwrap();
    let bs = fd.define_tensor(DataType::Bool, &[2, 4]).unwrap();
    let v = fd.constant(1.0);
    let e = fd.scatter(x, 0, i1, s).unwrap_err();
    assert!(matches!(e, Error::Rank { .. }), "{e}");
    let e = fd.scatter(x, 0, i2, s).unwrap_err().to_string();
    assert!(
        e.contains("index size <= 4 at dim 1") && e.contains('5'),
        "{e}"
    );
    let e = fd.scatter(x, 0, i3, small).unwrap_err().to_string();
    assert!(
        e.contains("index size <= 1 at dim 0 (the source's size)"),
        "{e}"
    );
    let e = fd.scatter(x, 0, fi, s).unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e}");
    let e = fd.scatter(x, 0, i3, s16).unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e}");
    let e = fd.scatter_add(x, 0, i3, v).unwrap_err();
    assert!(matches!(e, Error::Kind { .. }), "{e}");
    let e = fd.scatter_add(b, 0, i3, bs).unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e}");
    let e = fd.scatter(x, 2, i3, s).unwrap_err();
    assert!(matches!(e, Error::AxisOutOfRange { .. }), "{e}");
    assert!(fd.scatter(x, -2, i3, s).is_ok());
}

const SRC: &str = "fn f(x: Tensor<f32, [N, H]>, i: Tensor<i64, [N, K]>, s: Tensor<f32, [N, K]>) -> (Tensor<f32, [N, H]>, Tensor<f32, [N, H]>) {
    let a = x.scatter_add(1, i, s * 2.0);
    let b = scatter(x, 1, i, 0.5);
    (a, b)
}";

#[test]
fn language_printers_and_reproducer() {
    let f = nvfuser_core::dsl::build_str(SRC).unwrap().remove(0).0;
    let math = f.to_string();
    assert!(
        math.contains("scatter_add(") && math.contains("scatter("),
        "{math}"
    );
    let repro = f.to_reproducer("f");
    assert!(
        repro.contains(".scatter_add(1, ") && repro.contains(".scatter(1, "),
        "{repro}"
    );
    let again = nvfuser_core::dsl::build_str(&repro).unwrap().remove(0).0;
    assert_eq!(again, f, "{repro}");
    let out = run(
        &f,
        vec![
            t(&[0.0f32; 6], &[2, 3]),
            t(&[2i64, 2, 0, 1], &[2, 2]),
            t(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]),
        ],
    );
    assert_eq!(f32s(&out[0]), [0.0, 0.0, 6.0, 6.0, 8.0, 0.0]);
    assert_eq!(f32s(&out[1]), [0.0, 0.0, 0.5, 0.5, 0.5, 0.0]);
}
