use nvfuser::fusion;

fusion! {
    fn relu(__nvf_x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        __nvf_x.relu()
    }
}

fn main() {}
