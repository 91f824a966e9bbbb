use nvfuser::fusion;

fusion! {
    fn shift(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        x += 1.0;
        x
    }
}

fn main() {}
