//! The fused ops build each fusion once per dtype (and per constant size where a slice
//! needs one): new shapes and repeated calls reuse it. (One test alone in this binary,
//! so no other test adds fusions while it counts.)

use candle_core::{DType, Device, Tensor};

fn t(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (i % 5) as f32 - 2.0).collect();
    Tensor::from_vec(v, dims, &Device::Cpu).unwrap()
}

#[test]
fn repeated_calls_and_new_shapes_reuse_the_cached_fusions() {
    let run = |rows: usize, h: usize| {
        let x = candle_core::Var::from_tensor(&t(&[rows, h])).unwrap();
        let w = candle_core::Var::from_tensor(&t(&[h])).unwrap();
        let y = nvfuser_candle::rms_norm(x.as_tensor(), w.as_tensor(), 1e-5).unwrap();
        let y = nvfuser_candle::softmax_last_dim(&y).unwrap();
        y.sum_all().unwrap().backward().unwrap();
    };
    assert_eq!(nvfuser_candle::cached_fusions(), 0);
    run(4, 8);
    // rms_norm: forward and two backward variants; softmax: forward and backward.
    let after_first = nvfuser_candle::cached_fusions();
    assert_eq!(after_first, 5);
    run(4, 8);
    run(7, 33);
    run(1, 1);
    assert_eq!(nvfuser_candle::cached_fusions(), after_first);
    // Another dtype is another fusion.
    let x = t(&[2, 4]).to_dtype(DType::BF16).unwrap();
    nvfuser_candle::softmax_last_dim(&x).unwrap();
    assert_eq!(nvfuser_candle::cached_fusions(), after_first + 2);
}
