//! `scatter` and `scatter_add` planned for an H100 without a GPU: each fusion of
//! `scatter_cases` plans, every kernel of its plan compiles with NVRTC (sm_80, sm_90)
//! where NVRTC is found, no kernel is the default schedule, and the plans are
//! snapshots. `gpu_scatter` runs the same fusions on a GPU.

mod scatter_cases;

use nvfuser_core::scheduler::{DeviceInfo, InputInfo, RuntimeInfo};
use nvfuser_core::{DataType, ScalarValue};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, FusionExecutorCache, GpuArch};
use scatter_cases::CASES;

fn plan_text(src: &str, sizes: &[&[usize]]) -> String {
    let fusion = nvfuser_core::dsl::build_str(src)
        .unwrap_or_else(|e| panic!("{src}: {e:?}"))
        .remove(0)
        .0;
    let sizes: Vec<Vec<i64>> = sizes
        .iter()
        .map(|s| s.iter().map(|&n| n as i64).collect())
        .collect();
    // Tensors contiguous, in order; integer scalars 2.
    let mut next = sizes.iter();
    let inputs = fusion
        .inputs()
        .iter()
        .map(|&v| {
            if fusion.val(v).is_tensor() {
                let s = next.next().expect("a size per tensor input");
                let one = RuntimeInfo::contiguous(
                    DeviceInfo::h100_for_tests(),
                    &[(fusion.val(v).dtype, s.as_slice())],
                );
                one.inputs[0].clone()
            } else {
                InputInfo::Scalar(ScalarValue::Int(2))
            }
        })
        .collect();
    let info = RuntimeInfo {
        device: DeviceInfo::h100_for_tests(),
        inputs,
    };
    let exec = FusionExecutorCache::new(fusion);
    let plan = exec
        .plan_for(&info, None)
        .unwrap_or_else(|e| panic!("{src}: {e}"));
    let mut text = plan.to_string();
    for k in plan.kernels() {
        let cuda = k.cuda_source();
        // The kernel itself, without the shared preamble.
        let start = cuda.find("extern \"C\" __global__").unwrap_or(0);
        text.push_str(&cuda[start..]);
        if require_nvrtc().is_some() {
            for arch in [GpuArch::SM80, GpuArch::SM90] {
                compile(&k.cuda_source(), &k.abi.name, arch)
                    .unwrap_or_else(|e| panic!("{src} ({arch}): {e}"));
            }
        }
    }
    text
}

#[test]
fn scatters_plan_tuned_kernels_that_compile() {
    let mut all = String::new();
    for c in CASES {
        let text = plan_text(c.src, c.calls[0]);
        assert!(
            !text.contains(": default"),
            "{}: the default schedule\n{text}",
            c.name
        );
        all.push_str(&format!("=== {} ===\n{text}\n", c.name));
    }
    insta::assert_snapshot!(all);
}

/// Every call of `gpu_scatter`'s sweep runs on the CPU device and plans for an H100 (the
/// launch's checks included), so the GPU test's inputs are valid calls.
#[test]
fn every_call_of_the_gpu_sweep_runs_on_the_cpu_and_plans() {
    use nvfuser_core::eval::HostTensor;
    use nvfuser_cuda::{Arg, Device};
    let cpu = Device::cpu();
    let mut planned = 0;
    for c in CASES {
        let fusion = nvfuser_core::dsl::build_str(c.src).unwrap().remove(0).0;
        let dtypes: Vec<DataType> = fusion
            .inputs()
            .iter()
            .filter(|&&v| fusion.val(v).is_tensor())
            .map(|&v| fusion.val(v).dtype)
            .collect();
        let exec = FusionExecutorCache::new(fusion);
        for sizes in c.calls {
            let tensors: Vec<_> = dtypes
                .iter()
                .zip(sizes.iter())
                .enumerate()
                .map(|(j, (&dt, shape))| {
                    let h = if j == c.index_input {
                        let n: usize = shape.iter().product();
                        let v: Vec<i64> =
                            (0..n).map(|k| (k * 7 % sizes[0][c.axis]) as i64).collect();
                        HostTensor::from_vec(v, shape).unwrap().cast(dt)
                    } else {
                        HostTensor::random(dt, shape, 1)
                    };
                    cpu.tensor_from_host(&h).unwrap()
                })
                .collect();
            let args: Vec<Arg> = tensors.iter().map(Arg::from).collect();
            exec.run(&cpu, &args)
                .unwrap_or_else(|e| panic!("{} at {sizes:?}: {e}", c.name));
            let kernels = exec
                .plan_kernels(DeviceInfo::h100_for_tests(), &args)
                .unwrap_or_else(|e| panic!("{} at {sizes:?}: {e}", c.name));
            planned += kernels.len();
        }
    }
    assert!(planned > 0);
}

/// A pad whose widths are a scalar input and scalar math on a size, fused with its
/// producer and consumer: one tuned kernel that reads the widths as scalar arguments.
pub const PAD_SCALAR: &str = "fn f(x: Tensor<f32, [N, H]>, a: i64) -> Tensor<f32, [_, _]> {
    (x * 2.0).pad([(a, 1), (0, x.size(0) % 2)], 0.5).exp()
}";

#[test]
fn pad_with_scalar_widths_plans_one_tuned_kernel() {
    let text = plan_text(PAD_SCALAR, &[&[7, 33]]);
    assert!(
        text.contains("1 kernel") && !text.contains(": default"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

/// The calls of `gpu_scatter`'s pad test run on the CPU device and plan for an H100;
/// a negative width is refused on the CPU device and by the planner's read checks.
#[test]
fn every_call_of_the_gpu_pad_test_runs_on_the_cpu_and_plans() {
    use nvfuser_core::eval::HostTensor;
    use nvfuser_cuda::{Arg, Device};
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(
        nvfuser_core::dsl::build_str(PAD_SCALAR)
            .unwrap()
            .remove(0)
            .0,
    );
    for (n, h) in [(7usize, 33usize), (8, 64), (1, 1), (300, 517), (64, 4096)] {
        for a in [0i64, 1, 2, 5] {
            let x = cpu
                .tensor_from_host(&HostTensor::random(DataType::F32, &[n, h], 3))
                .unwrap();
            let args = [Arg::from(&x), Arg::Scalar(ScalarValue::Int(a))];
            let out = exec.run(&cpu, &args).unwrap();
            assert_eq!(out[0].sizes(), [n + a as usize + 1, h + n % 2]);
            exec.plan_kernels(DeviceInfo::h100_for_tests(), &args)
                .unwrap_or_else(|e| panic!("[{n}, {h}] a = {a}: {e}"));
        }
    }
    let x = cpu
        .tensor_from_host(&HostTensor::random(DataType::F32, &[2, 3], 3))
        .unwrap();
    let args = [Arg::from(&x), Arg::Scalar(ScalarValue::Int(-1))];
    let e = exec.run(&cpu, &args).unwrap_err().to_string();
    assert!(e.contains("pad"), "{e}");
    let e = exec
        .plan_kernels(DeviceInfo::h100_for_tests(), &args)
        .map(|k| k.len());
    assert!(e.is_err(), "planned {e:?}");
}

/// A scatter into an empty dim with a non-empty index is refused on the CPU device and
/// by the whole fusion's read checks before any launch (no kernel would run for the
/// empty output, so nothing on the GPU could report the bad index).
#[test]
fn scatter_into_an_empty_dim_is_refused_before_any_launch() {
    use nvfuser_core::eval::HostTensor;
    use nvfuser_cuda::{Arg, Device};
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(
        nvfuser_core::dsl::build_str(CASES[0].src)
            .unwrap()
            .remove(0)
            .0,
    );
    let x = cpu
        .tensor_from_host(&HostTensor::zeros(DataType::F32, &[0, 3]).unwrap())
        .unwrap();
    let i = cpu
        .tensor_from_host(&HostTensor::zeros(DataType::I64, &[2, 3]).unwrap())
        .unwrap();
    let s = cpu
        .tensor_from_host(&HostTensor::zeros(DataType::F32, &[2, 3]).unwrap())
        .unwrap();
    let args = [Arg::from(&x), Arg::from(&i), Arg::from(&s)];
    let e = exec.run(&cpu, &args).unwrap_err().to_string();
    assert!(e.contains("scatter"), "{e}");
    let reads = nvfuser_core::ir::reads::ReadChecks::of(exec.fusion());
    let sizes = |ext: &nvfuser_core::ir::Extent| -> Option<i64> {
        use nvfuser_core::ir::Extent;
        match ext {
            Extent::Dim { tensor, axis } => {
                let k = exec.fusion().input_position(*tensor)?;
                Some([[0i64, 3], [2, 3], [2, 3]][k][*axis as usize])
            }
            Extent::Const(c) => Some(*c),
            _ => None,
        }
    };
    let call = nvfuser_core::ir::reads::CallValues {
        extent: &sizes,
        scalar: &|_| None,
    };
    let e = reads
        .check(exec.fusion(), &call, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("scatter") && e.contains("empty"), "{e}");
}
