// The LayerNorm of DESIGN.md, with only the prelude imported.
#![deny(warnings)]

use nvfuser::prelude::*;

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
    let cpu = Device::cpu();
    let x = cpu.zeros(DataType::BF16, [2, 4])?;
    let w = cpu.zeros(DataType::BF16, [4])?;
    let b = cpu.zeros(DataType::BF16, [4])?;
    let y = layer_norm(&cpu, &x, &w, &b, 1e-5)?;
    assert_eq!(y.sizes(), &[2, 4]);
    Ok(())
}
