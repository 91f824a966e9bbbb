//! fp8 through the builder, the `fusion!` language, the printers and the CPU reference,
//! with hand-checked values (the byte rules themselves are tested in `fp8::tests`).

use nvfuser_core::dsl;
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::fp8::{f8e4m3, f8e5m2};
use nvfuser_core::prelude::*;

fn build(src: &str) -> Fusion {
    match dsl::build_str(src) {
        Ok(mut v) => v.remove(0).0,
        Err(errs) => panic!("{}", errs.iter().map(|e| e.render(src)).collect::<String>()),
    }
}

fn build_err(src: &str) -> String {
    match dsl::build_str(src) {
        Ok(_) => panic!("expected an error:\n{src}"),
        Err(errs) => errs.iter().map(|e| e.render(src)).collect(),
    }
}

fn f32s(values: &[f32]) -> EvalInput {
    EvalInput::Tensor(HostTensor::from_vec(values.to_vec(), &[values.len()]).unwrap())
}

#[test]
fn mixing_fp8_with_another_tensor_type_is_a_typed_error() {
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F8E4M3, &[-1]).unwrap();
    let b = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let c = fd.define_tensor(DataType::F8E5M2, &[-1]).unwrap();
    let m = fd.define_tensor(DataType::Bool, &[-1]).unwrap();
    let err = fd.add(a, b).unwrap_err();
    assert!(matches!(err, Error::DType { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("f8e4m3 and f32"), "{text}");
    assert!(text.contains("cast explicitly"), "{text}");
    assert!(fd
        .mul(a, c)
        .unwrap_err()
        .to_string()
        .contains("f8e4m3 and f8e5m2"));
    assert!(fd.lt(c, m).is_err());
    assert!(fd.where_(m, a, c).is_err());
    // Same type, and Python-like scalars: the fp8 type stays.
    let two = fd.constant(2.5);
    let s = fd.define_scalar(DataType::F32).unwrap();
    for y in [
        fd.add(a, a).unwrap(),
        fd.mul(a, two).unwrap(),
        fd.sub(a, s).unwrap(),
    ] {
        assert_eq!(fd.fusion().val(y).dtype, DataType::F8E4M3);
    }
    let e = fd.exp(c).unwrap();
    assert_eq!(fd.fusion().val(e).dtype, DataType::F8E5M2);
    // Random streams have no fp8 form.
    let (lo, hi) = (fd.constant(0.0), fd.constant(1.0));
    let (seed, off) = (fd.constant(1i64), fd.constant(0i64));
    let r = fd.uniform(&[Size::Const(4)], lo, hi, seed, off, DataType::F8E4M3);
    assert!(matches!(r, Err(Error::DType { .. })));
}

#[test]
fn the_language_names_the_fp8_types() {
    let f = build(
        "fn f(x: Tensor<f8e4m3, [N]>, y: Tensor<f32, [N]>, s: f8e5m2) -> (Tensor<f8e5m2, [N]>, Tensor<f32, [N]>) {\n    let a = y as f8e5m2;\n    let b = a * s + 0.5f8e5m2;\n    (b, (x as f32) + y)\n}\n",
    );
    let text = f.to_string();
    assert!(text.contains("f8e4m3") && text.contains("f8e5m2"), "{text}");
    let err = build_err(
        "fn f(x: Tensor<f8e4m3, [N]>, y: Tensor<f32, [N]>) -> Tensor<f32, [N]> {\n    x + y\n}\n",
    );
    assert!(err.contains("f8e4m3 and f32"), "{err}");
    let err = build_err("fn f(x: Tensor<f8e4m4, [N]>) -> Tensor<f32, [N]> {\n    x as f32\n}\n");
    assert!(err.contains("f8e4m3"), "a did-you-mean hint: {err}");
}

#[test]
fn reproducers_of_fp8_fusions_rebuild_the_same_fusion() {
    let f = build(
        "fn f(x: Tensor<f8e4m3, [N, H]>, s: f8e4m3) -> (Tensor<f8e4m3, [N, H]>, Tensor<f8e5m2, [N]>) {\n    let a = x * s + 448.0f8e4m3;\n    let b = (x as f32).max([1]) as f8e5m2;\n    (a - f8e4m3::NAN, b)\n}\n",
    );
    let src = f.to_reproducer("fp8_case");
    assert!(
        src.contains("448.0f8e4m3") && src.contains("f8e4m3::NAN"),
        "{src}"
    );
    let again = build(&src);
    assert!(again == f, "{src}");
    // Serde names the variants.
    let json = serde_json::to_string(&DataType::F8E5M2).unwrap();
    assert_eq!(json, "\"F8E5M2\"");
    assert_eq!(
        serde_json::from_str::<DataType>(&json).unwrap(),
        DataType::F8E5M2
    );
}

#[test]
fn casts_to_fp8_on_the_reference() {
    let f = build(
        "fn f(x: Tensor<f32, [N]>) -> (Tensor<f8e4m3, [N]>, Tensor<f8e5m2, [N]>) {\n    (x as f8e4m3, x as f8e5m2)\n}\n",
    );
    let xs = [
        0.1f32,
        1.0,
        448.0,
        449.0,
        464.0,
        465.0,
        -0.0,
        1.0625,
        2e-3,
        57344.0,
        61440.0,
        f32::INFINITY,
        f32::NAN,
        2f32.powi(-10),
        2f32.powi(-17),
    ];
    let out = evaluate(&f, &[f32s(&xs)]).unwrap();
    let e4: Vec<u8> = out[0]
        .to_vec::<f8e4m3>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    let e5: Vec<u8> = out[1]
        .to_vec::<f8e5m2>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    // e5m2: 448 = 1.75 * 2^8 is 0x5f, and 449, 464, 465 are nearer 448 than 512 (0x60);
    // 2e-3 = 1.024 * 2^-9 rounds to 2^-9: 0x01 in e4m3 units, 0x18 (normal) in e5m2;
    // 2^-10 is an e4m3 tie between 0 and 2^-9 (to the even 0) but a normal e5m2 (0x14).
    assert_eq!(
        e4,
        [
            0x1d, 0x38, 0x7e, 0x7e, 0x7e, 0x7f, 0x80, 0x38, 0x01, 0x7f, 0x7f, 0x7f, 0x7f, 0x00,
            0x00
        ]
    );
    assert_eq!(
        e5,
        [
            0x2e, 0x3c, 0x5f, 0x5f, 0x5f, 0x5f, 0x80, 0x3c, 0x18, 0x7b, 0x7c, 0x7c, 0x7f, 0x14,
            0x00
        ]
    );
}

#[test]
fn every_code_round_trips_through_f32_on_the_reference() {
    let f = build(
        "fn f(a: Tensor<f8e4m3, [N]>, b: Tensor<f8e5m2, [N]>) -> (Tensor<f8e4m3, [N]>, Tensor<f8e5m2, [N]>) {\n    ((a as f32) as f8e4m3, (b as f32) as f8e5m2)\n}\n",
    );
    let a: Vec<f8e4m3> = (0..=255u8).map(f8e4m3::from_bits).collect();
    let b: Vec<f8e5m2> = (0..=255u8).map(f8e5m2::from_bits).collect();
    let out = evaluate(
        &f,
        &[
            EvalInput::Tensor(HostTensor::from_vec(a, &[256]).unwrap()),
            EvalInput::Tensor(HostTensor::from_vec(b, &[256]).unwrap()),
        ],
    )
    .unwrap();
    for (c, v) in out[0].to_vec::<f8e4m3>().unwrap().into_iter().enumerate() {
        assert_eq!(v.to_bits(), c as u8, "e4m3 {c:#04x}");
    }
    for (c, v) in out[1].to_vec::<f8e5m2>().unwrap().into_iter().enumerate() {
        let want = if f8e5m2::from_bits(c as u8).is_nan() {
            (c as u8 & 0x80) | 0x7f
        } else {
            c as u8
        };
        assert_eq!(v.to_bits(), want, "e5m2 {c:#04x}");
    }
}

#[test]
fn fp8_math_computes_in_f32_and_rounds_once() {
    let f = build(
        "fn f(x: Tensor<f8e4m3, [N]>, y: Tensor<f8e4m3, [N]>) -> (Tensor<f8e4m3, [N]>, Tensor<f8e4m3, [N]>, Tensor<f32, []>, Tensor<f8e4m3, []>) {\n    (x * y, x / y + 1, (x as f32).sum([0]), x.max([0]))\n}\n",
    );
    let x: Vec<f8e4m3> = [1.5f32, 3.0, -2.0, 0.25].map(f8e4m3::from_f32).to_vec();
    let y: Vec<f8e4m3> = [1.5f32, 3.0, 3.0, 448.0].map(f8e4m3::from_f32).to_vec();
    let out = evaluate(
        &f,
        &[
            EvalInput::Tensor(HostTensor::from_vec(x, &[4]).unwrap()),
            EvalInput::Tensor(HostTensor::from_vec(y, &[4]).unwrap()),
        ],
    )
    .unwrap();
    let f32s = |t: &HostTensor| -> Vec<f32> {
        t.to_vec::<f8e4m3>()
            .unwrap()
            .iter()
            .map(|v| v.to_f32())
            .collect()
    };
    // 2.25 is exact; 9 exact; -6 exact; 0.25 * 448 = 112 exact.
    assert_eq!(f32s(&out[0]), [2.25, 9.0, -6.0, 112.0]);
    // Each op rounds: -2/3 -> -0.6875 (1.375 * 2^-1, nearer than -0.625), + 1 = 0.3125
    // exactly (a single rounding of 1/3 would have given 0.34375);
    // 0.25/448 -> 2^-11 is below half the smallest subnormal: 0; + 1 = 1.
    assert_eq!(f32s(&out[1]), [2.0, 2.0, 0.3125, 1.0]);
    assert_eq!(out[2].to_vec::<f32>().unwrap(), [2.75]);
    assert_eq!(f32s(&out[3]), [3.0]);
}

#[test]
fn conversions_from_other_types_go_through_f32() {
    let f = build(
        "fn f(x: Tensor<f64, [N]>, i: Tensor<i64, [N]>, h: Tensor<f16, [N]>) -> (Tensor<f8e4m3, [N]>, Tensor<f8e5m2, [N]>, Tensor<f8e4m3, [N]>, Tensor<i32, [N]>) {\n    let a = x as f8e4m3;\n    (a, i as f8e5m2, h as f8e4m3, a as i32)\n}\n",
    );
    // 1 + 2^-4 + 2^-30: f32 rounds it to the e4m3 tie 1 + 2^-4, which goes to 1.0 (a
    // direct rounding of the double would give 1.125). 500 -> NaN -> i32 0.
    let x = [1.0 + 2f64.powi(-4) + 2f64.powi(-30), 500.0, -3.7];
    let i = [57344i64, 61440, (1 << 40) + 1];
    let h: Vec<half::f16> = [0.1f32, 65504.0, -1e-7].map(half::f16::from_f32).to_vec();
    let out = evaluate(
        &f,
        &[
            EvalInput::Tensor(HostTensor::from_vec(x.to_vec(), &[3]).unwrap()),
            EvalInput::Tensor(HostTensor::from_vec(i.to_vec(), &[3]).unwrap()),
            EvalInput::Tensor(HostTensor::from_vec(h, &[3]).unwrap()),
        ],
    )
    .unwrap();
    let bits4 = |t: &HostTensor| -> Vec<u8> {
        t.to_vec::<f8e4m3>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect()
    };
    // -3.7 -> -3.75 (0xc7: 1.875 * 2^1).
    assert_eq!(bits4(&out[0]), [0x38, 0x7f, 0xc7]);
    let e5: Vec<u8> = out[1]
        .to_vec::<f8e5m2>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect();
    assert_eq!(e5, [0x7b, 0x7c, 0x7c]);
    // f16 0.1 = 0.0999755859375 -> 0x1d; 65504 -> NaN; -1e-7 (an f16 subnormal) -> -0.
    assert_eq!(bits4(&out[2]), [0x1d, 0x7f, 0x80]);
    assert_eq!(out[3].to_vec::<i32>().unwrap(), [1, 0, -3]);
}
