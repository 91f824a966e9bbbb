use nvfuser::fusion;

fusion! {
    fn average(x: Tensor<i32, [N, H]>) -> Tensor<f32, [N]> {
        x.mean([1])
    }
}

fn main() {}
