//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`) planned for an H100 without a GPU:
//! every fusion here is one scan kernel (no default schedule, no segments) for rows and
//! columns, compiled by NVRTC where it is found, and the kernels of three of them are
//! snapshots. `gpu_scan` runs the same fusions on a GPU.

mod scan_fusions;

use nvfuser_core::ir::ScanOp;
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{DeviceInfo, HeuristicParams, RuntimeInfo};
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, FusionExecutorCache, GpuArch};
use scan_fusions::*;

/// A call of one dense input of `sizes` on an H100.
fn h100(dtype: DataType, sizes: &[i64]) -> RuntimeInfo {
    RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &[(dtype, sizes)])
}

/// The params of the one kernel `fusion` plans for `sizes` on an H100, or why not; the
/// kernel is compiled by NVRTC for sm_90 where NVRTC is found.
fn planned(fusion: Fusion, dtype: DataType, sizes: &[i64]) -> Result<HeuristicParams, String> {
    let exec = FusionExecutorCache::new(fusion);
    // The serial form a failed tuned scan falls back to plans and lowers for it too.
    let tuned = exec
        .generate_for(&h100(dtype, sizes), None)
        .map_err(|e| e.to_string())?
        .0;
    if let Some(simple) = tuned.simplest() {
        let (_, kernel) = exec
            .generate_for(&h100(dtype, sizes), Some(&simple))
            .map_err(|e| format!("the simplest params: {e}"))?;
        if kernel.is_none() {
            return Err("no kernel with the simplest params".into());
        }
    }
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
fn scans_plan_as_one_scan_kernel_on_an_h100() {
    let cases: Vec<(Fusion, DataType, Vec<i64>, bool)> = vec![
        (
            plain(ScanOp::Sum, DataType::F32, 2, -1),
            DataType::F32,
            vec![4096, 32768],
            true,
        ),
        (
            plain(ScanOp::Sum, DataType::BF16, 2, 1),
            DataType::BF16,
            vec![333, 77],
            true,
        ),
        (
            plain(ScanOp::Max, DataType::F16, 3, 2),
            DataType::F16,
            vec![4, 5, 1000],
            true,
        ),
        (
            plain(ScanOp::Min, DataType::I32, 2, -1),
            DataType::I32,
            vec![9, 100],
            true,
        ),
        (
            plain(ScanOp::Sum, DataType::Bool, 2, -1),
            DataType::Bool,
            vec![9, 100],
            true,
        ),
        (
            plain(ScanOp::Prod, DataType::F64, 1, 0),
            DataType::F64,
            vec![100_000],
            true,
        ),
        (
            plain(ScanOp::Sum, DataType::F32, 2, 0),
            DataType::F32,
            vec![1000, 4096],
            false,
        ),
        (
            plain(ScanOp::Max, DataType::BF16, 3, 1),
            DataType::BF16,
            vec![8, 300, 64],
            false,
        ),
        (
            built(DataType::BF16, 2, exclusive),
            DataType::BF16,
            vec![64, 4096],
            true,
        ),
        (
            built(DataType::F32, 2, near_one_product),
            DataType::F32,
            vec![64, 4096],
            true,
        ),
        (
            built(DataType::F32, 2, running_softmax_numerator),
            DataType::F32,
            vec![7, 999],
            true,
        ),
    ];
    for (i, (fusion, dtype, sizes, row)) in cases.into_iter().enumerate() {
        let params = planned(fusion, dtype, &sizes)
            .unwrap_or_else(|e| panic!("case {i} ({sizes:?}) did not plan: {e}"));
        match params {
            HeuristicParams::Scan(p) => {
                assert_eq!(p.threads_x > 1, row, "case {i}: {p:?}");
            }
            other => panic!(
                "case {i}: planned with {:?}, not the scan scheduler",
                other.kind()
            ),
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
    const END: &str = "// ---- end of runtime support ----\n";
    let body = text.split_once(END).map_or(text.as_str(), |(_, b)| b);
    format!("{sizes:?} {dtype}: {params:?}\n{body}")
}

/// Snapshots of the kernels of a row scan with vectors, a row scan with math before and
/// after it, and a column scan.
#[test]
fn scan_kernels_on_an_h100() {
    let text = [
        kernel_text(
            plain(ScanOp::Sum, DataType::F32, 2, -1),
            DataType::F32,
            &[4096, 32768],
        ),
        kernel_text(
            built(DataType::BF16, 2, exclusive),
            DataType::BF16,
            &[333, 77],
        ),
        kernel_text(
            plain(ScanOp::Max, DataType::F32, 2, 0),
            DataType::F32,
            &[8192, 32768],
        ),
    ]
    .join("\n");
    insta::assert_snapshot!(text);
}

/// A scan of a value broadcast in kept dims, joined with a full input (CI fuzz seed 477:
/// the scan as the reference gave the merged rows too few elements): one scan kernel.
#[test]
fn a_scan_broadcast_in_kept_dims_plans_with_the_full_output_as_reference() {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1, -1]).unwrap();
    let r = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let b = fd.broadcast(r, &[false, true, true]).unwrap();
    let c = fd.cummin(b, -1).unwrap();
    let y = fd.binary(nvfuser_core::ir::BinaryOp::Mul, x, c).unwrap();
    fd.add_output(y).unwrap();
    let exec = FusionExecutorCache::new(fd.finish().unwrap());
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[(DataType::F32, &[128, 64, 3]), (DataType::F32, &[128])],
    );
    let (params, kernel) = exec.generate_for(&info, None).unwrap();
    assert!(kernel.is_some());
    assert!(matches!(params, HeuristicParams::Scan(_)), "{params:?}");
}
