//! `iota` in every dtype and at lengths 1, 3, 5 and 1000, with the length a constant or
//! a scalar input (one executor called with every length in turn, so cached runtimes
//! are reused across lengths), on the GPU against the CPU reference; and, without a
//! GPU, the generated kernels' launch covering every element. Case 3 of the correctness
//! issue: `iota(3, 100, 1, i32)` returned `[100, 101, 1067610330]` on a GPU.
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_iota -- --nocapture
//! ```

use nvfuser_core::builder::Size;
use nvfuser_core::eval::{compare, evaluate, EvalInput, Tolerance};
use nvfuser_core::scheduler::{DeviceInfo, HeuristicParams, InputInfo, RuntimeInfo};
use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue};
use nvfuser_cuda::testing::{require_gpu, require_nvrtc};
use nvfuser_cuda::{Arg, Device, FusionExecutorCache};

const DTYPES: [DataType; 6] = [
    DataType::I32,
    DataType::I64,
    DataType::F32,
    DataType::F64,
    DataType::F16,
    DataType::BF16,
];
const LENGTHS: [i64; 4] = [1, 3, 5, 1000];

/// `iota(length, start, step, dtype)`: inputs `(n, start, step)` (all i64 scalars; `n`
/// unused when the length is the constant `constant`).
fn iota_fusion(dtype: DataType, constant: Option<i64>) -> Fusion {
    let mut fd = FusionDefinition::new();
    let n = fd.define_scalar(DataType::I64).unwrap();
    let start = fd.define_scalar(DataType::I64).unwrap();
    let step = fd.define_scalar(DataType::I64).unwrap();
    let len = match constant {
        Some(c) => Size::Const(c),
        None => Size::Val(n),
    };
    let i = fd.iota(len, start, step, dtype).unwrap();
    fd.add_output(i).unwrap();
    fd.finish().unwrap()
}

fn scalars(n: i64) -> [ScalarValue; 3] {
    [
        ScalarValue::Int(n),
        ScalarValue::Int(100),
        ScalarValue::Int(1),
    ]
}

#[test]
fn iota_matches_the_cpu_in_every_dtype_and_length() {
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    let mut failures = Vec::new();
    for dtype in DTYPES {
        // Scalar length: one executor for every length, in both orders.
        let by_scalar = FusionExecutorCache::new(iota_fusion(dtype, None));
        let mut order: Vec<i64> = LENGTHS.to_vec();
        order.extend(LENGTHS.iter().rev());
        let mut runs: Vec<(String, &FusionExecutorCache, i64)> = order
            .iter()
            .map(|&n| (format!("{dtype} iota(n = {n})"), &by_scalar, n))
            .collect();
        let constant: Vec<FusionExecutorCache> = LENGTHS
            .iter()
            .map(|&n| FusionExecutorCache::new(iota_fusion(dtype, Some(n))))
            .collect();
        for (e, &n) in constant.iter().zip(&LENGTHS) {
            runs.push((format!("{dtype} iota({n})"), e, n));
        }
        for (name, exec, n) in runs {
            let s = scalars(n);
            let want = evaluate(
                exec.fusion(),
                &s.iter().map(|&v| EvalInput::Scalar(v)).collect::<Vec<_>>(),
            )
            .unwrap();
            let args: Vec<Arg<'_>> = s.iter().map(|&v| Arg::Scalar(v)).collect();
            let got = match exec.run(&dev, &args) {
                Ok(g) => g[0].to_host_tensor().unwrap(),
                Err(e) => {
                    failures.push(format!("{name}: {e}"));
                    continue;
                }
            };
            if let Err(m) = compare(&got, &want[0], Tolerance::for_dtype(dtype)) {
                failures.push(format!("{name}: {m}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "iota mismatches:\n{}",
        failures.join("\n")
    );
}

/// The exact case of the issue, element by element.
#[test]
fn iota_3_from_100_in_i32() {
    let Some(_) = require_gpu() else { return };
    let dev = Device::cuda(0).unwrap();
    for constant in [Some(3), None] {
        let exec = FusionExecutorCache::new(iota_fusion(DataType::I32, constant));
        let args: Vec<Arg<'_>> = scalars(3).iter().map(|&v| Arg::Scalar(v)).collect();
        let out = exec.run(&dev, &args).unwrap();
        assert_eq!(
            out[0].to_vec::<i32>().unwrap(),
            vec![100, 101, 102],
            "{constant:?}"
        );
    }
}

/// Without a GPU: the kernel the schedulers generate for every dtype and length launches
/// enough threads for every element (grid x block x elements per thread >= length), is
/// predicated by the length, stores the output's own type, and compiles with NVRTC.
#[test]
fn iota_kernels_cover_every_element() {
    for dtype in DTYPES {
        for n in LENGTHS {
            for constant in [Some(n), None] {
                let exec = FusionExecutorCache::new(iota_fusion(dtype, constant));
                let info = RuntimeInfo {
                    device: DeviceInfo::h100_for_tests(),
                    inputs: scalars(n).iter().map(|&v| InputInfo::Scalar(v)).collect(),
                };
                let name = format!("{dtype} n={n} constant={}", constant.is_some());
                let (params, kernel) = exec.generate_for(&info, None).unwrap();
                let kernel = kernel.expect("a kernel");
                let scalar = |v: nvfuser_core::ValId| (v.id() == 0).then_some(n);
                let dims = |e: &[nvfuser_core::ir::Extent; 3]| -> i64 {
                    e.iter()
                        .map(|x| x.eval(&|_, _| None, &scalar).expect("launch extent"))
                        .product()
                };
                let per_thread = match &params {
                    HeuristicParams::Pointwise(p) => p.vectorize * p.unroll,
                    _ => 1,
                };
                let threads = dims(&kernel.launch.grid) * dims(&kernel.launch.block);
                assert!(
                    threads * per_thread >= n,
                    "{name}: {threads} threads x {per_thread} for {n} elements ({params:?})"
                );
                let src = kernel.cuda_source();
                let body = src
                    .split("// ---- end of runtime support ----\n")
                    .nth(1)
                    .unwrap();
                let ty = nvfuser_core::codegen::abi::cuda_type(dtype);
                assert!(
                    body.contains(&format!("{ty}* __restrict__ T")),
                    "{name}:\n{body}"
                );
                if n > 1 {
                    // A constant length is checked per vector when the vector divides
                    // it (`< n / v`, the lowering's `exact_outer`), else per element.
                    let bounds: Vec<String> = if constant.is_some() {
                        (0..5)
                            .map(|k| 1i64 << k)
                            .filter(|&d| d <= per_thread && n % d == 0)
                            .map(|d| format!("< {}", n / d))
                            .collect()
                    } else {
                        vec!["< s0".to_string()]
                    };
                    assert!(
                        bounds.iter().any(|b| body.contains(b.as_str())),
                        "{name}: no predicate {bounds:?}:\n{body}"
                    );
                }
                if require_nvrtc().is_some() {
                    nvfuser_cuda::compile(&src, &kernel.abi.name, nvfuser_cuda::GpuArch::SM90)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                }
            }
        }
    }
}
