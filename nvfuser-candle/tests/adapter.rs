//! The generic adapter: any fusion on candle tensors (`CandleFusion`), as a custom op
//! with a backward (`FusedOp`), on every candle layout, with index inputs, several
//! outputs and scalars; and how the fused ops meet candle's autograd (frozen weights,
//! gradients accumulated over several uses, broadcast output gradients).

mod common;

use std::sync::Arc;

use candle_core::{DType, Device, Tensor, Var};
use common::{assert_close, check_op, fwd_tol, grad_tol, reference, Rng};
use nvfuser::prelude::*;
use nvfuser_candle::{CandleFusion, FusedOp, FusionArg, Operand};

/// `(x [N, H] f32, y [N, H] bf16, s f64) -> (x * s + y (f32), sum(x, 1), x > 0)`.
fn three_outputs() -> CandleFusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F64).unwrap();
    let xs = fd.mul(x, s).unwrap();
    let z = fd.add(xs, y).unwrap();
    let r = fd.sum(x, &[1], false).unwrap();
    let zero = fd.constant_of(0.0, DataType::F32);
    let p = fd.gt(x, zero).unwrap();
    for o in [z, r, p] {
        fd.add_output(o).unwrap();
    }
    CandleFusion::new("three_outputs", fd.finish().unwrap())
        .unwrap()
        .with_input_names(&["x", "y", "s"])
        .unwrap()
}

fn expect_three(x: &Tensor, y: &Tensor, s: f64, out: &[Tensor]) {
    let z = ((x * s).unwrap() + y.to_dtype(DType::F32).unwrap()).unwrap();
    assert_close("x * s + y", &out[0], &z, fwd_tol(DType::F32));
    assert_close("sum", &out[1], &x.sum(1).unwrap(), fwd_tol(DType::F32));
    let pos = x.gt(0.0).unwrap();
    assert_eq!(out[2].dtype(), DType::U8);
    assert_eq!(
        out[2].to_vec2::<u8>().unwrap(),
        pos.to_vec2::<u8>().unwrap()
    );
}

#[test]
fn any_fusion_runs_on_contiguous_strided_offset_and_broadcast_views() {
    let f = three_outputs();
    let mut rng = Rng::new(1);
    let x = rng.tensor(&[5, 7], -2.0, 2.0, DType::F32).unwrap();
    let y = rng.tensor(&[5, 7], -2.0, 2.0, DType::BF16).unwrap();
    let out = f.run(&[(&x).into(), (&y).into(), 1.5f64.into()]).unwrap();
    assert_eq!(out.len(), 3);
    expect_three(&x, &y, 1.5, &out);

    // Transposed (strides [1, 5]), narrowed (an offset and a row pitch), broadcast
    // (stride 0) views are gathered; the results equal those of contiguous copies.
    let xt = rng
        .tensor(&[7, 5], -2.0, 2.0, DType::F32)
        .unwrap()
        .t()
        .unwrap();
    assert!(!xt.is_contiguous());
    let wide = rng.tensor(&[6, 10], -2.0, 2.0, DType::BF16).unwrap();
    let yn = wide.narrow(0, 1, 5).unwrap().narrow(1, 2, 7).unwrap();
    assert!(!yn.is_contiguous());
    let out = f
        .run(&[(&xt).into(), (&yn).into(), (-0.5f64).into()])
        .unwrap();
    expect_three(
        &xt.contiguous().unwrap(),
        &yn.contiguous().unwrap(),
        -0.5,
        &out,
    );

    let row = rng.tensor(&[1, 7], -2.0, 2.0, DType::F32).unwrap();
    let xb = row.broadcast_as((5, 7)).unwrap();
    assert_eq!(xb.stride(), &[0, 1]);
    let out = f.run(&[(&xb).into(), (&y).into(), 2.0f64.into()]).unwrap();
    expect_three(&xb.contiguous().unwrap(), &y, 2.0, &out);
}

fusion! {
    /// A bias and GELU epilogue, written with the macro.
    fn bias_gelu(x: Tensor<bf16, [N, H]>, b: Tensor<bf16, [H]>) -> Tensor<bf16, [N, H]> {
        let y = ((x as f32) + (b as f32)).gelu_tanh();
        y as bf16
    }
}

#[test]
fn a_fusion_written_with_the_macro_runs_on_candle_tensors() {
    let f = CandleFusion::new("bias_gelu", bias_gelu_fusion().unwrap().clone()).unwrap();
    let mut rng = Rng::new(8);
    let x = rng.tensor(&[5, 12], -3.0, 3.0, DType::BF16).unwrap();
    let b = rng.tensor(&[12], -1.0, 1.0, DType::BF16).unwrap();
    let y = f.run(&[(&x).into(), (&b).into()]).unwrap();
    let f32 = |t: &Tensor| t.to_dtype(DType::F32).unwrap();
    let xb = f32(&x).broadcast_add(&f32(&b)).unwrap();
    let want = reference::gelu(&xb).unwrap().to_dtype(DType::BF16).unwrap();
    assert_close("bias_gelu", &y[0], &want, fwd_tol(DType::BF16));
}

#[test]
fn index_inputs_take_candle_integer_types() {
    // rows of a table by index: (table [V, D] f32, ids [T] i64) -> [T, D], and the ids + 1.
    let mut fd = FusionDefinition::new();
    let table = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let ids = fd.define_tensor(DataType::I64, &[-1]).unwrap();
    let rows = fd.index_select(table, 0, ids).unwrap();
    let one = fd.constant(1i64);
    let next = fd.add(ids, one).unwrap();
    fd.add_output(rows).unwrap();
    fd.add_output(next).unwrap();
    let f = CandleFusion::new("embedding", fd.finish().unwrap()).unwrap();
    let table = Rng::new(2).tensor(&[6, 3], -1.0, 1.0, DType::F32).unwrap();
    for ids in [
        Tensor::new(&[5u32, 0, 2, 2], &Device::Cpu).unwrap(),
        Tensor::new(&[5i64, 0, 2, 2], &Device::Cpu).unwrap(),
        Tensor::new(&[5u8, 0, 2, 2], &Device::Cpu).unwrap(),
    ] {
        let out = f.run(&[(&table).into(), (&ids).into()]).unwrap();
        let want = table.index_select(&ids, 0).unwrap();
        assert_close("index_select", &out[0], &want, fwd_tol(DType::F32));
        assert_eq!(out[1].to_vec1::<i64>().unwrap(), [6, 1, 3, 3]);
    }
}

/// `y = x * x * s` with backward `dx = 2 * x * s * dy`, built by hand.
fn square_scale(with_backward: bool) -> FusedOp {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F64).unwrap();
    let y = fd.mul(x, x).unwrap();
    let y = fd.mul(y, s).unwrap();
    fd.add_output(y).unwrap();
    let fwd = Arc::new(CandleFusion::new("square_scale", fd.finish().unwrap()).unwrap());
    let s = Operand::Scalar(0.25f64.into());
    let op = FusedOp::new("square_scale", fwd, vec![Operand::Input(0), s.clone()]).unwrap();
    if !with_backward {
        return op;
    }
    let mut fd = FusionDefinition::new();
    let dy = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let sv = fd.define_scalar(DataType::F64).unwrap();
    let two = fd.constant_of(2.0, DataType::F32);
    let g = fd.mul(x, two).unwrap();
    let g = fd.mul(g, sv).unwrap();
    let g = fd.mul(g, dy).unwrap();
    fd.add_output(g).unwrap();
    let bwd = Arc::new(CandleFusion::new("square_scale_bwd", fd.finish().unwrap()).unwrap());
    op.with_backward(
        bwd,
        vec![Operand::GradOutput, Operand::Input(0), s],
        vec![Some(0)],
    )
    .unwrap()
}

#[test]
fn a_hand_written_fused_op_has_forward_and_backward() {
    let op = square_scale(true);
    assert_eq!((op.name(), op.arity()), ("square_scale", 1));
    let x = Rng::new(3).var(&[4, 6], DType::F32).unwrap();
    check_op(
        "square_scale",
        &[&x],
        3,
        |t| op.apply(&[t[0]]),
        |t| t[0].sqr()? * 0.25,
    );
}

#[test]
fn an_op_without_backward_says_so_when_backward_reaches_it() {
    let op = square_scale(false);
    let x = Rng::new(4).var(&[2, 3], DType::F32).unwrap();
    let y = op.apply(&[x.as_tensor()]).unwrap();
    let err = y.sum_all().unwrap().backward().unwrap_err().to_string();
    assert!(err.contains("square_scale"), "{err}");
}

#[test]
fn frozen_parameters_get_no_gradient() {
    // A weight that is a plain tensor (not a Var): the dx-only backward variant runs,
    // the weight has no gradient, and x's equals the reference's.
    let mut rng = Rng::new(5);
    let x = rng.var(&[6, 10], DType::F32).unwrap();
    let w = rng.tensor(&[10], 0.5, 1.5, DType::F32).unwrap();
    let b = rng.tensor(&[10], -1.0, 1.0, DType::F32).unwrap();
    for (name, fused, unfused) in [
        (
            "rms_norm",
            nvfuser_candle::rms_norm(x.as_tensor(), &w, 1e-6).unwrap(),
            reference::rms_norm(x.as_tensor(), &w, 1e-6).unwrap(),
        ),
        (
            "layer_norm",
            nvfuser_candle::layer_norm(x.as_tensor(), &w, Some(&b), 1e-6).unwrap(),
            reference::layer_norm(x.as_tensor(), &w, Some(&b), 1e-6).unwrap(),
        ),
    ] {
        let g = fused.sqr().unwrap().sum_all().unwrap().backward().unwrap();
        let g_ref = unfused
            .sqr()
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
        assert!(g.get(&w).is_none() && g.get(&b).is_none(), "{name}");
        assert_close(
            name,
            g.get(&x).unwrap(),
            g_ref.get(&x).unwrap(),
            grad_tol(DType::F32),
        );
    }
}

#[test]
fn gradients_accumulate_over_several_uses_and_broadcast_output_gradients() {
    // x feeds two fused ops and one candle op; `sum_all` hands each op a stride-0
    // gradient, which the backward fusions read through the same gather.
    let mut rng = Rng::new(6);
    let x = rng.var(&[3, 5, 8], DType::F32).unwrap();
    let w = Var::from_tensor(&rng.tensor(&[8], 0.5, 1.5, DType::F32).unwrap()).unwrap();
    let fused = |x: &Tensor, w: &Tensor| -> candle_core::Result<Tensor> {
        let a = nvfuser_candle::rms_norm(x, w, 1e-5)?;
        let b = nvfuser_candle::gelu(x)?;
        ((a * b)? + x.sqr()?)?.sum_all()
    };
    let unfused = |x: &Tensor, w: &Tensor| -> candle_core::Result<Tensor> {
        let a = reference::rms_norm(x, w, 1e-5)?;
        let b = reference::gelu(x)?;
        ((a * b)? + x.sqr()?)?.sum_all()
    };
    let g = fused(x.as_tensor(), w.as_tensor())
        .unwrap()
        .backward()
        .unwrap();
    let g_ref = unfused(x.as_tensor(), w.as_tensor())
        .unwrap()
        .backward()
        .unwrap();
    for v in [&x, &w] {
        assert_close(
            "accumulated",
            g.get(v).unwrap(),
            g_ref.get(v).unwrap(),
            grad_tol(DType::F32),
        );
    }
    // One tensor as both arguments of an op: both gradients land on it.
    check_op(
        "silu_mul(x, x)",
        &[&x],
        7,
        |t| nvfuser_candle::silu_mul(t[0], t[0]),
        |t| reference::silu_mul(t[0], t[0]),
    );
    // A softmax of a transposed (non-contiguous) rank-2 input: no reshape, the op reads
    // the strided layout itself.
    let s = rng.var(&[9, 4], DType::F32).unwrap();
    check_op(
        "softmax of a transposed input",
        &[&s],
        6,
        |t| nvfuser_candle::softmax_last_dim(&t[0].t()?),
        |t| reference::softmax(&t[0].t()?),
    );
}

#[test]
fn the_fused_ops_work_as_candle_modules() {
    use candle_core::Module;
    let mut rng = Rng::new(7);
    let x = rng.tensor(&[2, 4, 6], -2.0, 2.0, DType::BF16).unwrap();
    let w = rng.tensor(&[6], 0.5, 1.5, DType::BF16).unwrap();
    let b = rng.tensor(&[6], -1.0, 1.0, DType::BF16).unwrap();
    let modules: Vec<(Box<dyn Module>, Tensor)> = vec![
        (
            Box::new(nvfuser_candle::RmsNorm::new(w.clone(), 1e-6)),
            reference::rms_norm(&x, &w, 1e-6).unwrap(),
        ),
        (
            Box::new(nvfuser_candle::LayerNorm::new(w.clone(), b.clone(), 1e-6)),
            reference::layer_norm(&x, &w, Some(&b), 1e-6).unwrap(),
        ),
    ];
    for (m, want) in modules {
        let got = m.forward(&x).unwrap();
        assert_close("module", &got, &want, fwd_tol(DType::BF16));
    }
}

#[test]
fn scalars_and_tensors_convert_into_arguments() {
    let t = Tensor::new(&[1f32], &Device::Cpu).unwrap();
    assert!(matches!(FusionArg::from(&t), FusionArg::Tensor(_)));
    assert!(matches!(FusionArg::from(2i64), FusionArg::Scalar(_)));
    assert!(matches!(FusionArg::from(true), FusionArg::Scalar(_)));
    assert_eq!(
        nvfuser_candle::candle_dtype(DataType::BF16),
        Some(DType::BF16)
    );
    assert_eq!(nvfuser_candle::fusion_dtype(DType::U32), None);
    assert!(nvfuser_candle::execution_device().starts_with("cpu"));
}
