//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`) through the scan scheduler.
//!
//! Without a GPU: every fusion here plans as one scan kernel on an H100 (no default
//! schedule, no segments), for rows and columns. With one: each runs on the GPU and is
//! compared with the CPU reference on random inputs over a sweep of shapes (rows of 1 to
//! 40000 elements, odd sizes, one row and many), every dtype family, and fusions with
//! math before and after the scan.

use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::{BinaryOp, ScanOp, UnaryOp};
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{DeviceInfo, HeuristicParams, InputInfo, RuntimeInfo, TensorInfo};
use nvfuser_cuda::testing::{require_gpu, require_nvrtc, run_and_compare};
use nvfuser_cuda::{compile, GpuArch};
use nvfuser_cuda::{Device, FusionExecutorCache};

/// A fusion of one rank-`rank` input of `dtype`.
type Build = fn(&mut FusionDefinition, ValId) -> ValId;

/// `op(x)` along `axis`.
fn plain(op: ScanOp, dtype: DataType, rank: usize, axis: i64) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &vec![-1; rank]).unwrap();
    let y = fd.scan(op, x, axis).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// A fusion built by `f` from one input.
fn built(dtype: DataType, rank: usize, f: Build) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &vec![-1; rank]).unwrap();
    let y = f(&mut fd, x);
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// The exclusive cumsum `cumsum(x) - x` in f32 (the scan's input read twice).
fn exclusive(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let xf = fd.cast(x, DataType::F32).unwrap();
    let c = fd.cumsum(xf, -1).unwrap();
    fd.binary(BinaryOp::Sub, c, xf).unwrap()
}

/// `cumprod(1 + x / 64)` (values near 1, so long rows neither overflow nor vanish).
fn near_one_product(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let k = fd.constant(1.0 / 64.0);
    let s = fd.binary(BinaryOp::Mul, x, k).unwrap();
    let one = fd.constant(1.0);
    let y = fd.binary(BinaryOp::Add, s, one).unwrap();
    fd.cumprod(y, -1).unwrap()
}

/// `exp(x - cummax(x))`, a running-max normalization (math after the scan).
fn running_softmax_numerator(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let m = fd.cummax(x, -1).unwrap();
    let d = fd.binary(BinaryOp::Sub, x, m).unwrap();
    fd.unary(UnaryOp::Exp, d).unwrap()
}

/// `cummax(cumsum(x))`: a scan of a scan.
fn scan_of_scan(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let c = fd.cumsum(x, -1).unwrap();
    fd.cummax(c, -1).unwrap()
}

/// `cumsum(x) * cummin(x)`: two scans of one input joined.
fn two_scans(fd: &mut FusionDefinition, x: ValId) -> ValId {
    let a = fd.cumsum(x, -1).unwrap();
    let b = fd.cummin(x, -1).unwrap();
    fd.binary(BinaryOp::Mul, a, b).unwrap()
}

fn dense(dtype: DataType, sizes: &[i64]) -> TensorInfo {
    let mut strides = vec![1i64; sizes.len()];
    for d in (0..sizes.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[d + 1].max(1);
    }
    TensorInfo {
        dtype,
        sizes: sizes.to_vec(),
        strides,
        alignment: 16,
    }
}

fn h100(dtype: DataType, sizes: &[i64]) -> RuntimeInfo {
    RuntimeInfo {
        device: DeviceInfo::h100_for_tests(),
        inputs: vec![InputInfo::Tensor(dense(dtype, sizes))],
    }
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

/// Tolerance for a scan of `n` elements whose running values stay near `sqrt(n) * 2`:
/// the GPU adds in another order, in f32, than the reference's f64 running sum.
fn scan_tolerance(n: usize) -> impl Fn(DataType) -> Tolerance {
    move |dt| {
        let base = Tolerance::for_dtype(dt);
        match dt {
            DataType::F32 | DataType::F16 | DataType::BF16 => {
                Tolerance::new(base.rtol, base.atol.max(n as f64 * 4e-7))
            }
            _ => base,
        }
    }
}

fn run_case(device: &Device, fusion: Fusion, dtype: DataType, shape: &[usize], seed: u64) {
    let n = *shape.iter().max().unwrap_or(&1);
    let exec = FusionExecutorCache::new(fusion);
    let inputs = vec![EvalInput::Tensor(HostTensor::random(dtype, shape, seed))];
    if let Err(m) = run_and_compare(device, &exec, &inputs, None, &scan_tolerance(n)) {
        panic!("{dtype} {shape:?} seed {seed}: {m}\n{}", exec.fusion());
    }
}

#[test]
fn row_and_column_scans_match_the_reference() {
    let Some(_) = require_gpu() else { return };
    let device = Device::cuda(0).unwrap();
    let rows: &[(usize, usize)] = &[
        (1, 1),
        (3, 5),
        (7, 31),
        (2, 32),
        (5, 33),
        (129, 127),
        (64, 1000),
        (17, 4097),
        (3, 40000),
        (300, 2048),
    ];
    let mut count = 0;
    for (k, &(r, c)) in rows.iter().enumerate() {
        for op in ScanOp::ALL {
            for dtype in [DataType::F32, DataType::BF16, DataType::I64, DataType::F64] {
                if *op == ScanOp::Prod {
                    continue;
                }
                run_case(&device, plain(*op, dtype, 2, -1), dtype, &[r, c], k as u64);
                run_case(&device, plain(*op, dtype, 2, 0), dtype, &[c, r], k as u64);
                count += 2;
            }
        }
        run_case(
            &device,
            plain(ScanOp::Sum, DataType::Bool, 2, -1),
            DataType::Bool,
            &[r, c],
            9,
        );
        run_case(
            &device,
            plain(ScanOp::Max, DataType::F16, 3, 1),
            DataType::F16,
            &[2, c, r],
            3,
        );
        run_case(
            &device,
            plain(ScanOp::Min, DataType::I32, 3, 2),
            DataType::I32,
            &[2, r, c],
            4,
        );
        run_case(
            &device,
            built(DataType::BF16, 2, exclusive),
            DataType::BF16,
            &[r, c],
            5,
        );
        run_case(
            &device,
            built(DataType::F32, 2, near_one_product),
            DataType::F32,
            &[r, c],
            6,
        );
        run_case(
            &device,
            built(DataType::F32, 2, running_softmax_numerator),
            DataType::F32,
            &[r, c],
            7,
        );
        count += 6;
    }
    nvfuser_cuda::testing::note(&format!("gpu_scan: {count} fusions equal the reference"));
}
