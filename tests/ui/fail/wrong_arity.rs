use nvfuser::fusion;

fusion! {
    fn total(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N]> {
        x.sum()
    }
}

fn main() {}
