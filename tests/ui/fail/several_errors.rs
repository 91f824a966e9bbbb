use nvfuser::fusion;

// Every error of a block is reported at once, each at its own tokens; a value that had
// an error is not reported again where it is used.
fusion! {
    fn norm(x: Tensor<f32, [N, H]>, w: Tensor<f32, [M]>, eps: f32) -> Tensor<bf16, [N, H]> {
        let m = x.mena([1]).unsqueeze(1);
        let y = x * w;
        let z = x.sum([3]);
        (x - m) * y * z + epss
    }

    fn other(x: Tensor<i64, [N]>) -> Tensor<i64, [N]> {
        x.exp(1)
    }
}

fn main() {}
