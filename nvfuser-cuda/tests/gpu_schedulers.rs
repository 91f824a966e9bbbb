//! The tuned schedulers on the GPU: every workload of the benchmark suite
//! (`nvfuser_core::workloads`) over a sweep of shapes (rows 1..64K, hidden 1..256K,
//! odd and non-multiple-of-vector sizes) through `FusionExecutorCache`, against the CPU
//! reference on random inputs; then the seed scenario: computed pointwise params with
//! the unroll factor changed give the same values as the automatic path. Skipped
//! without a GPU, required with `NVFUSER_REQUIRE_GPU=1`.
//!
//! ```text
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_schedulers -- --nocapture
//! ```

use std::collections::BTreeMap;

use nvfuser_core::eval::{EvalInput, HostTensor};
use nvfuser_core::scheduler::HeuristicParams;
use nvfuser_core::workloads::{self, WorkloadInput};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::{gpu_device, reduction_tolerance, run_and_compare};
use nvfuser_cuda::FusionExecutorCache;

fn eval_inputs(
    name: &str,
    dtype: DataType,
    rows: usize,
    hidden: usize,
    seed: u64,
) -> Vec<EvalInput> {
    workloads::inputs(name, dtype, rows, hidden)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, w)| match w {
            WorkloadInput::Tensor(d, s) => {
                EvalInput::Tensor(HostTensor::random(d, &s, seed * 31 + i as u64))
            }
            WorkloadInput::Scalar(v) => EvalInput::Scalar(v),
        })
        .collect()
}

const ROWS: &[usize] = &[1, 3, 128, 1000, 65536];
const HIDDEN: &[usize] = &[1, 7, 64, 1000, 1024, 4096, 12289, 32768, 262144];

#[test]
fn tuned_schedulers_match_the_cpu_reference() {
    let Some(device) = gpu_device() else { return };
    let mut compared = 0;
    let mut mismatches = Vec::new();
    let mut per_scheduler: BTreeMap<String, usize> = BTreeMap::new();
    let mut seed = 1;
    for &(name, build) in workloads::ALL {
        for dtype in [DataType::BF16, DataType::F32] {
            let exec = FusionExecutorCache::new(build(dtype).unwrap());
            for &rows in ROWS {
                for &hidden in HIDDEN {
                    if rows * hidden > 1 << 20 {
                        continue;
                    }
                    seed += 1;
                    let case = format!("{name} {dtype} [{rows}, {hidden}]");
                    let inputs = eval_inputs(name, dtype, rows, hidden, seed);
                    match run_and_compare(&device, &exec, &inputs, None, &reduction_tolerance) {
                        Ok(n) => compared += n,
                        Err(m) => mismatches.push(format!("{case}: {m}")),
                    }
                }
            }
            // Which scheduler ran it at one mid-size shape.
            let inputs = eval_inputs(name, dtype, 1000, 1024, 7);
            let tensors: Vec<_> = inputs
                .iter()
                .filter_map(|i| match i {
                    EvalInput::Tensor(h) => Some(device.tensor_from_host(h).unwrap()),
                    _ => None,
                })
                .collect();
            let mut args: Vec<nvfuser_cuda::Arg<'_>> = tensors.iter().map(Into::into).collect();
            for i in &inputs {
                if let EvalInput::Scalar(v) = i {
                    args.push(nvfuser_cuda::Arg::Scalar(*v));
                }
            }
            let (_, profile) = exec.run_profiled(&device, &args).unwrap();
            *per_scheduler.entry(profile.scheduler.clone()).or_default() += 1;
        }
    }
    println!(
        "tuned schedulers: {compared} outputs compared, {} mismatches; schedulers at [1000, 1024]: {per_scheduler:?}",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "mismatches:\n{}",
        mismatches.join("\n")
    );
    assert!(compared > 0);
}

/// The seed scenario: compute pointwise params, change the unroll factor, run with the
/// edited params, and get the same values as the automatic path.
#[test]
fn edited_pointwise_params_give_the_same_values() {
    let Some(device) = gpu_device() else { return };
    let fusion = workloads::gelu_tanh(DataType::BF16).unwrap();
    let exec = FusionExecutorCache::new(fusion);
    let x = HostTensor::random(DataType::BF16, &[513, 1000], 42);
    let xd = device.tensor_from_host(&x).unwrap();
    let args = [nvfuser_cuda::Arg::from(&xd)];
    let auto = exec.heuristics(&device, &args).unwrap();
    let HeuristicParams::Pointwise(mut p) = auto.clone() else {
        panic!("gelu took {auto:?}, expected pointwise params");
    };
    let before = p.unroll;
    p.unroll = if p.unroll == 1 { 4 } else { 1 };
    let edited = HeuristicParams::Pointwise(p);
    let a = exec.run(&device, &args).unwrap()[0]
        .to_host_tensor()
        .unwrap();
    let b = exec.run_with_params(&device, &args, &edited).unwrap()[0]
        .to_host_tensor()
        .unwrap();
    assert_eq!(a, b, "edited params changed the values");
    let src_auto = exec.cuda_source(&device, &args).unwrap();
    println!("seed scenario: unroll {before} -> edited, outputs identical ({} elements); automatic kernel {} bytes of CUDA", 513 * 1000, src_auto.len());
    // Invalid params are refused before anything is scheduled.
    let HeuristicParams::Pointwise(mut bad) = auto else {
        unreachable!()
    };
    bad.threads = 100;
    let err = exec
        .run_with_params(&device, &args, &HeuristicParams::Pointwise(bad))
        .unwrap_err();
    assert!(err.to_string().contains("threads = 100"), "{err}");
}

/// Fusions no single kernel can hold run through the executor as segments: a row
/// normalization next to a column reduction, and random numbers feeding both (dropout
/// and residual, then LayerNorm over the rows and a sum over the columns). Equal to the
/// CPU reference (the Philox stream is the same in every segment that draws it).
/// Dropout + residual + LayerNorm alone is one kernel (`gpu_creation.rs`).
#[test]
fn unschedulable_fusions_run_segmented_through_the_executor() {
    use nvfuser_core::builder::Size;
    use nvfuser_core::{FusionDefinition, ScalarValue};
    let Some(device) = gpu_device() else { return };
    let mut cases = Vec::new();
    // y = x - mean(x, rows) broadcast, z = max(x, cols): two reductions of different
    // shapes.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let m = fd.mean(x, &[1], true).unwrap();
    let y = fd.sub(x, m).unwrap();
    let z = fd.max(x, &[0], false).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(z).unwrap();
    let inputs = vec![EvalInput::Tensor(HostTensor::random(
        DataType::F32,
        &[257, 1000],
        3,
    ))];
    cases.push(("row mean + column max", fd.finish().unwrap(), inputs));
    // Dropout (uniform mask) + residual + LayerNorm over [rows, cols] bf16.
    let (rows, cols) = (300usize, 1024usize);
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let res = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let r = fd.define_scalar(DataType::I64).unwrap();
    let c = fd.define_scalar(DataType::I64).unwrap();
    let seed = fd.define_scalar(DataType::I64).unwrap();
    let offset = fd.define_scalar(DataType::I64).unwrap();
    let lo = fd.constant(0.0f32);
    let hi = fd.constant(1.0f32);
    let u = fd
        .uniform(
            &[Size::Val(r), Size::Val(c)],
            lo,
            hi,
            seed,
            offset,
            DataType::F32,
        )
        .unwrap();
    let p = fd.constant(0.1f32);
    let keep = fd.ge(u, p).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let zero = fd.constant(0.0f32);
    let dropped = fd.where_(keep, xf, zero).unwrap();
    let scale = fd.constant(1.0f32 / 0.9);
    let dropped = fd.mul(dropped, scale).unwrap();
    let rf = fd.cast(res, DataType::F32).unwrap();
    let h = fd.add(dropped, rf).unwrap();
    let (var, mean) = fd.var_mean(h, &[1], 0, true).unwrap();
    let eps = fd.constant(1e-5f32);
    let ve = fd.add(var, eps).unwrap();
    let rstd = fd.rsqrt(ve).unwrap();
    let hc = fd.sub(h, mean).unwrap();
    let yn = fd.mul(hc, rstd).unwrap();
    let yb = fd.cast(yn, DataType::BF16).unwrap();
    fd.add_output(yb).unwrap();
    let colsum = fd.sum(h, &[0], false).unwrap();
    fd.add_output(colsum).unwrap();
    let inputs = vec![
        EvalInput::Tensor(HostTensor::random(DataType::BF16, &[rows, cols], 5)),
        EvalInput::Tensor(HostTensor::random(DataType::BF16, &[rows, cols], 6)),
        EvalInput::Scalar(ScalarValue::from(rows as i64)),
        EvalInput::Scalar(ScalarValue::from(cols as i64)),
        EvalInput::Scalar(ScalarValue::from(1234i64)),
        EvalInput::Scalar(ScalarValue::from(0i64)),
    ];
    cases.push((
        "dropout + residual, LayerNorm and a column sum",
        fd.finish().unwrap(),
        inputs,
    ));
    for (name, fusion, inputs) in cases {
        let exec = FusionExecutorCache::new(fusion);
        let n = run_and_compare(&device, &exec, &inputs, None, &reduction_tolerance)
            .unwrap_or_else(|m| panic!("{name}: {m}"));
        let seg = exec
            .segmentation()
            .unwrap_or_else(|| panic!("{name}: expected a segmented run"));
        let kinds: Vec<String> = seg
            .segments()
            .iter()
            .map(|s| format!("{:?}", s.scheduler()))
            .collect();
        println!(
            "{name}: {n} outputs match the CPU reference, run as {} segments {kinds:?}",
            kinds.len()
        );
        // A second call reuses the segmented runtime: nothing is planned or compiled.
        let misses = exec.stats().misses;
        run_and_compare(&device, &exec, &inputs, None, &reduction_tolerance).unwrap();
        assert_eq!(
            exec.stats().misses,
            misses,
            "{name}: the second call rebuilt"
        );
    }
}
