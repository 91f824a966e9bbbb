use nvfuser::fusion;

fusion! {
    fn square_root(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        x.sqr()
    }
}

fn main() {}
