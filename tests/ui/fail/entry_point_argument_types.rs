use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    fn scale(x: Tensor<f32, [N]>, s: f32) -> Tensor<f32, [N]> {
        x * s
    }
}

// The entry point is typed: tensors by reference, scalars as the Rust type of their dtype.
fn main() -> Result<(), nvfuser::Error> {
    let cpu = Device::cpu();
    let x = cpu.tensor_from_slice(&[1.0f32, 2.0], [2])?;
    let _ = scale(&cpu, x, 2.0f64)?;
    Ok(())
}
