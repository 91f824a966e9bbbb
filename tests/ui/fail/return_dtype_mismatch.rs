use nvfuser::fusion;

fusion! {
    fn upcast(x: Tensor<bf16, [N]>) -> Tensor<bf16, [N]> {
        x as f32
    }
}

fn main() {}
