//! Every kernel of nvfuser-core's manual-schedule corpus, compiled by real NVRTC for
//! sm_80 and sm_90 (no GPU needed). Skips with a printed reason without NVRTC; fails
//! when `NVFUSER_REQUIRE_NVRTC=1`.

use nvfuser_core::codegen::{corpus, generate, KernelOptions};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, Error, GpuArch};

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn corpus_compiles_for_sm80_and_sm90() {
    if require_nvrtc().is_none() {
        return;
    }
    let mut failures = Vec::new();
    let mut compiled = 0;
    for (name, sf) in corpus::all().expect("corpus schedules") {
        let opts = KernelOptions {
            name: name.to_string(),
            ..Default::default()
        };
        let kernel =
            generate(&sf, &opts).unwrap_or_else(|e| panic!("{name}: lowering failed: {e}"));
        let src = kernel.cuda_source();
        for arch in [GpuArch::SM80, GpuArch::SM90] {
            match compile(&src, name, arch) {
                Ok(_) => compiled += 1,
                Err(Error::Compile(f)) => failures.push(format!("{name} ({arch}):\n{}", f.log)),
                Err(e) => failures.push(format!("{name} ({arch}): {e}")),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "NVRTC rejected generated kernels:\n{}",
        failures.join("\n")
    );
    eprintln!("compiled {compiled} corpus kernels with NVRTC");
}

/// The kernel the registry plans for `src` on an H100 with contiguous inputs of
/// `sizes` (one per tensor input): each tensor is one parameter pair of the signature,
/// and the kernel compiles.
fn planned_kernel_compiles(src: &str, sizes: &[&[i64]]) {
    planned_kernel_compiles_with(src, sizes, 1)
}

fn planned_kernel_compiles_with(src: &str, sizes: &[&[i64]], n_outputs: usize) {
    use nvfuser_core::codegen::ParamKind;
    let (_, kernel) = nvfuser_cuda::testing::plan_one_kernel(src, sizes);
    let names: Vec<&str> = kernel.abi.params.iter().map(|p| p.name.as_str()).collect();
    let mut unique = names.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), names.len(), "repeated parameters: {names:?}");
    let outputs = kernel
        .abi
        .params
        .iter()
        .filter(|p| matches!(p.kind, ParamKind::TensorData { input: false, .. }))
        .count();
    assert_eq!(outputs, n_outputs, "{names:?}");
    if require_nvrtc().is_some() {
        let src = kernel.cuda_source();
        for arch in [GpuArch::SM80, GpuArch::SM90] {
            compile(&src, &kernel.abi.name, arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        }
    }
}

/// Fuzzer seed 226: a tensor returned twice was listed twice in the kernel signature
/// (NVRTC: "duplicate parameter name").
#[test]
fn an_output_returned_twice_is_one_parameter() {
    planned_kernel_compiles(
        r#"
fn fuzz_case(
    t0: Tensor<i32, [_, _]>,
    #[layout(contiguity = [false])] _t1: Tensor<i32, [_]>,
) -> (Tensor<i32, [_, _]>, Tensor<i32, [_, _]>) {
    let t2 = t0 + t0;
    (t2, t2)
}
"#,
        &[&[100, 128], &[100]],
    );
}

/// Fuzzer seeds 136, 1917, 2065, 3005, 3577, 4300, 4845, 4982: the init of an i32 `max`
/// was the literal `-2147483648`, a `long` in C++ (the negation of 2147483648), so
/// `nvf_block_allreduce_x(int, NvfMax, long, int*)` failed template deduction. Every
/// reduction init is now cast to the accumulator type.
#[test]
fn i32_max_reduction_init_is_an_int() {
    planned_kernel_compiles(
        r#"
fn fuzz_case(t1: Tensor<i32, [_]>) -> Tensor<i32, []> {
    let t6 = t1.max([0]);
    t6
}
"#,
        &[&[3]],
    );
}

/// The init literal of every reduction over every dtype has the accumulator's C++ type
/// (block and grid reductions, all of max/min/sum/prod).
#[test]
fn reduction_inits_have_the_accumulator_type() {
    for dt in ["i32", "i64", "f16", "bf16", "f32", "f64"] {
        for op in ["max", "min", "sum", "prod"] {
            let out = if dt == "i32" && matches!(op, "sum" | "prod") {
                "i64"
            } else {
                dt
            };
            for size in [3, 100_000] {
                planned_kernel_compiles(
                    &format!(
                        "fn fuzz_case(t0: Tensor<{dt}, [_]>) -> Tensor<{out}, []> {{\n    let t1 = t0.{op}([0]);\n    t1\n}}\n"
                    ),
                    &[&[size]],
                );
            }
        }
    }
}

/// Fuzzer seed 1959 (shrunk): two bf16 outputs of a 4-d pointwise fusion with a reshape
/// beside them; NVRTC reported `identifier "T4" is undefined`: inlining placed the
/// register tensor of `t4` inside the loop of one consumer, then the pointwise schedule
/// moved the store cache of `t5` into a loop of its own, leaving `t4`'s other consumer
/// outside (`settle_shared_producers` now lowers such positions).
#[test]
fn seed_1959_pointwise_two_outputs_beside_a_reshape() {
    planned_kernel_compiles_with(
        r#"
fn fuzz_case(
    t0: Tensor<bf16, [_, _, _, _]>,
    _t1: Tensor<i64, [_, _]>,
    _s2: f32,
) -> (Tensor<bf16, [_, _, _, _]>, Tensor<bf16, [_, _, _, _]>) {
    let t3 = t0 < t0;
    let t4 = t0.erf();
    let t5 = t4.atan();
    let s6 = t5.size(2);
    let s7 = t5.size(3);
    let t8 = t5.reshape([-1, s6, s7]);
    let t9 = t4 - t5;
    (t9, t5)
}
"#,
        &[&[64, 5, 7, 128], &[7, 128]],
        2,
    );
}

/// The f16 case of the GPU fuzz run (`sum((a+b)*3.0)` over the last dim) plans and
/// compiles.
#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn f16_sum_of_scaled_sum_compiles() {
    planned_kernel_compiles(
        r#"
fn fuzz_case(a: Tensor<f16, [_, _, _]>, b: Tensor<f16, [_, _, _]>) -> Tensor<f16, [_, _]> {
    let c = a + b;
    let d = c * 3.0;
    let e = d.sum([-1]);
    e
}
"#,
        &[&[2, 4, 8], &[2, 4, 8]],
    );
}

/// `triu`/`tril` expand into iota, comparisons and `where_`: one pointwise kernel (the
/// iotas' broadcasts are folded into them, `fold_creation_broadcasts`; they ran as four
/// small segments of their own before), never the default schedule, and it compiles.
#[test]
fn triangles_plan_to_tuned_kernels() {
    use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
    let fusion = nvfuser_core::dsl::build_str(
        "fn f(x: Tensor<bf16, [B, S, S]>, m: Tensor<f32, [S, S]>) -> Tensor<f32, [B, S, S]> {
            (x as f32).tril(0) + m.triu(diagonal = 1)
        }",
    )
    .unwrap()
    .remove(0)
    .0;
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[
            (nvfuser_core::DataType::BF16, &[8, 512, 512][..]),
            (nvfuser_core::DataType::F32, &[512, 512][..]),
        ],
    );
    let exec = nvfuser_cuda::FusionExecutorCache::new(fusion);
    let plan = exec.plan_for(&info, None).unwrap();
    assert_eq!(plan.segments.len(), 1, "{plan}");
    for segment in &plan.segments {
        assert_eq!(segment.scheduler, "pointwise", "{plan}");
        assert!(segment.fallback.is_none(), "{plan}");
    }
    if require_nvrtc().is_none() {
        return;
    }
    for segment in &plan.segments {
        let kernel = &segment.kernel.as_ref().unwrap().kernel;
        compile(&kernel.cuda_source(), "triangles", GpuArch::SM90).unwrap();
    }
}

/// RMSNorm backward with many rows plans as one inner-outer persistent kernel (`dx`
/// with the row in registers, the column sum kept across the row loop and finished by a
/// grid all-reduce, `nvf_grid_sync` and `__launch_bounds__` with blocks per SM), which
/// compiles.
#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn inner_outer_norm_backward_compiles() {
    use nvfuser_core::workloads::RMS_NORM_BWD;
    for (n, h) in [(65536, 4096), (200_000, 1536)] {
        let rms: &[&[i64]] = &[&[n, h], &[n, h], &[h], &[n, 1]];
        planned_kernel_compiles_with(RMS_NORM_BWD, rms, 2);
        let (_, k) = nvfuser_cuda::testing::plan_one_kernel(RMS_NORM_BWD, rms);
        assert!(k.grid_sync);
        assert!(k.cuda_source().contains("__launch_bounds__(") && k.min_blocks_per_sm.is_some());
    }
}

/// GPU fuzz seed 10603257: a broadcast read by a full output and by an output of the
/// broadcast's own shape (`[A, 1, C, 1]`) was refused by the pointwise and the default
/// schedules ("T6 in Local memory spans loop axis 0 of symbolic extent"); each reader
/// now computes its own copy, and the segment is one pointwise kernel.
#[test]
fn broadcast_read_by_outputs_of_two_shapes_is_one_kernel() {
    planned_kernel_compiles_with(
        r#"
fn k(x: Tensor<f8e5m2, [_, _, _, _]>, t: Tensor<f8e5m2, [_, _]>) -> (Tensor<f8e5m2, [_, _, _, _]>, Tensor<i64, [_, 1, _, 1]>) {
    let b = t.broadcast([false, true, false, true]);
    (x + b, b as i64)
}
"#,
        &[&[31, 2, 128, 256], &[31, 128]],
        2,
    );
}

/// The kernels planned for an H100 (on the CPU device's arguments, random values of
/// `dtype`) for each call's input shapes, compiled for sm_90 when NVRTC is present.
fn plans_on_cpu(src: &str, dtype: nvfuser_core::DataType, calls: &[&[usize]]) {
    let calls: Vec<Vec<&[usize]>> = calls.iter().map(|&c| vec![c]).collect();
    plans_on_cpu_with(src, dtype, &calls);
}

/// [`plans_on_cpu`] for fusions of several tensor inputs: each call gives one shape per
/// input, in order.
fn plans_on_cpu_with(src: &str, dtype: nvfuser_core::DataType, calls: &[Vec<&[usize]>]) {
    use nvfuser_core::eval::HostTensor;
    use nvfuser_cuda::{Arg, Device, FusionExecutorCache};
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(fusion);
    for shapes in calls {
        let ts: Vec<_> = shapes
            .iter()
            .enumerate()
            .map(|(i, shape)| {
                cpu.tensor_from_host(&HostTensor::random(dtype, shape, 2 + i as u64))
                    .unwrap()
            })
            .collect();
        let args: Vec<Arg> = ts.iter().map(Arg::from).collect();
        let kernels = exec
            .plan_kernels(nvfuser_core::scheduler::DeviceInfo::h100_for_tests(), &args)
            .unwrap_or_else(|e| panic!("{shapes:?}: {e}"));
        assert!(!kernels.is_empty(), "{shapes:?}");
        if require_nvrtc().is_some() {
            for k in &kernels {
                compile(&k.cuda_source(), &k.abi.name, GpuArch::SM90)
                    .unwrap_or_else(|e| panic!("{shapes:?}: {e}"));
            }
        }
    }
}

/// CPU fuzz seed 10902137: outputs that share a producer across the pointwise
/// schedule's serial loops ("T2 in Local memory spans loop axis 0 of symbolic extent").
#[test]
fn outputs_sharing_a_producer_across_serial_loops_plan() {
    use nvfuser_core::testing::{FUZZ_SHARED_PRODUCER_ALTERNATING, FUZZ_SHARED_PRODUCER_KEEPDIM};
    plans_on_cpu_with(
        FUZZ_SHARED_PRODUCER_KEEPDIM,
        nvfuser_core::DataType::F32,
        &[
            vec![&[63, 1, 62, 3], &[3]],
            vec![&[17, 1, 2048, 4], &[4]],
            vec![&[4, 1, 255, 2], &[2]],
        ],
    );
    plans_on_cpu_with(
        FUZZ_SHARED_PRODUCER_ALTERNATING,
        nvfuser_core::DataType::F32,
        &[
            vec![&[63, 5, 62, 3], &[5, 3]],
            vec![&[17, 3, 2048, 4], &[3, 4]],
        ],
    );
}

/// GPU fuzz seed 11010968: NVRTC 13.0 crashed (SIGSEGV, about every other compile) on a
/// kernel reading `x.reshape([s0, s1, -1])` of a `[s0, s1, s2, s3]` input, whose
/// inferred size was `s0 * s1 * s2 * s3 / (s0 * s1)` in every index. The inferred size
/// is now `s2 * s3`.
#[test]
fn an_inferred_reshape_size_cancels_the_known_sizes() {
    use nvfuser_core::eval::HostTensor;
    use nvfuser_cuda::{Arg, Device, FusionExecutorCache};
    let src = r#"
fn k(x: Tensor<f32, [_, _, _, _]>) -> Tensor<f32, [_, _, _]> {
    let s0 = x.size(0);
    let s1 = x.size(1);
    x.reshape([s0, s1, -1]).sigmoid()
}
"#;
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let out = fusion.outputs()[0].val;
    let ty = fusion.tensor_type(out).unwrap();
    let last = ty.shape().last().unwrap().extent.to_string();
    assert_eq!(last, "(v0.size(2) * v0.size(3))");
    let cpu = Device::cpu();
    let exec = FusionExecutorCache::new(fusion);
    let x = HostTensor::random(nvfuser_core::DataType::F32, &[4, 128, 64, 64], 3);
    let t = cpu.tensor_from_host(&x).unwrap();
    let h100 = nvfuser_core::scheduler::DeviceInfo::h100_for_tests();
    let kernels = exec.plan_kernels(h100, &[Arg::from(&t)]).unwrap();
    assert!(!kernels.is_empty());
    for k in &kernels {
        let src = k.cuda_source();
        if require_nvrtc().is_some() {
            compile(&src, &k.abi.name, GpuArch::SM90).unwrap();
        }
    }
}

/// GPU fuzz seed 11337506: a per-row input (`[A, 1]`) beside `[A, B]` row results in
/// an inner reduction segment splits the rows (`split_rows`), as per-row computed
/// tensors do.
#[test]
fn a_per_row_input_beside_row_results_plans() {
    plans_on_cpu(
        nvfuser_core::testing::FUZZ_PER_ROW_INPUT_BESIDE_ROWS,
        nvfuser_core::DataType::F32,
        &[&[256, 128, 1], &[100, 256, 1], &[2048, 31, 1]],
    );
}

/// GPU fuzz seed 10603008: a dead `reshape(-1)` of an empty input (its inferred dim
/// divides by zero) refused the whole fusion ("extent ... overflows i64 (or divides by
/// zero)"), though no kernel computes it. Size checks now cover live tensors only.
#[test]
fn a_dead_reshape_of_an_empty_input_refuses_nothing() {
    let src = r#"
fn k(t1: Tensor<f16, [_, _, _]>) -> Tensor<f16, [1, _, _, _]> {
    let s1 = t1.size(1);
    let s2 = t1.size(2);
    let unused = t1.reshape([1, -1, s1, s2]);
    t1.broadcast([true, false, false, false]).round().pad([(0, 0), (0, 0), (2, 1), (0, 0)], 0.5)
}
"#;
    plans_on_cpu(
        src,
        nvfuser_core::DataType::F16,
        &[&[5, 3, 31], &[5, 0, 128]],
    );
}

/// GPU fuzz seed 10603824: a per-row mask from two `iota`s (`[X]` broadcast to `[1, X]`,
/// `[4]` to `[4, 1]`) beside a variance over the last dim of `[4, X, 8]` rows. The
/// reduction merged the mask's rows into `X` and the reference's into `4 * X`, binding
/// `blockIdx.x` to both; per-row tensors now split the rows as full ones do.
#[test]
fn iota_masks_beside_a_rank_3_reduction_plan() {
    let src = nvfuser_core::testing::FUZZ_IOTA_MASK_BESIDE_ROW_VARIANCE;
    plans_on_cpu(
        src,
        nvfuser_core::DataType::F64,
        &[&[8, 16], &[128, 16], &[1000, 16]],
    );
}

/// GPU fuzz seed 10604126: an `iota` mask `[B, 1]` and `[1, C]` beside the `[B, C]`
/// result of a Welford over dim 0 of `[A, B, C]`. The outer reduction merged the mask's
/// kept dims into `B` or `C` and the columns into `B * C`, binding `blockIdx.x` to both;
/// such per-column tensors are now refused there and planned in a segment of their own.
#[test]
fn iota_masks_beside_a_rank_3_column_reduction_plan() {
    let src = nvfuser_core::testing::FUZZ_IOTA_MASK_BESIDE_COLUMN_WELFORD;
    plans_on_cpu(
        src,
        nvfuser_core::DataType::F32,
        &[&[7, 31, 17], &[31, 31, 100]],
    );
}

/// Plans `src` for an H100 on contiguous inputs of each call's `(dtype, shape)`s and
/// checks that every segment runs a tuned schedule (no refusal, no default schedule,
/// no fallback), compiling each kernel for sm_90 when NVRTC is present.
fn plans_tuned(src: &str, calls: &[&[(nvfuser_core::DataType, &[i64])]]) {
    use nvfuser_core::scheduler::InputInfo;
    use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let generator = fusion.generator_inputs().is_some();
    let exec = nvfuser_cuda::FusionExecutorCache::new(fusion);
    for shapes in calls {
        let mut info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), shapes);
        if generator {
            // The random generator's seed and offset.
            for _ in 0..2 {
                info.inputs
                    .push(InputInfo::Scalar(nvfuser_core::ScalarValue::Int(0)));
            }
        }
        let plan = exec
            .plan_for(&info, None)
            .unwrap_or_else(|e| panic!("{shapes:?}: {e}"));
        for seg in &plan.segments {
            assert!(
                !seg.scheduler.starts_with("default") && seg.fallback.is_none(),
                "{shapes:?}: {} ({:?})\n{}",
                seg.scheduler,
                seg.fallback,
                seg.fusion
            );
        }
        if require_nvrtc().is_some() {
            for k in plan.kernels() {
                compile(&k.cuda_source(), &k.abi.name, GpuArch::SM90)
                    .unwrap_or_else(|e| panic!("{shapes:?}: {e}"));
            }
        }
    }
}

/// CPU fuzz seed 12124262: a `var` over the size-1 dim of `[1, A, B, 1024]` beside
/// pointwise math of its result. No scheduler took the reduction over a size-1 dim
/// ("blockIdx.x is bound to two extents"); reductions over size-1 dims only are now the
/// pointwise math they compute (`pointwise_unit_reductions`): one pointwise kernel.
#[test]
fn variance_over_a_size_one_dim_is_pointwise() {
    use nvfuser_core::DataType::{F16, F32};
    let src = r#"
fn fuzz_case(t0: Tensor<f32, [1, _, _, 1024]>, t1: Tensor<f16, [_, 1024]>) -> (Tensor<f32, [_, _, 1024]>, Tensor<f8e5m2, [_, _, 1024]>, Tensor<f32, [_, _, 1024]>) {
    let t2 = t0.var([0], 0);
    let t4 = t1.broadcast([true, false, false]);
    let t5 = t2.minimum(t4);
    let t6 = t5 as f8e5m2;
    (t5.relu(), t6, t2)
}
"#;
    plans_tuned(
        src,
        &[
            &[(F32, &[1, 1, 250, 1024]), (F16, &[250, 1024])],
            &[(F32, &[1, 16, 8, 1024]), (F16, &[8, 1024])],
        ],
    );
    let fusion = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let info = nvfuser_core::scheduler::RuntimeInfo::contiguous(
        nvfuser_core::scheduler::DeviceInfo::h100_for_tests(),
        &[(F32, &[1, 16, 8, 1024]), (F16, &[8, 1024])],
    );
    let plan = nvfuser_cuda::FusionExecutorCache::new(fusion)
        .plan_for(&info, None)
        .unwrap();
    assert_eq!(plan.segments.len(), 1);
    assert_eq!(plan.segments[0].scheduler, "pointwise");
}

/// CPU fuzz seed 12332149: a full `min` of a `[A, B]` random tensor masked by two
/// `iota`s (`[A, 1]` and `[1, B]`), broadcast to `[1, 1]`. The reduced dims were split
/// by the vector width before the merge, and the `[A, 1]` mask's broadcast dim lost
/// the reference's extent in that split ("T26 in Local memory spans loop axis 0 of
/// symbolic extent"): refused by the inner persistent schedule and by the default one.
#[test]
fn iota_masks_in_a_full_reduction_plan() {
    use nvfuser_core::DataType::I32;
    let src = r#"
fn fuzz_case(t0: Tensor<i32, [_, _, _]>) -> (Tensor<bool, [1, 1]>, Tensor<i32, [_, _, 1]>) {
    let t2 = t0 >= t0;
    let t5 = t2.select(2, 0).set();
    let t12 = rand_uniform([t5.size(0), t5.size(1)], -1.0, 1.0, f32);
    let t17 = iota(t12.size(0), 0, 1, i64);
    let t18 = iota(t12.size(1), 0, 1, i64);
    let t21 = t18.broadcast([true, false]) - t17.broadcast([false, true]);
    let t25 = where_(t21 <= 1, t12, 0.0f32);
    let t28 = t0.min([2]).broadcast([false, false, true]);
    let t30 = (t25 as f64).min([0, 1]);
    let t31 = t30.broadcast([true, true]);
    (t31 < t31, t28.minimum(t28))
}
"#;
    plans_tuned(
        src,
        &[
            &[(I32, &[17, 31, 2048])],
            &[(I32, &[31, 1, 255])],
            &[(I32, &[300, 700, 64])],
        ],
    );
}

/// CPU fuzz seed 13200097: an uncorrected f32 `var` without its mean, broadcast back
/// (a normalization). The inner persistent schedule's two-pass rewrite casts an f64
/// mean to f32, and that cast took the reduced dims of `var`'s type ("lowering of cast
/// is not implemented yet"); the default schedule refused the seed's `min` over the
/// broadcast result. One inner persistent kernel each now.
#[test]
fn uncorrected_f32_var_without_its_mean_plans() {
    use nvfuser_core::DataType::{F16, F32};
    plans_tuned(
        r#"
fn fuzz_case(t0: Tensor<f64, [_, _]>, t1: Tensor<f16, [_]>) -> (Tensor<f16, []>, Tensor<f16, [1, 1]>) {
    let t2 = t0.broadcast([true, false, false]);
    let t6 = ((t1 as f32).var([0], 0) as f16).broadcast([true]);
    (t6.min([0]), t6.broadcast([false, true]))
}
"#,
        &[
            &[(nvfuser_core::DataType::F64, &[7, 64]), (F16, &[64])],
            &[(nvfuser_core::DataType::F64, &[4096, 100]), (F16, &[100])],
        ],
    );
    plans_tuned(
        "fn k(x: Tensor<f32, [_, _]>) -> Tensor<f32, [_, _]> { x - x.var([1], 0, keepdim = true) }",
        &[&[(F32, &[128, 1024])], &[(F32, &[3, 77])]],
    );
}

/// CPU fuzz seed 12801467: a `var` over all four symbolic dims of `[A, B, C, D]`,
/// broadcast back and expanded beside a `uniform` of that shape. The inner persistent
/// heuristics compiled it as a persistent kernel, which binds one reduced input dim to
/// the compiled size: with four, the row's register buffer kept a symbolic extent ("T20
/// in Local memory spans loop axis 0 of symbolic extent"). Such rows are now streamed
/// (`Unfit::ReducedSymbolicDims`).
#[test]
fn full_variance_of_four_symbolic_dims_beside_uniform_plans() {
    use nvfuser_core::DataType::F32;
    let src = r#"
fn fuzz_case(t0: Tensor<f32, [_, _, _, _]>) -> (Tensor<f32, [_]>, Tensor<f32, [_, _, _, _]>) {
    let t2 = t0.var([0, 1, 2, 3], 1).broadcast([true, true, true, true]);
    let t7 = t2.expand([t0.size(0), t0.size(1), t0.size(2), t0.size(3)]);
    let t16 = uniform([t0.size(0), t0.size(1), t0.size(2), t0.size(3)], -1.0, 1.0, 259, 12, f32);
    let t17 = t16.minimum(t7);
    let (t35, t36, t37) = t17.welford([1, 2, 3]);
    (t36, t16)
}
"#;
    plans_tuned(
        src,
        &[
            &[(F32, &[128, 127, 64, 2])],
            &[(F32, &[8, 1, 3, 3])],
            &[(F32, &[32, 1, 16, 4096])],
        ],
    );
}
