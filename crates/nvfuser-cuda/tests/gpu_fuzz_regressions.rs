//! GPU fuzz regressions run against the CPU reference (skipped without a GPU).

use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_cuda::testing::{require_gpu, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};

/// Seed 5405: a full reduction of `[T0.size(0), 256]` beside a pointwise output in the
/// inner persistent scheduler; the pointwise output had `T0.size(0) * 256` rows.
#[test]
fn persistent_full_reduction_with_pointwise_output() {
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    let fusion = nvfuser_core::dsl::build_str(
        r#"
fn fuzz_case(t0: Tensor<f64, [_, 256]>) -> (Tensor<f64, [1, 1]>, Tensor<f64, [_, 256]>) {
    let t1 = t0.atan();
    let t2 = t1.reshape([-1]);
    let t3 = t0.min([0, 1]);
    let t4 = t3.broadcast([true, true]);
    (t4, t1)
}
"#,
    )
    .unwrap()
    .remove(0)
    .0;
    let exec = FusionExecutorCache::new(fusion);
    for rows in [1usize, 2, 5] {
        let values: Vec<f64> = (0..rows * 256)
            .map(|i| ((i * 37) % 101) as f64 - 50.0)
            .collect();
        let input: EvalInput = HostTensor::from_vec(values, &[rows, 256]).unwrap().into();
        run_and_compare(&dev, &exec, &[input], None, &Tolerance::for_dtype)
            .unwrap_or_else(|e| panic!("rows {rows}: {e}"));
    }
}
