//! Device-side checks (`nvfuser_core::codegen::checks`): an out-of-range index of
//! gather / take_along_axis / index_select and an integer div / fmod / remainder by
//! zero are reported at the next download or synchronize as `Error::DeviceAssert`
//! naming the op, the value and the bound; the flag is then cleared, so a good call
//! afterwards succeeds. The same calls on the CPU reference device are refused when
//! they run (the specification); the generated kernels of the tuned schedulers carry
//! the checks (checked without a GPU).
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_device_checks -- --nocapture
//! ```

use nvfuser_core::codegen::CheckKind;
use nvfuser_core::scheduler::{DeviceInfo, RuntimeInfo};
use nvfuser_core::{DataType, Fusion, FusionDefinition};
use nvfuser_cuda::testing::{require_gpu, require_nvrtc};
use nvfuser_cuda::{Arg, Device, Error, FusionExecutorCache, Tensor};

fn gpu() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda(0).unwrap_or_else(|e| panic!("the driver sees a GPU, but: {e}")))
}

/// `gather(x, 1, idx)` of an f32 `[rows, cols]` input with an i64 index.
fn gather_fusion() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let i = fd.define_tensor(DataType::I64, &[-1, -1]).unwrap();
    let g = fd.gather(x, 1, i).unwrap();
    fd.add_output(g).unwrap();
    fd.finish().unwrap()
}

/// `index_select(x, 0, rows)` of an f32 `[rows, cols]` input with an index of `dtype`.
fn index_select_fusion(dtype: DataType) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let i = fd.define_tensor(dtype, &[-1]).unwrap();
    let g = fd.index_select(x, 0, i).unwrap();
    fd.add_output(g).unwrap();
    fd.finish().unwrap()
}

/// `op(x, y)` of two 1-D tensors of an integer `dtype`.
fn division_fusion(dtype: DataType, op: &str) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(dtype, &[-1]).unwrap();
    let y = fd.define_tensor(dtype, &[-1]).unwrap();
    let z = match op {
        "div" => fd.div(x, y),
        "fmod" => fd.fmod(x, y),
        "remainder" => fd.remainder(x, y),
        other => panic!("{other}"),
    }
    .unwrap();
    fd.add_output(z).unwrap();
    fd.finish().unwrap()
}

fn args<'a>(ts: &'a [Tensor]) -> Vec<Arg<'a>> {
    ts.iter().map(Arg::from).collect()
}

/// Asserts a `DeviceAssert` of `op` with this value and bound.
fn expect_assert(r: Result<impl std::fmt::Debug, Error>, op: &str, value: i64, bound: i64) {
    match r {
        Err(Error::DeviceAssert {
            op: o,
            value: v,
            bound: b,
            ref message,
            ..
        }) => {
            assert_eq!((o.as_str(), v, b), (op, value, bound), "{message}");
            eprintln!("reported: {message}");
        }
        other => panic!("expected a device-side assert of {op} (value {value}), got {other:?}"),
    }
}

#[test]
fn gather_index_out_of_range_is_reported_at_download_then_cleared() {
    let Some(dev) = gpu() else { return };
    let exec = FusionExecutorCache::new(gather_fusion());
    let xv: Vec<f32> = (0..32).map(|v| v as f32).collect();
    let x = dev.tensor_from_slice(&xv, [2, 16]).unwrap();
    // One bad index (17 in a dim of 16), so the reported value is deterministic.
    let bad = dev.tensor_from_slice(&[0i64, 17, 3, 1], [2, 2]).unwrap();
    let out = exec.run(&dev, &args(&[x.clone(), bad])).unwrap();
    let r = out[0].to_vec::<f32>();
    match &r {
        Err(Error::DeviceAssert { axis, message, .. }) => {
            assert_eq!(*axis, Some(1));
            assert!(
                message.contains("gather index 17 out of range 0..16 at dim 1"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    expect_assert(r, "gather", 17, 16);
    // The flag was cleared: a good call succeeds.
    let good = dev.tensor_from_slice(&[0i64, 15, 3, 1], [2, 2]).unwrap();
    let out = exec.run(&dev, &args(&[x.clone(), good])).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.0, 15.0, 19.0, 17.0]);
    // Negative indices are out of range too (as on the CPU reference), reported by
    // synchronize; the bad element read nothing and is zero.
    let neg = dev.tensor_from_slice(&[0i64, -1, 3, 1], [2, 2]).unwrap();
    let out = exec.run(&dev, &args(&[x, neg])).unwrap();
    expect_assert(dev.synchronize(), "gather", -1, 16);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![0.0, 0.0, 19.0, 17.0]);
    dev.synchronize().unwrap();
}

#[test]
fn index_select_index_out_of_range_is_reported_for_i32_and_i64_indices() {
    let Some(dev) = gpu() else { return };
    let xv: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let x = dev.tensor_from_slice(&xv, [4, 3]).unwrap();
    for dtype in [DataType::I64, DataType::I32] {
        let exec = FusionExecutorCache::new(index_select_fusion(dtype));
        let (bad, good) = match dtype {
            DataType::I64 => (
                dev.tensor_from_slice(&[2i64, 4], [2]).unwrap(),
                dev.tensor_from_slice(&[2i64, 3], [2]).unwrap(),
            ),
            _ => (
                dev.tensor_from_slice(&[2i32, 4], [2]).unwrap(),
                dev.tensor_from_slice(&[2i32, 3], [2]).unwrap(),
            ),
        };
        let out = exec.run(&dev, &args(&[x.clone(), bad])).unwrap();
        expect_assert(out[0].to_vec::<f32>(), "index_select", 4, 4);
        let out = exec.run(&dev, &args(&[x.clone(), good])).unwrap();
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            vec![6.0, 7.0, 8.0, 9.0, 10.0, 11.0],
            "{dtype}"
        );
    }
    // An i64 index past 2^32 must not wrap into range in 32-bit index math.
    let exec = FusionExecutorCache::new(index_select_fusion(DataType::I64));
    let huge = dev.tensor_from_slice(&[(1i64 << 32) + 1, 0], [2]).unwrap();
    let out = exec.run(&dev, &args(&[x, huge])).unwrap();
    expect_assert(out[0].to_vec::<f32>(), "index_select", (1i64 << 32) + 1, 4);
}

#[test]
fn integer_division_by_zero_is_reported_for_i32_and_i64() {
    let Some(dev) = gpu() else { return };
    for dtype in [DataType::I32, DataType::I64] {
        for op in ["div", "fmod", "remainder"] {
            let exec = FusionExecutorCache::new(division_fusion(dtype, op));
            let upload = |v: &[i64]| match dtype {
                DataType::I32 => {
                    let w: Vec<i32> = v.iter().map(|&x| x as i32).collect();
                    dev.tensor_from_slice(&w, [v.len()]).unwrap()
                }
                _ => dev.tensor_from_slice(v, [v.len()]).unwrap(),
            };
            let x = upload(&[7, -7, 9, 5, 100]);
            let bad = upload(&[2, 2, 0, 3, 7]);
            let out = exec.run(&dev, &args(&[x.clone(), bad])).unwrap();
            let r = match dtype {
                DataType::I32 => out[0].to_vec::<i32>().map(|_| ()),
                _ => out[0].to_vec::<i64>().map(|_| ()),
            };
            match &r {
                Err(Error::DeviceAssert { message, .. }) => {
                    let what = if op == "div" {
                        "integer division by zero".to_string()
                    } else {
                        format!("integer {op} by zero")
                    };
                    assert!(message.contains(&what), "{dtype} {op}: {message}");
                    assert!(message.contains(" in T"), "{dtype} {op}: {message}");
                }
                other => panic!("{dtype} {op}: {other:?}"),
            }
            // The dividend of the failing element, bound 0.
            expect_assert(r, op, 9, 0);
            // Cleared: a good call gives the CPU reference's values.
            let good = upload(&[2, 2, -4, 3, 7]);
            let out = exec.run(&dev, &args(&[x.clone(), good])).unwrap();
            let want: Vec<i64> = match op {
                "div" => vec![3, -3, -2, 1, 14],
                "fmod" => vec![1, -1, 1, 2, 2],
                _ => vec![1, 1, -3, 2, 2],
            };
            let got: Vec<i64> = match dtype {
                DataType::I32 => out[0]
                    .to_vec::<i32>()
                    .unwrap()
                    .into_iter()
                    .map(i64::from)
                    .collect(),
                _ => out[0].to_vec::<i64>().unwrap(),
            };
            assert_eq!(got, want, "{dtype} {op}");
        }
    }
    dev.synchronize().unwrap();
}

/// The same calls on the CPU reference device are refused (the specification the
/// device-side checks follow). Runs everywhere.
#[test]
fn the_cpu_reference_refuses_the_same_calls() {
    let cpu = Device::cpu();
    let xv: Vec<f32> = (0..32).map(|v| v as f32).collect();
    let x = cpu.tensor_from_slice(&xv, [2, 16]).unwrap();
    let exec = FusionExecutorCache::new(gather_fusion());
    for bad in [[0i64, 17, 3, 1], [0, -1, 3, 1]] {
        let i = cpu.tensor_from_slice(&bad, [2, 2]).unwrap();
        let e = exec.run(&cpu, &args(&[x.clone(), i])).unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }
    let exec = FusionExecutorCache::new(index_select_fusion(DataType::I64));
    let i = cpu.tensor_from_slice(&[-1i64], [1]).unwrap();
    let e = exec.run(&cpu, &args(&[x, i])).unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    for op in ["div", "fmod", "remainder"] {
        let exec = FusionExecutorCache::new(division_fusion(DataType::I32, op));
        let a = cpu.tensor_from_slice(&[1i32, 2], [2]).unwrap();
        let b = cpu.tensor_from_slice(&[1i32, 0], [2]).unwrap();
        let e = exec.run(&cpu, &args(&[a, b])).unwrap_err();
        assert!(e.to_string().contains("division by zero"), "{op}: {e}");
    }
}

/// The kernels the tuned schedulers generate for these fusions carry the checks, take
/// the error buffer and compile with NVRTC (no GPU needed).
#[test]
fn tuned_kernels_carry_the_checks() {
    type Case = (Fusion, Vec<(DataType, Vec<i64>)>, &'static str, CheckKind);
    let cases: Vec<Case> = vec![
        (
            gather_fusion(),
            vec![
                (DataType::F32, vec![64, 512]),
                (DataType::I64, vec![64, 512]),
            ],
            "gather",
            CheckKind::Index { axis: 1 },
        ),
        (
            index_select_fusion(DataType::I32),
            vec![(DataType::F32, vec![64, 512]), (DataType::I32, vec![32])],
            "index_select",
            CheckKind::Index { axis: 0 },
        ),
        (
            division_fusion(DataType::I64, "div"),
            vec![(DataType::I64, vec![4096]), (DataType::I64, vec![4096])],
            "div",
            CheckKind::DivisionByZero,
        ),
        (
            division_fusion(DataType::I32, "remainder"),
            vec![(DataType::I32, vec![4096]), (DataType::I32, vec![4096])],
            "remainder",
            CheckKind::DivisionByZero,
        ),
    ];
    for (fusion, inputs, op, kind) in cases {
        let exec = FusionExecutorCache::new(fusion);
        let shapes: Vec<(DataType, &[i64])> = inputs.iter().map(|(d, s)| (*d, &s[..])).collect();
        let info = RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &shapes);
        let (params, kernel) = exec.generate_for(&info, None).unwrap();
        let kernel = kernel.expect("a kernel");
        let checks = kernel.abi.error_checks().unwrap_or_else(|| {
            panic!(
                "{op} ({params:?}): no error buffer in\n{}",
                kernel.cuda_source()
            )
        });
        assert!(
            checks.iter().any(|c| c.op == op && c.kind == kind),
            "{op}: {checks:?}"
        );
        let src = kernel.cuda_source();
        assert!(
            src.contains("unsigned long long* __restrict__ nvf_err"),
            "{op}"
        );
        if op == "div" {
            let c = checks.iter().find(|c| c.op == "div").unwrap();
            assert_eq!(c.expr, "T2 = T0 / T1", "{op}");
        }
        // NVRTC accepts it (skipped without NVRTC, required with NVFUSER_REQUIRE_NVRTC=1).
        if require_nvrtc().is_some() {
            nvfuser_cuda::compile(&src, &kernel.abi.name, nvfuser_cuda::GpuArch::SM90)
                .unwrap_or_else(|e| panic!("{op}: {e}"));
        }
    }
}
