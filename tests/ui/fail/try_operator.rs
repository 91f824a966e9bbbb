use nvfuser::fusion;

fusion! {
    fn exp(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        let y = x.exp()?;
        y
    }
}

fn main() {}
