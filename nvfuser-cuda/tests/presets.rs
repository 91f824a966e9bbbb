//! Planning for a GPU this machine does not have: the presets of `GpuModel` give the
//! heuristics, the schedule and the CUDA of every supported model, and NVRTC compiles
//! them for the model's architecture (no GPU needed). Skips with a printed reason
//! without NVRTC; fails when `NVFUSER_REQUIRE_NVRTC=1`.

use nvfuser_core::eval::HostTensor;
use nvfuser_core::scheduler::{DeviceInfo, GpuModel, HeuristicParams, RuntimeInfo};
use nvfuser_core::{DataType, Fusion};
use nvfuser_cuda::executor::device_info;
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{compile, Arg, Device, DeviceProperties, Error, FusionExecutorCache};

fn fusion(src: &str) -> Fusion {
    nvfuser_core::dsl::build_str(src).unwrap().remove(0).0
}

const LAYER_NORM: &str = "fn ln(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>) -> Tensor<bf16, [N, H]> {
    let x = x as f32;
    let mean = x.mean([1]).unsqueeze(1);
    let d = x - mean;
    let var = (d * d).mean([1]).unsqueeze(1);
    (d * rsqrt(var + 1e-5) * (w as f32) + (b as f32)) as bf16
}";

const ROW_SUM: &str = "fn rs(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N]> { x.sum([1]) }";

#[test]
fn preset_properties_give_the_preset_device_info() {
    for model in GpuModel::ALL {
        let props = DeviceProperties::preset(model);
        assert_eq!(device_info(&props), DeviceInfo::preset(model), "{model}");
        assert_eq!(props.name, model.spec().name);
        assert!(
            (props.peak_bandwidth_gb_per_s() - model.peak_bandwidth_gb_per_s()).abs() < 1e-6,
            "{model}"
        );
        let arch = props.arch();
        assert_eq!(
            (arch.major(), arch.minor()),
            model.spec().compute_capability,
            "{model}"
        );
    }
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn every_preset_plans_and_compiles_without_a_gpu() {
    let cpu = Device::cpu();
    let x = cpu
        .tensor_from_host(&HostTensor::random(DataType::BF16, &[2048, 4096], 1))
        .unwrap();
    let w = cpu
        .tensor_from_host(&HostTensor::random(DataType::BF16, &[4096], 2))
        .unwrap();
    let b = cpu
        .tensor_from_host(&HostTensor::random(DataType::BF16, &[4096], 3))
        .unwrap();
    let rows = cpu
        .tensor_from_host(&HostTensor::random(DataType::F32, &[8, 1 << 16], 4))
        .unwrap();
    let nvrtc = require_nvrtc().is_some();
    let mut compiled = 0;
    for model in GpuModel::ALL {
        let props = DeviceProperties::preset(model);
        for (src, args) in [
            (
                LAYER_NORM,
                vec![Arg::from(&x), Arg::from(&w), Arg::from(&b)],
            ),
            (ROW_SUM, vec![Arg::from(&rows)]),
        ] {
            let exec = FusionExecutorCache::new(fusion(src));
            let kernels = exec
                .plan_kernels(DeviceInfo::preset(model), &args)
                .unwrap_or_else(|e| panic!("{model}: planning failed: {e}"));
            assert_eq!(kernels.len(), 1, "{model}: one kernel");
            if !nvrtc {
                continue;
            }
            for k in kernels {
                match compile(&k.cuda_source(), "preset", props.arch()) {
                    Ok(_) => compiled += 1,
                    Err(Error::Compile(f)) => panic!("{model} ({}): {}", props.arch(), f.log),
                    Err(e) => panic!("{model} ({}): {e}", props.arch()),
                }
            }
        }
    }
    if nvrtc {
        assert_eq!(compiled, 2 * GpuModel::ALL.len());
        eprintln!(
            "compiled {compiled} planned kernels for {} presets",
            GpuModel::ALL.len()
        );
    }
}

/// The heuristics read the preset: a row sum with too few rows for the SMs splits each
/// row over more blocks on a GPU with more SMs.
#[test]
fn heuristics_follow_the_preset() {
    let exec = FusionExecutorCache::new(fusion(ROW_SUM));
    let split = |model: GpuModel| -> i64 {
        let info = RuntimeInfo::contiguous(
            DeviceInfo::preset(model),
            &[(DataType::F32, &[8, 1 << 20][..])],
        );
        match exec.generate_for(&info, None).unwrap().0 {
            HeuristicParams::Reduction(p) => p.grid_split,
            other => panic!("{model}: expected reduction params, got {other:?}"),
        }
    };
    // 8 rows of 2^20 floats: 4 blocks per SM over the rows, capped by the serial work.
    assert_eq!(split(GpuModel::A100), 54);
    assert_eq!(split(GpuModel::H100), 64);
    assert_eq!(split(GpuModel::B200), 64);
}
