//! Inner-outer persistent normalizations (norm backwards: `dx` with the row in
//! registers and the column sums `dw`, `db` in the same kernel), planned for an H100.

use nvfuser_core::plan::plan;
use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::workloads::{LAYER_NORM_BWD, RMS_NORM_BWD};
use nvfuser_core::DataType;

/// The inputs of a norm backward on an H100: `dy`, `x` `[n, h]` bf16, `w` `[h]` bf16,
/// then `stats` per-row f32 tensors (`mean`, `rstd` for LayerNorm; `rstd` for RMSNorm).
fn bwd_info(n: i64, h: i64, stats: usize) -> RuntimeInfo {
    let mut inputs: Vec<(DataType, Vec<i64>)> = vec![
        (DataType::BF16, vec![n, h]),
        (DataType::BF16, vec![n, h]),
        (DataType::BF16, vec![h]),
    ];
    inputs.extend(std::iter::repeat_n((DataType::F32, vec![n, 1]), stats));
    let refs: Vec<(DataType, &[i64])> = inputs.iter().map(|(d, s)| (*d, s.as_slice())).collect();
    RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &refs)
}

fn build(src: &str) -> nvfuser_core::Fusion {
    nvfuser_core::dsl::build_str(src).unwrap().remove(0).0
}

/// RMSNorm backward with enough rows per block: one cooperative kernel whose column sum
/// runs in the row loop and ends in the grid all-reduce.
#[test]
fn rms_norm_backward_with_many_rows_is_one_inner_outer_kernel() {
    let f = build(RMS_NORM_BWD);
    // The last two are `gpu_training`'s shapes for this path (checked here to plan it).
    for (n, h) in [
        (65536, 4096),
        (262144, 1024),
        (16384, 16384),
        (40000, 256),
        (36000, 640),
    ] {
        let p = plan(&f, &bwd_info(n, h, 1)).unwrap();
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
        (build(RMS_NORM_BWD), bwd_info(8192, 4096, 1)),
        (build(LAYER_NORM_BWD), bwd_info(65536, 4096, 2)),
    ];
    for (f, info) in cases {
        let p = plan(&f, &info).unwrap();
        let text = p.to_string();
        assert_eq!(p.kernels().count(), 2, "{text}");
        assert!(!text.contains("inner-outer persistent"), "{text}");
    }
    let d = nvfuser_core::scheduler::Registry::standard()
        .decide(&build(RMS_NORM_BWD), &bwd_info(8192, 4096, 1));
    let msg = match d {
        Ok(_) => panic!("expected a refusal"),
        Err(r) => format!("{r:?}"),
    };
    assert!(msg.contains("InnerOuterShape"), "{msg}");
}

/// A column sum of a value computed from a row reduction (the sum of a normalized
/// output) is not taken: its nest would contain the row's own loops (this overflowed the
/// stack in `loop_owner` once). It is planned as before, segmented.
#[test]
fn a_column_sum_of_a_row_reduction_result_is_not_inner_outer() {
    let f = build(
        "fn f(x: Tensor<f32, [N, H]>) -> (Tensor<f32, [N, H]>, Tensor<f32, [H]>) {
            let y = x - x.mean([1], keepdim = true);
            (y, y.sum([0]))
        }",
    );
    let info = RuntimeInfo::contiguous(
        DeviceInfo::h100_for_tests(),
        &[(DataType::F32, &[65536, 1024])],
    );
    let p = plan(&f, &info).unwrap();
    let text = p.to_string();
    assert!(!text.contains("inner-outer"), "{text}");
    assert!(p.kernels().count() >= 2, "{text}");
}

/// A fusion with a column sum beside row reductions at shapes the inner-outer kernel
/// refuses (few rows per block; rows too long to keep) is segmented with the two kept
/// apart (`gpu_fp8`'s reductions failed with "no scheduler takes this fusion" when a
/// segment merged them: the segmenter accepted it by analysis, the heuristics refused).
#[test]
fn refused_shapes_segment_with_column_sums_apart() {
    let f = build(
        "fn f(x: Tensor<f8e4m3, [N, H]>, y: Tensor<f8e5m2, [N, H]>) -> (Tensor<f32, [N]>, Tensor<f32, [N]>, Tensor<f8e4m3, [N]>, Tensor<f8e5m2, [N]>, Tensor<f8e4m3, [H]>) {
            let xf = x as f32;
            (xf.sum([1]), (y as f32).mean([1]), x.max([1]), y.min([1]), x.sum([0]))
        }",
    );
    for shape in [[128i64, 1024], [4, 100_000], [1000, 3]] {
        let info = RuntimeInfo::contiguous(
            DeviceInfo::h100_for_tests(),
            &[(DataType::F8E4M3, &shape), (DataType::F8E5M2, &shape)],
        );
        let p = plan(&f, &info).unwrap_or_else(|e| panic!("{shape:?}: {e}"));
        let text = p.to_string();
        assert!(p.segments.len() >= 2, "{shape:?}: {text}");
        assert!(!text.contains("inner-outer"), "{shape:?}: {text}");
    }
}
