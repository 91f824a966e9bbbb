//! A transformer-style block of three fusions captured into one CUDA graph and replayed.
//!
//! `rms_norm`, then `gelu`, then a residual add: three kernels. They are called once
//! (compiling them), captured with [`Device::capture`] on a device with its own stream,
//! and the graph is replayed: one driver call runs the three kernels. New inputs are
//! written into the captured input buffers in place ([`Tensor::write_from_slice`]) and
//! the graph replayed again; every replay's outputs are checked against the same fusions
//! run on the CPU reference device. The host time per block is compared between eager
//! calls and replays.
//!
//! Run with `cargo run --example graph`. Without a GPU the block runs on the CPU
//! reference evaluator, and the program says that graphs need a GPU.

use nvfuser::eval::HostTensor;
use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    /// RMSNorm over the last dim, bf16 in and out, f32 math.
    pub fn rms_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, eps: f32) -> Tensor<bf16, [N, H]> {
        let x = x as f32;
        let ms = (x * x).mean([1]).unsqueeze(1);
        let y = x * rsqrt(ms + eps) * (w as f32);
        y as bf16
    }
}

fusion! {
    /// GELU, tanh approximation, bf16 in and out.
    pub fn gelu(x: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        let x = x as f32;
        let inner = (x + x * x * x * 0.044715f32) * 0.7978845608f32;
        let y = x * (tanh(inner) + 1.0f32) * 0.5f32;
        y as bf16
    }
}

fusion! {
    /// Residual add, bf16, f32 math.
    pub fn residual(a: Tensor<bf16, [N, H]>, x: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        let y = (a as f32) + (x as f32);
        y as bf16
    }
}

const EPS: f32 = 1e-6;

/// The block: three fusion calls.
fn block(device: &Device, x: &Tensor, w: &Tensor) -> Result<Tensor, nvfuser::Error> {
    let h = rms_norm(device, x, w, EPS)?;
    let a = gelu(device, &h)?;
    residual(device, &a, x)
}

/// The block on the CPU reference device, from host copies of the inputs.
fn reference(x: &HostTensor, w: &HostTensor) -> Result<Vec<bf16>, nvfuser::Error> {
    let cpu = Device::cpu();
    let (x, w) = (cpu.tensor_from_host(x)?, cpu.tensor_from_host(w)?);
    block(&cpu, &x, &w)?.to_vec()
}

/// The largest difference between `got` and `want`, relative to `1 + |want|`.
fn worst(got: &[bf16], want: &[bf16]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(g, w)| (g.to_f64() - w.to_f64()).abs() / (1.0 + w.to_f64().abs()))
        .fold(0.0, f64::max)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, h) = (256usize, 4096usize);
    let x = HostTensor::random(DataType::BF16, &[n, h], 1);
    let w = HostTensor::random(DataType::BF16, &[h], 2);
    let device = match Device::cuda_with_own_stream(0) {
        Ok(d) => d,
        Err(_) => {
            println!("CUDA graphs need a GPU, and none is usable here: the block runs on the CPU reference evaluator instead.");
            let y = reference(&x, &w)?;
            println!(
                "block [{n}, {h}] bf16 on the CPU reference: {} outputs",
                y.len()
            );
            return Ok(());
        }
    };
    let (xd, wd) = (device.tensor_from_host(&x)?, device.tensor_from_host(&w)?);
    // Eager: the first call compiles the three kernels; later calls hit the caches.
    let eager = block(&device, &xd, &wd)?.to_vec::<bf16>()?;
    let want = reference(&x, &w)?;
    // bf16 outputs after a few f32 ops: within a few bf16 ulps.
    let tol = 4.0 / 256.0;
    let e = worst(&eager, &want);
    println!("block [{n}, {h}] bf16 on {device}: eager call, worst difference {e:.2e} against the CPU reference");

    let (graph, y) = device.capture(|| block(&device, &xd, &wd))?;
    println!("captured: {} graph nodes", graph.nodes());
    graph.replay()?;
    let first = worst(&y.to_vec::<bf16>()?, &want);
    // New input values in the same buffer, then a replay.
    let x2 = HostTensor::random(DataType::BF16, &[n, h], 7);
    xd.write_from_slice(&x2.to_vec::<bf16>()?)?;
    graph.replay()?;
    let second = worst(&y.to_vec::<bf16>()?, &reference(&x2, &w)?);
    println!(
        "replay 1: worst difference {first:.2e}; replay 2 (new x written in place): {second:.2e}"
    );

    // Host time per block, eager against replayed (a synchronize every 32 blocks).
    let time = |f: &mut dyn FnMut() -> Result<(), nvfuser::Error>| -> Result<f64, nvfuser::Error> {
        let reps = 640;
        let start = std::time::Instant::now();
        for i in 0..reps {
            f()?;
            if i % 32 == 31 {
                device.synchronize()?;
            }
        }
        device.synchronize()?;
        Ok(start.elapsed().as_secs_f64() * 1e6 / reps as f64)
    };
    let eager_us = time(&mut || block(&device, &xd, &wd).map(drop))?;
    let graph_us = time(&mut || graph.replay())?;
    println!("per block: {eager_us:.1} us eager (3 fusion calls), {graph_us:.1} us replayed");
    let ok = e <= tol && first <= tol && second <= tol;
    println!(
        "{}",
        if ok {
            "values match the CPU reference"
        } else {
            "MISMATCH against the CPU reference"
        }
    );
    if !ok {
        return Err("graph replay values differ from the CPU reference".into());
    }
    Ok(())
}
