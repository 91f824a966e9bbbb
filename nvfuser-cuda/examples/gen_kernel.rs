//! Prints the kernel the tuned schedulers generate for a workload (no GPU needed):
//! `cargo run -p nvfuser-cuda --example gen_kernel -- softmax bf16 32768 8192`.
use nvfuser_core::scheduler::{DeviceInfo, InputInfo, RuntimeInfo, TensorInfo};
use nvfuser_core::workloads::{self, WorkloadInput};
use nvfuser_core::DataType;
use nvfuser_cuda::FusionExecutorCache;

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let name = a.get(1).map_or("gelu_tanh", |s| s.as_str());
    let dtype = match a.get(2).map_or("bf16", |s| s.as_str()) {
        "f32" => DataType::F32,
        "f16" => DataType::F16,
        _ => DataType::BF16,
    };
    let rows: usize = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let hidden: usize = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(4096);
    let build = workloads::ALL
        .iter()
        .find(|w| w.0 == name)
        .expect("workload")
        .1;
    let exec = FusionExecutorCache::new(build(dtype).unwrap());
    let inputs = workloads::inputs(name, dtype, rows, hidden)
        .unwrap()
        .into_iter()
        .map(|w| match w {
            WorkloadInput::Tensor(d, s) => {
                let mut strides = vec![1i64; s.len()];
                for i in (0..s.len().saturating_sub(1)).rev() {
                    strides[i] = strides[i + 1] * s[i + 1] as i64;
                }
                InputInfo::Tensor(TensorInfo {
                    dtype: d,
                    sizes: s.iter().map(|&x| x as i64).collect(),
                    strides,
                    alignment: 16,
                })
            }
            WorkloadInput::Scalar(v) => InputInfo::Scalar(v),
        })
        .collect();
    let info = RuntimeInfo {
        device: DeviceInfo::h100_for_tests(),
        inputs,
    };
    let (params, kernel) = exec.generate_for(&info, None).unwrap();
    println!("// params: {}", serde_json::to_string(&params).unwrap());
    if let Some(k) = kernel {
        println!("{}", k.cuda_source());
    }
}
