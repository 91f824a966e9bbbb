// full, iota, uniform and normal.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn dropout(x: Tensor<f32, [N, H]>, p: f32, seed: i64, offset: i64)
        -> (Tensor<f32, [N, H]>, Tensor<i64, [16]>, Tensor<f16, [_, _]>, Tensor<f32, [2, 3]>)
    {
        let u = uniform([x.size(0), x.size(1)], 0.0, 1.0, seed, offset, f32);
        let y = where_(u >= p, x / (1.0 - p), 0.0f32);
        let i = iota(16, 0, 1, i64);
        let g = normal([4, x.size(1)], 0.0, 1.0, seed, offset, f16);
        let f = full([2, 3], p, f32);
        (y, i, g, f)
    }
}

fn main() {
    dropout_fusion().expect("dropout");
}
