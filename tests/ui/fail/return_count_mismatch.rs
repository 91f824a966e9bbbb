use nvfuser::fusion;

fusion! {
    fn stats(x: Tensor<f32, [N, H]>) -> (Tensor<f32, [N]>, Tensor<f32, [N]>) {
        x.mean([1])
    }
}

fn main() {}
