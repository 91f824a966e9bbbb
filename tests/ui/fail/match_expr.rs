use nvfuser::fusion;

fusion! {
    fn pick(x: Tensor<f32, [N]>, flag: bool) -> Tensor<f32, [N]> {
        match flag {
            true => x,
            false => -x,
        }
    }
}

fn main() {}
