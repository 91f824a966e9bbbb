use nvfuser::fusion;

fusion! {
    fn scale(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        x = x * 2.0;
        x
    }
}

fn main() {}
