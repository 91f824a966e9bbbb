//! Sorts (`sort`, `argsort`, `topk`) planned for an H100 without a GPU: every fusion of
//! one sort of an input is one sort kernel (a topk of a long row selects by radix
//! instead of sorting it), a sort with math around it is three segments, rows too long
//! for shared memory are refused with a typed reason; every
//! kernel is compiled by NVRTC where it is found, and two kernels are snapshots.
//! `gpu_sort` runs the same fusions on a GPU.

mod sort_fusions;

use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{DeviceInfo, HeuristicParams, RuntimeInfo};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, FusionExecutorCache, GpuArch};
use sort_fusions::*;

/// A call of one dense input of `sizes` on an H100.
fn h100(dtype: DataType, sizes: &[i64]) -> RuntimeInfo {
    RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &[(dtype, sizes)])
}

/// The params of the one kernel `fusion` plans for `sizes` on an H100, or why not; the
/// kernel is compiled by NVRTC for sm_90 where NVRTC is found.
fn planned(fusion: Fusion, dtype: DataType, sizes: &[i64]) -> Result<HeuristicParams, String> {
    let exec = FusionExecutorCache::new(fusion);
    let (params, kernel) = exec
        .generate_for(&h100(dtype, sizes), None)
        .map_err(|e| e.to_string())?;
    let Some(kernel) = kernel else {
        return Err("no kernel".into());
    };
    if require_nvrtc().is_some() {
        compile(&kernel.cuda_source(), &kernel.abi.name, GpuArch::SM90)
            .map_err(|e| format!("NVRTC: {e}"))?;
    }
    Ok(params)
}

#[test]
fn sorts_plan_as_one_sort_kernel_on_an_h100() {
    let cases: Vec<(Fusion, DataType, Vec<i64>, i64)> = vec![
        (
            sort(DataType::F32, 2, -1, false),
            DataType::F32,
            vec![4096, 32768],
            32768,
        ),
        (
            topk(DataType::F32, 2, -1, 64, true),
            DataType::F32,
            vec![4096, 32768],
            32768,
        ),
        (
            topk(DataType::F32, 2, -1, 8, false),
            DataType::F32,
            vec![3, 5],
            8,
        ),
        (
            argsort(DataType::BF16, 2, 0, true),
            DataType::BF16,
            vec![333, 77],
            512,
        ),
        (
            sort(DataType::F16, 3, 1, false),
            DataType::F16,
            vec![4, 1000, 5],
            1024,
        ),
        (
            sort(DataType::I32, 1, 0, true),
            DataType::I32,
            vec![32768],
            32768,
        ),
        (
            sort(DataType::I32, 1, 0, true),
            DataType::I32,
            vec![20001],
            32768,
        ),
        (
            topk(DataType::I64, 2, 1, 3, true),
            DataType::I64,
            vec![9, 100],
            128,
        ),
        (
            sort(DataType::Bool, 2, -1, false),
            DataType::Bool,
            vec![9, 1],
            1,
        ),
        (
            sort(DataType::F64, 2, -1, true),
            DataType::F64,
            vec![2, 16384],
            16384,
        ),
        // Radix-select topk: rows of any length, one per block.
        (
            topk(DataType::F32, 2, -1, 50, true),
            DataType::F32,
            vec![64, 128256],
            131072,
        ),
        (
            topk(DataType::F64, 2, 0, 8, false),
            DataType::F64,
            vec![70000, 3],
            131072,
        ),
    ];
    for (i, (fusion, dtype, sizes, pad)) in cases.into_iter().enumerate() {
        let params = planned(fusion, dtype, &sizes)
            .unwrap_or_else(|e| panic!("case {i} ({sizes:?}) did not plan: {e}"));
        match params {
            HeuristicParams::Sort(p) => {
                assert_eq!(p.pad, pad, "case {i}: {p:?}");
                assert_eq!(p.select > 0, pad > 32768 || i == 1, "case {i}: {p:?}");
            }
            other => panic!(
                "case {i}: planned with {:?}, not the sort scheduler",
                other.kind()
            ),
        }
    }
}

#[test]
fn rows_too_long_for_shared_memory_are_refused_with_the_reason() {
    // f32 rows of 65537 pad to 131072 pairs of 8 bytes: 1 MiB, over the H100's 227 KiB.
    let exec = FusionExecutorCache::new(sort(DataType::F32, 2, -1, false));
    let e = exec
        .generate_for(&h100(DataType::F32, &[4, 65537]), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sorted row of 65537 elements"), "{e}");
    // f64 rows of 32768 need 320 KiB.
    let exec = FusionExecutorCache::new(sort(DataType::F64, 2, -1, false));
    let e = exec
        .generate_for(&h100(DataType::F64, &[4, 32768]), None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("shared memory"), "{e}");
}

#[test]
fn a_sort_with_math_around_it_is_three_segments() {
    let exec = FusionExecutorCache::new(topk_with_math(2, 5));
    let info = h100(DataType::F32, &[64, 1000]);
    let plan = exec.plan_for(&info, None).unwrap_or_else(|e| panic!("{e}"));
    let kernels: Vec<&str> = plan.segments.iter().map(|s| s.scheduler).collect();
    assert_eq!(kernels, ["pointwise", "sort", "pointwise"], "{plan}");
    if require_nvrtc().is_some() {
        for k in plan.kernels() {
            compile(&k.cuda_source(), &k.abi.name, GpuArch::SM90).unwrap();
        }
    }
}

/// The scheduler's params and the kernel (runtime support cut out) of `fusion` planned
/// for `sizes` on an H100.
fn kernel_text(fusion: Fusion, dtype: DataType, sizes: &[i64]) -> String {
    use nvfuser_cuda::dump::{Dump, DumpFlags};
    use std::sync::{Arc, Mutex};
    let buf: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(Vec::new()));
    let exec =
        FusionExecutorCache::new(fusion).with_dump(Dump::to_writer(DumpFlags::CUDA, buf.clone()));
    let (params, _) = exec.generate_for(&h100(dtype, sizes), None).unwrap();
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    const END: &str = "// ---- end of sort support ----\n";
    let body = text.split_once(END).map_or(text.as_str(), |(_, b)| b);
    format!("{sizes:?} {dtype}: {params:?}\n{body}")
}

/// Snapshots of the kernels of a topk of the benchmark's shape and an argsort of the
/// outer dim of a bf16 matrix.
#[test]
fn sort_kernels_on_an_h100() {
    let text = [
        kernel_text(
            topk(DataType::F32, 2, -1, 64, true),
            DataType::F32,
            &[4096, 32768],
        ),
        kernel_text(
            argsort(DataType::BF16, 2, 0, true),
            DataType::BF16,
            &[333, 77],
        ),
    ]
    .join("\n");
    insta::assert_snapshot!(text);
}

/// GPU fuzz seeds 12608041 and 12634746: the sort kernel declares each input's shape
/// with that input's own rank (an unused 0-d input, an input of rank 2 returned as an
/// output); the launch refused the arguments when every shape took the sorted rank.
#[test]
fn the_sort_kernel_declares_each_input_with_its_own_rank() {
    use nvfuser_core::codegen::ParamKind;
    let fusion = nvfuser_core::dsl::build_str(
        r#"
fn k(t0: Tensor<bf16, [_, _]>, t1: Tensor<f64, [_, _, _, _]>, t2: Tensor<f64, []>) -> (Tensor<i64, [_, _, _, _]>, Tensor<bf16, [_, _]>) {
    let (v, i) = t1.sort(3, false);
    (i, t0)
}
"#,
    )
    .unwrap()
    .remove(0)
    .0;
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[
            (DataType::BF16, &[5, 3]),
            (DataType::F64, &[2, 256, 5, 3]),
            (DataType::F64, &[]),
        ],
    );
    let exec = FusionExecutorCache::new(fusion.clone());
    let plan = exec.plan_for(&info, None).unwrap_or_else(|e| panic!("{e}"));
    let kernels: Vec<_> = plan.kernels().collect();
    assert_eq!(kernels.len(), 1, "{plan}");
    let mut shapes = 0;
    for p in &kernels[0].abi.params {
        if let ParamKind::TensorShape { tensor, rank } = p.kind {
            let t = fusion.tensor_type(tensor);
            assert_eq!(Some(rank), t.map(|t| t.rank()), "{}", p.name);
            shapes += 1;
        }
    }
    assert!(shapes >= 2, "{:?}", kernels[0].abi.params);
    if require_nvrtc().is_some() {
        compile(
            &kernels[0].cuda_source(),
            &kernels[0].abi.name,
            GpuArch::SM90,
        )
        .unwrap();
    }
}
