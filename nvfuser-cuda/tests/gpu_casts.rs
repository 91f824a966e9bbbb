//! Float-to-integer and float-to-bool casts of NaN, infinities and out-of-range values,
//! on the CPU reference device and on a GPU, against PyTorch's CUDA results (case 9 of the
//! correctness issue). The expected rows were printed by `scripts/semantics/torch_casts.py`
//! on an H100 with PyTorch 2.11; both devices must give them exactly.
//!
//! ```text
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_casts
//! ```

use nvfuser_core::eval::HostTensor;
use nvfuser_core::{DataType, Fusion, FusionDefinition};
use nvfuser_cuda::testing::require_gpu;
use nvfuser_cuda::{Device, FusionExecutorCache};

const VALUES: [f64; 11] = [
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    3e9,
    -3e9,
    1e19,
    -1e19,
    1e30,
    2.5,
    -2.5,
    -0.5,
];
const I32_MIN: i64 = i32::MIN as i64;
const I32_MAX: i64 = i32::MAX as i64;

/// PyTorch on CUDA, per source dtype: the i32 and i64 results for `VALUES` (rounded to
/// the source dtype first: 3e9 in bf16 is 3003121664).
fn expected(from: DataType) -> ([i64; 11], [i64; 11]) {
    let nan32 = if from == DataType::F64 { I32_MIN } else { 0 };
    let (big, nbig) = match from {
        // f16 overflows 3e9 to +-inf.
        DataType::F16 => (i64::MAX, i64::MIN),
        DataType::BF16 => (3_003_121_664, -3_003_121_664),
        _ => (3_000_000_000, -3_000_000_000),
    };
    let i32s = [
        nan32, I32_MAX, I32_MIN, I32_MAX, I32_MIN, I32_MAX, I32_MIN, I32_MAX, 2, -2, 0,
    ];
    let i64s = [
        i64::MIN,
        i64::MAX,
        i64::MIN,
        big,
        nbig,
        i64::MAX,
        i64::MIN,
        i64::MAX,
        2,
        -2,
        0,
    ];
    (i32s, i64s)
}

fn cast_fusion(from: DataType) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(from, &[-1]).unwrap();
    for to in [DataType::I32, DataType::I64, DataType::Bool] {
        let y = fd.cast(x, to).unwrap();
        fd.add_output(y).unwrap();
    }
    fd.finish().unwrap()
}

fn check(device: &Device) {
    for from in [DataType::F16, DataType::BF16, DataType::F32, DataType::F64] {
        let host = HostTensor::from_vec(VALUES.to_vec(), &[VALUES.len()])
            .unwrap()
            .cast(from);
        let x = device.tensor_from_host(&host).unwrap();
        let exec = FusionExecutorCache::new(cast_fusion(from));
        let out = exec.run(device, &[(&x).into()]).unwrap();
        let (i32s, i64s) = expected(from);
        let got32: Vec<i64> = out[0]
            .to_vec::<i32>()
            .unwrap()
            .into_iter()
            .map(i64::from)
            .collect();
        assert_eq!(got32, i32s, "{from} -> i32 on {device}");
        assert_eq!(
            out[1].to_vec::<i64>().unwrap(),
            i64s,
            "{from} -> i64 on {device}"
        );
        // x != 0, NaN included.
        assert_eq!(
            out[2].to_vec::<bool>().unwrap(),
            vec![true; VALUES.len()],
            "{from} -> bool on {device}"
        );
    }
}

#[test]
fn special_values_cast_like_pytorch_cuda_on_the_cpu_device() {
    check(&Device::cpu());
}

#[test]
fn special_values_cast_like_pytorch_cuda_on_the_gpu() {
    let Some(_gpu) = require_gpu() else { return };
    check(&Device::cuda(0).unwrap());
}
