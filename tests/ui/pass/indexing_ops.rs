// index_select, select, gather and take_along_axis.
#![deny(warnings)]

use nvfuser::fusion;

fusion! {
    fn gathers(x: Tensor<f32, [N, 8]>, rows: Tensor<i64, [R]>, idx: Tensor<i32, [N, 4]>, j: i64)
        -> (Tensor<f32, [R, 8]>, Tensor<f32, [N]>, Tensor<f32, [N, 4]>, Tensor<f32, [N, 4]>)
    {
        let a = x.index_select(0, rows);
        let b = x.select(1, j);
        let g = gather(x, 1, idx);
        let t = x.take_along_axis(idx, 1);
        (a, b, g, t)
    }
}

fn main() {
    gathers_fusion().expect("gathers");
}
