use nvfuser::fusion;

fusion! {
    fn relu(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        if x > 0.0 { x } else { 0.0 }
    }
}

fn main() {}
