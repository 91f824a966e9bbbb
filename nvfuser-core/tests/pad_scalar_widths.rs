//! `pad` with widths given by integer scalars (inputs, or scalar expressions over inputs
//! and sizes), as nvFuser's pad takes them: hand-checked values on the CPU reference,
//! the run-time check of a negative scalar width, the builder's check of constant ones,
//! and the language, printers and reproducer.

mod common;

use common::{err, f32s, fusion, run, t};
use nvfuser_core::builder::Size;
use nvfuser_core::prelude::*;

#[test]
fn scalar_widths_from_inputs() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let lo = fd.define_scalar(DataType::I64)?;
        let hi = fd.define_scalar(DataType::I64)?;
        let v = fd.constant(0.0);
        Ok(vec![fd.pad_sizes(
            x,
            &[(Size::Val(lo), Size::Val(hi))],
            v,
        )?])
    });
    let out = run(
        &f,
        vec![t(&[1.0f32, 2.0, 3.0], &[3]), 2i64.into(), 1i64.into()],
    );
    assert_eq!(f32s(&out[0]), [0.0, 0.0, 1.0, 2.0, 3.0, 0.0]);
    let out = run(
        &f,
        vec![t(&[1.0f32, 2.0, 3.0], &[3]), 0i64.into(), 0i64.into()],
    );
    assert_eq!(f32s(&out[0]), [1.0, 2.0, 3.0]);
}

#[test]
fn scalar_widths_from_sizes_and_constants_mixed() {
    // dim 0: (0, k); dim 1: (x.size(0) - 1, 0), with value 9.
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1, -1])?;
        let k = fd.define_scalar(DataType::I64)?;
        let n = fd.size(x, 0)?;
        let one = fd.constant(1i64);
        let lo = fd.sub(n, one)?;
        let v = fd.constant(9.0);
        Ok(vec![fd.pad_sizes(
            x,
            &[
                (Size::Const(0), Size::Val(k)),
                (Size::Val(lo), Size::Const(0)),
            ],
            v,
        )?])
    });
    let out = run(&f, vec![t(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]), 1i64.into()]);
    assert_eq!(out[0].shape(), [3, 3]);
    assert_eq!(f32s(&out[0]), [9.0, 1.0, 2.0, 9.0, 3.0, 4.0, 9.0, 9.0, 9.0]);
}

#[test]
fn negative_widths_are_typed_errors() {
    let f = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let lo = fd.define_scalar(DataType::I64)?;
        let v = fd.constant(0.0);
        Ok(vec![fd.pad_sizes(
            x,
            &[(Size::Val(lo), Size::Const(1))],
            v,
        )?])
    });
    let msg = err(&f, vec![t(&[1.0f32, 2.0], &[2]), (-1i64).into()]);
    assert!(msg.contains("pad") && msg.contains("-1"), "{msg}");
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let v = fd.constant(0.0);
    let e = fd
        .pad_sizes(x, &[(Size::Const(-1), Size::Const(0))], v)
        .unwrap_err()
        .to_string();
    assert!(e.contains("non-negative"), "{e}");
    let s = fd.define_scalar(DataType::F32).unwrap();
    let e = fd
        .pad_sizes(x, &[(Size::Val(s), Size::Const(0))], v)
        .unwrap_err();
    assert!(matches!(e, Error::DType { .. }), "{e}");
}

#[test]
fn constant_scalars_fold_into_the_constant_op() {
    // A constant scalar width is the constant pad: the same IR as `pad`.
    let a = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let v = fd.constant(0.0);
        let two = fd.constant(2i64);
        Ok(vec![fd.pad_sizes(
            x,
            &[(Size::Val(two), Size::Const(1))],
            v,
        )?])
    });
    let b = fusion(|fd| {
        let x = fd.define_tensor(DataType::F32, &[-1])?;
        let v = fd.constant(0.0);
        let _two = fd.constant(2i64);
        Ok(vec![fd.pad(x, &[(2, 1)], v)?])
    });
    assert_eq!(a, b);
}

const SRC: &str = "fn f(x: Tensor<f32, [N, H]>, a: i64) -> Tensor<f32, [_, _]> {
    x.pad([(a, 1), (0, x.size(0) % 2)], 0.5)
}";

#[test]
fn language_printers_and_reproducer() {
    let f = nvfuser_core::dsl::build_str(SRC).unwrap().remove(0).0;
    let math = f.to_string();
    assert!(math.contains("pad("), "{math}");
    let repro = f.to_reproducer("f");
    let again = nvfuser_core::dsl::build_str(&repro)
        .unwrap_or_else(|e| panic!("{repro}: {e:?}"))
        .remove(0)
        .0;
    assert_eq!(again, f, "{repro}");
    // [3, 2] padded by (1, 1) and (0, 1): [5, 3].
    let out = run(
        &f,
        vec![t(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]), 1i64.into()],
    );
    assert_eq!(out[0].shape(), [5, 3]);
    assert_eq!(
        f32s(&out[0]),
        [0.5, 0.5, 0.5, 1.0, 2.0, 0.5, 3.0, 4.0, 0.5, 5.0, 6.0, 0.5, 0.5, 0.5, 0.5]
    );
}
