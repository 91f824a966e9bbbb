use nvfuser::fusion;

fusion! {
    fn add(x: Tensor<f32, [N]>, y: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        x + &y
    }
}

fn main() {}
