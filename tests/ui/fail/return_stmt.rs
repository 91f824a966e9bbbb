use nvfuser::fusion;

fusion! {
    fn identity(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        return x;
    }
}

fn main() {}
