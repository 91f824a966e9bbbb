// Several outputs, an in-place output, a one-tuple return and a returned input.
#![deny(warnings)]

use nvfuser::fusion;
use nvfuser::prelude::*;

fusion! {
    fn accumulate(acc: Tensor<f32, [N, H]>, x: Tensor<f32, [N, H]>)
        -> (Tensor<f32, [N, H]>, Tensor<f32, [N]>, Tensor<f32, [N, H]>)
    {
        let y = acc + x;
        (inplace(y, acc), y.sum([1]), x)
    }

    fn one(x: Tensor<f32, [N]>) -> (Tensor<f32, [N]>,) {
        (x.exp(),)
    }
}

fn main() -> Result<(), nvfuser::Error> {
    let f = accumulate_fusion()?;
    assert_eq!(f.outputs()[0].alias_of, Some(f.inputs()[0]));
    let cpu = Device::cpu();
    let a = cpu.tensor_from_slice(&[1.0f32, 2.0], [1, 2])?;
    let b = cpu.tensor_from_slice(&[10.0f32, 20.0], [1, 2])?;
    let (y, s, x): (Tensor, Tensor, Tensor) = accumulate(&cpu, &a, &b)?;
    assert_eq!(y.to_vec::<f32>()?, vec![11.0, 22.0]);
    assert_eq!(s.to_vec::<f32>()?, vec![33.0]);
    assert_eq!(x.to_vec::<f32>()?, vec![10.0, 20.0]);
    let (e,): (Tensor,) = one(&cpu, &cpu.tensor_from_slice(&[0.0f32], [1])?)?;
    assert_eq!(e.to_vec::<f32>()?, vec![1.0]);
    Ok(())
}
