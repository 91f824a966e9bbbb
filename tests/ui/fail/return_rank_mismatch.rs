use nvfuser::fusion;

fusion! {
    fn row_sum(x: Tensor<f32, [N, H]>) -> Tensor<f32, [N, H]> {
        x.sum([1])
    }
}

fn main() {}
