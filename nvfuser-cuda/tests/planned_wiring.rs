//! Kernels the registry plans (H100, no GPU) read the right producers and give outputs
//! the reference's shapes: regressions of GPU fuzz cases that computed wrong values.

use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};

fn plan(src: &str, sizes: &[&[i64]]) -> (nvfuser_cuda::FusionExecutorCache, String) {
    let (exec, kernel) = nvfuser_cuda::testing::plan_one_kernel(src, sizes);
    let src = kernel.cuda_source();
    (exec, src)
}

const SEED_1045: &str = r#"
fn fuzz_case(t0: Tensor<bf16, [_, _]>, _t1: Tensor<f64, []>) -> Tensor<bf16, [1, _]> {
    let t2 = t0.atan();
    let t3 = t0.cos();
    let t4 = t0.tanh();
    let t6 = t4 * 0.01;
    let t8 = t6 + 1.0;
    let t9 = t8 as f32;
    let t10 = t9.prod([0]);
    let t11 = t10 as bf16;
    let t12 = t11.broadcast([true, false]);
    t12
}
"#;

#[test]
fn seed_1045_dead_uses_do_not_rewire_the_kernel() {
    let (_, src) = plan(SEED_1045, &[&[1024, 1], &[]]);
    eprintln!("{src}");
    assert!(
        !src.contains("nvf_atan("),
        "dead atan in the kernel:\n{src}"
    );
    assert!(!src.contains("nvf_cos("), "dead cos in the kernel:\n{src}");
}

/// The output sizes of the fusion the registry schedules for `sizes` (contiguous
/// inputs, scalars none), evaluated as the launcher does, against the CPU reference's
/// output shapes.
fn planned_output_shapes_match_reference(src: &str, sizes: &[&[i64]]) {
    use nvfuser_core::eval::HostTensor;
    use nvfuser_core::scheduler::{compute_heuristics, schedule_with};
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let tensors: Vec<_> = fusion
        .inputs()
        .iter()
        .filter(|&&v| fusion.val(v).is_tensor())
        .copied()
        .collect();
    assert_eq!(tensors.len(), fusion.inputs().len(), "tensor inputs only");
    let shapes: Vec<(nvfuser_core::DataType, &[i64])> = tensors
        .iter()
        .zip(sizes)
        .map(|(&v, s)| (fusion.val(v).dtype, *s))
        .collect();
    let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes);
    let params = compute_heuristics(&fusion, &info).unwrap();
    let sf = schedule_with(&fusion, &params).unwrap();
    let f = sf.fusion();
    let dim = |t: nvfuser_core::ValId, axis: usize| {
        let k = f.input_position(t)?;
        sizes.get(k)?.get(axis).copied()
    };
    let planned: Vec<Vec<i64>> = f
        .outputs()
        .iter()
        .map(|o| {
            f.tensor_type(o.val)
                .unwrap()
                .shape()
                .map(|d| d.extent.eval(&dim, &|_| None).unwrap())
                .collect()
        })
        .collect();
    let args: Vec<nvfuser_core::eval::EvalInput> = shapes
        .iter()
        .map(|(dt, s)| {
            let s: Vec<usize> = s.iter().map(|&x| x as usize).collect();
            HostTensor::zeros(*dt, &s).unwrap().into()
        })
        .collect();
    let reference: Vec<Vec<i64>> = nvfuser_core::eval::evaluate(&fusion, &args)
        .unwrap()
        .iter()
        .map(|t| t.shape().iter().map(|&x| x as i64).collect())
        .collect();
    assert_eq!(planned, reference, "params {params:?}");
}

/// GPU fuzz seed 5405: a full reduction of `[T0.size(0), 256]` in the inner persistent
/// scheduler bound `T0.size(0)` to the whole row (512) instead of 512 / 256, so the
/// pointwise output `atan(t0)` was allocated as `[512, 256]`.
#[test]
fn seed_5405_persistent_full_reduction_keeps_output_extents() {
    let src = r#"
fn fuzz_case(t0: Tensor<f64, [_, 256]>) -> (Tensor<f64, [1, 1]>, Tensor<f64, [_, 256]>) {
    let t1 = t0.atan();
    let t2 = t1.reshape([-1]);
    let t3 = t0.min([0, 1]);
    let t4 = t3.broadcast([true, true]);
    (t4, t1)
}
"#;
    planned_output_shapes_match_reference(src, &[&[2, 256]]);
    planned_output_shapes_match_reference(src, &[&[1, 256]]);
}

/// Squeezes of math are moved to the inputs, so the tuned schedulers take these fusions
/// (the default schedule refused every squeeze); each kernel compiles.
#[test]
fn squeezed_fusions_take_the_tuned_schedulers() {
    use nvfuser_core::scheduler::SchedulerKind;
    let cases: [(&str, &[&[i64]], SchedulerKind); 3] = [
        (
            r#"
fn k(x: Tensor<f32, [_, 1, _]>, y: Tensor<f32, [1, 1, _]>) -> Tensor<f32, [_, _]> {
    let s = x.relu() + y;
    s.squeeze([1])
}
"#,
            &[&[64, 1, 1024], &[1, 1, 1024]],
            SchedulerKind::Pointwise,
        ),
        (
            r#"
fn k(x: Tensor<f32, [_, 1, _]>) -> Tensor<f32, [_, _]> {
    let s = (x * 2.0).squeeze([1]);
    let m = s.max([1]).broadcast([false, true]);
    let e = (s - m).exp();
    e / e.sum([1]).broadcast([false, true])
}
"#,
            &[&[128, 1, 1024]],
            SchedulerKind::InnerPersistent,
        ),
        (
            r#"
fn k(x: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_]> {
    x.squeeze([2]).sum([1])
}
"#,
            &[&[128, 4096, 1]],
            SchedulerKind::Reduction,
        ),
    ];
    plans_one_kernel_of(&cases);
}

/// A reduction whose reduced dims are in the middle only because size-1 dims sit beside
/// them (`x[A, B, 1].sum([1])`, GPU fuzz seed 11337506) is reduced without those dims
/// (`scheduler::squeeze_reduction_broadcasts`): a tuned scheduler takes it, where the
/// default schedule did.
#[test]
fn reductions_beside_size_one_dims_take_the_tuned_schedulers() {
    use nvfuser_core::scheduler::SchedulerKind;
    let cases: [(&str, &[&[i64]], SchedulerKind); 3] = [
        (
            "fn k(x: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_, 1]> { x.sum([1]) }",
            &[&[2048, 31, 1]],
            SchedulerKind::InnerPersistent,
        ),
        (
            "fn k(x: Tensor<f32, [_, _, 1]>) -> Tensor<f32, [_, 1]> { (x * 2.0).sum([1]) + 1.0 }",
            &[&[256, 4096, 1]],
            SchedulerKind::InnerPersistent,
        ),
        (
            "fn k(x: Tensor<f32, [_, _, 1]>) -> (Tensor<f32, [_, 1]>, Tensor<f32, [_, 1]>) { x.var_mean([1], 1) }",
            &[&[64, 100000, 1]],
            SchedulerKind::Reduction,
        ),
    ];
    plans_one_kernel_of(&cases);
}

/// Fuzz seeds 1700304 and 1700982 (CPU mode): a segment whose output is a squeeze of its
/// input. The squeeze was taken as a vector load and its (absent) first reader indexed:
/// a panic. Outputs written by a squeeze are stored, not loaded. (As a whole fusion the
/// output is a view of the input and needs no kernel, so the segment's kernel is
/// scheduled directly, as the segmented runtime schedules it.)
#[test]
fn a_squeeze_written_to_an_output_is_planned() {
    use nvfuser_core::codegen::{generate, KernelOptions};
    use nvfuser_core::scheduler::{compute_heuristics, schedule_with};
    let src = r#"
fn k(t0: Tensor<f32, [_, 1, _]>) -> Tensor<f32, [_, _]> {
    t0.squeeze([1])
}
"#;
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let shapes = [(nvfuser_core::DataType::F32, &[64i64, 1, 1024][..])];
    let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes);
    let params = compute_heuristics(&fusion, &info).unwrap();
    let sf = schedule_with(&fusion, &params).unwrap();
    let cuda = generate(&sf, &KernelOptions::default())
        .unwrap()
        .cuda_source();
    assert!(cuda.contains("__global__"), "{cuda}");
    // Through the executor, the output is a view: no kernel.
    let exec = nvfuser_cuda::FusionExecutorCache::new(fusion);
    let (_, kernel) = exec.generate_for(&info, None).unwrap();
    assert!(kernel.is_none());
}

/// Fuzz seed 1800568 (CPU mode): an input at an offset of 6 f16 elements loaded through
/// a squeeze with 8-byte vectors: the launch check refused the call. The heuristics
/// now limit the vector by every input a squeeze loads.
#[test]
fn squeezed_loads_follow_the_input_alignment() {
    use nvfuser_core::scheduler::{compute_heuristics, HeuristicParams, InputInfo, TensorInfo};
    let fusion = nvfuser_core::dsl::build_str(
        r#"
fn k(t0: Tensor<f16, [1, _, _, _]>) -> Tensor<i32, [_, _, _]> {
    (t0 as i32).squeeze([0])
}
"#,
    )
    .unwrap()
    .remove(0)
    .0;
    let info = |alignment: u32| RuntimeInfo {
        device: DeviceInfo::h100_for_tests(),
        inputs: vec![InputInfo::Tensor(TensorInfo {
            dtype: nvfuser_core::DataType::F16,
            sizes: vec![1, 32, 63, 32],
            strides: vec![64512, 2016, 32, 1],
            alignment,
        })],
    };
    let vector = |alignment| match compute_heuristics(&fusion, &info(alignment)).unwrap() {
        HeuristicParams::Pointwise(p) => p.vectorize,
        other => panic!("{other:?}"),
    };
    assert_eq!(vector(4), 2);
    assert!(vector(16) > 2);
}

/// Fuzz seed 1500613: `full([t.size(0), 1])` beside `t` in one kernel (a segment of
/// this fusion). The full's extent was the host-computed scalar and `t`'s its dim, equal
/// but spelled apart, so the grid was "bound to two extents" and every scheduler refused
/// the segment. A size given by `x.size(d)` now has x's own extent.
#[test]
fn a_size_taken_from_a_tensor_is_that_tensors_extent() {
    let src = r#"
fn fuzz_case(t0: Tensor<f32, [17, _]>, t1: Tensor<f64, [_]>) -> (Tensor<f16, [_]>, Tensor<f64, [_, 1]>, Tensor<f16, [_]>) {
    let t3 = t1.broadcast([false, true]);
    let s4 = t3.size(0);
    let t6 = full([s4, 1], 1.5, f16);
    let t7 = t6 as f32;
    let t8 = t7.sum([1]);
    let t9 = t8 as f16;
    let t10 = t3 as i64;
    let t13 = t10 - t6;
    let t14 = t13.squeeze([1]);
    let t17 = t13 as f32;
    let t18 = t17.var([1], 0);
    let t20 = t14.asinh();
    (t20, t3, t9)
}
"#;
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let cpu = nvfuser_cuda::Device::cpu();
    let t0 = cpu.zeros(nvfuser_core::DataType::F32, [17, 1000]).unwrap();
    let t1 = cpu.zeros(nvfuser_core::DataType::F64, [1000]).unwrap();
    let exec = nvfuser_cuda::FusionExecutorCache::new(fusion);
    let kernels = exec
        .plan_kernels(DeviceInfo::h100_for_tests(), &[(&t0).into(), (&t1).into()])
        .unwrap();
    assert!(!kernels.is_empty());
}

/// Each `(source, input sizes, kind)` plans one kernel of that scheduler for an H100
/// (contiguous inputs), which compiles with NVRTC where it is present.
fn plans_one_kernel_of(cases: &[(&str, &[&[i64]], nvfuser_core::scheduler::SchedulerKind)]) {
    let nvrtc = nvfuser_cuda::testing::require_nvrtc().is_some();
    for &(src, sizes, kind) in cases {
        let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
        let shapes: Vec<(nvfuser_core::DataType, &[i64])> = fusion
            .inputs()
            .iter()
            .zip(sizes)
            .map(|(&v, s)| (fusion.val(v).dtype, *s))
            .collect();
        let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes);
        let exec = nvfuser_cuda::FusionExecutorCache::new(fusion);
        let (params, kernel) = exec
            .generate_for(&info, None)
            .unwrap_or_else(|e| panic!("{src}: {e}"));
        assert_eq!(params.kind(), kind, "{src}");
        let kernel = kernel.expect("a kernel");
        if nvrtc {
            nvfuser_cuda::compile(
                &kernel.cuda_source(),
                &kernel.abi.name,
                nvfuser_cuda::GpuArch::SM90,
            )
            .unwrap_or_else(|e| panic!("{src}: {e}"));
        }
    }
}

/// Stateful random ops plan as any other for a call that leaves out the generator's
/// seed and offset (they are filled in): dropout with the generator is one pointwise
/// kernel whose parameters include both, compiled where NVRTC is.
#[test]
fn stateful_random_ops_plan_one_kernel_with_the_generator_inputs() {
    let src = r#"
fn dropout(x: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
    let u = rand_uniform([x.size(0), x.size(1)], 0.0, 1.0, f32);
    let y = where_(u < 0.9, (x as f32) * (1.0 / 0.9), 0.0);
    y as bf16
}
"#;
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    assert_eq!(fusion.generator_inputs().map(|g| g.draws), Some(1));
    let cpu = nvfuser_cuda::Device::cpu();
    let x = cpu
        .zeros(nvfuser_core::DataType::BF16, [1000, 4096])
        .unwrap();
    let exec = nvfuser_cuda::FusionExecutorCache::new(fusion);
    let before = cpu.rng_state();
    let kernels = exec
        .plan_kernels(DeviceInfo::h100_for_tests(), &[(&x).into()])
        .unwrap();
    // Planning reads the generator but does not move it.
    assert_eq!(cpu.rng_state(), before);
    assert_eq!(kernels.len(), 1);
    let src = kernels[0].cuda_source();
    assert!(
        src.contains("nvf_philox") || src.contains("philox"),
        "{src}"
    );
    if nvfuser_cuda::testing::require_nvrtc().is_some() {
        nvfuser_cuda::compile(&src, &kernels[0].abi.name, nvfuser_cuda::GpuArch::SM90)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
