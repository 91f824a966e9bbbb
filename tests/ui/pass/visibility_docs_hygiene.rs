// Docs and visibility carry over (missing_docs is denied); parameters may use any name
// the generated code could have used (`device`, `relu_fusion`, `outputs`, `executor`); a leading `_`
// silences the unused-input warning; fusion! works inside a function body too.
#![deny(warnings, missing_docs)]
//! A crate with documented fusions.

/// The fusions.
pub mod ops {
    use nvfuser::fusion;

    fusion! {
        /// ReLU.
        pub fn relu(device: Tensor<f32, [N]>, relu_fusion: f32, _unused: Tensor<f32, [_]>) -> Tensor<f32, [N]> {
            (device * relu_fusion).relu()
        }

        /// Crate-visible.
        pub(crate) fn neg(outputs: Tensor<f32, [N]>, executor: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
            -outputs + executor
        }
    }
}

fn main() -> Result<(), nvfuser::Error> {
    use nvfuser::prelude::*;
    let cpu = Device::cpu();
    let x = cpu.tensor_from_slice(&[-1.0f32, 2.0], [2])?;
    let y = ops::relu(&cpu, &x, 2.0, &x)?;
    assert_eq!(y.to_vec::<f32>()?, vec![0.0, 4.0]);
    let z = ops::neg(&cpu, &x, &x)?;
    assert_eq!(z.to_vec::<f32>()?, vec![0.0, 0.0]);
    nvfuser::fusion! {
        fn local(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> { x + 1.0 }
    }
    assert_eq!(local(&cpu, &x)?.to_vec::<f32>()?, vec![0.0, 3.0]);
    assert!(std::ptr::eq(ops::relu_fusion()?, ops::relu_fusion()?));
    Ok(())
}
