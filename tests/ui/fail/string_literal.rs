use nvfuser::fusion;

fusion! {
    fn to_half(x: Tensor<f32, [N]>) -> Tensor<f16, [N]> {
        x.cast("f16")
    }
}

fn main() {}
