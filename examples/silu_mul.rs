//! SwiGLU's elementwise half, `silu(gate) * up`, bf16 in and out, f32 math, defined with
//! `fusion!`. The `[N, 2H]` projection output is passed as two views of one buffer
//! (`x[:, :H]` and `x[:, H:]`, no copy): the fusion declares its inputs row-strided.
//!
//! `cargo run --example silu_mul` (on a machine without a GPU it runs on the CPU
//! reference evaluator and says so). Checked against a plain-Rust f64 reference.

mod common;

use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    /// `silu(gate) * up`; both inputs may be column slices of a wider tensor (the
    /// row stride is not the row length).
    pub fn silu_mul(
        #[layout(contiguity = [false, true])] gate: Tensor<bf16, [N, H]>,
        #[layout(contiguity = [false, true])] up: Tensor<bf16, [N, H]>,
    ) -> Tensor<bf16, [N, H]> {
        let y = (gate as f32).silu() * (up as f32);
        y as bf16
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let device = common::device();
    let (n, h) = common::pick(&device, (8192, 14336), (64, 512));
    let (x, xd) = common::random(&device, DataType::BF16, &[n, 2 * h], 1)?;
    // Copy-free views of the two halves: strides [2H, 1].
    let gate = xd.slice(1, 0, h as i64, 1)?;
    let up = xd.slice(1, h as i64, 2 * h as i64, 1)?;

    let y = silu_mul(&device, &gate, &up)?;
    println!(
        "silu_mul [{n}, 2 x {h}] bf16 on {device} (gate and up are views of one [{n}, {}] tensor)",
        2 * h
    );

    let xs = x.to_f64_vec();
    let mut want = Vec::with_capacity(n * h);
    for row in xs.chunks(2 * h) {
        let (g, u) = row.split_at(h);
        want.extend(g.iter().zip(u).map(|(g, u)| g / (1.0 + (-g).exp()) * u));
    }
    let ok = common::check("y", &y, &want, common::BF16_TOL)?;

    let exec = FusionExecutorCache::new(silu_mul_fusion()?.clone());
    let args = [(&gate).into(), (&up).into()];
    common::profile(&device, &exec, &args, 20)?;
    common::show(&device, &exec, &args, "silu_mul")?;
    common::finish(ok)
}
