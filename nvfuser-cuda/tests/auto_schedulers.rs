//! The tuned schedulers on the workloads of the benchmark suite, over a sweep of shapes
//! (rows 1..64K, hidden 1..256K, odd and non-multiple-of-vector sizes): the registry
//! picks the expected scheduler, its params schedule and generate, and every distinct
//! kernel compiles with NVRTC for sm_90 and sm_80 (skipped without NVRTC, required with
//! `NVFUSER_REQUIRE_NVRTC=1`).

use std::collections::BTreeMap;

use nvfuser_core::codegen::{self, KernelOptions};
use nvfuser_core::scheduler::{
    compute_heuristics, schedule_with, DeviceInfo, HeuristicParams, InputInfo, RuntimeInfo,
};
use nvfuser_core::workloads::{self, WorkloadInput};
use nvfuser_core::DataType;
use nvfuser_cuda::testing::require_nvrtc;
use nvfuser_cuda::{nvrtc, GpuArch};

const ROWS: &[i64] = &[1, 3, 128, 1000, 65536];
const HIDDEN: &[i64] = &[1, 7, 64, 1000, 1024, 4096, 8192, 12289, 32768, 262144];

fn expected_kind(name: &str, p: &HeuristicParams) -> bool {
    match name {
        "gelu_tanh" | "silu_mul" | "bias_add" => matches!(p, HeuristicParams::Pointwise(_)),
        "softmax" | "layer_norm" | "rms_norm" => matches!(
            p,
            HeuristicParams::InnerPersistent(_) | HeuristicParams::Reduction(_)
        ),
        "inner_sum" => matches!(p, HeuristicParams::Reduction(_)),
        "outer_sum" => matches!(p, HeuristicParams::OuterReduction(_)),
        "transpose" => matches!(p, HeuristicParams::Transpose(_)),
        _ => false,
    }
}

/// The heuristics' view of a contiguous, aligned call of workload `name`.
fn runtime_info(
    device: &DeviceInfo,
    name: &str,
    dtype: DataType,
    rows: i64,
    hidden: i64,
) -> RuntimeInfo {
    let all = workloads::inputs(name, dtype, rows as usize, hidden as usize).unwrap();
    let shapes: Vec<(DataType, Vec<i64>)> = all
        .iter()
        .filter_map(|i| match i {
            WorkloadInput::Tensor(d, s) => Some((*d, s.iter().map(|&x| x as i64).collect())),
            WorkloadInput::Scalar(_) => None,
        })
        .collect();
    let refs: Vec<(DataType, &[i64])> = shapes.iter().map(|(d, s)| (*d, s.as_slice())).collect();
    let mut info = RuntimeInfo::contiguous(device.clone(), &refs);
    for i in &all {
        if let WorkloadInput::Scalar(v) = i {
            info.inputs.push(InputInfo::Scalar(*v));
        }
    }
    info
}

#[test]
#[cfg_attr(
    not(feature = "nvrtc-tests"),
    ignore = "needs NVRTC: run with --features nvrtc-tests (scripts/nvrtc-env.sh installs it)"
)]
fn tuned_schedulers_take_the_workloads_and_compile() {
    let device = DeviceInfo::h100_for_tests();
    let mut kernels: BTreeMap<String, String> = BTreeMap::new();
    let mut per_kind: BTreeMap<&'static str, usize> = BTreeMap::new();
    for &(name, build) in workloads::ALL {
        let dtypes: &[DataType] = match name {
            "inner_sum" | "outer_sum" | "transpose" => &[DataType::F32, DataType::BF16],
            _ => &[DataType::BF16, DataType::F32],
        };
        for &dtype in dtypes {
            let fusion = build(dtype).unwrap();
            for &rows in ROWS {
                for &hidden in HIDDEN {
                    if rows * hidden > 1 << 28 {
                        continue;
                    }
                    let info = runtime_info(&device, name, dtype, rows, hidden);
                    let case = format!("{name} {dtype} [{rows}, {hidden}]");
                    let params = compute_heuristics(&fusion, &info)
                        .unwrap_or_else(|e| panic!("{case}: no scheduler: {e}"));
                    assert!(expected_kind(name, &params), "{case}: took {params:?}");
                    let json = serde_json::to_string(&params).unwrap();
                    let back: HeuristicParams = serde_json::from_str(&json).unwrap();
                    assert_eq!(back, params, "{case}: params round trip through JSON");
                    let sf = schedule_with(&fusion, &params)
                        .unwrap_or_else(|e| panic!("{case}: {params:?}: {e}"));
                    let k = codegen::generate(
                        &sf,
                        &KernelOptions {
                            index_type: params.compile().unwrap().index_type,
                            ..KernelOptions::default()
                        },
                    )
                    .unwrap();
                    *per_kind.entry(params.kind().name()).or_default() += 1;
                    kernels.entry(k.cuda_source()).or_insert(case);
                }
            }
        }
    }
    println!(
        "cases per scheduler: {per_kind:?}; {} distinct kernels",
        kernels.len()
    );
    if require_nvrtc().is_none() {
        return;
    }
    for (source, case) in &kernels {
        for arch in [GpuArch::SM90, GpuArch::SM80] {
            nvrtc::compile(source, "nvfuser_kernel", arch)
                .unwrap_or_else(|e| panic!("{case} ({arch:?}): {e}"));
        }
    }
    println!(
        "{} distinct kernels compiled for sm_90 and sm_80",
        kernels.len()
    );
}

/// Every pointwise workload schedules with each unroll factor (loads hoisted into
/// their own loop ahead of the math, for any number of inputs).
#[test]
fn pointwise_schedules_with_every_unroll() {
    let device = DeviceInfo::h100_for_tests();
    for name in ["gelu_tanh", "silu_mul", "bias_add"] {
        let build = workloads::ALL.iter().find(|w| w.0 == name).unwrap().1;
        let fusion = build(DataType::BF16).unwrap();
        let info = runtime_info(&device, name, DataType::BF16, 4096, 4096);
        let HeuristicParams::Pointwise(p) = compute_heuristics(&fusion, &info).unwrap() else {
            panic!("{name} is not pointwise");
        };
        for unroll in [1, 2, 4, 8] {
            let mut q = p.clone();
            q.unroll = unroll;
            schedule_with(&fusion, &HeuristicParams::Pointwise(q))
                .unwrap_or_else(|e| panic!("{name} unroll {unroll}: {e}"));
        }
    }
}

/// A fusion no scheduler takes says why, scheduler by scheduler, in registry order.
#[test]
fn every_refusal_is_reported_in_order() {
    use nvfuser_core::FusionDefinition;
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let s = fd.define_scalar(DataType::F32).unwrap();
    let one = fd.constant(1.0f32);
    let s1 = fd.sub(s, one).unwrap();
    let y = fd.mul(x, s1).unwrap();
    fd.add_output(y).unwrap();
    let fusion = fd.finish().unwrap();
    let mut info =
        RuntimeInfo::contiguous(DeviceInfo::h100_for_tests(), &[(DataType::F32, &[4, 8])]);
    info.inputs.push(InputInfo::Scalar(2.0f32.into()));
    let err = compute_heuristics(&fusion, &info).unwrap_err();
    let kinds: Vec<_> = err.0.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        nvfuser_core::scheduler::SchedulerKind::ORDER.to_vec()
    );
    let text = err.to_string();
    assert!(
        text.contains("pointwise: the scalar expression sub"),
        "{text}"
    );
    assert!(
        text.contains("default: not supported by the default schedule"),
        "{text}"
    );
}

/// An inner dim too long for 65535 blocks on blockIdx.y keeps the pointwise schedule
/// 1-D (blocks on blockIdx.x) instead of refusing.
#[test]
fn a_huge_inner_dim_stays_pointwise() {
    let device = DeviceInfo::h100_for_tests();
    let fusion = workloads::gelu_tanh(DataType::BF16).unwrap();
    let info = runtime_info(&device, "gelu_tanh", DataType::BF16, 2, 1 << 30);
    let HeuristicParams::Pointwise(p) = compute_heuristics(&fusion, &info).unwrap() else {
        panic!("not pointwise");
    };
    assert_eq!(p.break_point, 0, "{p:?}");
    assert!(p.launch.grid[0] > 65535 && p.launch.grid[1] == 1, "{p:?}");
    let info = runtime_info(&device, "gelu_tanh", DataType::BF16, 8192, 8192);
    let HeuristicParams::Pointwise(p) = compute_heuristics(&fusion, &info).unwrap() else {
        panic!("not pointwise");
    };
    assert_eq!((p.break_point, p.launch.grid[0]), (1, 8192), "{p:?}");
}
