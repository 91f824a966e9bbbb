//! Every fused op against its unfused candle-core reference (`common::reference`): the
//! values and the gradient of every input, on seeded random inputs, for f32 and bf16
//! (and f16/f64 on one shape each), over shapes with odd sizes and ranks 1 to 4.

mod common;

use candle_core::{DType, Tensor};
use common::{check_op, reference, Rng};

const DTYPES: [DType; 2] = [DType::F32, DType::BF16];
const EPS: f64 = 1e-5;

/// `(dtype, shape)` cases: every shape in f32 and bf16, the first in f16 and f64 too.
fn cases(shapes: &[&[usize]]) -> Vec<(DType, Vec<usize>)> {
    let mut out = Vec::new();
    for dtype in DTYPES {
        for s in shapes {
            out.push((dtype, s.to_vec()));
        }
    }
    out.push((DType::F16, shapes[0].to_vec()));
    out.push((DType::F64, shapes[0].to_vec()));
    out
}

const ROW_SHAPES: &[&[usize]] = &[&[4, 8], &[7, 33], &[2, 3, 17], &[5, 1], &[9], &[2, 2, 2, 5]];

#[test]
fn rms_norm_matches_candle() {
    for (i, (dtype, shape)) in cases(ROW_SHAPES).into_iter().enumerate() {
        let mut rng = Rng::new(100 + i as u64);
        let h = *shape.last().unwrap();
        let x = rng.var(&shape, dtype).unwrap();
        let w = Var::from_tensor(&rng.tensor(&[h], 0.5, 1.5, dtype).unwrap()).unwrap();
        check_op(
            &format!("rms_norm {dtype:?} {shape:?}"),
            &[&x, &w],
            i as u64,
            |t| nvfuser_candle::rms_norm(t[0], t[1], EPS),
            |t| reference::rms_norm(t[0], t[1], EPS),
        );
    }
}

#[test]
fn layer_norm_matches_candle() {
    for (i, (dtype, shape)) in cases(ROW_SHAPES).into_iter().enumerate() {
        let mut rng = Rng::new(200 + i as u64);
        let h = *shape.last().unwrap();
        let x = rng.var(&shape, dtype).unwrap();
        let w = Var::from_tensor(&rng.tensor(&[h], 0.5, 1.5, dtype).unwrap()).unwrap();
        let b = rng.var(&[h], dtype).unwrap();
        check_op(
            &format!("layer_norm {dtype:?} {shape:?}"),
            &[&x, &w, &b],
            i as u64,
            |t| nvfuser_candle::layer_norm(t[0], t[1], Some(t[2]), EPS),
            |t| reference::layer_norm(t[0], t[1], Some(t[2]), EPS),
        );
        check_op(
            &format!("layer_norm without bias {dtype:?} {shape:?}"),
            &[&x, &w],
            i as u64 + 50,
            |t| nvfuser_candle::LayerNorm::new_no_bias(t[1].clone(), EPS).forward(t[0]),
            |t| reference::layer_norm(t[0], t[1], None, EPS),
        );
    }
}

#[test]
fn softmax_and_log_softmax_match_candle() {
    let shapes: &[&[usize]] = &[&[3, 5], &[6, 129], &[2, 3, 7], &[4], &[3, 1]];
    for (i, (dtype, shape)) in cases(shapes).into_iter().enumerate() {
        let mut rng = Rng::new(300 + i as u64);
        let x = Var::from_tensor(&rng.tensor(&shape, -4.0, 4.0, dtype).unwrap()).unwrap();
        check_op(
            &format!("softmax {dtype:?} {shape:?}"),
            &[&x],
            i as u64,
            |t| nvfuser_candle::softmax_last_dim(t[0]),
            |t| reference::softmax(t[0]),
        );
        check_op(
            &format!("log_softmax {dtype:?} {shape:?}"),
            &[&x],
            i as u64 + 50,
            |t| nvfuser_candle::log_softmax_last_dim(t[0]),
            |t| reference::log_softmax(t[0]),
        );
    }
}

#[test]
fn rope_matches_candle_with_and_without_table_gradients() {
    let shapes: &[&[usize]] = &[&[2, 5, 8], &[3, 4, 6], &[2, 3, 5, 10], &[7, 2]];
    for (i, (dtype, shape)) in cases(shapes).into_iter().enumerate() {
        let mut rng = Rng::new(400 + i as u64);
        let r = shape.len();
        let (t, d) = (shape[r - 2], shape[r - 1]);
        let x = rng.var(&shape, dtype).unwrap();
        let cos = rng.var(&[t, d], dtype).unwrap();
        let sin = rng.var(&[t, d], dtype).unwrap();
        check_op(
            &format!("rope {dtype:?} {shape:?}"),
            &[&x, &cos, &sin],
            i as u64,
            |v| nvfuser_candle::rope(v[0], v[1], v[2]),
            |v| reference::rope(v[0], v[1], v[2]),
        );
        // Constant tables (the usual case): the `dx`-only backward.
        let (c, s) = (cos.as_tensor().detach(), sin.as_tensor().detach());
        check_op(
            &format!("rope, constant tables {dtype:?} {shape:?}"),
            &[&x],
            i as u64 + 50,
            |v| nvfuser_candle::rope(v[0], &c, &s),
            |v| reference::rope(v[0], &c, &s),
        );
    }
}

#[test]
fn silu_mul_matches_candle() {
    let shapes: &[&[usize]] = &[&[3, 7], &[2, 3, 5], &[11], &[4, 64]];
    for (i, (dtype, shape)) in cases(shapes).into_iter().enumerate() {
        let mut rng = Rng::new(500 + i as u64);
        let a = rng.var(&shape, dtype).unwrap();
        let b = rng.var(&shape, dtype).unwrap();
        check_op(
            &format!("silu_mul {dtype:?} {shape:?}"),
            &[&a, &b],
            i as u64,
            |t| nvfuser_candle::silu_mul(t[0], t[1]),
            |t| reference::silu_mul(t[0], t[1]),
        );
    }
}

#[test]
fn silu_mul_packed_matches_candle() {
    let shapes: &[&[usize]] = &[&[3, 14], &[2, 3, 10], &[4, 2], &[22]];
    for (i, (dtype, shape)) in cases(shapes).into_iter().enumerate() {
        let mut rng = Rng::new(600 + i as u64);
        let x = rng.var(&shape, dtype).unwrap();
        check_op(
            &format!("silu_mul_packed {dtype:?} {shape:?}"),
            &[&x],
            i as u64,
            |t| nvfuser_candle::silu_mul_packed(t[0]),
            |t| reference::silu_mul_packed(t[0]),
        );
    }
}

#[test]
fn gelu_tanh_and_erf_match_candle() {
    let shapes: &[&[usize]] = &[&[5, 9], &[2, 3, 4], &[13], &[]];
    for (i, (dtype, shape)) in cases(shapes).into_iter().enumerate() {
        let mut rng = Rng::new(700 + i as u64);
        let x = Var::from_tensor(&rng.tensor(&shape, -4.0, 4.0, dtype).unwrap()).unwrap();
        check_op(
            &format!("gelu (tanh) {dtype:?} {shape:?}"),
            &[&x],
            i as u64,
            |t| nvfuser_candle::gelu(t[0]),
            |t| reference::gelu(t[0]),
        );
        check_op(
            &format!("gelu_erf {dtype:?} {shape:?}"),
            &[&x],
            i as u64 + 50,
            |t| nvfuser_candle::gelu_erf(t[0]),
            |t| reference::gelu_erf(t[0]),
        );
    }
}

#[test]
fn gelu_matches_candles_builtin_gelu() {
    // Candle's built-in GELU backward uses six-digit constants (about 1e-6 relative), so
    // this comparison is in f32 and bf16 only; f64 is checked against the elementary
    // references above.
    for (i, dtype) in DTYPES.into_iter().enumerate() {
        let mut rng = Rng::new(750 + i as u64);
        let x = Var::from_tensor(&rng.tensor(&[6, 11], -4.0, 4.0, dtype).unwrap()).unwrap();
        for erf in [false, true] {
            check_op(
                &format!("gelu (erf: {erf}) against Tensor::gelu {dtype:?}"),
                &[&x],
                i as u64,
                |t| {
                    if erf {
                        nvfuser_candle::gelu_erf(t[0])
                    } else {
                        nvfuser_candle::gelu(t[0])
                    }
                },
                |t| reference::gelu_builtin(t[0], erf),
            );
        }
    }
}

#[test]
fn cross_entropy_matches_candle() {
    let shapes: &[&[usize]] = &[&[4, 10], &[7, 33], &[2, 3, 11], &[1, 2]];
    for (i, (dtype, shape)) in cases(shapes).into_iter().enumerate() {
        let mut rng = Rng::new(800 + i as u64);
        let v = *shape.last().unwrap();
        let logits = Var::from_tensor(&rng.tensor(&shape, -3.0, 3.0, dtype).unwrap()).unwrap();
        let labels = rng.labels(&shape[..shape.len() - 1], v as u32).unwrap();
        check_op(
            &format!("cross_entropy {dtype:?} {shape:?}"),
            &[&logits],
            i as u64,
            |t| nvfuser_candle::cross_entropy(t[0], &labels),
            |t| reference::cross_entropy(t[0], &labels),
        );
        // Labels as i64, and the mean: a scalar, as candle_nn's cross_entropy.
        let labels64 = labels.to_dtype(DType::I64).unwrap();
        check_op(
            &format!("cross_entropy_mean {dtype:?} {shape:?}"),
            &[&logits],
            i as u64 + 50,
            |t| nvfuser_candle::cross_entropy_mean(t[0], &labels64),
            |t| reference::cross_entropy(t[0], &labels64)?.mean_all(),
        );
    }
}

#[test]
fn outputs_keep_the_input_dtype_and_the_loss_is_f32() {
    let mut rng = Rng::new(900);
    let x = rng.tensor(&[3, 8], -1.0, 1.0, DType::BF16).unwrap();
    let w = rng.tensor(&[8], -1.0, 1.0, DType::BF16).unwrap();
    assert_eq!(
        nvfuser_candle::rms_norm(&x, &w, EPS).unwrap().dtype(),
        DType::BF16
    );
    assert_eq!(nvfuser_candle::gelu(&x).unwrap().dtype(), DType::BF16);
    let labels = Tensor::new(&[1u32, 2, 3], &candle_core::Device::Cpu).unwrap();
    let loss = nvfuser_candle::cross_entropy(&x, &labels).unwrap();
    assert_eq!((loss.dtype(), loss.dims()), (DType::F32, &[3usize][..]));
}

use candle_core::Var;
