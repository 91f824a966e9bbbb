//! The Correctness issue's cases on the GPU against the CPU reference: LayerNorm
//! written with sums (rank 3 [64, 128, 1024], and rank 4, [B, S, H] with various S,
//! hidden sizes not powers of two), and `t1[2, 128] + sum(t0[2, 32], -1, keepdim)`
//! (segmented). Their kernels compile with NVRTC for sm_90 and sm_80 (skipped without
//! NVRTC). GPU tests skip without a GPU, required with `NVFUSER_REQUIRE_GPU=1`:
//!
//! ```text
//! NVFUSER_REQUIRE_GPU=1 cargo test -p nvfuser-cuda --test gpu_sched_mapping
//! ```

use nvfuser_core::eval::{EvalInput, HostTensor, Tolerance};
use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::testing::{layer_norm_sums, sum_into_wider};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::{require_gpu, require_nvrtc, run_and_compare};
use nvfuser_cuda::{nvrtc, Device, FusionExecutorCache, GpuArch};

fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

fn tolerance(_: DataType) -> Tolerance {
    Tolerance::new(2e-4, 2e-4)
}

fn inputs(shapes: &[&[usize]]) -> Vec<EvalInput> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| EvalInput::Tensor(HostTensor::random(DataType::F32, s, 17 + i as u64)))
        .collect()
}

const LAYER_NORM: &[&[usize]] = &[
    &[64, 128, 1024],
    &[64, 1024],
    &[2, 8, 16, 768],
    &[4, 1, 1000],
    &[4, 77, 4096],
    &[2, 3, 12289],
];

#[test]
fn layer_norm_with_sums_kernels_compile() {
    if require_nvrtc().is_none() {
        return;
    }
    for x in LAYER_NORM {
        let h = *x.last().unwrap();
        let exec = FusionExecutorCache::new(layer_norm_sums(x.len(), h as i64).unwrap());
        let xs: Vec<i64> = x.iter().map(|&d| d as i64).collect();
        let info = RuntimeInfo::contiguous(
            DeviceInfo::h100_for_tests(),
            &[
                (DataType::F32, &xs),
                (DataType::F32, &[h as i64]),
                (DataType::F32, &[h as i64]),
            ],
        );
        let (_, k) = exec.generate_for(&info, None).unwrap();
        let source = k.expect("a kernel").cuda_source();
        for arch in [GpuArch::SM90, GpuArch::SM80] {
            nvrtc::compile(&source, "nvfuser_kernel", arch)
                .unwrap_or_else(|e| panic!("{x:?} {arch:?}: {e}"));
        }
    }
}

#[test]
fn layer_norm_with_sums_matches_the_reference() {
    let Some(device) = gpu() else { return };
    for x in LAYER_NORM {
        let h = *x.last().unwrap();
        let exec = FusionExecutorCache::new(layer_norm_sums(x.len(), h as i64).unwrap());
        run_and_compare(&device, &exec, &inputs(&[x, &[h], &[h]]), None, &tolerance)
            .unwrap_or_else(|e| panic!("{x:?}: {e}"));
    }
}

#[test]
fn sum_broadcast_into_a_wider_tensor_matches_the_reference() {
    let Some(device) = gpu() else { return };
    let cases: &[(usize, i64, &[usize], &[usize])] = &[
        (2, -1, &[2, 32], &[2, 128]),
        (2, -1, &[2, 32], &[2, 32]),
        (3, -1, &[2, 3, 30], &[2, 3, 100]),
        (2, 0, &[32, 4], &[128, 4]),
        (3, 1, &[2, 30, 5], &[2, 100, 5]),
    ];
    for &(rank, axis, s0, s1) in cases {
        let exec = FusionExecutorCache::new(sum_into_wider(rank, axis).unwrap());
        run_and_compare(&device, &exec, &inputs(&[s0, s1]), None, &tolerance)
            .unwrap_or_else(|e| panic!("{s0:?} {s1:?}: {e}"));
    }
}
