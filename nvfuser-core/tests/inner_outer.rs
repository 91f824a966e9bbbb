//! Inner-outer persistent normalizations (norm backwards: `dx` with the row in
//! registers and the column sums `dw`, `db` in the same kernel), planned for an H100.

use nvfuser_core::plan::plan;
use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::workloads::{LAYER_NORM_BWD, RMS_NORM_BWD};
use nvfuser_core::DataType;

fn ln_bwd_info(n: i64, h: i64) -> RuntimeInfo {
    RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[
            (DataType::BF16, &[n, h]),
            (DataType::BF16, &[n, h]),
            (DataType::BF16, &[h]),
            (DataType::F32, &[n, 1]),
            (DataType::F32, &[n, 1]),
        ],
    )
}

fn build(src: &str) -> nvfuser_core::Fusion {
    nvfuser_core::dsl::build_str(src).unwrap().remove(0).0
}

fn rms_bwd_info(n: i64, h: i64) -> RuntimeInfo {
    RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[
            (DataType::BF16, &[n, h]),
            (DataType::BF16, &[n, h]),
            (DataType::BF16, &[h]),
            (DataType::F32, &[n, 1]),
        ],
    )
}

/// RMSNorm backward with enough rows per block: one cooperative kernel whose column sum
/// runs in the row loop and ends in the grid all-reduce.
#[test]
fn rms_norm_backward_with_many_rows_is_one_inner_outer_kernel() {
    let f = build(RMS_NORM_BWD);
    for (n, h) in [(65536, 4096), (262144, 1024), (16384, 16384)] {
        let p = plan(&f, &rms_bwd_info(n, h)).unwrap();
        let text = p.to_string();
        assert_eq!(p.kernels().count(), 1, "{text}");
        assert_eq!(p.segments[0].scheduler, "inner-outer persistent", "{text}");
        let k = p.kernels().next().unwrap();
        assert!(k.grid_sync, "{text}");
        let src = k.cuda_source();
        assert!(src.contains("nvf_grid_allreduce_group("), "{src}");
        assert!(src.contains("__launch_bounds__("), "{src}");
    }
}

/// Where the inner-outer kernel measured slower (two column sums, or few rows per
/// block), the fusion is segmented as before, and the refusal says why.
#[test]
fn few_rows_or_two_column_sums_stay_segmented() {
    let cases = [
        (build(RMS_NORM_BWD), rms_bwd_info(8192, 4096)),
        (build(LAYER_NORM_BWD), ln_bwd_info(65536, 4096)),
    ];
    for (f, info) in cases {
        let p = plan(&f, &info).unwrap();
        let text = p.to_string();
        assert_eq!(p.kernels().count(), 2, "{text}");
        assert!(!text.contains("inner-outer persistent"), "{text}");
    }
    let d = nvfuser_core::scheduler::Registry::standard()
        .decide(&build(RMS_NORM_BWD), &rms_bwd_info(8192, 4096));
    let msg = match d {
        Ok(_) => panic!("expected a refusal"),
        Err(r) => format!("{r:?}"),
    };
    assert!(msg.contains("InnerOuterShape"), "{msg}");
}
