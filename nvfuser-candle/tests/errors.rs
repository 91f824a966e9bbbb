//! Bad inputs are typed errors that name the op, the argument, what was expected and
//! what was found; none panics.

use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use nvfuser::prelude::*;
use nvfuser_candle::{CandleFusion, Error, FusedOp, FusionArg, Operand};

fn t(dims: &[usize], dtype: DType) -> Tensor {
    let n: usize = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect();
    Tensor::from_vec(v, dims, &Device::Cpu)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

/// Asserts `r` is an error whose message contains every piece of `expected`.
fn expect_err<T: std::fmt::Debug>(r: candle_core::Result<T>, expected: &[&str]) {
    let msg = r.expect_err("expected an error").to_string();
    for piece in expected {
        assert!(msg.contains(piece), "missing {piece:?} in: {msg}");
    }
}

#[test]
fn wrong_dtypes_name_expected_and_found() {
    let x = t(&[3, 8], DType::BF16);
    expect_err(
        nvfuser_candle::rms_norm(&t(&[3, 8], DType::U32), &t(&[8], DType::U32), 1e-5),
        &["rms_norm: x: expected dtype f32, f16, bf16 or f64, found u32"],
    );
    expect_err(
        nvfuser_candle::rms_norm(&x, &t(&[8], DType::F32), 1e-5),
        &["rms_norm: weight: expected dtype bf16 (the dtype of x), found f32"],
    );
    expect_err(
        nvfuser_candle::layer_norm(&x, &t(&[8], DType::BF16), Some(&t(&[8], DType::F16)), 1e-5),
        &["layer_norm: bias: expected dtype bf16", "found f16"],
    );
    expect_err(
        nvfuser_candle::silu_mul(&x, &t(&[3, 8], DType::F32)),
        &["silu_mul: b: expected dtype bf16 (the dtype of a), found f32"],
    );
    expect_err(
        nvfuser_candle::cross_entropy(&x, &t(&[3], DType::F32)),
        &[
            "cross_entropy: labels: expected dtype an integer type",
            "found f32",
        ],
    );
    expect_err(
        nvfuser_candle::gelu(&t(&[4], DType::I64)),
        &["gelu: x: expected dtype f32, f16, bf16 or f64, found i64"],
    );
}

#[test]
fn wrong_shapes_and_ranks_name_expected_and_found() {
    let x = t(&[2, 3, 8], DType::F32);
    expect_err(
        nvfuser_candle::rms_norm(&x, &t(&[9], DType::F32), 1e-5),
        &["rms_norm: weight: expected shape [8] (the last dim of x), found shape [9]"],
    );
    expect_err(
        nvfuser_candle::layer_norm(&t(&[], DType::F32), &t(&[1], DType::F32), None, 1e-5),
        &["layer_norm: x: expected rank 1 or more", "found shape []"],
    );
    expect_err(
        nvfuser_candle::softmax_last_dim(&t(&[], DType::F32)),
        &["softmax_last_dim: x: expected rank 1 or more"],
    );
    expect_err(
        nvfuser_candle::rope(&t(&[2, 4, 7], DType::F32), &t(&[4, 7], DType::F32), &t(&[4, 7], DType::F32)),
        &["rope: x: expected rank 2 or more, [.., T, D] with an even D >= 2, found shape [2, 4, 7]"],
    );
    expect_err(
        nvfuser_candle::rope(
            &t(&[2, 4, 6], DType::F32),
            &t(&[5, 6], DType::F32),
            &t(&[4, 6], DType::F32),
        ),
        &["rope: cos: expected shape [4, 6]", "found shape [5, 6]"],
    );
    expect_err(
        nvfuser_candle::silu_mul(&x, &t(&[2, 8], DType::F32)),
        &["silu_mul: b: expected shape [2, 3, 8] (the shape of a), found shape [2, 8]"],
    );
    expect_err(
        nvfuser_candle::silu_mul_packed(&t(&[3, 7], DType::F32)),
        &[
            "silu_mul_packed: x: expected a last dim 2H",
            "found shape [3, 7]",
        ],
    );
    expect_err(
        nvfuser_candle::cross_entropy(&x, &Tensor::new(&[0u32, 1], &Device::Cpu).unwrap()),
        &[
            "cross_entropy: labels: expected shape [2, 3] (the leading dims of logits [2, 3, 8])",
            "found shape [2]",
        ],
    );
}

#[test]
fn out_of_range_labels_are_an_error_of_the_forward() {
    let logits = t(&[3, 5], DType::F32);
    for bad in [[0i64, 5, 1], [0, -1, 1]] {
        let labels = Tensor::new(&bad, &Device::Cpu).unwrap();
        expect_err(
            nvfuser_candle::cross_entropy(&logits, &labels),
            &[
                "cross_entropy: take_along_axis",
                "is out of range for dim 1 of size 5 (expected 0..5)",
            ],
        );
    }
    let labels = Tensor::new(&[0u32, 9, 1], &Device::Cpu).unwrap();
    expect_err(
        nvfuser_candle::cross_entropy_mean(&logits, &labels),
        &["index 9 at position [1, 0] is out of range"],
    );
}

fn add_fusion() -> CandleFusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F64).unwrap();
    let y = fd.add(x, s).unwrap();
    fd.add_output(y).unwrap();
    CandleFusion::new("add_scalar", fd.finish().unwrap())
        .unwrap()
        .with_input_names(&["x", "s"])
        .unwrap()
}

#[test]
fn generic_calls_check_arity_kind_dtype_and_rank() {
    let f = add_fusion();
    let x = t(&[2, 3], DType::F32);
    let e = f.try_run(&[(&x).into()]).unwrap_err();
    assert!(matches!(e, Error::Arity { found: 1, .. }), "{e}");
    assert!(
        e.to_string()
            .contains("expected 2 arguments (1 tensors, 1 scalars"),
        "{e}"
    );

    let e = f.try_run(&[(&x).into(), (&x).into()]).unwrap_err();
    assert!(matches!(e, Error::Argument { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("s: expected a f64 scalar, found a tensor of shape [2, 3]"),
        "{e}"
    );

    let e = f.try_run(&[1.0f64.into(), 1.0f64.into()]).unwrap_err();
    assert!(
        e.to_string()
            .contains("x: expected a f32 tensor of rank 2, found the scalar 1.0"),
        "{e}"
    );

    let e = f
        .try_run(&[(&t(&[2, 3], DType::BF16)).into(), 1.0f64.into()])
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Dtype {
                found: DType::BF16,
                ..
            }
        ),
        "{e}"
    );

    let e = f
        .try_run(&[(&t(&[6], DType::F32)).into(), 1.0f64.into()])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("add_scalar: x: expected rank 2, found shape [6]"),
        "{e}"
    );

    // The library's own checks follow: extents the fusion equates.
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let b = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let c = fd.add(a, b).unwrap();
    fd.add_output(c).unwrap();
    let bias = CandleFusion::new("bias", fd.finish().unwrap()).unwrap();
    let e = bias
        .try_run(&[FusionArg::from(&x), FusionArg::from(&t(&[4], DType::F32))])
        .unwrap_err();
    assert!(matches!(e, Error::Fusion { .. }), "{e}");
    assert!(e.to_string().starts_with("bias: "), "{e}");

    // candle-facing `run` carries the same message.
    let e = f.run(&[(&x).into()]).unwrap_err();
    assert!(
        e.to_string().contains("add_scalar: expected 2 arguments"),
        "{e}"
    );
    assert!(f.with_input_names(&["only one"]).is_err());
}

#[test]
fn fused_op_definitions_are_checked() {
    let f = Arc::new(add_fusion());
    let s = Operand::Scalar(1.0f64.into());
    let e = FusedOp::new("op", f.clone(), vec![Operand::Input(0)]).unwrap_err();
    assert!(e.to_string().contains("expected 2 forward operands"), "{e}");
    let e = FusedOp::new("op", f.clone(), vec![s.clone(), Operand::Input(0)]).unwrap_err();
    assert!(e.to_string().contains("expected a tensor"), "{e}");
    let e = FusedOp::new("op", f.clone(), vec![Operand::Output, s.clone()]).unwrap_err();
    assert!(
        e.to_string()
            .contains("Operand::Input or Operand::Scalar in a forward"),
        "{e}"
    );
    let e = FusedOp::new("op", f.clone(), vec![Operand::Input(3), s.clone()]).unwrap_err();
    assert!(e.to_string().contains("1 to 3 tensor arguments"), "{e}");
    let e = FusedOp::new("op", f.clone(), vec![Operand::Input(1), s.clone()]).unwrap_err();
    assert!(e.to_string().contains("argument 0 unused"), "{e}");

    let op = FusedOp::new("op", f.clone(), vec![Operand::Input(0), s.clone()]).unwrap();
    let e = op
        .clone()
        .with_backward(
            f.clone(),
            vec![Operand::GradOutput, s.clone()],
            vec![Some(1)],
        )
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("expected output indices below 1, found output 1"),
        "{e}"
    );
    let e = op
        .clone()
        .with_backward(f.clone(), vec![Operand::GradOutput, s.clone()], vec![])
        .unwrap_err();
    assert!(e.to_string().contains("expected 1 gradient entries"), "{e}");

    let x = t(&[2, 2], DType::F32);
    expect_err(op.apply(&[&x, &x]), &["op: expected 1 tensors, found 2"]);

    // A fusion with two outputs cannot be a custom op's forward.
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let b = fd.neg(a).unwrap();
    fd.add_output(a).unwrap();
    fd.add_output(b).unwrap();
    let two = Arc::new(CandleFusion::new("two", fd.finish().unwrap()).unwrap());
    let e = FusedOp::new("two", two, vec![Operand::Input(0)]).unwrap_err();
    assert!(
        e.to_string().contains("a forward fusion with 1 output"),
        "{e}"
    );
}

#[test]
fn fusions_candle_cannot_hold_are_refused_when_wrapped() {
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let b = fd.cast(a, DataType::F8E4M3).unwrap();
    fd.add_output(b).unwrap();
    let e = CandleFusion::new("fp8", fd.finish().unwrap()).unwrap_err();
    assert!(e.to_string().contains("output 0 has dtype f8e4m3"), "{e}");

    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let b = fd.neg(a).unwrap();
    fd.add_output_alias(b, a).unwrap();
    let e = CandleFusion::new("in_place", fd.finish().unwrap()).unwrap_err();
    assert!(e.to_string().contains("in-place output"), "{e}");
}

#[test]
fn empty_tensors_run_and_zero_classes_is_an_error() {
    for dims in [[0usize, 8], [3, 0]] {
        let x = candle_core::Var::from_tensor(&t(&dims, DType::F32)).unwrap();
        let w = candle_core::Var::from_tensor(&t(&[dims[1]], DType::F32)).unwrap();
        let y = nvfuser_candle::rms_norm(x.as_tensor(), w.as_tensor(), 1e-5).unwrap();
        assert_eq!(y.dims(), dims);
        y.sum_all().unwrap().backward().unwrap();
        for y in [
            nvfuser_candle::layer_norm(x.as_tensor(), w.as_tensor(), None, 1e-5),
            nvfuser_candle::softmax_last_dim(x.as_tensor()),
            nvfuser_candle::gelu(x.as_tensor()),
        ] {
            assert_eq!(y.unwrap().dims(), dims);
        }
    }
    let labels = Tensor::new(&[0u32, 0, 0], &Device::Cpu).unwrap();
    expect_err(
        nvfuser_candle::cross_entropy(&t(&[3, 0], DType::F32), &labels),
        &[
            "cross_entropy: max",
            "cannot reduce over an empty dimension",
        ],
    );
}
