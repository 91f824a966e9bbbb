//! Regressions of the tuned schedulers' fusion analysis (the Correctness issue):
//! LayerNorm written with sums (keepdim per-row outputs the kernel also reads) and a
//! row sum broadcast into a wider tensor (a dim scheduled as the reduction's without
//! being exactly mapped to it). The plan chosen, a property of the kernel, and
//! snapshots of the kernels. Update with
//! `INSTA_UPDATE=always cargo test -p nvfuser-core --test sched_mapping`.

use nvfuser_core::codegen::{self, Kernel, KernelOptions};
use nvfuser_core::scheduler::{
    compute_heuristics, schedule_with, DeviceInfo, HeuristicParams, InputInfo, RuntimeInfo,
    SchedulerKind,
};
use nvfuser_core::segment::{SegmentValue, SegmentedFusion};
use nvfuser_core::testing::{layer_norm_sums, sum_into_wider};
use nvfuser_core::{DataType, Fusion, ScalarValue};

fn generate(f: &Fusion, info: &RuntimeInfo) -> (HeuristicParams, Kernel) {
    let p = compute_heuristics(f, info).unwrap_or_else(|e| panic!("{e:?}\n{f}"));
    let sf = schedule_with(f, &p).unwrap();
    let opts = KernelOptions {
        index_type: p
            .compile()
            .map_or(codegen::IndexType::I32, |c| c.index_type),
        ..Default::default()
    };
    (p, codegen::generate(&sf, &opts).unwrap())
}

fn kernel(f: &Fusion, shapes: &[&[i64]]) -> (HeuristicParams, Kernel) {
    let shapes: Vec<(DataType, &[i64])> = shapes.iter().map(|s| (DataType::F32, *s)).collect();
    generate(
        f,
        &RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes),
    )
}

fn body(k: &Kernel) -> String {
    let src = k.cuda_source();
    src.split("// ---- end of runtime support ----\n")
        .nth(1)
        .unwrap_or(&src)
        .to_string()
}

/// The snapshot text: launch dims, requirements, kernel body (as `codegen_corpus`).
fn snapshot_text(k: &Kernel) -> String {
    let dims = |d: &[nvfuser_core::ir::Extent]| d.iter().map(|e| e.to_string()).collect::<Vec<_>>();
    let mut text = format!(
        "launch: grid {:?} block {:?}\n",
        dims(&k.launch.grid),
        dims(&k.launch.block)
    );
    for r in &k.requirements {
        text.push_str(&format!("requires: {r:?}\n"));
    }
    text.push_str(&body(k));
    text
}

/// The names of the kernel's output parameters (`float* __restrict__ T19,`).
fn output_params(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix("float* __restrict__ ")?;
            Some(rest.trim_end_matches([',', ')', ' ', '{']).to_string())
        })
        .collect()
}

/// Every access of an output in the kernel is a store: no thread reads back a value
/// that another thread stores.
fn outputs_only_stored(body: &str) {
    let outs = output_params(body);
    assert!(!outs.is_empty(), "{body}");
    for o in &outs {
        let at = format!("{o}[");
        for l in body.lines().filter(|l| l.contains(&at)) {
            let l = l.trim();
            let store = l.starts_with(&at)
                || (l.starts_with("nvf_vec_copy<") && l.contains(&format!("(&{at}")));
            assert!(
                store && l.matches(&at).count() == 1,
                "{o} is read in the kernel: {l}\n{body}"
            );
        }
    }
}

#[test]
fn layer_norm_with_sums_reads_per_row_outputs_from_registers() {
    let cases: &[(usize, &[i64])] = &[
        (3, &[64, 128, 1024]),
        (2, &[64, 1024]),
        (4, &[2, 8, 16, 768]),
        (3, &[4, 1, 1000]),
        (3, &[4, 77, 4096]),
        (3, &[2, 3, 12289]),
        (3, &[2, 3, 300000]),
    ];
    for &(rank, x) in cases {
        let h = *x.last().unwrap();
        let f = layer_norm_sums(rank, h).unwrap();
        let (p, k) = kernel(&f, &[x, &[h], &[h]]);
        assert!(
            matches!(
                p,
                HeuristicParams::InnerPersistent(_) | HeuristicParams::Reduction(_)
            ),
            "{x:?}: {p:?}"
        );
        outputs_only_stored(&body(&k));
    }
}

#[test]
fn layer_norm_with_sums_rank3_kernel() {
    let f = layer_norm_sums(3, 1024).unwrap();
    let (p, k) = kernel(&f, &[&[64, 128, 1024], &[1024], &[1024]]);
    assert!(matches!(p, HeuristicParams::InnerPersistent(ref pp) if pp.hidden == 1024));
    insta::assert_snapshot!("layer_norm_sums_rank3_cuda", snapshot_text(&k));
}

/// Every single-kernel scheduler refuses `t1 + sum(t0, keepdim)`, `t1` wider (or
/// taller) than `t0` in the reduced dim, naming the dim that is not exactly mapped;
/// the segmenter then splits it.
#[test]
fn sum_broadcast_into_a_wider_tensor_is_refused_and_segmented() {
    for (rank, axis) in [(2, -1), (3, -1), (4, -1), (2, 0), (3, 0), (3, 1)] {
        let f = sum_into_wider(rank, axis).unwrap();
        let a = (axis + rank as i64) as usize % rank;
        let mut s0 = vec![2i64, 3, 5, 7][..rank].to_vec();
        let mut s1 = s0.clone();
        s0[a] = 30;
        s1[a] = 100;
        let info = RuntimeInfo::contiguous(
            DeviceInfo::h100_for_tests(),
            &[(DataType::F32, &s0), (DataType::F32, &s1)],
        );
        let Err(rejections) = compute_heuristics(&f, &info) else {
            panic!("rank {rank} axis {axis}: a single kernel was planned");
        };
        let default = rejections
            .0
            .iter()
            .find(|r| r.kind == SchedulerKind::Default)
            .unwrap();
        if axis != 1 {
            assert!(
                default.reason.to_string().contains("not exactly mapped"),
                "rank {rank} axis {axis}: {rejections:?}"
            );
        }
        let seg = SegmentedFusion::new(&f).unwrap();
        assert!(seg.is_segmented(), "rank {rank} axis {axis}");
    }
    // Equal sizes in one call do not make the extents exactly mapped: the plan holds
    // for every call the declaration accepts, so it is segmented too.
    let f = sum_into_wider(2, -1).unwrap();
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[(DataType::F32, &[2, 32]), (DataType::F32, &[2, 32])],
    );
    let Err(rejections) = compute_heuristics(&f, &info) else {
        panic!("planned as one kernel");
    };
    let persistent = rejections
        .0
        .iter()
        .find(|r| r.kind == SchedulerKind::InnerPersistent)
        .unwrap();
    assert!(
        persistent.reason.to_string().contains("not exactly mapped"),
        "{rejections:?}"
    );
}

#[test]
fn sum_broadcast_into_a_wider_tensor_kernels() {
    let f = sum_into_wider(2, -1).unwrap();
    let seg = SegmentedFusion::new(&f).unwrap();
    let kinds: Vec<SchedulerKind> = seg.segments().iter().map(|s| s.scheduler()).collect();
    let mut text = format!("// segments: {kinds:?}\n");
    for (i, s) in seg.segments().iter().enumerate() {
        // Segment inputs: t0 [2, 32], t1 [2, 128], the row sums [2], or sizes.
        let sizes = |v: nvfuser_core::ValId| -> &[i64] {
            if v == f.inputs()[0] {
                &[2, 32]
            } else if v == f.inputs()[1] {
                &[2, 128]
            } else {
                &[2]
            }
        };
        let mut info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &[]);
        for v in s.inputs() {
            info.inputs.push(match v {
                SegmentValue::Val(v) => RuntimeInfo::contiguous(
                    DeviceInfo::h100_for_tests(),
                    &[(DataType::F32, sizes(*v))],
                )
                .inputs
                .remove(0),
                SegmentValue::Extent(e) => {
                    InputInfo::Scalar(ScalarValue::Int(sizes(e.tensor)[e.axis as usize]))
                }
            });
        }
        let (_, k) = generate(s.fusion(), &info);
        let b = body(&k);
        if s.outputs().contains(&f.outputs()[0].val) {
            // The output is indexed with its own extent, never bounded by the sum's.
            assert!(!b.contains("32"), "{b}");
        }
        text.push_str(&format!("// segment {i}: {}\n", s.scheduler().name()));
        text.push_str(&snapshot_text(&k));
    }
    insta::assert_snapshot!("sum_into_wider_segments_cuda", text);
}

/// A kernel for `src` (the run-time DSL) on contiguous inputs of `shapes`, dtypes from
/// the fusion.
fn kernel_of(src: &str, shapes: &[&[i64]]) -> (HeuristicParams, Kernel) {
    let f = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let ins: Vec<(DataType, &[i64])> = f
        .inputs()
        .iter()
        .zip(shapes)
        .map(|(&v, s)| (f.val(v).dtype, *s))
        .collect();
    generate(
        &f,
        &RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &ins),
    )
}

/// [`kernel_of`] for a fusion with scalar math on sizes: the host scalar program is
/// split off (as the executor does) and evaluated on `shapes`, and its results are the
/// kernel fusion's extra scalar arguments.
fn kernel_of_split(src: &str, shapes: &[&[i64]]) -> (HeuristicParams, Kernel) {
    use nvfuser_core::ir::bind::BoundArg;
    use nvfuser_core::scheduler::{split_host_scalars, InputInfo};
    let f = nvfuser_core::dsl::build_str(src).unwrap().remove(0).0;
    let split = split_host_scalars(&f).expect("a host scalar split");
    let sizes: Vec<Vec<usize>> = shapes
        .iter()
        .map(|s| s.iter().map(|&n| n as usize).collect())
        .collect();
    let args: Vec<BoundArg<'_>> = sizes.iter().map(|s| BoundArg::Tensor(s)).collect();
    let scalars = split.program.evaluate(&args).unwrap();
    let mut info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &f.inputs()
            .iter()
            .zip(shapes)
            .map(|(&v, s)| (f.val(v).dtype, *s))
            .collect::<Vec<_>>(),
    );
    info.inputs
        .extend(scalars.into_iter().map(InputInfo::Scalar));
    generate(&split.kernel, &info)
}

/// Lines of the kernel body that read global tensor `name` (any use that is not the
/// left side of a store or its parameter declaration).
fn reads_of(body: &str, name: &str) -> Vec<String> {
    let at = format!("{name}[");
    body.lines()
        .map(str::trim)
        .filter(|l| l.contains(&at) && !l.starts_with(&at))
        .filter(|l| {
            !l.contains(&format!("&{at}"))
                || l.contains(&format!(", &{at}"))
                || l.contains(&format!("nvf_load_volatile(&{at}"))
        })
        .map(str::to_string)
        .collect()
}

/// Fuzz seed 9080: an output broadcast along the reference's dim (`silu` of `[1, 1]`) is
/// read by the wider output. Thread 0 stores it; the readers get a register copy
/// (`cache_fork`) instead of reading it back from global memory.
#[test]
fn broadcast_output_read_by_a_wider_output_kernel() {
    let (p, k) = kernel_of(
        r#"
fn k(t1: Tensor<f32, [_]>, t2: Tensor<f64, [1, 1]>) -> (Tensor<f64, [1, _]>, Tensor<f64, [1, 1]>) {
    let t4 = t1.abs();
    let t5 = t2.silu();
    let t6 = t4.broadcast([true, false]);
    let t7 = t6 * t5;
    (t7, t5)
}
"#,
        &[&[1000], &[1, 1]],
    );
    assert_eq!(p.kind(), SchedulerKind::Pointwise);
    let b = body(&k);
    assert!(reads_of(&b, "T5").is_empty(), "{b}");
    insta::assert_snapshot!("broadcast_output_read_by_wider_cuda", snapshot_text(&k));
}

/// Fuzz seed 21616: an output the kernel also reads (`t2`, read by the `where`) is
/// computed in registers; its reader reads the register copy and the output is only
/// stored (with a vector store). Nothing reads it back from global memory, where a
/// deferred store may not have written it yet.
#[test]
fn output_read_by_the_kernel_comes_from_registers() {
    let (p, k) = kernel_of(
        r#"
fn k(t0: Tensor<bf16, [_]>) -> (Tensor<bf16, [_]>, Tensor<bf16, [_]>) {
    let t1 = t0.isnan();
    let t2 = t0.erfc();
    let t3 = where_(t1, t0, t2);
    (t2, t3)
}
"#,
        &[&[4096]],
    );
    assert!(
        matches!(p, HeuristicParams::Pointwise(ref pp) if pp.vectorize > 1),
        "{p:?}"
    );
    let b = body(&k);
    assert!(reads_of(&b, "T2").is_empty(), "T2 read back:\n{b}");
    assert!(b.contains("nvf_vec_copy<nvf_bfloat, 8>(&T2["), "{b}");
    insta::assert_snapshot!("output_read_back_stored_first_cuda", snapshot_text(&k));
}

/// Fuzz seed 1959: `t4` is read by the store cache of `t5` and by the math of `t9`; after
/// the pointwise scheduler moved its caches, `t4` was declared inside one consumer's loop
/// and read from the other's (NVRTC: identifier undefined). Its position now stays in
/// the loops both share.
#[test]
fn producer_shared_by_two_cached_consumers_kernel() {
    let (_, k) = kernel_of(
        r#"
fn k(t0: Tensor<bf16, [_, _, _, _]>) -> (Tensor<bf16, [_, _, _, _]>, Tensor<bf16, [_, _, _, _]>) {
    let t4 = t0.erf();
    let t5 = t4.atan();
    let t9 = t4 - t5;
    (t9, t5)
}
"#,
        &[&[64, 5, 7, 128]],
    );
    insta::assert_snapshot!(
        "producer_shared_by_cached_consumers_cuda",
        snapshot_text(&k)
    );
}

/// Fuzz seed 516791: `t1` (`[2, 1]`) broadcast to `[1, 2, 1]` meets `[1, 2, N]` in an
/// outer reduction whose kept dims merge into one loop of `2 * N`. The broadcast tensor
/// spanned only 2 elements of that loop, so thread `i` read row `i` instead of row
/// `i / N`. Its broadcast dim now takes the reference's extent (`transform_like`), and it
/// is read at the merged index divided by `N`.
#[test]
fn broadcast_merged_into_a_kept_loop_kernel() {
    let (p, k) = kernel_of(
        nvfuser_core::testing::FUZZ_BROADCAST_IN_KEPT_LOOP,
        &[&[2, 1], &[1, 2, 4096]],
    );
    assert_eq!(p.kind(), SchedulerKind::Reduction, "{p:?}");
    let b = body(&k);
    let reads = reads_of(&b, "T0");
    assert!(!reads.is_empty(), "{b}");
    for r in &reads {
        assert!(
            r.contains("/ T1_shape.size[2]"),
            "T0 read by the merged index: {r}\n{b}"
        );
    }
    insta::assert_snapshot!("broadcast_merged_into_kept_loop_cuda", snapshot_text(&k));
}

/// Fuzz seed 510836: `t1` (`[3, 1, 5]`) meets `[3, N, 5]` in a product over the first two
/// dims, merged into one serial loop of `3 * N`. Its register copy was loaded over 3
/// elements and then read at the merged loop index (up to `3 * N`).
#[test]
fn broadcast_in_a_merged_reduction_loop_kernel() {
    let (p, k) = kernel_of(
        nvfuser_core::testing::FUZZ_BROADCAST_IN_REDUCTION_LOOP,
        &[&[3, 64, 5], &[3, 1, 5]],
    );
    assert_eq!(p.kind(), SchedulerKind::Reduction, "{p:?}");
    let b = body(&k);
    let reads = reads_of(&b, "T1");
    assert!(!reads.is_empty(), "{b}");
    for r in &reads {
        assert!(
            r.contains("/ T0_shape.size[1]"),
            "T1 read by the merged index: {r}\n{b}"
        );
    }
    insta::assert_snapshot!("broadcast_in_merged_reduction_loop_cuda", snapshot_text(&k));
}

/// Fuzz seed 504258: an expanded output (`t7`, `[7, N, M]` expanded from `[7, N, 1]`) read
/// by the kernel was read back at element 0 of its expanded dim, an element another
/// thread stores. Its readers now read the register copy it is stored from.
#[test]
fn expanded_output_read_back_kernel() {
    let (_, k) = kernel_of_split(
        nvfuser_core::testing::FUZZ_EXPANDED_OUTPUT_READ_BACK,
        &[&[7, 100, 100], &[7, 100, 1]],
    );
    let b = body(&k);
    assert!(b.contains("T3["), "T3 is stored:\n{b}");
    assert!(reads_of(&b, "T3").is_empty(), "T3 read back:\n{b}");
    insta::assert_snapshot!("expanded_output_read_back_cuda", snapshot_text(&k));
}

/// Fuzz seed 711301: `uniform([a, b, c, 1])` broadcast against `[a, b, c, 17]`. The
/// pointwise schedule gives the broadcast dim the reference's extent; the random stream
/// is still indexed by the uniform's own shape (`* 17` made every value another one).
#[test]
fn uniform_with_a_broadcast_dim_kernel() {
    let (p, k) = kernel_of_split(
        r#"
fn k(t0: Tensor<i64, [_, _, _, 17]>) -> Tensor<f64, [_, _, _, 17]> {
    let s5 = t0.size(0);
    let s6 = t0.size(1);
    let s7 = t0.size(2);
    let t12 = uniform([s5, s6, s7, 1], -1.0, 1.0, 792, 0, f64);
    t0 * t12
}
"#,
        &[&[2, 64, 16, 17]],
    );
    assert_eq!(p.kind(), SchedulerKind::Pointwise, "{p:?}");
    let b = body(&k);
    let call = b
        .lines()
        .find(|l| l.contains("nvf_uniform_f64_op("))
        .unwrap_or_else(|| panic!("no uniform call\n{b}"));
    assert!(!call.contains("* 17"), "{call}");
    insta::assert_snapshot!("uniform_with_broadcast_dim_cuda", snapshot_text(&k));
}

/// Fuzz seed 1117748: `t4` (a broadcast row sum) feeds `t9`'s math, computed inside the
/// inner persistent kernel's unrolled loop, and the `[1]` output `t11`, outside it.
/// `inline_most` placed `t4` inside the loop (the consumers' size-1 dims looked alike),
/// so `t11` read a buffer out of scope (NVRTC: "identifier T9 is undefined"). A size-1
/// dim computed at a real serial loop now counts as that loop.
#[test]
fn broadcast_read_in_and_out_of_a_loop_kernel() {
    let (p, k) = kernel_of(
        nvfuser_core::testing::FUZZ_BROADCAST_READ_IN_AND_OUT_OF_A_LOOP,
        &[&[255]],
    );
    assert_eq!(p.kind(), SchedulerKind::InnerPersistent, "{p:?}");
    let b = body(&k);
    // Every buffer is declared at the top level or before the loop that uses it: the
    // out-of-loop store reads nothing declared inside a loop.
    let store = b
        .lines()
        .find(|l| l.trim_start().starts_with("T8[0] ="))
        .unwrap_or_else(|| panic!("no store of T8\n{b}"));
    let reads: Vec<&str> = store
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.starts_with('T'))
        .collect();
    for r in reads.iter().filter(|r| **r != "T8") {
        let decl = format!("long long {r}[");
        let line = b
            .lines()
            .find(|l| l.contains(&decl))
            .unwrap_or_else(|| panic!("{r} not declared\n{b}"));
        assert!(
            line.starts_with("  long long"),
            "{r} declared inside a loop: {line}\n{b}"
        );
    }
    insta::assert_snapshot!(
        "broadcast_read_in_and_out_of_a_loop_cuda",
        snapshot_text(&k)
    );
}

/// Issue #12 case 10: the inner persistent LayerNorm (var_mean in two passes) of f32
/// accumulates the mean in f64 and rounds it once, as the reference: an f32 sum of rows
/// near f32::MAX overflowed (NaN where the reference and PyTorch give the bias).
#[test]
fn layer_norm_f32_mean_accumulates_in_f64_kernel() {
    let f = nvfuser_core::workloads::layer_norm(DataType::F32).unwrap();
    let mut info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[
            (DataType::F32, &[64, 1024][..]),
            (DataType::F32, &[1024][..]),
            (DataType::F32, &[1024][..]),
        ],
    );
    info.inputs.push(nvfuser_core::scheduler::InputInfo::Scalar(
        nvfuser_core::ScalarValue::Float(1e-5),
    ));
    let (p, k) = generate(&f, &info);
    assert_eq!(p.kind(), SchedulerKind::InnerPersistent, "{p:?}");
    let b = body(&k);
    assert!(
        b.contains("nvf_block_allreduce_x(") && b.contains("NvfSum(), (double)(0.0)"),
        "the mean is a double block sum\n{b}"
    );
    insta::assert_snapshot!("layer_norm_f32_persistent_cuda", snapshot_text(&k));
}
