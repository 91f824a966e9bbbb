use nvfuser::fusion;

fusion! {
    fn to_bytes(x: Tensor<f32, [N]>) -> Tensor<i32, [N]> {
        let y = x as u8;
        y as i32
    }
}

fn main() {}
