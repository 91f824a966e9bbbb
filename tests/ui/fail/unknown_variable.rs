use nvfuser::fusion;

fusion! {
    fn add_bias(x: Tensor<f32, [N, H]>, bias: Tensor<f32, [H]>) -> Tensor<f32, [N, H]> {
        x + bais
    }
}

fn main() {}
