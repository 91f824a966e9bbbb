use nvfuser::fusion;

fusion! {
    fn transpose(x: Tensor<f32, [N, H]>) -> Tensor<f32, [H, N]> {
        x.permute([1, 0, 2])
    }
}

fn main() {}
