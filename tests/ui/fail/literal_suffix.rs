use nvfuser::fusion;

fusion! {
    fn add_one(x: Tensor<i32, [N]>) -> Tensor<i32, [N]> {
        x + 1u8
    }
}

fn main() {}
