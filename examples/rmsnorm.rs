//! RMSNorm over the last dim, bf16 in and out, f32 math, defined with `fusion!`.
//!
//! `cargo run --example rmsnorm` (on a machine without a GPU it runs on the CPU
//! reference evaluator and says so). The result is checked against a plain-Rust f64
//! RMSNorm.

mod common;

use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    /// `y = x * rsqrt(mean(x^2) + eps) * w` over the last dim.
    pub fn rms_norm(x: Tensor<bf16, [N, H]>, w: Tensor<bf16, [H]>, eps: f32) -> Tensor<bf16, [N, H]> {
        let x = x as f32;
        let ms = (x * x).mean([1], keepdim = true);
        let y = x * rsqrt(ms + eps) * (w as f32);
        y as bf16
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let device = common::device();
    let (n, h) = common::pick(&device, (8192, 4096), (64, 1024));
    let eps = 1e-6f32;
    let (x, xd) = common::random(&device, DataType::BF16, &[n, h], 1)?;
    let (w, wd) = common::random(&device, DataType::BF16, &[h], 2)?;

    // The typed entry point: checks dtypes, ranks and that both `H`s agree, then runs
    // (the first call schedules and compiles; later calls hit the cache).
    let y = rms_norm(&device, &xd, &wd, eps)?;
    println!("rms_norm [{n}, {h}] bf16 on {device}");

    let (xs, ws) = (x.to_f64_vec(), w.to_f64_vec());
    let mut want = Vec::with_capacity(n * h);
    for row in xs.chunks(h) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / h as f64;
        let r = 1.0 / (ms + f64::from(eps)).sqrt();
        want.extend(row.iter().zip(&ws).map(|(v, w)| v * r * w));
    }
    let ok = common::check("y", &y, &want, common::BF16_TOL)?;

    // The same fusion through the run-time executor, to profile and inspect it.
    let exec = FusionExecutorCache::new(rms_norm_fusion()?.clone());
    let args = [(&xd).into(), (&wd).into(), eps.into()];
    common::profile(&device, &exec, &args, 20)?;
    common::show(&device, &exec, &args, "rmsnorm")?;
    common::finish(ok)
}
