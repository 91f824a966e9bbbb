use nvfuser::fusion;

fusion! {
    fn repeat(x: Tensor<f32, [N]>) -> Tensor<f32, [N]> {
        for _ in 0..3 {
            let x = x * 2.0;
        }
        x
    }
}

fn main() {}
