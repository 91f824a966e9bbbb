//! Issue #12 case 10, on the GPU against the CPU reference (skipped without a GPU):
//!
//! * a softmax over an empty dim returns its empty result (PyTorch's answer), and a
//!   max whose undefined values an output would show is refused with the reference's
//!   error (`bind::observed_empty_reduction`);
//! * norms of `f32` rows of `f32::MAX`: every `f32` op rounds to `f32` on both devices
//!   (the evaluator's value model), so RMSNorm's `x * x` overflows and the result is 0,
//!   as PyTorch's; LayerNorm through `var_mean` keeps the finite mean (the reference's
//!   two-pass mean in f64, the persistent kernel's mean accumulated in f64) and gives
//!   the bias, as PyTorch's Welford.
//!
//! ```text
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_edge_semantics
//! ```

use nvfuser_core::eval::{evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::workloads;
use nvfuser_core::{DataType, FusionDefinition, ScalarValue};
use nvfuser_cuda::testing::{require_gpu, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};

fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

#[test]
fn softmax_over_an_empty_dim_is_empty() {
    let Some(dev) = gpu() else { return };
    let exec = FusionExecutorCache::new(workloads::softmax(DataType::F32).unwrap());
    for shape in [[3usize, 0], [0, 5], [0, 0], [4, 300], [3, 0]] {
        let x: EvalInput = HostTensor::random(DataType::F32, &shape, 5).into();
        let want = evaluate(exec.fusion(), std::slice::from_ref(&x)).unwrap();
        assert_eq!(want[0].shape(), shape);
        run_and_compare(&dev, &exec, &[x], None, &Tolerance::for_dtype)
            .unwrap_or_else(|e| panic!("{shape:?}: {e}"));
    }
}

#[test]
fn an_observed_empty_max_is_refused_on_both_devices() {
    let Some(dev) = gpu() else { return };
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let m = fd.max(x, &[1], false).unwrap();
    fd.add_output(m).unwrap();
    let exec = FusionExecutorCache::new(fd.finish().unwrap());
    let x: EvalInput = HostTensor::random(DataType::F32, &[3, 0], 7).into();
    let cpu = evaluate(exec.fusion(), std::slice::from_ref(&x))
        .unwrap_err()
        .to_string();
    assert!(
        cpu.contains("the max of zero elements is not defined"),
        "{cpu}"
    );
    let gpu = run_and_compare(&dev, &exec, &[x], None, &Tolerance::for_dtype).unwrap_err();
    assert!(
        gpu.contains("the max of zero elements is not defined"),
        "{gpu}"
    );
    // An empty output observes nothing; rows with elements afterwards.
    for shape in [[0usize, 0], [0, 5], [4, 300]] {
        let x: EvalInput = HostTensor::random(DataType::F32, &shape, 8).into();
        run_and_compare(&dev, &exec, &[x], None, &Tolerance::for_dtype)
            .unwrap_or_else(|e| panic!("{shape:?}: {e}"));
    }
}

#[test]
fn norms_of_f32_max_rows_agree() {
    let Some(dev) = gpu() else { return };
    let (rows, hidden) = (4usize, 1024usize);
    let big = || -> EvalInput {
        HostTensor::from_vec(vec![f32::MAX; rows * hidden], &[rows, hidden])
            .unwrap()
            .into()
    };
    let w: EvalInput = HostTensor::random(DataType::F32, &[hidden], 9).into();
    let b: EvalInput = HostTensor::random(DataType::F32, &[hidden], 10).into();
    let eps = EvalInput::Scalar(ScalarValue::Float(1e-5));

    // LayerNorm (var_mean) of a constant row is its bias: the reference's two-pass
    // mean in f64, the persistent kernel's mean accumulated in f64.
    let ln = FusionExecutorCache::new(workloads::layer_norm(DataType::F32).unwrap());
    let inputs = [big(), w.clone(), b.clone(), eps.clone()];
    let want = evaluate(ln.fusion(), &inputs).unwrap();
    let EvalInput::Tensor(bias) = &b else {
        unreachable!()
    };
    let bias = bias.to_vec::<f32>().unwrap();
    let row: Vec<f32> = want[0].to_vec::<f32>().unwrap()[..hidden].to_vec();
    assert_eq!(row, bias, "LayerNorm of a constant row is its bias");
    run_and_compare(&dev, &ln, &inputs, None, &Tolerance::for_dtype)
        .unwrap_or_else(|e| panic!("LayerNorm: {e}"));
    // Constant rows of an inexact value: the mean is the value, the result the bias.
    let third = HostTensor::from_vec(vec![1000.0f32 / 3.0; rows * hidden], &[rows, hidden]);
    let inputs = [third.unwrap().into(), w.clone(), b.clone(), eps.clone()];
    let want = evaluate(ln.fusion(), &inputs).unwrap();
    assert_eq!(&want[0].to_vec::<f32>().unwrap()[..hidden], &bias[..]);
    run_and_compare(&dev, &ln, &inputs, None, &Tolerance::for_dtype)
        .unwrap_or_else(|e| panic!("LayerNorm of constant rows: {e}"));

    let rms = FusionExecutorCache::new(workloads::rms_norm(DataType::F32).unwrap());
    let inputs = [big(), w, eps];
    let want = evaluate(rms.fusion(), &inputs).unwrap();
    assert!(want[0].to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    run_and_compare(&dev, &rms, &inputs, None, &Tolerance::for_dtype)
        .unwrap_or_else(|e| panic!("RMSNorm: {e}"));
}
