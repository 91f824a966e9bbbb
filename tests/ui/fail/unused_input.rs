// An unused input is a warning (a use of a deprecated item: the only warning a proc
// macro can raise on stable Rust); denied here to show its text.
#![deny(deprecated)]

use nvfuser::fusion;

fusion! {
    fn relu(x: Tensor<f32, [N]>, scale: f32) -> Tensor<f32, [N]> {
        x.relu()
    }
}

fn main() {}
