use nvfuser::fusion;

fusion! {
    fn row_sum(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N]> {
        x.sum([2])
    }
}

fn main() {}
