//! The executor's runtime on a GPU: evicted runtimes unload their modules and free their
//! device memory; launches are asynchronous and stream-ordered, so several queued
//! launches (each reading the previous one's output, inputs dropped while kernels may
//! still run) give the right values at one download; outputs are allocated without a
//! memset, so every kernel must write every output element (checked on a memory pool
//! poisoned with NaN bytes first); inputs that another library owns on its own stream
//! are ordered both ways. Skipped without a GPU (required with `NVFUSER_REQUIRE_GPU=1`).
//!
//! ```text
//! source scripts/nvrtc-env.sh
//! NVFUSER_REQUIRE_GPU=1 NVFUSER_REQUIRE_NVRTC=1 cargo test -p nvfuser-cuda --test gpu_runtime -- --nocapture --test-threads=1
//! ```

mod common;

use std::sync::{Arc, Mutex, MutexGuard};

use common::{args, gpu, upload, Tally};
use nvfuser_core::eval::{evaluate, EvalInput, HostTensor};
use nvfuser_core::scheduler::HeuristicParams;
use nvfuser_core::{DataType, Fusion, FusionDefinition, ScalarValue, ValId};
use nvfuser_cuda::{Arg, Device, FusionExecutorCache, Tensor};

/// The tests of this file count loaded modules and free memory of the whole device:
/// they run one at a time even under a multi-threaded harness.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// `a * s + b` over `[N]` f32 with a scalar `s`.
fn axpb() -> Fusion {
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let s = fd.define_scalar(DataType::F32).unwrap();
    let b = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let t = fd.mul(a, s).unwrap();
    let y = fd.add(t, b).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

/// `x * 1.5 + 1` over `[N]` f32.
fn affine() -> Fusion {
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let k = fd.constant(1.5);
    let one = fd.constant(1.0);
    let t = fd.mul(x, k).unwrap();
    let y = fd.add(t, one).unwrap();
    fd.add_output(y).unwrap();
    fd.finish().unwrap()
}

fn host(t: &Tensor) -> HostTensor {
    t.to_host_tensor().unwrap()
}

/// A capacity-1 executor run over 18 input signatures (alignment classes of both
/// tensors, integer or float scalar), twice round: every call builds a runtime and evicts
/// the previous one. After each call exactly one module of this executor is loaded (the
/// evicted one was unloaded), and after all of them the device's free memory is back
/// where it was (each call's 16 MiB output was freed; 36 leaked outputs would be
/// 576 MiB). Dropping the executor unloads the last module.
#[test]
fn evicted_runtimes_unload_their_modules_and_free_device_memory() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    const N: usize = 4 << 20;
    const SLACK: usize = 64 << 20;
    let fusion = axpb();
    let a_full = device
        .tensor_from_host(&HostTensor::random(DataType::F32, &[N + 2], 1))
        .unwrap();
    let b_full = device
        .tensor_from_host(&HostTensor::random(DataType::F32, &[N + 2], 2))
        .unwrap();
    // Element offsets 0, 1, 2: 256-, 4- and 8-byte aligned views (alignment classes of
    // the input signature).
    let view = |t: &Tensor, off: i64| t.slice(0, off, off + N as i64, 1).unwrap();
    let mut signatures = Vec::new();
    for oa in 0..3 {
        for ob in 0..3 {
            for s in [ScalarValue::Float(0.5), ScalarValue::Int(3)] {
                signatures.push((view(&a_full, oa), view(&b_full, ob), s));
            }
        }
    }
    let exec = FusionExecutorCache::with_capacity(fusion.clone(), 1);
    let modules_at_start = device.loaded_modules();
    // Warm-up: the first runtime, the pool and NVRTC (one compile: every signature has
    // the same kernel source, so later builds load the cached CUBIN).
    let (a, b, s) = &signatures[0];
    drop(
        exec.run(&device, &[a.into(), Arg::Scalar(*s), b.into()])
            .unwrap(),
    );
    device.synchronize().unwrap();
    let modules = device.loaded_modules();
    assert_eq!(modules, modules_at_start + 1);
    // Blocks of dropped tensors stay cached for reuse: return them before each reading.
    device.release_cached_memory();
    device.synchronize().unwrap();
    let free_before = device.memory_info().unwrap().free_bytes;

    let mut tally = Tally::default();
    let mut calls = 0;
    for round in 0..2 {
        for (i, (a, b, s)) in signatures.iter().enumerate().skip(usize::from(round == 0)) {
            let out = exec
                .run(&device, &[a.into(), Arg::Scalar(*s), b.into()])
                .unwrap();
            calls += 1;
            assert_eq!(
                device.loaded_modules(),
                modules,
                "call {calls}: the evicted runtime's module is still loaded"
            );
            if i % 6 == 0 {
                let want = evaluate(
                    &fusion,
                    &[
                        EvalInput::Tensor(host(a)),
                        EvalInput::Scalar(*s),
                        EvalInput::Tensor(host(b)),
                    ],
                )
                .unwrap();
                tally.compare(&format!("signature {i} round {round}"), &out, &want);
            }
        }
    }
    device.synchronize().unwrap();
    device.release_cached_memory();
    device.synchronize().unwrap();
    let free_after = device.memory_info().unwrap().free_bytes;
    let stats = exec.stats();
    println!(
        "{calls} evicting calls: {} misses, {} evictions, {} module(s) loaded; free memory {} MiB before, {} MiB after",
        stats.misses,
        stats.evictions,
        device.loaded_modules() - modules_at_start,
        free_before >> 20,
        free_after >> 20
    );
    assert_eq!(stats.misses as usize, calls + 1);
    assert_eq!(stats.evictions as usize, calls);
    assert_eq!(stats.runtimes, 1);
    assert!(
        free_after + SLACK >= free_before,
        "device memory not freed: {free_before} bytes free before, {free_after} after"
    );
    drop(exec);
    assert_eq!(device.loaded_modules(), modules_at_start);
    tally.finish("evicting executor");
}

/// Sixteen launches queued back to back, each reading the previous one's output, with
/// the input and every intermediate dropped as soon as the next launch is queued; one
/// download at the end. Then eight different fusions queued with their outputs kept,
/// downloaded in reverse order.
#[test]
fn queued_launches_give_the_right_values_at_one_download() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    const N: usize = (1 << 20) + 3;
    let fusion = affine();
    let exec = FusionExecutorCache::new(fusion.clone());
    let x0 = HostTensor::random(DataType::F32, &[N], 7);
    let mut want = x0.clone();
    let mut y = {
        let x = device.tensor_from_host(&x0).unwrap();
        exec.run(&device, &[(&x).into()]).unwrap().remove(0)
        // `x` is dropped here, while the kernel may still be reading it.
    };
    want = evaluate(&fusion, &[EvalInput::Tensor(want)])
        .unwrap()
        .remove(0);
    for _ in 1..16 {
        y = exec.run(&device, &[(&y).into()]).unwrap().remove(0);
        want = evaluate(&fusion, &[EvalInput::Tensor(want)])
            .unwrap()
            .remove(0);
    }
    let mut tally = Tally::default();
    tally.compare("16 chained launches", &[y], &[want]);

    // Independent fusions, all queued before the first download.
    let cases: Vec<(&str, Fusion, Vec<EvalInput>)> = several_fusions();
    let mut pending = Vec::new();
    for (name, f, inputs) in &cases {
        let exec = FusionExecutorCache::new(f.clone());
        let tensors = upload(&device, inputs);
        let out = exec.run(&device, &args(inputs, &tensors)).unwrap();
        pending.push((name, out, evaluate(f, inputs).unwrap()));
        // `exec` and the inputs are dropped here; the queued kernels keep running.
    }
    for (name, got, want) in pending.iter().rev() {
        tally.compare(name, got, want);
    }
    tally.finish("queued launches");
}

/// Fusions of each kernel shape the default schedule makes, with inputs, including
/// reductions over empty dims (the kernel runs and writes the reduction's init value).
fn several_fusions() -> Vec<(&'static str, Fusion, Vec<EvalInput>)> {
    let rnd =
        |shape: &[usize], seed| EvalInput::Tensor(HostTensor::random(DataType::F32, shape, seed));
    let mut out = Vec::new();
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let b = fd.define_tensor(DataType::F32, &[-1]).unwrap();
    let y = fd.add(x, b).unwrap();
    let y = fd.relu(y).unwrap();
    fd.add_output(y).unwrap();
    out.push((
        "relu(x + b) [129, 1000]",
        fd.finish().unwrap(),
        vec![rnd(&[129, 1000], 1), rnd(&[1000], 2)],
    ));
    for (name, axis, shape) in [
        ("inner sum [333, 517]", 1, [333, 517]),
        ("outer sum [517, 333]", 0, [517, 333]),
        ("inner sum over an empty dim [7, 0]", 1, [7, 0]),
        ("outer sum over an empty dim [0, 300]", 0, [0, 300]),
    ] {
        let mut fd = FusionDefinition::new();
        let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
        let r = fd.sum(x, &[axis], false).unwrap();
        fd.add_output(r).unwrap();
        out.push((name, fd.finish().unwrap(), vec![rnd(&shape, 3)]));
    }
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let m = fd.max(x, &[1], true).unwrap();
    let d = fd.sub(x, m).unwrap();
    let e = fd.exp(d).unwrap();
    let s = fd.sum(e, &[1], true).unwrap();
    let y = fd.div(e, s).unwrap();
    fd.add_output(y).unwrap();
    out.push((
        "softmax [65, 1031]",
        fd.finish().unwrap(),
        vec![rnd(&[65, 1031], 4)],
    ));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let (v, m) = fd.var_mean(x, &[1], 0, false).unwrap();
    fd.add_output(v).unwrap();
    fd.add_output(m).unwrap();
    out.push((
        "var_mean [100, 257]",
        fd.finish().unwrap(),
        vec![rnd(&[100, 257], 5)],
    ));
    let mut fd = FusionDefinition::new();
    let x = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let y = fd.define_tensor(DataType::F32, &[-1, -1]).unwrap();
    let zero = fd.constant(0.0);
    let pd = fd.pad(x, &[(0, 0), (2, 3)], zero).unwrap();
    let ct = fd.cat(&[x, y], 1).unwrap();
    let t = fd.add(pd, ct).unwrap();
    fd.add_output(t).unwrap();
    out.push((
        "pad + cat [33, 257]",
        fd.finish().unwrap(),
        vec![rnd(&[33, 257], 6), rnd(&[33, 5], 7)],
    ));
    out
}

/// Frees `bytes` of NaN-filled (all ones) device memory back to the stream-ordered
/// pool, so that the next allocations likely reuse it; says whether a probe allocation
/// did.
fn poison_pool(device: &Device, bytes: usize) -> bool {
    let n = bytes / 4;
    let poison = device.tensor_from_slice(&vec![-1i32; n], [n]).unwrap();
    drop(poison);
    // Probe through cudarc directly on the same stream and pool.
    let stream = device.cuda_stream().unwrap();
    // SAFETY: the probe is only read as bytes.
    let probe = unsafe { stream.alloc::<u8>(1 << 20) }.unwrap();
    let back: Vec<u8> = stream.clone_dtoh(&probe).unwrap();
    drop(probe);
    back.iter().all(|&b| b == 0xff)
}

/// Outputs are allocated without a memset: with the pool poisoned first, every output
/// element must still be the kernel's (the fusions of `several_fusions`, each run right
/// after poisoning, with the registry's scheduler and with the default schedule).
#[test]
fn every_output_element_is_written_by_the_kernel() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let mut tally = Tally::default();
    let mut reused = 0;
    let cases = several_fusions();
    for (name, f, inputs) in &cases {
        let exec = FusionExecutorCache::new(f.clone());
        let tensors = upload(&device, inputs);
        let call = args(inputs, &tensors);
        let want = evaluate(f, inputs).unwrap();
        // The registry's choice, and the default schedule.
        for params in [None, Some(HeuristicParams::Default)] {
            let run = || match &params {
                Some(p) => exec.run_with_params(&device, &call, p),
                None => exec.run(&device, &call),
            };
            // Build (and compile) the runtime first, so the poisoned memory goes to
            // the outputs.
            drop(run().unwrap());
            reused += usize::from(poison_pool(&device, 64 << 20));
            let label = if params.is_some() {
                "default"
            } else {
                "registry"
            };
            tally.compare(&format!("{name} ({label})"), &run().unwrap(), &want);
        }
    }
    println!(
        "the pool handed poisoned memory to a probe allocation {reused} of {} times",
        2 * cases.len()
    );
    tally.finish("outputs on a poisoned pool");
}

/// An input that another library owns on its own (non-blocking) stream: the kernel
/// waits for the upload queued there, and the buffer is freed on that stream only after
/// the kernel. 64 MiB, so that a missing order would show.
#[test]
fn inputs_on_another_stream_are_ordered_both_ways() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    const N: usize = 16 << 20;
    let fusion = affine();
    let exec = FusionExecutorCache::new(fusion.clone());
    let host_x = HostTensor::random(DataType::F32, &[N], 11);
    let values: Vec<f32> = host_x.to_vec().unwrap();
    // A separate context object with its own stream, as another library would have.
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let stream = ctx.new_stream().unwrap();
    let mut tally = Tally::default();
    let want = evaluate(&fusion, &[EvalInput::Tensor(host_x)]).unwrap();
    for round in 0..3 {
        let slice = stream.clone_htod(&values).unwrap();
        let x = Tensor::from_cuda_slice(Arc::new(slice), DataType::F32, &[N], &[1], 0).unwrap();
        let y = exec.run(&device, &[(&x).into()]).unwrap();
        // Freed on the other stream, which waits for the kernel.
        drop(x);
        tally.compare(&format!("foreign-stream input, round {round}"), &y, &want);
    }
    tally.finish("inputs on another stream");
}

/// The child half of `a_faulting_kernel_surfaces_at_the_next_synchronize` (does nothing
/// unless the parent set `NVF_FAULT_CHILD`): launches a kernel on a bad address and
/// reports what the next synchronize and download say. A device fault is sticky for the
/// whole context, hence the separate process.
#[test]
fn fault_child() {
    if std::env::var_os("NVF_FAULT_CHILD").is_none() {
        return;
    }
    let Some(device) = gpu() else { return };
    let fusion = affine();
    let exec = FusionExecutorCache::new(fusion.clone());
    let x = device
        .tensor_from_host(&HostTensor::random(DataType::F32, &[1 << 20], 3))
        .unwrap();
    let y = exec.run(&device, &[(&x).into()]).unwrap().remove(0);
    let (kernel, function) = exec.kernel_and_function(&device, &[(&x).into()]).unwrap();
    // The same kernel with its input pointer replaced by an unmapped address.
    let (input, output) = (fusion.inputs()[0], fusion.outputs()[0].val);
    let mut packed = nvfuser_core::codegen::abi::PackedArgs::new();
    kernel
        .abi
        .pack_into(
            |id| {
                let t = if id == input {
                    &x
                } else if id == output {
                    &y
                } else {
                    return None;
                };
                Some(nvfuser_core::codegen::abi::ArgRef::Tensor {
                    ptr: if id == input {
                        0x100
                    } else {
                        t.cuda_address()?
                    },
                    sizes: t.sizes(),
                    strides: t.strides(),
                })
            },
            &[],
            &mut packed,
        )
        .unwrap();
    let mut params = packed.kernel_params();
    let dim = |_: ValId, a: usize| x.sizes().get(a).map(|&s| s as i64);
    let dims = |e: &[nvfuser_core::ir::Extent; 3]| -> [u32; 3] {
        let mut d = [1u32; 3];
        for (o, x) in d.iter_mut().zip(e) {
            *o = x.eval(&dim, &|_| None).unwrap() as u32;
        }
        d
    };
    let (grid, block) = (dims(&kernel.launch.grid), dims(&kernel.launch.block));
    // SAFETY: deliberately not: the kernel faults on the device. The process is a
    // throwaway child; the point is that the host sees the fault as an error.
    let launched = unsafe {
        nvfuser_cuda::launch::launch_raw(&device, &function, grid, block, params.as_mut_slice())
    };
    println!("launch returned: {launched:?}");
    println!("synchronize returned: {:?}", device.synchronize());
    println!(
        "download returned: {:?}",
        y.to_vec::<f32>().map(|v| v.len())
    );
}

/// A kernel that faults on the device does not fail its (asynchronous) launch; the
/// fault surfaces as a driver error at the next synchronize and download. Runs the
/// faulting half in a child process (the fault poisons the CUDA context).
#[test]
fn a_faulting_kernel_surfaces_at_the_next_synchronize() {
    let Some(_device) = gpu() else { return };
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fault_child", "--nocapture", "--test-threads=1"])
        .env("NVF_FAULT_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    let line = |what: &str| {
        stdout
            .lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| {
                panic!(
                    "no `{what}` line from the child:\n{stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            })
            .to_owned()
    };
    assert!(line("launch returned").contains("Ok"), "{stdout}");
    let sync = line("synchronize returned");
    assert!(
        sync.contains("Err") && sync.contains("cuStreamSynchronize"),
        "{sync}"
    );
    assert!(line("download returned").contains("Err"), "{stdout}");
}
