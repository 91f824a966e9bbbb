//! Creation ops (`uniform`, `normal`, `full`, `iota`) beside reductions, as users write
//! them: dropout + residual + LayerNorm, dropout's mask in a bias gradient (a column
//! sum), noise inside a softmax, a constant tensor in a row sum. (An `iota` broadcast
//! along the rows, as causal masks build, is still a kernel of its own: treating it as
//! an `iota` with broadcast dims gave wrong rows on the GPU, fuzz seed 10102990.)
//! Each must plan as ONE kernel of a tuned reduction scheduler (the RNG is keyed on
//! the element's linear index, so the persistent and outer-reduction kernels compute it
//! where they need it), and equal the CPU reference on the GPU. Planning runs everywhere; the GPU part is skipped
//! without a GPU and required with `NVFUSER_REQUIRE_GPU=1`.

use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_core::scheduler::{DeviceInfo, InputInfo, RuntimeInfo};
use nvfuser_core::{DataType, ScalarValue};
use nvfuser_cuda::testing::{require_gpu, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};

mod creation_fusions;

use creation_fusions::{DROPOUT_BWD_BIAS, DROPOUT_RESIDUAL_LN};
use DataType::{BF16, F32};

/// The same with the mask's shape from size arguments (as the example once had to).
const DROPOUT_RESIDUAL_LN_SIZES: &str = "fn f(x: Tensor<bf16, [N, H]>, residual: Tensor<bf16, [N, H]>,
        w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, p: f32, scale: f32, seed: i64, offset: i64, eps: f32,
        rows: i64, cols: i64) -> (Tensor<bf16, [N, H]>, Tensor<bf16, [N, H]>) {
    let u = uniform([rows, cols], 0.0, 1.0, seed, offset, f32);
    let h = where_(u >= p, (x as f32) * scale, 0.0f32) + (residual as f32);
    let (var, mean) = h.var_mean([1], correction = 0, keepdim = true);
    let y = (h - mean) * rsqrt(var + eps) * (w as f32) + (b as f32);
    (h as bf16, y as bf16)
}";

/// Softmax of scores plus Gaussian noise.
const NOISY_SOFTMAX: &str =
    "fn f(x: Tensor<f32, [N, H]>, seed: i64, offset: i64) -> Tensor<f32, [N, H]> {
    let noise = normal([x.size(0), x.size(1)], 0.0, 0.5, seed, offset, f32);
    let s = x + noise;
    let e = (s - s.max([1], keepdim = true)).exp();
    e / e.sum([1], keepdim = true)
}";

/// A row sum with a constant tensor added (`full` in the row's shape).
const ROW_SUM_WITH_FULL: &str = "fn f(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N]> {
    (x + full([x.size(0), x.size(1)], 0.25, f32)).sum([1])
}";

enum Arg {
    T(DataType, usize),
    S(ScalarValue),
}

struct Case {
    name: &'static str,
    src: &'static str,
    /// The scheduler of its one kernel.
    scheduler: &'static str,
    /// `[N, H]` shapes tried; tensors take `[3, N, H]` (rank 3), `[N, H]` (rank 2) or
    /// `[H]` (rank 1).
    shapes: &'static [[usize; 2]],
    args: fn(usize, usize) -> Vec<Arg>,
}

fn dropout_ln_args(_n: usize, _h: usize) -> Vec<Arg> {
    vec![
        Arg::T(BF16, 2),
        Arg::T(BF16, 2),
        Arg::T(BF16, 1),
        Arg::T(BF16, 1),
        Arg::S(ScalarValue::from(0.25f32)),
        Arg::S(ScalarValue::from(1.0f32 / 0.75)),
        Arg::S(ScalarValue::from(77i64)),
        Arg::S(ScalarValue::from(12i64)),
        Arg::S(ScalarValue::from(1e-5f32)),
    ]
}

fn dropout_ln_sizes_args(n: usize, h: usize) -> Vec<Arg> {
    let mut v = dropout_ln_args(n, h);
    v.push(Arg::S(ScalarValue::from(n as i64)));
    v.push(Arg::S(ScalarValue::from(h as i64)));
    v
}

const SHAPES: &[[usize; 2]] = &[[1, 8], [37, 1000], [256, 4096], [3, 12289], [64, 1]];

const CASES: &[Case] = &[
    Case {
        name: "dropout + residual + layernorm",
        src: DROPOUT_RESIDUAL_LN,
        scheduler: "inner persistent",
        shapes: &[[1, 8], [37, 1000], [256, 4096], [3, 12288], [5, 1]],
        args: dropout_ln_args,
    },
    Case {
        name: "dropout + residual + layernorm, mask shape from size arguments",
        src: DROPOUT_RESIDUAL_LN_SIZES,
        scheduler: "",
        shapes: &[[1, 8], [37, 1000], [256, 4096]],
        args: dropout_ln_sizes_args,
    },
    Case {
        name: "dropout bwd + bias grad",
        src: DROPOUT_BWD_BIAS,
        scheduler: "outer reduction",
        shapes: SHAPES,
        args: |_, _| {
            vec![
                Arg::T(BF16, 2),
                Arg::S(ScalarValue::from(0.5f32)),
                Arg::S(ScalarValue::from(2.0f32)),
                Arg::S(ScalarValue::from(5i64)),
                Arg::S(ScalarValue::from(0i64)),
            ]
        },
    },
    Case {
        name: "softmax of scores + normal noise",
        src: NOISY_SOFTMAX,
        scheduler: "inner persistent",
        shapes: &[[1, 8], [37, 1000], [256, 4096], [5, 1]],
        args: |_, _| {
            vec![
                Arg::T(F32, 2),
                Arg::S(ScalarValue::from(9i64)),
                Arg::S(ScalarValue::from(3i64)),
            ]
        },
    },
    Case {
        name: "row sum with a full tensor",
        src: ROW_SUM_WITH_FULL,
        scheduler: "reduction",
        shapes: SHAPES,
        args: |_, _| vec![Arg::T(F32, 2)],
    },
];

fn fusion(case: &Case) -> nvfuser_core::Fusion {
    match nvfuser_core::dsl::build_str(case.src) {
        Ok(mut f) => f.remove(0).0,
        Err(e) => panic!("{}: {e:?}", case.name),
    }
}

fn inputs(case: &Case, [n, h]: [usize; 2], seed: &mut u64) -> Vec<EvalInput> {
    (case.args)(n, h)
        .into_iter()
        .map(|a| match a {
            Arg::T(d, rank) => {
                *seed += 1;
                let shape: &[usize] = match rank {
                    3 => &[3, n, h],
                    2 => &[n, h],
                    _ => &[h],
                };
                EvalInput::Tensor(HostTensor::random(d, shape, *seed))
            }
            Arg::S(v) => EvalInput::Scalar(v),
        })
        .collect()
}

fn runtime_info(inputs: &[EvalInput]) -> RuntimeInfo {
    let shapes: Vec<(DataType, Vec<i64>)> = inputs
        .iter()
        .filter_map(|i| match i {
            EvalInput::Tensor(t) => {
                Some((t.dtype(), t.shape().iter().map(|&x| x as i64).collect()))
            }
            EvalInput::Scalar(_) => None,
        })
        .collect();
    let refs: Vec<(DataType, &[i64])> = shapes.iter().map(|(d, s)| (*d, s.as_slice())).collect();
    let mut info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &refs);
    info.inputs = inputs
        .iter()
        .map(|i| match i {
            EvalInput::Scalar(v) => InputInfo::Scalar(*v),
            EvalInput::Tensor(_) => info.inputs.remove(0),
        })
        .collect();
    info
}

/// Planned for an H100 without a GPU: one kernel, of the expected tuned scheduler.
#[test]
fn creation_ops_beside_reductions_plan_one_tuned_kernel() {
    let mut seed = 0;
    for case in CASES {
        let exec = FusionExecutorCache::new(fusion(case));
        for &shape in case.shapes {
            let info = runtime_info(&inputs(case, shape, &mut seed));
            let plan = exec
                .plan_for(&info, None)
                .unwrap_or_else(|e| panic!("{} {shape:?}: {e}", case.name));
            let kernels: Vec<_> = plan
                .segments
                .iter()
                .filter(|s| s.scheduler != "no-op")
                .collect();
            assert_eq!(kernels.len(), 1, "{} {shape:?}:\n{plan}", case.name);
            let s = kernels[0];
            assert!(
                s.fallback.is_none() && !s.scheduler.starts_with("default"),
                "{} {shape:?}: {} (refused: {}; fallback: {:?})",
                case.name,
                s.scheduler,
                s.refused,
                s.fallback
            );
            if !case.scheduler.is_empty() && shape[1] > 1 {
                assert_eq!(
                    s.scheduler, case.scheduler,
                    "{} {shape:?}:\n{plan}",
                    case.name
                );
            }
        }
    }
}

fn tolerance(dtype: DataType) -> Tolerance {
    match dtype {
        DataType::F32 => Tolerance::new(2e-4, 2e-4),
        DataType::BF16 => Tolerance::new(1.6e-2, 2e-3),
        other => Tolerance::for_dtype(other),
    }
}

#[test]
fn creation_ops_beside_reductions_match_the_cpu_reference() {
    if require_gpu().is_none() {
        return;
    }
    let device = Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}"));
    let mut compared = 0;
    let mut mismatches = Vec::new();
    let mut seed = 1000;
    for case in CASES {
        let exec = FusionExecutorCache::new(fusion(case));
        for &shape in case.shapes {
            let inputs = inputs(case, shape, &mut seed);
            match run_and_compare(&device, &exec, &inputs, None, &tolerance) {
                Ok(n) => compared += n,
                Err(m) => mismatches.push(format!("{} {shape:?}: {m}", case.name)),
            }
        }
    }
    println!(
        "creation ops beside reductions: {compared} outputs compared, {} mismatches",
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    assert!(compared > 0);
}

/// The mask's shape from size arguments that disagree with `x` (one row more, or
/// fewer columns): a typed error on the CPU device and on the GPU, never a kernel that
/// reads past `x` or a silently broadcast result.
#[test]
fn a_mask_shape_that_disagrees_with_the_input_is_a_typed_error() {
    let case = &CASES[1];
    let exec = FusionExecutorCache::new(fusion(case));
    let mut devices = vec![Device::cpu()];
    if require_gpu().is_some() {
        devices.push(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")));
    }
    for device in &devices {
        for (rows, cols) in [(257usize, 1024usize), (256, 1000), (256, 1)] {
            let mut seed = 7;
            let mut inputs = inputs(case, [256, 1024], &mut seed);
            let k = inputs.len();
            inputs[k - 2] = EvalInput::Scalar(ScalarValue::from(rows as i64));
            inputs[k - 1] = EvalInput::Scalar(ScalarValue::from(cols as i64));
            let tensors = nvfuser_cuda::testing::upload_inputs(device, &inputs).unwrap();
            let args = nvfuser_cuda::testing::input_args(&inputs, &tensors);
            match exec.run(device, &args) {
                Ok(_) => panic!("{device}: mask [{rows}, {cols}] beside x [256, 1024] ran"),
                Err(e) => println!("{device}: mask [{rows}, {cols}]: {e}"),
            }
        }
    }
}
