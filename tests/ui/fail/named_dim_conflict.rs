use nvfuser::fusion;

fusion! {
    fn add_bias(x: Tensor<f32, [N, H]>, b: Tensor<f32, [M]>) -> Tensor<f32, [N, H]> {
        x + b
    }
}

fn main() {}
