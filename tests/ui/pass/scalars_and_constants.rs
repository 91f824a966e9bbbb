// Scalar parameters of every dtype, typed literals and special constants.
#![deny(warnings)]

use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    fn scalars(x: Tensor<f32, [N]>, a: f32, b: f64, c: i32, d: i64, e: bool, f: f16, g: bf16)
        -> Tensor<f32, [N]>
    {
        let y = x * a + (b as f32) + (c as f32) * (d as f32) + (f as f32) - (g as f32);
        let y = where_(e, y, f32::NAN) + 0.5f32 + 2f32 + 1e-5;
        let y = maximum(y, -f32::INFINITY) + (i64::MIN as f32) * 0.0 + (i32::MAX as f32) * 0.0;
        let c = -0.0;
        y * c + y * c + y
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let cpu = Device::cpu();
    let x = cpu.tensor_from_slice(&[1.0f32, 2.0], [2])?;
    let y = scalars(
        &cpu,
        &x,
        1.0,
        0.0,
        0,
        0,
        true,
        f16::from_f32(0.0),
        bf16::from_f32(0.0),
    )?;
    let v = y.to_vec::<f32>()?;
    assert!((v[0] - 3.50001).abs() < 1e-4, "{v:?}");
    let y = scalars(&cpu, &x, 1.0, 0.0, 0, 0, false, f16::ZERO, bf16::ZERO)?;
    assert!(y.to_vec::<f32>()?[0].is_nan());
    Ok(())
}
