//! The caching pool and CUDA graph capture, on the GPU: cached blocks are reused and
//! released; captured fusion calls (one kernel, a grid reduction, segments) replay to
//! the values the CPU reference computes, also after their inputs are rewritten in
//! place; the blocks a graph uses are not handed to other tensors while it lives; and
//! capture refuses what it cannot hold. Without a GPU each test says it skipped (with
//! `NVFUSER_REQUIRE_GPU=1` it fails instead).

use nvfuser_core::eval::{compare, evaluate, EvalInput, HostTensor, Tolerance};
use nvfuser_core::{DataType, Fusion, FusionDefinition};
use nvfuser_cuda::testing::require_gpu;
use nvfuser_cuda::{Arg, Device, Error, FusionExecutorCache, Tensor};

/// One test at a time on the GPU (the timings and memory of one do not disturb another).
fn gpu_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn own_stream() -> Option<Device> {
    require_gpu()?;
    Some(Device::cuda_with_own_stream(0).unwrap_or_else(|e| panic!("a GPU is usable, but: {e}")))
}

/// relu(x) * 2 + y: one pointwise kernel.
fn pointwise() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let r = fd.relu(x).unwrap();
    let two = fd.constant(2.0);
    let m = fd.mul(r, two).unwrap();
    let z = fd.add(m, y).unwrap();
    fd.add_output(z).unwrap();
    fd.finish().unwrap()
}

/// The sum of every element of x (a grid reduction over one long row), and a forced
/// segment boundary before a row max: three outputs, more than one kernel.
fn reductions() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let total = fd.sum(x, &[0, 1], false).unwrap();
    fd.add_output(total).unwrap();
    let e = fd.exp(x).unwrap();
    let e = fd.segment_set(e).unwrap();
    let m = fd.max(e, &[1], false).unwrap();
    fd.add_output(m).unwrap();
    fd.finish().unwrap()
}

fn check(got: &Tensor, want: &HostTensor, what: &str) {
    compare(
        &got.to_host_tensor().unwrap(),
        want,
        Tolerance::new(1e-4, 1e-3),
    )
    .unwrap_or_else(|m| panic!("{what}: {m}"));
}

#[test]
fn dropped_blocks_are_reused_and_released() {
    let Some(device) = own_stream() else { return };
    let _serial = gpu_lock();
    let a = device.zeros(DataType::F32, [1000]).unwrap();
    let address = a.cuda_address().unwrap();
    drop(a);
    assert!(device.cached_bytes() >= 4000, "{}", device.cached_bytes());
    // The same size class gets the same block back, without a driver allocation.
    let b = device.zeros(DataType::F32, [1001]).unwrap();
    assert_eq!(b.cuda_address(), Some(address));
    assert_eq!(b.to_vec::<f32>().unwrap(), vec![0.0; 1001]);
    drop(b);
    assert!(device.release_cached_memory() >= 4000);
    assert_eq!(device.cached_bytes(), 0);
}

#[test]
fn captured_calls_replay_to_the_reference_values() {
    let Some(device) = own_stream() else { return };
    let _serial = gpu_lock();
    let pw = FusionExecutorCache::new(pointwise());
    let red = FusionExecutorCache::new(reductions());
    let (n, h) = (300, 4099);
    let hx = HostTensor::random(DataType::F32, &[n, h], 1);
    let hy = HostTensor::random(DataType::F32, &[n, h], 2);
    let x = device.tensor_from_host(&hx).unwrap();
    let y = device.tensor_from_host(&hy).unwrap();
    // Warm up: compile both.
    pw.run(&device, &[(&x).into(), (&y).into()]).unwrap();
    red.run(&device, &[(&x).into()]).unwrap();
    assert!(
        red.segmentation().is_some(),
        "the forced boundary segments it"
    );

    let (graph, outs) = device
        .capture(|| {
            let z = pw.run(&device, &[(&x).into(), (&y).into()])?.remove(0);
            let r = red.run(&device, &[(&z).into()])?;
            Ok((z, r))
        })
        .unwrap();
    assert!(graph.nodes() >= 3, "{graph:?}");
    let (z, r) = outs;
    // Tensors allocated after the capture must not share the graph's blocks.
    let others: Vec<Tensor> = (0..8)
        .map(|k| {
            device
                .tensor_from_host(&HostTensor::random(DataType::F32, &[n, h], 10 + k))
                .unwrap()
        })
        .collect();
    for round in 0..2 {
        let (hx, hy) = if round == 0 {
            (hx.clone(), hy.clone())
        } else {
            let hx = HostTensor::random(DataType::F32, &[n, h], 21);
            x.write_from_slice(&hx.to_vec::<f32>().unwrap()).unwrap();
            (hx, hy.clone())
        };
        graph.replay().unwrap();
        let want_z = evaluate(
            &pointwise(),
            &[EvalInput::Tensor(hx), EvalInput::Tensor(hy)],
        )
        .unwrap()
        .remove(0);
        let want_r = evaluate(&reductions(), &[EvalInput::Tensor(want_z.clone())]).unwrap();
        check(&z, &want_z, &format!("round {round}: pointwise output"));
        for (k, (got, want)) in r.iter().zip(&want_r).enumerate() {
            check(got, want, &format!("round {round}: reduction output {k}"));
        }
    }
    for (k, t) in others.iter().enumerate() {
        let want = HostTensor::random(DataType::F32, &[n, h], 10 + k as u64);
        assert_eq!(
            t.to_host_tensor().unwrap(),
            want,
            "tensor {k} allocated after the capture was overwritten by a replay"
        );
    }
    drop(graph);
    // Eager calls after the graph is gone still agree.
    let again = pw.run(&device, &[(&x).into(), (&y).into()]).unwrap();
    check(
        &again[0],
        &z.to_host_tensor().unwrap(),
        "eager after the graph",
    );
}

#[test]
fn capture_refuses_what_it_cannot_hold() {
    let Some(device) = own_stream() else { return };
    let _serial = gpu_lock();
    let legacy = Device::cuda(0).unwrap();
    let err = legacy.capture(|| Ok(())).unwrap_err();
    assert!(matches!(err, Error::Capture { .. }), "{err}");
    let err = Device::cpu().capture(|| Ok(())).unwrap_err();
    assert!(matches!(err, Error::NotAGpu { .. }), "{err}");
    let err = device.capture(|| Ok(())).unwrap_err();
    assert!(err.to_string().contains("nothing was captured"), "{err}");
    // A download inside a capture is refused by the driver, and the device still works.
    let t = device.zeros(DataType::F32, [16]).unwrap();
    assert!(device.capture(|| t.to_vec::<f32>()).is_err());
    let exec = FusionExecutorCache::new(pointwise());
    let a = device
        .tensor_from_host(&HostTensor::random(DataType::F32, &[4, 5], 3))
        .unwrap();
    let out = exec.run(&device, &[Arg::from(&a), Arg::from(&a)]).unwrap();
    assert_eq!(out[0].sizes(), &[4, 5]);
    device.synchronize().unwrap();
}

/// A cooperative kernel (the inner-outer RMSNorm backward: `dx` per row and `dw` from a
/// grid all-reduce, `cuLaunchCooperativeKernel`) captured into a graph replays to the
/// reference values, also after its inputs are rewritten in place. `tests/inner_outer.rs`
/// checks on the CPU that these shapes plan that kernel.
#[test]
fn a_captured_cooperative_kernel_replays() {
    let fusion = nvfuser_core::dsl::build_str(nvfuser_core::workloads::RMS_NORM_BWD)
        .unwrap()
        .remove(0)
        .0;
    let Some(device) = own_stream() else { return };
    let _serial = gpu_lock();
    let exec = FusionExecutorCache::new(fusion.clone());
    let (n, h) = (40000, 256);
    let host = [
        HostTensor::random(DataType::BF16, &[n, h], 31),
        HostTensor::random(DataType::BF16, &[n, h], 32),
        HostTensor::random(DataType::BF16, &[h], 33),
        HostTensor::random(DataType::F32, &[n, 1], 34),
    ];
    let inputs: Vec<Tensor> = host
        .iter()
        .map(|t| device.tensor_from_host(t).unwrap())
        .collect();
    let args: Vec<Arg> = inputs.iter().map(Arg::from).collect();
    // Warm up (compile), and check the kernel is the cooperative one.
    exec.run(&device, &args).unwrap();
    let info = nvfuser_cuda::executor::device_info(device.properties().unwrap());
    let kernels = exec.plan_kernels(info, &args).unwrap();
    assert!(
        kernels.len() == 1 && kernels[0].grid_sync,
        "expected one cooperative kernel"
    );
    let (graph, outs) = device.capture(|| exec.run(&device, &args)).unwrap();
    let tol = |d: DataType| match d {
        DataType::BF16 => Tolerance::new(2e-2, 2e-2),
        other => Tolerance::for_dtype(other),
    };
    for round in 0..2 {
        let mut host = host.clone();
        if round == 1 {
            host[0] = HostTensor::random(DataType::BF16, &[n, h], 41);
            inputs[0]
                .write_from_slice(&host[0].to_vec::<half::bf16>().unwrap())
                .unwrap();
        }
        graph.replay().unwrap();
        let want = evaluate(
            &fusion,
            &host
                .iter()
                .cloned()
                .map(EvalInput::Tensor)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        for (k, (got, want)) in outs.iter().zip(&want).enumerate() {
            compare(&got.to_host_tensor().unwrap(), want, tol(want.dtype()))
                .unwrap_or_else(|m| panic!("round {round}: output {k}: {m}"));
        }
    }
}

/// Stateful random ops on the GPU: a call takes the device generator's state (the CPU
/// reference with the same seed and offset gives the same numbers, bit for bit for
/// uniform f32) and moves it on; inside a capture, a call that leaves the seed and
/// offset to the generator is refused (every replay would draw the recorded numbers),
/// while one that passes them is recorded.
#[test]
fn stateful_random_ops_draw_from_the_device_generator() {
    let _g = gpu_lock();
    let Some(device) = own_stream() else { return };
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let (n, h) = (fd.size(x, 0).unwrap(), fd.size(x, 1).unwrap());
    let (lo, hi) = (fd.constant(0.0), fd.constant(1.0));
    let sizes = [nvfuser_core::Size::Val(n), nvfuser_core::Size::Val(h)];
    let u = fd.rand_uniform(&sizes, lo, hi, DataType::F32).unwrap();
    let y = fd.add(x, u).unwrap();
    fd.add_output(y).unwrap();
    let fusion = fd.finish().unwrap();
    let host = HostTensor::random(DataType::F32, &[333, 1001], 5);
    let xt = device.tensor_from_host(&host).unwrap();
    let exec = FusionExecutorCache::new(fusion.clone());
    device.manual_seed(2024);
    let mut seen = Vec::new();
    for call in 0..3u64 {
        let state = device.rng_state();
        assert_eq!(state.offset, call);
        let got = exec.run(&device, &[(&xt).into()]).unwrap();
        let want = evaluate(
            &fusion,
            &[
                EvalInput::Tensor(host.clone()),
                EvalInput::Scalar(nvfuser_core::ScalarValue::Int(state.seed as i64)),
                EvalInput::Scalar(nvfuser_core::ScalarValue::Int(state.offset as i64)),
            ],
        )
        .unwrap();
        check(&got[0], &want[0], "stateful uniform");
        seen.push(got[0].to_vec::<f32>().unwrap());
    }
    assert_ne!(seen[0], seen[1]);
    assert_ne!(seen[1], seen[2]);
    // Capture: left to the generator, refused; passed, recorded and replayed.
    let err = device
        .capture(|| exec.run(&device, &[(&xt).into()]))
        .unwrap_err();
    assert!(matches!(err, Error::Capture { .. }), "{err}");
    let fixed = [
        Arg::from(&xt),
        Arg::Scalar(nvfuser_core::ScalarValue::Int(7)),
        Arg::Scalar(nvfuser_core::ScalarValue::Int(0)),
    ];
    let (graph, outs) = device.capture(|| exec.run(&device, &fixed)).unwrap();
    graph.replay().unwrap();
    device.manual_seed(7);
    let direct = exec.run(&device, &[(&xt).into()]).unwrap();
    assert_eq!(
        outs[0].to_vec::<f32>().unwrap(),
        direct[0].to_vec::<f32>().unwrap()
    );
}
