//! Host overhead of a cached `FusionExecutorCache::run` of a tiny one-kernel fusion
//! (`a * 2 + b` on 1024 f32) against a bare launch of the same compiled kernel.
//!
//! What is timed, per call (median of 2000 calls after 200 warm-up calls):
//! - `executor run`: `exec.run(&gpu, &[a, b])`: argument checks, input signature,
//!   runtime lookup, output allocation, ABI packing, `cuLaunchKernel`, synchronize;
//! - `bare launch`: `cuLaunchKernel` of the same function with parameters packed once
//!   beforehand into a preallocated output, then synchronize.
//!
//! Both end with one stream synchronize, so the difference is the executor's host work.
//! Run: `cargo run --release --example host_overhead` (needs a GPU and NVRTC; on a
//! machine without a GPU it says so and exits successfully).

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::time::Instant;

use nvfuser_core::codegen::KernelArg;
use nvfuser_core::eval::HostTensor;
use nvfuser_core::{DataType, FusionDefinition};
use nvfuser_cuda::launch::launch_raw;
use nvfuser_cuda::{Arg, Device, FusionExecutorCache};

const N: usize = 1024;
const WARMUP: usize = 200;
const CALLS: usize = 2000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("host_overhead needs a GPU; none is usable here ({e}). Nothing to measure.");
            return Ok(());
        }
    };
    let mut fd = FusionDefinition::new();
    let a = fd.define_tensor(DataType::F32, &[-1])?;
    let b = fd.define_tensor(DataType::F32, &[-1])?;
    let two = fd.constant(2.0);
    let t = fd.mul(a, two)?;
    let y = fd.add(t, b)?;
    fd.add_output(y)?;
    let exec = FusionExecutorCache::new(fd.finish()?);

    let ta = device.tensor_from_host(&HostTensor::random(DataType::F32, &[N], 1))?;
    let tb = device.tensor_from_host(&HostTensor::random(DataType::F32, &[N], 2))?;
    let args = [Arg::from(&ta), Arg::from(&tb)];

    // Executor: first call compiles, the rest hit the runtime cache.
    let mut exec_us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let start = Instant::now();
        let out = exec.run(&device, &args)?;
        let dt = start.elapsed().as_secs_f64() * 1e6;
        drop(out);
        if i >= WARMUP {
            exec_us.push(dt);
        }
    }

    // Bare launch of the same kernel, parameters packed once.
    let (kernel, function) = exec.kernel_and_function(&device, &args)?;
    let fusion = exec.fusion();
    let out = device.zeros(DataType::F32, [N])?;
    let mut bound = BTreeMap::new();
    for (&id, t) in fusion.inputs().iter().zip([&ta, &tb]) {
        bound.insert(id, tensor_arg(t));
    }
    bound.insert(fusion.outputs()[0].val, tensor_arg(&out));
    let mut packed = kernel
        .abi
        .pack(&bound)
        .map_err(|e| format!("packing: {e}"))?;
    let mut params: Vec<*mut c_void> = packed
        .iter_mut()
        .map(|p| p.as_mut_ptr() as *mut c_void)
        .collect();
    let grid = [N.div_ceil(128) as u32, 1, 1];
    let block = [128, 1, 1];
    let mut bare_us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let start = Instant::now();
        // SAFETY: the parameters were packed by the kernel's own ABI for live buffers
        // (`ta`, `tb`, `out`) of N elements; grid and block are the default schedule's
        // (blockIdx.x over N/128 blocks of 128 threads).
        unsafe { launch_raw(&device, &function, grid, block, &mut params)? };
        device.synchronize()?;
        if i >= WARMUP {
            bare_us.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    let (e, b) = (median(exec_us), median(bare_us));
    let stats = exec.stats();
    println!("a * 2 + b on {N} f32, median of {CALLS} calls, each ending in a synchronize");
    println!("| path | us per call |");
    println!("|---|---|");
    println!("| executor run (cached) | {e:.2} |");
    println!("| bare launch | {b:.2} |");
    println!("| executor overhead | {:.2} |", e - b);
    println!(
        "runtime cache: {} miss(es), {} hits",
        stats.misses, stats.hits
    );
    Ok(())
}

fn tensor_arg(t: &nvfuser_cuda::Tensor) -> KernelArg {
    KernelArg::Tensor {
        ptr: t.cuda_address().unwrap_or(0),
        sizes: t.sizes().iter().map(|&s| s as i64).collect(),
        strides: t.strides().iter().map(|&s| s as i64).collect(),
    }
}
