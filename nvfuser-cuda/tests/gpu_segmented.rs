//! The segmented runtime: fusions that need several kernels.
//!
//! On a GPU: segmented fusions equal the CPU reference, and running the segments one by
//! one through their maps (`segment_args` + `run_segment`) equals running the whole
//! segmented fusion. Skipped with a printed reason without a GPU; a failure with
//! `NVFUSER_REQUIRE_GPU=1`. The same checks also run on the CPU reference device (no GPU
//! needed), where every segment runs on the evaluator.

use std::collections::HashMap;

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::ir::{Fusion, Op};
use nvfuser_core::prelude::*;
use nvfuser_core::scheduler::{
    can_schedule, DeviceInfo, InputInfo, Refusal, Rejection, Rejections, SchedulerKind,
};
use nvfuser_core::segment::{SegmentOptions, SegmentedFusion};
use nvfuser_cuda::testing::{note, require_gpu};
use nvfuser_cuda::{Arg, Device, Error, GpuArch, KernelCache, SegmentedRuntime, Tensor};

type Verdict = Result<SchedulerKind, Rejections>;

/// The GPU tests of this file run one at a time, so the kernel cache counters that one
/// of them checks are not moved by another.
fn gpu_lock() -> std::sync::MutexGuard<'static, ()> {
    static GPU: std::sync::Mutex<()> = std::sync::Mutex::new(());
    GPU.lock().unwrap_or_else(|p| p.into_inner())
}

/// y = x - sum(x, [1]) - sum(x, [0]) (both kept as dims): two reductions of different
/// shapes feeding one epilogue.
fn joint_epilogue() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let rows = fd.sum(x, &[1], true).unwrap();
    let cols = fd.sum(x, &[0], true).unwrap();
    let y = fd.sub(x, rows).unwrap();
    let y = fd.sub(y, cols).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// relu -> sum over dim 1 -> * 2 -> sum over dim 0 -> + 1, and the row sums as a second
/// output.
fn two_reduction_chain() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.relu(x).unwrap();
    let r1 = fd.sum(a, &[1], false).unwrap();
    let two = fd.constant(2.0);
    let m = fd.mul(r1, two).unwrap();
    let r2 = fd.sum(m, &[0], false).unwrap();
    let one = fd.constant(1.0);
    let out = fd.add(r2, one).unwrap();
    fd.add_output(out).unwrap();
    fd.add_output(r1).unwrap();
    fd.finish().unwrap()
}

/// exp(segment_set(relu(x))) + y.
fn forced_boundary() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let a = fd.relu(x).unwrap();
    let z = fd.segment_set(a).unwrap();
    let e = fd.exp(z).unwrap();
    let o = fd.add(e, y).unwrap();
    fd.add_output(o).unwrap();
    fd.finish().unwrap()
}

/// bf16 in and out: x / broadcast(sum(x)) with f32 math.
fn half_norm() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::BF16, &[-1, -1]).unwrap();
    let xf = fd.cast(x, DataType::F32).unwrap();
    let s = fd.sum(xf, &[1], false).unwrap();
    let b = fd.broadcast(s, &[false, true]).unwrap();
    let y = fd.div(xf, b).unwrap();
    let y = fd.cast(y, DataType::BF16).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// `blocks` blocks of pointwise math (reading `x` again), a row mean and a column mean,
/// each broadcast back.
fn alternating(blocks: usize) -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let w = x;
    let mut t = x;
    for k in 0..blocks {
        let c = fd.constant(0.5 + k as f64 * 0.25);
        t = fd.mul(t, c).unwrap();
        t = fd.tanh(t).unwrap();
        t = fd.add(t, w).unwrap();
        let rows = fd.mean(t, &[1], true).unwrap();
        t = fd.sub(t, rows).unwrap();
        let cols = fd.mean(t, &[0], true).unwrap();
        t = fd.sub(t, cols).unwrap();
    }
    fd.add_output(t).unwrap();
    fd.finish().unwrap()
}

/// A non-persistent reduction rule: no reduction result broadcast back in the same
/// kernel, and otherwise whatever the registry takes.
fn no_broadcast_of_reduction(f: &Fusion) -> Verdict {
    let mut derived = vec![false; f.num_vals()];
    for (_, e) in f.exprs() {
        let from = e.inputs.iter().any(|i| derived[i.index()]);
        if from && matches!(e.op, Op::Broadcast { .. }) {
            return Err(Rejections(vec![Rejection {
                kind: SchedulerKind::Reduction,
                reason: Refusal::Other {
                    reason: "a reduction result is broadcast".into(),
                },
            }]));
        }
        if from || e.op.reduction_axes().is_some() {
            for o in &e.outputs {
                derived[o.index()] = true;
            }
        }
    }
    can_schedule(f)
}

/// The cases: name, segmentation, input shapes (`large` adds sizes worth a GPU).
fn cases(large: bool) -> Vec<(&'static str, SegmentedFusion, Vec<Vec<usize>>)> {
    let registry = |f: &Fusion| SegmentedFusion::new(f).unwrap();
    let custom = |f: &Fusion| {
        SegmentedFusion::with_scheduler(f, &no_broadcast_of_reduction, SegmentOptions::default())
            .unwrap()
    };
    let mut cases = vec![
        (
            "joint epilogue",
            registry(&joint_epilogue()),
            vec![vec![67, 131]],
        ),
        (
            "two reduction chain",
            registry(&two_reduction_chain()),
            vec![vec![45, 300]],
        ),
        (
            "forced boundary",
            registry(&forced_boundary()),
            vec![vec![33, 65], vec![33, 65]],
        ),
        (
            "half norm (custom rule)",
            custom(&half_norm()),
            vec![vec![64, 1000]],
        ),
        (
            "alternating, 3 blocks",
            registry(&alternating(3)),
            vec![vec![96, 160]],
        ),
    ];
    if large {
        cases.push((
            "joint epilogue, large",
            registry(&joint_epilogue()),
            vec![vec![1024, 4096]],
        ));
        cases.push((
            "half norm, large",
            custom(&half_norm()),
            vec![vec![4096, 8192]],
        ));
    }
    cases
}

fn random_inputs(f: &Fusion, shapes: &[Vec<usize>], seed: u64) -> Vec<HostTensor> {
    f.inputs()
        .iter()
        .zip(shapes)
        .enumerate()
        .map(|(k, (&i, shape))| HostTensor::random(f.val(i).dtype, shape, seed + k as u64))
        .collect()
}

/// Runs every case on `device`: the segmented run against the CPU reference of the
/// whole fusion, and the segments one by one against the segmented run.
fn check_cases(device: &Device) {
    for (name, seg, shapes) in cases(device.is_gpu()) {
        let f = seg.original().clone();
        assert!(
            seg.is_segmented(),
            "{name}: expected several segments:\n{seg}"
        );
        for (k, s) in seg.segments().iter().enumerate() {
            assert!(
                can_schedule(s.fusion()).is_ok(),
                "{name}: segment {k} is not schedulable:\n{seg}"
            );
        }
        note(&format!(
            "{name}: {} segments ({})",
            seg.segments().len(),
            seg.segments()
                .iter()
                .map(|s| s.scheduler().name())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let host = random_inputs(&f, &shapes, 7);
        let eval_inputs: Vec<EvalInput> = host.iter().cloned().map(EvalInput::Tensor).collect();
        let reference = evaluate(&f, &eval_inputs).unwrap();
        let tensors: Vec<Tensor> = host
            .iter()
            .map(|h| device.tensor_from_host(h).unwrap())
            .collect();
        let args: Vec<Arg<'_>> = tensors.iter().map(Arg::from).collect();

        let rt = SegmentedRuntime::from_segmented(seg).unwrap();
        let out = rt
            .run(device, &args)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(out.len(), reference.len());
        for (k, (o, r)) in out.iter().zip(&reference).enumerate() {
            let o = o.to_host_tensor().unwrap();
            // Sums over thousands of f32 elements, then differences of such sums
            // (x - rows - cols): the GPU's f32 accumulation order leaves absolute errors
            // of about 1e-5 per thousand elements summed, against an f64 reference.
            let tol = match r.dtype() {
                DataType::F32 => Tolerance::new(1e-5, 1e-3),
                d => Tolerance::for_dtype(d),
            };
            compare(&o, r, tol)
                .unwrap_or_else(|m| panic!("{name}: output {k} against the CPU reference: {m}"));
        }

        // The segments one by one, through the maps.
        let fusion = rt.fusion();
        let mut env: HashMap<ValId, Tensor> = fusion
            .inputs()
            .iter()
            .copied()
            .zip(tensors.iter().cloned())
            .collect();
        for k in 0..rt.segmented().segments().len() {
            let seg_args = rt
                .segment_args(k, &|v| env.get(&v).map(Arg::Tensor))
                .unwrap();
            let outs = rt.run_segment(k, device, &seg_args).unwrap();
            let produced: Vec<ValId> = rt.segmented().segments()[k].outputs().to_vec();
            for (v, t) in produced.into_iter().zip(outs) {
                env.insert(v, t);
            }
        }
        for (k, (o, whole)) in fusion.outputs().iter().zip(&out).enumerate() {
            let a = env[&o.val].to_host_tensor().unwrap();
            let b = whole.to_host_tensor().unwrap();
            assert_eq!(
                a, b,
                "{name}: output {k}: segments one by one differ from the whole run (the same kernels on the same inputs)"
            );
        }

        // A second call reuses everything: no new plan or kernel build.
        let built = rt.stats().runtime.misses;
        rt.run(device, &args).unwrap();
        assert_eq!(
            rt.stats().runtime.misses,
            built,
            "{name}: the plan was rebuilt"
        );
        assert_eq!(rt.stats().runs, 2);
    }
}

#[test]
fn segmented_fusions_on_the_cpu_device() {
    check_cases(&Device::cpu());
}

#[test]
fn segmented_fusions_on_the_gpu() {
    let Some(_gpu) = require_gpu() else { return };
    let _serial = gpu_lock();
    let device = Device::cuda(0).unwrap();
    check_cases(&device);
}

#[test]
fn half_boundary_crosses_in_bf16_on_the_gpu() {
    let Some(_gpu) = require_gpu() else { return };
    let _serial = gpu_lock();
    let device = Device::cuda(0).unwrap();
    let f = half_norm();
    // Without private copies (which would recompute the cast in the epilogue), the
    // upcast crosses the boundary, in bf16.
    let options = SegmentOptions {
        private_cones: false,
        ..SegmentOptions::default()
    };
    let seg = SegmentedFusion::with_scheduler(&f, &no_broadcast_of_reduction, options).unwrap();
    assert_eq!(seg.half_boundaries().len(), 1);
    let stored = seg.half_boundaries()[0].stored;
    // The epilogue segment reads the bf16 input, not an f32 copy.
    let last = seg.segments().last().unwrap();
    assert!(last
        .inputs()
        .contains(&nvfuser_core::segment::SegmentValue::Val(stored)));
    let rt = SegmentedRuntime::from_segmented(seg).unwrap();
    let host = HostTensor::random(DataType::BF16, &[300, 2048], 3);
    let x = device.tensor_from_host(&host).unwrap();
    let out = rt.run(&device, &[(&x).into()]).unwrap();
    let reference = evaluate(&f, &[EvalInput::Tensor(host)]).unwrap();
    compare(
        &out[0].to_host_tensor().unwrap(),
        &reference[0],
        Tolerance::for_dtype(DataType::BF16),
    )
    .unwrap();
}

#[test]
fn segments_compile_in_parallel_on_the_first_call() {
    let Some(_gpu) = require_gpu() else { return };
    let _serial = gpu_lock();
    let device = Device::cuda(0).unwrap();
    let rt = SegmentedRuntime::new(alternating(4)).unwrap();
    let n = rt.segmented().segments().len();
    let host = random_inputs(rt.fusion(), &[vec![128, 256]], 11);
    let tensors: Vec<Tensor> = host
        .iter()
        .map(|h| device.tensor_from_host(h).unwrap())
        .collect();
    let args: Vec<Arg<'_>> = tensors.iter().map(Arg::from).collect();
    let start = std::time::Instant::now();
    let compiled = rt.compile(&device, &args).unwrap();
    note(&format!(
        "{n} segments: {compiled} kernels prepared in parallel in {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    ));
    assert!(compiled > 0 && compiled <= n);
    assert_eq!(
        rt.compile(&device, &args).unwrap(),
        0,
        "prepared once per layout"
    );
    // The run finds the compiled plan: nothing is compiled or even looked up again.
    let before = KernelCache::global().stats();
    let stats = rt.stats().runtime;
    let out = rt.run(&device, &args).unwrap();
    let after = KernelCache::global().stats();
    assert_eq!(after, before, "the run compiled or loaded kernels again");
    assert_eq!(rt.stats().runtime.hits, stats.hits + 1);
    assert_eq!(rt.stats().runtime.misses, stats.misses);
    let eval_inputs: Vec<EvalInput> = host.into_iter().map(EvalInput::Tensor).collect();
    let reference = evaluate(rt.fusion(), &eval_inputs).unwrap();
    compare(
        &out[0].to_host_tensor().unwrap(),
        &reference[0],
        Tolerance::for_dtype(DataType::F32),
    )
    .unwrap();
}

#[test]
fn segment_kernels_generate_and_compile_with_nvrtc() {
    // Without a GPU: the kernels the runtime would prepare for each segment (from the
    // predicted sizes of its inputs) generate, and NVRTC compiles them; the predicted
    // sizes are those the segments really produce (run on the CPU device).
    let Some(_nvrtc) = nvfuser_cuda::testing::require_nvrtc() else {
        return;
    };
    for (name, seg, shapes) in cases(true) {
        generate_and_compile(name, seg, &shapes).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn random_segment_kernels_generate_and_compile_with_nvrtc() {
    let Some(_nvrtc) = nvfuser_cuda::testing::require_nvrtc() else {
        return;
    };
    let mut refused = Vec::new();
    for seed in 0..RANDOM_CASES {
        let f = random_fusion(seed, 4 + (seed as usize % 20));
        let seg = SegmentedFusion::new(&f).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{f}"));
        if let Err(reason) =
            generate_and_compile(&format!("random seed {seed}"), seg, &[vec![37, 70]])
        {
            refused.push(format!("seed {seed}: {reason}"));
        }
    }
    // Every segment the registry accepted at compile time (can_schedule) generates for
    // real sizes: a tuned schedule the lowering refuses falls back to the default one.
    assert!(refused.is_empty(), "{refused:#?}");
}

/// Generates every segment's kernel for the sizes the runtime predicts and compiles it
/// with NVRTC; for small cases also runs the segments on the CPU device and checks the
/// predicted sizes against the real ones. A segment that the registry accepted but then
/// failed to schedule is returned as `Err` (with its reproducer); anything else panics.
fn generate_and_compile(
    name: &str,
    seg: SegmentedFusion,
    shapes: &[Vec<usize>],
) -> Result<(), String> {
    let cpu = Device::cpu();
    // The large cases are only generated and compiled (zeros, not run on the CPU).
    let large = shapes.iter().any(|s| s.iter().product::<usize>() > 1 << 20);
    let host: Vec<HostTensor> = if large {
        seg.original()
            .inputs()
            .iter()
            .zip(shapes)
            .map(|(&i, shape)| HostTensor::zeros(seg.original().val(i).dtype, shape).unwrap())
            .collect()
    } else {
        random_inputs(seg.original(), shapes, 5)
    };
    let tensors: Vec<Tensor> = host
        .iter()
        .map(|h| cpu.tensor_from_host(h).unwrap())
        .collect();
    let rt = SegmentedRuntime::from_segmented(seg).unwrap();
    let mut env: HashMap<ValId, Tensor> = rt
        .fusion()
        .inputs()
        .iter()
        .copied()
        .zip(tensors.iter().cloned())
        .collect();
    let args: Vec<Arg<'_>> = tensors.iter().map(Arg::from).collect();
    for (k, s) in rt.segmented().segments().iter().enumerate() {
        let info = rt
            .segment_runtime_info(k, DeviceInfo::h100_for_tests(), &args)
            .unwrap_or_else(|| panic!("{name}: segment {k}: sizes not predicted"));
        let (params, kernel) = match rt.executor(k).unwrap().generate_for(&info, None) {
            Ok(x) => x,
            Err(Error::UnsupportedFusion { reason }) if reason.contains("scheduling failed") => {
                return Err(format!(
                    "segment {k} ({}): {reason}\n{}",
                    s.scheduler(),
                    s.to_reproducer("gap")
                ));
            }
            Err(e) => panic!("{name}: segment {k}: {e}\n{}", rt.segmented()),
        };
        let kernel = kernel.expect("a kernel");
        nvfuser_cuda::compile(&kernel.cuda_source(), &kernel.abi.name, GpuArch::SM90)
            .unwrap_or_else(|e| panic!("{name}: segment {k} ({}): {e}", params.kind()));
        if large {
            continue;
        }
        let seg_args = rt
            .segment_args(k, &|v| env.get(&v).map(Arg::Tensor))
            .unwrap();
        for (i, (want, arg)) in info.inputs.iter().zip(&seg_args).enumerate() {
            match (want, arg) {
                (InputInfo::Tensor(p), Arg::Tensor(t)) => {
                    let real: Vec<i64> = t.sizes().iter().map(|&n| n as i64).collect();
                    assert_eq!(p.sizes, real, "{name}: segment {k} input {i}");
                }
                (InputInfo::Scalar(a), Arg::Scalar(b)) => assert_eq!(a, b),
                _ => panic!("{name}: segment {k} input {i}: kind differs"),
            }
        }
        let outs = rt.run_segment(k, &cpu, &seg_args).unwrap();
        for (&v, t) in s.outputs().iter().zip(outs) {
            env.insert(v, t);
        }
    }
    Ok(())
}

/// Random fusions checked on the GPU (and generated and compiled without one).
const RANDOM_CASES: u64 = 24;

/// A random fusion of about `ops` steps over one `[N, H]` f32 input: pointwise math,
/// row sums and column means broadcast back, row maxima, `segment_set`, bf16 round
/// trips; a bf16 output on odd seeds.
fn random_fusion(seed: u64, ops: usize) -> Fusion {
    let mut state = seed.wrapping_mul(0x9e37_79b9) + 1;
    let mut below = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % n as u64) as usize
    };
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let mut pool = vec![x];
    for _ in 0..ops {
        let a = pool[below(pool.len())];
        let b = pool[below(pool.len())];
        let v = match below(9) {
            0 => fd.tanh(a).unwrap(),
            1 => fd.sin(a).unwrap(),
            2 => fd.add(a, b).unwrap(),
            3 => fd.mul(a, b).unwrap(),
            4 => {
                let r = fd.sum(a, &[1], true).unwrap();
                fd.sub(b, r).unwrap()
            }
            5 => {
                let r = fd.mean(a, &[0], true).unwrap();
                fd.sub(b, r).unwrap()
            }
            6 => fd.segment_set(a).unwrap(),
            7 => {
                let c = fd.cast(a, DataType::BF16).unwrap();
                fd.cast(c, DataType::F32).unwrap()
            }
            _ => {
                let r = fd.max(a, &[1], false).unwrap();
                let r = fd.broadcast(r, &[false, true]).unwrap();
                fd.mul(b, r).unwrap()
            }
        };
        pool.push(v);
    }
    let last = *pool.last().unwrap();
    if seed % 2 == 1 {
        let o = fd.cast(last, DataType::BF16).unwrap();
        fd.add_output(o).unwrap();
    } else {
        fd.add_output(last).unwrap();
    }
    let extra = pool[1 + below(pool.len() - 1)];
    if extra != last {
        fd.add_output(extra).unwrap();
    }
    fd.finish().unwrap()
}

#[test]
fn random_segmented_fusions_on_the_gpu() {
    let Some(_gpu) = require_gpu() else { return };
    let _serial = gpu_lock();
    let device = Device::cuda(0).unwrap();
    for seed in 0..RANDOM_CASES {
        let f = random_fusion(seed, 4 + (seed as usize % 20));
        let rt = SegmentedRuntime::new(f.clone()).unwrap();
        let host = HostTensor::random(DataType::F32, &[129, 300], seed);
        let x = device.tensor_from_host(&host).unwrap();
        let out = rt
            .run(&device, &[(&x).into()])
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", rt.segmented()));
        let reference = evaluate(&f, &[EvalInput::Tensor(host)]).unwrap();
        for (k, (o, r)) in out.iter().zip(&reference).enumerate() {
            let tol = match r.dtype() {
                // A value rounded through bf16 inside the fusion (a cast pair) may
                // round differently after f32 math than after the reference's f64
                // math: one bf16 ulp.
                DataType::F32 if has_half_cast(&f) => Tolerance::new(8e-3, 1e-4),
                DataType::F32 => Tolerance::new(1e-4, 1e-4),
                d => Tolerance::for_dtype(d),
            };
            compare(&o.to_host_tensor().unwrap(), r, tol)
                .unwrap_or_else(|m| panic!("seed {seed}: output {k}: {m}\n{}", rt.segmented()));
        }
    }
}

#[test]
fn runtime_is_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SegmentedRuntime>();
}

#[test]
fn scalar_inputs_extents_and_empty_fusions_on_the_cpu_device() {
    // eps (a scalar input) and size(relu(x), 1) feed a scalar cone that both segments
    // recompute; segment 1 gets x's sizes as extent inputs.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let eps = fd.define_scalar(DataType::F64).unwrap();
    let a = fd.relu(x).unwrap();
    let n = fd.size(a, 1).unwrap();
    let c = fd.mul(eps, n).unwrap();
    let a2 = fd.mul(a, c).unwrap();
    let s = fd.sum(a2, &[1], false).unwrap();
    let b = fd.broadcast(s, &[false, true]).unwrap();
    let y = fd.sub(a2, b).unwrap();
    fd.add_output(y).unwrap();
    fd.add_output(s).unwrap();
    let f = fd.finish().unwrap();
    let seg = SegmentedFusion::with_scheduler(
        &f,
        &|f: &Fusion| {
            let mut derived = vec![false; f.num_vals()];
            for (_, e) in f.exprs() {
                let from = e.inputs.iter().any(|i| derived[i.index()]);
                if from && matches!(e.op, Op::Broadcast { .. }) {
                    return Err(Rejections(Vec::new()));
                }
                if from || e.op.reduction_axes().is_some() {
                    for o in &e.outputs {
                        derived[o.index()] = true;
                    }
                }
            }
            Ok(SchedulerKind::Default)
        },
        SegmentOptions::default(),
    )
    .unwrap();
    assert_eq!(seg.segments().len(), 2);
    let rt = SegmentedRuntime::from_segmented(seg).unwrap();
    let cpu = Device::cpu();
    let host = HostTensor::random(DataType::F32, &[6, 9], 1);
    let xt = cpu.tensor_from_host(&host).unwrap();
    let out = rt.run(&cpu, &[(&xt).into(), 0.5f64.into()]).unwrap();
    let reference = evaluate(
        &f,
        &[
            EvalInput::Tensor(host),
            EvalInput::Scalar(ScalarValue::Float(0.5)),
        ],
    )
    .unwrap();
    for (o, r) in out.iter().zip(&reference) {
        compare(&o.to_host_tensor().unwrap(), r, Tolerance::new(1e-5, 1e-5)).unwrap();
    }
    // Bad arguments are refused before anything runs.
    assert!(rt.run(&cpu, &[(&xt).into()]).is_err());

    // Nothing to compute: the output is the input.
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    fd.add_output(x).unwrap();
    let rt = SegmentedRuntime::new(fd.finish().unwrap()).unwrap();
    assert!(rt.segmented().segments().is_empty());
    let t = cpu.tensor_from_slice(&[1.0f32, 2.0], [2]).unwrap();
    let out = rt.run(&cpu, &[(&t).into()]).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
}

/// True when the fusion rounds some value to f16 or bf16.
fn has_half_cast(f: &Fusion) -> bool {
    f.exprs().any(|(_, e)| {
        matches!(e.op, nvfuser_core::ir::Op::Cast)
            && e.outputs
                .iter()
                .any(|&o| matches!(f.val(o).dtype, DataType::BF16 | DataType::F16))
    })
}
