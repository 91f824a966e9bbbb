use nvfuser::fusion;

fusion! {
    fn relu(x: Tensor<f23, [N]>) -> Tensor<f32, [N]> {
        x.relu()
    }
}

fn main() {}
