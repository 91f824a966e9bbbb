// slice (all range forms), pad and cat.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn resize(x: Tensor<f32, [N, 16]>, y: Tensor<f32, [M, 16]>, k: i64)
        -> (Tensor<f32, [_, _]>, Tensor<f32, [_, _]>, Tensor<f32, [_, 16]>)
    {
        let a = x.slice([.., 2..10]);
        let b = x.slice([1.., ..k]).slice([(0, i64::MAX, 2), (1, 4, 1)]);
        let p = pad(x, [(1, 0), (2, 2)], 0.5);
        let c = cat([x, y, x * 2.0], 0);
        (a + b.sum([0, 1]), p, c)
    }
}

fn main() {
    resize_fusion().expect("resize");
}
