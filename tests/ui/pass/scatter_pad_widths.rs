// scatter (of a tensor and of a value), scatter_add, and pad widths given by scalars.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn scatters(x: Tensor<f32, [N, 8]>, idx: Tensor<i64, [N, 4]>, src: Tensor<f32, [N, 4]>, a: i64)
        -> (Tensor<f32, [N, 8]>, Tensor<f32, [N, 8]>, Tensor<f32, [_, _]>)
    {
        let s = x.scatter(1, idx, src).scatter(1, idx, 0.5);
        let t = scatter_add(x * 2.0, 1, idx, src);
        let p = x.pad([(a, 1), (0, x.size(0) % 2)], 0.0);
        (s, t, p)
    }
}

fn main() {
    let f = scatters_fusion().expect("scatters");
    let text = f.to_string();
    assert!(text.contains("scatter_add(") && text.contains("scatter("), "{text}");
}
