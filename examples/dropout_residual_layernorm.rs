//! A transformer block's epilogue in one fusion: dropout (a Philox `uniform` mask),
//! residual add, LayerNorm; bf16 in and out, f32 math, two outputs (the new residual
//! stream `h` and the normalized `y`), defined with `fusion!`.
//!
//! `cargo run --example dropout_residual_layernorm` (on a machine without a GPU it runs
//! on the CPU reference evaluator and says so). Checked against plain Rust in f64, with
//! the random numbers from `nvfuser::philox` (the specified stream, bit-exact on the
//! CPU and the GPU).

mod common;

use nvfuser::prelude::*;
use nvfuser::{fusion, philox, Error};

// The mask is drawn in the shape of `x` (`x.size(0)`, `x.size(1)`): the inner persistent
// scheduler computes each element's random number where the row is loaded (the stream
// is keyed on the element's linear index), so the whole block epilogue is one kernel.
fusion! {
    /// `h = dropout(x, p) + residual`, `y = layer_norm(h) * w + b`.
    pub fn dropout_residual_layer_norm(
        x: Tensor<bf16, [N, H]>,
        residual: Tensor<bf16, [N, H]>,
        w: Tensor<bf16, [H]>,
        b: Tensor<bf16, [H]>,
        p: f32,
        scale: f32,
        seed: i64,
        offset: i64,
        eps: f32,
    ) -> (Tensor<bf16, [N, H]>, Tensor<bf16, [N, H]>) {
        let u = uniform([x.size(0), x.size(1)], 0.0, 1.0, seed, offset, f32);
        let dropped = where_(u >= p, (x as f32) * scale, 0.0f32);
        let h = dropped + (residual as f32);
        let (var, mean) = h.var_mean([1], correction = 0, keepdim = true);
        let y = (h - mean) * rsqrt(var + eps) * (w as f32) + (b as f32);
        (h as bf16, y as bf16)
    }
}

/// The plan an H100 gets for these shapes (planned here, with or without a GPU).
fn h100_plan(n: usize, hd: usize, scalars: &[ScalarValue]) -> Result<String, Error> {
    use nvfuser::scheduler::{DeviceInfo, GpuModel, InputInfo, RuntimeInfo};
    let (n, hd) = (n as i64, hd as i64);
    let mut info = RuntimeInfo::contiguous(
        DeviceInfo::preset(GpuModel::H100),
        &[
            (DataType::BF16, &[n, hd]),
            (DataType::BF16, &[n, hd]),
            (DataType::BF16, &[hd]),
            (DataType::BF16, &[hd]),
        ],
    );
    info.inputs
        .extend(scalars.iter().map(|&v| InputInfo::Scalar(v)));
    let exec = FusionExecutorCache::new(dropout_residual_layer_norm_fusion()?.clone());
    let plan = exec.plan_for(&info, None)?;
    let kernels: Vec<&str> = plan.segments.iter().map(|s| s.scheduler).collect();
    Ok(format!(
        "{} kernel(s): {}",
        kernels.len(),
        kernels.join(" + ")
    ))
}

fn main() -> Result<(), Error> {
    let device = common::device();
    let (n, hd) = common::pick(&device, (8192, 4096), (64, 1024));
    let (p, seed, offset, eps) = (0.1f32, 42i64, 0i64, 1e-5f32);
    let scale = 1.0 / (1.0 - p);
    let (x, xd) = common::random(&device, DataType::BF16, &[n, hd], 1)?;
    let (r, rd) = common::random(&device, DataType::BF16, &[n, hd], 2)?;
    let (w, wd) = common::random(&device, DataType::BF16, &[hd], 3)?;
    let (b, bd) = common::random(&device, DataType::BF16, &[hd], 4)?;
    println!("dropout(p = {p}) + residual + LayerNorm [{n}, {hd}] bf16 on {device}");
    let scalars = [
        p.into(),
        scale.into(),
        seed.into(),
        offset.into(),
        eps.into(),
    ];
    println!("  planned for an H100: {}", h100_plan(n, hd, &scalars)?);

    let (h, y) =
        dropout_residual_layer_norm(&device, &xd, &rd, &wd, &bd, p, scale, seed, offset, eps)?;

    // The reference: the same uniform stream (row-major element index i), then f64 math.
    let (xs, rs, ws, bs) = (
        x.to_f64_vec(),
        r.to_f64_vec(),
        w.to_f64_vec(),
        b.to_f64_vec(),
    );
    let scale = f64::from(scale);
    let mut want_h = Vec::with_capacity(n * hd);
    for (i, (xv, rv)) in xs.iter().zip(&rs).enumerate() {
        let u = philox::uniform_f32(seed as u64, offset as u64, i as u64, 0.0, 1.0);
        let kept = if u >= p { xv * scale } else { 0.0 };
        want_h.push(kept + rv);
    }
    let mut want_y = Vec::with_capacity(n * hd);
    for row in want_h.chunks(hd) {
        let mean = row.iter().sum::<f64>() / hd as f64;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / hd as f64;
        let rstd = 1.0 / (var + f64::from(eps)).sqrt();
        want_y.extend(
            row.iter()
                .zip(ws.iter().zip(&bs))
                .map(|(v, (w, b))| (v - mean) * rstd * w + b),
        );
    }
    let dropped = xs
        .iter()
        .enumerate()
        .filter(|&(i, _)| philox::uniform_f32(seed as u64, offset as u64, i as u64, 0.0, 1.0) < p)
        .count();
    println!(
        "  dropped {dropped} of {} elements ({:.2}%, p = {p})",
        xs.len(),
        100.0 * dropped as f64 / xs.len() as f64
    );
    let ok = common::check("h (residual stream)", &h, &want_h, common::BF16_TOL)?;
    let ok = common::check("y (normalized)", &y, &want_y, common::BF16_TOL)? && ok;

    let exec = FusionExecutorCache::new(dropout_residual_layer_norm_fusion()?.clone());
    let args = [
        (&xd).into(),
        (&rd).into(),
        (&wd).into(),
        (&bd).into(),
        p.into(),
        scale.into(),
        seed.into(),
        offset.into(),
        eps.into(),
    ];
    if device.is_gpu() {
        if let Err(e) = common::profile(&device, &exec, &args, 20) {
            println!("  (no profile of the fused version: {e})");
        }
    }
    println!("\nThe fusion:\n{}", exec.fusion());
    println!(
        "To see the scheduled IR, the CUDA source and the launch of every kernel:\n  \
         NVFUSER_DUMP=scheduled,cuda,launch cargo run --example dropout_residual_layernorm"
    );
    common::finish(ok)
}
