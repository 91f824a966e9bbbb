//! GELU, exact (erf) and tanh-approximated, bf16 in and out, f32 math: one fusion with
//! two outputs, defined with `fusion!`.
//!
//! `cargo run --example gelu` (on a machine without a GPU it runs on the CPU reference
//! evaluator and says so). Checked against plain-Rust f64 formulas.

mod common;

use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    /// Both GELUs of `x`: one read of `x`, two outputs.
    pub fn gelu_both(x: Tensor<bf16, [N, H]>) -> (Tensor<bf16, [N, H]>, Tensor<bf16, [N, H]>) {
        let x = x as f32;
        (x.gelu() as bf16, x.gelu_tanh() as bf16)
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let device = common::device();
    let (n, h) = common::pick(&device, (16384, 8192), (64, 1024));
    let (x, xd) = common::random(&device, DataType::BF16, &[n, h], 1)?;

    let (exact, tanh) = gelu_both(&device, &xd)?;
    println!("gelu [{n}, {h}] bf16 on {device}");

    let xs = x.to_f64_vec();
    // erf from the CPU reference's own libm would not be independent; a 1.5e-7-accurate
    // rational approximation (Abramowitz and Stegun 7.1.26) is plenty for bf16 outputs.
    let erf = |v: f64| {
        let t = 1.0 / (1.0 + 0.327_591_1 * v.abs());
        let poly = t
            * (0.254_829_592
                + t * (-0.284_496_736
                    + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
        (1.0 - poly * (-v * v).exp()).copysign(v)
    };
    let want_exact: Vec<f64> = xs
        .iter()
        .map(|&v| 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2)))
        .collect();
    let k = (2.0 / std::f64::consts::PI).sqrt();
    let want_tanh: Vec<f64> = xs
        .iter()
        .map(|&v| 0.5 * v * (1.0 + (k * (v + 0.044_715 * v * v * v)).tanh()))
        .collect();
    let ok = common::check("gelu (erf)", &exact, &want_exact, common::BF16_TOL)?;
    let ok = common::check("gelu (tanh)", &tanh, &want_tanh, common::BF16_TOL)? && ok;

    let exec = FusionExecutorCache::new(gelu_both_fusion()?.clone());
    let args = [(&xd).into()];
    common::profile(&device, &exec, &args, 20)?;
    common::show(&device, &exec, &args, "gelu")?;
    common::finish(ok)
}
