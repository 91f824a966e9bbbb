use nvfuser::fusion;

fusion! {
    fn accumulate(acc: Tensor<f32, [N]>, x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        let y = acc + x;
        inplace(y, y)
    }
}

fn main() {}
