//! Softmax over the last dim, bf16 in and out, f32 math, defined with `fusion!`.
//!
//! `cargo run --example softmax` (on a machine without a GPU it runs on the CPU
//! reference evaluator and says so). Checked against a plain-Rust f64 softmax.

mod common;

use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    /// Numerically stable softmax: subtract the row max before `exp`.
    pub fn softmax(x: Tensor<bf16, [N, H]>) -> Tensor<bf16, [N, H]> {
        let x = x as f32;
        let m = x.max([1], keepdim = true);
        let e = (x - m).exp();
        let y = e / e.sum([1], keepdim = true);
        y as bf16
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let device = common::device();
    let (n, h) = common::pick(&device, (16384, 8192), (64, 1024));
    let (x, xd) = common::random(&device, DataType::BF16, &[n, h], 1)?;

    let y = softmax(&device, &xd)?;
    println!("softmax [{n}, {h}] bf16 on {device}");

    let mut want = Vec::with_capacity(n * h);
    for row in x.to_f64_vec().chunks(h) {
        let m = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = row.iter().map(|v| (v - m).exp()).sum();
        want.extend(row.iter().map(|v| (v - m).exp() / sum));
    }
    let ok = common::check("y", &y, &want, common::BF16_TOL)?;

    let exec = FusionExecutorCache::new(softmax_fusion()?.clone());
    let args = [(&xd).into()];
    common::profile(&device, &exec, &args, 20)?;
    common::show(&device, &exec, &args, "softmax")?;
    common::finish(ok)
}
