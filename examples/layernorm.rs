//! LayerNorm over the last dim, bf16 in and out, f32 math, defined with `fusion!`.
//!
//! Run with `cargo run --example layernorm`. The fusion is checked against an
//! independent plain-Rust LayerNorm computed in f64.

use nvfuser::prelude::*;
use nvfuser::{eval::HostTensor, fusion};

fusion! {
    /// LayerNorm over the last dim, bf16 in and out, f32 math.
    pub fn layer_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, b: Tensor<bf16, [H]>, eps: f32)
        -> Tensor<bf16, [N, H]>
    {
        let x = x as f32;
        let mean = x.mean([1]).unsqueeze(1);
        let xc = x - mean;
        let var = (xc * xc).mean([1]).unsqueeze(1);
        let y = xc * rsqrt(var + eps) * (w as f32) + (b as f32);
        y as bf16
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let (n, h) = (8192usize, 4096usize);
    let eps = 1e-5f32;
    // `Device::best()` is GPU 0 when there is one, else the CPU reference evaluator (it
    // warns why through `log`). The CPU evaluator computes in f64: use a smaller problem.
    let device = Device::best();
    if device.is_cpu() {
        println!("nvfuser: no usable GPU here; running on the CPU reference evaluator");
    }
    let (n, h) = if device.is_gpu() { (n, h) } else { (256, 1024) };

    let x = HostTensor::random(DataType::BF16, &[n, h], 1);
    let w = HostTensor::random(DataType::BF16, &[h], 2);
    let b = HostTensor::random(DataType::BF16, &[h], 3);
    let (xd, wd, bd) = (
        device.tensor_from_host(&x)?,
        device.tensor_from_host(&w)?,
        device.tensor_from_host(&b)?,
    );

    // The first call builds the fusion, schedules it and compiles the kernel; later calls
    // hit the process-wide cache.
    // Launches are queued on the device's stream, so each timed call ends with a
    // synchronize.
    let start = std::time::Instant::now();
    let y = layer_norm(&device, &xd, &wd, &bd, eps)?;
    device.synchronize()?;
    let first = start.elapsed();
    let mut times = Vec::new();
    for _ in 0..20 {
        let start = std::time::Instant::now();
        let _ = layer_norm(&device, &xd, &wd, &bd, eps)?;
        device.synchronize()?;
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let y: Vec<bf16> = y.to_vec()?;

    // An independent reference: plain Rust, f64 math.
    let (xs, ws, bs) = (x.to_f64_vec(), w.to_f64_vec(), b.to_f64_vec());
    let mut worst = 0.0f64;
    for row in 0..n {
        let r = &xs[row * h..(row + 1) * h];
        let mean = r.iter().sum::<f64>() / h as f64;
        let var = r.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / h as f64;
        for j in 0..h {
            let want = (r[j] - mean) / (var + eps as f64).sqrt() * ws[j] + bs[j];
            let got = y[row * h + j].to_f64();
            worst = worst.max((got - want).abs() / (1.0 + want.abs()));
        }
    }
    // bf16 keeps 8 significant bits: one rounding of the output is within 2^-8 relative.
    let ok = worst <= 1.0 / 256.0;
    let bytes = (2 * n * h + 2 * h) * 2; // x read, y written, w and b read; bf16
    println!("layer_norm [{n}, {h}] bf16 on {device}");
    println!(
        "  first call (build + compile + run): {:.1} ms",
        first.as_secs_f64() * 1e3
    );
    if device.is_gpu() {
        println!(
            "  cached call: {:.3} ms median of 20 (host time, including the synchronize), {:.0} GB/s",
            median * 1e3,
            bytes as f64 / median / 1e9
        );
    } else {
        println!(
            "  cached call: {:.1} ms median of 20 on the CPU reference",
            median * 1e3
        );
    }
    println!(
        "  worst relative error vs an f64 reference: {worst:.2e} ({})",
        if ok { "ok" } else { "MISMATCH" }
    );
    println!(
        "\nThe fusion (`{{}}` of `layer_norm_fusion()?`; `to_reproducer` gives `fusion!` source):"
    );
    println!("{}", layer_norm_fusion()?);
    if device.is_gpu() {
        // The generated kernel: the same executor API the macro uses, one call away.
        let exec = FusionExecutorCache::new(layer_norm_fusion()?.clone());
        let args = [(&xd).into(), (&wd).into(), (&bd).into(), eps.into()];
        let src = exec.cuda_source(&device, &args)?;
        let start = src.find("extern \"C\"").unwrap_or(0);
        println!(
            "The generated CUDA kernel (FusionExecutorCache::cuda_source):\n{}",
            &src[start..]
        );
    }
    if !ok {
        std::process::exit(1);
    }
    Ok(())
}
