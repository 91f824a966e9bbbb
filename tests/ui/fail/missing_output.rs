use nvfuser::fusion;

fusion! {
    fn relu(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        let y = x.relu();
    }
}

fn main() {}
